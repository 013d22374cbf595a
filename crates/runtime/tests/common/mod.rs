//! Helpers shared by the integration-test binaries of `tamer-runtime`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tamer_device::{
    Arena, Completion, Device, DeviceError, DeviceStats, EmulatedDevice, EmulatorConfig, IoRequest,
    BLOCK_SIZE,
};
use tamer_runtime::{CoreStats, Executor, RuntimeConfig};

/// The counters of `stats` without the latency histogram (whose `Debug` is enormous).
pub fn summary(stats: &CoreStats) -> String {
    format!(
        "started {} completed {} panicked {} switches {} parks {} yields {} forced {} stalls {} \
         device_waits {} max_pending_seen {}",
        stats.jobs_started,
        stats.jobs_completed,
        stats.jobs_panicked,
        stats.switches,
        stats.parks,
        stats.yields,
        stats.forced_progress,
        stats.in_flight_stalls,
        stats.device_waits,
        stats.max_pending_seen
    )
}

/// A fresh directory under `std::env::temp_dir()` named after the process and the test, removed
/// (with everything in it) when dropped.
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("tamer-runtime-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|err| panic!("creating {}: {err}", path.display()));
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Prints the seed of a test if the test panics while this guard is alive.
pub struct SeedGuard {
    test: &'static str,
    seed: u64,
}

impl SeedGuard {
    pub fn new(test: &'static str, seed: u64) -> Self {
        eprintln!("{test}: seed {seed:#x}");
        Self { test, seed }
    }
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{} failed with seed {:#x}", self.test, self.seed);
        }
    }
}

/// SplitMix64: a tiny seeded generator, so every random choice of a test is reproducible.
#[derive(Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (bound > 0; the modulo bias is irrelevant for tests).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// 64-bit FNV-1a.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Layout of a self-checking block: `[owner: u64][round: u64][checksum: u64][payload...]`, where
/// the checksum is the FNV-1a of everything but itself.
pub const HEADER_BYTES: usize = 24;

/// Fills `block` with a payload drawn from `seed`, stamped with `owner` and `round`.
pub fn fill_block(block: &mut [u8], seed: u64, owner: u64, round: u64) {
    assert_eq!(block.len(), BLOCK_SIZE);
    SplitMix::new(seed ^ owner.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ round)
        .fill(&mut block[HEADER_BYTES..]);
    block[0..8].copy_from_slice(&owner.to_le_bytes());
    block[8..16].copy_from_slice(&round.to_le_bytes());
    let checksum = block_checksum(block);
    block[16..24].copy_from_slice(&checksum.to_le_bytes());
}

fn block_checksum(block: &[u8]) -> u64 {
    let mut hash = fnv1a(&block[0..16]);
    for &byte in &block[HEADER_BYTES..] {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Checks a block written by [`fill_block`]; returns its (owner, round) or what is wrong.
pub fn check_block(block: &[u8]) -> Result<(u64, u64), String> {
    let word = |i: usize| u64::from_le_bytes(block[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let (owner, round, stored) = (word(0), word(1), word(2));
    let actual = block_checksum(block);
    if actual != stored {
        return Err(format!(
            "checksum mismatch: stored {stored:#x}, computed {actual:#x} (owner {owner}, round {round})"
        ));
    }
    Ok((owner, round))
}

/// The order in which jobs reached their checkpoints.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, event: impl Into<String>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.into());
    }

    pub fn events(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Position of `event`; panics (showing the whole log) when absent.
    pub fn position(&self, event: &str) -> usize {
        let events = self.events();
        events
            .iter()
            .position(|e| e == event)
            .unwrap_or_else(|| panic!("event {event:?} missing from {events:?}"))
    }
}

/// Observes a device from outside the runtime: how many requests it holds at most, how many
/// pushes it accepted and how many completions it handed out.
#[derive(Default)]
pub struct Tracker {
    pub max_in_flight: AtomicUsize,
    pub pushes: AtomicUsize,
    pub completions: AtomicUsize,
}

impl Tracker {
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

/// A [`Device`] that forwards to another one and records into a [`Tracker`].
pub struct TrackingDevice {
    inner: Box<dyn Device>,
    tracker: Arc<Tracker>,
}

impl TrackingDevice {
    pub fn new(inner: Box<dyn Device>, tracker: Arc<Tracker>) -> Self {
        Self { inner, tracker }
    }
}

impl Device for TrackingDevice {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        self.inner.push(request)?;
        self.tracker.pushes.fetch_add(1, Ordering::SeqCst);
        self.tracker
            .max_in_flight
            .fetch_max(self.inner.in_flight(), Ordering::SeqCst);
        Ok(())
    }
    fn submit(&mut self) -> Result<usize, DeviceError> {
        self.inner.submit()
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let reaped = self.inner.poll(out);
        self.tracker.completions.fetch_add(reaped, Ordering::SeqCst);
        reaped
    }
    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        let reaped = self.inner.wait(timeout, out)?;
        self.tracker.completions.fetch_add(reaped, Ordering::SeqCst);
        Ok(reaped)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }
    fn stats(&self) -> &DeviceStats {
        self.inner.stats()
    }
    fn doorbell_is_cheap(&self) -> bool {
        self.inner.doorbell_is_cheap()
    }
}

/// An executor over a fresh emulated device of `latency_ns` and `capacity_blocks` blocks, its
/// arena of `frames` frames, and a tracker of the device.
pub fn emulated_executor(
    config: RuntimeConfig,
    latency_ns: u64,
    capacity_blocks: u64,
    frames: u32,
) -> (Executor, Arc<Arena>, Arc<Tracker>) {
    let arena = Arc::new(Arena::new(frames).expect("arena"));
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .capacity_bytes(capacity_blocks * BLOCK_SIZE as u64)
        .build()
        .expect("emulator model");
    let tracker = Arc::new(Tracker::default());
    let device = TrackingDevice::new(
        Box::new(EmulatedDevice::new(model, arena.clone())),
        tracker.clone(),
    );
    let executor =
        Executor::new(0, config, Box::new(device), arena.clone()).expect("executor starts");
    (executor, arena, tracker)
}

/// Spins (without parking the OS thread) until `done()` or `limit` passes; false on timeout.
pub fn spin_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}
