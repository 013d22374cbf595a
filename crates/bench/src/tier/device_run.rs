//! One device's run, phase by phase: the device and the second store of the interleaved
//! windows; then, for each in-process configuration in [`Config::ALL`] order, open the store
//! (and load it, for `dram`), its closed-loop points, its open-loop curve, `dram`'s repeat and
//! interleaved windows, close; then os-paging (disk), the equal-load rounds, the teardown.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tamer_cache::PAGE_SIZE;
use tamer_device::EmulatorModel;
use tamer_store::{Db, IndexStats};

use super::context::DeviceCtx;
use super::device_results::DeviceRun;
use super::driver::{closed_loop, load, open_loop};
use super::equal_load::equal_load;
use super::fio::{fio_at, FIO_PEAK_QD};
use super::interleave::{interleave, prepare_second};
use super::jobs::Meter;
use super::measurement::{fio_queue_depth, FioBeside, LoadPoint, Measurement, Point};
use super::os_paging::disk_points;
use super::plan::{workload_seed, Config, Plan, Target, Workload};
use super::policy_rounds::policy_rounds;
use super::report::print_point;
use super::utilization::utilization_rounds;
use crate::output::BenchResult;
use crate::work::Work;
use crate::BenchOptions;

/// Figure 10's workload: the open-loop curve and the equal-load rounds run YCSB-C.
const CURVE_WORKLOAD: Workload = Workload::YcsbC;

/// `dram`'s throughput, the reference of the other configurations on the same device.
#[derive(Default)]
struct DramReference {
    /// Closed loop, per workload (the table's `norm`); the faster of its two measurements once
    /// it has been repeated.
    ops: Vec<(Workload, f64)>,
    /// The open-loop curve's rates are fractions of this: `dram`'s first closed-loop YCSB-C
    /// measurement, so that both curves run at the same absolute rates (the repeat may raise
    /// the reference for the ratios afterwards).
    curve: Option<f64>,
}

/// Runs every configuration on `target`.
pub(super) fn run_device(
    target: Target,
    plan: &Plan,
    options: &BenchOptions,
    work: Work,
    fio: Option<&Path>,
    result: &mut BenchResult,
) -> Result<DeviceRun, String> {
    let dev = DeviceCtx::new(target, plan, options, work, fio)?;
    // The interleaved windows' second store, loaded before `dram` (see `load_second`).
    let second = prepare_second(&dev)?;
    if target == Target::Disk {
        std::fs::create_dir_all(&options.data_dir)
            .map_err(|e| format!("creating {}: {e}", options.data_dir.display()))?;
        let _ = std::fs::remove_file(&dev.path);
    }
    let mut run = DeviceRun::default();
    let mut dram = DramReference::default();
    for config in Config::ALL {
        run_config(&dev, config, second.as_ref(), &mut run, &mut dram, result)?;
    }
    if target == Target::Disk {
        run.points
            .extend(disk_points(options, plan, &dram.ops, result));
    }
    // p99 at equal load: tamer and flash-sync at half of flash-sync's closed-loop throughput.
    let equal = equal_load(&dev, &run.points)?;
    run.load.extend(equal);
    if target == Target::Disk {
        let _ = std::fs::remove_file(&dev.path);
    }
    Ok(run)
}

