#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tamer_store::{DbOptions, DeviceKind};

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

/// Runs jobs on a Db's user-level threads concurrently, and deterministic value bytes for
/// (key, version): the crash harness's own.
#[allow(unused_imports)]
pub use tamer_crash::power::{run_parallel, value_for};

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
