//! `tamer bench types`: the figures of the collection types, tamer and redis-server
//! side by side.
//!
//! - **In DRAM, vs redis** (`types_vs_redis_*`): a leaderboard (`ZINCRBY`/`ZADD` + top-10
//!   `ZREVRANGE` + `ZREVRANK`), a queue (`LPUSH` producers, `BRPOP` consumers), a session hash
//!   (`HSET` of 10-50 fields, `HGETALL`), each on redis-server and on `tamer serve` with its
//!   data in the cache, every server pinned to the same CPU ([`Plan::server_cpu`]) with one
//!   core, the driver threads on the other; and YCSB-E (95 % short range scans, 5 % inserts)
//!   through tamer's embedded API against redis-server's sorted set (`ZRANGEBYLEX`, `ZADD`)
//!   over the network. Rounds alternate the servers; each figure is the median of its
//!   per-round ratios; `types_vs_redis_min` is the lowest.
//! - **Data 30× the cache** (tamer alone): the session workload's throughput and p99, and
//!   `cold_collection_reads_per_op`: device reads per point operation (`HGET`, `ZSCORE`,
//!   `SISMEMBER`, `LINDEX` near an end) on large collections (trees) not in DRAM.
//! - **A large sorted set** ([`Plan::big_zset`] members, 10 million in the full run) within a
//!   small cache ([`Plan::big_cache_bytes`], 64 MiB): `ZADD`, `ZRANK`, `ZRANGE` latency p50 and
//!   p99 from one connection. It is loaded with a large cache and `--durability none`, then the
//!   server restarts with the small one (so the figure is the cold set's, not the load's).
//!
//! Modules: `client` (RESP over blocking sockets, closed loops), `scenarios` (the in-DRAM
//! comparisons), `cold` (30× and the large sorted set), `ycsb` (the embedded YCSB-E).

pub mod client;
mod cold;
mod scenarios;
mod ycsb;

use std::path::PathBuf;
use std::time::Duration;

use crate::output::{BenchResult, RoundValues};
use crate::rpc::servers;
use crate::BenchOptions;

/// Sizes and durations of `tamer bench types`, quick and full.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Interleaved rounds of the comparisons.
    pub rounds: usize,
    /// Measured window of each workload.
    pub window: Duration,
    /// Run before each measured window.
    pub warmup: Duration,
    /// Members of the leaderboard; sessions (10-50 fields each); YCSB-E records.
    pub board_members: u64,
    /// Sessions (10-50 fields each).
    pub sessions: u64,
    /// YCSB-E records.
    pub ycsb_records: u64,
    /// tamer's cache when the data fits (and the embedded store's).
    pub dram_cache_bytes: u64,
    /// tamer's cache for the 30× data set.
    pub cold_cache_bytes: u64,
    /// Large collections of the cold point operations, and their elements.
    pub cold_collections: u64,
    /// Elements of each of them.
    pub cold_elements: u64,
    /// Members of the large sorted set, its cache, its load cache.
    pub big_zset: u64,
    /// Cache of the large sorted set.
    pub big_cache_bytes: u64,
    /// Cache it is loaded with.
    pub big_load_cache_bytes: u64,
    /// Latency samples per operation on the large sorted set.
    pub big_samples: u64,
    /// The server's CPU.
    pub server_cpu: usize,
    /// The load generator's CPU.
    pub load_cpu: usize,
    /// Parts to run (by name); empty runs every part.
    pub only: Vec<String>,
}

impl Plan {
    /// The full run's plan, or the CI-sized one (`quick`).
    pub fn new(quick: bool) -> Self {
        let ms = Duration::from_millis;
        Self {
            rounds: if quick { 1 } else { 3 },
            window: if quick { ms(1_500) } else { ms(5_000) },
            warmup: if quick { ms(300) } else { ms(1_000) },
            board_members: if quick { 20_000 } else { 100_000 },
            sessions: if quick { 5_000 } else { 50_000 },
            ycsb_records: if quick { 50_000 } else { 200_000 },
            dram_cache_bytes: if quick { 128 << 20 } else { 512 << 20 },
            cold_cache_bytes: if quick { 8 << 20 } else { 64 << 20 },
            cold_collections: if quick { 40 } else { 200 },
            cold_elements: if quick { 2_000 } else { 5_000 },
            big_zset: if quick { 500_000 } else { 10_000_000 },
            big_cache_bytes: if quick { 8 << 20 } else { 64 << 20 },
            big_load_cache_bytes: if quick { 512 << 20 } else { 4 << 30 },
            big_samples: if quick { 1_000 } else { 5_000 },
            server_cpu: 1,
            load_cpu: 0,
            only: Vec::new(),
        }
    }

