//! The disk's utilization side by side: rounds of a `tamer` closed-loop window, then fio at
//! the disk queue depth that window measured, on the same file, right after; the figure is
//! the median of the per-round ratios.
//!
//! Rounds, because a shared disk's speed drifts by more than the figure's margin: a round
//! pairs a window of the store with a fio run of the same length less than a second later,
//! and the store's queue is drained in between, so that neither runs against the other.

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;
use tamer_store::Db;

use super::context::DeviceCtx;
use super::driver::{drain, Window};
use super::fio::fio_at;
use super::jobs::Meter;
use super::measurement::{fio_queue_depth, ratio, FioPoint};
use super::plan::{workload_seed, Workload};
use super::policy_rounds::{disturbed, median, spread, Feeder};
use crate::output::BenchResult;

/// The most rounds a workload runs (the plan asks for fewer).
const ROUNDS_MAX: usize = 16;
/// The store's feeding before each measured window: the queue refills after the drain.
const REFILL: Duration = Duration::from_millis(100);

/// One round: the store's window and fio right after it.
#[derive(Clone, Debug)]
pub(super) struct UtilRound {
    /// The store's device IOPS (misses + write-backs) in its window.
    pub(super) store_iops: f64,
    /// The disk's average queue depth at the block layer in the store's window.
    pub(super) device_qd: f64,
    /// The store's window was disturbed (see [`disturbed`]).
    pub(super) disturbed: bool,
    pub(super) fio: Option<FioPoint>,
}

impl UtilRound {
    /// The store's IOPS ÷ fio's at the same disk queue depth.
    pub(super) fn ratio(&self) -> Option<f64> {
        ratio(Some(self.store_iops), self.fio.as_ref().map(|f| f.iops))
    }
}

/// The rounds of one workload.
pub(super) struct UtilRounds {
    pub(super) workload: Workload,
    pub(super) rounds: Vec<UtilRound>,
}

impl UtilRounds {
    /// The per-round ratios of the undisturbed rounds (of all when fewer than 3 are left).
    pub(super) fn ratios(&self) -> Vec<f64> {
        let calm = self
            .rounds
            .iter()
            .filter(|r| !r.disturbed && r.ratio().is_some())
            .count();
        self.rounds
            .iter()
            .filter(|r| calm < 3 || !r.disturbed)
            .filter_map(UtilRound::ratio)
            .collect()
    }
}

/// `dev.plan.utilization_rounds` rounds of `workload` under `tamer`'s policy (the runtime's
/// policy when called); `None` without fio or a block device to read the queue depth from.
pub(super) fn utilization_rounds(
    dev: &DeviceCtx,
    db: &Db,
    meter: &Arc<Meter>,
    workload: Workload,
    result: &mut BenchResult,
) -> Result<Option<UtilRounds>, String> {
    let plan = dev.plan;
    let Some(block) = dev.block.as_ref() else {
        return Ok(None);
    };
    if dev.fio.is_none() || plan.utilization_rounds == 0 {
        return Ok(None);
    }
    let ctx = dev.job_context(db, meter.clone(), dev.payloads.of(workload));
    let seed = workload_seed(dev.options.seed, workload) ^ 0x0071_1100;
    let mut feeder = Feeder::new(db, &ctx, workload, plan, seed);
    let mut rounds = Vec::with_capacity(plan.utilization_rounds.min(ROUNDS_MAX));
    for _ in 0..plan.utilization_rounds.min(ROUNDS_MAX) {
        feeder.feed_for(REFILL);
        let start = block.start();
        let window = Window::open(db);
        let fed = feeder.feed_for(plan.fio_duration);
        let empty = Histogram::new(1).expect("static bounds");
        let m = window.close(db, &empty);
        let block_window = block.finish(start);
        drain(meter)?;
        let Some(bw) = block_window else {
            result.note(format!(
                "disk {}: the block device's counters could not be read; no utilization rounds",
                workload.name()
            ));
            return Ok(None);
        };
        // A window without device I/O (every access a hit, or the store stalled) has no
        // depth to compare at.
        let fio = if m.device_iops() > 0.0 {
            fio_at(dev, fio_queue_depth(bw.queue_depth), result)?
        } else {
            None
        };
        rounds.push(UtilRound {
            store_iops: m.device_iops(),
            device_qd: bw.queue_depth,
            disturbed: disturbed(&m, plan.cores, fed.max_gap),
            fio,
        });
    }
    let run = UtilRounds { workload, rounds };
    print_rounds(dev, &run);
    Ok(Some(run))
}

