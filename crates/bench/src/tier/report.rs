//! What the bench reports from its measured points: the printed header and closed-loop lines,
//! the named figures (see docs/benchmarks.md), the JSON rows and the SVG plots.

use std::path::Path;

use serde_json::json;

use super::device_results::DeviceRun;
use super::measurement::{ratio, FioPoint, LoadPoint, Measurement, Point};
use super::plan::{Config, Plan, Target, Workload};
use super::policy_rounds::{policy_figures, PolicyRounds};
use super::utilization::utilization_figures;
use crate::output::BenchResult;
use crate::plot::{write_bar_svg, write_svg, BarChart, Chart, Cluster, Series, YUnit};
use crate::BenchOptions;
use tamer_cache::PAGE_SIZE;
use tamer_store::IndexStats;

/// The run's sizes, printed before the first point.
pub(super) fn print_header(plan: &Plan) {
    println!(
        "tier: {} MiB of values ({} records of {} B) + {} TATP subscribers (rows of {} B), cache {} MiB, {} core(s) × {} threads, {} jobs outstanding (closed loop), work {} ns/job, emulated latency {} µs",
        plan.data_bytes >> 20,
        plan.records(),
        plan.value_bytes,
        plan.tatp_subscribers,
        plan.tatp_row_bytes,
        plan.cache_bytes >> 20,
        plan.cores,
        plan.threads_per_core,
        plan.population(),
        plan.work_ns,
        plan.emulated_latency_ns / 1_000
    );
}

/// The fio part of a disk point's line: the disk's queue depth under the store and under fio,
/// fio's IOPS and CPU per I/O, the utilization; and the same at the store's held count.
fn fio_text(point: &Point, f: &FioPoint, util: f64) -> String {
    let qd = |q: Option<f64>| q.map_or("?".to_string(), |q| format!("{q:.1}"));
    let mut text = format!(
        "disk QD {}  fio@QD{} (disk QD {}) {:>7.0} IOPS, CPU {:.1} µs/IO  util {util:.2}",
        qd(point.m.block.map(|b| b.queue_depth)),
        f.qd,
        qd(f.device_qd),
        f.iops,
        f.cpu_us_per_io.unwrap_or(f64::NAN),
    );
    if let Some(held) = &point.fio.at_held_qd {
        text += &format!(
            "  (fio@QD{} held {:>7.0}: {:.2})",
            held.qd,
            held.iops,
            point.held_iops_utilization().unwrap_or(f64::NAN)
        );
    }
    text
}

/// One closed-loop point's line of the table, normalized to `dram`'s throughput of the same
/// workload (1 when `dram` has none yet).
pub(super) fn print_point(point: &Point, plan: &Plan, dram: &[(Workload, f64)]) {
    let m = &point.m;
    let norm = dram
        .iter()
        .find(|(w, _)| *w == point.workload)
        .map(|&(_, d)| m.ops_per_s() / d)
        .unwrap_or(1.0);
    let fio = match (&point.fio.at_device_qd, point.device_iops_utilization()) {
        (Some(f), Some(util)) => fio_text(point, f, util),
        _ if m.dma_engine_copies + m.dma_core_copies > 0 => format!(
            "copies by DMA engine {} / by the core {}",
            m.dma_engine_copies, m.dma_core_copies
        ),
        _ => String::new(),
    };
    let fio = if m.pages_compacted > 0 {
        format!("{fio}  compacted {} pages", m.pages_compacted)
    } else {
        fio
    };
    let core = match (m.core_waiting_fraction, m.cpu_us_per_io()) {
        (Some(waiting), Some(cpu)) => format!(
            "  core waits {:.0} %  CPU {cpu:.1} µs/IO ({:.0} % kernel)",
            waiting * 100.0,
            m.core_system_share.unwrap_or(0.0) * 100.0
        ),
        (Some(waiting), None) => format!("  core waits {:.0} %", waiting * 100.0),
        _ => String::new(),
    };
    println!(
        "  {:<5} {:<10} {:<6} {:>9.0} ops/s  norm {:>5.3}  p50 {:>8.1} µs  p99 {:>8.1} µs  hit {:>6.4}  reads/op {:>5.3} (index {:>5.3})  miss every {:>7} µs/core  IOPS {:>7.0}  in flight {:>5.1}  write-backs {:>6} (by misses {:>6}){core}  {fio}",
        point.target.name(),
        point.config.name(),
        point.workload.name(),
        m.ops_per_s(),
        norm,
        m.p50_us,
        m.p99_us,
        m.hit_ratio(),
        m.device_reads_per_op(),
        m.index_reads_per_op(),
        m.miss_interval_us(plan.cores)
            .map_or("-".into(), |v| format!("{v:.1}")),
        m.device_iops(),
        m.sampled_in_flight,
        m.write_backs,
        m.victim_write_backs,
    );
}

