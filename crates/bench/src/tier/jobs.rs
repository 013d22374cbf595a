//! One job of the load generator: the operations it draws for a workload ([`Generator`],
//! seeded), the bytes its writes store ([`Payloads`]), what it shares with the feeder
//! ([`JobContext`], the [`Meter`] its latency goes to) and the runtime [`Job`] that runs it.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use tamer_device::now_ns;
use tamer_runtime::Job;
use tamer_store::{Db, DbError, DbHandle};

use super::plan::{seeded_bytes, Plan, Workload};
use crate::work::Work;
use crate::workload::{Op, Tatp, Ycsb};

/// Shared by the feeder and the jobs of one point.
pub(super) struct Meter {
    /// Per core: latency from the job's start time (submission or scheduled arrival).
    histograms: Vec<Mutex<Histogram<u64>>>,
    /// Per core: latency from the job's hand-over to the store.
    from_submit: Vec<Mutex<Histogram<u64>>>,
    pub(super) recording: AtomicBool,
    pub(super) outstanding: AtomicUsize,
    pub(super) errors: AtomicU64,
    /// The slice of time now measured ([`NO_SLICE`]: none), and per slice the jobs that
    /// completed in it and the latencies of those submitted in it too.
    current_slice: AtomicUsize,
    slices: Vec<Mutex<Histogram<u64>>>,
    slice_completions: Vec<AtomicU64>,
}

/// No slice is measured.
pub(super) const NO_SLICE: usize = usize::MAX;
/// Most slices one measurement is cut into.
pub(super) const MAX_SLICES: usize = 96;

/// A slice's latency histogram: 1 µs to 100 s at 2 significant digits (≈ 20 KiB; a p99 of a
/// slice needs no finer grain), in ns.
fn slice_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 100_000_000_000, 2).expect("static bounds")
}

/// A latency histogram: 1 ns to 100 s, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds")
}

