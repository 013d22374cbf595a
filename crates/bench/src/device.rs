//! `tamer bench device`: 4 KiB random reads on a filled O_DIRECT file at queue depths 1..128,
//! tamer's io_uring device (driven directly, and through the runtime: an executor whose QD
//! user-level threads each keep one read in flight) and its sync device next to fio (io_uring
//! engine) with the same parameters, interleaved per queue depth so that noise hits all alike.
//! Besides IOPS and latency, each contender's CPU time per I/O is measured.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tamer_device::{
    fill_with_data, now_ns, Arena, Completion, Device, DeviceFile, IoRequest, SyncDevice,
    UringConfig, UringDevice, BLOCK_SIZE,
};
use tamer_runtime::{Executor, IdleMode, RuntimeConfig};

use crate::output::{percentile, BenchResult};
use crate::plot::{write_svg, Chart, Series, YUnit};
use crate::BenchOptions;

/// Every contender (tamer, fio, the sync threads) runs on this CPU: a process next to the
/// disk's interrupts runs faster, so an unpinned comparison measures the scheduler's placement.
pub const BENCH_CPU: usize = 0;

/// Queue depths measured.
pub const QUEUE_DEPTHS: [usize; 5] = [1, 4, 16, 64, 128];

/// One measured configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Reads per second.
    pub iops: f64,
    /// Median read latency, µs.
    pub p50_us: f64,
    /// 99th-percentile read latency, µs.
    pub p99_us: f64,
    /// CPU time (user + system) per I/O, µs: tamer's measuring thread plus the process's
    /// io_uring kernel threads (`iou-*`: SQPOLL, io-wq workers); fio's job process (its
    /// `usr_cpu + sys_cpu` over the job's runtime). `None` where not measured (sync).
    pub cpu_us_per_io: Option<f64>,
    /// tamer's io_uring devices: `io_uring_enter` calls per I/O.
    pub enters_per_io: Option<f64>,
}

/// CPU time of the calling thread (user + system), ns; precise (the scheduler's runtime).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives on this stack.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time, ns, of the io_uring kernel threads (`iou-sqp-*`, `iou-wrk-*`) among the tasks
/// under `task_dir` (`/proc/self/task` for this process): from each task's `schedstat`
/// (first field, ns) or, without it, `stat` (utime + stime, in clock ticks).
pub fn io_threads_cpu_ns(task_dir: &Path) -> u64 {
    let Ok(tasks) = std::fs::read_dir(task_dir) else {
        return 0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.starts_with("iou-") {
            continue;
        }
        let schedstat = std::fs::read_to_string(path.join("schedstat")).ok();
        if let Some(ns) = schedstat
            .as_deref()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        {
            total += ns;
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // Fields after the parenthesized command: state is field 3, utime 14, stime 15.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        total += (ticks(11) + ticks(12)) * 1_000_000_000 / hz;
    }
    total
}

/// CPU time so far of this thread plus this process's io_uring kernel threads, ns.
fn cpu_now_ns() -> u64 {
    thread_cpu_ns() + io_threads_cpu_ns(Path::new("/proc/self/task"))
}

/// Opens (and fills on first use) the benchmark file of `size_bytes` under `dir`.
pub fn bench_file(dir: &Path, size_bytes: u64, seed: u64) -> Result<Arc<DeviceFile>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join("bench-device.dat");
    let marker = dir.join("bench-device.filled");
    let stamp = format!("{size_bytes} {seed}\n");
    let existing = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if existing > size_bytes {
        std::fs::remove_file(&path).map_err(|e| format!("resizing {}: {e}", path.display()))?;
    }
    let file = DeviceFile::open(&path, size_bytes).map_err(|e| e.to_string())?;
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(stamp.as_str()) {
        eprintln!(
            "filling {} ({} MiB) with data so reads touch the disk...",
            path.display(),
            size_bytes >> 20
        );
        fill_with_data(&file, seed).map_err(|e| e.to_string())?;
        std::fs::write(&marker, &stamp)
            .map_err(|e| format!("writing {}: {e}", marker.display()))?;
    }
    Ok(Arc::new(file))
}

fn random_offset(rng: &mut SmallRng, blocks: u64) -> u64 {
    rng.gen_range(0..blocks) * BLOCK_SIZE as u64
}

