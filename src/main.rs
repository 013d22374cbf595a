//! `tamer`: the command-line entry point. Each subcommand is a module of [`cli`]; this file
//! holds the command line's top level and calls the subcommand asked for.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::{bench, check, crash, load, recover, serve, store};

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
    /// Serve the store over the Redis protocol (being built: the string and key
    /// commands of docs/commands.md, PING, ECHO, SELECT, QUIT).
    Serve(serve::ServeArgs),
    /// Generate load against any Redis (RESP) or memcached server: open loop (Poisson
    /// arrivals at --rate, latency from each request's scheduled send) or closed loop.
    Load(load::LoadArgs),
    /// Run a benchmark: tamer and its baselines side by side, ratios reported.
    Bench {
        #[command(subcommand)]
        which: bench::Bench,
    },
    /// The crash harness: power losses on the fault-injecting device at seeded
    /// writes (torn sectors, sometimes a second crash during recovery) and SIGKILLs of a real
    /// process on the disk; checks every recovery. Exit status 1 on any violation.
    Crash(crash::CrashArgs),
    /// Internal: the process crash test's worker (a seeded workload on a store until killed;
    /// prints `durable <ops>` after each flush).
    #[command(hide = true)]
    CrashWorker {
        path: PathBuf,
        #[arg(long)]
        seed: u64,
    },
    /// Verify a store's every checksum and structure (opened read-only) and report what is
    /// wrong. Exit status: 0 clean, 1 damaged, 2 could not check.
    Check(store::StoreArgs),
    /// Opens a store, recovering it after a crash (a progress bar once recovery has taken a
    /// second), checkpoints and closes it, and says what recovery redid. Exit status: 0
    /// recovered (or nothing to do), 2 could not.
    Recover(store::StoreArgs),
}

fn main() -> ExitCode {
    // Behave like other command-line tools when the reader of stdout goes away (`| head`):
    // end quietly instead of panicking on the failed write.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    // The crash harness cuts the power under thousands of stores: each logs the failed group
    // commit or checkpoint, which is the point of the exercise (RUST_LOG still applies).
    let default_filter = match cli.command {
        Command::Crash(_) => "off",
        Command::Serve(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Load(args) => load::run(args),
        Command::Bench { which } => bench::run(which),
        Command::Check(store) => check::run(&store),
        Command::Recover(store) => recover::run(&store),
        Command::Crash(args) => crash::run(&args),
        Command::CrashWorker { path, seed } => crash::run_worker(&path, seed),
    }
}
