//! `tamer bench microsecond`: the killer-microsecond study's central experiment on tamer's runtime.
//!
//! Each user-level thread loops: W ns of CPU work, then M independent 4 KiB device reads (MLP
//! M), then it uses the data. Performance (loop iterations per second) is normalized to the
//! DRAM baseline measured in the same run: one OS thread, no switching, the same W of work and
//! M 4 KiB copies from random places in a DRAM array as large as the emulated device.
//!
//! Mechanisms:
//! - `demand`: the core waits for its accesses (one thread; more cannot help);
//! - `prefetch`: issue the accesses, switch to another user-level thread, resume when they
//!   completed (the runtime's park/wake path). The cap of 10 in-flight accesses per core plays
//!   the CPU's line-fill buffers: an access beyond it stalls the core;
//! - `appqueue`: application-managed queue: threads push descriptors, the doorbell is rung, and
//!   each thread yields round-robin and polls its own completion slot when resumed. Its bound is
//!   the device queue, not the line-fill buffers, so it is not capped (as in the seed).
//!
//! Devices: the emulator at 1, 2, 4, 8, 16 and 50 µs, and the real disk (io_uring, O_DIRECT,
//! filled file). One core runs the sweep; the emulator's data copy runs on that core (it stands
//! in for the device's DMA, and costs what the DRAM baseline's copy costs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tamer_device::{
    now_ns, open_device, Arena, DeviceFile, DeviceSpec, EmulatorConfig, EmulatorModel, IoRequest,
    UringConfig, BLOCK_SIZE,
};
use tamer_runtime::io::{self, WaitMode};
use tamer_runtime::{Executor, IdleMode, Runtime, RuntimeConfig};

use crate::device::{bench_file, fio_path, measure_fio, BENCH_CPU};
use crate::output::BenchResult;
use crate::plot::{write_svg, Chart, Series, YUnit};
use crate::work::Work;
use crate::BenchOptions;

/// Most user-level threads per core swept.
const THREADS_MAX: usize = 64;
/// Arena frames reserved per core.
const FRAMES_PER_CORE: usize = THREADS_MAX * MAX_MLP;

/// User-level threads per core swept.
pub const THREADS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// The per-core in-flight cap, as the seed's 10 line-fill buffers.
pub const LFB_CAP: usize = 10;
/// Most accesses per round (the arena holds 64 threads × this many frames).
pub const MAX_MLP: usize = 4;

/// How a thread waits for its accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// The core waits for its accesses.
    Demand,
    /// Issue the accesses, switch threads, resume when they completed.
    Prefetch,
    /// An application-managed queue polled round-robin.
    AppQueue,
}

impl Mechanism {
    /// The mechanism's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Demand => "demand",
            Mechanism::Prefetch => "prefetch",
            Mechanism::AppQueue => "appqueue",
        }
    }

    fn wait_mode(self) -> WaitMode {
        match self {
            Mechanism::Demand => WaitMode::Spin,
            Mechanism::Prefetch => WaitMode::Park,
            Mechanism::AppQueue => WaitMode::PollYield,
        }
    }
}

/// Which device a point runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The emulator at this latency.
    Emulated {
        /// Its read latency, ns.
        latency_ns: u64,
    },
    /// The real disk (io_uring, `O_DIRECT`).
    Disk,
}

impl Target {
    /// The device's label in the table, the JSON and the plots.
    pub fn label(self) -> String {
        match self {
            Target::Emulated { latency_ns } => format!("{} µs", latency_ns / 1_000),
            Target::Disk => "disk".into(),
        }
    }
}

/// One point of the sweep.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// The device.
    pub target: Target,
    /// How threads wait.
    pub mechanism: Mechanism,
    /// User-level threads per core.
    pub threads: usize,
    /// Accesses per round (memory-level parallelism).
    pub mlp: usize,
    /// In-flight cap per core, if any.
    pub cap: Option<usize>,
    /// Rounds per second.
    pub ops_per_s: f64,
    /// `ops_per_s` over its group's DRAM baseline.
    pub normalized: f64,
    /// Device reads per second.
    pub device_iops: f64,
    /// The device's mean read latency, µs.
    pub avg_device_latency_us: f64,
}