/// tamer's io_uring device driven like fio (io_uring engine, default `iodepth_batch_submit=1`):
/// `qd` reads always in flight on one core, completions reaped from the CQ ring, each
/// replacement's doorbell rung as soon as it is pushed, and the thread blocks (one
/// io_uring_enter waiting for one completion) only when the CQ is empty.
///
/// Ringing one doorbell for all the replacements of a batch of completions is slower at
/// mid queue depths on a virtio disk: the replacements reach the device together, complete
/// together, and the whole queue drains before the next refill (16 completions per wake at
/// QD 16), so the device idles while the core turns the batch around.
///
/// The one exception: the last replacement of a batch, when the core is about to wait, is not
/// rung on its own. `Device::wait` reaps first: when the CQ is empty, one io_uring_enter rings
/// its doorbell *and* waits (fio's QD 1 makes two: a submit, then a wait); when completions
/// are there, it rings at once and returns them. At QD 1 that is one syscall per read instead
/// of two. With `poll` (never wait) every replacement is rung at once.
pub fn measure_uring(
    file: &Arc<DeviceFile>,
    qd: usize,
    duration: Duration,
    seed: u64,
    poll: bool,
) -> Result<Measured, String> {
    let arena = Arc::new(Arena::new(qd as u32).map_err(|e| e.to_string())?);
    let entries = (qd as u32).next_power_of_two().max(8);
    let mut device = UringDevice::open(file.clone(), arena, UringConfig { entries })
        .map_err(|e| e.to_string())?;
    let blocks = file.capacity_bytes() / BLOCK_SIZE as u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    for frame in 0..qd as u32 {
        device
            .push(IoRequest::read(
                random_offset(&mut rng, blocks),
                frame,
                1,
                u64::from(frame),
            ))
            .map_err(|e| e.to_string())?;
    }
    device.submit().map_err(|e| e.to_string())?;
    let mut completions: Vec<Completion> = Vec::with_capacity(qd);
    let mut latencies_ns = Vec::with_capacity(1 << 16);
    let enters_before = device.stats().enters;
    let cpu_before = cpu_now_ns();
    let start = Instant::now();
    let mut ios = 0u64;
    while start.elapsed() < duration {
        completions.clear();
        if poll {
            // Never sleep: spin on the CQ ring (no syscall until a replacement is submitted,
            // or the ring flags completions to flush).
            if device.poll(&mut completions) == 0 {
                std::hint::spin_loop();
                continue;
            }
        } else {
            // Reaps the CQ; blocks in one io_uring_enter for a completion only when it is
            // empty, ringing the doorbell of the batch's last replacement in the same enter.
            device
                .wait(Duration::from_millis(100), &mut completions)
                .map_err(|e| e.to_string())?;
        }
        let batch = completions.len();
        for (i, completion) in completions.iter().enumerate() {
            completion.result.clone().map_err(|e| e.to_string())?;
            ios += 1;
            if latencies_ns.len() < 4_000_000 {
                latencies_ns.push(completion.latency_ns);
            }
            let frame = completion.tag as u32;
            device
                .push(IoRequest::read(
                    random_offset(&mut rng, blocks),
                    frame,
                    1,
                    completion.tag,
                ))
                .map_err(|e| e.to_string())?;
            // One doorbell per replacement, as fio submits: the device gets it at once
            // instead of after the rest of the batch is turned around. The batch's last one
            // goes with the wait that comes next (see above).
            if poll || i + 1 < batch {
                device.submit().map_err(|e| e.to_string())?;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_ns = cpu_now_ns().saturating_sub(cpu_before);
    let enters = device.stats().enters - enters_before;
    drop(device); // rings the last doorbell and waits for the requests still in flight
    let per_io = |total: f64| (ios > 0).then(|| total / ios as f64);
    Ok(Measured {
        iops: ios as f64 / elapsed,
        p50_us: percentile(&mut latencies_ns, 50.0).unwrap_or(0) as f64 / 1_000.0,
        p99_us: percentile(&mut latencies_ns, 99.0).unwrap_or(0) as f64 / 1_000.0,
        cpu_us_per_io: per_io(cpu_ns as f64 / 1_000.0),
        enters_per_io: per_io(enters as f64),
    })
}

/// What [`measure_runtime`] saw besides the figures.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeRun {
    /// The run's figures, as the other contenders'.
    pub measured: Measured,
    /// Most user-level threads inside `io::read` at once (QD when the executor kept them all
    /// in flight).
    pub max_reads_in_flight: usize,
}

/// The runtime path: one `tamer_runtime::Executor` on this thread over a `UringDevice` (the
/// default [`RuntimeConfig`] with `qd` user-level threads; `poll` makes it
/// [`IdleMode::Poll`]), and `qd` jobs whose threads each loop on `tamer_runtime::io::read` of a
/// random block into their own frame until `duration` has passed: `qd` reads in flight, each
/// rung, reaped and resumed by the executor's loop. A read's latency runs from just before
/// `io::read` to its return in the thread (push, park, the loop's doorbell, the device, the
/// reap and the resume), like fio's total latency.
#[expect(
    clippy::too_many_lines,
    reason = "one measurement: the runtime, the jobs' read loop and the latency and CPU accounting that brackets it read best together"
)]
pub fn measure_runtime(
    file: &Arc<DeviceFile>,
    qd: usize,
    duration: Duration,
    seed: u64,
    poll: bool,
) -> Result<RuntimeRun, String> {
    struct Shared {
        deadline_ns: AtomicU64,
        in_flight: AtomicUsize,
        max_in_flight: AtomicUsize,
        latencies_ns: Mutex<Vec<u64>>,
        error: Mutex<Option<String>>,
    }
    let arena = Arc::new(Arena::new(qd as u32).map_err(|e| e.to_string())?);
    let entries = (qd as u32).next_power_of_two().max(8);
    let device = UringDevice::open(file.clone(), arena.clone(), UringConfig { entries })
        .map_err(|e| e.to_string())?;
    let mut config = RuntimeConfig::with_threads(qd);
    config.cores = 1;
    config.local_queue = qd;
    config.idle = if poll {
        IdleMode::Poll
    } else {
        IdleMode::Block
    };
    let mut executor = Executor::new(0, config, Box::new(device), arena)?;
    let blocks = file.capacity_bytes() / BLOCK_SIZE as u64;
    let shared = Arc::new(Shared {
        deadline_ns: AtomicU64::new(0),
        in_flight: AtomicUsize::new(0),
        max_in_flight: AtomicUsize::new(0),
        latencies_ns: Mutex::new(Vec::with_capacity(1 << 16)),
        error: Mutex::new(None),
    });
    for thread in 0..qd {
        let shared = shared.clone();
        let mut rng =
            SmallRng::seed_from_u64(seed ^ (thread as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let job = move || {
            let mut latencies = Vec::with_capacity(1 << 12);
            while now_ns() < shared.deadline_ns.load(Ordering::Relaxed) {
                let offset = random_offset(&mut rng, blocks);
                let reading = shared.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                shared.max_in_flight.fetch_max(reading, Ordering::Relaxed);
                let begin = now_ns();
                let result = tamer_runtime::io::read(offset, thread as u32, 1);
                let end = now_ns();
                shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                if let Err(err) = result {
                    *shared.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
                    break;
                }
                latencies.push(end - begin);
            }
            let mut all = shared
                .latencies_ns
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let room = 4_000_000usize.saturating_sub(all.len());
            all.extend(latencies.into_iter().take(room));
        };
        executor
            .spawn(job)
            .map_err(|_| format!("the executor's local queue refused job {thread}"))?;
    }
    let cpu_before = cpu_now_ns();
    let start = Instant::now();
    shared
        .deadline_ns
        .store(now_ns() + duration.as_nanos() as u64, Ordering::Relaxed);
    executor.run_until_idle();
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_ns = cpu_now_ns().saturating_sub(cpu_before);
    let device_stats = executor.device_stats();
    drop(executor);
    if let Some(err) = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(format!("runtime read: {err}"));
    }
    let mut latencies_ns = std::mem::take(
        &mut *shared
            .latencies_ns
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    );
    let ios = device_stats.completed;
    let per_io = |total: f64| (ios > 0).then(|| total / ios as f64);
    Ok(RuntimeRun {
        measured: Measured {
            iops: ios as f64 / elapsed,
            p50_us: percentile(&mut latencies_ns, 50.0).unwrap_or(0) as f64 / 1_000.0,
            p99_us: percentile(&mut latencies_ns, 99.0).unwrap_or(0) as f64 / 1_000.0,
            cpu_us_per_io: per_io(cpu_ns as f64 / 1_000.0),
            enters_per_io: per_io(device_stats.enters as f64),
        },
        max_reads_in_flight: shared.max_in_flight.load(Ordering::Relaxed),
    })
}

/// The sync baseline: `qd` OS threads, each with blocking pread on its own frame.
pub fn measure_sync(
    file: &Arc<DeviceFile>,
    qd: usize,
    duration: Duration,
    seed: u64,
) -> Result<Measured, String> {
    let arena = Arc::new(Arena::new(qd as u32).map_err(|e| e.to_string())?);
    let blocks = file.capacity_bytes() / BLOCK_SIZE as u64;
    let start = Instant::now();
    let handles: Vec<_> = (0..qd)
        .map(|t| {
            let file = file.clone();
            let arena = arena.clone();
            std::thread::spawn(move || -> Result<Vec<u64>, String> {
                tamer_runtime::pin_to_cpu(BENCH_CPU);
                let mut device = SyncDevice::new(file, arena, 1);
                let mut rng = SmallRng::seed_from_u64(
                    seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                );
                let mut done = Vec::with_capacity(1);
                let mut latencies = Vec::with_capacity(1 << 14);
                while start.elapsed() < duration {
                    device
                        .push(IoRequest::read(
                            random_offset(&mut rng, blocks),
                            t as u32,
                            1,
                            0,
                        ))
                        .map_err(|e| e.to_string())?;
                    device.submit().map_err(|e| e.to_string())?;
                    done.clear();
                    device.poll(&mut done);
                    for c in &done {
                        c.result.clone().map_err(|e| e.to_string())?;
                        latencies.push(c.latency_ns);
                    }
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies_ns = Vec::new();
    for handle in handles {
        latencies_ns.extend(
            handle
                .join()
                .map_err(|_| "sync thread panicked".to_string())??,
        );
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(Measured {
        iops: latencies_ns.len() as f64 / elapsed,
        p50_us: percentile(&mut latencies_ns, 50.0).unwrap_or(0) as f64 / 1_000.0,
        p99_us: percentile(&mut latencies_ns, 99.0).unwrap_or(0) as f64 / 1_000.0,
        cpu_us_per_io: None,
        enters_per_io: None,
    })
}

/// The median of `values` (the upper one of an even count), `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(|a, b| a.total_cmp(b));
    values.get(values.len() / 2).copied()
}

/// The median of each field over rounds (IOPS, p50, p99 and CPU separately).
fn median_round(rounds: &[Measured]) -> Measured {
    let of =
        |field: fn(&Measured) -> f64| median(rounds.iter().map(field).collect()).unwrap_or(0.0);
    let of_some =
        |field: fn(&Measured) -> Option<f64>| median(rounds.iter().filter_map(field).collect());
    Measured {
        iops: of(|m| m.iops),
        p50_us: of(|m| m.p50_us),
        p99_us: of(|m| m.p99_us),
        cpu_us_per_io: of_some(|m| m.cpu_us_per_io),
        enters_per_io: of_some(|m| m.enters_per_io),
    }
}

/// The median over rounds of `f(tamer, fio)` of the same round: a paired comparison, in which
/// the disk's drift between rounds cancels.
fn paired_median(
    tamer: &[Measured],
    fio: &[Measured],
    f: impl Fn(&Measured, &Measured) -> f64,
) -> Option<f64> {
    median(tamer.iter().zip(fio).map(|(t, p)| f(t, p)).collect())
}

/// The path of fio, or `None` when it is not installed.
pub fn fio_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("fio"))
            .find(|p| p.is_file())
    })
}

/// fio with the io_uring engine, the same file, block size, queue depth and duration.
pub fn measure_fio(
    fio: &Path,
    file: &DeviceFile,
    qd: usize,
    duration: Duration,
    cpu: Option<usize>,
) -> Result<Measured, String> {
    let cpus_allowed = cpu.map(|c| format!("--cpus_allowed={c}"));
    let output = Command::new(fio)
        .args([
            "--name=tamer-peer",
            &format!("--filename={}", file.path().display()),
            "--direct=1",
            "--rw=randread",
            "--bs=4k",
            "--ioengine=io_uring",
            &format!("--iodepth={qd}"),
            &format!("--size={}", file.capacity_bytes()),
            &format!("--runtime={}ms", duration.as_millis()),
            "--time_based",
            "--norandommap",
            "--randrepeat=0",
            "--numjobs=1",
            "--lat_percentiles=1",
            "--output-format=json",
        ])
        .args(cpus_allowed.iter())
        .output()
        .map_err(|e| format!("running fio: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse_fio_json(&String::from_utf8_lossy(&output.stdout))
}

/// The figures of fio's `--output-format=json` report of one read job.
///
/// Latency is fio's *total* latency, `lat_ns`: from just after the I/O is prepared (before it
/// is queued and the `io_uring_enter` that submits it) to the reap after the `io_uring_enter`
/// that waited for it, the same span as tamer's doorbell-to-reap latency. fio's `clat_ns`
/// starts after the submitting syscall returns (later still where that syscall traps to a
/// hypervisor) and would flatter fio.
///
/// CPU per I/O: `(usr_cpu + sys_cpu) %` of the job's runtime (getrusage of the job process,
/// its io-wq threads included), over its I/Os.
pub fn parse_fio_json(text: &str) -> Result<Measured, String> {
    // fio may print warnings before the JSON object.
    let json_text = &text[text.find('{').ok_or("fio printed no JSON")?..];
    let value: Value = serde_json::from_str(json_text).map_err(|e| format!("fio JSON: {e}"))?;
    let job = &value["jobs"][0];
    let read = &job["read"];
    let pct = |key: &str| read["lat_ns"]["percentile"][key].as_f64().unwrap_or(0.0) / 1_000.0;
    let ios = read["total_ios"].as_f64().unwrap_or(0.0);
    let cpu_us = (|| {
        let share = (job["usr_cpu"].as_f64()? + job["sys_cpu"].as_f64()?) / 100.0;
        Some(share * job["job_runtime"].as_f64()? * 1_000.0)
    })();
    Ok(Measured {
        iops: read["iops"].as_f64().ok_or("fio JSON has no read.iops")?,
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
        cpu_us_per_io: cpu_us.filter(|_| ios > 0.0).map(|us| us / ios),
        enters_per_io: None,
    })
}

/// The contenders that alternate within a round (sync runs after them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contender {
    Uring,
    Fio,
    Runtime,
}

/// The order of round `round`: the three contenders rotated, so that each goes first, second
/// and third in turn and none always follows the same one.
fn round_order(round: usize) -> [Contender; 3] {
    let mut order = [Contender::Uring, Contender::Fio, Contender::Runtime];
    order.rotate_left(round % 3);
    order
}

fn measured_json(m: &Measured) -> Value {
    json!({
        "iops": m.iops,
        "p50_us": m.p50_us,
        "p99_us": m.p99_us,
        "cpu_us_per_io": m.cpu_us_per_io,
        "enters_per_io": m.enters_per_io,
    })
}

fn cpu_cell(cpu: Option<f64>) -> String {
    cpu.map_or("n/a".to_string(), |c| format!("{c:.1}"))
}

/// What every point of the bench shares.
struct Setup<'a> {
    options: &'a BenchOptions,
    file: Arc<DeviceFile>,
    fio: Option<PathBuf>,
    duration: Duration,
    rounds: usize,
}

/// Every round of one queue depth, per contender (fio's empty when it is missing).
struct QdRounds {
    uring: Vec<Measured>,
    fio: Vec<Measured>,
    runtime: Vec<Measured>,
    sync: Vec<Measured>,
}

/// The per-queue-depth ratios to fio whose minimum over queue depths is a figure.
#[derive(Default)]
struct Ratios {
    uring: Vec<f64>,
    runtime: Vec<f64>,
    uring_paired: Vec<f64>,
    runtime_paired: Vec<f64>,
}

/// Runs the bench.
pub fn run(options: &BenchOptions) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("device", options.quick, options.seed);
    // Each point is measured in several short rounds, the contenders taking turns, and the
    // median round is reported: the shared disk's speed drifts by tens of percent over seconds.
    let (size_bytes, duration, rounds) = if options.quick {
        (256u64 << 20, Duration::from_millis(400), 3)
    } else {
        (2u64 << 30, Duration::from_secs(1), 7)
    };
    let file = bench_file(&options.data_dir, size_bytes, options.seed)?;
    tamer_runtime::pin_to_cpu(BENCH_CPU);
    let fio = fio_path();
    if fio.is_none() {
        result.note("fio is not installed: run scripts/install-peers.sh (Debian's fio); the fio column and the figures that need it are missing");
    }
    println!(
        "4 KiB random reads, O_DIRECT, {} MiB file {}, median of {rounds} rounds of {:?} per point",
        size_bytes >> 20,
        file.path().display(),
        duration
    );
    print_header();
    let setup = Setup {
        options,
        file,
        fio,
        duration,
        rounds,
    };
    let mut series = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut ratios = Ratios::default();
    for (i, &qd) in QUEUE_DEPTHS.iter().enumerate() {
        let q = setup.measure(i, qd)?;
        qd_result(qd, &q, &mut result, &mut ratios, &mut series);
    }
    let min = |values: &[f64]| values.iter().copied().reduce(f64::min);
    let with_fio = |value: Option<f64>| if setup.fio.is_some() { value } else { None };
    result.figure("iops_ratio_vs_fio_min", with_fio(min(&ratios.uring)));
    result.figure(
        "runtime_iops_ratio_vs_fio_min",
        with_fio(min(&ratios.runtime)),
    );
    result.figure(
        "iops_ratio_vs_fio_min_paired",
        with_fio(min(&ratios.uring_paired)),
    );
    result.figure(
        "runtime_iops_ratio_vs_fio_min_paired",
        with_fio(min(&ratios.runtime_paired)),
    );
    let sync_ratio = result
        .rows
        .last()
        .and_then(|row| Some(row["sync"]["iops"].as_f64()? / row["uring"]["iops"].as_f64()?));
    result.figure("sync_vs_uring_iops_qd128", sync_ratio);
    let path = write_plot(options, &result, series)?;
    result.plots.push(path.display().to_string());
    Ok(result)
}

/// The table's header.
fn print_header() {
    println!(
        "uring: UringDevice on one thread; runtime: an Executor with QD user-level threads in io::read; cpu: CPU µs per I/O"
    );
    println!(
        "{:>4} | {:>8} {:>7} {:>7} {:>5} | {:>8} {:>7} {:>7} {:>5} | {:>8} {:>7} {:>7} {:>5} | {:>8} {:>7} {:>7} | {:>9} {:>6}",
        "QD",
        "uring",
        "p50 µs",
        "p99 µs",
        "cpu",
        "fio",
        "p50 µs",
        "p99 µs",
        "cpu",
        "runtime",
        "p50 µs",
        "p99 µs",
        "cpu",
        "sync",
        "p50 µs",
        "p99 µs",
        "uring/fio",
        "rt/fio"
    );
}

impl Setup<'_> {
    /// The rounds of queue depth `qd` (the `i`-th): the contenders in each round's order,
    /// then the sync threads.
    fn measure(&self, i: usize, qd: usize) -> Result<QdRounds, String> {
        let (file, duration, poll) = (&self.file, self.duration, self.options.poll);
        let rounds = self.rounds;
        let mut q = QdRounds {
            uring: Vec::with_capacity(rounds),
            fio: Vec::with_capacity(rounds),
            runtime: Vec::with_capacity(rounds),
            sync: Vec::with_capacity(rounds),
        };
        for round in 0..rounds {
            let seed = self.options.seed.wrapping_add((i * rounds + round) as u64);
            for contender in round_order(round) {
                match contender {
                    Contender::Uring => {
                        q.uring.push(measure_uring(file, qd, duration, seed, poll)?)
                    }
                    Contender::Fio => {
                        if let Some(path) = &self.fio {
                            q.fio
                                .push(measure_fio(path, file, qd, duration, Some(BENCH_CPU))?);
                        }
                    }
                    Contender::Runtime => q
                        .runtime
                        .push(measure_runtime(file, qd, duration, seed, poll)?.measured),
                }
            }
            q.sync.push(measure_sync(file, qd, duration, seed)?);
        }
        Ok(q)
    }
}

