//! What the run produced: one [`Sample`] per window, the per-round ratios and their medians
//! (the figures), the printed summary table and the JSON rows.

use serde_json::json;

use super::drive::Window;
use super::plan::{
    Config, Point, Target, Workload, MAIN_IN_FLIGHT, MAIN_POINT, REDB_POINT, SWEEP_IN_FLIGHT,
};
use super::recovery::Recovery;
use super::redb_run::RedbWindow;
use crate::output::BenchResult;
use crate::summary::{median, ratio};

/// One measured window of one configuration.
#[derive(Clone, Debug)]
pub(super) struct Sample {
    pub(super) target: Target,
    pub(super) point: Point,
    pub(super) config: Config,
    pub(super) round: usize,
    pub(super) txns_per_s: f64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) group_commits_per_s: f64,
    pub(super) overflows: u64,
    /// Overflows per transaction (made durable by a checkpoint instead of a queue page).
    pub(super) overflow_rate: f64,
    /// Transactions that gave up after too many conflicts.
    pub(super) gave_up: u64,
    pub(super) checkpoints_per_s: f64,
    /// Share of the window writers spent waiting for checkpoints.
    pub(super) checkpoint_share: f64,
    /// Every byte the store and (wal) its log wrote, per transaction.
    pub(super) bytes_per_txn: f64,
    /// The commit path's bytes per transaction (see [`Window::commit_bytes_per_txn`]).
    pub(super) commit_bytes_per_txn: f64,
    /// Bytes per transaction once its writes are in the store (see
    /// [`Window::settled_bytes_per_txn`]).
    pub(super) settled_bytes_per_txn: f64,
}

impl Sample {
    pub(super) fn of(
        target: Target,
        point: Point,
        config: Config,
        round: usize,
        w: &Window,
    ) -> Self {
        let syncs = if config == Config::Wal {
            w.log_syncs
        } else {
            w.group_commits
        };
        Self {
            target,
            point,
            config,
            round,
            txns_per_s: w.txns_per_s(),
            p50_us: w.p50_us(),
            p99_us: w.p99_us(),
            group_commits_per_s: syncs as f64 / w.secs.max(1e-9),
            overflows: w.overflows,
            overflow_rate: w.overflows as f64 / w.txns.max(1) as f64,
            gave_up: w.gave_up,
            checkpoints_per_s: w.checkpoints as f64 / w.secs.max(1e-9),
            checkpoint_share: w.checkpoint_ns as f64 / 1e9 / w.secs.max(1e-9),
            bytes_per_txn: w.bytes_per_txn(),
            commit_bytes_per_txn: w.commit_bytes_per_txn(),
            settled_bytes_per_txn: w.settled_bytes_per_txn(),
        }
    }

    pub(super) fn redb(point: Point, round: usize, w: &RedbWindow) -> Self {
        Self {
            target: Target::Disk,
            point,
            config: Config::Redb,
            round,
            txns_per_s: w.txns_per_s(),
            p50_us: w.latency.value_at_quantile(0.50) as f64 / 1_000.0,
            p99_us: w.latency.value_at_quantile(0.99) as f64 / 1_000.0,
            group_commits_per_s: w.txns_per_s(),
            overflows: 0,
            overflow_rate: 0.0,
            gave_up: 0,
            checkpoints_per_s: f64::NAN,
            checkpoint_share: f64::NAN,
            bytes_per_txn: f64::NAN,
            commit_bytes_per_txn: f64::NAN,
            settled_bytes_per_txn: f64::NAN,
        }
    }

    /// The line printed when the window ends.
    pub(super) fn print(&self) {
        println!(
            "  {:<4} r{} {:<8}×{:<4} {:<8} {:>9.0} txn/s  p50 {:>8.1} µs  p99 {:>8.1} µs  syncs/s {:>7.0}  B/txn {:>7.0}  ckpt/s {:>4.1}",
            self.target.name(),
            self.round,
            self.point.workload.name(),
            self.point.in_flight,
            self.config.name(),
            self.txns_per_s,
            self.p50_us,
            self.p99_us,
            self.group_commits_per_s,
            self.bytes_per_txn,
            self.checkpoints_per_s
        );
    }

