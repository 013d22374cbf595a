//! `tamer bench durability`: seed 001's evaluation. What does making every transaction
//! durable before it returns cost, with staging queues and group commit (`lad`,
//! [`Durability::Commit`](tamer_store::Durability::Commit)), against the same store without
//! it and against the usual ways of doing it?
//!
//! Configurations, each its own store with the same data on the same kind of device, kept
//! open for the device's rounds:
//!
//! - `volatile`: `Durability::None` (durable at checkpoints, every 1 s);
//! - `lad`: `Durability::Commit`;
//! - `periodic`: `Durability::Periodic(10 ms)`;
//! - `wal`: the store in `None` mode plus a redo log of whole records with group commit
//!   ([`wal`]: a leader OS thread, one write + one flush per batch), as RocksDB's WAL and
//!   Redis's AOF; on the emulated device its log has an emulated device of its own;
//! - `redb` (real disk only): redb with durable commits, the same cache bytes.
//!
//! Workloads (keys preloaded, uniform): `update` (one put, 100-byte values) and `swap` (a
//! transaction reading two keys and writing them swapped), `in_flight` jobs each running
//! transactions back to back on the store's runtime (1 core). Each device's run is a number
//! of rounds; in each, every point runs every configuration in a rotated order with the same
//! seeded keys, and each ratio is the median of its per-round ratios. Devices: the emulated
//! device (the tier bench's 50 µs by default, a 15 µs flush) and the disk (io_uring).
//! `commit_p50_vs_flush` divides `lad`'s commit p50 at one in flight by a 4 KiB write + flush
//! probed on the same device in the same rounds ([`probe`]). Recovery time: a power loss on
//! the fault-injecting emulator after a `lad` run, then a reopen ([`recovery`]).
//!
//! Not built: TATP-like transactions, and the `undo` baseline (software undo logging):
//! `lad_vs_undo` is reported as n/a.
//!
//! Modules: `plan` (sizes, configurations, store options), `stores` (load once, copy per
//! configuration), `drive` (one window), `wal`, `probe`, `redb_run`, `recovery`, `report`.

mod drive;
mod plan;
mod probe;
mod recovery;
mod redb_run;
mod report;
mod stores;
pub mod wal;

pub use plan::{Config, Plan, Point, Target, Workload};

use std::sync::Arc;

use probe::Probe;
use report::{main_point, Results, Sample};
use stores::{seeded_value, DeviceStores};

use crate::output::BenchResult;
use crate::BenchOptions;

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// `num ÷ den`, when both are finite and `den` is positive.
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    (num.is_finite() && den.is_finite() && den > 0.0).then(|| num / den)
}

/// The seed of `point` (its index) in `round`: every configuration gets the same one.
fn point_seed(seed: u64, round: usize, point: usize) -> u64 {
    seed ^ 0xD0_2AB1_u64.wrapping_mul(round as u64 * 64 + point as u64 + 1)
}

/// Runs the bench: each device of the plan (the emulated device first), then the recovery
/// measurement, the figures and rows.
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let plan = Plan {
        poll: options.poll,
        ..plan
    };
    let mut result = BenchResult::new("durability", options.quick, options.seed);
    add_notes(&plan, &mut result);
    println!(
        "durability: {} keys of {} B, cache {} MiB, {} rounds, emulated latency {} µs (flush {} µs)",
        plan.keys,
        plan::VALUE_BYTES,
        plan.cache_bytes >> 20,
        plan.rounds,
        plan.latency_ns / 1_000,
        plan::FLUSH_LATENCY_NS / 1_000
    );
    let mut results = Results::default();
    let targets = [(plan.emulated, Target::Emulated), (plan.disk, Target::Disk)];
    for target in targets.into_iter().filter_map(|(on, t)| on.then_some(t)) {
        run_device(target, &plan, options, &mut results)?;
        if target == Target::Emulated {
            match recovery::measure(&plan, options) {
                Ok(r) => results.recovery = Some(r),
                Err(err) => result.note(format!("recovery time not measured: {err}")),
            }
        }
    }
    report::report(&plan, &results, &mut result);
    Ok(result)
}

