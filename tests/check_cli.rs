//! `tamer check PATH` and `tamer recover PATH` as a user runs them: the real binary on a real
//! store file.

// Test code: a scenario reads best whole, so the function length limit does not apply.
#![allow(clippy::too_many_lines)]

use std::path::PathBuf;
use std::process::Command;

use tamer_store::{Db, DbOptions, DeviceKind};

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn tamer_check(path: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("check")
        .arg(path)
        .args(["--cache-mib", "4"])
        .output()
        .expect("running tamer check");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Exit status 0 and "ok" on a sound store; 1 and the damaged page on a damaged one; 2 on a
/// file that is no store. Catches a check command that always succeeds.
#[test]
fn tamer_check_reports_a_sound_and_a_damaged_store() {
    let path = std::env::temp_dir().join(format!("tamer-check-cli-{}", std::process::id()));
    let _cleanup = TempFile(path.clone());
    let db = Db::open(
        &path,
        DbOptions::new(4 << 20)
            .device(DeviceKind::Sync)
            .cores(1)
            .max_directory_depth(8)
            .initial_file_bytes(1 << 20),
    )
    .unwrap();
    for k in 0..300u32 {
        db.put(&k.to_be_bytes(), &[k as u8; 200]).unwrap();
    }
    db.close().unwrap();
    let (code, text) = tamer_check(&path);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("300 keys") && text.contains("ok: no problems"),
        "{text}"
    );

    // Flip a value byte of the first record of the first data page: superblocks (2), the two
    // copies of the directory at depth 8 (1 page each), the map copies (2), the first
    // bucket's two copies (2), the staging queue of the one core (QUEUE_PAGES_MAX pages).
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let at = (8 + tamer_store::QUEUE_PAGES_MAX) * 4096 + 40;
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, at).unwrap();
        byte[0] ^= 1;
        file.write_all_at(&byte, at).unwrap();
    }
    let (code, text) = tamer_check(&path);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "page {}: record checksum mismatch",
            8 + tamer_store::QUEUE_PAGES_MAX
        )) && text.contains("DAMAGED"),
        "{text}"
    );

    std::fs::write(&path, vec![7u8; 8192]).unwrap();
    let (code, text) = tamer_check(&path);
    assert_eq!(code, 2, "{text}");
}

/// `tamer check A B` on a store striped over two files: "ok" with both in order; the files
/// swapped fail to open (exit 2, naming a page). Catches a check command that ignores every
/// path but the first.
#[test]
fn tamer_check_takes_a_striped_stores_files_in_order() {
    let base = std::env::temp_dir().join(format!("tamer-check-stripe-{}", std::process::id()));
    let paths = [base.with_extension("0"), base.with_extension("1")];
    let _cleanup = [TempFile(paths[0].clone()), TempFile(paths[1].clone())];
    let parts = |order: [usize; 2]| {
        order
            .iter()
            .map(|&i| tamer_store::StripePart {
                path: paths[i].clone(),
                device: DeviceKind::Sync,
            })
            .collect::<Vec<_>>()
    };
    let db = Db::open(
        "unused",
        DbOptions::new(4 << 20)
            .device(DeviceKind::Striped {
                parts: parts([0, 1]),
                unit_blocks: tamer_device::STRIPE_UNIT_BLOCKS,
            })
            .cores(1)
            .max_directory_depth(8)
            .initial_file_bytes(1 << 20),
    )
    .unwrap();
    for k in 0..300u32 {
        db.put(&k.to_be_bytes(), &[k as u8; 2000]).unwrap();
    }
    db.close().unwrap();
    let run = |order: [usize; 2]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
            .arg("check")
            .args(order.map(|i| &paths[i]))
            .args(["--cache-mib", "4"])
            .output()
            .expect("running tamer check");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    };
    let (code, text) = run([0, 1]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("300 keys") && text.contains("ok: no problems"),
        "{text}"
    );
    let (code, text) = run([1, 0]);
    assert_eq!(code, 2, "{text}");
}

/// `tamer recover` on a store whose writer was killed with SIGKILL: exit 0, the keys of the
/// acknowledged operations (or one more, in flight), closed cleanly (a second run redoes
/// nothing) and `tamer check` clean. Catches: a recover that opens without redoing the queues
/// (keys missing), one that does not close cleanly, one that reports success on an error.
#[test]
fn tamer_recover_recovers_a_killed_writers_store() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let path = std::env::temp_dir().join(format!("tamer-recover-cli-{}", std::process::id()));
    let _cleanup = TempFile(path.clone());
    let seed = 4;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("crash-worker")
        .arg(&path)
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the worker");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut durable = 0;
    while durable < 150 {
        let line = lines.next().expect("the worker died early").unwrap();
        durable = line.strip_prefix("durable ").unwrap().parse().unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for line in lines.map_while(Result::ok) {
        durable = line.strip_prefix("durable ").unwrap().parse().unwrap();
    }
    let recover = || {
        let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
            .arg("recover")
            .arg(&path)
            .args(["--cache-mib", "8"])
            .output()
            .expect("running tamer recover");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}");
        text
    };
    let text = recover();
    let keys_after = |n: usize| {
        let mut model = std::collections::HashMap::new();
        tamer_crash::ops(seed)
            .take(n)
            .for_each(|op| tamer_crash::apply(&mut model, &op));
        model.len()
    };
    let allowed = [keys_after(durable), keys_after(durable + 1)];
    assert!(
        allowed
            .iter()
            .any(|k| text.contains(&format!("; {k} keys"))),
        "after {durable} acknowledged ops, expected {allowed:?} keys: {text}"
    );
    let again = recover();
    assert!(again.contains("redid 0 of 0 commit records"), "{again}");
    assert!(!again.contains("not closed cleanly"), "{again}");
    let (code, text) = tamer_check(&path);
    assert_eq!(code, 0, "{text}");
    // The contents, not only the count: the acknowledged ops, or one more.
    let db = Db::open(&path, tamer_crash::options(&path, seed)).unwrap();
    let got: std::collections::HashMap<Vec<u8>, Vec<u8>> =
        db.cursor().map(|item| item.unwrap()).collect();
    db.close().unwrap();
    let model_after = |n: usize| {
        let mut model = std::collections::HashMap::new();
        tamer_crash::ops(seed)
            .take(n)
            .for_each(|op| tamer_crash::apply(&mut model, &op));
        model
    };
    assert!(
        got == model_after(durable) || got == model_after(durable + 1),
        "the store is no state after {durable} (or {}) acknowledged ops",
        durable + 1
    );
}

/// `tamer recover` on a file that holds no store refuses it (exit 2) and leaves it as it was,
/// rather than making a new store there. Catches a recover that opens read-write at once.
#[test]
fn tamer_recover_refuses_a_file_that_is_no_store() {
    let path = std::env::temp_dir().join(format!("tamer-recover-none-{}", std::process::id()));
    let _cleanup = TempFile(path.clone());
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("recover")
        .arg(&path)
        .output()
        .expect("running tamer recover");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("no tamer store"), "{text}");
    let after = std::fs::read(&path).unwrap();
    assert!(
        after.len() == 1 << 20 && after.iter().all(|&b| b == 0),
        "the file changed"
    );
}