/// Sizes of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Emulated latencies swept, ns.
    pub latencies_ns: Vec<u64>,
    /// Run the real disk too.
    pub disk: bool,
    /// MLP values swept at every latency; `extra_mlp_at_4us` adds more at 4 µs only.
    pub mlps: Vec<usize>,
    /// MLP values swept at 4 µs only, besides `mlps`.
    pub extra_mlp_at_4us: Vec<usize>,
    /// Length of one emulated-device point.
    pub point_duration: Duration,
    /// Length of one disk point.
    pub disk_point_duration: Duration,
    /// CPU work per round of accesses, ns.
    pub work_ns: u64,
    /// The emulated device's capacity.
    pub device_bytes: u64,
    /// The disk file's size.
    pub disk_bytes: u64,
    /// Cores running the sweep, each with `threads` user-level threads (the killer-microsecond study's multi-core
    /// figure); the DRAM baseline then runs one OS thread per core at once.
    pub cores: usize,
}

impl Plan {
    /// The full sweep, or the CI-sized one (`quick`), with `work_ns` of work per round.
    pub fn new(quick: bool, work_ns: u64) -> Self {
        if quick {
            Self {
                latencies_ns: vec![1_000, 4_000, 16_000, 50_000],
                disk: true,
                mlps: vec![1],
                extra_mlp_at_4us: vec![2, 4],
                point_duration: Duration::from_millis(40),
                disk_point_duration: Duration::from_millis(300),
                work_ns,
                device_bytes: 256 << 20,
                disk_bytes: 256 << 20,
                cores: 1,
            }
        } else {
            Self {
                latencies_ns: vec![1_000, 2_000, 4_000, 8_000, 16_000, 50_000],
                disk: true,
                mlps: vec![1, 2, 4],
                extra_mlp_at_4us: vec![],
                point_duration: Duration::from_millis(150),
                disk_point_duration: Duration::from_millis(1_000),
                work_ns,
                device_bytes: 1 << 30,
                disk_bytes: 2 << 30,
                cores: 1,
            }
        }
    }
}

/// The DRAM baseline as the median of `runs` runs, the same statistic a point's single run
/// estimates (the best of several would bias every ratio down by the machine's noise).
#[allow(clippy::too_many_arguments)]
pub fn median_baseline(
    memory: &EmulatorModel,
    work: &Work,
    iterations: u64,
    mlp: usize,
    duration: Duration,
    seed: u64,
    cores: usize,
    runs: u64,
) -> f64 {
    let mut runs: Vec<f64> = (0..runs)
        .map(|i| {
            let seed = seed.wrapping_add(i);
            if cores == 1 {
                return dram_baseline(memory, work, iterations, mlp, duration, seed);
            }
            // One OS thread per core at once, each pinned: the multi-core DRAM baseline.
            std::thread::scope(|scope| {
                let runs: Vec<_> = (0..cores)
                    .map(|core| {
                        scope.spawn(move || {
                            tamer_runtime::pin_to_cpu(core);
                            let seed = seed ^ (core as u64 + 1);
                            dram_baseline(memory, work, iterations, mlp, duration, seed)
                        })
                    })
                    .collect();
                runs.into_iter()
                    .map(|r| r.join().expect("baseline thread"))
                    .sum()
            })
        })
        .collect();
    median(&mut runs)
}

/// The DRAM baseline: one thread, no switching, W work then M 4 KiB copies from random blocks.
pub fn dram_baseline(
    memory: &EmulatorModel,
    work: &Work,
    iterations: u64,
    mlp: usize,
    duration: Duration,
    seed: u64,
) -> f64 {
    let blocks = memory.capacity_bytes() / BLOCK_SIZE as u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut buffers = vec![[0u8; BLOCK_SIZE]; mlp];
    let mut sink = 0u64;
    let mut ops = 0u64;
    let start = Instant::now();
    let stop_at = now_ns() + duration.as_nanos() as u64;
    while now_ns() < stop_at {
        sink ^= work.run(iterations, sink);
        for buffer in buffers.iter_mut() {
            let block = rng.gen_range(0..blocks);
            // The same DRAM the emulated device serves from, copied the way it copies.
            memory
                .read_block(block, buffer)
                .expect("block inside the device");
        }
        for buffer in &buffers {
            sink ^= u64::from_le_bytes(buffer[..8].try_into().expect("8 bytes"));
        }
        ops += 1;
    }
    std::hint::black_box(sink);
    ops as f64 / start.elapsed().as_secs_f64()
}