fn add_notes(plan: &Plan, result: &mut BenchResult) {
    result.note(
        "not built: TATP-like transactions and the undo-logging baseline (lad_vs_undo is n/a)",
    );
    result.note(
        "wal: its group-commit leader is an OS thread besides the store's one core (lad's group \
         commit runs on the store's core): it gets the second CPU, which favours wal",
    );
    result.note(
        "wal on the emulated device: its log is on a second emulated device with the same latencies",
    );
    if plan.disk {
        result.note(format!(
            "redb: {} OS threads of one durable put each (redb serializes write transactions)",
            plan.redb_threads
        ));
    }
    if plan.poll {
        result.note("--poll: the idle cores of all four open stores spin, and they share one CPU");
    }
    result.note("bytes per transaction: every page the store wrote (cache write-backs) + the wal's log blocks");
}

/// One device: load, open the stores, the interleaved rounds, close.
fn run_device(
    target: Target,
    plan: &Plan,
    options: &BenchOptions,
    results: &mut Results,
) -> Result<(), String> {
    let mut stores = DeviceStores::prepare(target, plan, options)?;
    let value = seeded_value(options.seed ^ 0x5eed);
    let redb = match target {
        Target::Disk => Some(redb_run::load(
            &options.data_dir.join("durability.redb"),
            plan,
            &value,
        )?),
        Target::Emulated => None,
    };
    let mut probe = match (&stores.model, target) {
        (Some(model), _) => Probe::emulated(model)?,
        (None, _) => Probe::disk(&options.data_dir)?,
    };
    for round in 0..plan.rounds {
        for (i, &point) in plan.points.iter().enumerate() {
            let seed = point_seed(options.seed, round, i);
            let mut configs = Config::STORES.to_vec();
            if redb.is_some() && point == main_point(plan) {
                configs.push(Config::Redb);
            }
            let turn = round % configs.len();
            configs.rotate_left(turn);
            for config in configs {
                let sample = match (config, &redb) {
                    (Config::Redb, Some(db)) => {
                        Sample::redb(point, round, &redb_run::window(db, plan, &value, seed)?)
                    }
                    _ => measure(&mut stores, config, plan, point, &value, seed, round)?,
                };
                sample.print();
                results.samples.push(sample);
            }
        }
        let ns = (0..plan.probes_per_round)
            .map(|_| probe.sample())
            .collect::<Result<Vec<u64>, String>>()?;
        results.probes.push((target, round, ns));
    }
    stores.close()
}

/// One window of `config` at `point`.
fn measure(
    stores: &mut DeviceStores,
    config: Config,
    plan: &Plan,
    point: Point,
    value: &Arc<Vec<u8>>,
    seed: u64,
    round: usize,
) -> Result<Sample, String> {
    let target = stores.target;
    let fail = |e: String| {
        format!(
            "{} {} {config:?}: {e}",
            target.name(),
            point.workload.name()
        )
    };
    let window = if config == Config::Wal {
        let log = stores.start_log()?;
        let w = drive::window(stores.db(config), Some(&log), plan, point, value, seed);
        stores.stop_log(&log)?;
        w
    } else {
        drive::window(stores.db(config), None, plan, point, value, seed)
    }
    .map_err(fail)?;
    Ok(Sample::of(target, point, config, round, &window))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: an even count not averaging its middle pair, an unsorted pick, NaN counted.
    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    /// Catches: a zero or negative denominator giving inf, NaN passing through.
    #[test]
    fn ratio_refuses_what_is_not_a_ratio() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        assert_eq!(ratio(1.0, -2.0), None);
    }

    /// Every configuration of a round gets the same seed; rounds and points differ.
    #[test]
    fn point_seeds_differ_by_round_and_point() {
        assert_ne!(point_seed(42, 0, 0), point_seed(42, 1, 0));
        assert_ne!(point_seed(42, 0, 0), point_seed(42, 0, 1));
        assert_eq!(point_seed(42, 2, 1), point_seed(42, 2, 1));
    }
}
