//! One measured window on one store: `in_flight` jobs on the store's runtime, each running
//! transactions of [`super::workloads`] back to back (a closed loop), a warm-up, then a measured window whose
//! latencies (each transaction's, to its return: durable for `lad` and `wal`) and the
//! store's counters before and after make a [`Window`].

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tamer_device::now_ns;
use tamer_store::{Db, DbHandle};

use super::plan::{Plan, Point, Workload};
use super::wal::GroupLog;
use super::workloads::{table_key, Failure, Hook, Mix};

/// Longest the jobs of a window take to stop after it ends.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// A latency histogram: 1 ns to 100 s, 3 significant digits.
pub(super) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds")
}

/// The store's write counters at one instant.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    group_commits: u64,
    overflows: u64,
    commit_pages: u64,
    index_pages: u64,
    checkpoints: u64,
    checkpoint_ns: u64,
    store_pages: u64,
    log_bytes: u64,
    log_syncs: u64,
}

impl Counters {
    fn of(db: &Db, log: Option<&GroupLog>) -> Self {
        let commit = db.commit_stats();
        let checkpoint = db.checkpoint_stats();
        Self {
            group_commits: commit.group_commits,
            overflows: commit.overflows,
            commit_pages: commit.queue_pages_written + commit.data_pages_written,
            index_pages: checkpoint.index_pages_written,
            checkpoints: checkpoint.checkpoints,
            checkpoint_ns: checkpoint.total_ns,
            store_pages: db.cache_stats().write_backs,
            log_bytes: log.map_or(0, |l| l.bytes_written.load(Ordering::Relaxed)),
            log_syncs: log.map_or(0, |l| l.syncs.load(Ordering::Relaxed)),
        }
    }

    fn since(self, before: Self) -> Self {
        Self {
            group_commits: self.group_commits - before.group_commits,
            overflows: self.overflows - before.overflows,
            commit_pages: self.commit_pages - before.commit_pages,
            index_pages: self.index_pages - before.index_pages,
            checkpoints: self.checkpoints - before.checkpoints,
            checkpoint_ns: self.checkpoint_ns - before.checkpoint_ns,
            store_pages: self.store_pages - before.store_pages,
            log_bytes: self.log_bytes - before.log_bytes,
            log_syncs: self.log_syncs - before.log_syncs,
        }
    }
}

/// What one window measured.
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) txns: u64,
    pub(super) secs: f64,
    /// Latencies of the transactions that committed (TATP's reads are not in it).
    pub(super) latency: Histogram<u64>,
    /// Transactions that gave up after [`tamer_store::MAX_TX_ATTEMPTS`] conflicts (not in
    /// `txns`).
    pub(super) gave_up: u64,
    pub(super) group_commits: u64,
    pub(super) overflows: u64,
    /// Pages the group commits wrote (queue + data) and the checkpoints' index pages.
    pub(super) commit_pages: u64,
    pub(super) index_pages: u64,
    /// Checkpoints, and the time writers waited for them (ns).
    pub(super) checkpoints: u64,
    pub(super) checkpoint_ns: u64,
    /// Every page the store wrote (cache write-backs: group commits, cleaner, checkpoints).
    pub(super) store_pages: u64,
    /// `store_pages` from the checkpoint that ends the warm-up through one after the jobs
    /// stopped: every page write the window's transactions need to be in the store itself.
    pub(super) settled_pages: u64,
    pub(super) log_bytes: u64,
    pub(super) log_syncs: u64,
}

impl Window {
    pub(super) fn txns_per_s(&self) -> f64 {
        self.txns as f64 / self.secs.max(1e-9)
    }
    pub(super) fn p50_us(&self) -> f64 {
        self.latency.value_at_quantile(0.50) as f64 / 1_000.0
    }
    pub(super) fn p99_us(&self) -> f64 {
        self.latency.value_at_quantile(0.99) as f64 / 1_000.0
    }
    /// Bytes the store and its log wrote per transaction.
    pub(super) fn bytes_per_txn(&self) -> f64 {
        (self.store_pages * tamer_cache::PAGE_SIZE as u64 + self.log_bytes) as f64
            / self.txns.max(1) as f64
    }
    /// Bytes per transaction once the window's writes are in the store (`settled_pages`):
    /// a `wal`'s data pages are written by a checkpoint, not at commit, and count here.
    pub(super) fn settled_bytes_per_txn(&self) -> f64 {
        (self.settled_pages * tamer_cache::PAGE_SIZE as u64 + self.log_bytes) as f64
            / self.txns.max(1) as f64
    }
    /// Bytes of the commit path per transaction: `lad`'s group commits (queue + data pages)
    /// and checkpoint index pages; the `wal`'s log.
    pub(super) fn commit_bytes_per_txn(&self) -> f64 {
        let pages = self.commit_pages + self.index_pages;
        (pages * tamer_cache::PAGE_SIZE as u64 + self.log_bytes) as f64 / self.txns.max(1) as f64
    }
}

/// Which log a window's configuration keeps besides the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LogRole {
    /// The `wal`'s redo log.
    Redo,
    /// The `undo` configuration's undo log.
    Undo,
}