fn print_rounds(dev: &DeviceCtx, run: &UtilRounds) {
    let ratios = run.ratios();
    let store: Vec<f64> = run.rounds.iter().map(|r| r.store_iops).collect();
    let fio: Vec<f64> = run
        .rounds
        .iter()
        .filter_map(|r| Some(r.fio.as_ref()?.iops))
        .collect();
    let qd: Vec<f64> = run.rounds.iter().map(|r| r.device_qd).collect();
    println!(
        "  {:<5} util       {:<6} {} rounds of {} ms, fio after each at its disk QD ({} disturbed): store ÷ fio {}; store IOPS median {:.0}, fio {:.0}, disk QD {:.1}",
        dev.target.name(),
        run.workload.name(),
        run.rounds.len(),
        dev.plan.fio_duration.as_millis(),
        run.rounds.iter().filter(|r| r.disturbed).count(),
        spread(&ratios),
        median(&store).unwrap_or(f64::NAN),
        median(&fio).unwrap_or(f64::NAN),
        median(&qd).unwrap_or(f64::NAN),
    );
}

/// Per workload on the disk: `device_iops_utilization_<w>_disk` (the median of the rounds'
/// ratios) with its lowest and highest round, and a row with every round.
/// A disk workload of the plan without rounds (no fio, no block device) gets `null` figures.
pub(super) fn utilization_figures(
    workloads: &[Workload],
    all: &[UtilRounds],
    result: &mut BenchResult,
) {
    for w in workloads {
        if !all.iter().any(|run| run.workload == *w) {
            result.figure(&format!("device_iops_utilization_{}_disk", w.name()), None);
        }
    }
    for run in all {
        let sfx = format!("{}_disk", run.workload.name());
        let ratios = run.ratios();
        result.figure(&format!("device_iops_utilization_{sfx}"), median(&ratios));
        result.figure(
            &format!("device_iops_utilization_min_round_{sfx}"),
            ratios.iter().copied().reduce(f64::min),
        );
        result.figure(
            &format!("device_iops_utilization_max_round_{sfx}"),
            ratios.iter().copied().reduce(f64::max),
        );
        result.rows.push(json!({
            "kind": "utilization_rounds",
            "device": "disk",
            "workload": run.workload.name(),
            "store_iops": run.rounds.iter().map(|r| r.store_iops).collect::<Vec<_>>(),
            "device_qd": run.rounds.iter().map(|r| r.device_qd).collect::<Vec<_>>(),
            "fio_qd": run.rounds.iter().map(|r| r.fio.as_ref().map(|f| f.qd)).collect::<Vec<_>>(),
            "fio_iops": run.rounds.iter().map(|r| r.fio.as_ref().map(|f| f.iops)).collect::<Vec<_>>(),
            "disturbed": run.rounds.iter().map(|r| r.disturbed).collect::<Vec<_>>(),
            "ratios": ratios,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(store_iops: f64, fio_iops: Option<f64>, disturbed: bool) -> UtilRound {
        UtilRound {
            store_iops,
            device_qd: 8.0,
            disturbed,
            fio: fio_iops.map(|iops| FioPoint {
                qd: 8,
                iops,
                device_qd: None,
                cpu_us_per_io: None,
            }),
        }
    }

    /// Catches: the ratio inverted, disturbed rounds kept when enough calm ones remain, or a
    /// round without fio counted as zero.
    #[test]
    fn the_ratios_leave_out_disturbed_rounds_and_rounds_without_fio() {
        let run = UtilRounds {
            workload: Workload::YcsbC,
            rounds: vec![
                round(900.0, Some(1000.0), false),
                round(100.0, Some(1000.0), true),
                round(800.0, Some(1000.0), false),
                round(700.0, None, false),
                round(1000.0, Some(1000.0), false),
            ],
        };
        assert_eq!(run.ratios(), vec![0.9, 0.8, 1.0]);
        assert_eq!(median(&run.ratios()), Some(0.9));
    }

    /// Catches: a calm round whose fio failed counted among the 3 calm rounds needed to leave
    /// the disturbed ones out (the median would then rest on fewer than 3 ratios).
    #[test]
    fn calm_rounds_without_fio_do_not_count_as_calm() {
        let run = UtilRounds {
            workload: Workload::YcsbC,
            rounds: vec![
                round(500.0, Some(1000.0), true),
                round(900.0, Some(1000.0), false),
                round(700.0, None, false),
                round(800.0, None, false),
                round(600.0, Some(1000.0), true),
            ],
        };
        assert_eq!(run.ratios(), vec![0.5, 0.9, 0.6]);
    }

    /// Catches: dropping disturbed rounds even when fewer than 3 calm ones would be left.
    #[test]
    fn with_fewer_than_three_calm_rounds_every_round_counts() {
        let run = UtilRounds {
            workload: Workload::YcsbC,
            rounds: vec![
                round(500.0, Some(1000.0), true),
                round(900.0, Some(1000.0), false),
                round(600.0, Some(1000.0), true),
            ],
        };
        assert_eq!(run.ratios(), vec![0.5, 0.9, 0.6]);
    }
}
