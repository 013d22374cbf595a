//! `tamer` against its own FIFO mode, side by side, in time slices: one closed loop on one
//! open store whose runtime is switched between the two policies
//! ([`tamer_runtime::Runtime::set_policy`]) every `plan.policy_slice`, a round being a pair of
//! slices, tamer first in even rounds and FIFO first in odd ones. Slices of ≈ 100 ms leave
//! a shared machine's drift little room to favour either policy; a
//! job straddling a switch counts as a completion of the slice it ends in but its latency
//! belongs to neither policy. (That leaves out a job of latency L with a probability of about
//! L ÷ slice: 2-4 % of the jobs at a 3 ms p99 in 100 ms slices, slightly more of the policy
//! with the longer tail.) The store, its cache and its data are the same for both.
//!
//! A round is *disturbed* when, in either of its slices, the host took the store's core away
//! (its executor threads together got less than [`MIN_CORE_CPU_SHARE`] of the slice's time
//! × cores: a core spins rather than blocks under this closed loop, so the rest was stolen) or the load generator did not
//! run for more than [`MAX_FEEDER_GAP`] (the store then drains its queue and idles). Such
//! stalls hit whichever slice runs; the figures are the medians of
//! the undisturbed rounds (of all rounds when fewer than 3 are left), and how many were
//! dropped is reported beside them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;
use tamer_device::now_ns;
use tamer_runtime::{Policy, SpawnError};
use tamer_store::Db;

use super::context::DeviceCtx;
use super::driver::{drain, feeder_idle_for, Window};
use super::jobs::{make_job, Generator, JobContext, Meter, MAX_SLICES};
use super::measurement::{ratio, Measurement};
use super::plan::{workload_seed, Workload};
use crate::blockdev::BlockDevice;
use crate::output::BenchResult;

/// The least share of a slice the store's core must have run for its round to count.
pub(super) const MIN_CORE_CPU_SHARE: f64 = 0.9;
/// The longest the load generator may have been kept from running in a slice.
pub(super) const MAX_FEEDER_GAP: Duration = Duration::from_millis(2);

/// The slices of one workload: `tamer[i]` and `fifo[i]` are round `i`'s pair; `disturbed[i]`
/// says whether either was disturbed (see the module docs).
pub(super) struct PolicyRounds {
    pub(super) workload: Workload,
    pub(super) tamer: Vec<Measurement>,
    pub(super) fifo: Vec<Measurement>,
    pub(super) disturbed: Vec<bool>,
}

/// True when a slice was disturbed: its cores ran less than [`MIN_CORE_CPU_SHARE`] of it, or
/// its feeder was kept away longer than [`MAX_FEEDER_GAP`].
pub(super) fn disturbed(m: &Measurement, cores: usize, feeder_gap: Duration) -> bool {
    let core_share = m
        .core_cpu_secs
        .map(|cpu| cpu / (m.secs * cores as f64).max(1e-9));
    core_share.is_some_and(|share| share < MIN_CORE_CPU_SHARE) || feeder_gap > MAX_FEEDER_GAP
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

    /// `f` of the undisturbed rounds' pairs (of every round when fewer than 3 are left).
    fn pairs(&self, f: impl Fn(&Measurement, &Measurement) -> Option<f64>) -> Vec<f64> {
        let keep_all = self.dropped() == 0;
        self.tamer
            .iter()
            .zip(&self.fifo)
            .zip(&self.disturbed)
            .filter(|(_, &disturbed)| keep_all || !disturbed)
            .filter_map(|((t, fifo), _)| f(t, fifo))
            .collect()
    }

    /// Rounds left out as disturbed (none when fewer than 3 would be left).
    pub(super) fn dropped(&self) -> usize {
        let n = self.disturbed.iter().filter(|d| **d).count();
        if self.disturbed.len() - n < 3 {
            0
        } else {
            n
        }
    }

    /// One policy's slices as one point: operations and time summed, latencies merged, the
    /// counters summed (the table's and the other figures' `tamer` / `tamer-fifo` point).
    pub(super) fn combined(windows: &[(Measurement, Histogram<u64>)]) -> Option<Measurement> {
        let (first, _) = windows.first()?;
        let mut total = first.clone();
        let mut latencies = windows[0].1.clone();
        for (m, h) in &windows[1..] {
            total.add(m);
            let _ = latencies.add(h);
        }
        total.p50_us = latencies.value_at_quantile(0.50) as f64 / 1_000.0;
        total.p99_us = latencies.value_at_quantile(0.99) as f64 / 1_000.0;
        total.p50_from_submit_us = total.p50_us;
        total.p99_from_submit_us = total.p99_us;
        Some(total)
    }
}

/// The median of `values` (the upper one of an even count); `None` when empty.
pub(super) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted.get(sorted.len() / 2).copied()
}

