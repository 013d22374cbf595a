//! The `os-paging` configuration (real disk only): the same engine on the same file with
//! [`DeviceKind::Mmap`], the kernel's demand paging doing the I/O, run in a child process
//! inside a cgroup-v1 memory limit. The worker's side ([`run_os_paging_worker`]) and the
//! parent's ([`disk_points`]: start the worker in a fresh cgroup, read and print its points).

use std::path::{Path, PathBuf};

use serde_json::json;
use tamer_store::{Db, DeviceKind};

use super::driver::closed_loop;
use super::jobs::{JobContext, Meter, Payloads};
use super::measurement::{Measurement, Point};
use super::plan::{options_for, workload_seed, Config, Plan, Target, Workload};
use super::report::print_point;
use crate::output::BenchResult;
use crate::work::Work;
use crate::BenchOptions;

/// The os-paging configuration's own cache: small, so that the kernel's page cache (inside the
/// same memory budget) is the DRAM tier and the data is not held twice.
pub const OS_PAGING_ENGINE_CACHE_BYTES: u64 = 4 << 20;
/// Names the memory cgroup an os-paging worker joins (set by the parent).
pub const OS_PAGING_CGROUP_ENV: &str = "TAMER_OS_PAGING_CGROUP";

/// The os-paging worker (a child of `tamer bench tier`, started with the parent's arguments and
/// the hidden `--os-paging-worker OUT`): joins the parent's memory cgroup, opens the store the
/// parent left at `<data-dir>/tier.store` with [`DeviceKind::Mmap`], caps the cgroup at its
/// resident size + `plan.cache_bytes` (page cache included), runs the closed-loop workloads
/// exactly as the other configurations do, and writes its measurements to `out` as JSON.
pub fn run_os_paging_worker(options: &BenchOptions, plan: Plan, out: &Path) -> Result<(), String> {
    let cgroup = std::env::var_os(OS_PAGING_CGROUP_ENV)
        .map(PathBuf::from)
        .ok_or_else(|| {
            format!(
                "{OS_PAGING_CGROUP_ENV} is not set: the worker is started by `tamer bench tier`"
            )
        })?;
    crate::cgroup::join_self(&cgroup)?;
    let cpus = tamer_runtime::online_cpus();
    tamer_runtime::pin_to_cpu(cpus - 1);
    let path = options.data_dir.join("tier.store");
    drop_cached_pages(&path)?;
    let pages = plan.estimated_pages();
    let mut db_options = options_for(Config::Tamer, &plan, DeviceKind::Mmap, options.poll, pages);
    db_options.cache_bytes = OS_PAGING_ENGINE_CACHE_BYTES;
    let db =
        Db::open(&path, db_options).map_err(|e| format!("os-paging: opening the store: {e}"))?;
    let rss_after_open_bytes = crate::cgroup::vm_rss_bytes()?;
    let limit_bytes = rss_after_open_bytes + plan.cache_bytes;
    crate::cgroup::set_limit(&cgroup, limit_bytes)?;
    let work = Work::calibrate();
    let iterations = work.iterations_for(plan.work_ns);
    let payloads = Payloads::new(&plan, options.seed);
    let meter = Meter::new(plan.cores);
    let mut points = Vec::new();
    for &workload in &plan.workloads {
        let ctx = JobContext::new(&db, meter.clone(), payloads.of(workload), work, iterations);
        let m = closed_loop(
            &db,
            &plan,
            workload,
            &ctx,
            workload_seed(options.seed, workload),
        )?;
        points.push(json!({
            "workload": workload.name(),
            "ops": m.ops,
            "secs": m.secs,
            "p50_us": m.p50_us,
            "p99_us": m.p99_us,
            "errors": m.errors,
            "major_faults": m.major_faults,
        }));
    }
    db.close().map_err(|e| format!("os-paging: closing: {e}"))?;
    let report = json!({
        "rss_after_open_bytes": rss_after_open_bytes,
        "limit_bytes": limit_bytes,
        "max_usage_bytes": crate::cgroup::max_usage_of(&cgroup)?,
        "points": points,
    });
    std::fs::write(out, serde_json::to_vec_pretty(&report).expect("json"))
        .map_err(|e| format!("writing {}: {e}", out.display()))
}