/// One queue depth's figures, table line, JSON row and plot points.
fn qd_result(
    qd: usize,
    q: &QdRounds,
    result: &mut BenchResult,
    ratios: &mut Ratios,
    series: &mut [Vec<(f64, f64)>; 4],
) {
    let uring = median_round(&q.uring);
    let runtime = median_round(&q.runtime);
    let fio_m = (!q.fio.is_empty()).then(|| median_round(&q.fio));
    let sync = median_round(&q.sync);
    let ratio = fio_m.map(|f| uring.iops / f.iops);
    let runtime_ratio = fio_m.map(|f| runtime.iops / f.iops);
    let iops_ratio = |t: &Measured, f: &Measured| t.iops / f.iops;
    let paired = paired_median(&q.uring, &q.fio, iops_ratio);
    let runtime_paired = paired_median(&q.runtime, &q.fio, iops_ratio);
    ratios.uring.extend(ratio);
    ratios.runtime.extend(runtime_ratio);
    ratios.uring_paired.extend(paired);
    ratios.runtime_paired.extend(runtime_paired);
    if qd == 1 {
        qd1_figures(q, &uring, &runtime, fio_m.as_ref(), result);
    }
    result.figure(&format!("cpu_us_per_io_uring_qd{qd}"), uring.cpu_us_per_io);
    result.figure(
        &format!("cpu_us_per_io_fio_qd{qd}"),
        fio_m.and_then(|f| f.cpu_us_per_io),
    );
    result.figure(
        &format!("cpu_us_per_io_runtime_qd{qd}"),
        runtime.cpu_us_per_io,
    );
    let f = fio_m.unwrap_or_default();
    let show = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.3}"));
    println!(
        "{qd:>4} | {:>8.0} {:>7.1} {:>7.1} {:>5} | {:>8.0} {:>7.1} {:>7.1} {:>5} | {:>8.0} {:>7.1} {:>7.1} {:>5} | {:>8.0} {:>7.1} {:>7.1} | {:>9} {:>6}",
        uring.iops,
        uring.p50_us,
        uring.p99_us,
        cpu_cell(uring.cpu_us_per_io),
        f.iops,
        f.p50_us,
        f.p99_us,
        cpu_cell(f.cpu_us_per_io),
        runtime.iops,
        runtime.p50_us,
        runtime.p99_us,
        cpu_cell(runtime.cpu_us_per_io),
        sync.iops,
        sync.p50_us,
        sync.p99_us,
        show(ratio),
        show(runtime_ratio),
    );
    result.rows.push(json!({
        "qd": qd,
        "uring": measured_json(&uring),
        "fio": fio_m.as_ref().map(measured_json),
        "runtime": measured_json(&runtime),
        "sync": measured_json(&sync),
        "uring_vs_fio_iops": ratio,
        "runtime_vs_fio_iops": runtime_ratio,
        "uring_vs_fio_iops_paired": paired,
        "runtime_vs_fio_iops_paired": runtime_paired,
        "rounds": rounds_json(q),
    }));
    series[0].push((qd as f64, uring.iops));
    if let Some(f) = fio_m {
        series[1].push((qd as f64, f.iops));
    }
    series[2].push((qd as f64, runtime.iops));
    series[3].push((qd as f64, sync.iops));
}

