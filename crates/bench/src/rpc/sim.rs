//! A discrete-event simulation of one shared queue vs one queue per core (connections
//! pinned, `--dispatch partitioned`), first-come first-served, Poisson arrivals spread over
//! connections by weight, service times drawn from a measured sample. Each job starts at the
//! later of its arrival and the time its server frees (the earliest-free core of all for the
//! shared queue, its connection's core for the partitioned): exact for FCFS, so no event list
//! is needed. Bounded: `jobs` per run, [`SEARCH_STEPS`] runs per search.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::workload::Poisson;

/// Bisection steps of [`max_rate_at_slo`].
pub const SEARCH_STEPS: usize = 16;

/// How connections are queued on the cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queues {
    /// One queue: the next free core takes the next job.
    Shared,
    /// Each connection pinned to one core's queue.
    Partitioned,
}

/// What one simulation runs.
#[derive(Clone, Debug)]
pub struct SimSpec {
    /// Cores serving.
    pub cores: usize,
    /// Arrival share of each connection (normalized); connection `i` on core `i % cores`.
    pub weights: Vec<f64>,
    /// Service times, ns, sampled uniformly.
    pub service_ns: Vec<u64>,
    /// Jobs simulated.
    pub jobs: usize,
    /// Seed of the arrivals and service times.
    pub seed: u64,
}

impl SimSpec {
    /// Connections = 8 per core; the first `max(1, cores / 4)` carry `hot_share` of the
    /// arrivals (the measured run's skew, scaled).
    pub fn skewed(cores: usize, hot_share: f64, service_ns: Vec<u64>, seed: u64) -> Self {
        let conns = 8 * cores;
        let hot = (cores / 4).max(1);
        let weights = (0..conns)
            .map(|i| {
                if i < hot {
                    hot_share / hot as f64
                } else {
                    (1.0 - hot_share) / (conns - hot) as f64
                }
            })
            .collect();
        Self {
            cores,
            weights,
            service_ns,
            jobs: 200_000,
            seed,
        }
    }
}

/// Sojourn times (ns) of `spec.jobs` jobs at `rate_per_s`.
pub fn run(spec: &SimSpec, queues: Queues, rate_per_s: f64) -> Vec<u64> {
    assert!(!spec.service_ns.is_empty() && spec.cores > 0 && !spec.weights.is_empty());
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let total: f64 = spec.weights.iter().sum();
    let cumulative: Vec<f64> = spec
        .weights
        .iter()
        .scan(0.0, |acc, w| {
            *acc += w / total;
            Some(*acc)
        })
        .collect();
    let arrivals = Poisson::new(rate_per_s);
    let mut free_ns = vec![0u64; spec.cores];
    let mut now = 0u64;
    let mut sojourn = Vec::with_capacity(spec.jobs);
    for _ in 0..spec.jobs {
        now += arrivals.next_gap_ns(&mut rng);
        let service = spec.service_ns[rng.gen_range(0..spec.service_ns.len())];
        let core = match queues {
            Queues::Shared => (0..spec.cores)
                .min_by_key(|&c| free_ns[c])
                .expect("cores > 0"),
            Queues::Partitioned => {
                let u: f64 = rng.gen();
                let conn = cumulative
                    .partition_point(|&c| c < u)
                    .min(spec.weights.len() - 1);
                conn % spec.cores
            }
        };
        let start = now.max(free_ns[core]);
        free_ns[core] = start + service;
        sojourn.push(start + service - now);
    }
    sojourn
}

/// The p99 of `values`.
pub fn p99(values: &mut [u64]) -> u64 {
    crate::output::percentile(values, 99.0).unwrap_or(0)
}

/// The highest arrival rate whose p99 sojourn is within `slo_ns` (bisection up to the
/// cores' capacity).
pub fn max_rate_at_slo(spec: &SimSpec, queues: Queues, slo_ns: u64) -> f64 {
    let mean_ns = spec.service_ns.iter().sum::<u64>() as f64 / spec.service_ns.len() as f64;
    let (mut lo, mut hi) = (0.0, spec.cores as f64 * 1e9 / mean_ns);
    for _ in 0..SEARCH_STEPS {
        let mid = (lo + hi) / 2.0;
        if p99(&mut run(spec, queues, mid)) <= slo_ns {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exponential(mean_ns: f64, n: usize, seed: u64) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| (-rng.gen_range(f64::MIN_POSITIVE..1.0f64).ln() * mean_ns) as u64)
            .collect()
    }

    /// Erlang C: the mean sojourn of M/M/c.
    fn mmc_mean_sojourn(c: usize, lambda: f64, mu: f64) -> f64 {
        let a = lambda / mu;
        let rho = a / c as f64;
        let mut term = 1.0;
        let mut sum = 1.0;
        for k in 1..c {
            term *= a / k as f64;
            sum += term;
        }
        let last = term * a / c as f64 / (1.0 - rho);
        let p_wait = last / (sum + last);
        p_wait / (c as f64 * mu - lambda) + 1.0 / mu
    }

    fn mean(v: &[u64]) -> f64 {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }

    /// The shared queue is M/M/4 at ρ = 0.8: mean sojourn within 4 % of Erlang C's. The
    /// partitioned queues with equal weights are 4 × M/M/1: mean 1/(μ − λ/4). Catches: the
    /// shared queue picking a core other than the earliest free, a job started before its
    /// arrival or its server, a wrong connection-to-core mapping.
    #[test]
    fn matches_mmc_formulas() {
        let seed = std::env::var("TAMER_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        eprintln!("TAMER_TEST_SEED={seed}");
        let mean_ns = 10_000.0;
        let mu = 1e9 / mean_ns;
        let lambda = 0.8 * 4.0 * mu;
        let spec = SimSpec {
            cores: 4,
            weights: vec![1.0; 16],
            service_ns: exponential(mean_ns, 200_000, seed),
            jobs: 400_000,
            seed,
        };
        let shared = mean(&run(&spec, Queues::Shared, lambda)) / 1e9;
        let expect = mmc_mean_sojourn(4, lambda, mu);
        assert!(
            (shared / expect - 1.0).abs() < 0.04,
            "shared {shared} vs M/M/4 {expect}"
        );
        let part = mean(&run(&spec, Queues::Partitioned, lambda)) / 1e9;
        let expect = 1.0 / (mu - lambda / 4.0);
        assert!(
            (part / expect - 1.0).abs() < 0.06,
            "partitioned {part} vs M/M/1 {expect}"
        );
    }

    /// Skewed connections: one shared queue sustains more load at the SLO than pinned
    /// queues. Catches: the partitioned queues ignoring the weights, a search not monotone.
    #[test]
    fn shared_beats_partitioned_under_skew() {
        let mut spec = SimSpec::skewed(8, 0.5, exponential(10_000.0, 50_000, 3), 3);
        spec.jobs = 50_000;
        let shared = max_rate_at_slo(&spec, Queues::Shared, 100_000);
        let part = max_rate_at_slo(&spec, Queues::Partitioned, 100_000);
        assert!(shared > 1.3 * part, "shared {shared} partitioned {part}");
        assert!(shared < 8.0 * 1e5);
    }
}
