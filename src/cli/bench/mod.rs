//! `tamer bench`: each bench's flags and plan, then its result printed and written as JSON.

mod apps;
mod durability;
mod microsecond;
mod rpc;
mod tier;
mod types;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tamer_bench::output::BenchResult;
use tamer_bench::BenchOptions;

#[derive(Subcommand)]
pub enum Bench {
    /// The server's figures: tamer serve vs redis-server and memcached (extstore),
    /// pinned side by side: throughput at a p99 SLO, single vs partitioned queues (measured
    /// and simulated), overload goodput, durable SETs.
    Rpc(rpc::RpcArgs),
    /// Figures for hashes, lists, sets and sorted sets: tamer serve vs
    /// redis-server in DRAM (leaderboard, queue, session hash, YCSB-E through the embedded
    /// API), then tamer alone with its data 30× its cache, and a large sorted set in a small
    /// cache.
    Types(types::TypesArgs),
    /// Issue 24's application figures, tamer serve vs redis-server pinned side by side:
    /// EVALSHA of a 3-command script, pub/sub fan-out to 100 subscribers, GETs with client
    /// tracking on, and the cost of a restricted ACL user's checks.
    Apps(apps::AppsArgs),
    /// User-level thread switch vs OS thread switch.
    Runtime(Common),
    /// 4 KiB random reads at queue depths 1..128: tamer io_uring and sync devices vs fio.
    Device(Common),
    /// The killer-microsecond study: normalized performance vs threads per core, latency, MLP, mechanism.
    Microsecond(microsecond::MicrosecondArgs),
    /// AstriFlash's Figures 9 and 10: the store with a small cache (switch-on-miss, FIFO,
    /// flash-sync) vs all in DRAM, on the emulated 50 µs device and the disk; p99 vs load.
    Tier(tier::TierArgs),
    /// LAD's evaluation: per-transaction durability (staging queues + group commit) vs
    /// volatile, periodic, a group-committed redo log and redb, on the emulated device and disk.
    Durability(durability::DurabilityArgs),
}

/// The flags every bench takes.
#[derive(Args)]
pub struct Common {
    /// CI-sized run (under a minute).
    #[arg(long)]
    quick: bool,
    /// Write the JSON result here (default: <data-dir>/bench/<bench>.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write SVG plots into this directory (default: <data-dir>/bench).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Directory for benchmark data files; must support O_DIRECT (not tmpfs).
    #[arg(long, default_value = "tamer-data")]
    data_dir: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Never sleep waiting for the real disk: spin on the io_uring completion queue instead of
    /// blocking in the kernel (costs a whole core; the emulator is always polled).
    #[arg(long)]
    poll: bool,
}

impl Common {
    fn options(&self) -> BenchOptions {
        BenchOptions {
            quick: self.quick,
            json: self.json.clone(),
            svg: self.svg.clone(),
            data_dir: self.data_dir.clone(),
            seed: self.seed,
            poll: self.poll,
        }
    }
}

/// `tamer bench <which>`.
pub fn run(which: Bench) -> ExitCode {
    match which {
        Bench::Rpc(args) => rpc::run(args),
        Bench::Types(args) => types::run(args),
        Bench::Apps(args) => apps::run(args),
        Bench::Runtime(common) => {
            let options = common.options();
            let result = Ok(tamer_bench::runtime::run(&options));
            finish(&options, result)
        }
        Bench::Device(common) => {
            let options = common.options();
            let result = tamer_bench::device::run(&options);
            finish(&options, result)
        }
        Bench::Microsecond(args) => microsecond::run(args),
        Bench::Tier(args) => tier::run(args),
        Bench::Durability(args) => durability::run(args),
    }
}

/// Prints a bench's figures and writes its JSON (and says where, and where its plots went).
fn finish(options: &BenchOptions, result: Result<BenchResult, String>) -> ExitCode {
    let result = match result {
        Ok(result) => result,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    result.print_figures();
    let json_path = options.json_path(&result.bench);
    if let Err(err) = result.write_json(&json_path) {
        eprintln!("error: writing {}: {err}", json_path.display());
        return ExitCode::FAILURE;
    }
    println!("\nJSON: {}", json_path.display());
    for plot in &result.plots {
        println!("plot: {plot}");
    }
    ExitCode::SUCCESS
}