/// Per-round ratios as printed: `median M (lo..hi)`.
pub(super) fn spread(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "median {:.3} ({:.2}..{:.2})",
        median(values).unwrap_or(f64::NAN),
        lo,
        hi
    )
}

/// What [`policy_rounds`] returns: the rounds, and each policy's slices combined.
pub(super) struct PolicyRun {
    pub(super) rounds: PolicyRounds,
    pub(super) tamer: Measurement,
    pub(super) fifo: Measurement,
}

/// `dev.plan.policy_rounds` rounds of `workload` on `db` in one closed loop, the policy
/// switched every slice. Leaves the runtime on `tamer`'s policy.
pub(super) fn policy_rounds(
    dev: &DeviceCtx,
    db: &Db,
    meter: &Arc<Meter>,
    workload: Workload,
) -> Result<PolicyRun, String> {
    let plan = dev.plan;
    let rounds_wanted = plan.policy_rounds.clamp(1, MAX_SLICES / 2);
    let ctx = dev.job_context(db, meter.clone(), dev.payloads.of(workload));
    let seed = workload_seed(dev.options.seed, workload) ^ 0x9011_c7e5;
    let mut feeder = Feeder::new(db, &ctx, workload, plan, seed);
    db.runtime().set_policy(Policy::PriorityAging);
    feeder.feed_for(plan.warmup);
    let mut slices: Vec<(Policy, Measurement, Histogram<u64>)> = Vec::new();
    let mut disturbed_rounds = Vec::with_capacity(rounds_wanted);
    for round in 0..rounds_wanted {
        let order = if round % 2 == 0 {
            [Policy::PriorityAging, Policy::Fifo]
        } else {
            [Policy::Fifo, Policy::PriorityAging]
        };
        let mut round_disturbed = false;
        for policy in order {
            let k = slices.len();
            db.runtime().set_policy(policy);
            meter.begin_slice(k);
            let block = dev.block.as_ref();
            let block_start = block.and_then(BlockDevice::start);
            let window = Window::open(db);
            let fed = feeder.feed_for(plan.policy_slice);
            // Stop counting first, so that what is read is the slice's whole count.
            meter.end_slices();
            let (completed, latencies) = meter.slice(k);
            let mut m = window.close(db, &latencies);
            m.block = block.and_then(|b| b.finish(block_start));
            m.ops = completed;
            m.sampled_in_flight = fed.in_flight;
            round_disturbed |= disturbed(&m, plan.cores, fed.max_gap);
            slices.push((policy, m, latencies));
        }
        disturbed_rounds.push(round_disturbed);
    }
    meter.end_slices();
    drain(meter)?;
    db.runtime().set_policy(Policy::PriorityAging);
    let of = |wanted: Policy| -> Vec<(Measurement, Histogram<u64>)> {
        slices
            .iter()
            .filter(|(p, _, _)| *p == wanted)
            .map(|(_, m, h)| (m.clone(), h.clone()))
            .collect()
    };
    let (tamer_slices, fifo_slices) = (of(Policy::PriorityAging), of(Policy::Fifo));
    let rounds = PolicyRounds {
        workload,
        tamer: tamer_slices.iter().map(|(m, _)| m.clone()).collect(),
        fifo: fifo_slices.iter().map(|(m, _)| m.clone()).collect(),
        disturbed: disturbed_rounds,
    };
    print_rounds(dev, &rounds);
    Ok(PolicyRun {
        tamer: PolicyRounds::combined(&tamer_slices).ok_or("no tamer slice")?,
        fifo: PolicyRounds::combined(&fifo_slices).ok_or("no fifo slice")?,
        rounds,
    })
}

/// One line per workload: the medians and the spread of the per-round ratios.
fn print_rounds(dev: &DeviceCtx, rounds: &PolicyRounds) {
    println!(
        "  {:<5} policies   {:<6} {} rounds of {} ms slices ({} disturbed, left out): tamer/fifo throughput {}  fifo p99/tamer p99 {}",
        dev.target.name(),
        rounds.workload.name(),
        rounds.tamer.len(),
        dev.plan.policy_slice.as_millis(),
        rounds.dropped(),
        spread(&rounds.throughput_ratios()),
        spread(&rounds.p99_ratios()),
    );
}

/// The closed loop's feeder: keeps the plan's population of `workload`'s jobs outstanding.
pub(super) struct Feeder<'a> {
    db: &'a Db,
    ctx: &'a JobContext,
    generator: Generator,
    rng: SmallRng,
    population: usize,
    dma: Option<Arc<tamer_device::EmulatorModel>>,
}

impl<'a> Feeder<'a> {
    pub(super) fn new(
        db: &'a Db,
        ctx: &'a JobContext,
        workload: Workload,
        plan: &super::plan::Plan,
        seed: u64,
    ) -> Self {
        Self {
            db,
            ctx,
            generator: Generator::new(workload, plan),
            rng: SmallRng::seed_from_u64(seed),
            population: plan.population(),
            dma: db.emulator_model().filter(|m| m.config().dma_offload),
        }
    }

