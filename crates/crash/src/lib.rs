//! The crash harness, a library so that the cargo tests and `tamer crash` run the
//! same code and report the same figures.
//!
//! - [`power`]: power loss on the fault-injecting device at seeded writes, every unflushed write
//!   kept, dropped or torn at 512-byte sectors; for one seed in four a second power loss while
//!   the store recovers. Two workloads: single-threaded puts, deletes and flushes against a
//!   reference model ([`power::single_once`]), and on two cores bank transfers plus a job
//!   churning keys ([`power::concurrent_once`]).
//! - [`process`]: the real `tamer` binary ([`worker`], `tamer crash-worker`) on a file on the
//!   disk, killed with SIGKILL at a seeded instant while this process records its
//!   acknowledgements.
//!
//! After each crash: recovery, `check` clean, every acknowledged operation present, no partial
//! transaction, the bank total conserved, a full scan equal to the reference model at some
//! prefix. A violated check (or a panic, caught per seed) is counted in [`Report::violations`]
//! with its seed; [`Failure::command`] is the one command that replays it.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Returns `Err(message)` from the enclosing function when `cond` is false.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

pub mod power;
pub mod process;
mod progress;
pub mod worker;

pub use worker::{apply, ops, options, run_worker, value, Op, KEYS, MAX_VALUE};

/// Power-loss points of the CI-sized run.
pub const CI_POINTS: u64 = 1_000;
/// SIGKILLs of the CI-sized run.
pub const CI_KILLS: u64 = 20;
/// Power-loss points of a `--long` run.
pub const LONG_POINTS: u64 = 100_000;
/// SIGKILLs of a `--long` run.
pub const LONG_KILLS: u64 = 1_000;
/// The share of power-loss points given to the concurrent workload, in percent (it costs ≈ 4
/// single-threaded points each).
pub const CONCURRENT_PERCENT: u64 = 12;

/// First seed of the single-threaded power harness; for each harness the seed of point `i` is
/// its base `+ i`.
pub const SINGLE_SEED_BASE: u64 = 0xc0de_0000;
/// First seed of the concurrent harness.
pub const CONCURRENT_SEED_BASE: u64 = 0xba4c_0000;
/// First seed of the process harness.
pub const PROCESS_SEED_BASE: u64 = 0;

/// One of the three harnesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Harness {
    /// Single-threaded workload, power loss on the fault device.
    Power,
    /// Bank transfers and churn on two cores, power loss on the fault device.
    Concurrent,
    /// The real binary on the disk, SIGKILL.
    Process,
}

impl Harness {
    /// Every harness, in the order a run takes them.
    pub const ALL: [Harness; 3] = [Harness::Power, Harness::Concurrent, Harness::Process];

    /// The name `--harness` takes.
    pub fn name(self) -> &'static str {
        match self {
            Harness::Power => "power",
            Harness::Concurrent => "concurrent",
            Harness::Process => "process",
        }
    }

    /// The harness named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.name() == name)
    }
}

impl fmt::Display for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A violated check: the harness, its seed and what was wrong.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The harness that found it.
    pub harness: Harness,
    /// The seed that replays it.
    pub seed: u64,
    /// The check that failed, or the panic's message.
    pub message: String,
}

impl Failure {
    /// The one command that replays this seed alone.
    pub fn command(&self) -> String {
        format!(
            "cargo run --release -- crash --harness {} --seed {}",
            self.harness, self.seed
        )
    }
}

impl Failure {
    /// A JSON row: harness, seed, message, command.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "harness": self.harness.name(),
            "seed": self.seed,
            "message": self.message,
            "command": self.command(),
        })
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} seed {}: {}\n  reproduce: {}",
            self.harness,
            self.seed,
            self.message,
            self.command()
        )
    }
}

/// Failures kept in a report (the count goes on past it).
pub const FAILURES_KEPT: usize = 20;

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Power losses on the fault device (both workloads).
    pub crash_points: u64,
    /// Of them, on the concurrent workload.
    pub concurrent_points: u64,
    /// Of them, with a second power loss during recovery.
    pub second_crashes: u64,
    /// Of the single-threaded ones, those that came back at the workload's first state.
    pub back_at_start: u64,
    /// SIGKILLs of the real binary.
    pub kills: u64,
    /// Of them, those that came back at exactly the last acknowledged operation.
    pub kills_at_last_ack: u64,
    /// Seeds whose checks failed (or that panicked): must be 0.
    pub violations: u64,
    /// The first [`FAILURES_KEPT`] of them, in order.
    pub failures: Vec<Failure>,
    /// Time the run took so far.
    pub elapsed: Duration,
}

impl Report {
    /// The first violation found, if any.
    pub fn first_failure(&self) -> Option<&Failure> {
        self.failures.first()
    }

