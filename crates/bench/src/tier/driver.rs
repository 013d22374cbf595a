//! The load generator (the *feeder*, one OS thread): it loads a store ([`load`]) and drives it
//! in a closed loop ([`closed_loop`]) or an open loop of Poisson arrivals ([`open_loop`]),
//! runs the emulated device's DMA engine while it waits, and turns the store's counters
//! before and after the measured window into a [`Measurement`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tamer_cache::CacheStats;
use tamer_device::{now_ns, EmulatorModel};
use tamer_runtime::{CoreStats, Job, SpawnError};
use tamer_store::{Db, DbError};

use super::jobs::{make_job, Generator, JobContext, Meter};
use super::measurement::Measurement;
use super::plan::{Plan, Workload};
use crate::progress::Progress;
use crate::workload::Tatp;

/// The store's cache counters, its cores' counters and the process's major faults at one
/// instant.
struct StatsSnapshot {
    major_faults: u64,
    victim_write_backs: u64,
    hits: u64,
    misses: u64,
    index_misses: u64,
    merged: u64,
    write_backs: u64,
    latency: Histogram<u64>,
    /// Every core's counters, merged (`None` when a core did not answer in time).
    cores: Option<CoreStats>,
    core_count: usize,
}

/// How long a snapshot waits for the cores to publish their counters.
const CORE_STATS_WAIT: Duration = Duration::from_millis(200);

/// Major page faults of this process so far.
pub fn major_faults() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_majflt as u64
}

/// `db`'s counters and the major faults, now.
fn snapshot(db: &Db) -> StatsSnapshot {
    let all = db.runtime().core_stats(CORE_STATS_WAIT).ok();
    let core_count = all.as_ref().map_or(1, Vec::len);
    let cores = all.map(|all| {
        let mut merged = CoreStats::default();
        for core in &all {
            merged.merge(core);
        }
        merged
    });
    let stats: CacheStats = db.cache_stats();
    StatsSnapshot {
        major_faults: major_faults(),
        victim_write_backs: stats.victim_write_backs,
        hits: stats.hits,
        misses: stats.misses,
        index_misses: stats.index_misses,
        merged: stats.merged_misses,
        write_backs: stats.write_backs,
        latency: stats.miss_latency_ns,
        cores,
        core_count,
    }
}

/// The window's [`Measurement`]: the meter's latencies, the counters' differences.
fn finish(meter: &Meter, before: StatsSnapshot, after: StatsSnapshot, secs: f64) -> Measurement {
    let latencies = meter.merged();
    let from_submit = meter.merged_from_submit();
    let mut m = measurement(&latencies, &from_submit, &before, &after, secs);
    m.errors = meter.errors.load(Ordering::Relaxed);
    m
}

/// A measured window opened on a store: its counters at the start.
pub(super) struct Window {
    before: StatsSnapshot,
    started: Instant,
}

impl Window {
    pub(super) fn open(db: &Db) -> Self {
        Self {
            before: snapshot(db),
            started: Instant::now(),
        }
    }

    /// The window's [`Measurement`] from its `latencies` (from submission), the counters'
    /// differences since it opened; `ops` is the latencies' count.
    pub(super) fn close(self, db: &Db, latencies: &Histogram<u64>) -> Measurement {
        let secs = self.started.elapsed().as_secs_f64();
        let after = snapshot(db);
        measurement(latencies, latencies, &self.before, &after, secs)
    }
}

/// A [`Measurement`] from its latency histograms and the counters before and after.
fn measurement(
    latencies: &Histogram<u64>,
    from_submit: &Histogram<u64>,
    before: &StatsSnapshot,
    after: &StatsSnapshot,
    secs: f64,
) -> Measurement {
    let cores = match (&after.cores, &before.cores) {
        (Some(after), Some(before)) => Some(after.since(before)),
        _ => None,
    };
    let core_count = after.core_count.max(1) as f64;
    let mut miss_latency = after.latency.clone();
    let mean_miss_latency_us = if miss_latency.subtract(&before.latency).is_ok() {
        miss_latency.mean() / 1_000.0
    } else {
        after.latency.mean() / 1_000.0
    };
    Measurement {
        ops: latencies.len(),
        secs,
        p50_us: latencies.value_at_quantile(0.50) as f64 / 1_000.0,
        p99_us: latencies.value_at_quantile(0.99) as f64 / 1_000.0,
        p50_from_submit_us: from_submit.value_at_quantile(0.50) as f64 / 1_000.0,
        p99_from_submit_us: from_submit.value_at_quantile(0.99) as f64 / 1_000.0,
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        index_misses: after.index_misses - before.index_misses,
        write_backs: after.write_backs - before.write_backs,
        victim_write_backs: after.victim_write_backs - before.victim_write_backs,
        merged_misses: after.merged - before.merged,
        mean_miss_latency_us,
        errors: 0,
        offered: 0,
        dropped: 0,
        major_faults: after.major_faults - before.major_faults,
        emulator_cpu_secs: 0.0,
        sampled_in_flight: 0.0,
        dma_engine_copies: 0,
        dma_core_copies: 0,
        pages_compacted: 0,
        feeder_max_late_us: 0.0,
        feeder_late_fraction: 0.0,
        core_waiting_fraction: cores
            .as_ref()
            .map(|c| c.waiting_ns as f64 / 1e9 / (secs * core_count).max(1e-9)),
        ready_wait_p99_us: cores
            .as_ref()
            .map(|c| c.ready_wait_ns.value_at_quantile(0.99) as f64 / 1_000.0),
        aging_threshold_us: after
            .cores
            .as_ref()
            .map(|c| c.aging_threshold_ns as f64 / 1_000.0),
        core_cpu_secs: cores.as_ref().map(|c| c.cpu_ns as f64 / 1e9),
        core_system_share: cores
            .as_ref()
            .filter(|c| c.cpu_ns > 0)
            .map(|c| (c.system_cpu_ns as f64 / c.cpu_ns as f64).min(1.0)),
        block: None,
    }
}