struct PointRun {
    ops_per_s: f64,
    device_iops: f64,
    avg_device_latency_us: f64,
}

/// What every user-level thread of a point runs: W of work, then `mlp` reads of random blocks
/// into its own frames, waited for with `mode`, then a use of the data; until `stop_at`.
#[allow(clippy::too_many_arguments)]
fn point_job(
    t: usize,
    mlp: usize,
    blocks: u64,
    mode: WaitMode,
    work: Work,
    iterations: u64,
    stop_at: u64,
    seed: u64,
    ops: Arc<AtomicU64>,
) -> impl FnOnce() + Send + 'static {
    // Each core's threads use their own run of `FRAMES_PER_CORE` frames, so that the frames'
    // in-I/O flags of two cores never share a cache line.
    let first_frame = ((t / THREADS_MAX) * FRAMES_PER_CORE + (t % THREADS_MAX) * mlp) as u32;
    move || {
        let arena = io::arena();
        let mut rng =
            SmallRng::seed_from_u64(seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut tickets = Vec::with_capacity(mlp);
        let mut sink = 0u64;
        let mut done = 0u64;
        while now_ns() < stop_at {
            sink ^= work.run(iterations, sink);
            tickets.clear();
            for i in 0..mlp as u32 {
                let offset = rng.gen_range(0..blocks) * BLOCK_SIZE as u64;
                let request = IoRequest::read(offset, first_frame + i, 1, 0);
                tickets.push(io::submit(request).expect("valid read"));
            }
            io::wait_all_with(&tickets, mode).expect("read succeeds");
            for i in 0..mlp as u32 {
                // SAFETY: this thread owns frames first_frame..first_frame+mlp and its reads
                // into them have completed.
                let data = unsafe { arena.frame(first_frame + i) };
                sink ^= u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
            }
            done += 1;
        }
        std::hint::black_box(sink);
        ops.fetch_add(done, Ordering::Relaxed);
    }
}

/// One point on `cores` cores (one executor on this thread when 1, a pinned [`Runtime`] else).
#[allow(clippy::too_many_arguments)]
fn run_point(
    spec: &DeviceSpec,
    arena: &Arc<Arena>,
    cores: usize,
    mechanism: Mechanism,
    threads: usize,
    mlp: usize,
    cap: Option<usize>,
    work: Work,
    iterations: u64,
    duration: Duration,
    seed: u64,
    idle: IdleMode,
) -> Result<PointRun, String> {
    let config = RuntimeConfig {
        cores,
        threads_per_core: threads,
        max_pending: threads,
        local_queue: threads,
        inbox_queue: threads,
        max_in_flight: cap,
        idle,
        pin: cores > 1,
        initial_latency_ns: 1_000,
        ..RuntimeConfig::default()
    };
    let ops = Arc::new(AtomicU64::new(0));
    let mode = mechanism.wait_mode();
    // The clock starts once the executors and their stacks exist: set-up is not measured.
    let blocks = spec.capacity_bytes() / BLOCK_SIZE as u64;
    let job = |t: usize, stop_at: u64| {
        point_job(
            t,
            mlp,
            blocks,
            mode,
            work,
            iterations,
            stop_at,
            seed,
            ops.clone(),
        )
    };
    let (start, device_stats) = if cores == 1 {
        let device = open_device(spec, arena.clone(), seed as usize).map_err(|e| e.to_string())?;
        let mut executor = Executor::new(0, config, device, arena.clone())?;
        let start = Instant::now();
        let stop_at = now_ns() + duration.as_nanos() as u64;
        for t in 0..threads {
            executor
                .spawn(job(t, stop_at))
                .map_err(|_| "local queue sized for every thread".to_string())?;
        }
        executor.run_until_idle();
        (start, executor.device_stats())
    } else {
        let runtime = Runtime::start(config, spec.clone(), arena.clone())?;
        let start = Instant::now();
        let stop_at = now_ns() + duration.as_nanos() as u64;
        for core in 0..cores {
            for i in 0..threads {
                let t = core * THREADS_MAX + i;
                runtime
                    .spawn_on(core, job(t, stop_at))
                    .map_err(|e| e.to_string())?;
            }
        }
        let reports = runtime.shutdown();
        let mut total = tamer_device::DeviceStats::default();
        for report in &reports {
            total.merge(&report.device);
        }
        (start, total)
    };
    let elapsed = start.elapsed().as_secs_f64();
    Ok(PointRun {
        ops_per_s: ops.load(Ordering::Relaxed) as f64 / elapsed,
        device_iops: device_stats.completed as f64 / elapsed,
        avg_device_latency_us: device_stats.latency_ns.mean() / 1_000.0,
    })
}