    fn fail(&mut self, harness: Harness, seed: u64, message: String) {
        self.violations += 1;
        if self.failures.len() < FAILURES_KEPT {
            self.failures.push(Failure {
                harness,
                seed,
                message,
            });
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "crash_points {} ({} concurrent, {} with a second crash during recovery, {} back at \
             the start), kills {} ({} at the last acknowledged op), violations {}, {:.1} s",
            self.crash_points,
            self.concurrent_points,
            self.second_crashes,
            self.back_at_start,
            self.kills,
            self.kills_at_last_ack,
            self.violations,
            self.elapsed.as_secs_f64()
        )?;
        for failure in &self.failures {
            write!(f, "\n{failure}")?;
        }
        if self.violations > self.failures.len() as u64 {
            write!(
                f,
                "\n... and {} more",
                self.violations - self.failures.len() as u64
            )?;
        }
        Ok(())
    }
}

/// What to run: the seeds of each harness.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Seeds of the single-threaded power-loss points.
    pub power: Vec<u64>,
    /// Seeds of the concurrent power-loss points.
    pub concurrent: Vec<u64>,
    /// Seeds of the SIGKILLs.
    pub process: Vec<u64>,
    /// The `tamer` binary the process harness runs (`tamer crash-worker`).
    pub worker: Option<PathBuf>,
    /// Where the process harness puts its store files (a disk with O_DIRECT).
    pub data_dir: PathBuf,
}

impl Plan {
    /// `points` power losses (the concurrent workload's [`CONCURRENT_PERCENT`] of them, the
    /// rest single-threaded) and `kills` SIGKILLs, from each harness's first seed.
    pub fn sized(points: u64, kills: u64) -> Self {
        Self::sized_from(0, points, kills)
    }

    /// [`Plan::sized`] from point `offset` of each harness on (seeds `base + offset + i`):
    /// CI runs the points past those its cargo tests run.
    pub fn sized_from(offset: u64, points: u64, kills: u64) -> Self {
        Self::split(offset, points, kills, &Harness::ALL)
    }

    /// [`Plan::sized_from`] on `harnesses` only: the `points` all go to the power-loss
    /// harness chosen when only one of the two is.
    pub fn split(offset: u64, points: u64, kills: u64, harnesses: &[Harness]) -> Self {
        let has = |h| harnesses.contains(&h);
        let concurrent = match (has(Harness::Power), has(Harness::Concurrent)) {
            (true, true) => points * CONCURRENT_PERCENT / 100,
            (false, true) => points,
            (_, false) => 0,
        };
        let seeds = |base: u64, n: u64| (0..n).map(|i| base + offset + i).collect();
        Self {
            power: seeds(SINGLE_SEED_BASE, points - concurrent),
            concurrent: seeds(CONCURRENT_SEED_BASE, concurrent),
            process: seeds(PROCESS_SEED_BASE, kills),
            worker: None,
            data_dir: std::env::temp_dir(),
        }
        .only(harnesses)
    }

    /// `seed` alone, on each of `harnesses`.
    pub fn one_seed(seed: u64, harnesses: &[Harness]) -> Self {
        let pick = |h| {
            if harnesses.contains(&h) {
                vec![seed]
            } else {
                Vec::new()
            }
        };
        Self {
            power: pick(Harness::Power),
            concurrent: pick(Harness::Concurrent),
            process: pick(Harness::Process),
            worker: None,
            data_dir: std::env::temp_dir(),
        }
    }

    /// Keeps only `harnesses`.
    pub fn only(mut self, harnesses: &[Harness]) -> Self {
        for h in Harness::ALL {
            if !harnesses.contains(&h) {
                self.seeds_mut(h).clear();
            }
        }
        self
    }

    fn seeds_mut(&mut self, h: Harness) -> &mut Vec<u64> {
        match h {
            Harness::Power => &mut self.power,
            Harness::Concurrent => &mut self.concurrent,
            Harness::Process => &mut self.process,
        }
    }

    /// Crashes the plan holds.
    pub fn total(&self) -> u64 {
        (self.power.len() + self.concurrent.len() + self.process.len()) as u64
    }
}

/// Runs `f`, turning a panic into an error naming it.
pub fn catching<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(format!(
            "panicked: {}",
            payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    }
}

/// Runs every seed of `plan` (power, then concurrent, then process), each checked and its
/// panics caught; `progress` sees the report after each.
pub fn run(plan: &Plan, mut progress: impl FnMut(&Report)) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    for &seed in &plan.power {
        match catching(|| power::single_once(seed)) {
            Ok(outcome) => {
                report.back_at_start += u64::from(outcome.back_at == 0);
                report.second_crashes += u64::from(outcome.second_crash);
            }
            Err(message) => report.fail(Harness::Power, seed, message),
        }
        report.crash_points += 1;
        report.elapsed = start.elapsed();
        progress(&report);
    }
    for &seed in &plan.concurrent {
        match catching(|| power::concurrent_once(seed)) {
            Ok(outcome) => report.second_crashes += u64::from(outcome.second_crash),
            Err(message) => report.fail(Harness::Concurrent, seed, message),
        }
        report.crash_points += 1;
        report.concurrent_points += 1;
        report.elapsed = start.elapsed();
        progress(&report);
    }
    if !plan.process.is_empty() {
        let worker = plan
            .worker
            .clone()
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| PathBuf::from("tamer"));
        for &seed in &plan.process {
            match catching(|| process::kill_once(&worker, &plan.data_dir, seed)) {
                Ok(outcome) => report.kills_at_last_ack += u64::from(outcome.at_last_ack()),
                Err(message) => report.fail(Harness::Process, seed, message),
            }
            report.kills += 1;
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    report.elapsed = start.elapsed();
    report
}

