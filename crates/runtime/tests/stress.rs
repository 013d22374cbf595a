//! Ten thousand user-level threads on one core, each writing a self-checking block to its own
//! offset, reading it back into another frame and verifying it, then reading other threads'
//! blocks at seeded random offsets: on the emulated device, on io_uring over an `O_DIRECT` file,
//! and on a two-core runtime fed through the shared queue.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{
    check_block, fill_block, summary, SeedGuard, SplitMix, TestDir, Tracker, TrackingDevice,
};
use tamer_device::{
    uring_available, Arena, Device, DeviceFile, DeviceSpec, EmulatedDevice, EmulatorConfig,
    IoRequest, UringConfig, UringDevice, BLOCK_SIZE,
};
use tamer_runtime::{io, Executor, Job, Runtime, RuntimeConfig, SpawnError};

const BLOCK: u64 = BLOCK_SIZE as u64;
const THREADS: usize = 10_000;
const STACK_BYTES: usize = 32 * 1024;
/// Random reads per job in the second phase.
const READS: u32 = 3;

/// Each stress test maps 10,000 stacks (two mappings each): run them one at a time, so that the
/// process stays far from `vm.max_map_count` and the tests do not fight over two CPUs.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the jobs of one test found.
#[derive(Default)]
struct Outcome {
    verified: AtomicUsize,
    failures: Mutex<Vec<String>>,
    done: AtomicUsize,
}

impl Outcome {
    fn fail(&self, what: String) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() < 20 {
            failures.push(what);
        }
    }

    fn assert_clean(&self, what: &str, verified: usize) {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            failures.is_empty(),
            "{what}: {} failures, first: {failures:#?}",
            failures.len()
        );
        assert_eq!(
            self.verified.load(Ordering::SeqCst),
            verified,
            "{what}: blocks verified"
        );
    }
}

/// Phase 1 of thread `owner` (frames `2 * owner` and `2 * owner + 1`): write a block, read it
/// back into the other frame, verify it.
fn write_and_verify(arena: &Arena, seed: u64, owner: u64, outcome: &Outcome) {
    let (source, copy) = (2 * owner as u32, 2 * owner as u32 + 1);
    {
        // SAFETY: thread `owner` alone uses frames 2·owner and 2·owner+1, and neither is part of
        // an I/O now; the slice is dropped before the write starts.
        let block = unsafe { arena.frame_mut(source) };
        fill_block(block, seed, owner, 0);
    }
    if let Err(err) = io::write(owner * BLOCK, source, 1) {
        return outcome.fail(format!("thread {owner}: write: {err}"));
    }
    {
        // SAFETY: as above; scribble over the copy frame so a read that moved nothing shows.
        unsafe { arena.frame_mut(copy) }.fill(0xa5);
    }
    if let Err(err) = io::read(owner * BLOCK, copy, 1) {
        return outcome.fail(format!("thread {owner}: read back: {err}"));
    }
    // SAFETY: this thread's frames, no I/O in flight on them, no mutable reference alive.
    let (written, read) = unsafe { (arena.frame(source), arena.frame(copy)) };
    match check_block(read) {
        Ok((o, 0)) if o == owner && read == written => {
            outcome.verified.fetch_add(1, Ordering::SeqCst);
        }
        Ok(found) => outcome.fail(format!(
            "thread {owner}: read back (owner, round) {found:?}"
        )),
        Err(err) => outcome.fail(format!("thread {owner}: read back: {err}")),
    }
}

/// Phase 2 of thread `owner`: `READS` reads of random other threads' blocks (two at a time),
/// each verified against its checksum and its regenerated contents.
fn read_others(arena: &Arena, seed: u64, owner: u64, threads: u64, outcome: &Outcome) {
    let mut rng = SplitMix::new(seed ^ 0x0bad_cafe ^ owner.wrapping_mul(0x9e37_79b9));
    let frames = [2 * owner as u32, 2 * owner as u32 + 1];
    let mut expected = vec![0u8; BLOCK_SIZE];
    let mut left = READS;
    while left > 0 {
        let batch = left.min(2);
        let mut targets = Vec::with_capacity(2);
        let mut tickets = Vec::with_capacity(2);
        for &frame in &frames[..batch as usize] {
            let target = (owner + 1 + rng.below(threads - 1)) % threads;
            match io::submit(IoRequest::read(target * BLOCK, frame, 1, 0)) {
                Ok(ticket) => {
                    targets.push((target, frame));
                    tickets.push(ticket);
                }
                Err(err) => outcome.fail(format!("thread {owner}: submit read of {target}: {err}")),
            }
        }
        if let Err(err) = io::wait_all(&tickets) {
            outcome.fail(format!("thread {owner}: random read: {err}"));
        }
        for (target, frame) in targets {
            // SAFETY: this thread's frame, its read completed, no other reference to it.
            let read = unsafe { arena.frame(frame) };
            fill_block(&mut expected, seed, target, 0);
            match check_block(read) {
                Ok((o, 0)) if o == target && read == &expected[..] => {
                    outcome.verified.fetch_add(1, Ordering::SeqCst);
                }
                Ok(found) => outcome.fail(format!(
                    "thread {owner}: block {target} holds (owner, round) {found:?}"
                )),
                Err(err) => outcome.fail(format!("thread {owner}: block {target}: {err}")),
            }
        }
        left -= batch;
    }
}