/// Everything after the last point: the figures, the JSON rows (interleaved, closed, open, in
/// that order) and the plots of every device's `run`.
pub(super) fn report(
    options: &BenchOptions,
    plan: &Plan,
    run: &DeviceRun,
    result: &mut BenchResult,
) {
    // First: the headline figures copy `device_iops_utilization_ycsb_c_disk` from them.
    if plan.disk {
        utilization_figures(&plan.workloads, &run.utilization, result);
    }
    figures(&run.points, &run.load, plan.cores, result);
    for target in [Target::Emulated, Target::Disk] {
        let rounds: Vec<&PolicyRounds> = run
            .policy
            .iter()
            .filter(|(t, _)| *t == target)
            .map(|(_, r)| r)
            .collect();
        policy_figures(target.name(), &rounds, result);
    }
    budget_figures(plan, &run.budget, result);
    fio_peak_figures(run, result);
    worst_figures(result);
    interleaved_figures(&run.interleaved, result);
    closed_rows(&run.points, plan.cores, result);
    open_rows(&run.load, result);
    plots(options, &run.points, &run.load, result);
}

/// The named figures from the measured points (see docs/benchmarks.md).
pub fn figures(points: &[Point], load: &[LoadPoint], cores: usize, result: &mut BenchResult) {
    for t in [Target::Emulated, Target::Disk] {
        for w in Workload::ALL {
            closed_loop_figures(points, t, w, cores, result);
        }
        equal_load_figure(load, t, result);
    }
    headline_figures(result);
}

/// The ratios of `w`'s closed-loop points on `t` (`<figure>_<workload>_<device>`).
fn closed_loop_figures(
    points: &[Point],
    t: Target,
    w: Workload,
    cores: usize,
    result: &mut BenchResult,
) {
    let find = |c: Config| {
        points
            .iter()
            .find(|p| p.target == t && p.config == c && p.workload == w)
    };
    let ops = |c| find(c).map(|p| p.m.ops_per_s());
    let p99 = |c| find(c).map(|p| p.m.p99_us);
    let sfx = format!("{}_{}", w.name(), t.name());
    let dram = ops(Config::Dram);
    let tamer = ops(Config::Tamer);
    let mut figure =
        |name: &str, value: Option<f64>| result.figure(&format!("{name}_{sfx}"), value);
    figure("tiered_vs_dram", ratio(tamer, dram));
    figure("flash_sync_vs_dram", ratio(ops(Config::FlashSync), dram));
    figure("fifo_vs_dram", ratio(ops(Config::TamerFifo), dram));
    figure(
        "fifo_p99_vs_tamer_p99_combined",
        ratio(p99(Config::TamerFifo), p99(Config::Tamer)),
    );
    let tamer_point = find(Config::Tamer);
    figure(
        "device_reads_per_op",
        tamer_point.map(|p| p.m.device_reads_per_op()),
    );
    figure(
        "index_reads_per_op",
        tamer_point.map(|p| p.m.index_reads_per_op()),
    );
    figure(
        "cpu_us_per_io",
        tamer_point.and_then(|p| p.m.cpu_us_per_io()),
    );
    figure(
        "core_waiting_fraction",
        tamer_point.and_then(|p| p.m.core_waiting_fraction),
    );
    figure("tamer_vs_flash_sync", ratio(tamer, ops(Config::FlashSync)));
    figure("os_paging_vs_dram", ratio(ops(Config::OsPaging), dram));
    figure("tamer_vs_os_paging", ratio(tamer, ops(Config::OsPaging)));
    if t == Target::Emulated {
        // The share of `tamer`'s core time spent in the emulator's completion copies
        // (DMA's stand-in: a real device moves the data without the CPU).
        figure(
            "emulator_copy_core_share",
            find(Config::Tamer)
                .map(|p| p.m.emulator_cpu_secs / (p.m.secs * cores as f64).max(1e-9)),
        );
        figure(
            "miss_interval_us",
            find(Config::Tamer).and_then(|p| p.m.miss_interval_us(1)),
        );
    }
    if t == Target::Disk {
        let tamer = find(Config::Tamer);
        figure(
            "device_iops_utilization_whole_point",
            tamer.and_then(Point::device_iops_utilization),
        );
        figure(
            "held_iops_utilization",
            tamer.and_then(Point::held_iops_utilization),
        );
        figure(
            "device_queue_depth",
            tamer.and_then(|p| p.m.block.map(|b| b.queue_depth)),
        );
        figure(
            "fio_cpu_us_per_io",
            tamer.and_then(|p| p.fio.at_device_qd.as_ref()?.cpu_us_per_io),
        );
    }
}

