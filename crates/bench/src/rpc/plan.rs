//! Sizes, durations and objectives of `tamer bench rpc`, quick and full.

use std::time::Duration;

/// Sizes, durations and objectives of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Interleaved rounds of every comparison.
    pub rounds: usize,
    /// The p99 objective of every "at SLO" figure.
    pub slo_us: u64,
    /// Measured window of one step of the SLO search (and of a closed-loop probe).
    pub step: Duration,
    /// Run before each measured window (not measured).
    pub warmup: Duration,
    /// Keys of the in-DRAM data set (vs_redis, overload, durable), `value_bytes` each.
    pub keys: u64,
    /// Bytes of each in-DRAM value.
    pub value_bytes: usize,
    /// The DRAM budget of vs_extstore and single_vs_partitioned (tamer's cache, memcached's
    /// `-m`, redis's `maxmemory`).
    pub budget_bytes: u64,
    /// The flash data set is this many budgets.
    pub data_factor: u64,
    /// Bytes of each value of the flash data set.
    pub ext_value_bytes: usize,
    /// Length of the overload scenario's window.
    pub overload: Duration,
    /// Length of the durable-SET scenario's window.
    pub durable: Duration,
    /// redis-benchmark requests of a pipelined closed-loop test (`closed`; the others run a
    /// share of it).
    pub closed_requests: u64,
    /// CPUs of the server under test and of the load generator (`taskset -c`).
    pub server_cpu: usize,
    /// The load generator's CPU.
    pub load_cpu: usize,
    /// Cores of the single-vs-partitioned simulation.
    pub sim_cores: Vec<usize>,
    /// Run only these scenarios (closed_loop, vs_redis, vs_extstore, single_vs_partitioned,
    /// overload, durable); empty: all.
    pub only: Vec<String>,
}

impl Plan {
    /// The full run's plan, or the CI-sized one (`quick`).
    pub fn new(quick: bool) -> Self {
        let ms = Duration::from_millis;
        Self {
            rounds: if quick { 1 } else { 3 },
            slo_us: 1_000,
            step: if quick { ms(600) } else { ms(1_500) },
            warmup: if quick { ms(200) } else { ms(500) },
            keys: 100_000,
            value_bytes: 64,
            budget_bytes: if quick { 16 << 20 } else { 64 << 20 },
            data_factor: 30,
            ext_value_bytes: 4_000,
            overload: if quick { ms(10_000) } else { ms(60_000) },
            durable: if quick { ms(2_000) } else { ms(5_000) },
            closed_requests: if quick { 100_000 } else { 400_000 },
            server_cpu: 1,
            load_cpu: 0,
            sim_cores: vec![2, 16, 64],
            only: Vec::new(),
        }
    }

    /// Keys of the flash data set.
    pub fn ext_keys(&self) -> u64 {
        self.budget_bytes * self.data_factor / self.ext_value_bytes as u64
    }
}
