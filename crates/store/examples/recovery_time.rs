//! How long recovery from the staging queues takes: `n` single-key puts in `Commit` mode on
//! the fault-injecting emulator (50 µs reads and writes, 15 µs flush), the power cut, then a
//! reopen that redoes them. `cargo run --release -p tamer-store --example recovery_time --
//! [puts] [keys]`: `keys` keys of 100-byte values are written and checkpointed first, and the
//! puts overwrite seeded random ones of them (each redo then touches a random bucket and data
//! page, as after a real workload), so the store's size can be varied while the queues hold
//! the same number of records.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::{CrashPoint, EmulatorConfig, FaultPlan, FaultState};
use tamer_store::{Db, DbOptions, DeviceKind, Durability};

const LATENCY_NS: u64 = 50_000;
const FLUSH_NS: u64 = 15_000;

fn options(device: DeviceKind) -> DbOptions {
    DbOptions::new(16 << 20)
        .device(device)
        .cores(1)
        .threads_per_core(64)
        .cleaner(false)
        .durability(Durability::Commit)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: [puts] [keys]"))
        .collect();
    let puts = args.first().copied().unwrap_or(10_000);
    let keys = args.get(1).copied().unwrap_or(200_000).max(1);
    let store_mib = keys * 160 / (1 << 20) + 1;
    let emulator = || {
        EmulatorConfig::with_latency_ns(LATENCY_NS)
            .flush_latency_ns(FLUSH_NS)
            .capacity_bytes((store_mib + 256) << 20)
    };
    let state = FaultState::new(
        emulator().build().unwrap(),
        FaultPlan {
            crash: CrashPoint::Never,
            ..FaultPlan::default()
        },
    )
    .unwrap();
    let db = Db::open("unused", options(DeviceKind::Faulty(state.clone()))).unwrap();
    let value = vec![7u8; 100];
    for first in (0..keys).step_by(200) {
        let chunk: Vec<Vec<u8>> = (first..(first + 200).min(keys))
            .map(|i| format!("key-{i}").into_bytes())
            .collect();
        let pairs: Vec<(&[u8], &[u8])> = chunk
            .iter()
            .map(|k| (k.as_slice(), value.as_slice()))
            .collect();
        db.put_many(&pairs).unwrap();
    }
    db.flush().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let start = Instant::now();
    for i in 0..puts {
        let key = format!("key-{}", rng.gen_range(0..keys));
        db.put(key.as_bytes(), &i.to_le_bytes()).unwrap();
    }
    let put_s = start.elapsed().as_secs_f64();
    let staged = db.commit_stats();
    state.power_loss();
    let image = state
        .crash_model(emulator(), &state.seeded_fates(1))
        .unwrap();
    drop(db);
    let start = Instant::now();
    let db = Db::open("unused", options(DeviceKind::Model(image))).unwrap();
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let r = db.recovery_stats();
    println!(
        "store of {keys} keys + {puts} puts ({:.0}/s, {} staged, {} overflows): open {open_ms:.1} ms, \
         recovery {:.1} ms, {} of {} records redone, {} queue pages read",
        puts as f64 / put_s,
        staged.staged,
        staged.overflows,
        r.ns as f64 / 1e6,
        r.records_redone,
        r.records_found,
        r.queue_pages_read
    );
    assert_eq!(db.len(), keys, "a key was lost");
    db.close().unwrap();
}