/// Each round of a queue depth, every contender's measurement.
fn rounds_json(q: &QdRounds) -> Vec<Value> {
    (0..q.uring.len())
        .map(|r| {
            json!({
                "uring": measured_json(&q.uring[r]),
                "fio": q.fio.get(r).map(measured_json),
                "runtime": measured_json(&q.runtime[r]),
                "sync": measured_json(&q.sync[r]),
            })
        })
        .collect()
}

/// Queue depth 1's latency figures: each contender's p50 and its gap to fio's.
fn qd1_figures(
    q: &QdRounds,
    uring: &Measured,
    runtime: &Measured,
    fio_m: Option<&Measured>,
    result: &mut BenchResult,
) {
    let gap = |t: &Measured| fio_m.map(|f| t.p50_us - f.p50_us);
    let p50_gap = |t: &Measured, f: &Measured| t.p50_us - f.p50_us;
    result.figure("qd1_p50_overhead_us", gap(uring));
    result.figure("runtime_qd1_p50_overhead_us", gap(runtime));
    result.figure(
        "qd1_p50_overhead_us_paired",
        paired_median(&q.uring, &q.fio, p50_gap),
    );
    result.figure(
        "runtime_qd1_p50_overhead_us_paired",
        paired_median(&q.runtime, &q.fio, p50_gap),
    );
    result.figure("uring_qd1_p50_us", Some(uring.p50_us));
    result.figure("runtime_qd1_p50_us", Some(runtime.p50_us));
}