    fn row(&self) -> serde_json::Value {
        json!({
            "kind": "window",
            "device": self.target.name(),
            "workload": self.point.workload.name(),
            "in_flight": self.point.in_flight,
            "config": self.config.name(),
            "round": self.round,
            "txns_per_s": self.txns_per_s,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "group_commits_per_s": self.group_commits_per_s,
            "overflows": self.overflows,
            "overflow_rate": self.overflow_rate,
            "gave_up_on_conflicts": self.gave_up,
            "checkpoints_per_s": finite(self.checkpoints_per_s),
            "checkpoint_wait_share": finite(self.checkpoint_share),
            "bytes_per_txn": finite(self.bytes_per_txn),
            "commit_bytes_per_txn": finite(self.commit_bytes_per_txn),
            "settled_bytes_per_txn": finite(self.settled_bytes_per_txn),
        })
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Every sample and probe of the run, and the recovery measurement.
#[derive(Default)]
pub(super) struct Results {
    pub(super) samples: Vec<Sample>,
    /// Per device, per round: the write + flush probe's times, ns.
    pub(super) probes: Vec<(Target, usize, Vec<u64>)>,
    pub(super) recovery: Option<Recovery>,
}

impl Results {
    fn find(&self, target: Target, point: Point, config: Config, round: usize) -> Option<&Sample> {
        self.samples.iter().find(|s| {
            s.target == target && s.point == point && s.config == config && s.round == round
        })
    }

    /// The median over rounds of `metric(num) ÷ metric(den)`, each round's pair side by side.
    fn ratio(
        &self,
        target: Target,
        point: Point,
        (num, den): (Config, Config),
        metric: fn(&Sample) -> f64,
    ) -> Option<f64> {
        let rounds = self.samples.iter().map(|s| s.round + 1).max().unwrap_or(0);
        let per_round: Vec<f64> = (0..rounds)
            .filter_map(|r| {
                let (a, b) = (
                    self.find(target, point, num, r)?,
                    self.find(target, point, den, r)?,
                );
                ratio(metric(a), metric(b))
            })
            .collect();
        median(&per_round)
    }

    /// `lad`'s commit p50 at one in flight ÷ the round's median probe (4 KiB write + flush).
    fn commit_vs_flush(&self, target: Target) -> Option<f64> {
        self.vs_probe(target, |lad, _| Some(lad.p50_us))
    }

    /// As [`Results::commit_vs_flush`] with `volatile`'s p50 of the same round subtracted
    /// first: the update's own work (its bucket read on a miss, its record write) taken out,
    /// what is left estimates the commit phase alone. A difference of medians, not a median of
    /// differences: an estimate, reported beside the whole-operation figure.
    fn commit_phase_vs_flush(&self, target: Target) -> Option<f64> {
        self.vs_probe(target, |lad, volatile| Some(lad.p50_us - volatile?.p50_us))
    }

    /// Median over rounds of `us(lad, volatile)` (µs, `update` at one in flight; `volatile`
    /// when that point ran it) ÷ the round's median probe.
    fn vs_probe(
        &self,
        target: Target,
        us: impl Fn(&Sample, Option<&Sample>) -> Option<f64>,
    ) -> Option<f64> {
        let one = Point {
            workload: Workload::Update,
            in_flight: 1,
        };
        let per_round: Vec<f64> = self
            .probes
            .iter()
            .filter(|(t, _, _)| *t == target)
            .filter_map(|(_, round, ns)| {
                let lad = self.find(target, one, Config::Lad, *round)?;
                let volatile = self.find(target, one, Config::Volatile, *round);
                let probe: Vec<f64> = ns.iter().map(|&n| n as f64).collect();
                ratio(us(lad, volatile)? * 1_000.0, median(&probe)?)
            })
            .collect();
        median(&per_round)
    }

    /// Median of `metric` over the rounds of one (device, point, configuration).
    fn median_of(&self, key: (Target, Point, Config), metric: fn(&Sample) -> f64) -> Option<f64> {
        let values: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| (s.target, s.point, s.config) == key)
            .map(metric)
            .filter(|v| v.is_finite())
            .collect();
        median(&values)
    }
}

/// `workload` at `in_flight`.
fn at(workload: Workload, in_flight: usize) -> Point {
    Point {
        workload,
        in_flight,
    }
}

/// The figures: (name, device, point, numerator, denominator) of the throughput ratios.
fn throughput_figures() -> Vec<(String, Target, Point, Config, Config)> {
    use Config::*;
    let (emu, disk, main) = (Target::Emulated, Target::Disk, MAIN_POINT);
    let mut figures = vec![
        ("lad_vs_volatile".into(), emu, main, Lad, Volatile),
        ("periodic_vs_volatile".into(), emu, main, Periodic, Volatile),
        ("lad_vs_wal".into(), emu, main, Lad, Wal),
        ("lad_vs_undo".into(), emu, main, Lad, Undo),
        ("lad_vs_volatile_disk".into(), disk, main, Lad, Volatile),
        ("lad_vs_wal_disk".into(), disk, main, Lad, Wal),
        ("lad_vs_undo_disk".into(), disk, main, Lad, Undo),
        (
            "lad_vs_volatile_update_disk".into(),
            disk,
            REDB_POINT,
            Lad,
            Volatile,
        ),
        ("lad_vs_redb".into(), disk, REDB_POINT, Lad, Redb),
    ];
    let others = [
        Workload::Update,
        Workload::Swap,
        Workload::NewOrder,
        Workload::Queue,
    ];
    for workload in others {
        let point = at(workload, MAIN_IN_FLIGHT);
        for den in [Volatile, Wal, Undo] {
            if (workload, den) == (Workload::Swap, Undo) {
                continue; // swap runs without undo
            }
            let name = format!("lad_vs_{}_{}", den.name(), workload.name());
            figures.push((name, emu, point, Lad, den));
        }
    }
    for in_flight in SWEEP_IN_FLIGHT.into_iter().filter(|&n| n != MAIN_IN_FLIGHT) {
        let name = format!("lad_vs_volatile_{}_x{in_flight}", main.workload.name());
        figures.push((name, emu, at(main.workload, in_flight), Lad, Volatile));
    }
    for sweep in Config::QUEUE_SWEEP {
        figures.push((
            format!("{}_vs_volatile", sweep.name()),
            emu,
            main,
            sweep,
            Volatile,
        ));
        figures.push((format!("{}_vs_lad", sweep.name()), emu, main, sweep, Lad));
    }
    figures
}

/// Prints the summary table and fills `result`'s figures and rows.
pub(super) fn report(results: &Results, result: &mut BenchResult) {
    print_table(results);
    let tps = |s: &Sample| s.txns_per_s;
    let bytes = |s: &Sample| s.bytes_per_txn;
    let settled = |s: &Sample| s.settled_bytes_per_txn;
    for (name, target, point, num, den) in throughput_figures() {
        result.figure(&name, results.ratio(target, point, (num, den), tps));
    }
    let (emu, disk) = (Target::Emulated, Target::Disk);
    let update = at(Workload::Update, MAIN_IN_FLIGHT);
    let figures = [
        (
            "lad_bytes_vs_wal",
            results.ratio(emu, MAIN_POINT, (Config::Lad, Config::Wal), bytes),
        ),
        (
            "lad_bytes_vs_wal_update",
            results.ratio(emu, update, (Config::Lad, Config::Wal), bytes),
        ),
        (
            "lad_bytes_vs_wal_disk",
            results.ratio(disk, MAIN_POINT, (Config::Lad, Config::Wal), bytes),
        ),
        (
            "lad_settled_bytes_vs_wal",
            results.ratio(emu, MAIN_POINT, (Config::Lad, Config::Wal), settled),
        ),
        (
            "lad_settled_bytes_vs_wal_update",
            results.ratio(emu, update, (Config::Lad, Config::Wal), settled),
        ),
        (
            "lad_settled_bytes_vs_wal_disk",
            results.ratio(disk, MAIN_POINT, (Config::Lad, Config::Wal), settled),
        ),
        ("commit_p50_vs_flush", results.commit_vs_flush(emu)),
        ("commit_p50_vs_flush_disk", results.commit_vs_flush(disk)),
        (
            "commit_phase_p50_vs_flush",
            results.commit_phase_vs_flush(emu),
        ),
        (
            "commit_phase_p50_vs_flush_disk",
            results.commit_phase_vs_flush(disk),
        ),
        (
            "recovery_ms",
            results.recovery.as_ref().map(|r| r.stats.ns as f64 / 1e6),
        ),
    ];
    for (name, value) in figures {
        result.figure(name, value);
    }
    // The queue-size sweep's overflow and checkpoint rates (medians over rounds).
    for config in [Config::Lad].into_iter().chain(Config::QUEUE_SWEEP) {
        let key = (emu, MAIN_POINT, config);
        let name = config.name();
        let overflows = results.median_of(key, |s| s.overflow_rate);
        result.figure(&format!("{name}_overflow_rate"), overflows);
        let checkpoints = results.median_of(key, |s| s.checkpoints_per_s);
        result.figure(&format!("{name}_checkpoints_per_s"), checkpoints);
    }
    result.rows.extend(results.samples.iter().map(Sample::row));
    report_probes(results, result);
    if let Some(r) = &results.recovery {
        report_recovery(r, result);
    }
}

fn report_probes(results: &Results, result: &mut BenchResult) {
    for (target, round, ns) in &results.probes {
        let probe: Vec<f64> = ns.iter().map(|&n| n as f64 / 1_000.0).collect();
        println!(
            "  {:<4} r{round} 4 KiB write + flush probe: p50 {:.1} µs ({} samples)",
            target.name(),
            median(&probe).unwrap_or(f64::NAN),
            ns.len()
        );
        result.rows.push(json!({
            "kind": "write_flush_probe", "device": target.name(), "round": round,
            "samples": ns.len(), "p50_us": median(&probe),
        }));
    }
}

fn report_recovery(r: &Recovery, result: &mut BenchResult) {
    println!(
        "\nrecovery (emu, lad, power loss after {} updates): open {:.1} ms, recovery {:.1} ms, {} of {} commit records redone ({} deltas, {} queue pages read)",
        r.txns_before_crash, r.open_ms, r.stats.ns as f64 / 1e6, r.stats.records_redone,
        r.stats.records_found, r.stats.deltas_redone, r.stats.queue_pages_read
    );
    result.rows.push(json!({
        "kind": "recovery", "device": "emu", "open_ms": r.open_ms,
        "recovery_ms": r.stats.ns as f64 / 1e6, "records_found": r.stats.records_found,
        "records_redone": r.stats.records_redone, "deltas_redone": r.stats.deltas_redone,
        "queue_pages_read": r.stats.queue_pages_read,
    }));
}

/// Medians over rounds per (device, point, configuration), throughput also ÷ `volatile`'s
/// (the median of the per-round ratios), overflows per transaction; transactions that gave
/// up on conflicts summed.
fn print_table(results: &Results) {
    let mut keys: Vec<(Target, Point, Config)> = results
        .samples
        .iter()
        .map(|s| (s.target, s.point, s.config))
        .collect();
    keys.sort();
    keys.dedup();
    println!("\nmedians over rounds:");
    println!(
        "  {:<4} {:<13} {:<8} {:>8} {:>6} {:>8} {:>9} {:>7} {:>6} {:>7} {:>8} {:>6} {:>5} {:>7} {:>6}",
        "dev",
        "point",
        "config",
        "txn/s",
        "÷vol",
        "p50 µs",
        "p99 µs",
        "syncs/s",
        "B/txn",
        "commitB",
        "settledB",
        "ckpt/s",
        "ckpt%",
        "ovfl/tx",
        "gaveup"
    );
    for key in keys {
        let m = |f: fn(&Sample) -> f64| results.median_of(key, f).unwrap_or(f64::NAN);
        let of_key = || {
            results
                .samples
                .iter()
                .filter(move |s| (s.target, s.point, s.config) == key)
        };
        let gave_up: u64 = of_key().map(|s| s.gave_up).sum();
        let (target, point, config) = key;
        let tps = |s: &Sample| s.txns_per_s;
        let vs_volatile = results.ratio(target, point, (config, Config::Volatile), tps);
        println!(
            "  {:<4} {:<13} {:<8} {:>8.0} {:>6.3} {:>8.1} {:>9.1} {:>7.0} {:>6.0} {:>7.0} {:>8.0} {:>6.1} {:>5.1} {:>7.4} {:>6}",
            target.name(),
            format!("{}×{}", point.workload.name(), point.in_flight),
            config.name(),
            m(|s| s.txns_per_s),
            vs_volatile.unwrap_or(f64::NAN),
            m(|s| s.p50_us),
            m(|s| s.p99_us),
            m(|s| s.group_commits_per_s),
            m(|s| s.bytes_per_txn),
            m(|s| s.commit_bytes_per_txn),
            m(|s| s.settled_bytes_per_txn),
            m(|s| s.checkpoints_per_s),
            m(|s| s.checkpoint_share * 100.0),
            m(|s| s.overflow_rate),
            gave_up
        );
    }
}
