//! `tamer bench tier`: the store with a small cache vs all in DRAM.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench tier`'s flags.
#[derive(Args)]
pub struct TierArgs {
    #[command(flatten)]
    common: Common,
    /// CPU work per job (operation or transaction), in nanoseconds.
    #[arg(long, default_value_t = 2_000)]
    work_ns: u64,
    /// MiB of YCSB values (default 2048; quick 1024).
    #[arg(long)]
    data_mib: Option<u64>,
    /// MiB of cache of the tiered configurations (default 64; quick 32); a multiple of 32 KiB.
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Workloads (default ycsb-b,ycsb-c,tatp).
    #[arg(long, value_delimiter = ',')]
    workloads: Option<Vec<tamer_bench::tier::Workload>>,
    /// Leave out the real disk.
    #[arg(long)]
    no_disk: bool,
    /// Leave out the emulated device.
    #[arg(long)]
    no_emulated: bool,
    /// Measured window of one closed-loop point, in ms (default 3000; quick 500).
    #[arg(long)]
    point_ms: Option<u64>,
    /// Executors (cores) of the store; the load generator runs on the last CPU.
    #[arg(long, default_value_t = 1)]
    cores: usize,
    /// User-level threads per core (the closed loop keeps twice as many jobs outstanding;
    /// at most 4096 ÷ (2 × cores)).
    #[arg(long, default_value_t = 64)]
    threads: usize,
    /// Turn the store's background cleaner off (misses then write dirty victims back
    /// themselves, before their read).
    #[arg(long)]
    no_cleaner: bool,
    /// Copy the emulated device's data on the polling core instead of on the load
    /// generator's CPU (its stand-in for a DMA engine).
    #[arg(long)]
    no_dma_offload: bool,
    /// Internal: run as the os-paging worker (a child of this bench) and write its report
    /// here.
    #[arg(long, hide = true)]
    os_paging_worker: Option<PathBuf>,
}

/// Runs the bench with these flags.
pub fn run(args: TierArgs) -> ExitCode {
    let TierArgs {
        common,
        work_ns,
        data_mib,
        cache_mib,
        workloads,
        no_disk,
        no_emulated,
        point_ms,
        cores,
        threads,
        no_cleaner,
        no_dma_offload,
        os_paging_worker,
    } = args;
    let options = common.options();
    let mut plan = tamer_bench::tier::Plan::new(options.quick, work_ns);
    if let Some(mib) = data_mib {
        plan.data_bytes = mib.max(1) << 20;
    }
    if let Some(mib) = cache_mib {
        plan.cache_bytes = mib.max(1) << 20;
    }
    if let Some(workloads) = workloads {
        plan.workloads = workloads;
    }
    plan.disk &= !no_disk;
    plan.emulated &= !no_emulated;
    if let Some(ms) = point_ms {
        plan.measure = std::time::Duration::from_millis(ms.max(1));
    }
    let cpus = tamer_runtime::online_cpus();
    if cores == 0 || cores > cpus {
        eprintln!("error: --cores must be 1..={cpus} (this machine's CPUs)");
        return ExitCode::FAILURE;
    }
    plan.cores = cores;
    // The closed loop keeps 2 × threads × cores jobs outstanding, all of which must fit
    // the runtime's shared job queue.
    let queue = tamer_runtime::RuntimeConfig::default().global_queue;
    if threads == 0 || 2 * threads * cores > queue {
        eprintln!(
            "error: --threads must be 1..={} with {cores} core(s): the closed loop's 2 × threads × cores jobs must fit the runtime's {queue}-job queue",
            queue / (2 * cores)
        );
        return ExitCode::FAILURE;
    }
    plan.threads_per_core = threads;
    plan.cleaner = !no_cleaner;
    plan.dma_offload = !no_dma_offload;
    if let Some(out) = os_paging_worker {
        return match tamer_bench::tier::run_os_paging_worker(&options, plan, &out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: os-paging worker: {err}");
                ExitCode::FAILURE
            }
        };
    }
    let result = tamer_bench::tier::run(&options, plan);
    super::finish(&options, result)
}