/// The IOPS plot: a line per contender over the queue depths; its path.
fn write_plot(
    options: &BenchOptions,
    result: &BenchResult,
    series: [Vec<(f64, f64)>; 4],
) -> Result<PathBuf, String> {
    let labels = [
        "tamer uring",
        "fio io_uring",
        "tamer runtime (QD user-level threads)",
        "tamer sync (QD OS threads)",
    ];
    let plot_series: Vec<Series> = labels
        .iter()
        .zip(series)
        .filter(|(_, points)| !points.is_empty())
        .map(|(label, points)| Series {
            label: label.to_string(),
            points,
        })
        .collect();
    let path = options.svg_dir().join("device_iops.svg");
    write_svg(
        &path,
        &Chart {
            title: &format!(
                "4 KiB random read IOPS vs queue depth ({})",
                result.machine.short()
            ),
            x_label: "queue depth",
            y_label: "IOPS",
            series: &plot_series,
            log_x: true,
            log_y: false,
            y_unit: YUnit::Plain,
        },
    )?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filled benchmark file of `mib` MiB in a fresh temp directory (removed on drop), or
    /// `None` (printed) where O_DIRECT or io_uring is unavailable.
    struct TempBench {
        dir: PathBuf,
        file: Arc<DeviceFile>,
    }

    impl TempBench {
        fn new(test: &str, mib: u64) -> Option<Self> {
            if let Err(err) = tamer_device::uring_available() {
                eprintln!("{test}: skipped: {err}");
                return None;
            }
            let dir = std::env::temp_dir()
                .join(format!("tamer-bench-device-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            match bench_file(&dir, mib << 20, 42) {
                Ok(file) => Some(Self { dir, file }),
                Err(err) => {
                    eprintln!("{test}: skipped: {err}");
                    let _ = std::fs::remove_dir_all(&dir);
                    None
                }
            }
        }
    }

    impl Drop for TempBench {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// fio's report is read for its *total* latency (`lat_ns`, not `clat_ns`, which starts
    /// after the submitting syscall) and for its CPU: (usr + sys) % of the job's runtime over
    /// its I/Os. Catches: comparing `clat_ns`, dropping `sys_cpu`, a percent/ms unit slip.
    #[test]
    fn fio_json_gives_total_latency_and_cpu_per_io() {
        let text = r#"fio: a warning before the JSON
{"jobs": [{"job_runtime": 1000, "usr_cpu": 2.5, "sys_cpu": 27.5,
  "read": {"iops": 10000.0, "total_ios": 10000,
    "clat_ns": {"percentile": {"50.000000": 60000, "99.000000": 120000}},
    "lat_ns": {"percentile": {"50.000000": 80000, "99.000000": 150000}}}}]}"#;
        let m = parse_fio_json(text).unwrap();
        assert_eq!(m.iops, 10_000.0);
        assert_eq!((m.p50_us, m.p99_us), (80.0, 150.0));
        // 30 % of 1 s = 300 ms of CPU over 10 000 I/Os.
        let cpu = m.cpu_us_per_io.unwrap();
        assert!((cpu - 30.0).abs() < 1e-9, "{cpu}");
        assert!(parse_fio_json("no json").is_err());
    }

    /// Only io_uring's kernel threads (`iou-*`) count, from `schedstat` (ns) or else `stat`
    /// (utime + stime ticks). Catches: counting every thread of the process (the measuring
    /// thread would count twice), and reading the wrong `stat` fields.
    #[test]
    fn io_thread_cpu_counts_io_uring_threads_only() {
        let dir = std::env::temp_dir().join(format!("tamer-bench-tasks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let task = |tid: &str, comm: &str, schedstat: Option<&str>, stat: Option<&str>| {
            let path = dir.join(tid);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("comm"), comm).unwrap();
            if let Some(s) = schedstat {
                std::fs::write(path.join("schedstat"), s).unwrap();
            }
            if let Some(s) = stat {
                std::fs::write(path.join("stat"), s).unwrap();
            }
        };
        task("10", "tamer\n", Some("5000000 1 1\n"), None);
        task("11", "iou-sqp-10\n", Some("7000 2 2\n"), None);
        task(
            "12",
            "iou-wrk-10\n",
            None,
            Some("12 (iou-wrk 10) S 1 1 1 0 -1 0 0 0 0 0 20 30 0 0 20 0 1 0 5\n"),
        );
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert_eq!(io_threads_cpu_ns(&dir), 7000 + 50 * 1_000_000_000 / hz);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            io_threads_cpu_ns(&dir),
            0,
            "a missing directory counts nothing"
        );
    }

    /// At QD 1 the replacement read's doorbell rides in the wait's io_uring_enter: one syscall
    /// per read. At QD 4 every replacement still gets its own doorbell (none is batched with
    /// the rest of its completion batch). CPU per I/O is measured and below the wall time per
    /// I/O (one thread). Catches: ringing the last replacement before waiting (2 enters per
    /// read at QD 1), deferring every replacement of a batch into the wait (≈ 1/batch enters
    /// per read at QD 4), and a CPU figure that counts other threads' time.
    #[test]
    fn uring_rings_the_last_replacement_with_the_wait() {
        let Some(bench) = TempBench::new("uring-defer", 8) else {
            return;
        };
        let run = |qd| measure_uring(&bench.file, qd, Duration::from_millis(200), 7, false);
        let qd1 = run(1).unwrap();
        assert!(qd1.iops > 0.0);
        let enters = qd1.enters_per_io.unwrap();
        assert!(enters <= 1.2, "QD 1: {enters} io_uring_enter per read");
        let cpu = qd1.cpu_us_per_io.unwrap();
        let wall_us = 1e6 / qd1.iops;
        assert!(
            cpu > 0.0 && cpu < wall_us * 1.1,
            "QD 1: {cpu} µs CPU per read, {wall_us} µs wall"
        );
        let qd4 = run(4).unwrap();
        let enters = qd4.enters_per_io.unwrap();
        assert!(
            (0.8..=1.2).contains(&enters),
            "QD 4: {enters} io_uring_enter per read"
        );
    }

    /// The runtime path keeps QD reads in flight with QD user-level threads, and reports its
    /// reads, their latency in the threads and its CPU. Catches: jobs that run one after the
    /// other (one thread, or one read at a time), and a run that measures nothing.
    #[test]
    fn runtime_path_keeps_qd_reads_in_flight() {
        let Some(bench) = TempBench::new("runtime-path", 8) else {
            return;
        };
        let run = measure_runtime(&bench.file, 4, Duration::from_millis(200), 7, false).unwrap();
        assert_eq!(run.max_reads_in_flight, 4);
        let m = run.measured;
        assert!(
            m.iops > 0.0 && m.p50_us > 0.0 && m.p99_us >= m.p50_us,
            "{m:?}"
        );
        assert!(m.cpu_us_per_io.unwrap() > 0.0);
        assert!(m.enters_per_io.unwrap() > 0.0);
    }

    /// Each contender goes first once every three rounds; medians take the upper middle;
    /// paired medians compare rounds one to one. Catches: a fixed order, and pairing that
    /// divides medians instead of rounds.
    #[test]
    fn rounds_rotate_and_pairs_compare_round_by_round() {
        let firsts: Vec<Contender> = (0..3).map(|r| round_order(r)[0]).collect();
        assert_eq!(
            firsts,
            [Contender::Uring, Contender::Fio, Contender::Runtime]
        );
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![]), None);
        let m = |iops| Measured {
            iops,
            ..Measured::default()
        };
        // Round ratios 0.5, 1.0, 3.0: median 1.0; the ratio of the medians is 4/3.
        let tamer = [m(1.0), m(4.0), m(9.0)];
        let fio = [m(2.0), m(4.0), m(3.0)];
        let ratio = paired_median(&tamer, &fio, |t, f| t.iops / f.iops).unwrap();
        assert_eq!(ratio, 1.0);
        let of_medians = median_round(&tamer).iops / median_round(&fio).iops;
        assert_eq!(of_medians, 4.0 / 3.0);
    }
}
