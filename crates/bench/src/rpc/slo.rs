//! Throughput at a p99 objective: a closed-loop probe measures the capacity, then the open
//! loop steps its rate up through fractions of it ([`STEPS`]); the figure is the throughput
//! of the highest step whose p99 is within the SLO and which kept up with its rate (≥ 95 %).

use serde::Serialize;

use crate::load::{self, LoadOptions, LoadReport};

/// Open-loop rates tried, as fractions of the closed-loop capacity, lowest first.
pub const STEPS: [f64; 8] = [0.05, 0.1, 0.2, 0.4, 0.6, 0.75, 0.9, 1.05];

#[derive(Clone, Debug, Serialize)]
pub struct AtSlo {
    /// Closed-loop throughput (same connections, depth as the open loop's batch).
    pub capacity_per_s: f64,
    /// Throughput of the best step within the SLO (0 when none was).
    pub at_slo_per_s: f64,
    /// Each step: (rate, throughput, p99 µs).
    pub steps: Vec<(f64, f64, f64)>,
}

/// Runs the search on `base` (its `rate_per_s` is replaced).
pub fn search(base: &LoadOptions, slo_ns: u64) -> Result<AtSlo, String> {
    let mut closed = base.clone();
    closed.rate_per_s = None;
    closed.pipeline = base.batch;
    let capacity_per_s = load::run(&closed)?.throughput_per_s;
    let mut result = AtSlo {
        capacity_per_s,
        at_slo_per_s: 0.0,
        steps: Vec::new(),
    };
    for fraction in STEPS {
        let mut open = base.clone();
        let rate = (capacity_per_s * fraction).max(100.0);
        open.rate_per_s = Some(rate);
        let r = load::run(&open)?;
        let p99_us = r.latency.p99_us;
        result.steps.push((rate, r.throughput_per_s, p99_us));
        let kept_up = r.throughput_per_s >= 0.95 * rate && r.errors == 0 && r.overflowed == 0;
        if p99_us * 1e3 > slo_ns as f64 || !kept_up {
            break;
        }
        result.at_slo_per_s = result.at_slo_per_s.max(r.throughput_per_s);
    }
    Ok(result)
}

/// Up to 100,000 latency samples drawn from a report's histogram (each recorded value
/// repeated by its share).
pub fn samples(r: &LoadReport) -> Vec<u64> {
    let h = &r.latency_ns;
    if h.is_empty() {
        return Vec::new();
    }
    let scale = (100_000.0 / h.len() as f64).min(1.0);
    let mut out = Vec::new();
    for v in h.iter_recorded() {
        let n = ((v.count_at_value() as f64) * scale).round().max(1.0) as usize;
        out.extend(std::iter::repeat_n(v.value_iterated_to(), n));
    }
    out
}
