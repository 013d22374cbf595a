//! A load run's result: counts, throughput, latency percentiles; printed or as JSON.

use hdrhistogram::Histogram;
use serde::Serialize;

use super::stats::Stats;
use super::{LoadOptions, Protocol};

/// Latency percentiles in µs.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        Self {
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1e3,
        }
    }
}

/// The fill phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct FillReport {
    /// Keys set.
    pub keys: u64,
    /// Sets answered with an error.
    pub errors: u64,
    /// Time the fill took, seconds.
    pub seconds: f64,
}

/// What a load run measured, printed by [`LoadReport::print`] or serialized as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// The server's host.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The protocol spoken.
    pub protocol: Protocol,
    /// Open loop (`--rate`) or closed loop.
    pub open_loop: bool,
    /// The open loop's offered rate, operations per second.
    pub rate_per_s: Option<f64>,
    /// Connections.
    pub connections: usize,
    /// Most operations in flight per connection.
    pub pipeline: usize,
    /// Load threads.
    pub threads: usize,
    /// Measured window, seconds.
    pub window_s: f64,
    /// Operations answered in the window (any reply).
    pub answered: u64,
    /// Operations answered per second of the window.
    pub throughput_per_s: f64,
    /// Operations answered `OK` or with a value.
    pub ok: u64,
    /// GET misses.
    pub nil: u64,
    /// Operations answered with an error (other than `-BUSY`).
    pub errors: u64,
    /// Operations answered `-BUSY` (refused by admission).
    pub busy: u64,
    /// In flight when the drain ended.
    pub unfinished: u64,
    /// Still waiting for a slot when the window ended (open loop).
    pub unsent: u64,
    /// Refused by a full backlog (open loop; never sent).
    pub overflowed: u64,
    /// Connections that failed.
    pub connection_errors: u64,
    /// The last error seen, if any.
    pub last_error: Option<String>,
    /// Latency of every operation answered.
    pub latency: Percentiles,
    /// Of the operations answered neither `-BUSY` nor an error.
    pub admitted_latency: Percentiles,
    /// The fill phase, if `--load` ran one.
    pub fill: Option<FillReport>,
    /// Latencies of every operation answered, ns.
    #[serde(skip)]
    pub latency_ns: Histogram<u64>,
    /// Latencies of the admitted operations, ns.
    #[serde(skip)]
    pub admitted_ns: Histogram<u64>,
}

impl LoadReport {
    /// The report of a run with `opts`, from the window's stats and the fill's.
    pub fn new(opts: &LoadOptions, s: &Stats, fill: Option<FillReport>) -> Self {
        let window_s = opts.duration.as_secs_f64();
        Self {
            host: opts.host.clone(),
            port: opts.port,
            protocol: opts.protocol,
            open_loop: opts.rate_per_s.is_some(),
            rate_per_s: opts.rate_per_s,
            connections: opts.connections,
            pipeline: opts.pipeline,
            threads: opts.threads,
            window_s,
            answered: s.answered(),
            throughput_per_s: s.answered() as f64 / window_s,
            ok: s.ok,
            nil: s.nil,
            errors: s.errors,
            busy: s.busy,
            unfinished: s.unfinished,
            unsent: s.unsent,
            overflowed: s.overflowed,
            connection_errors: s.connection_errors,
            last_error: s.last_error.clone(),
            latency: Percentiles::of(&s.latency),
            admitted_latency: Percentiles::of(&s.admitted),
            fill,
            latency_ns: s.latency.clone(),
            admitted_ns: s.admitted.clone(),
        }
    }

    /// Admitted operations answered within `slo_ns`, per second of the window.
    pub fn goodput_per_s(&self, slo_ns: u64) -> f64 {
        let within = if self.admitted_ns.is_empty() {
            0
        } else {
            self.admitted_ns.count_between(0, slo_ns)
        };
        within as f64 / self.window_s
    }

    /// Prints the report as a few lines of text.
    pub fn print(&self) {
        if let Some(f) = &self.fill {
            println!(
                "fill: {} keys set in {:.2} s ({} errors)",
                f.keys, f.seconds, f.errors
            );
        }
        let mode = match self.rate_per_s {
            Some(r) => format!("open loop at {r:.0}/s"),
            None => "closed loop".into(),
        };
        println!(
            "{}:{} {:?}, {mode}, {} connections × pipeline {}, {} threads, {:.1} s window",
            self.host,
            self.port,
            self.protocol,
            self.connections,
            self.pipeline,
            self.threads,
            self.window_s
        );
        println!(
            "throughput: {:.0} ops/s ({} answered)",
            self.throughput_per_s, self.answered
        );
        println!(
            "replies: {} ok, {} nil, {} errors, {} busy; {} unfinished, {} unsent, {} overflowed, {} connection errors",
            self.ok, self.nil, self.errors, self.busy, self.unfinished, self.unsent, self.overflowed, self.connection_errors
        );
        let l = &self.latency;
        println!(
            "latency µs: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            l.p50_us, l.p99_us, l.p999_us, l.max_us, l.mean_us
        );
        if let Some(e) = &self.last_error {
            println!("last error: {e}");
        }
    }
}