/// What every point of the sweep shares: the calibrated work, the arena, each emulated
/// latency's device model and the real disk's file.
struct Sweep<'a> {
    options: &'a BenchOptions,
    plan: &'a Plan,
    work: Work,
    iterations: u64,
    arena: Arc<Arena>,
    /// Each emulated latency's model, filled with data.
    models: Vec<(u64, Arc<EmulatorModel>)>,
    disk_file: Option<Arc<DeviceFile>>,
}

/// The points of the sweep, each normalized to its group's DRAM baseline.
struct Swept {
    points: Vec<Point>,
    /// Each group's (device, MLP) and DRAM baseline, in ops/s.
    group_baselines: Vec<(Target, usize, f64)>,
    /// The seed after the last point (the disk-vs-fio rounds go on from it).
    seed: u64,
}

/// Runs the sweep.
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("microsecond", options.quick, options.seed);
    tamer_runtime::pin_to_cpu(BENCH_CPU);
    let work = Work::calibrate();
    let iterations = work.iterations_for(plan.work_ns);
    let arena =
        Arc::new(Arena::new((plan.cores * FRAMES_PER_CORE) as u32).map_err(|e| e.to_string())?);

    if plan.latencies_ns.is_empty() {
        return Err(
            "no emulated latency to sweep: the DRAM baseline reads the emulator's DRAM".into(),
        );
    }
    let all_mlps = all_mlps(&plan);
    let models = filled_models(&plan, options.seed)?;
    let baselines = first_baselines(&plan, options.seed, &models, &work, iterations, &all_mlps);
    println!(
        "the killer-microsecond study microbenchmark: {} ns work per access round, 4 KiB reads, {} core(s); DRAM baseline {}",
        plan.work_ns,
        plan.cores,
        baselines.iter().map(|(m, ops)| format!("MLP {m}: {:.0} ops/s", ops)).collect::<Vec<_>>().join(", ")
    );

    let disk_file: Option<Arc<DeviceFile>> = if plan.disk {
        match bench_file(&options.data_dir, plan.disk_bytes, options.seed) {
            Ok(file) => Some(file),
            Err(err) => {
                result.note(format!("real disk skipped: {err}"));
                None
            }
        }
    } else {
        None
    };
    let sweep = Sweep {
        options,
        plan: &plan,
        work,
        iterations,
        arena,
        models,
        disk_file,
    };
    let targets = sweep.targets();
    let swept = sweep.groups(&targets, &all_mlps)?;
    baseline_figures(&mut result, &swept.group_baselines, &baselines, plan.cores);
    print_table(&swept.points, &targets);
    point_rows(&mut result, &swept.points);
    best_figures(&mut result, &swept.points);
    if let Some(file) = &sweep.disk_file {
        sweep.disk_vs_fio(file, swept.seed, &mut result)?;
    }
    result.plots = plots(options, &result, &swept.points, &targets, &all_mlps)?;
    Ok(result)
}

/// Every MLP swept: the plan's, and those swept at 4 µs only; sorted, once each.
fn all_mlps(plan: &Plan) -> Vec<usize> {
    let mut all_mlps: Vec<usize> = plan
        .mlps
        .iter()
        .chain(&plan.extra_mlp_at_4us)
        .cloned()
        .collect();
    all_mlps.sort_unstable();
    all_mlps.dedup();
    all_mlps
}

/// An emulator model per latency of the plan, filled with seeded data.
fn filled_models(plan: &Plan, seed: u64) -> Result<Vec<(u64, Arc<EmulatorModel>)>, String> {
    let mut models: Vec<(u64, Arc<EmulatorModel>)> = Vec::new();
    for &latency_ns in &plan.latencies_ns {
        let model = EmulatorConfig::with_latency_ns(latency_ns)
            .capacity_bytes(plan.device_bytes)
            .seed(seed)
            .build()
            .map_err(|e| e.to_string())?;
        model.fill_with_data(seed);
        models.push((latency_ns, model));
    }
    Ok(models)
}

