//! `tamer bench tier`: AstriFlash's Figures 9 and 10, measured where it runs.
//!
//! One engine ([`tamer_store::Db`]), one data set per device, several configurations that
//! differ only in their options:
//!
//! - `dram`: a cache at least as large as the data set (2× the file, so that the 8-way sets
//!   hardly ever overflow); measured right after the load, warm;
//! - `tamer`: a small cache (`--quick`: 32 MiB for 1 GiB of values), switch-on-miss, AstriFlash's
//!   priority + aging scheduler;
//! - `tamer-fifo`: the same with [`Policy::Fifo`](tamer_runtime::Policy::Fifo);
//! - `flash-sync`: the same cache, but a miss blocks the core
//!   ([`tamer_runtime::io::WaitMode::Spin`] through
//!   [`DbOptions::miss_wait`](tamer_store::DbOptions::miss_wait));
//! - `os-paging` (real disk only): the same engine with
//!   [`DeviceKind::Mmap`](tamer_store::DeviceKind::Mmap): the data file is
//!   mapped and the kernel's demand paging does the I/O; the engine keeps only a 4 MiB cache
//!   of its own, and a child process runs it inside a cgroup-v1 memory limit of its resident
//!   size after opening + the tiered cache bytes, page cache included. A fault blocks the
//!   core. The emulated device has no kernel block device to page from, so there is no
//!   emulated os-paging point.
//!
//! Each runs YCSB-B and YCSB-C (Zipfian 0.99, 1 KiB values) and a TATP-like mix (rows of
//! `tatp_row_bytes`) with `work_ns` of calibrated CPU work per job, on the emulated 50 µs
//! device and on the real disk (io_uring on a file under the data dir).
//!
//! Load generation: one OS thread (the *feeder*, pinned to the last CPU, away from the
//! store's executors) submits every operation as a job to the store's runtime. Closed loop:
//! it keeps `population` jobs outstanding (twice the user-level threads, so that new work is
//! always waiting and the scheduling policy matters). Open loop (Figure 10): Poisson
//! arrivals; a job the runtime's bounded queue refuses is dropped (a NACK) and counted.
//! Latency runs from submission (closed loop) or the scheduled arrival time (open loop) to the
//! job's end: queueing in the runtime, CPU work, the operation and its misses.
//!
//! The modules, one job each:
//!
//! - `plan`: the workloads, configurations, devices, the [`Plan`], sizing, store options,
//!   seeds;
//! - `measurement`: what a point produced ([`Measurement`], [`Point`], [`LoadPoint`]) and the
//!   ratios derived from it;
//! - `jobs`: one job: its operations, payloads, meter and runtime job;
//! - `driver`: the feeder: the load, the closed loop, the open loop, the DMA engine;
//! - `context`: what the phases of one device's run share;
//! - `device_run`: one device's run, phase by phase;
//! - `device_results`: what one device's run measured (`DeviceRun`);
//! - `fio`: fio's random reads on the store's file, beside a point or at its peak;
//! - `interleave`: `dram` and `tamer` in alternating closed-loop windows;
//! - `equal_load`: `tamer` and `flash-sync` at equal load, alternating open-loop windows;
//! - `os_paging`: the os-paging worker in its memory cgroup, and the parent's side;
//! - `utilization`: the disk's utilization, store windows alternating with fio;
//! - `report`: the printed table, the figures, the JSON rows, the plots.

mod context;
mod device_results;
mod device_run;
mod driver;
mod equal_load;
mod fio;
mod interleave;
mod jobs;
mod measurement;
mod os_paging;
mod plan;
mod policy_rounds;
mod report;
mod utilization;

pub use driver::major_faults;
pub use measurement::{fio_queue_depth, ratio, LoadPoint, Measurement, Point};
pub use os_paging::{run_os_paging_worker, OS_PAGING_CGROUP_ENV, OS_PAGING_ENGINE_CACHE_BYTES};
pub use plan::{dram_cache_bytes, estimated_pages, Config, Plan, Target, Workload};
pub use report::figures;

use device_results::DeviceRun;
use device_run::run_device;

use crate::device::fio_path;
use crate::output::BenchResult;
use crate::work::Work;
use crate::BenchOptions;

/// Runs the bench: every configuration on each device of the plan (the emulated device
/// first), then the figures, rows and plots.
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("tier", options.quick, options.seed);
    let cpus = tamer_runtime::online_cpus();
    if plan.cores >= cpus {
        result.note(format!(
            "the feeder thread shares a CPU with an executor ({} cores on {cpus} CPUs)",
            plan.cores
        ));
    }
    result.note(format!(
        "{} user-level threads per core, {} jobs outstanding in the closed loop",
        plan.threads_per_core,
        plan.population()
    ));
    tamer_runtime::pin_to_cpu(cpus - 1);
    let work = Work::calibrate();
    let fio = fio_path();
    if fio.is_none() && plan.disk {
        result.note(
            "fio is not installed: run scripts/install-peers.sh; device_iops_utilization is null",
        );
    }
    if plan.emulated {
        result.note("os-paging runs on the real disk only: the kernel pages from a block device, which the emulator is not");
    }
    report::print_header(&plan);
    let mut all = DeviceRun::default();
    let targets: Vec<Target> = [(plan.emulated, Target::Emulated), (plan.disk, Target::Disk)]
        .into_iter()
        .filter_map(|(on, t)| on.then_some(t))
        .collect();
    for target in targets {
        let run = run_device(target, &plan, options, work, fio.as_deref(), &mut result)?;
        all.points.extend(run.points);
        all.load.extend(run.load);
        all.interleaved.extend(run.interleaved);
        all.policy.extend(run.policy);
        all.budget.extend(run.budget);
        all.utilization.extend(run.utilization);
        all.fio_peak = run.fio_peak.or(all.fio_peak.take());
    }
    report::report(options, &plan, &all, &mut result);
    Ok(result)
}