    /// Sessions of the 30× data set: ~1.2 KB each (10-50 fields of 20 B), 30 caches' worth.
    pub fn cold_sessions(&self) -> u64 {
        30 * self.cold_cache_bytes / 1_200
    }
}

/// What a scenario writes to.
pub struct Ctx<'a> {
    /// The plan of the run.
    pub plan: &'a Plan,
    /// This round's seed.
    pub seed: u64,
    /// Directory for the servers' files.
    pub dir: PathBuf,
    /// Poll for completions instead of sleeping.
    pub poll: bool,
    result: &'a mut BenchResult,
    values: RoundValues,
}

impl Ctx<'_> {
    /// `num ÷ den` of this round, printed with its inputs.
    pub fn ratio(&mut self, figure: &str, num: f64, den: f64) {
        self.values.ratio(figure, num, den);
    }

    /// Records a figure of this round.
    pub fn record(&mut self, figure: &str, value: f64) {
        self.values.record(figure, value);
    }

    /// Adds a JSON row to the result.
    pub fn row(&mut self, row: serde_json::Value) {
        self.result.rows.push(row);
    }

    /// Records a note about the run.
    pub fn note(&mut self, note: String) {
        self.result.note(note);
    }
}

type Scenario = fn(&mut Ctx, usize) -> Result<(), String>;

/// Runs every scenario's rounds; a failing scenario is noted and its figures stay null.
#[expect(
    clippy::too_many_lines,
    reason = "the bench's outline: the peers it needs, every scenario's rounds in their order, the notes of those that fail"
)]
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("types", options.quick, options.seed);
    let missing: Vec<&str> = ["redis-server", "taskset"]
        .into_iter()
        .filter(|p| !servers::have(p))
        .collect();
    if !missing.is_empty() {
        result.note(format!(
            "missing peers: {} (scripts/install-peers.sh): their figures are null",
            missing.join(", ")
        ));
    }
    result.note(format!(
        "servers pinned to CPU {} with one core, driver threads on CPU {}; tamer serve \
         --durability none and redis-server without persistence in the DRAM comparisons",
        plan.server_cpu, plan.load_cpu
    ));
    let dir = options.data_dir.join("types");
    let _ = std::fs::create_dir_all(&dir);
    let per_round: [(&str, Scenario); 2] =
        [("vs_redis", scenarios::vs_redis), ("ycsb_e", ycsb::ycsb_e)];
    let once: [(&str, Scenario); 2] = [("cold", cold::cold), ("big_zset", cold::big_zset)];
    let mut values = RoundValues::default();
    let mut failures = Vec::new();
    let wanted = |name: &str| plan.only.is_empty() || plan.only.iter().any(|o| o == name);
    if let Some(unknown) = plan
        .only
        .iter()
        .find(|o| !per_round.iter().chain(&once).any(|(n, _)| n == o))
    {
        return Err(format!("--only: no part named {unknown}"));
    }
    let mut run_one = |name: &str, scenario: Scenario, round: usize, result: &mut BenchResult| {
        if !wanted(name) {
            return;
        }
        println!("types round {round}: {name}");
        let mut ctx = Ctx {
            plan: &plan,
            seed: options.seed ^ round as u64,
            dir: dir.clone(),
            poll: options.poll,
            result,
            values: RoundValues::default(),
        };
        let outcome = scenario(&mut ctx, round);
        values.extend(std::mem::take(&mut ctx.values));
        if let Err(e) = outcome {
            eprintln!("types {name}: {e}");
            failures.push(format!("round {round} {name}: {e}"));
        }
    };
    for round in 0..plan.rounds {
        for (name, scenario) in per_round {
            run_one(name, scenario, round, &mut result);
        }
    }
    for (name, scenario) in once {
        run_one(name, scenario, 0, &mut result);
    }
    for f in failures {
        result.note(f);
    }
    let ratios: Vec<f64> = ["leaderboard", "queue", "session", "ycsb_e"]
        .iter()
        .filter_map(|w| values.median(&format!("types_vs_redis_{w}")))
        .collect();
    values.write_figures(&mut result);
    if ratios.len() == 4 {
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        result.figure("types_vs_redis_min", Some(min));
    } else {
        result.note("types_vs_redis_min: not every workload measured");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(result)
}
