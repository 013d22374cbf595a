//! `tamer crash`: the crash harness, and its process harness's worker (`tamer crash-worker`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tamer_bench::output::BenchResult;
use tamer_crash::{self as crash, Harness, Plan};

/// `tamer crash`'s flags.
#[derive(Args)]
pub struct CrashArgs {
    /// Power-loss points (default 1000; --long 100000); 12 % of them on the concurrent
    /// bank-transfer workload (all of them when --harness names only one of the two).
    #[arg(long)]
    points: Option<u64>,
    /// SIGKILLs of the real binary (default 20; --long 1000).
    #[arg(long)]
    kills: Option<u64>,
    /// Replay this one seed alone (on each harness chosen by --harness).
    #[arg(long)]
    seed: Option<u64>,
    /// Start at point N of each harness (seeds past the first N): CI runs the points past
    /// those its cargo tests run.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// The long run: 100,000 power-loss points and 1,000 kills.
    #[arg(long)]
    long: bool,
    /// Harnesses to run (default all): power, concurrent, process.
    #[arg(long, value_delimiter = ',')]
    harness: Option<Vec<String>>,
    /// Directory for the process harness's store files (must support O_DIRECT) and the JSON.
    #[arg(long, default_value = "tamer-data")]
    data_dir: PathBuf,
    /// Write the JSON result here (default: <data-dir>/bench/crash.json).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `tamer crash`.
pub fn run(args: &CrashArgs) -> ExitCode {
    let Some(harnesses) = harnesses(args) else {
        return ExitCode::from(2);
    };
    let plan = plan(args, &harnesses);
    println!(
        "crash: {} power-loss points ({} single-threaded, {} concurrent), {} kills{}",
        plan.power.len() + plan.concurrent.len(),
        plan.power.len(),
        plan.concurrent.len(),
        plan.process.len(),
        args.seed
            .map_or(String::new(), |s| format!(", seed {s} alone"))
    );
    let report = crash::run_with_progress(&plan);
    println!("crash: {report}");
    let result = bench_result(args, &report);
    result.print_figures();
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| args.data_dir.join("bench").join("crash.json"));
    if let Err(err) = result.write_json(&json_path) {
        eprintln!("error: writing {}: {err}", json_path.display());
        return ExitCode::FAILURE;
    }
    println!("\nJSON: {}", json_path.display());
    match report.first_failure() {
        None => ExitCode::SUCCESS,
        Some(first) => {
            println!(
                "\nFAILED: {} violations; the first, {} seed {}, reproduces with:\n  {}",
                report.violations,
                first.harness,
                first.seed,
                first.command()
            );
            ExitCode::FAILURE
        }
    }
}

/// The harnesses `--harness` names (all by default); `None`, said on stderr, for a name that
/// is none of them.
fn harnesses(args: &CrashArgs) -> Option<Vec<Harness>> {
    let Some(names) = &args.harness else {
        return Some(Harness::ALL.to_vec());
    };
    let mut harnesses = Vec::new();
    for name in names {
        match Harness::parse(name) {
            Some(h) => harnesses.push(h),
            None => {
                eprintln!("error: --harness {name}: not one of power, concurrent, process");
                return None;
            }
        }
    }
    Some(harnesses)
}

/// The seeds to run: `--seed` alone, or the counts asked for (CI's or `--long`'s by default)
/// from `--offset`; the worker is this binary.
fn plan(args: &CrashArgs, harnesses: &[Harness]) -> Plan {
    let (default_points, default_kills) = if args.long {
        (crash::LONG_POINTS, crash::LONG_KILLS)
    } else {
        (crash::CI_POINTS, crash::CI_KILLS)
    };
    let mut plan = match args.seed {
        Some(seed) => Plan::one_seed(seed, harnesses),
        None => Plan::split(
            args.offset,
            args.points.unwrap_or(default_points),
            args.kills.unwrap_or(default_kills),
            harnesses,
        ),
    };
    plan.worker = std::env::current_exe().ok();
    plan.data_dir = args.data_dir.join("crash");
    plan
}

/// The report in the benches' JSON format: its counts as figures, one row per failure.
fn bench_result(args: &CrashArgs, report: &crash::Report) -> BenchResult {
    let mut result = BenchResult::new("crash", !args.long, args.seed.unwrap_or(0));
    let figures = [
        ("crash_points", report.crash_points),
        ("concurrent_points", report.concurrent_points),
        ("second_crashes", report.second_crashes),
        ("back_at_start", report.back_at_start),
        ("kills", report.kills),
        ("kills_at_last_ack", report.kills_at_last_ack),
        ("violations", report.violations),
    ];
    for (name, value) in figures {
        result.figure(name, Some(value as f64));
    }
    result.figure("seconds", Some(report.elapsed.as_secs_f64()));
    for failure in &report.failures {
        result.rows.push(failure.json());
    }
    result
}

/// `tamer crash-worker PATH --seed N`: the process harness's worker, until it is killed.
pub fn run_worker(path: &std::path::Path, seed: u64) -> ExitCode {
    match tamer_crash::run_worker(path, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: crash worker: {err}");
            ExitCode::FAILURE
        }
    }
}