/// One configuration: open, closed-loop points, open-loop curve, `dram`'s repeat and
/// interleaved windows, close.
fn run_config(
    dev: &DeviceCtx,
    config: Config,
    second: Option<&Arc<EmulatorModel>>,
    run: &mut DeviceRun,
    dram: &mut DramReference,
    result: &mut BenchResult,
) -> Result<(), String> {
    let db = open_config(dev, config)?;
    let meter = Meter::new(dev.plan.cores);
    if config == Config::Tamer {
        let stats = db
            .index_stats()
            .map_err(|e| format!("{}: index stats: {e}", dev.target.name()))?;
        print_budget(dev, &stats);
        run.budget.push((dev.target, stats));
        if dev.target == Target::Disk {
            run.fio_peak = fio_at(dev, FIO_PEAK_QD, result)?;
            if let Some(peak) = &run.fio_peak {
                println!(
                    "  {:<5} fio        peak at QD {}: {:.0} IOPS (disk queue depth {:.1}), CPU {:.1} µs/IO",
                    dev.target.name(),
                    peak.qd,
                    peak.iops,
                    peak.device_qd.unwrap_or(f64::NAN),
                    peak.cpu_us_per_io.unwrap_or(f64::NAN),
                );
            }
        }
    }
    for &workload in &dev.plan.workloads {
        if config == Config::Tamer {
            tamer_points(dev, &db, &meter, workload, run, dram, result)?;
            continue;
        }
        let point = closed_point(dev, config, &db, &meter, workload, result)?;
        print_point(&point, dev.plan, &dram.ops);
        if config == Config::Dram {
            dram.ops.push((workload, point.m.ops_per_s()));
        }
        run.points.push(point);
    }
    // Figure 10 on YCSB-C: p99 vs offered load for dram and tamer, at the same absolute
    // rates (fractions of dram's closed-loop throughput).
    if dev.plan.workloads.contains(&CURVE_WORKLOAD) {
        if config == Config::Dram {
            dram.curve = dram
                .ops
                .iter()
                .find(|(w, _)| *w == CURVE_WORKLOAD)
                .map(|&(_, ops)| ops);
        }
        let curve = open_curve(dev, config, &db, &meter, dram.curve)?;
        run.load.extend(curve);
    }
    if config == Config::Dram {
        repeat_dram(dev, &db, &meter, run, dram)?;
        if let Some(second) = second {
            run.interleaved = interleave(dev, &db, second)?;
        }
    }
    print_checkpoints(dev, config, &db, result);
    db.close()
        .map_err(|e| format!("{} {}: closing: {e}", dev.target.name(), config.name()))
}

/// What the store's checkpoints cost this configuration: writers wait for each.
fn print_checkpoints(dev: &DeviceCtx, config: Config, db: &Db, result: &mut BenchResult) {
    let stats = db.checkpoint_stats();
    println!(
        "  {:<5} {:<10} checkpoints {}, index pages written {}, writers waited {:.1} ms in all, \
         the longest {:.2} ms",
        dev.target.name(),
        config.name(),
        stats.checkpoints,
        stats.index_pages_written,
        stats.total_ns as f64 / 1e6,
        stats.max_ns as f64 / 1e6,
    );
    let sfx = format!("{}_{}", config.name().replace('-', "_"), dev.target.name());
    result.figure(
        &format!("checkpoint_max_ms_{sfx}"),
        Some(stats.max_ns as f64 / 1e6),
    );
    result.figure(
        &format!("checkpoints_{sfx}"),
        Some(stats.checkpoints as f64),
    );
}

/// `tamer` and `tamer-fifo` on `workload`: the policy rounds, then each policy's slices
/// combined as its point (with fio's IOPS at `tamer`'s depth on the disk).
fn tamer_points(
    dev: &DeviceCtx,
    db: &Db,
    meter: &Arc<Meter>,
    workload: Workload,
    run: &mut DeviceRun,
    dram: &DramReference,
    result: &mut BenchResult,
) -> Result<(), String> {
    let policy = policy_rounds(dev, db, meter, workload)?;
    for (config, m) in [
        (Config::Tamer, policy.tamer.clone()),
        (Config::TamerFifo, policy.fifo.clone()),
    ] {
        note_errors(dev, config, workload, &m, result);
        let fio = if config == Config::Tamer {
            fio_beside(dev, config, &m, result)?
        } else {
            FioBeside::default()
        };
        let point = Point {
            target: dev.target,
            config,
            workload,
            m,
            fio,
        };
        print_point(&point, dev.plan, &dram.ops);
        run.points.push(point);
    }
    run.policy.push((dev.target, policy.rounds));
    // After the whole-point fio run above, so that one stays right after the slices it
    // compares with.
    if let Some(util) = utilization_rounds(dev, db, meter, workload, result)? {
        run.utilization.push(util);
    }
    Ok(())
}

