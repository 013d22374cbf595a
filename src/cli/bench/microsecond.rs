//! `tamer bench microsecond`: normalized performance vs threads per core.

use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench microsecond`'s flags.
#[derive(Args)]
pub struct MicrosecondArgs {
    #[command(flatten)]
    common: Common,
    /// CPU work per round of accesses, in nanoseconds.
    #[arg(long, default_value_t = 1_000)]
    work_ns: u64,
    /// Emulated latencies to sweep, in µs (default 1,2,4,8,16,50; quick 1,4,16,50).
    #[arg(long, value_delimiter = ',')]
    latencies_us: Option<Vec<u64>>,
    /// MLP values to sweep at every latency (default 1,2,4; quick 1, plus 2,4 at 4 µs).
    #[arg(long, value_delimiter = ',')]
    mlp: Option<Vec<usize>>,
    /// Leave out the real disk.
    #[arg(long)]
    no_disk: bool,
    /// Duration of one emulated-device point, in ms (default 150; quick 40).
    #[arg(long)]
    point_ms: Option<u64>,
    /// Cores running the sweep (threads are per core); the DRAM baseline runs on as many.
    #[arg(long, default_value_t = 1)]
    cores: usize,
}

/// Runs the bench with these flags.
pub fn run(args: MicrosecondArgs) -> ExitCode {
    let MicrosecondArgs {
        common,
        work_ns,
        latencies_us,
        mlp,
        no_disk,
        point_ms,
        cores,
    } = args;
    let options = common.options();
    let mut plan = tamer_bench::microsecond::Plan::new(options.quick, work_ns);
    if let Some(latencies_us) = latencies_us {
        plan.latencies_ns = latencies_us.iter().map(|us| us * 1_000).collect();
    }
    if let Some(mlp) = mlp {
        if mlp
            .iter()
            .any(|&m| m == 0 || m > tamer_bench::microsecond::MAX_MLP)
        {
            eprintln!(
                "error: --mlp values must be 1..={}",
                tamer_bench::microsecond::MAX_MLP
            );
            return ExitCode::FAILURE;
        }
        plan.mlps = mlp;
        plan.extra_mlp_at_4us.clear();
    }
    plan.disk &= !no_disk;
    let cpus = tamer_runtime::online_cpus();
    if cores == 0 || cores > cpus {
        eprintln!("error: --cores must be 1..={cpus} (this machine's CPUs)");
        return ExitCode::FAILURE;
    }
    plan.cores = cores;
    if let Some(ms) = point_ms {
        plan.point_duration = std::time::Duration::from_millis(ms.max(1));
    }
    let result = tamer_bench::microsecond::run(&options, plan);
    super::finish(&options, result)
}
