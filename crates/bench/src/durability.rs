//! `tamer bench durability`: LAD's evaluation. What does making every transaction
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
//! - `undo`: LAD's software undo logging ("SW"), modelled: inside each transaction,
//!   after its reads, the old value of every key it will write (read first) goes to an undo
//!   log (the same group-committed log as the `wal`'s, on its own device) and is flushed;
//!   then the writes are applied to a store in `Durability::Commit` mode, so the changed data
//!   is durable before the transaction returns. Two ordered persist barriers per transaction,
//!   which is what undo logging on an in-place store costs. The store's own commit is `lad`'s
//!   (a staging-queue page and the data pages, one flush), standing in for the in-place
//!   write-back + flush; the transaction's locks are held across the undo flush and released
//!   before the data's flush (as the store does for every transaction);
//! - `redb` (real disk only): redb with durable commits, the same cache bytes.
//!
//! Workloads ([`workloads`], keys preloaded, uniform unless TATP's NURand): `update` (one
//! put, 100-byte values), `swap` (a transaction reading two keys and writing them swapped),
//! `tatp` (TATP's mix: 80 % reads), `neworder` (TPC-C-NewOrder-like), `queue` (push/pop),
//! `in_flight` jobs each running transactions back to back on the store's runtime (1 core).
//! The headline point is TATP at 256 in flight; TATP also runs at 1, 16 and 1024 in flight
//! (`lad` and `volatile` only). Each device's run is a number of rounds; in each, every point
//! runs its configurations in a rotated order with the same seeded keys, and each ratio is
//! the median of its per-round ratios. Devices: the emulated device (the tier bench's 50 µs by
//! default, a 15 µs flush) and the disk (io_uring). `commit_p50_vs_flush` divides `lad`'s
//! commit p50 at one in flight (`update`) by a 4 KiB write + flush probed on the same device
//! in the same rounds ([`probe`]). Recovery time: a power loss on the fault-injecting emulator
//! after a `lad` run, then a reopen ([`recovery`]).
//!
//! Bytes per transaction, two ways: `bytes_per_txn` counts what the store and the log wrote
//! during the window; `settled_bytes_per_txn` counts from a checkpoint ending the warm-up
//! through a checkpoint after the jobs stop, so it includes the page writes that put the
//! window's transactions in the store itself (a `wal`'s data pages are written by a
//! checkpoint, not at commit, and usually no checkpoint falls inside its window).
//!
//! The staging queues' size is swept at the main point on the emulated device: `lad_q16` and
//! `lad_q64` are copies of the loaded store reopened with that many pages per queue
//! (`DbOptions::staging_queue_pages` moves the queues at open); `lad` keeps the size the
//! device gave it.
//!
//! Modules: `plan` (sizes, configurations, points, store options), `workloads` (the
//! transactions and the preload), `stores` (load once, copy per configuration), `drive` (one
//! window), `wal`, `probe`, `redb_run`, `recovery`, `report`.

mod drive;
mod plan;
mod probe;
mod recovery;
mod redb_run;
mod report;
mod stores;
pub mod wal;
mod workloads;

pub use plan::{Config, Plan, Point, PointRun, Target, Workload};

use std::sync::Arc;

use drive::LogRole;
use plan::REDB_POINT;
use probe::Probe;
use report::{Results, Sample};
use stores::{seeded_value, DeviceStores};

use crate::output::BenchResult;
use crate::BenchOptions;

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
        "durability: ≈ {} keys of {} B, cache {} MiB, {} rounds, emulated latency {} µs (flush {} µs)",
        plan.preloaded_keys(),
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
    report::report(&results, &mut result);
    Ok(result)
}

fn add_notes(plan: &Plan, result: &mut BenchResult) {
    result.note(
        "undo: modelled as undo images (old values, read first) group-committed and flushed to \
         an undo log, then the writes applied to a Durability::Commit store (lad's commit \
         stands in for the in-place write-back + flush): two ordered barriers per transaction",
    );
    result.note(
        "staging queues: lad_q16 and lad_q64 have 16 and 64 pages per queue, lad the default \
         (1/64 of the device, at most QUEUE_PAGES_MAX); a queue half full asks for a \
         checkpoint, which stalls group commits while it runs",
    );
    result.note(
        "tatp: reads are plain gets, each write one transaction; neworder and queue insert \
         keys, so their stores grow over the rounds",
    );
    result.note(
        "wal and undo: their logs' group-commit leaders are OS threads besides the store's one \
         core (lad's group commit runs on the store's core): they get the second CPU",
    );
    result.note(
        "wal and undo on the emulated device: each log is on an emulated device of its own, same latencies",
    );
    if plan.disk {
        result.note(format!(
            "redb: {} OS threads of one durable put each (redb serializes write transactions)",
            plan.redb_threads
        ));
    }
    if plan.poll {
        result.note("--poll: the idle cores of all five open stores spin, and they share one CPU");
    }
    result.note(
        "bytes per transaction: every page the store wrote (cache write-backs) + the log blocks \
         of wal and undo",
    );
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
    let points = match target {
        Target::Emulated => &plan.emulated_points,
        Target::Disk => &plan.disk_points,
    };
    for round in 0..plan.rounds {
        for (i, run) in points.iter().enumerate() {
            let (point, seed) = (run.point, point_seed(options.seed, round, i));
            let mut configs = run.configs.clone();
            if redb.is_some() && point == REDB_POINT {
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
    let role = match config {
        Config::Wal => Some(LogRole::Redo),
        Config::Undo => Some(LogRole::Undo),
        _ => None,
    };
    let window = if let Some(role) = role {
        let log = stores.start_log(config)?;
        let w = drive::window(
            stores.db(config),
            Some((&log, role)),
            plan,
            point,
            value,
            seed,
        );
        stores.stop_log(config, &log)?;
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

    /// Every configuration of a round gets the same seed; rounds and points differ.
    #[test]
    fn point_seeds_differ_by_round_and_point() {
        assert_ne!(point_seed(42, 0, 0), point_seed(42, 1, 0));
        assert_ne!(point_seed(42, 0, 0), point_seed(42, 0, 1));
        assert_eq!(point_seed(42, 2, 1), point_seed(42, 2, 1));
    }
}
