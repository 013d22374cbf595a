//! What the directory's segments cost a lookup: the same keys in two stores, one whose whole
//! directory is in the pinned fixed region (`pinned_directory_depth(20)`) and one whose
//! directory past 2^4 slots lives in segments cached as index pages
//! (`pinned_directory_depth(4)`), both with the whole store in DRAM, so that the figure is
//! the CPU cost of the directory step. Reads run in interleaved rounds (which store goes
//! first alternates); the figure is the median of the per-round ratios of segment-directory
//! reads/s to pinned-directory reads/s.
//!
//! `cargo run --release -p tamer-store --example directory_segments -- [keys] [rounds]
//! [reads per round]` (defaults 2,000,000, 5, 400,000). Seeded (seed 42).

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_store::{Db, DbOptions, DeviceKind};

const SEED: u64 = 42;
const VALUE_BYTES: usize = 16;

fn open(pinned_depth: u32, keys: u64) -> Db {
    let store_bytes = keys * 64 + (256 << 20);
    let options = DbOptions::new(store_bytes.next_power_of_two())
        .device(DeviceKind::Emulated {
            latency_ns: 10_000,
            capacity_bytes: store_bytes.next_power_of_two() * 2,
        })
        .cores(1)
        .cleaner(false)
        .pinned_directory_depth(pinned_depth);
    Db::open("unused", options).expect("open")
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// Loads `keys` keys in batches of 500; returns the seconds it took.
fn load(db: &Db, keys: u64) -> f64 {
    let start = Instant::now();
    let value = [7u8; VALUE_BYTES];
    for first in (0..keys).step_by(500) {
        let chunk: Vec<[u8; 8]> = (first..(first + 500).min(keys)).map(key).collect();
        let pairs: Vec<(&[u8], &[u8])> = chunk.iter().map(|k| (&k[..], &value[..])).collect();
        db.put_many(&pairs).expect("put_many");
    }
    db.flush().expect("flush");
    start.elapsed().as_secs_f64()
}

/// `reads` seeded random reads in one job on the store's runtime; returns reads/s.
fn read_rate(db: &Db, keys: u64, reads: u64, seed: u64) -> f64 {
    let start = Instant::now();
    let found = db
        .run(move |h| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..reads)
                .filter(|_| h.get(&key(rng.gen_range(0..keys))).expect("get").is_some())
                .count() as u64
        })
        .expect("run");
    assert_eq!(found, reads, "every key is stored");
    reads as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: [keys] [rounds] [reads]"))
        .collect();
    let keys = args.first().copied().unwrap_or(2_000_000).max(1);
    let rounds = args.get(1).copied().unwrap_or(5).max(1);
    let reads = args.get(2).copied().unwrap_or(400_000).max(1);
    let pinned = open(20, keys);
    let segmented = open(4, keys);
    let load_pinned_s = load(&pinned, keys);
    let load_segmented_s = load(&segmented, keys);
    let report = segmented.check().expect("check");
    assert!(report.is_clean(), "{report:?}");
    println!(
        "{keys} keys: buckets {}, directory segment pages {} (both copies); load {:.1} s \
         pinned, {:.1} s segmented",
        report.buckets, report.directory_pages, load_pinned_s, load_segmented_s
    );
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let seed = SEED + round;
        let (p, s) = if round % 2 == 0 {
            let p = read_rate(&pinned, keys, reads, seed);
            (p, read_rate(&segmented, keys, reads, seed))
        } else {
            let s = read_rate(&segmented, keys, reads, seed);
            (read_rate(&pinned, keys, reads, seed), s)
        };
        println!(
            "round {round}: pinned {p:.0} reads/s, segmented {s:.0} reads/s, ratio {:.3}",
            s / p
        );
        ratios.push(s / p);
    }
    println!(
        "segmented_vs_pinned_reads {:.3} (median of {rounds} interleaved rounds)",
        median(ratios)
    );
    pinned.close().expect("close");
    segmented.close().expect("close");
}