/// What the jobs of one window share.
struct Shared {
    handle: DbHandle,
    log: Option<(Arc<GroupLog>, LogRole)>,
    workload: Workload,
    mix: Mix,
    recording: AtomicBool,
    stop: AtomicBool,
    done: AtomicUsize,
    errors: AtomicU64,
    /// Transactions of the measured window that gave up after `MAX_TX_ATTEMPTS` conflicts.
    gave_up: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Commit latencies (transactions that wrote) and every transaction of the window.
    latencies: Mutex<Histogram<u64>>,
    txns: AtomicU64,
}

impl Shared {
    fn fail(&self, err: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(err);
    }

    fn hook(&self) -> Hook<'_> {
        match &self.log {
            None => Hook::Plain,
            Some((log, LogRole::Redo)) => Hook::Redo(log),
            Some((log, LogRole::Undo)) => Hook::Undo(log),
        }
    }
}

/// The 8-byte key of record `k` of the `update` and `swap` workloads.
pub(super) fn key(k: u64) -> [u8; 8] {
    table_key(0, k)
}

/// A job: transactions until told to stop; latencies kept while the window records.
fn job(s: Arc<Shared>, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut mine, mut txns) = (histogram(), 0);
    while !s.stop.load(Ordering::Acquire) {
        let start = now_ns();
        let result = s.mix.run(s.workload, &s.handle, s.hook(), &mut rng);
        let recording = s.recording.load(Ordering::Acquire);
        match result {
            Ok(committed) if recording => {
                txns += 1;
                if committed {
                    mine.saturating_record(now_ns().saturating_sub(start).max(1));
                }
            }
            Ok(_) => {}
            Err(Failure::Conflict) if recording => {
                s.gave_up.fetch_add(1, Ordering::Relaxed);
            }
            Err(Failure::Conflict) => {}
            Err(Failure::Other(err)) => s.fail(err),
        }
    }
    let _ = s
        .latencies
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .add(&mine);
    s.txns.fetch_add(txns, Ordering::Relaxed);
    s.done.fetch_add(1, Ordering::AcqRel);
}

/// Runs `point` on `db` (with `log` for the wal) for the plan's warm-up and window; every
/// job's operations are drawn from `seed` and its index, the same for every configuration.
#[expect(
    clippy::too_many_lines,
    reason = "one window's phases (warm-up, checkpoint, measured window, settling checkpoint) share the jobs' counters and read in order"
)]
pub(super) fn window(
    db: &Db,
    log: Option<(&Arc<GroupLog>, LogRole)>,
    plan: &Plan,
    point: Point,
    value: &Arc<Vec<u8>>,
    seed: u64,
) -> Result<Window, String> {
    let shared = Arc::new(Shared {
        handle: db.handle(),
        log: log.map(|(l, role)| (l.clone(), role)),
        workload: point.workload,
        mix: Mix::new(plan, value),
        recording: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        done: AtomicUsize::new(0),
        errors: AtomicU64::new(0),
        gave_up: AtomicU64::new(0),
        first_error: Mutex::new(None),
        latencies: Mutex::new(histogram()),
        txns: AtomicU64::new(0),
    });
    for j in 0..point.in_flight {
        let (s, job_seed) = (shared.clone(), seed ^ (j as u64).wrapping_mul(0x9E37_79B9));
        db.runtime()
            .spawn(move || job(s, job_seed))
            .map_err(|e| format!("spawning job {j}: {e}"))?;
    }
    std::thread::sleep(plan.warmup);
    // A checkpoint ends the warm-up, so that the one after the window writes the window's
    // pages only (`settled_pages`).
    if plan.settle {
        db.flush()
            .map_err(|e| format!("the checkpoint ending the warm-up: {e}"))?;
    }
    let before = Counters::of(db, log.map(|(l, _)| &**l));
    let started = Instant::now();
    shared.recording.store(true, Ordering::Release);
    std::thread::sleep(plan.measure);
    shared.recording.store(false, Ordering::Release);
    let secs = started.elapsed().as_secs_f64();
    let delta = Counters::of(db, log.map(|(l, _)| &**l)).since(before);
    shared.stop.store(true, Ordering::Release);
    let deadline = Instant::now() + STOP_WAIT;
    while shared.done.load(Ordering::Acquire) < point.in_flight {
        if Instant::now() > deadline {
            return Err(format!(
                "{} jobs did not stop within {STOP_WAIT:?}",
                point.in_flight
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    if plan.settle {
        db.flush()
            .map_err(|e| format!("the checkpoint after the window: {e}"))?;
    }
    let settled = Counters::of(db, None).since(before);
    if let Some(err) = shared
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        let errors = shared.errors.load(Ordering::Relaxed);
        return Err(format!("{errors} transactions failed, the first: {err}"));
    }
    let latency = shared
        .latencies
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(Window {
        txns: shared.txns.load(Ordering::Relaxed),
        secs,
        latency,
        gave_up: shared.gave_up.load(Ordering::Relaxed),
        group_commits: delta.group_commits,
        overflows: delta.overflows,
        commit_pages: delta.commit_pages,
        index_pages: delta.index_pages,
        checkpoints: delta.checkpoints,
        checkpoint_ns: delta.checkpoint_ns,
        store_pages: delta.store_pages,
        settled_pages: settled.store_pages,
        log_bytes: delta.log_bytes,
        log_syncs: delta.log_syncs,
    })
}
