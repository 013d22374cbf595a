//! The process crash test (issue 9): the real `tamer` binary runs a seeded workload on a store
//! file on the real disk (io_uring, O_DIRECT) and is killed with SIGKILL at a seeded instant;
//! the store reopened in this process must be the state after some operation at or after the
//! last flush the worker saw return, with `check` clean. `CRASH_KILLS` sets the count (CI: 20).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tamer_bench::crash::{apply, ops, options};
use tamer_store::Db;

struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One kill: returns (the last durable op count the worker printed, the op the store came
/// back at).
fn kill_once(seed: u64) -> (usize, usize) {
    let path = std::env::temp_dir().join(format!("tamer-crash-{}-{seed}", std::process::id()));
    let _cleanup = TempFile(path.clone());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("crash-worker")
        .arg(&path)
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the worker");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("durable ") {
                let _ = tx.send(n.parse::<usize>().expect("a count"));
            }
        }
    });
    // Killed after a seeded number of acknowledged operations (1..=281) or 5 s, whichever
    // comes first, plus a seeded few milliseconds: the kill lands anywhere in an operation.
    let wanted = 1 + (seed % 8) as usize * 40;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut durable = 0;
    let mut seen = 0;
    while seen < wanted && Instant::now() < deadline {
        if let Ok(n) = rx.recv_timeout(Duration::from_millis(50)) {
            durable = n;
            seen += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(seed * 7 % 40));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    reader.join().expect("reader");
    // Lines printed after our last read are durable too.
    while let Ok(n) = rx.try_recv() {
        durable = n;
    }
    let db = Db::open(&path, options().cleaner(false))
        .unwrap_or_else(|err| panic!("seed {seed}: reopening after SIGKILL: {err}"));
    let report = db.check().unwrap();
    assert!(report.is_clean(), "seed {seed}: {report:#?}");
    let got: HashMap<Vec<u8>, Vec<u8>> = db.cursor().map(|item| item.unwrap()).collect();
    db.close().unwrap();
    let mut expected = HashMap::new();
    for (done, op) in ops(seed).enumerate() {
        if done >= durable && got == expected {
            // Every operation that returned is durable; at most the one in flight more.
            assert!(
                done <= durable + 1,
                "seed {seed}: back at op {done}, past the {durable} acknowledged and the one \
                 in flight"
            );
            return (durable, done);
        }
        assert!(
            done < durable + 100_000,
            "seed {seed}: the store is no state at or after op {durable} ({} keys)",
            got.len()
        );
        apply(&mut expected, &op);
    }
    unreachable!("the workload is endless")
}

/// Catches everything the fault-device crash tests catch, on the real path: io_uring on a
/// file, a real process, the kernel's own ordering of writes.
#[test]
fn sigkill_at_random_instants_reopens_at_a_checkpoint() {
    let kills: u64 = std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let mut at_flush = 0;
    for seed in 0..kills {
        let (durable, back_at) = kill_once(seed);
        if back_at == durable {
            at_flush += 1;
        }
    }
    eprintln!(
        "{kills} SIGKILLs: {at_flush} came back at the last acknowledged op, the others one later"
    );
}