/// Warms every model's memory up, then measures the DRAM baseline of each MLP on the first
/// (the header's figures; each group of points measures its own).
fn first_baselines(
    plan: &Plan,
    seed: u64,
    models: &[(u64, Arc<EmulatorModel>)],
    work: &Work,
    iterations: u64,
    all_mlps: &[usize],
) -> std::collections::BTreeMap<usize, f64> {
    // The DRAM baseline reads the very memory the emulated device serves from (each group's
    // own model), so both sides see the same page residency: memory left untouched for a
    // while or freshly filled can run several times slower until the host backs it again.
    // Freshly filled memory is warmed up before anything is measured.
    for (_, model) in models {
        let _ = dram_baseline(model, work, iterations, 1, Duration::from_millis(150), seed);
    }
    let memory = models[0].1.clone();
    let baseline_duration = plan.point_duration * 2;
    let mut baselines = std::collections::BTreeMap::new();
    for &mlp in all_mlps {
        baselines.insert(
            mlp,
            median_baseline(
                &memory,
                work,
                iterations,
                mlp,
                baseline_duration,
                seed,
                plan.cores,
                3,
            ),
        );
    }
    baselines
}

impl Sweep<'_> {
    /// The devices swept: each emulated latency, then the disk if it has a file.
    fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = self
            .plan
            .latencies_ns
            .iter()
            .map(|&latency_ns| Target::Emulated { latency_ns })
            .collect();
        if self.disk_file.is_some() {
            targets.push(Target::Disk);
        }
        targets
    }

    /// The model of emulated latency `latency_ns`.
    fn model(&self, latency_ns: u64) -> &Arc<EmulatorModel> {
        &self
            .models
            .iter()
            .find(|(l, _)| *l == latency_ns)
            .expect("model")
            .1
    }

    /// Every group of points: per device, per MLP (all of them at 4 µs).
    fn groups(&self, targets: &[Target], all_mlps: &[usize]) -> Result<Swept, String> {
        let mut swept = Swept {
            points: Vec::new(),
            group_baselines: Vec::new(),
            seed: self.options.seed,
        };
        for &target in targets {
            let mlps: Vec<usize> = match target {
                Target::Emulated { latency_ns: 4_000 } => all_mlps.to_vec(),
                _ => self.plan.mlps.clone(),
            };
            for &mlp in &mlps {
                self.group(target, mlp, &mut swept)?;
            }
        }
        Ok(swept)
    }

    /// One group: every mechanism and thread count on `target` at `mlp`, between two sets of
    /// DRAM baseline runs; their median normalizes the group's points.
    fn group(&self, target: Target, mlp: usize, swept: &mut Swept) -> Result<(), String> {
        // The baseline is measured again next to every group of points, so that the ratio
        // compares measurements taken under the same machine load.
        // The baseline is measured before and after the group's points (three short runs
        // each) and their median is the group's reference: a slow spell of the machine at
        // one of the two moments cannot move it by itself.
        let memory = match target {
            Target::Emulated { latency_ns } => self.model(latency_ns).clone(),
            Target::Disk => self.models[self.models.len() - 1].1.clone(),
        };
        let baseline_runs = |seed: u64| -> Vec<f64> {
            (0..3)
                .map(|i| {
                    median_baseline(
                        &memory,
                        &self.work,
                        self.iterations,
                        mlp,
                        self.plan.point_duration * 2,
                        seed.wrapping_add(i),
                        self.plan.cores,
                        1,
                    )
                })
                .collect()
        };
        let mut baseline_samples = baseline_runs(swept.seed);
        let group_start = swept.points.len();
        let configs: Vec<(Mechanism, Option<usize>, Vec<usize>)> = vec![
            (Mechanism::Demand, None, vec![1]),
            (Mechanism::Prefetch, None, THREADS.to_vec()),
            (Mechanism::Prefetch, Some(LFB_CAP), THREADS.to_vec()),
            (Mechanism::AppQueue, None, THREADS.to_vec()),
        ];
        for (mechanism, cap, thread_counts) in configs {
            for &threads in &thread_counts {
                swept.seed = swept.seed.wrapping_add(1);
                let run = self.point(target, mechanism, threads, mlp, cap, swept.seed)?;
                swept.points.push(Point {
                    target,
                    mechanism,
                    threads,
                    mlp,
                    cap,
                    ops_per_s: run.ops_per_s,
                    normalized: 0.0, // set below, once the group's baseline is known
                    device_iops: run.device_iops,
                    avg_device_latency_us: run.avg_device_latency_us,
                });
            }
        }
        baseline_samples.extend(baseline_runs(swept.seed ^ 0xa5a5));
        let baseline = median(&mut baseline_samples);
        for point in &mut swept.points[group_start..] {
            point.normalized = point.ops_per_s / baseline;
        }
        swept.group_baselines.push((target, mlp, baseline));
        Ok(())
    }

    /// One point of a group on `target`.
    fn point(
        &self,
        target: Target,
        mechanism: Mechanism,
        threads: usize,
        mlp: usize,
        cap: Option<usize>,
        seed: u64,
    ) -> Result<PointRun, String> {
        let (spec, duration) = match target {
            Target::Emulated { latency_ns } => (
                DeviceSpec::Emulated {
                    model: self.model(latency_ns).clone(),
                },
                self.plan.point_duration,
            ),
            Target::Disk => {
                let file = self
                    .disk_file
                    .clone()
                    .expect("disk target only with a file");
                let config = UringConfig { entries: 256 };
                (
                    DeviceSpec::Uring { file, config },
                    self.plan.disk_point_duration,
                )
            }
        };
        run_point(
            &spec,
            &self.arena,
            self.plan.cores,
            mechanism,
            threads,
            mlp,
            cap,
            self.work,
            self.iterations,
            duration,
            seed,
            if target == Target::Disk && !self.options.poll {
                IdleMode::Block
            } else {
                IdleMode::Poll
            },
        )
    }

    /// The disk's IOPS, tamer's prefetching threads vs fio at the same queue depth (16 and
    /// 64), side by side in alternating rounds; a note instead when fio is missing.
    fn disk_vs_fio(
        &self,
        file: &Arc<DeviceFile>,
        mut seed: u64,
        result: &mut BenchResult,
    ) -> Result<(), String> {
        let Some(fio) = fio_path() else {
            result.note("fio is not installed (scripts/install-peers.sh): disk IOPS not compared");
            return Ok(());
        };
        // Side by side in alternating rounds, medians: the shared disk drifts by tens of
        // percent over seconds, more than the difference being measured.
        let rounds = if self.options.quick { 3 } else { 5 };
        for qd in [16usize, 64] {
            let mut ours = Vec::with_capacity(rounds);
            let mut theirs = Vec::with_capacity(rounds);
            for round in 0..rounds {
                let peer = |theirs: &mut Vec<f64>| -> Result<(), String> {
                    let cpu = Some(BENCH_CPU);
                    let duration = self.plan.disk_point_duration;
                    theirs.push(measure_fio(&fio, file, qd, duration, cpu)?.iops);
                    Ok(())
                };
                if round % 2 == 1 {
                    peer(&mut theirs)?;
                }
                seed = seed.wrapping_add(1);
                ours.push(self.disk_point(file, qd, seed)?);
                if round % 2 == 0 {
                    peer(&mut theirs)?;
                }
            }
            let (tamer, peer) = (median(&mut ours), median(&mut theirs));
            println!(
                "real disk, {qd} threads x MLP 1 (QD {qd}), median of {rounds} alternating rounds: \
                 tamer {tamer:.0} IOPS, fio {peer:.0} IOPS, ratio {:.3}",
                tamer / peer
            );
            result
                .rows
                .push(json!({"disk_vs_fio_qd": qd, "tamer_iops": ours, "fio_iops": theirs}));
            result.figure(&format!("disk_iops_vs_fio_qd{qd}"), Some(tamer / peer));
        }
        Ok(())
    }

    /// The disk's IOPS with `qd` prefetching threads at MLP 1 on one core.
    fn disk_point(&self, file: &Arc<DeviceFile>, qd: usize, seed: u64) -> Result<f64, String> {
        let spec = DeviceSpec::Uring {
            file: file.clone(),
            config: UringConfig { entries: 256 },
        };
        let idle = if self.options.poll {
            IdleMode::Poll
        } else {
            IdleMode::Block
        };
        let run = run_point(
            &spec,
            &self.arena,
            1,
            Mechanism::Prefetch,
            qd,
            1,
            None,
            self.work,
            self.iterations,
            self.plan.disk_point_duration,
            seed,
            idle,
        )?;
        Ok(run.device_iops)
    }
}

