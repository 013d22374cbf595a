//! `tamer`: the command-line entry point. Today it runs the benchmarks; the server comes next.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tamer_bench::BenchOptions;

#[derive(Parser)]
#[command(
    name = "tamer",
    version,
    about = "A data server and embedded engine for microsecond-latency devices"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark: tamer and its baselines side by side, ratios reported.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// User-level thread switch vs OS thread switch.
    Runtime(Common),
    /// 4 KiB random reads at queue depths 1..128: tamer io_uring and sync devices vs fio.
    Device(Common),
    /// Seed 000's study: normalized performance vs threads per core, latency, MLP, mechanism.
    Microsecond {
        #[command(flatten)]
        common: Common,
        /// CPU work per round of accesses, in nanoseconds.
        #[arg(long, default_value_t = 1_000)]
        work_ns: u64,
    },
}

#[derive(Args)]
struct Common {
    /// CI-sized run (under a minute).
    #[arg(long)]
    quick: bool,
    /// Write the JSON result here (default: <data-dir>/bench/<bench>.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write SVG plots into this directory (default: <data-dir>/bench).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Directory for benchmark data files; must support O_DIRECT (not tmpfs).
    #[arg(long, default_value = "tamer-data")]
    data_dir: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Never sleep waiting for the real disk: spin on the io_uring completion queue instead of
    /// blocking in the kernel (costs a whole core; the emulator is always polled).
    #[arg(long)]
    poll: bool,
}

impl Common {
    fn options(&self) -> BenchOptions {
        BenchOptions {
            quick: self.quick,
            json: self.json.clone(),
            svg: self.svg.clone(),
            data_dir: self.data_dir.clone(),
            seed: self.seed,
            poll: self.poll,
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let Command::Bench { which } = cli.command;
    let (options, result) = match which {
        Bench::Runtime(common) => {
            let options = common.options();
            let result = Ok(tamer_bench::runtime::run(&options));
            (options, result)
        }
        Bench::Device(common) => {
            let options = common.options();
            let result = tamer_bench::device::run(&options);
            (options, result)
        }
        Bench::Microsecond { common, work_ns } => {
            let options = common.options();
            let result = tamer_bench::microsecond::run(&options, work_ns);
            (options, result)
        }
    };
    let result = match result {
        Ok(result) => result,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    result.print_figures();
    let json_path = options.json_path(&result.bench);
    if let Err(err) = result.write_json(&json_path) {
        eprintln!("error: writing {}: {err}", json_path.display());
        return ExitCode::FAILURE;
    }
    println!("\nJSON: {}", json_path.display());
    for plot in &result.plots {
        println!("plot: {plot}");
    }
    ExitCode::SUCCESS
}
