//! `tamer bench device`: 4 KiB random reads on a filled O_DIRECT file at queue depths 1..128,
//! tamer's io_uring device and its sync device next to fio (io_uring engine) with the same
//! parameters, interleaved per queue depth so that noise hits all three alike.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tamer_device::{
    fill_with_data, Arena, Completion, Device, DeviceFile, IoRequest, SyncDevice, UringConfig,
    UringDevice, BLOCK_SIZE,
};

use crate::output::{percentile, BenchResult};
use crate::plot::{write_svg, Chart, Series};
use crate::BenchOptions;

/// Every contender (tamer, fio, the sync threads) runs on this CPU: on this VM the disk's
/// interrupts land on one CPU and a process next to them runs 15-25% faster, so an unpinned
/// comparison measures the scheduler's placement.
pub const BENCH_CPU: usize = 0;

/// Queue depths measured.
pub const QUEUE_DEPTHS: [usize; 5] = [1, 4, 16, 64, 128];

/// One measured configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub iops: f64,
    pub p50_us: f64,
    pub p99_us: f64,
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
    let start = Instant::now();
    let mut ios = 0u64;
    while start.elapsed() < duration {
        completions.clear();
        if poll {
            // Never sleep: spin on the CQ ring (no syscall until a replacement is submitted).
            if device.poll(&mut completions) == 0 {
                std::hint::spin_loop();
                continue;
            }
        } else {
            // Reaps the CQ; blocks in one io_uring_enter for a completion only when it is empty.
            device
                .wait(Duration::from_millis(100), &mut completions)
                .map_err(|e| e.to_string())?;
        }
        for completion in &completions {
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
            // instead of after the rest of the batch is turned around.
            device.submit().map_err(|e| e.to_string())?;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(device); // waits for the requests still in flight
    Ok(Measured {
        iops: ios as f64 / elapsed,
        p50_us: percentile(&mut latencies_ns, 50.0).unwrap_or(0) as f64 / 1_000.0,
        p99_us: percentile(&mut latencies_ns, 99.0).unwrap_or(0) as f64 / 1_000.0,
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
    })
}

/// The median of each field over rounds (IOPS, p50 and p99 separately).
fn median_round(rounds: &mut [Measured]) -> Measured {
    let median = |values: &mut Vec<f64>| {
        values.sort_by(|a, b| a.total_cmp(b));
        values[values.len() / 2]
    };
    Measured {
        iops: median(&mut rounds.iter().map(|m| m.iops).collect()),
        p50_us: median(&mut rounds.iter().map(|m| m.p50_us).collect()),
        p99_us: median(&mut rounds.iter().map(|m| m.p99_us).collect()),
    }
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
    let text = String::from_utf8_lossy(&output.stdout);
    // fio may print warnings before the JSON object.
    let json_text = &text[text.find('{').ok_or("fio printed no JSON")?..];
    let value: serde_json::Value =
        serde_json::from_str(json_text).map_err(|e| format!("fio JSON: {e}"))?;
    let read = &value["jobs"][0]["read"];
    // Total latency (submission included), as tamer's doorbell-to-reap latency is.
    let pct = |key: &str| read["lat_ns"]["percentile"][key].as_f64().unwrap_or(0.0) / 1_000.0;
    Ok(Measured {
        iops: read["iops"].as_f64().ok_or("fio JSON has no read.iops")?,
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
    })
}

/// Runs the bench.
pub fn run(options: &BenchOptions) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("device", options.quick, options.seed);
    // Each point is measured in several short rounds, tamer and fio alternating, and the
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
    println!(
        "{:>4} | {:>10} {:>8} {:>8} | {:>10} {:>8} {:>8} | {:>10} {:>8} {:>8} | {:>9}",
        "QD",
        "uring IOPS",
        "p50 µs",
        "p99 µs",
        "fio IOPS",
        "p50 µs",
        "p99 µs",
        "sync IOPS",
        "p50 µs",
        "p99 µs",
        "uring/fio"
    );
    let mut series = [Vec::new(), Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    let mut qd1 = None;
    for (i, &qd) in QUEUE_DEPTHS.iter().enumerate() {
        let mut uring_rounds = Vec::with_capacity(rounds);
        let mut fio_rounds = Vec::with_capacity(rounds);
        let mut sync_rounds = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let seed = options.seed.wrapping_add((i * rounds + round) as u64);
            let fio_round = |fio_rounds: &mut Vec<Measured>| -> Result<(), String> {
                if let Some(path) = &fio {
                    fio_rounds.push(measure_fio(path, &file, qd, duration, Some(BENCH_CPU))?);
                }
                Ok(())
            };
            // Alternate who goes first so that neither always follows the other.
            if round % 2 == 1 {
                fio_round(&mut fio_rounds)?;
            }
            uring_rounds.push(measure_uring(&file, qd, duration, seed, options.poll)?);
            if round % 2 == 0 {
                fio_round(&mut fio_rounds)?;
            }
            sync_rounds.push(measure_sync(&file, qd, duration, seed)?);
        }
        let uring = median_round(&mut uring_rounds);
        let fio_m = (!fio_rounds.is_empty()).then(|| median_round(&mut fio_rounds));
        let sync = median_round(&mut sync_rounds);
        let ratio = fio_m.map(|f| uring.iops / f.iops);
        if let Some(r) = ratio {
            ratios.push(r);
        }
        if qd == 1 {
            qd1 = Some((uring, fio_m));
        }
        let f = fio_m.unwrap_or_default();
        println!(
            "{qd:>4} | {:>10.0} {:>8.1} {:>8.1} | {:>10.0} {:>8.1} {:>8.1} | {:>10.0} {:>8.1} {:>8.1} | {:>9}",
            uring.iops, uring.p50_us, uring.p99_us, f.iops, f.p50_us, f.p99_us, sync.iops, sync.p50_us, sync.p99_us,
            ratio.map_or("n/a".to_string(), |r| format!("{r:.3}"))
        );
        result.rows.push(json!({
            "qd": qd,
            "uring": {"iops": uring.iops, "p50_us": uring.p50_us, "p99_us": uring.p99_us},
            "fio": fio_m.map(|f| json!({"iops": f.iops, "p50_us": f.p50_us, "p99_us": f.p99_us})),
            "sync": {"iops": sync.iops, "p50_us": sync.p50_us, "p99_us": sync.p99_us},
            "uring_vs_fio_iops": ratio,
        }));
        series[0].push((qd as f64, uring.iops));
        if let Some(f) = fio_m {
            series[1].push((qd as f64, f.iops));
        }
        series[2].push((qd as f64, sync.iops));
    }
    let min_ratio = ratios
        .iter()
        .cloned()
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    result.figure(
        "iops_ratio_vs_fio_min",
        if fio.is_some() { min_ratio } else { None },
    );
    let overhead = qd1.and_then(|(u, f)| f.map(|f| u.p50_us - f.p50_us));
    result.figure("qd1_p50_overhead_us", overhead);
    if let Some((u, _)) = qd1 {
        result.figure("uring_qd1_p50_us", Some(u.p50_us));
    }
    let sync_ratio = result
        .rows
        .last()
        .and_then(|row| Some(row["sync"]["iops"].as_f64()? / row["uring"]["iops"].as_f64()?));
    result.figure("sync_vs_uring_iops_qd128", sync_ratio);
    let labels = ["tamer uring", "fio io_uring", "tamer sync (QD OS threads)"];
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
            title: "4 KiB random read IOPS vs queue depth",
            x_label: "queue depth",
            y_label: "IOPS",
            series: &plot_series,
            log_x: true,
        },
    )?;
    result.plots.push(path.display().to_string());
    Ok(result)
}