fn stress_config() -> RuntimeConfig {
    RuntimeConfig {
        threads_per_core: THREADS,
        stack_bytes: STACK_BYTES,
        max_pending: THREADS,
        local_queue: THREADS,
        ..RuntimeConfig::default()
    }
}

/// Both phases on one executor over `device`.
fn run_on_executor(test: &'static str, seed: u64, device: Box<dyn Device>, arena: Arc<Arena>) {
    let mut executor = Executor::new(0, stress_config(), device, arena.clone()).unwrap();
    let outcome = Arc::new(Outcome::default());
    let start = Instant::now();
    for owner in 0..THREADS as u64 {
        let (arena, outcome) = (arena.clone(), outcome.clone());
        executor
            .spawn(move || write_and_verify(&arena, seed, owner, &outcome))
            .unwrap_or_else(|_| panic!("local queue full at job {owner}"));
    }
    executor.run_until_idle();
    outcome.assert_clean(&format!("{test}: write phase"), THREADS);
    let written = start.elapsed();
    let stats = executor.stats();
    assert_eq!(
        (stats.jobs_completed, stats.jobs_panicked),
        (THREADS as u64, 0),
        "{}",
        summary(&stats)
    );
    assert!(
        stats.parks > 0,
        "threads parked on their accesses: {}",
        summary(&stats)
    );

    for owner in 0..THREADS as u64 {
        let (arena, outcome) = (arena.clone(), outcome.clone());
        executor
            .spawn(move || read_others(&arena, seed, owner, THREADS as u64, &outcome))
            .unwrap_or_else(|_| panic!("local queue full at job {owner}"));
    }
    executor.run_until_idle();
    outcome.assert_clean(
        &format!("{test}: read phase"),
        THREADS * (1 + READS as usize),
    );
    let stats = executor.stats();
    assert_eq!(
        (stats.jobs_completed, stats.jobs_panicked),
        (2 * THREADS as u64, 0),
        "{}",
        summary(&stats)
    );
    let device = executor.device_stats();
    assert_eq!(
        device.submitted,
        (THREADS * (2 + READS as usize)) as u64,
        "{device:?}"
    );
    eprintln!(
        "{test}: {THREADS} threads, write phase {written:?}, total {:?}: {}",
        start.elapsed(),
        summary(&stats)
    );
}

#[test]
fn ten_thousand_threads_on_the_emulated_device() {
    let _serial = one_at_a_time();
    let seed = 0x5eed_0001;
    let _guard = SeedGuard::new("ten_thousand_threads_on_the_emulated_device", seed);
    let arena = Arc::new(Arena::new(2 * THREADS as u32).unwrap());
    let model = EmulatorConfig::with_latency_ns(10_000)
        .jitter_ns(5_000)
        .seed(seed)
        .capacity_bytes(THREADS as u64 * BLOCK)
        .build()
        .unwrap();
    let tracker = Arc::new(Tracker::default());
    let device = TrackingDevice::new(
        Box::new(EmulatedDevice::new(model, arena.clone())),
        tracker.clone(),
    );
    run_on_executor("emulated", seed, Box::new(device), arena);
    // Aging bounds the overlap (a pending thread older than the ~10 µs average resumes before new
    // threads start), but accesses must overlap.
    assert!(
        tracker.max_in_flight() > 4,
        "overlap: {}",
        tracker.max_in_flight()
    );
}