/// How `tamer`'s DRAM budget is split: the pinned directory, the index (resident bucket
/// pages: whether it fits, bytes per key) and the data pages.
fn print_budget(dev: &DeviceCtx, s: &IndexStats) {
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    println!(
        "  {:<5} tamer      DRAM budget {:.1} MiB = pinned directory {:.1} + index {:.1} ({} of {} bucket pages resident, {}; {:.1} B/key over {} keys) + data {:.1}",
        dev.target.name(),
        mib(dev.plan.cache_bytes),
        mib(s.pinned_bytes),
        mib(s.resident_index_pages * PAGE_SIZE as u64),
        s.resident_index_pages,
        s.buckets,
        if s.fits() {
            "fits its share".to_string()
        } else {
            format!("does not fit: {} placeable, the rest paged", s.placeable_index_pages)
        },
        s.bytes_per_key(),
        s.keys,
        mib(s.data_frames_bytes()),
    );
}

/// Opens the store with `config`'s options; `dram` (the first) loads it.
fn open_config(dev: &DeviceCtx, config: Config) -> Result<Db, String> {
    let opened = Instant::now();
    let db = Db::open(&dev.path, dev.db_options(config)).map_err(|e| {
        format!(
            "{} {}: opening the store: {e}",
            dev.target.name(),
            config.name()
        )
    })?;
    if config == Config::Dram {
        let plan = dev.plan;
        load(&db, plan, &dev.payloads.value, &dev.payloads.row)?;
        eprintln!(
            "{}: loaded {} records + {} TATP subscribers in {:.1} s ({} keys, {} MiB file)",
            dev.target.name(),
            plan.records(),
            plan.tatp_subscribers,
            opened.elapsed().as_secs_f64(),
            db.len(),
            (db.handle().space_stats().0 * PAGE_SIZE as u64) >> 20
        );
    }
    Ok(db)
}

/// `workload`'s closed-loop point of `config` (failed operations are a note), with fio's
/// IOPS at its queue depth on the disk.
fn closed_point(
    dev: &DeviceCtx,
    config: Config,
    db: &Db,
    meter: &Arc<Meter>,
    workload: Workload,
    result: &mut BenchResult,
) -> Result<Point, String> {
    let ctx = dev.job_context(db, meter.clone(), dev.payloads.of(workload));
    let seed = workload_seed(dev.options.seed, workload);
    let m = closed_loop(db, dev.plan, workload, &ctx, seed)?;
    note_errors(dev, config, workload, &m, result);
    let fio = fio_beside(dev, config, &m, result)?;
    Ok(Point {
        target: dev.target,
        config,
        workload,
        m,
        fio,
    })
}

/// A note when some of the point's operations failed.
fn note_errors(
    dev: &DeviceCtx,
    config: Config,
    workload: Workload,
    m: &Measurement,
    result: &mut BenchResult,
) {
    if m.errors > 0 {
        result.note(format!(
            "{} {} {}: {} operations failed",
            dev.target.name(),
            config.name(),
            workload.name(),
            m.errors
        ));
    }
}

/// Disk, tiered configurations with misses, fio installed: fio on the store's file at the
/// disk's own queue depth during the point (its block-layer average; the store's sampled
/// count of held I/Os where the kernel shows no block device), and at that held count too
/// when it rounds differently; a failed fio run is a note.
fn fio_beside(
    dev: &DeviceCtx,
    config: Config,
    m: &Measurement,
    result: &mut BenchResult,
) -> Result<FioBeside, String> {
    match dev.fio {
        Some(_) if dev.target == Target::Disk && config != Config::Dram && m.misses > 0 => {}
        _ => return Ok(FioBeside::default()),
    }
    let held = fio_queue_depth(m.sampled_in_flight);
    let at_device = m.block.map(|b| fio_queue_depth(b.queue_depth));
    let at_device_qd = fio_at(dev, at_device.unwrap_or(held), result)?;
    let at_held_qd = match at_device {
        Some(qd) if qd != held => fio_at(dev, held, result)?,
        _ => None,
    };
    Ok(FioBeside {
        at_device_qd,
        at_held_qd,
    })
}