/// `p99_vs_flash_sync_<device>`: the i-th `tamer` window and the i-th `flash-sync` window
/// are round i's (whichever ran first); the median of the rounds' ratios.
fn equal_load_figure(load: &[LoadPoint], t: Target, result: &mut BenchResult) {
    let at_equal_load = |c: Config| -> Vec<f64> {
        load.iter()
            .filter(|p| p.target == t && p.config == c && p.fraction < 0.0)
            .map(|p| p.m.p99_us)
            .collect()
    };
    let mut ratios: Vec<f64> = at_equal_load(Config::Tamer)
        .into_iter()
        .zip(at_equal_load(Config::FlashSync))
        .filter_map(|(tamer, sync)| ratio(Some(tamer), Some(sync)))
        .collect();
    ratios.sort_by(|a, b| a.total_cmp(b));
    result.figure(
        &format!("p99_vs_flash_sync_{}", t.name()),
        ratios.get(ratios.len() / 2).copied(),
    );
}

/// Per device: the index's bytes per key, its share of the DRAM budget, and the share of its
/// bucket pages resident when `tamer` opened the store.
fn budget_figures(plan: &Plan, budget: &[(Target, IndexStats)], result: &mut BenchResult) {
    for (target, s) in budget {
        let d = target.name();
        result.figure(&format!("index_bytes_per_key_{d}"), Some(s.bytes_per_key()));
        result.figure(
            &format!("index_share_of_budget_{d}"),
            Some(s.index_bytes as f64 / plan.cache_bytes as f64),
        );
        result.figure(
            &format!("index_resident_fraction_{d}"),
            Some(s.resident_index_pages as f64 / s.buckets.max(1) as f64),
        );
        result.rows.push(json!({
            "kind": "budget",
            "device": d,
            "cache_bytes": plan.cache_bytes,
            "pinned_bytes": s.pinned_bytes,
            "frames_bytes": s.frames_bytes,
            "index_bytes": s.index_bytes,
            "resident_index_bytes": s.resident_index_pages * PAGE_SIZE as u64,
            "data_frames_bytes": s.data_frames_bytes(),
            "buckets": s.buckets,
            "index_capacity_pages": s.index_capacity_pages,
            "placeable_index_pages": s.placeable_index_pages,
            "keys": s.keys,
            "index_bytes_per_key": s.bytes_per_key(),
            "fits": s.fits(),
        }));
    }
}

