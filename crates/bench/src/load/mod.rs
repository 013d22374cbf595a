//! `tamer load`: a load generator for any Redis (RESP) or memcached (text protocol) server.
//!
//! Open loop (`rate_per_s`: Poisson arrivals, each timed from its *scheduled* send, so a
//! stalled server's queueing shows in the latencies: no coordinated omission) or closed loop
//! (every connection keeps `pipeline` operations in flight). `threads` OS threads, each an
//! event loop over its share of the connections ([`worker`]); at most `pipeline` operations in
//! flight per connection and [`worker::MAX_BACKLOG`] arrivals waiting on one. Figures:
//! throughput (operations answered in the window ÷ the window), HDR latency percentiles of
//! every answer and of the admitted ones (not `-BUSY`, not an error), errors and `-BUSY`
//! counted apart. `fill` sets every key first (closed loop).
//!
//! Modules: `spec` (protocol, distribution, mix), `proto` (encoding, reply parsing), `conn`
//! (one socket's buffers and in-flight operations), `worker` (the event loop), `stats`
//! (counts and histograms), `report` (the result, printed or JSON).

mod conn;
pub mod proto;
mod report;
pub mod spec;
mod stats;
mod timer;
mod worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

pub use report::{FillReport, LoadReport, Percentiles};
pub use spec::{Distribution, KeyChooser, Mix, OpKind, Protocol};
pub use stats::Stats;

use worker::{Fill, Worker};

/// Most connections (each holds at most `pipeline` operations and its backlog).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Deepest pipeline per connection.
pub const MAX_PIPELINE: usize = 4_096;
/// Most load threads.
pub const MAX_THREADS: usize = 64;
/// Most keys of a Zipfian distribution (building it sums a term per key: ≈ 1 s at this bound).
pub const MAX_ZIPF_KEYS: u64 = 100_000_000;
/// Largest value.
pub const MAX_VALUE_BYTES: usize = 16 << 20;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The server's host.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The protocol the server speaks.
    pub protocol: Protocol,
    /// Connections, split between the load threads.
    pub connections: usize,
    /// Most operations in flight per connection.
    pub pipeline: usize,
    /// Open loop: operations per arrival, written together on one connection (a pipelined
    /// client's batch); at most `pipeline`.
    pub batch: usize,
    /// Keys `key:000000000000` .. `key:N-1`.
    pub keys: u64,
    /// How keys are chosen.
    pub distribution: Distribution,
    /// Weights of the operations.
    pub mix: Mix,
    /// Bytes of every value set.
    pub value_bytes: usize,
    /// Open loop at this many operations per second in all; `None`: closed loop.
    pub rate_per_s: Option<f64>,
    /// Measured window.
    pub duration: Duration,
    /// Run before the window (not measured).
    pub warmup: Duration,
    /// Set every key first.
    pub fill: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// Load threads (event loops).
    pub threads: usize,
    /// Skew: the first `hot_connections` get `hot_share` of the arrivals (open loop).
    pub hot_connections: usize,
    /// Share of the arrivals the hot connections get, 0..=1.
    pub hot_share: f64,
    /// Pin load thread `i` to `cpus[i % len]`.
    pub cpus: Vec<usize>,
    /// Draw a live progress line on stderr (when it is a terminal).
    pub progress: bool,
    /// Commands (RESP, each its arguments) sent on every connection once it is connected,
    /// before any other request (`HELLO 3`, `CLIENT TRACKING ON`); an error reply to any fails
    /// the run. Out-of-band pushes arriving later answer no request and are skipped.
    pub setup: Vec<Vec<Vec<u8>>>,
}

impl LoadOptions {
    /// A closed loop of one connection on `port`, 1 s, no warm-up, 1000 keys of 64 bytes.
    pub fn new(port: u16) -> Self {
        Self {
            host: "127.0.0.1".into(),
            port,
            protocol: Protocol::Resp,
            connections: 1,
            pipeline: 1,
            batch: 1,
            keys: 1_000,
            distribution: Distribution::Uniform,
            mix: Mix {
                get: 90,
                set: 10,
                multi: 0,
            },
            value_bytes: 64,
            rate_per_s: None,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            fill: false,
            seed: 42,
            threads: 1,
            hot_connections: 0,
            hot_share: 0.0,
            cpus: Vec::new(),
            progress: false,
            setup: Vec::new(),
        }
    }