impl Meter {
    pub(super) fn new(cores: usize) -> Arc<Self> {
        Arc::new(Self {
            histograms: (0..cores.max(1)).map(|_| Mutex::new(histogram())).collect(),
            from_submit: (0..cores.max(1)).map(|_| Mutex::new(histogram())).collect(),
            recording: AtomicBool::new(false),
            outstanding: AtomicUsize::new(0),
            errors: AtomicU64::new(0),
            current_slice: AtomicUsize::new(NO_SLICE),
            slices: (0..MAX_SLICES)
                .map(|_| Mutex::new(slice_histogram()))
                .collect(),
            slice_completions: (0..MAX_SLICES).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Starts measuring slice `k` (ending the one before): later completions count in it.
    pub(super) fn begin_slice(&self, k: usize) {
        assert!(k < MAX_SLICES, "slice {k}: at most {MAX_SLICES}");
        self.slices[k]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reset();
        self.slice_completions[k].store(0, Ordering::Relaxed);
        self.current_slice.store(k, Ordering::Release);
    }

    /// Stops measuring slices.
    pub(super) fn end_slices(&self) {
        self.current_slice.store(NO_SLICE, Ordering::Release);
    }

    /// Slice `k`: (jobs completed in it, latencies of those also submitted in it).
    pub(super) fn slice(&self, k: usize) -> (u64, Histogram<u64>) {
        let latencies = self.slices[k]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        (self.slice_completions[k].load(Ordering::Relaxed), latencies)
    }

    /// A completion: counted in the slice measured now; its latency recorded there only if
    /// it was submitted in that slice (a job straddling a switch belongs to neither policy).
    fn complete_in_slice(&self, submitted_slice: usize, latency_ns: u64) {
        let now = self.current_slice.load(Ordering::Acquire);
        if now == NO_SLICE {
            return;
        }
        self.slice_completions[now].fetch_add(1, Ordering::Relaxed);
        if now == submitted_slice {
            self.slices[now]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .saturating_record(latency_ns.max(1));
        }
    }
    /// Records one job's latency since its start and since its submission.
    pub(super) fn record(&self, latency_ns: u64, since_submit_ns: u64) {
        let core = tamer_runtime::thread::core_id().unwrap_or(0) % self.histograms.len();
        for (set, value) in [
            (&self.histograms, latency_ns),
            (&self.from_submit, since_submit_ns),
        ] {
            let mut h = set[core].lock().unwrap_or_else(|p| p.into_inner());
            h.saturating_record(value.max(1));
        }
    }
    pub(super) fn reset(&self) {
        for h in self.histograms.iter().chain(&self.from_submit) {
            h.lock().unwrap_or_else(|p| p.into_inner()).reset();
        }
    }
    /// Latencies since the jobs' start times, every core's.
    pub(super) fn merged(&self) -> Histogram<u64> {
        merge(&self.histograms)
    }
    /// Latencies since the jobs' submissions, every core's.
    pub(super) fn merged_from_submit(&self) -> Histogram<u64> {
        merge(&self.from_submit)
    }
}

fn merge(histograms: &[Mutex<Histogram<u64>>]) -> Histogram<u64> {
    let mut total = histogram();
    for h in histograms {
        let _ = total.add(&*h.lock().unwrap_or_else(|p| p.into_inner()));
    }
    total
}

/// Up to two key operations of one job (a YCSB op or a TATP transaction).
#[derive(Clone, Copy)]
pub(super) struct Ops {
    ops: [Op; 2],
    len: usize,
}

/// Draws jobs of one workload.
pub(super) struct Generator {
    ycsb: Option<Ycsb>,
    tatp: Tatp,
    scratch: Vec<Op>,
}

impl Generator {
    pub(super) fn new(workload: Workload, plan: &Plan) -> Self {
        let ycsb = match workload {
            Workload::YcsbB => Some(Ycsb::b(plan.records())),
            Workload::YcsbC => Some(Ycsb::c(plan.records())),
            Workload::Tatp => None,
        };
        Self {
            ycsb,
            tatp: Tatp::new(plan.tatp_subscribers.max(1)),
            scratch: Vec::with_capacity(4),
        }
    }
    pub(super) fn next(&mut self, rng: &mut SmallRng) -> Ops {
        match &self.ycsb {
            Some(ycsb) => Ops {
                ops: [ycsb.next(rng), Op::Read(0)],
                len: 1,
            },
            None => {
                self.tatp.next(rng, &mut self.scratch);
                let mut ops = [Op::Read(0); 2];
                let len = self.scratch.len().min(2);
                ops[..len].copy_from_slice(&self.scratch[..len]);
                Ops { ops, len }
            }
        }
    }
}

/// Runs `ops` on the store; `value`: what writes store.
fn execute(h: &DbHandle, ops: &Ops, value: &[u8]) -> Result<(), DbError> {
    for op in &ops.ops[..ops.len] {
        match *op {
            Op::Read(k) => {
                black_box(h.get(&k.to_be_bytes())?);
            }
            Op::Update(k) | Op::Insert(k) => h.put(&k.to_be_bytes(), value)?,
            Op::Delete(k) => {
                h.delete(&k.to_be_bytes())?;
            }
        }
    }
    Ok(())
}

/// What a job needs besides its operations.
#[derive(Clone)]
pub(super) struct JobContext {
    handle: DbHandle,
    pub(super) meter: Arc<Meter>,
    value: Arc<Vec<u8>>,
    work: Work,
    iterations: u64,
}

impl JobContext {
    pub(super) fn new(
        db: &Db,
        meter: Arc<Meter>,
        value: Arc<Vec<u8>>,
        work: Work,
        iterations: u64,
    ) -> Self {
        Self {
            handle: db.handle(),
            meter,
            value,
            work,
            iterations,
        }
    }
}

/// The bytes jobs write: YCSB values and TATP rows, seeded.
pub(super) struct Payloads {
    pub(super) value: Arc<Vec<u8>>,
    pub(super) row: Arc<Vec<u8>>,
}

impl Payloads {
    pub(super) fn new(plan: &Plan, seed: u64) -> Self {
        Self {
            value: seeded_bytes(plan.value_bytes, seed),
            row: seeded_bytes(plan.tatp_row_bytes, seed ^ 1),
        }
    }

    /// What `workload`'s writes store.
    pub(super) fn of(&self, workload: Workload) -> Arc<Vec<u8>> {
        if workload == Workload::Tatp {
            self.row.clone()
        } else {
            self.value.clone()
        }
    }
}

/// The runtime job of `ops`: `ctx.iterations` of work, the operations, then (when `measured`
/// and the meter records) its latency since `started_ns` (its submission, or its scheduled
/// arrival) and since `submitted_ns` (its hand-over to the store); it counts failures and
/// leaves the outstanding count.
pub(super) fn make_job(
    ctx: &JobContext,
    ops: Ops,
    started_ns: u64,
    submitted_ns: u64,
    measured: bool,
) -> Job {
    let ctx = ctx.clone();
    let slice = ctx.meter.current_slice.load(Ordering::Acquire);
    Job::new(move || {
        black_box(ctx.work.run(ctx.iterations, started_ns));
        if execute(&ctx.handle, &ops, &ctx.value).is_err() {
            ctx.meter.errors.fetch_add(1, Ordering::Relaxed);
        }
        let end = now_ns();
        if measured && ctx.meter.recording.load(Ordering::Acquire) {
            ctx.meter.record(
                end.saturating_sub(started_ns),
                end.saturating_sub(submitted_ns),
            );
        }
        ctx.meter
            .complete_in_slice(slice, end.saturating_sub(started_ns));
        ctx.meter.outstanding.fetch_sub(1, Ordering::AcqRel);
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn generator_is_seeded() {
        let plan = Plan::new(true, 0);
        let draw = |w| {
            let mut g = Generator::new(w, &plan);
            let mut rng = SmallRng::seed_from_u64(7);
            (0..50)
                .map(|_| {
                    let o = g.next(&mut rng);
                    format!("{:?}", &o.ops[..o.len])
                })
                .collect::<Vec<_>>()
        };
        for w in Workload::ALL {
            assert_eq!(draw(w), draw(w));
        }
    }
}