/// Waits (up to 60 s) until the jobs submitted so far have finished.
pub(super) fn drain(meter: &Meter) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while meter.outstanding.load(Ordering::Acquire) > 0 {
        if Instant::now() > deadline {
            return Err("jobs did not finish within 60 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Closed loop: `population` jobs outstanding; warm-up, then a measured window.
pub(super) fn closed_loop(
    db: &Db,
    plan: &Plan,
    workload: Workload,
    ctx: &JobContext,
    seed: u64,
) -> Result<Measurement, String> {
    let meter = ctx.meter.clone();
    meter.reset();
    meter.errors.store(0, Ordering::Relaxed);
    let mut generator = Generator::new(workload, plan);
    let mut rng = SmallRng::seed_from_u64(seed);
    let population = plan.population();
    let runtime = db.runtime();
    let dma = dma_engine(db);
    let dma_before = dma_counts(db);
    let start = Instant::now();
    let warm_end = start + plan.warmup;
    let end = warm_end + plan.measure;
    let mut before = None;
    let mut copy_before_ns = 0;
    let mut compacted_before = 0;
    let mut measure_start = start;
    // The device queue depth, sampled every `SAMPLE_EVERY` of the measured window.
    const SAMPLE_EVERY: Duration = Duration::from_micros(20);
    let (mut samples, mut in_flight_sum) = (0u64, 0u64);
    let mut next_sample = warm_end;
    loop {
        let now = Instant::now();
        if before.is_some() && now >= next_sample {
            in_flight_sum += runtime.device_in_flight() as u64;
            samples += 1;
            next_sample = now + SAMPLE_EVERY;
        }
        if before.is_none() && now >= warm_end {
            meter.reset();
            meter.errors.store(0, Ordering::Relaxed);
            before = Some(snapshot(db));
            compacted_before = db.compaction_stats().pages_compacted;
            copy_before_ns = emulator_cpu_ns(db);
            measure_start = Instant::now();
            meter.recording.store(true, Ordering::Release);
        }
        if now >= end {
            break;
        }
        while meter.outstanding.load(Ordering::Acquire) < population {
            meter.outstanding.fetch_add(1, Ordering::AcqRel);
            let submitted = now_ns();
            let job = make_job(ctx, generator.next(&mut rng), submitted, submitted, true);
            if let Err(SpawnError::Full(_)) = runtime.spawn_job(job) {
                meter.outstanding.fetch_sub(1, Ordering::AcqRel);
                break;
            }
        }
        feeder_idle(&dma, 8);
    }
    meter.recording.store(false, Ordering::Release);
    let secs = measure_start.elapsed().as_secs_f64();
    let after = snapshot(db);
    let mut m = finish(&meter, before.expect("measured"), after, secs);
    m.pages_compacted = db.compaction_stats().pages_compacted - compacted_before;
    m.emulator_cpu_secs = emulator_cpu_ns(db).saturating_sub(copy_before_ns) as f64 / 1e9;
    m.sampled_in_flight = in_flight_sum as f64 / samples.max(1) as f64;
    let dma_after = dma_counts(db);
    m.dma_engine_copies = dma_after.0 - dma_before.0;
    m.dma_core_copies = dma_after.1 - dma_before.1;
    drain(&meter)?;
    Ok(m)
}

/// The emulated device whose DMA engine the load generator runs, if any.
fn dma_engine(db: &Db) -> Option<Arc<EmulatorModel>> {
    db.emulator_model().filter(|m| m.config().dma_offload)
}

/// DMA copies so far: (by the engine, by polling cores).
fn dma_counts(db: &Db) -> (u64, u64) {
    db.emulator_model().map_or((0, 0), |m| m.dma_counts())
}

/// What the load generator does while it waits: the emulated device's DMA engine (at most
/// `max_copies` copies); otherwise it yields its CPU to whatever else is runnable there: the
/// disk's completion work may land on that CPU, and a spinning feeder would delay it.
pub(super) fn feeder_idle_for(dma: &Option<Arc<EmulatorModel>>) {
    feeder_idle(dma, 8);
}

fn feeder_idle(dma: &Option<Arc<EmulatorModel>>, max_copies: usize) {
    if let Some(model) = dma {
        if model.run_dma(max_copies) > 0 {
            return;
        }
        std::hint::spin_loop();
        return;
    }
    std::thread::yield_now();
}

/// The emulated device's completion CPU time so far (0 for other devices).
fn emulator_cpu_ns(db: &Db) -> u64 {
    db.emulator_model()
        .map_or(0, |model| model.completion_cpu_ns())
}

/// Open loop: Poisson arrivals at `rate`; jobs arriving in the measured window are recorded
/// from their scheduled arrival to their end; refused ones are dropped.
pub(super) fn open_loop(
    db: &Db,
    plan: &Plan,
    workload: Workload,
    ctx: &JobContext,
    rate: f64,
    seed: u64,
) -> Result<Measurement, String> {
    let meter = ctx.meter.clone();
    meter.reset();
    meter.errors.store(0, Ordering::Relaxed);
    meter.recording.store(true, Ordering::Release);
    let mut generator = Generator::new(workload, plan);
    let mut rng = SmallRng::seed_from_u64(seed);
    let arrivals = crate::workload::Poisson::new(rate);
    let runtime = db.runtime();
    let dma = dma_engine(db);
    let warm_ns = (plan.load_point.as_nanos() / 4) as u64;
    let start_ns = now_ns();
    let window_start = start_ns + warm_ns;
    let end_ns = window_start + plan.load_point.as_nanos() as u64;
    let mut next = start_ns;
    let (mut offered, mut dropped) = (0u64, 0u64);
    let (mut max_late_ns, mut late) = (0u64, 0u64);
    let mut before = None;
    loop {
        next += arrivals.next_gap_ns(&mut rng);
        if next >= end_ns {
            break;
        }
        let mut now = now_ns();
        while now < next {
            // One copy at a time (≈ 1.5 µs): an arrival is submitted at most that late.
            feeder_idle(&dma, 1);
            now = now_ns();
        }
        let measured = next >= window_start;
        if measured {
            let late_ns = now - next;
            max_late_ns = max_late_ns.max(late_ns);
            late += u64::from(late_ns > 100_000);
        }
        if measured && before.is_none() {
            before = Some(snapshot(db));
        }
        meter.outstanding.fetch_add(1, Ordering::AcqRel);
        let job = make_job(ctx, generator.next(&mut rng), next, now, measured);
        offered += u64::from(measured);
        if runtime.spawn_job(job).is_err() {
            meter.outstanding.fetch_sub(1, Ordering::AcqRel);
            dropped += u64::from(measured);
        }
    }
    drain(&meter)?;
    meter.recording.store(false, Ordering::Release);
    let after = snapshot(db);
    let before = before.unwrap_or_else(|| snapshot(db));
    let secs = (end_ns - window_start) as f64 / 1e9;
    let mut m = finish(&meter, before, after, secs);
    m.offered = offered;
    m.dropped = dropped;
    m.feeder_max_late_us = max_late_ns as f64 / 1_000.0;
    m.feeder_late_fraction = late as f64 / offered.max(1) as f64;
    Ok(m)
}

/// Loads YCSB records and TATP rows with jobs on the store's runtime.
pub(super) fn load(
    db: &Db,
    plan: &Plan,
    value: &Arc<Vec<u8>>,
    row: &Arc<Vec<u8>>,
) -> Result<(), String> {
    const LOADERS: u64 = 64;
    let records = plan.records();
    let subscribers = plan.tatp_subscribers;
    let keys_total = records + subscribers * 15 / 2;
    let progress = Progress::count(keys_total, "loading keys");
    let keys_done = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(Mutex::new(None::<String>));
    for j in 0..LOADERS {
        let (h, done, failed) = (db.handle(), done.clone(), failed.clone());
        let keys_done = keys_done.clone();
        let (value, row) = (value.clone(), row.clone());
        let mut job = Job::new(move || {
            let result = (|| -> Result<(), DbError> {
                let mut k = j;
                while k < records {
                    h.put(&k.to_be_bytes(), &value)?;
                    keys_done.fetch_add(1, Ordering::Relaxed);
                    k += LOADERS;
                }
                let tatp = Tatp::new(subscribers.max(1));
                let mut keys = Vec::new();
                let mut s = j;
                while s < subscribers {
                    tatp.population(s, &mut keys);
                    for key in &keys {
                        h.put(&key.to_be_bytes(), &row)?;
                    }
                    keys_done.fetch_add(keys.len() as u64, Ordering::Relaxed);
                    s += LOADERS;
                }
                Ok(())
            })();
            if let Err(err) = result {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
            }
            done.fetch_add(1, Ordering::AcqRel);
        });
        loop {
            match db.runtime().spawn_job(job) {
                Ok(()) => break,
                Err(SpawnError::Full(back)) => {
                    job = back;
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(err) => return Err(err.to_string()),
            }
        }
    }
    while done.load(Ordering::Acquire) < LOADERS {
        progress.set(keys_done.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(progress);
    if let Some(err) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(format!("loading: {err}"));
    }
    Ok(())
}
