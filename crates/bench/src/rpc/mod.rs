//! `tamer bench rpc`: the server's figures (NeBuLa), tamer and its peers side by side.
//!
//! Every server is started fresh for each round, pinned with `taskset` to the same CPU
//! ([`Plan::server_cpu`]; `tamer serve --cores 1`), the load generator ([`crate::load`]) on
//! the other ([`Plan::load_cpu`]). Within a round the servers of a figure run in an order
//! rotated by the round; each figure is the median of its per-round ratios, and every input
//! is a row of the JSON. Throughput "at SLO": [`slo::search`]. Figures: `vs_redis_get`,
//! `vs_redis_set` (+ `_p16`), `vs_extstore` (+ redis-server's `maxmemory` behaviour),
//! `single_vs_partitioned_at_slo` (measured on 2 cores, `_sim16`/`_sim64` simulated by
//! [`sim`]), `overload_goodput_ratio` (+ `_redis`), `durable_set_vs_redis_aof`; and issue 25's
//! closed-loop ratios by redis-benchmark ([`closed`]: `get_p16_vs_redis`, `set_p16_vs_redis`,
//! `hset_p16_vs_redis`, `set_vs_redis`, `mset_vs_redis`, `durable_set_vs_aof`,
//! `durable_set_p16_vs_aof`, `cores2_vs_cores1_min`, CPU ns per request beside each).
//!
//! Modules: `closed` (the redis-benchmark figures), `plan`, `servers` (processes), `slo` (the rate search), `sim` (the queueing
//! simulation), `scenarios` (vs_redis, vs_extstore), `scenarios2` (partitioned, overload,
//! durable).

pub mod closed;
pub mod plan;
pub(crate) mod scenarios;
mod scenarios2;
pub mod servers;
pub mod sim;
pub mod slo;

use std::path::PathBuf;

pub use plan::Plan;

use crate::output::{BenchResult, RoundValues};
use crate::BenchOptions;

/// What a round's scenarios write to.
pub struct Ctx<'a> {
    /// The plan of the run.
    pub plan: &'a Plan,
    /// This round's seed.
    pub seed: u64,
    /// Directory for the servers' files.
    pub dir: PathBuf,
    result: &'a mut BenchResult,
    /// This round's values of each figure.
    values: RoundValues,
}

impl Ctx<'_> {
    /// The p99 objective, ns.
    pub fn slo_ns(&self) -> u64 {
        self.plan.slo_us * 1_000
    }

    /// `num ÷ den` of this round, printed with its inputs.
    pub fn ratio(&mut self, figure: &str, num: f64, den: f64) {
        self.values.ratio(figure, num, den);
    }

    /// A figure that is not a ratio (a fraction, a p99, a size).
    pub fn record(&mut self, figure: &str, value: f64) {
        self.values.record(figure, value);
    }

    /// Adds a JSON row to the result.
    pub fn row(&mut self, row: serde_json::Value) {
        self.result.rows.push(row);
    }
}

type Scenario = fn(&mut Ctx, usize) -> Result<(), String>;

/// Runs every figure's rounds; a failing scenario is noted and its figures stay n/a.
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("rpc", options.quick, options.seed);
    let missing: Vec<&str> = ["redis-server", "memcached", "taskset"]
        .into_iter()
        .filter(|p| !servers::have(p))
        .collect();
    if !missing.is_empty() {
        // As every bench: say so; the scenarios that need them fail below and are noted.
        result.note(format!(
            "missing peers: {} (scripts/install-peers.sh): their figures are null",
            missing.join(", ")
        ));
    }
    notes(&plan, &mut result);
    let dir = options.data_dir.join("rpc");
    let scenarios: [(&str, Scenario); 6] = [
        ("closed_loop", closed::round),
        ("vs_redis", scenarios::vs_redis),
        ("vs_extstore", scenarios::vs_extstore),
        ("single_vs_partitioned", scenarios2::partitioned),
        ("overload", scenarios2::overload),
        ("durable", scenarios2::durable),
    ];
    let mut values = RoundValues::default();
    let mut failures = Vec::new();
    for round in 0..plan.rounds {
        for (name, scenario) in scenarios {
            if !plan.only.is_empty() && !plan.only.iter().any(|o| o == name) {
                continue;
            }
            println!("rpc round {round}: {name}");
            let mut ctx = Ctx {
                plan: &plan,
                seed: options.seed ^ round as u64,
                dir: dir.clone(),
                result: &mut result,
                values: RoundValues::default(),
            };
            let outcome = scenario(&mut ctx, round);
            values.extend(std::mem::take(&mut ctx.values));
            if let Err(e) = outcome {
                failures.push(format!("round {round} {name}: {e}"));
            }
        }
    }
    for f in failures {
        result.note(f);
    }
    values.write_figures(&mut result);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(result)
}

fn notes(plan: &Plan, result: &mut BenchResult) {
    result.note(format!(
        "servers pinned to CPU {}, load generator to CPU {} (single_vs_partitioned: tamer on CPUs 0,1 with the generator); SLO p99 ≤ {} µs",
        plan.server_cpu, plan.load_cpu, plan.slo_us
    ));
    result.note(format!(
        "vs_extstore: budget {} MiB, {} keys of {} B ({}× the budget)",
        plan.budget_bytes >> 20,
        plan.ext_keys(),
        plan.ext_value_bytes,
        plan.data_factor
    ));
    result.note("single_vs_partitioned simulation: service times = one connection's closed-loop GET latencies on the shared server (round trip included); p99 objective 10 × their mean");
}