/// `fio_peak_iops_disk` (fio's random reads at the peak's depth on the store's file) and per
/// workload `device_iops_of_fio_peak_<w>_disk`: the store's device IOPS ÷ that peak.
fn fio_peak_figures(run: &DeviceRun, result: &mut BenchResult) {
    let Some(peak) = &run.fio_peak else {
        return;
    };
    result.figure("fio_peak_iops_disk", Some(peak.iops));
    result.figure("fio_peak_cpu_us_per_io_disk", peak.cpu_us_per_io);
    for p in &run.points {
        if p.target == Target::Disk && p.config == Config::Tamer {
            result.figure(
                &format!("device_iops_of_fio_peak_{}_disk", p.workload.name()),
                ratio(Some(p.m.device_iops()), Some(peak.iops)),
            );
        }
    }
    result
        .rows
        .push(json!({"kind": "fio_peak", "device": "disk", "fio": fio_json(peak)}));
}

/// The lowest of a figure over workloads (and devices): `tamer_vs_fifo_min`,
/// `fifo_p99_vs_tamer_p99_min` (both devices), `device_iops_utilization_min` (the disk).
fn worst_figures(result: &mut BenchResult) {
    let lowest = |prefix: &str, devices: &[&str], result: &BenchResult| {
        let mut values = Vec::new();
        for d in devices {
            for w in Workload::ALL {
                let name = format!("{prefix}_{}_{d}", w.name());
                if let Some(Some(v)) = result.figures.get(&name) {
                    values.push(*v);
                }
            }
        }
        values.into_iter().reduce(f64::min)
    };
    for (name, prefix, devices) in [
        ("tamer_vs_fifo_min", "tamer_vs_fifo", &["emu", "disk"][..]),
        (
            "fifo_p99_vs_tamer_p99_min",
            "fifo_p99_vs_tamer_p99",
            &["emu", "disk"][..],
        ),
        (
            "device_iops_utilization_min",
            "device_iops_utilization",
            &["disk"][..],
        ),
    ] {
        let v = lowest(prefix, devices, result);
        result.figure(name, v);
    }
}

/// The headline figures: copies of their YCSB-C figure on the emulated device or the disk.
fn headline_figures(result: &mut BenchResult) {
    let get = |name: &str, result: &BenchResult| result.figures.get(name).copied().flatten();
    let headline = [
        ("tiered_vs_dram", "tiered_vs_dram_ycsb_c_emu"),
        ("fifo_p99_vs_tamer_p99", "fifo_p99_vs_tamer_p99_ycsb_c_emu"),
        ("flash_sync_vs_dram", "flash_sync_vs_dram_ycsb_c_emu"),
        ("p99_vs_flash_sync", "p99_vs_flash_sync_emu"),
        (
            "device_iops_utilization",
            "device_iops_utilization_ycsb_c_disk",
        ),
        ("tamer_vs_flash_sync", "tamer_vs_flash_sync_ycsb_c_emu"),
        ("os_paging_vs_dram", "os_paging_vs_dram_ycsb_c_disk"),
        ("tamer_vs_os_paging", "tamer_vs_os_paging_ycsb_c_disk"),
        (
            "emulator_copy_core_share",
            "emulator_copy_core_share_ycsb_c_emu",
        ),
    ];
    for (name, from) in headline {
        let v = get(from, result);
        result.figure(name, v);
    }
}

/// The same quantity as `tiered_vs_dram_<workload>_emu`, measured in alternating windows
/// against a `dram` that stays open (median of the rounds, min and max beside it, and a row
/// per workload); `tiered_vs_dram_interleaved` is the lowest of the workloads' medians.
fn interleaved_figures(interleaved: &[(Workload, Vec<f64>)], result: &mut BenchResult) {
    let mut worst: Option<f64> = None;
    for (workload, ratios) in interleaved {
        let mut sorted = ratios.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let Some(&median) = sorted.get(sorted.len() / 2) else {
            continue;
        };
        let sfx = format!("{}_emu", workload.name());
        result.figure(&format!("tiered_vs_dram_interleaved_{sfx}"), Some(median));
        result.figure(
            &format!("tiered_vs_dram_interleaved_min_{sfx}"),
            sorted.first().copied(),
        );
        result.figure(
            &format!("tiered_vs_dram_interleaved_max_{sfx}"),
            sorted.last().copied(),
        );
        result.rows.push(json!({"kind": "interleaved", "device": "emu", "workload": workload.name(), "tamer_vs_dram": ratios}));
        worst = Some(worst.map_or(median, |w: f64| w.min(median)));
    }
    if worst.is_some() {
        result.figure("tiered_vs_dram_interleaved", worst);
    }
}