/// How much the machine's speed moved during the sweep, the first MLP-1 baseline, the cores,
/// and a row per group's baseline.
fn baseline_figures(
    result: &mut BenchResult,
    group_baselines: &[(Target, usize, f64)],
    baselines: &std::collections::BTreeMap<usize, f64>,
    cores: usize,
) {
    // How much the machine's speed moved during the sweep: the slowest MLP-1 baseline over the
    // fastest (1.0 = steady). Each point is normalized to its own group's baseline.
    let mlp1: Vec<f64> = group_baselines
        .iter()
        .filter(|g| g.1 == 1)
        .map(|g| g.2)
        .collect();
    let (lo, hi) = mlp1
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &b| (lo.min(b), hi.max(b)));
    result.figure("dram_baseline_steadiness", (hi > 0.0).then(|| lo / hi));
    result.figure("dram_baseline_mlp1_ops_per_s", Some(baselines[&1]));
    result.figure("cores", Some(cores as f64));
    for (target, mlp, baseline) in group_baselines {
        result.rows.push(
            json!({"device": target.label(), "mlp": mlp, "dram_baseline_ops_per_s": baseline}),
        );
    }
}

/// A JSON row per point.
fn point_rows(result: &mut BenchResult, points: &[Point]) {
    for p in points {
        result.rows.push(json!({
            "device": p.target.label(),
            "latency_ns": match p.target { Target::Emulated { latency_ns } => Some(latency_ns), Target::Disk => None },
            "mechanism": p.mechanism.name(),
            "threads_per_core": p.threads,
            "mlp": p.mlp,
            "cap": p.cap,
            "ops_per_s": p.ops_per_s,
            "normalized": p.normalized,
            "device_iops": p.device_iops,
            "avg_device_latency_us": p.avg_device_latency_us,
        }));
    }
}

