//! Admission (NeBuLa): a bound on queued work derived from the latency objective
//! (`--slo-us`) and measured service, so that what is admitted meets the objective and what
//! is not gets an immediate `-BUSY` instead of queueing without bound.
//!
//! The decision is a pure function of a [`Snapshot`] ([`decide`]), tested rule by rule. The
//! network (under its lock) keeps the [`Meter`] that feeds it: the requests admitted and not yet
//! finished, the drain rate measured over busy time (time with work in the server: the
//! server's capacity while it is loaded, whatever the mix of hits and device misses), and the
//! mean time one request spends in its job. A batch that arrives when `queued` requests are
//! ahead waits about `queued / rate`, then runs; it is admitted when that fits the objective.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::stats::AdmissionStats;

/// Requests admitted and not finished, at most, whatever the objective (a bound on the
/// memory queued requests hold besides each connection's own bounds).
pub const QUEUED_REQUESTS_MAX: usize = 65_536;
/// Busy time that makes one measurement of the drain rate, with [`WINDOW_REQUESTS_MIN`].
const WINDOW_BUSY_NS_MIN: u64 = 5_000_000;
/// Completions that make one measurement of the drain rate, with [`WINDOW_BUSY_NS_MIN`].
const WINDOW_REQUESTS_MIN: u64 = 64;
/// Weight of a new window in the drain-rate average (in 1/8ths).
const RATE_WEIGHT_EIGHTHS: u64 = 3;

/// What admission decides from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Snapshot {
    /// Requests admitted and not finished.
    pub queued: usize,
    /// Requests in the batch asking to enter.
    pub incoming: usize,
    /// The latency objective in ns (`None`: no objective, only the hard bound).
    pub slo_ns: Option<u64>,
    /// Measured drain rate while busy, requests per second (`None`: not measured yet).
    pub rate_per_s: Option<f64>,
    /// Measured mean time of one request in its job, ns (`None`: not measured yet).
    pub service_ns: Option<u64>,
}

/// Admission's answer for one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: the batch is queued for its job.
    Admit,
    /// Refused by the objective: `-BUSY`.
    RefuseSlo,
    /// Refused by [`QUEUED_REQUESTS_MAX`]: `-BUSY`.
    RefuseFull,
}

/// The decision for `s`:
/// 1. nothing queued: admit (a batch alone never waits for others, so progress is certain);
/// 2. past [`QUEUED_REQUESTS_MAX`]: refuse;
/// 3. no objective, or nothing measured yet: admit;
/// 4. admit when the expected wait, `(queued + incoming) / rate`, plus one request's
///    service fits the objective; refuse otherwise.
pub fn decide(s: Snapshot) -> Decision {
    if s.queued == 0 {
        return Decision::Admit;
    }
    if s.queued + s.incoming > QUEUED_REQUESTS_MAX {
        return Decision::RefuseFull;
    }
    let (Some(slo_ns), Some(rate), Some(service_ns)) = (s.slo_ns, s.rate_per_s, s.service_ns)
    else {
        return Decision::Admit;
    };
    debug_assert!(rate > 0.0, "a measured rate is positive");
    let wait_ns = (s.queued + s.incoming) as f64 / rate * 1e9;
    if wait_ns + service_ns as f64 <= slo_ns as f64 {
        Decision::Admit
    } else {
        Decision::RefuseSlo
    }
}

/// The measurements behind [`Snapshot`], kept under the network's lock.
#[derive(Debug)]
pub struct Meter {
    queued: usize,
    busy_since: Option<Instant>,
    window_busy_ns: u64,
    window_done: u64,
    rate_per_s: Option<f64>,
    service_ns: Option<u64>,
}

impl Default for Meter {
    fn default() -> Self {
        Self::new()
    }
}

impl Meter {
    /// A meter with nothing queued and nothing measured yet.
    pub fn new() -> Self {
        Self {
            queued: 0,
            busy_since: None,
            window_busy_ns: 0,
            window_done: 0,
            rate_per_s: None,
            service_ns: None,
        }
    }

    /// The snapshot for a batch of `incoming` requests under `slo_ns`.
    pub fn snapshot(&self, incoming: usize, slo_ns: Option<u64>) -> Snapshot {
        Snapshot {
            queued: self.queued,
            incoming,
            slo_ns,
            rate_per_s: self.rate_per_s,
            service_ns: self.service_ns,
        }
    }

    /// `n` requests were admitted at `now`.
    pub fn admitted(&mut self, n: usize, now: Instant) {
        if self.queued == 0 {
            self.busy_since = Some(now);
        }
        self.queued += n;
        assert!(
            self.queued <= QUEUED_REQUESTS_MAX,
            "admitted past the hard bound"
        );
    }

    /// `n` requests finished at `now`, having spent `job_ns` in their job.
    pub fn finished(&mut self, n: usize, job_ns: u64, now: Instant) {
        assert!(n <= self.queued, "finished {n} of {} admitted", self.queued);
        self.queued -= n;
        self.window_done += n as u64;
        if n > 0 {
            let per = job_ns / n as u64;
            self.service_ns = Some(match self.service_ns {
                None => per,
                Some(old) => (old * 7 + per) / 8,
            });
        }
        if let Some(since) = self.busy_since {
            self.window_busy_ns += now.saturating_duration_since(since).as_nanos() as u64;
            self.busy_since = (self.queued > 0).then_some(now);
        }
        if self.window_busy_ns >= WINDOW_BUSY_NS_MIN && self.window_done >= WINDOW_REQUESTS_MIN {
            let rate = self.window_done as f64 * 1e9 / self.window_busy_ns as f64;
            self.rate_per_s = Some(match self.rate_per_s {
                None => rate,
                Some(old) => {
                    let w = RATE_WEIGHT_EIGHTHS as f64 / 8.0;
                    old * (1.0 - w) + rate * w
                }
            });
            self.window_busy_ns = 0;
            self.window_done = 0;
        }
    }

    /// `n` admitted requests were dropped unrun at `now` (their connection closed first, or
    /// the runtime's queue refused them): no longer queued, and not a completion.
    pub fn dropped(&mut self, n: usize, now: Instant) {
        assert!(n <= self.queued, "dropped {n} of {} admitted", self.queued);
        self.queued -= n;
        if self.queued == 0 {
            if let Some(since) = self.busy_since.take() {
                self.window_busy_ns += now.saturating_duration_since(since).as_nanos() as u64;
            }
        }
    }

    /// Publishes the measurements to `stats`.
    pub(crate) fn publish(&self, stats: &AdmissionStats) {
        let rate = self.rate_per_s.unwrap_or(0.0) as u64;
        stats.rate_per_s.store(rate, Ordering::Relaxed);
        stats
            .service_ns
            .store(self.service_ns.unwrap_or(0), Ordering::Relaxed);
    }

    /// Requests admitted and not finished.
    pub fn queued(&self) -> usize {
        self.queued
    }
}

#[cfg(test)]
mod tests;