/// A JSON row (`kind` "closed") per closed-loop point, normalized to `dram` on its device.
fn closed_rows(points: &[Point], cores: usize, result: &mut BenchResult) {
    let dram_ops = |p: &Point| {
        points
            .iter()
            .find(|d| d.target == p.target && d.workload == p.workload && d.config == Config::Dram)
            .map(|d| d.m.ops_per_s())
    };
    for p in points {
        let m = &p.m;
        result.rows.push(json!({
            "kind": "closed",
            "device": p.target.name(),
            "config": p.config.name(),
            "workload": p.workload.name(),
            "ops_per_s": m.ops_per_s(),
            "normalized_to_dram": ratio(Some(m.ops_per_s()), dram_ops(p)),
            "p50_us": m.p50_us,
            "p99_us": m.p99_us,
            "ops": m.ops,
            "secs": m.secs,
            "hit_ratio": m.hit_ratio(),
            "misses": m.misses,
            "index_misses": m.index_misses,
            "device_reads_per_op": m.device_reads_per_op(),
            "index_reads_per_op": m.index_reads_per_op(),
            "core_waiting_fraction": m.core_waiting_fraction,
            "ready_wait_p99_us": m.ready_wait_p99_us,
            "aging_threshold_us": m.aging_threshold_us,
            "core_cpu_secs": m.core_cpu_secs,
            "core_system_share": m.core_system_share,
            "cpu_us_per_io": m.cpu_us_per_io(),
            "major_faults": m.major_faults,
            "emulator_cpu_secs": m.emulator_cpu_secs,
            "dma_engine_copies": m.dma_engine_copies,
            "dma_core_copies": m.dma_core_copies,
            "pages_compacted": m.pages_compacted,
            "write_backs": m.write_backs,
            "victim_write_backs": m.victim_write_backs,
            "merged_misses": m.merged_misses,
            "miss_interval_us_per_core": m.miss_interval_us(cores),
            "device_iops": m.device_iops(),
            "mean_miss_latency_us": m.mean_miss_latency_us,
            "avg_in_flight": m.avg_in_flight(),
            "sampled_in_flight": m.sampled_in_flight,
            "device_queue_depth": m.block.map(|b| b.queue_depth),
            "device_read_latency_us": m.block.and_then(|b| b.read_latency_us),
            "block_iops": m.block.map(|b| b.iops()),
            "fio": p.fio.at_device_qd.as_ref().map(fio_json),
            "fio_at_held_qd": p.fio.at_held_qd.as_ref().map(fio_json),
            "device_iops_utilization": p.device_iops_utilization(),
            "errors": m.errors,
        }));
    }
}

fn fio_json(f: &FioPoint) -> serde_json::Value {
    json!({
        "qd": f.qd,
        "iops": f.iops,
        "device_qd": f.device_qd,
        "cpu_us_per_io": f.cpu_us_per_io,
    })
}

/// A JSON row per open-loop point: `kind` "open" on the curve, "open_equal_load" for the
/// equal-load rounds (negative `fraction`, `fraction_of_dram` null).
fn open_rows(load: &[LoadPoint], result: &mut BenchResult) {
    for p in load {
        let m = &p.m;
        result.rows.push(json!({
            "kind": if p.fraction < 0.0 { "open_equal_load" } else { "open" },
            "device": p.target.name(),
            "config": p.config.name(),
            "workload": p.workload.name(),
            "fraction_of_dram": (p.fraction >= 0.0).then_some(p.fraction),
            "offered_per_s": p.rate,
            "achieved_per_s": m.ops_per_s(),
            "p50_us": m.p50_us,
            "p99_us": m.p99_us,
            "p50_from_submit_us": m.p50_from_submit_us,
            "p99_from_submit_us": m.p99_from_submit_us,
            "merged_misses": m.merged_misses,
            "offered": m.offered,
            "dropped": m.dropped,
            "drop_fraction": m.drop_fraction(),
            "feeder_max_late_us": m.feeder_max_late_us,
            "feeder_late_fraction": m.feeder_late_fraction,
        }));
    }
}