/// The headline figures: the best normalized performance of each mechanism at 4 and 50 µs.
fn best_figures(result: &mut BenchResult, points: &[Point]) {
    let best = |latency: Target,
                mechanisms: &[Mechanism],
                cap: Option<usize>,
                mlp: usize,
                max_threads: usize| {
        points
            .iter()
            .filter(|p| {
                p.target == latency
                    && mechanisms.contains(&p.mechanism)
                    && p.cap == cap
                    && p.mlp == mlp
                    && p.threads <= max_threads
            })
            .map(|p| p.normalized)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let us4 = Target::Emulated { latency_ns: 4_000 };
    let us50 = Target::Emulated { latency_ns: 50_000 };
    let both = [Mechanism::Prefetch, Mechanism::AppQueue];
    result.figure("us4_best_normalized", best(us4, &both, None, 1, 16));
    result.figure(
        "us4_best_prefetch_normalized",
        best(us4, &[Mechanism::Prefetch], None, 1, 16),
    );
    result.figure(
        "us4_best_appqueue_normalized",
        best(us4, &[Mechanism::AppQueue], None, 1, 16),
    );
    result.figure(
        "us4_capped_normalized",
        best(us4, &[Mechanism::Prefetch], Some(LFB_CAP), 1, 16),
    );
    result.figure(
        "us4_demand_normalized",
        best(us4, &[Mechanism::Demand], None, 1, 1),
    );
    result.figure("us50_best_normalized", best(us50, &both, None, 1, 64));
    result.figure(
        "us50_capped_normalized",
        best(us50, &[Mechanism::Prefetch], Some(LFB_CAP), 1, 64),
    );
    result.figure(
        "us4_mlp4_best_normalized",
        best(us4, &[Mechanism::Prefetch], None, 4, 64),
    );
    result.figure(
        "us4_mlp4_capped_normalized",
        best(us4, &[Mechanism::Prefetch], Some(LFB_CAP), 4, 64),
    );
}

/// The plots: normalized performance vs threads per core, one per mechanism at MLP 1 (a line
/// per device), and the 4 µs device's MLP sweep.
fn plots(
    options: &BenchOptions,
    result: &BenchResult,
    points: &[Point],
    targets: &[Target],
    all_mlps: &[usize],
) -> Result<Vec<String>, String> {
    let dir = options.svg_dir();
    let machine = result.machine.short();
    let mut plots = Vec::new();
    let by_latency = |mechanism: Mechanism, cap: Option<usize>, mlp: usize| -> Vec<Series> {
        targets
            .iter()
            .map(|&target| Series {
                label: target.label(),
                points: points
                    .iter()
                    .filter(|p| {
                        p.target == target
                            && p.mechanism == mechanism
                            && p.cap == cap
                            && p.mlp == mlp
                    })
                    .map(|p| (p.threads as f64, p.normalized))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    for (name, title, mechanism, cap) in [
        (
            "microsecond_prefetch.svg",
            "prefetch + user-level switch, no cap, MLP 1",
            Mechanism::Prefetch,
            None,
        ),
        (
            "microsecond_prefetch_cap10.svg",
            "prefetch + switch, 10 in flight per core (line-fill buffers), MLP 1",
            Mechanism::Prefetch,
            Some(LFB_CAP),
        ),
        (
            "microsecond_appqueue.svg",
            "application-managed queue, MLP 1",
            Mechanism::AppQueue,
            None,
        ),
    ] {
        let series = by_latency(mechanism, cap, 1);
        let path = dir.join(name);
        let title = format!("{title} ({machine})");
        write_svg(
            &path,
            &Chart {
                title: &title,
                x_label: "user-level threads per core",
                y_label: "performance / DRAM baseline",
                series: &series,
                log_x: true,
                log_y: false,
                y_unit: YUnit::Plain,
            },
        )?;
        plots.push(path);
    }
    plots.push(mlp_plot(&dir, &machine, points, all_mlps)?);
    Ok(plots.iter().map(|p| p.display().to_string()).collect())
}

/// The 4 µs device's plot: a line per mechanism and MLP.
fn mlp_plot(
    dir: &std::path::Path,
    machine: &str,
    points: &[Point],
    all_mlps: &[usize],
) -> Result<std::path::PathBuf, String> {
    let us4 = Target::Emulated { latency_ns: 4_000 };
    let mlp_series: Vec<Series> = all_mlps
        .iter()
        .flat_map(|&mlp| {
            [
                (Mechanism::Prefetch, None, "prefetch"),
                (Mechanism::Prefetch, Some(LFB_CAP), "prefetch cap 10"),
                (Mechanism::AppQueue, None, "appqueue"),
            ]
            .into_iter()
            .map(move |(mechanism, cap, label)| (mlp, mechanism, cap, label))
        })
        .map(|(mlp, mechanism, cap, label)| Series {
            label: format!("{label}, MLP {mlp}"),
            points: points
                .iter()
                .filter(|p| {
                    p.target == us4 && p.mechanism == mechanism && p.cap == cap && p.mlp == mlp
                })
                .map(|p| (p.threads as f64, p.normalized))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let path = dir.join("microsecond_mlp_4us.svg");
    write_svg(
        &path,
        &Chart {
            title: &format!("4 µs device: memory-level parallelism ({machine})"),
            x_label: "user-level threads per core",
            y_label: "performance / DRAM baseline (same MLP)",
            series: &mlp_series,
            log_x: true,
            log_y: false,
            y_unit: YUnit::Plain,
        },
    )?;
    Ok(path)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn print_table(points: &[Point], targets: &[Target]) {
    println!("\nnormalized performance (1.0 = DRAM baseline) by user-level threads per core");
    print!(
        "{:<10} {:<9} {:>3} {:>6} |",
        "mechanism", "cap", "MLP", "device"
    );
    for t in THREADS {
        print!(" {t:>6}");
    }
    println!();
    let mut seen = Vec::new();
    for p in points {
        let key = (p.mechanism, p.cap, p.mlp, p.target);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let cap = p.cap.map_or("none".to_string(), |c| c.to_string());
        print!(
            "{:<10} {:<9} {:>3} {:>6} |",
            p.mechanism.name(),
            cap,
            p.mlp,
            p.target.label()
        );
        for t in THREADS {
            match points
                .iter()
                .find(|q| (q.mechanism, q.cap, q.mlp, q.target) == key && q.threads == t)
            {
                Some(q) => print!(" {:>6.3}", q.normalized),
                None => print!(" {:>6}", "-"),
            }
        }
        println!();
    }
    let _ = targets;
}