/// Evicts `path`'s clean pages from the kernel's page cache, so the worker starts cold.
fn drop_cached_pages(path: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    // SAFETY: plain syscall on an open descriptor.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(())
}

/// What the os-paging worker measured, with its memory accounting.
struct OsPaging {
    points: Vec<(Workload, Measurement)>,
    limit_bytes: u64,
    max_usage_bytes: u64,
}

/// Runs the os-paging worker in a child process inside a fresh memory cgroup and reads its
/// report. The store must be closed (clean) at `<data-dir>/tier.store`.
fn run_os_paging(options: &BenchOptions) -> Result<OsPaging, String> {
    let cgroup = crate::cgroup::MemoryCgroup::create(
        &format!("tamer-os-paging-{}", std::process::id()),
        1 << 40,
    )?;
    let out = options.data_dir.join("os-paging-worker.json");
    let _ = std::fs::remove_file(&out);
    let exe = std::env::current_exe().map_err(|e| format!("locating this binary: {e}"))?;
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if !args.iter().any(|a| a == "tier") {
        return Err("the os-paging worker is started from `tamer bench tier` only".into());
    }
    args.push("--os-paging-worker".into());
    args.push(out.clone().into());
    let status = std::process::Command::new(exe)
        .args(args)
        .env(OS_PAGING_CGROUP_ENV, cgroup.path())
        .status()
        .map_err(|e| format!("starting the os-paging worker: {e}"))?;
    if !status.success() {
        return Err(format!("the os-paging worker failed ({status})"));
    }
    let text =
        std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    let report: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing the worker's report: {e}"))?;
    let u = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mut points = Vec::new();
    for p in report["points"].as_array().into_iter().flatten() {
        let workload: Workload = p["workload"].as_str().unwrap_or("").parse()?;
        let major_faults = u(p, "major_faults");
        points.push((
            workload,
            Measurement {
                ops: u(p, "ops"),
                secs: f(p, "secs"),
                p50_us: f(p, "p50_us"),
                p99_us: f(p, "p99_us"),
                errors: u(p, "errors"),
                // The kernel's reads are the faults; their latency is not observable here.
                misses: major_faults,
                major_faults,
                ..Measurement::default()
            },
        ));
    }
    Ok(OsPaging {
        points,
        limit_bytes: u(&report, "limit_bytes"),
        max_usage_bytes: u(&report, "max_usage_bytes"),
    })
}

/// The parent's side on the disk, after the in-process configurations closed the store: runs
/// the worker ([`run_os_paging`]), prints its limit and its points (normalized to `dram_ops`)
/// and returns the points. A worker that cannot run (no cgroup-v1 memory controller, no root)
/// is a note in `result`, and no points.
pub(super) fn disk_points(
    options: &BenchOptions,
    plan: &Plan,
    dram_ops: &[(Workload, f64)],
    result: &mut BenchResult,
) -> Vec<Point> {
    let os = match run_os_paging(options) {
        Ok(os) => os,
        Err(err) => {
            result.note(format!("os-paging skipped: {err}"));
            return Vec::new();
        }
    };
    println!(
        "  disk  os-paging: cgroup limit {} MiB (worker's RSS after open + {} MiB), peak use {} MiB",
        os.limit_bytes >> 20,
        plan.cache_bytes >> 20,
        os.max_usage_bytes >> 20
    );
    let mut points = Vec::with_capacity(os.points.len());
    for (workload, m) in os.points {
        let point = Point {
            target: Target::Disk,
            config: Config::OsPaging,
            workload,
            m,
            fio: Default::default(),
        };
        print_point(&point, plan, dram_ops);
        points.push(point);
    }
    points
}