/// `tier_throughput.svg` (grouped bars) and `tier_p99_vs_load.svg` (log scale) in the SVG
/// directory, titled with the machine and the date.
fn plots(options: &BenchOptions, points: &[Point], load: &[LoadPoint], result: &mut BenchResult) {
    let dir = options.svg_dir();
    let machine = result.machine.short();
    let (categories, clusters) = throughput_bars(points);
    let title = format!("tier: throughput / dram, YCSB-B, YCSB-C, TATP ({machine})");
    let path = dir.join("tier_throughput.svg");
    let written = write_bar_svg(
        &path,
        &BarChart {
            title: &title,
            y_label: "throughput / dram (same device)",
            categories: &categories,
            clusters: &clusters,
            reference: Some(1.0),
        },
    );
    match written {
        Ok(()) => result.plots.push(path.display().to_string()),
        Err(err) => result.note(err),
    }
    let series = p99_series(load);
    let title = format!("tier: YCSB-C p99 vs offered load ({machine})");
    write_chart(
        &dir.join("tier_p99_vs_load.svg"),
        &Chart {
            title: &title,
            x_label: "offered load / dram closed-loop throughput (same device)",
            y_label: "p99 latency (log scale)",
            series: &series,
            log_x: false,
            log_y: true,
            y_unit: YUnit::Micros,
        },
        result,
    );
}

/// Writes `chart` to `path`: a plot of `result`, or a note when it cannot be written.
fn write_chart(path: &Path, chart: &Chart, result: &mut BenchResult) {
    match write_svg(path, chart) {
        Ok(()) => result.plots.push(path.display().to_string()),
        Err(err) => result.note(err),
    }
}

/// Throughput normalized to `dram`: one cluster per device and workload that has a `dram`
/// point, one bar per configuration ([`Config::SHOWN`], then os-paging).
fn throughput_bars(points: &[Point]) -> (Vec<String>, Vec<Cluster>) {
    let configs: Vec<Config> = Config::SHOWN
        .into_iter()
        .chain([Config::OsPaging])
        .collect();
    let categories = configs.iter().map(|c| c.name().to_string()).collect();
    let mut clusters = Vec::new();
    for t in [Target::Emulated, Target::Disk] {
        for w in Workload::ALL {
            let find = |c: Config| {
                points
                    .iter()
                    .find(|p| p.target == t && p.workload == w && p.config == c)
                    .map(|p| p.m.ops_per_s())
            };
            let Some(dram) = find(Config::Dram).filter(|&d| d > 0.0) else {
                continue;
            };
            clusters.push(Cluster {
                label: format!("{} {}", t.name(), w.name()),
                values: configs.iter().map(|&c| find(c).map(|v| v / dram)).collect(),
            });
        }
    }
    (categories, clusters)
}

/// p99 vs offered load ÷ `dram`'s throughput: the open-loop curves of `dram` and `tamer` per
/// device, from the scheduled arrival (the client's view) and from the hand-over to the store.
fn p99_series(load: &[LoadPoint]) -> Vec<Series> {
    let mut series = Vec::new();
    for t in [Target::Emulated, Target::Disk] {
        for c in [Config::Dram, Config::Tamer] {
            let curve: Vec<&LoadPoint> = load
                .iter()
                .filter(|p| p.target == t && p.config == c && p.fraction >= 0.0)
                .collect();
            if curve.is_empty() {
                continue;
            }
            for (from, p99) in [
                (
                    "arrival",
                    (|m: &Measurement| m.p99_us) as fn(&Measurement) -> f64,
                ),
                ("hand-over", |m: &Measurement| m.p99_from_submit_us),
            ] {
                series.push(Series {
                    label: format!("{} {} (from {from})", c.name(), t.name()),
                    points: curve.iter().map(|p| (p.fraction, p99(&p.m))).collect(),
                });
            }
        }
    }
    series
}