/// The open-loop curve of `dram` and `tamer` (none for the others): Poisson arrivals at each
/// of the plan's fractions of `reference` (`dram`'s closed-loop YCSB-C throughput).
fn open_curve(
    dev: &DeviceCtx,
    config: Config,
    db: &Db,
    meter: &Arc<Meter>,
    reference: Option<f64>,
) -> Result<Vec<LoadPoint>, String> {
    let ctx = dev.job_context(db, meter.clone(), dev.payloads.value.clone());
    let seed = workload_seed(dev.options.seed, CURVE_WORKLOAD) ^ 0x10ad;
    let fractions: &[f64] = match config {
        Config::Dram | Config::Tamer => &dev.plan.load_fractions,
        _ => &[],
    };
    let mut load = Vec::with_capacity(fractions.len());
    for &fraction in fractions {
        let Some(dram) = reference else { break };
        let rate = (fraction * dram).max(1.0);
        let m = open_loop(db, dev.plan, CURVE_WORKLOAD, &ctx, rate, seed)?;
        println!(
            "  {:<5} {:<10} open loop {:>5.0} % of dram ({:>9.0}/s): p50 {:>9.1} µs  p99 {:>9.1} µs (from hand-over {:>8.1})  achieved {:>9.0}/s  dropped {:>5.1} %  feeder late ≤ {:.0} µs ({:.2} % > 100 µs)",
            dev.target.name(),
            config.name(),
            fraction * 100.0,
            rate,
            m.p50_us,
            m.p99_us,
            m.p99_from_submit_us,
            m.ops_per_s(),
            m.drop_fraction() * 100.0,
            m.feeder_max_late_us,
            m.feeder_late_fraction * 100.0
        );
        load.push(LoadPoint {
            target: dev.target,
            config,
            workload: CURVE_WORKLOAD,
            fraction,
            rate,
            m,
        });
    }
    Ok(load)
}

/// `dram`'s closed-loop points a second time, after its open-loop curve: a freshly written
/// cache can run slower for a while after the load. The faster of the two is the reference:
/// a slow spell of the baseline must not flatter the ratios.
fn repeat_dram(
    dev: &DeviceCtx,
    db: &Db,
    meter: &Arc<Meter>,
    run: &mut DeviceRun,
    dram: &mut DramReference,
) -> Result<(), String> {
    let config = Config::Dram;
    for &workload in &dev.plan.workloads {
        let ctx = dev.job_context(db, meter.clone(), dev.payloads.of(workload));
        let seed = workload_seed(dev.options.seed, workload) ^ 0x2e9ea7;
        let again = closed_loop(db, dev.plan, workload, &ctx, seed)?;
        let Some(point) = run
            .points
            .iter_mut()
            .find(|p| p.target == dev.target && p.config == config && p.workload == workload)
        else {
            continue;
        };
        println!(
            "  {:<5} {:<10} {:<6} repeated: {:>9.0} ops/s (first {:>9.0}); the reference is the faster",
            dev.target.name(),
            config.name(),
            workload.name(),
            again.ops_per_s(),
            point.m.ops_per_s()
        );
        if again.ops_per_s() > point.m.ops_per_s() {
            point.m = again;
            if let Some(entry) = dram.ops.iter_mut().find(|(w, _)| *w == workload) {
                entry.1 = point.m.ops_per_s();
            }
        }
    }
    Ok(())
}