    /// Refuses what cannot run, before any connection.
    pub fn validate(&self) -> Result<(), String> {
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        check(
            (1..=MAX_CONNECTIONS).contains(&self.connections),
            "--connections: 1..=10000",
        )?;
        check(
            (1..=MAX_PIPELINE).contains(&self.pipeline),
            "--pipeline: 1..=4096",
        )?;
        check(
            (1..=MAX_THREADS).contains(&self.threads),
            "--threads: 1..=64",
        )?;
        check(
            self.threads <= self.connections,
            "--threads: at most --connections",
        )?;
        check(
            self.keys >= 1 && self.keys < 1_000_000_000_000,
            "--keys: 1..10^12",
        )?;
        check(
            matches!(self.distribution, Distribution::Uniform) || self.keys <= MAX_ZIPF_KEYS,
            "--distribution zipf: at most 10^8 keys (its constant is summed over every key)",
        )?;
        check(
            self.value_bytes <= MAX_VALUE_BYTES,
            "--value-bytes: at most 16 MiB",
        )?;
        check(
            self.rate_per_s.is_none_or(|r| r > 0.0 && r.is_finite()),
            "--rate: positive",
        )?;
        check((0.0..=1.0).contains(&self.hot_share), "--hot-share: 0..=1")?;
        check(
            !(self.protocol == Protocol::Memcache && self.mix.multi > 0),
            "--mix multi: RESP only (memcached has no transactions)",
        )?;
        check(
            self.setup.is_empty() || self.protocol == Protocol::Resp,
            "setup commands: RESP only",
        )?;
        check(!self.duration.is_zero(), "--duration: positive")
    }
}

/// What the workers share: a count for the progress line.
pub struct Shared {
    completed: AtomicU64,
}

impl Shared {
    fn add_completed(&self, n: u64) {
        self.completed.fetch_add(n, Ordering::Relaxed);
    }
}

/// Runs the load: connects every connection, fills if asked, runs the window, reports.
pub fn run(opts: &LoadOptions) -> Result<LoadReport, String> {
    opts.validate()?;
    let chooser = KeyChooser::new(opts.distribution, opts.keys);
    let shared = Shared {
        completed: AtomicU64::new(0),
    };
    let barrier = Barrier::new(opts.threads + 1);
    // The window starts after every thread's fill, or a GET could find a key not yet set.
    let filled = Barrier::new(opts.threads);
    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|t| {
                let barriers = [&barrier, &filled];
                let (chooser, shared) = (&chooser, &shared);
                scope.spawn(move || thread_main(opts, t, chooser, shared, barriers))
            })
            .collect();
        barrier.wait();
        draw_progress(opts, &shared, started, &handles);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a load thread panicked".into()))
            })
            .collect::<Vec<_>>()
    });
    let mut total = Stats::new();
    let mut fill = opts.fill.then(FillReport::default);
    for r in outcome {
        let (stats, fill_stats, fill_s) = r?;
        total.merge(&stats);
        if let (Some(f), Some(s)) = (&mut fill, fill_stats) {
            f.keys += s.ok;
            f.errors += s.errors + s.busy + s.unfinished;
            f.seconds = f.seconds.max(fill_s);
        }
    }
    Ok(LoadReport::new(opts, &total, fill))
}

type ThreadOutcome = Result<(Stats, Option<Stats>, f64), String>;

fn thread_main(
    opts: &LoadOptions,
    t: usize,
    chooser: &KeyChooser,
    shared: &Shared,
    [barrier, filled]: [&Barrier; 2],
) -> ThreadOutcome {
    if !opts.cpus.is_empty() {
        tamer_runtime::pin_to_cpu(opts.cpus[t % opts.cpus.len()]);
    }
    let count = (t..opts.connections).step_by(opts.threads).count();
    let hot = (t..opts.connections)
        .step_by(opts.threads)
        .filter(|i| *i < opts.hot_connections)
        .count();
    let seed = opts.seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let worker = Worker::connect(opts, chooser, count, hot, seed);
    barrier.wait();
    let mut worker = match worker {
        Ok(w) => w,
        Err(e) => {
            if opts.fill {
                filled.wait();
            }
            return Err(e);
        }
    };
    let mut fill = None;
    if opts.fill {
        let started = Instant::now();
        let plan = Fill {
            next: t as u64,
            stride: opts.threads as u64,
            end: opts.keys,
        };
        let outcome = worker.run_fill(plan, shared);
        filled.wait();
        outcome?;
        fill = Some((
            std::mem::take(&mut worker.stats),
            started.elapsed().as_secs_f64(),
        ));
    }
    let rate = opts
        .rate_per_s
        .map(|r| r / (opts.threads * opts.batch) as f64);
    worker.run(rate, shared)?;
    let (fill_stats, fill_s) = fill.map_or((None, 0.0), |(s, secs)| (Some(s), secs));
    Ok((std::mem::take(&mut worker.stats), fill_stats, fill_s))
}

/// The live line: operations answered and the rate over the last 200 ms, until the threads end.
fn draw_progress<T>(
    opts: &LoadOptions,
    shared: &Shared,
    started: Instant,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
) {
    if !opts.progress {
        return;
    }
    let bar = crate::progress::Progress::phase("load");
    let mut last = (Instant::now(), 0u64);
    // Bounded by the threads' own end (window + drain).
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        let done = shared.completed.load(Ordering::Relaxed);
        let rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), done);
        bar.message(format!(
            "{done} answered, {:.0} ops/s, {:.0} s",
            rate,
            started.elapsed().as_secs_f64()
        ));
    }
}

#[cfg(test)]
mod tests;