/// [`run`] with a progress bar on a terminal, and otherwise a line on stderr at every tenth
/// of the plan; each violation is printed with its seed as it is found.
pub fn run_with_progress(plan: &Plan) -> Report {
    use std::io::IsTerminal;
    let total = plan.total();
    let bar = crate::progress::Progress::count(total, "crashes");
    let terminal = std::io::stderr().is_terminal();
    let step = (total / 10).max(1);
    let mut failures_seen = 0;
    run(plan, |report| {
        let done = report.crash_points + report.kills;
        bar.set(done);
        for failure in &report.failures[failures_seen..] {
            eprintln!("violation: {failure}");
        }
        failures_seen = report.failures.len();
        if !terminal && (done % step == 0 || done == total) {
            eprintln!(
                "crash: {done}/{total} ({} power-loss points, {} kills), {} violations, {:.0} s",
                report.crash_points,
                report.kills,
                report.violations,
                report.elapsed.as_secs_f64()
            );
        }
    })
}

/// The seeds of a cargo test: `CRASH_SEED` alone if set, else `CRASH_POINTS` (or `var`, e.g.
/// `CRASH_KILLS`) of them from `base`, `default` when unset.
pub fn env_seeds(var: &str, default: u64, base: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("CRASH_SEED") {
        return vec![seed.parse().expect("CRASH_SEED is a number")];
    }
    let n = std::env::var(var)
        .ok()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{var} is a number")))
        .unwrap_or(default);
    (0..n).map(|i| base.wrapping_add(i)).collect()
}

#[cfg(test)]
mod tests {
    use super::power::{state_at, Model, SingleOp};
    use super::*;

    /// A panicking seed is a violation with its message, not the end of the run. Mutation
    /// caught: `catching` that lets the panic through or loses its message.
    #[test]
    fn a_panic_becomes_an_error_naming_it() {
        let result: Result<(), String> = catching(|| panic!("torn superblock {}", 7));
        assert_eq!(result, Err("panicked: torn superblock 7".to_string()));
        assert_eq!(catching(|| Ok::<_, String>(3)), Ok(3));
    }

    /// The model check refuses a store that lost an acknowledged put, and accepts the one in
    /// flight. Mutation caught: a prefix check that accepts any earlier state.
    #[test]
    fn the_model_check_refuses_a_lost_acknowledged_op() {
        let ops: Vec<SingleOp> = (0..6u32)
            .map(|i| SingleOp::Put(i.to_be_bytes().to_vec(), 10, u64::from(i)))
            .collect();
        let after = |n: usize| {
            let mut m = Model::new();
            for op in &ops[..n] {
                power::single_apply(&mut m, op);
            }
            m
        };
        // 4 ops acknowledged: the state after 3 lost one, after 5 has the one in flight.
        assert_eq!(state_at(&after(3), &ops, 4, 4), None);
        assert_eq!(state_at(&after(4), &ops, 4, 4), Some(4));
        assert_eq!(state_at(&after(5), &ops, 4, 4), Some(5));
        assert_eq!(state_at(&after(6), &ops, 4, 4), None);
    }

    /// The CI size: 1,000 power-loss points over both workloads, 20 kills;
    /// a failure names the command that replays it. Mutation caught: a split that drops points.
    #[test]
    fn plans_and_commands() {
        let plan = Plan::sized(CI_POINTS, CI_KILLS);
        assert_eq!(plan.power.len() + plan.concurrent.len(), 1_000);
        assert_eq!(plan.concurrent.len(), 120);
        assert_eq!(plan.process.len(), 20);
        let only = Plan::sized(10, 3).only(&[Harness::Process]);
        assert_eq!((only.power.len(), only.process.len()), (0, 3));
        let power = Plan::split(0, 30, 5, &[Harness::Power]);
        assert_eq!((power.power.len(), power.concurrent.len()), (30, 0));
        assert!(power.process.is_empty());
        let concurrent = Plan::split(0, 30, 5, &[Harness::Concurrent, Harness::Process]);
        assert_eq!(
            (concurrent.power.len(), concurrent.concurrent.len()),
            (0, 30)
        );
        let later = Plan::sized_from(1_000, 10, 3);
        assert_eq!(later.power[0], SINGLE_SEED_BASE + 1_000);
        assert_eq!(later.process, [1_000, 1_001, 1_002]);
        let failure = Failure {
            harness: Harness::Concurrent,
            seed: 3_125_542_913,
            message: "the total".into(),
        };
        assert_eq!(
            failure.command(),
            "cargo run --release -- crash --harness concurrent --seed 3125542913"
        );
        for h in Harness::ALL {
            assert_eq!(Harness::parse(h.name()), Some(h));
        }
    }
}
