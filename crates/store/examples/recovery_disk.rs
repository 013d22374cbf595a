//! How long a store on the real disk takes to reopen after its writer is killed, by the
//! store's size: `cargo run --release -p tamer-store --example recovery_disk -- PATH GIB
//! [PUTS]`. A child process (this example again, with `--fill`) writes `GIB` GiB of 16 KiB
//! values in batches of 64 (`Durability::Commit`), then `PUTS` (default 10,000) single puts of
//! 8 bytes over seeded random keys of those, and aborts without closing (as a SIGKILL would:
//! every write was O_DIRECT and acknowledged durable). The parent reopens the store, times
//! `Db::open` whole (map, directory, queues) and its recovery, and checks the key count.
//! Recovery's progress is printed once it has taken a second. Removes `PATH` at the end unless
//! `--keep` is given (then `tamer recover PATH --cache-mib 256` reopens the same store).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_store::{Db, DbOptions, DeviceKind};

const VALUE_BYTES: usize = 16 << 10;
const BATCH: u64 = 64;

fn options() -> DbOptions {
    DbOptions::new(256 << 20)
        .device(DeviceKind::Uring)
        .cores(1)
        .max_value_bytes(VALUE_BYTES)
        .cleaner(false)
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:010}").into_bytes()
}

fn fill(path: &Path, keys: u64, puts: u64) {
    let db = Db::open(path, options()).unwrap();
    let value = vec![7u8; VALUE_BYTES];
    let start = Instant::now();
    for first in (0..keys).step_by(BATCH as usize) {
        let chunk: Vec<Vec<u8>> = (first..(first + BATCH).min(keys)).map(key).collect();
        let pairs: Vec<(&[u8], &[u8])> = chunk
            .iter()
            .map(|k| (k.as_slice(), value.as_slice()))
            .collect();
        db.put_many(&pairs).unwrap();
    }
    db.flush().unwrap();
    let fill_s = start.elapsed().as_secs_f64();
    let mut rng = SmallRng::seed_from_u64(7);
    let start = Instant::now();
    for i in 0..puts {
        db.put(&key(rng.gen_range(0..keys)), &i.to_le_bytes())
            .unwrap();
    }
    let staged = db.commit_stats();
    println!(
        "fill: {keys} keys in {fill_s:.1} s, then {puts} puts in {:.1} s ({} overflows); killing \
         the writer",
        start.elapsed().as_secs_f64(),
        staged.overflows
    );
    std::process::abort();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fill_mode = args.iter().any(|a| a == "--fill");
    let keep = args.iter().any(|a| a == "--keep");
    let args: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let path = Path::new(args.first().expect("usage: PATH GIB [PUTS]").as_str());
    let gib: f64 = args
        .get(1)
        .map_or(1.0, |a| a.parse().expect("GIB: a number"));
    let puts: u64 = args
        .get(2)
        .map_or(10_000, |a| a.parse().expect("PUTS: a number"));
    let keys = (gib * (1u64 << 30) as f64 / VALUE_BYTES as f64) as u64;
    if fill_mode {
        fill(path, keys, puts);
        return;
    }
    let _ = std::fs::remove_file(path);
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--fill",
            &path.to_string_lossy(),
            &gib.to_string(),
            &puts.to_string(),
        ])
        .status()
        .unwrap();
    assert!(!status.success(), "the writer should have been killed");
    let file_bytes = std::fs::metadata(path).unwrap().len();
    let start = Instant::now();
    let db = Db::open(
        path,
        options().on_recovery_progress(|p| {
            if p.elapsed.as_secs() >= 1 && (p.done == p.total || p.done % 4096 == 0) {
                println!(
                    "  {:?}: {} of {} ({:?})",
                    p.phase, p.done, p.total, p.elapsed
                );
            }
        }),
    )
    .unwrap();
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let r = db.recovery_stats();
    println!(
        "store of {:.2} GiB ({keys} keys): open {open_ms:.1} ms, of which recovery {:.1} ms: {} \
         of {} records redone, {} queue pages read",
        file_bytes as f64 / (1u64 << 30) as f64,
        r.ns as f64 / 1e6,
        r.records_redone,
        r.records_found,
        r.queue_pages_read
    );
    assert_eq!(db.len(), keys, "a key was lost");
    db.close().unwrap();
    if !keep {
        std::fs::remove_file(path).unwrap();
    }
}
