//! `tamer` against its own FIFO mode, side by side: alternating closed-loop windows on one
//! open store whose runtime is switched between the two policies
//! ([`tamer_runtime::Runtime::set_policy`]), each pair with the same seeded operations and the
//! order alternating from round to round, so that neither the VM's drift nor the cache's
//! warming favours either policy. The store, its cache and its data are the same for both.

use std::sync::Arc;

use serde_json::json;
use tamer_runtime::Policy;
use tamer_store::Db;

use super::context::DeviceCtx;
use super::driver::closed_loop;
use super::jobs::Meter;
use super::measurement::{ratio, Measurement};
use super::plan::{workload_seed, Workload};
use crate::output::BenchResult;

/// The windows of one workload: `tamer[i]` and `fifo[i]` ran with the same operations.
pub(super) struct PolicyRounds {
    pub(super) workload: Workload,
    pub(super) tamer: Vec<Measurement>,
    pub(super) fifo: Vec<Measurement>,
}

impl PolicyRounds {
    /// `tamer` ÷ `fifo` throughput, per round.
    pub(super) fn throughput_ratios(&self) -> Vec<f64> {
        self.pairs(|t, f| ratio(Some(t.ops_per_s()), Some(f.ops_per_s())))
    }

    /// `fifo` p99 ÷ `tamer` p99, per round (above 1: tamer's tail is shorter).
    pub(super) fn p99_ratios(&self) -> Vec<f64> {
        self.pairs(|t, f| ratio(Some(f.p99_us), Some(t.p99_us)))
    }

    fn pairs(&self, f: impl Fn(&Measurement, &Measurement) -> Option<f64>) -> Vec<f64> {
        self.tamer
            .iter()
            .zip(&self.fifo)
            .filter_map(|(t, fifo)| f(t, fifo))
            .collect()
    }

    /// The round of median throughput among `windows` (the point the table shows).
    pub(super) fn median_window(windows: &[Measurement]) -> Option<&Measurement> {
        let mut order: Vec<&Measurement> = windows.iter().collect();
        order.sort_by(|a, b| a.ops_per_s().total_cmp(&b.ops_per_s()));
        order.get(order.len() / 2).copied()
    }
}

/// The median of `values` (the upper one of an even count); `None` when empty.
pub(super) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted.get(sorted.len() / 2).copied()
}

/// `dev.plan.policy_rounds` rounds of `workload` on `db`: a `tamer` window and a `tamer-fifo`
/// window each, tamer first in even rounds. Leaves the runtime on `tamer`'s policy.
pub(super) fn policy_rounds(
    dev: &DeviceCtx,
    db: &Db,
    meter: &Arc<Meter>,
    workload: Workload,
) -> Result<PolicyRounds, String> {
    let ctx = dev.job_context(db, meter.clone(), dev.payloads.of(workload));
    let mut rounds = PolicyRounds {
        workload,
        tamer: Vec::new(),
        fifo: Vec::new(),
    };
    let rounds_wanted = dev.plan.policy_rounds.max(1);
    for round in 0..rounds_wanted {
        let seed = workload_seed(dev.options.seed, workload) ^ (0x9011_c7e5 + round as u64);
        let order = if round % 2 == 0 {
            [Policy::PriorityAging, Policy::Fifo]
        } else {
            [Policy::Fifo, Policy::PriorityAging]
        };
        for policy in order {
            db.runtime().set_policy(policy);
            let m = closed_loop(db, dev.plan, workload, &ctx, seed)?;
            match policy {
                Policy::Fifo => rounds.fifo.push(m),
                _ => rounds.tamer.push(m),
            }
        }
        let (t, f) = (&rounds.tamer[round], &rounds.fifo[round]);
        println!(
            "  {:<5} policies   {:<6} round {round}: tamer {:>9.0} ops/s p99 {:>8.1} µs | tamer-fifo {:>9.0} ops/s p99 {:>8.1} µs | tamer/fifo {:.3}  fifo p99/tamer p99 {:.2}",
            dev.target.name(),
            workload.name(),
            t.ops_per_s(),
            t.p99_us,
            f.ops_per_s(),
            f.p99_us,
            t.ops_per_s() / f.ops_per_s().max(1e-9),
            f.p99_us / t.p99_us.max(1e-9),
        );
    }
    db.runtime().set_policy(Policy::PriorityAging);
    Ok(rounds)
}

/// The figures and rows of every workload's rounds on one device: `tamer_vs_fifo_<w>_<d>` and
/// `fifo_p99_vs_tamer_p99_<w>_<d>` (medians of the per-round ratios, with their min and max),
/// and a row per workload with every round's ratios.
pub(super) fn policy_figures(device: &str, all: &[&PolicyRounds], result: &mut BenchResult) {
    for rounds in all {
        let sfx = format!("{}_{device}", rounds.workload.name());
        for (name, values) in [
            ("tamer_vs_fifo", rounds.throughput_ratios()),
            ("fifo_p99_vs_tamer_p99", rounds.p99_ratios()),
        ] {
            result.figure(&format!("{name}_{sfx}"), median(&values));
            let lo = values.iter().copied().reduce(f64::min);
            let hi = values.iter().copied().reduce(f64::max);
            result.figure(&format!("{name}_min_round_{sfx}"), lo);
            result.figure(&format!("{name}_max_round_{sfx}"), hi);
        }
        result.rows.push(json!({
            "kind": "policy_rounds",
            "device": device,
            "workload": rounds.workload.name(),
            "tamer_ops_per_s": rounds.tamer.iter().map(Measurement::ops_per_s).collect::<Vec<_>>(),
            "fifo_ops_per_s": rounds.fifo.iter().map(Measurement::ops_per_s).collect::<Vec<_>>(),
            "tamer_p99_us": rounds.tamer.iter().map(|m| m.p99_us).collect::<Vec<_>>(),
            "fifo_p99_us": rounds.fifo.iter().map(|m| m.p99_us).collect::<Vec<_>>(),
            "tamer_vs_fifo": rounds.throughput_ratios(),
            "fifo_p99_vs_tamer_p99": rounds.p99_ratios(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(ops: u64, p99_us: f64) -> Measurement {
        Measurement {
            ops,
            secs: 1.0,
            p99_us,
            ..Measurement::default()
        }
    }

    /// Mutations caught: ratios taken the wrong way round, or rounds paired out of order.
    #[test]
    fn rounds_pair_in_order_and_medians_are_of_the_ratios() {
        let rounds = PolicyRounds {
            workload: Workload::YcsbC,
            tamer: vec![window(90, 2.0), window(120, 1.0), window(100, 4.0)],
            fifo: vec![window(100, 4.0), window(100, 3.0), window(200, 2.0)],
        };
        assert_eq!(rounds.throughput_ratios(), vec![0.9, 1.2, 0.5]);
        assert_eq!(rounds.p99_ratios(), vec![2.0, 3.0, 0.5]);
        assert_eq!(median(&rounds.throughput_ratios()), Some(0.9));
        assert_eq!(median(&[]), None);
        let mid = PolicyRounds::median_window(&rounds.tamer).unwrap();
        assert_eq!(mid.ops, 100);
    }
}
