//! `tamer bench rpc`: tamer serve vs redis-server and memcached.

use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench rpc`'s own flags.
#[derive(Args)]
pub struct RpcArgs {
    #[command(flatten)]
    common: Common,
    /// The p99 objective of the "at SLO" figures, in µs.
    #[arg(long, default_value_t = 1_000)]
    slo_us: u64,
    /// Interleaved rounds (default 3; quick 1).
    #[arg(long)]
    rounds: Option<usize>,
    /// MiB of DRAM budget of vs_extstore (default 64; quick 16).
    #[arg(long)]
    budget_mib: Option<u64>,
    /// Run only these scenarios: closed_loop, vs_redis, vs_extstore, single_vs_partitioned
    /// (after vs_extstore: it reuses its store), overload, durable.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// Runs the bench with these flags.
pub fn run(args: RpcArgs) -> ExitCode {
    let options = args.common.options();
    let mut plan = tamer_bench::rpc::Plan::new(options.quick);
    plan.slo_us = args.slo_us.max(1);
    if let Some(rounds) = args.rounds {
        plan.rounds = rounds.max(1);
    }
    if let Some(mib) = args.budget_mib {
        plan.budget_bytes = mib.max(1) << 20;
    }
    plan.only = args.only;
    let result = tamer_bench::rpc::run(&options, plan);
    super::finish(&options, result)
}