#[test]
fn ten_thousand_threads_on_io_uring() {
    let _serial = one_at_a_time();
    if let Err(err) = uring_available() {
        eprintln!("ten_thousand_threads_on_io_uring: skipped, io_uring unavailable: {err}");
        return;
    }
    let seed = 0x5eed_0002;
    let _guard = SeedGuard::new("ten_thousand_threads_on_io_uring", seed);
    let dir = TestDir::new("ten_thousand_threads_on_io_uring");
    let path = dir.path().join("device");
    let file = Arc::new(DeviceFile::open(&path, THREADS as u64 * BLOCK).unwrap());
    let arena = Arc::new(Arena::new(2 * THREADS as u32).unwrap());
    let tracker = Arc::new(Tracker::default());
    let uring = UringDevice::open(file, arena.clone(), UringConfig { entries: 256 }).unwrap();
    let device = TrackingDevice::new(Box::new(uring), tracker.clone());
    run_on_executor("uring", seed, Box::new(device), arena);
    let deepest = tracker.max_in_flight();
    assert!(
        deepest > 4 && deepest <= 256,
        "overlap within the ring: {deepest}"
    );
}

/// Queues `job` on the shared queue, retrying while it is full; returns how often it was full.
fn spawn_retrying(runtime: &Runtime, mut job: Job) -> usize {
    let mut full = 0;
    loop {
        match runtime.spawn_job(job) {
            Ok(()) => return full,
            Err(SpawnError::Full(back)) => {
                job = back;
                full += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(other) => panic!("spawn: {other}"),
        }
    }
}

fn wait_for(outcome: &Outcome, jobs: usize, what: &str) {
    let limit = Instant::now() + Duration::from_secs(60);
    while outcome.done.load(Ordering::SeqCst) < jobs {
        assert!(
            Instant::now() < limit,
            "{what}: only {} of {jobs} jobs finished",
            outcome.done.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn ten_thousand_jobs_on_a_two_core_runtime() {
    let _serial = one_at_a_time();
    let seed = 0x5eed_0003;
    let _guard = SeedGuard::new("ten_thousand_jobs_on_a_two_core_runtime", seed);
    const CORES: usize = 2;
    let arena = Arc::new(Arena::new(2 * THREADS as u32).unwrap());
    let model = EmulatorConfig::with_latency_ns(10_000)
        .jitter_ns(5_000)
        .seed(seed)
        .capacity_bytes(THREADS as u64 * BLOCK)
        .build()
        .unwrap();
    let config = RuntimeConfig {
        cores: CORES,
        pin: false,
        threads_per_core: THREADS / CORES,
        max_pending: THREADS / CORES,
        stack_bytes: STACK_BYTES,
        global_queue: 256,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(config, DeviceSpec::Emulated { model }, arena.clone()).unwrap();
    let outcome = Arc::new(Outcome::default());
    let mut full = 0;
    for owner in 0..THREADS as u64 {
        let (arena, outcome) = (arena.clone(), outcome.clone());
        full += spawn_retrying(
            &runtime,
            Job::new(move || {
                write_and_verify(&arena, seed, owner, &outcome);
                outcome.done.fetch_add(1, Ordering::SeqCst);
            }),
        );
    }
    wait_for(&outcome, THREADS, "write phase");
    outcome.assert_clean("runtime: write phase", THREADS);
    for owner in 0..THREADS as u64 {
        let (arena, outcome) = (arena.clone(), outcome.clone());
        full += spawn_retrying(
            &runtime,
            Job::new(move || {
                read_others(&arena, seed, owner, THREADS as u64, &outcome);
                outcome.done.fetch_add(1, Ordering::SeqCst);
            }),
        );
    }
    let reports = runtime.shutdown();
    assert_eq!(
        outcome.done.load(Ordering::SeqCst),
        2 * THREADS,
        "shutdown drains every job"
    );
    outcome.assert_clean("runtime: read phase", THREADS * (1 + READS as usize));
    assert_eq!(reports.len(), CORES);
    let completed: u64 = reports.iter().map(|r| r.stats.jobs_completed).sum();
    let panicked: u64 = reports.iter().map(|r| r.stats.jobs_panicked).sum();
    assert_eq!((completed, panicked), (2 * THREADS as u64, 0));
    for report in &reports {
        assert!(
            report.stats.jobs_completed > 0,
            "core {} got no jobs",
            report.core
        );
        assert_eq!(report.device_name, "emulated");
    }
    eprintln!(
        "runtime: jobs per core {:?}, shared queue full {full} times",
        reports
            .iter()
            .map(|r| r.stats.jobs_completed)
            .collect::<Vec<_>>()
    );
}
