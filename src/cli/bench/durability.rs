//! `tamer bench durability`: per-transaction durability vs its alternatives.

use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench durability`'s flags.
#[derive(Args)]
pub struct DurabilityArgs {
    #[command(flatten)]
    common: Common,
    /// Leave out the real disk (and redb).
    #[arg(long)]
    no_disk: bool,
    /// Leave out the emulated device.
    #[arg(long)]
    no_emulated: bool,
    /// The emulated device's read/write latency in µs (default 50; its flush takes 15 µs).
    #[arg(long)]
    latency_us: Option<u64>,
    /// Keys of the update and swap workloads (default 8000000; quick 200000; TATP,
    /// NewOrder and the queues are preloaded besides).
    #[arg(long)]
    keys: Option<u64>,
    /// MiB of cache of every store (default 32; quick 32); a multiple of 32 KiB.
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Interleaved rounds per device (default 5; quick 3).
    #[arg(long)]
    rounds: Option<usize>,
}

/// Runs the bench with these flags.
pub fn run(args: DurabilityArgs) -> ExitCode {
    let DurabilityArgs {
        common,
        no_disk,
        no_emulated,
        latency_us,
        keys,
        cache_mib,
        rounds,
    } = args;
    let options = common.options();
    let mut plan = tamer_bench::durability::Plan::new(options.quick);
    plan.disk &= !no_disk;
    plan.emulated &= !no_emulated;
    if let Some(us) = latency_us {
        plan.latency_ns = us.max(1) * 1_000;
    }
    if let Some(keys) = keys {
        plan.keys = keys.max(2);
    }
    if let Some(mib) = cache_mib {
        plan.cache_bytes = mib.max(1) << 20;
    }
    if let Some(rounds) = rounds {
        plan.rounds = rounds.max(1);
    }
    let result = tamer_bench::durability::run(&options, plan);
    super::finish(&options, result)
}
