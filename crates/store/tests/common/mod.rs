#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tamer_store::{Db, DbHandle, DbOptions, DeviceKind};

pub fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "tamer-store-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    path
}

pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The index hash key of test stores: reproducible bucket layouts (a test that needs the
/// default, random key clears `DbOptions::hash_key`).
pub const TEST_HASH_KEY: [u64; 2] = [0x7a3e_0009, 0x5eed_0003];

pub fn emulated(cache_bytes: u64, capacity_bytes: u64) -> DbOptions {
    DbOptions::new(cache_bytes)
        .device(DeviceKind::Emulated {
            latency_ns: 2_000,
            capacity_bytes,
        })
        .cores(2)
        .threads_per_core(16)
        .max_directory_depth(12)
        .hash_key(TEST_HASH_KEY)
}

pub fn uring(cache_bytes: u64) -> DbOptions {
    DbOptions::new(cache_bytes)
        .device(DeviceKind::Uring)
        .cores(2)
        .threads_per_core(16)
        .max_directory_depth(12)
        .initial_file_bytes(1 << 20)
}

/// Runs `jobs` closures on the Db's user-level threads concurrently and returns their results
/// in order.
pub fn run_parallel<R: Send + 'static>(
    db: &Db,
    jobs: Vec<Box<dyn FnOnce(DbHandle) -> R + Send>>,
) -> Vec<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    let n = jobs.len();
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        let h = db.handle();
        db.runtime()
            .spawn(move || {
                let _ = tx.send((i, job(h)));
            })
            .unwrap_or_else(|_| panic!("spawn"));
    }
    // Only the jobs hold senders: a job that panics drops its own, so once the others are
    // done `recv` fails (the test fails) instead of waiting forever.
    drop(tx);
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (i, r) = rx.recv().expect("a job died (panicked: see above)");
        out[i] = Some(r);
    }
    out.into_iter().map(|r| r.expect("every job")).collect()
}

/// Deterministic value bytes for (key, version).
pub fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut x = version.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.len() as u64;
    for &b in key {
        x = (x ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> (i % 8)) as u8
        })
        .collect()
}

/// Prints a test's seed if the test panics while this guard is alive.
pub struct SeedGuardLite {
    test: &'static str,
    seed: u64,
}

impl SeedGuardLite {
    pub fn new(test: &'static str, seed: u64) -> Self {
        Self { test, seed }
    }
}

impl Drop for SeedGuardLite {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{} failed with seed {}", self.test, self.seed);
        }
    }
}
