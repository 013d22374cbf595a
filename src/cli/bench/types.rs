//! `tamer bench types`: hashes, lists, sets and sorted sets, tamer serve vs redis-server.

use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench types`'s flags.
#[derive(Args)]
pub struct TypesArgs {
    #[command(flatten)]
    common: Common,
    /// Interleaved rounds of the comparisons (default 3; quick 1).
    #[arg(long)]
    rounds: Option<usize>,
    /// Members of the large sorted set (default 10,000,000; quick 500,000).
    #[arg(long)]
    big_zset: Option<u64>,
    /// Run only these parts (vs_redis, ycsb_e, cold, big_zset; default all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// Runs the bench with these flags.
pub fn run(args: TypesArgs) -> ExitCode {
    let TypesArgs {
        common,
        rounds,
        big_zset,
        only,
    } = args;
    let options = common.options();
    let mut plan = tamer_bench::types::Plan::new(options.quick);
    if let Some(rounds) = rounds {
        plan.rounds = rounds.max(1);
    }
    if let Some(members) = big_zset {
        plan.big_zset = members.max(100);
    }
    plan.only = only;
    let result = tamer_bench::types::run(&options, plan);
    super::finish(&options, result)
}