    /// Keeps the population outstanding for `duration`: the device's queue depth averaged
    /// over samples every 20 µs, and the longest the feeder went without running.
    pub(super) fn feed_for(&mut self, duration: Duration) -> Fed {
        const SAMPLE_EVERY: Duration = Duration::from_micros(20);
        let end = Instant::now() + duration;
        let meter = &self.ctx.meter;
        let runtime = self.db.runtime();
        let (mut samples, mut in_flight) = (0u64, 0u64);
        let mut next_sample = Instant::now();
        let (mut last, mut max_gap) = (Instant::now(), Duration::ZERO);
        loop {
            let now = Instant::now();
            max_gap = max_gap.max(now - last);
            last = now;
            if now >= end {
                break;
            }
            if now >= next_sample {
                in_flight += runtime.device_in_flight() as u64;
                samples += 1;
                next_sample = now + SAMPLE_EVERY;
            }
            while meter.outstanding.load(std::sync::atomic::Ordering::Acquire) < self.population {
                meter
                    .outstanding
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                let now = now_ns();
                let job = make_job(
                    self.ctx,
                    self.generator.next(&mut self.rng),
                    now,
                    now,
                    false,
                );
                if let Err(SpawnError::Full(_)) = runtime.spawn_job(job) {
                    meter
                        .outstanding
                        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    break;
                }
            }
            feeder_idle_for(&self.dma);
        }
        Fed {
            in_flight: in_flight as f64 / samples.max(1) as f64,
            max_gap,
        }
    }
}

/// What one slice's feeding saw.
pub(super) struct Fed {
    pub(super) in_flight: f64,
    pub(super) max_gap: Duration,
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
        result.figure(
            &format!("policy_rounds_disturbed_{sfx}"),
            Some(rounds.dropped() as f64),
        );
        result.rows.push(json!({
            "kind": "policy_rounds",
            "disturbed": rounds.disturbed,
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
            disturbed: vec![false; 3],
        };
        assert_eq!(rounds.throughput_ratios(), vec![0.9, 1.2, 0.5]);
        assert_eq!(rounds.p99_ratios(), vec![2.0, 3.0, 0.5]);
        assert_eq!(median(&rounds.throughput_ratios()), Some(0.9));
        assert_eq!(median(&[]), None);
    }

    /// Mutations caught: disturbed rounds counted (a stolen slice decides the median), or
    /// dropped even when fewer than 3 rounds would be left.
    #[test]
    fn disturbed_rounds_are_left_out_while_three_remain() {
        let stolen = Measurement {
            core_cpu_secs: Some(0.5),
            ..window(10, 50.0)
        };
        let clean = Measurement {
            core_cpu_secs: Some(0.99),
            ..window(100, 1.0)
        };
        assert!(disturbed(&stolen, 1, Duration::ZERO));
        assert!(!disturbed(&clean, 1, Duration::ZERO));
        assert!(disturbed(&clean, 1, Duration::from_millis(5)));
        let rounds = PolicyRounds {
            workload: Workload::Tatp,
            tamer: vec![clean.clone(), clean.clone(), stolen.clone(), clean.clone()],
            fifo: vec![clean.clone(); 4],
            disturbed: vec![false, false, true, false],
        };
        assert_eq!(rounds.dropped(), 1);
        assert_eq!(rounds.throughput_ratios(), vec![1.0; 3]);
        let few = PolicyRounds {
            disturbed: vec![true, true, false, false],
            ..rounds
        };
        assert_eq!(few.dropped(), 0, "2 left: keep all");
        assert_eq!(few.throughput_ratios().len(), 4);
    }

    /// Mutation caught: a combined point that averages rates instead of summing operations
    /// and time, or takes one slice's latencies only.
    #[test]
    fn slices_combine_by_summing_and_merging() {
        let mut a = Histogram::<u64>::new(2).unwrap();
        let mut b = Histogram::<u64>::new(2).unwrap();
        for v in 1..=98 {
            a.record(v * 1_000).unwrap();
        }
        // Two slow jobs of 100: the merged p99 is theirs; `a` alone has none, `b` alone only.
        b.record_n(500_000, 2).unwrap();
        let combined = PolicyRounds::combined(&[
            (window(300, 0.0), a),
            (
                Measurement {
                    secs: 3.0,
                    ..window(100, 0.0)
                },
                b,
            ),
        ])
        .unwrap();
        assert_eq!(combined.ops, 400);
        assert_eq!(combined.secs, 4.0);
        assert_eq!(combined.ops_per_s(), 100.0);
        assert!(
            (495.0..=505.0).contains(&combined.p99_us),
            "{}",
            combined.p99_us
        );
        assert!(
            combined.p50_us < 100.0,
            "the median is a's: {}",
            combined.p50_us
        );
    }
}
