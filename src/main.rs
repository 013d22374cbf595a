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
    /// Serve the store over the Redis protocol (issue 10, being built: the string and key
    /// commands of docs/commands.md, PING, ECHO, SELECT, QUIT).
    Serve(ServeArgs),
    /// Generate load against any Redis (RESP) or memcached server: open loop (Poisson
    /// arrivals at --rate, latency from each request's scheduled send) or closed loop.
    Load(LoadArgs),
    /// Run a benchmark: tamer and its baselines side by side, ratios reported.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
    /// The crash harness (issue 9): power losses on the fault-injecting device at seeded
    /// writes (torn sectors, sometimes a second crash during recovery) and SIGKILLs of a real
    /// process on the disk; checks every recovery. Exit status 1 on any violation.
    Crash(CrashArgs),
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
    Check(StoreArgs),
    /// Opens a store, recovering it after a crash (a progress bar once recovery has taken a
    /// second), checkpoints and closes it, and says what recovery redid. Exit status: 0
    /// recovered (or nothing to do), 2 could not.
    Recover(StoreArgs),
}

/// The store `tamer check` and `tamer recover` open.
#[derive(Args)]
struct StoreArgs {
    /// The store file; several for a store striped over them, in the order it was created
    /// with.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Pages per stripe unit of a striped store.
    #[arg(long, default_value_t = tamer_device::STRIPE_UNIT_BLOCKS)]
    stripe_unit: u64,
    /// MiB of cache to open it with (at least the directory's size).
    #[arg(long, default_value_t = 64)]
    cache_mib: u64,
}

/// `tamer serve`'s flags: each is the setting of the same name (`docs/config.md`); a flag
/// given overrides `--config`'s file, which overrides the default.
#[derive(Args)]
struct ServeArgs {
    /// A TOML file of settings (`key = value`, keys named as the flags and `CONFIG GET`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// TCP port (Redis's `port`; default 6379).
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (Redis's `bind`; one address; default 127.0.0.1).
    #[arg(long)]
    bind: Option<String>,
    /// Directory of the store file `tamer.db` (Redis's `dir`; default tamer-data).
    #[arg(long)]
    dir: Option<String>,
    /// DRAM for the page cache: bytes, or with a unit as Redis writes them (`256mb`, `1gb`;
    /// default 256mb).
    #[arg(long)]
    cache_size: Option<String>,
    /// When a write is acknowledged: `commit` (durable first; the default), `periodic`
    /// (within a second, as `appendfsync everysec`), `none` (at the next checkpoint).
    #[arg(long)]
    durability: Option<String>,
    /// Most client connections (Redis's `maxclients`; default 10000).
    #[arg(long)]
    maxclients: Option<u64>,
    /// A password every client must give with `AUTH` (Redis's `requirepass`).
    #[arg(long)]
    requirepass: Option<String>,
    /// Refuse to listen beyond loopback without `--requirepass` (Redis's `protected-mode`;
    /// default yes).
    #[arg(long)]
    protected_mode: Option<String>,
    /// Serve Prometheus metrics over HTTP at HOST:PORT (`GET /metrics`; default: off).
    #[arg(long)]
    metrics_addr: Option<String>,
    /// Cores running requests and polling the network (the store's runtime). Default 0: the
    /// CPUs this process may use less one (left to the kernel's network stack and the
    /// clients), at least one.
    #[arg(long)]
    cores: Option<String>,
    /// `shared` (default): one queue, the next free core runs the next request batch (seed
    /// 004); `partitioned`: each connection pinned to one core (the RSS baseline).
    #[arg(long)]
    dispatch: Option<String>,
    /// Latency objective in µs: requests past the queued work that meets it get `-BUSY`
    /// at once (admission). Default 0: none (only the fixed bounds).
    #[arg(long)]
    slo_us: Option<String>,
    /// Prefetch the pages of a request batch's keys before it runs (default yes).
    #[arg(long)]
    prefetch: Option<String>,
}

impl ServeArgs {
    /// The flags given, as (setting, value) pairs.
    fn settings(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        let mut add = |name: &'static str, value: Option<String>| {
            if let Some(v) = value {
                pairs.push((name, v));
            }
        };
        add("port", self.port.map(|p| p.to_string()));
        add("bind", self.bind.clone());
        add("dir", self.dir.clone());
        add("cache-size", self.cache_size.clone());
        add("durability", self.durability.clone());
        add("maxclients", self.maxclients.map(|n| n.to_string()));
        add("requirepass", self.requirepass.clone());
        add("protected-mode", self.protected_mode.clone());
        add("metrics-addr", self.metrics_addr.clone());
        add("cores", self.cores.clone());
        add("dispatch", self.dispatch.clone());
        add("slo-us", self.slo_us.clone());
        add("prefetch", self.prefetch.clone());
        pairs
    }
}

#[derive(Args)]
struct LoadArgs {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// `resp` (Redis) or `memcache` (memcached's text protocol: get and set).
    #[arg(long, default_value = "resp")]
    protocol: tamer_bench::load::Protocol,
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Most requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Open loop: requests per arrival, written together (a pipelined client's batch).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Keys `key:000000000000` .. `key:N-1`.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// `uniform` or `zipf:THETA` (YCSB's scrambled Zipfian, e.g. zipf:0.99).
    #[arg(long, default_value = "uniform")]
    distribution: tamer_bench::load::Distribution,
    /// Weights of GET, SET and MULTI (a MULTI/SET/SET/EXEC transaction).
    #[arg(long, default_value = "get=90,set=10,multi=0")]
    mix: tamer_bench::load::Mix,
    #[arg(long, default_value_t = 64)]
    value_bytes: usize,
    /// Open loop at this many requests per second (Poisson); without it, closed loop.
    #[arg(long)]
    rate: Option<f64>,
    /// Measured window, in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds run before the window (not measured).
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Set every key first (closed loop, pipelined as asked).
    #[arg(long)]
    load: bool,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Load threads (event loops), connections split between them.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Skewed connection load: the first N connections get --hot-share of the arrivals.
    #[arg(long, default_value_t = 0)]
    hot_connections: usize,
    #[arg(long, default_value_t = 0.0)]
    hot_share: f64,
    /// Pin the load threads to these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CrashArgs {
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

#[derive(Subcommand)]
enum Bench {
    /// Issue 10's server figures: tamer serve vs redis-server and memcached (extstore),
    /// pinned side by side: throughput at a p99 SLO, single vs partitioned queues (measured
    /// and simulated), overload goodput, durable SETs.
    Rpc(RpcArgs),
    /// Issue 11's figures for hashes, lists, sets and sorted sets: tamer serve vs
    /// redis-server in DRAM (leaderboard, queue, session hash, YCSB-E through the embedded
    /// API), then tamer alone with its data 30× its cache, and a large sorted set in a small
    /// cache.
    Types {
        #[command(flatten)]
        common: Common,
        /// Interleaved rounds of the comparisons (default 3; quick 1).
        #[arg(long)]
        rounds: Option<usize>,
        /// Members of the large sorted set (default 10,000,000; quick 500,000).
        #[arg(long)]
        big_zset: Option<u64>,
        /// Run only these parts (vs_redis, ycsb_e, cold, big_zset; default all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
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
        /// Emulated latencies to sweep, in µs (default 1,2,4,8,16,50; quick 1,4,16,50).
        #[arg(long, value_delimiter = ',')]
        latencies_us: Option<Vec<u64>>,
        /// MLP values to sweep at every latency (default 1,2,4; quick 1, plus 2,4 at 4 µs).
        #[arg(long, value_delimiter = ',')]
        mlp: Option<Vec<usize>>,
        /// Leave out the real disk.
        #[arg(long)]
        no_disk: bool,
        /// Duration of one emulated-device point, in ms (default 150; quick 40).
        #[arg(long)]
        point_ms: Option<u64>,
        /// Cores running the sweep (threads are per core); the DRAM baseline runs on as many.
        #[arg(long, default_value_t = 1)]
        cores: usize,
    },
    /// Seed 002's Figures 9 and 10: the store with a small cache (switch-on-miss, FIFO,
    /// flash-sync) vs all in DRAM, on the emulated 50 µs device and the disk; p99 vs load.
    Tier {
        #[command(flatten)]
        common: Common,
        /// CPU work per job (operation or transaction), in nanoseconds.
        #[arg(long, default_value_t = 2_000)]
        work_ns: u64,
        /// MiB of YCSB values (default 2048; quick 1024).
        #[arg(long)]
        data_mib: Option<u64>,
        /// MiB of cache of the tiered configurations (default 64; quick 32); a multiple of 32 KiB.
        #[arg(long)]
        cache_mib: Option<u64>,
        /// Workloads (default ycsb-b,ycsb-c,tatp).
        #[arg(long, value_delimiter = ',')]
        workloads: Option<Vec<tamer_bench::tier::Workload>>,
        /// Leave out the real disk.
        #[arg(long)]
        no_disk: bool,
        /// Leave out the emulated device.
        #[arg(long)]
        no_emulated: bool,
        /// Measured window of one closed-loop point, in ms (default 3000; quick 500).
        #[arg(long)]
        point_ms: Option<u64>,
        /// Executors (cores) of the store; the load generator runs on the last CPU.
        #[arg(long, default_value_t = 1)]
        cores: usize,
        /// User-level threads per core (the closed loop keeps twice as many jobs outstanding;
        /// at most 4096 ÷ (2 × cores)).
        #[arg(long, default_value_t = 64)]
        threads: usize,
        /// Turn the store's background cleaner off (misses then write dirty victims back
        /// themselves, before their read).
        #[arg(long)]
        no_cleaner: bool,
        /// Copy the emulated device's data on the polling core instead of on the load
        /// generator's CPU (its stand-in for a DMA engine).
        #[arg(long)]
        no_dma_offload: bool,
        /// Internal: run as the os-paging worker (a child of this bench) and write its report
        /// here.
        #[arg(long, hide = true)]
        os_paging_worker: Option<PathBuf>,
    },
    /// Seed 001's evaluation: per-transaction durability (staging queues + group commit) vs
    /// volatile, periodic, a group-committed redo log and redb, on the emulated device and disk.
    Durability {
        #[command(flatten)]
        common: Common,
        /// Leave out the real disk (and redb).
        #[arg(long)]
        no_disk: bool,
        /// Leave out the emulated device.
        #[arg(long)]
        no_emulated: bool,
        /// The emulated device's read/write latency in µs (default 50; its flush takes 15 µs).
        #[arg(long)]
        latency_us: Option<u64>,
        /// Keys of the update and swap workloads (default 8000000; quick 200000; TATP,
        /// NewOrder and the queues are preloaded besides).
        #[arg(long)]
        keys: Option<u64>,
        /// MiB of cache of every store (default 32; quick 32); a multiple of 32 KiB.
        #[arg(long)]
        cache_mib: Option<u64>,
        /// Interleaved rounds per device (default 5; quick 3).
        #[arg(long)]
        rounds: Option<usize>,
    },
}

/// `tamer bench rpc`'s own flags.
#[derive(Args)]
struct RpcArgs {
    #[command(flatten)]
    common: Common,
    /// The p99 objective of the "at SLO" figures, in µs.
    #[arg(long, default_value_t = 1_000)]
    slo_us: u64,
    /// Interleaved rounds (default 3; quick 1).
    #[arg(long)]
    rounds: Option<usize>,
    /// MiB of DRAM budget of vs_extstore (default 64; quick 16).
    #[arg(long)]
    budget_mib: Option<u64>,
    /// Run only these scenarios: vs_redis, vs_extstore, single_vs_partitioned (after
    /// vs_extstore: it reuses its store), overload, durable.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
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
    let which = match cli.command {
        Command::Serve(args) => return serve(args),
        Command::Load(args) => return load(args),
        Command::Bench { which } => which,
        Command::Check(store) => return check(&store),
        Command::Recover(store) => return recover(&store),
        Command::Crash(args) => return crash(args),
        Command::CrashWorker { path, seed } => {
            return match tamer_bench::crash::run_worker(&path, seed) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("error: crash worker: {err}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    let (options, result) = match which {
        Bench::Rpc(args) => {
            let options = args.common.options();
            let mut plan = tamer_bench::rpc::Plan::new(options.quick);
            plan.slo_us = args.slo_us.max(1);
            if let Some(rounds) = args.rounds {
                plan.rounds = rounds.max(1);
            }
            if let Some(mib) = args.budget_mib {
                plan.budget_bytes = mib.max(1) << 20;
            }
            plan.only = args.only;
            let result = tamer_bench::rpc::run(&options, plan);
            (options, result)
        }
        Bench::Types {
            common,
            rounds,
            big_zset,
            only,
        } => {
            let options = common.options();
            let mut plan = tamer_bench::types::Plan::new(options.quick);
            if let Some(rounds) = rounds {
                plan.rounds = rounds.max(1);
            }
            if let Some(members) = big_zset {
                plan.big_zset = members.max(100);
            }
            plan.only = only;
            let result = tamer_bench::types::run(&options, plan);
            (options, result)
        }
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
        Bench::Microsecond {
            common,
            work_ns,
            latencies_us,
            mlp,
            no_disk,
            point_ms,
            cores,
        } => {
            let options = common.options();
            let mut plan = tamer_bench::microsecond::Plan::new(options.quick, work_ns);
            if let Some(latencies_us) = latencies_us {
                plan.latencies_ns = latencies_us.iter().map(|us| us * 1_000).collect();
            }
            if let Some(mlp) = mlp {
                if mlp
                    .iter()
                    .any(|&m| m == 0 || m > tamer_bench::microsecond::MAX_MLP)
                {
                    eprintln!(
                        "error: --mlp values must be 1..={}",
                        tamer_bench::microsecond::MAX_MLP
                    );
                    return ExitCode::FAILURE;
                }
                plan.mlps = mlp;
                plan.extra_mlp_at_4us.clear();
            }
            plan.disk &= !no_disk;
            let cpus = tamer_runtime::online_cpus();
            if cores == 0 || cores > cpus {
                eprintln!("error: --cores must be 1..={cpus} (this machine's CPUs)");
                return ExitCode::FAILURE;
            }
            plan.cores = cores;
            if let Some(ms) = point_ms {
                plan.point_duration = std::time::Duration::from_millis(ms.max(1));
            }
            let result = tamer_bench::microsecond::run(&options, plan);
            (options, result)
        }
        Bench::Tier {
            common,
            work_ns,
            data_mib,
            cache_mib,
            workloads,
            no_disk,
            no_emulated,
            point_ms,
            cores,
            threads,
            no_cleaner,
            no_dma_offload,
            os_paging_worker,
        } => {
            let options = common.options();
            let mut plan = tamer_bench::tier::Plan::new(options.quick, work_ns);
            if let Some(mib) = data_mib {
                plan.data_bytes = mib.max(1) << 20;
            }
            if let Some(mib) = cache_mib {
                plan.cache_bytes = mib.max(1) << 20;
            }
            if let Some(workloads) = workloads {
                plan.workloads = workloads;
            }
            plan.disk &= !no_disk;
            plan.emulated &= !no_emulated;
            if let Some(ms) = point_ms {
                plan.measure = std::time::Duration::from_millis(ms.max(1));
            }
            let cpus = tamer_runtime::online_cpus();
            if cores == 0 || cores > cpus {
                eprintln!("error: --cores must be 1..={cpus} (this machine's CPUs)");
                return ExitCode::FAILURE;
            }
            plan.cores = cores;
            // The closed loop keeps 2 × threads × cores jobs outstanding, all of which must fit
            // the runtime's shared job queue.
            let queue = tamer_runtime::RuntimeConfig::default().global_queue;
            if threads == 0 || 2 * threads * cores > queue {
                eprintln!(
                    "error: --threads must be 1..={} with {cores} core(s): the closed loop's 2 × threads × cores jobs must fit the runtime's {queue}-job queue",
                    queue / (2 * cores)
                );
                return ExitCode::FAILURE;
            }
            plan.threads_per_core = threads;
            plan.cleaner = !no_cleaner;
            plan.dma_offload = !no_dma_offload;
            if let Some(out) = os_paging_worker {
                return match tamer_bench::tier::run_os_paging_worker(&options, plan, &out) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(err) => {
                        eprintln!("error: os-paging worker: {err}");
                        ExitCode::FAILURE
                    }
                };
            }
            let result = tamer_bench::tier::run(&options, plan);
            (options, result)
        }
        Bench::Durability {
            common,
            no_disk,
            no_emulated,
            latency_us,
            keys,
            cache_mib,
            rounds,
        } => {
            let options = common.options();
            let mut plan = tamer_bench::durability::Plan::new(options.quick);
            plan.disk &= !no_disk;
            plan.emulated &= !no_emulated;
            if let Some(us) = latency_us {
                plan.latency_ns = us.max(1) * 1_000;
            }
            if let Some(keys) = keys {
                plan.keys = keys.max(2);
            }
            if let Some(mib) = cache_mib {
                plan.cache_bytes = mib.max(1) << 20;
            }
            if let Some(rounds) = rounds {
                plan.rounds = rounds.max(1);
            }
            let result = tamer_bench::durability::run(&options, plan);
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

/// `tamer load`.
fn load(args: LoadArgs) -> ExitCode {
    let secs = |s: f64| std::time::Duration::from_secs_f64(s.clamp(0.0, 86_400.0));
    let opts = tamer_bench::load::LoadOptions {
        host: args.host,
        port: args.port,
        protocol: args.protocol,
        connections: args.connections,
        pipeline: args.pipeline,
        batch: args.batch,
        keys: args.keys,
        distribution: args.distribution,
        mix: args.mix,
        value_bytes: args.value_bytes,
        rate_per_s: args.rate,
        duration: secs(args.duration),
        warmup: secs(args.warmup),
        fill: args.load,
        seed: args.seed,
        threads: args.threads,
        hot_connections: args.hot_connections,
        hot_share: args.hot_share,
        cpus: args.cpus,
        progress: true,
    };
    match tamer_bench::load::run(&opts) {
        Ok(report) if args.json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).expect("serializable")
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            report.print();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `tamer crash`.
fn crash(args: CrashArgs) -> ExitCode {
    use tamer_bench::crash::{self, Harness, Plan};
    let harnesses: Vec<Harness> = match &args.harness {
        None => Harness::ALL.to_vec(),
        Some(names) => {
            let mut harnesses = Vec::new();
            for name in names {
                match Harness::parse(name) {
                    Some(h) => harnesses.push(h),
                    None => {
                        eprintln!("error: --harness {name}: not one of power, concurrent, process");
                        return ExitCode::from(2);
                    }
                }
            }
            harnesses
        }
    };
    let (default_points, default_kills) = if args.long {
        (crash::LONG_POINTS, crash::LONG_KILLS)
    } else {
        (crash::CI_POINTS, crash::CI_KILLS)
    };
    let mut plan = match args.seed {
        Some(seed) => Plan::one_seed(seed, &harnesses),
        None => Plan::split(
            args.offset,
            args.points.unwrap_or(default_points),
            args.kills.unwrap_or(default_kills),
            &harnesses,
        ),
    };
    plan.worker = std::env::current_exe().ok();
    plan.data_dir = args.data_dir.join("crash");
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
    let mut result =
        tamer_bench::output::BenchResult::new("crash", !args.long, args.seed.unwrap_or(0));
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

/// `tamer check PATH...`.
/// The options `tamer check` and `tamer recover` open `paths` with (one file, or a stripe).
fn store_options(store: &StoreArgs) -> tamer_store::DbOptions {
    let StoreArgs {
        paths,
        stripe_unit,
        cache_mib,
    } = store;
    let mut options = tamer_store::DbOptions::new((*cache_mib).max(1) << 20)
        .cleaner(false)
        .warm_index(false)
        .cores(1);
    if paths.len() > 1 {
        options = options.device(tamer_store::DeviceKind::Striped {
            parts: paths
                .iter()
                .map(|p| tamer_store::StripePart {
                    path: p.clone(),
                    device: tamer_store::DeviceKind::Uring,
                })
                .collect(),
            unit_blocks: *stripe_unit,
        });
    }
    options
}

/// The first of `paths` that is not a file, if any.
fn missing_file(paths: &[PathBuf]) -> Option<&PathBuf> {
    paths.iter().find(|p| !p.is_file())
}

fn recover(store: &StoreArgs) -> ExitCode {
    let paths = &store.paths;
    if let Some(missing) = missing_file(paths) {
        eprintln!("error: {}: no such store file", missing.display());
        return ExitCode::from(2);
    }
    let path = &paths[0];
    // A file holding no store yet would be made one by a read-write open: refuse it first.
    let probe = store_options(store).read_only(true);
    match tamer_store::Db::open(path, probe) {
        Ok(db) => drop(db.close()),
        Err(err) => {
            eprintln!("error: {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }
    let bar = std::sync::Arc::new(tamer_bench::progress::RecoveryBar::default());
    let on_progress = bar.clone();
    let options = store_options(store).on_recovery_progress(move |p| on_progress.on_progress(p));
    let opened = tamer_store::Db::open(path, options);
    bar.finish();
    let db = match opened {
        Ok(db) => db,
        Err(err) => {
            eprintln!("error: recovering {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    let stats = db.recovery_stats();
    println!(
        "{}: recovery redid {} of {} commit records ({} deltas, {} staging queue pages read) \
         in {} ms; {} keys",
        path.display(),
        stats.records_redone,
        stats.records_found,
        stats.deltas_redone,
        stats.queue_pages_read,
        stats.ns / 1_000_000,
        db.len()
    );
    if let Err(err) = db.close() {
        eprintln!("error: closing {}: {err}", path.display());
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

fn check(store: &StoreArgs) -> ExitCode {
    let paths = &store.paths;
    if let Some(missing) = missing_file(paths) {
        eprintln!("error: {}: no such store file", missing.display());
        return ExitCode::from(2);
    }
    let path = &paths[0];
    let options = store_options(store).read_only(true);
    let db = match tamer_store::Db::open(path, options) {
        Ok(db) => db,
        Err(err) => {
            eprintln!("error: opening {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    let report = match db.check() {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: checking {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    println!(
        "{}: {} keys, {} records verified, {} buckets, {} data pages, {} extent pages, {} \
         directory segment pages, {} free pages, {} leaked pages",
        path.display(),
        report.keys,
        report.records,
        report.buckets,
        report.data_pages,
        report.extent_pages,
        report.directory_pages,
        report.free_pages,
        report.leaked_pages
    );
    if report.is_clean() {
        println!("ok: no problems");
        return ExitCode::SUCCESS;
    }
    for problem in &report.problems {
        println!("page {}: {}", problem.page, problem.what);
    }
    if report.problems_total > report.problems.len() as u64 {
        println!(
            "... and {} more",
            report.problems_total - report.problems.len() as u64
        );
    }
    println!("DAMAGED: {} problems", report.problems_total);
    ExitCode::from(1)
}

static STOP_SIGNAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP_SIGNAL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The settings of `tamer serve`: the defaults, then `--config`'s file, then the flags.
fn serve_config(args: &ServeArgs) -> Result<tamer_server::config::Config, String> {
    use tamer_server::config::{from_toml, Config, Origin};
    let config = Config::default();
    let startup = |name: &str, value: &str, from: &str| {
        config
            .set_many(&[(name, value)], Origin::Startup)
            .map_err(|e| format!("{from}: {}", e.trim_start_matches("ERR ")))
    };
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--config {}: {e}", path.display()))?;
        let pairs = from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for (name, value) in pairs {
            startup(&name, &value, &path.display().to_string())?;
        }
    }
    for (name, value) in args.settings() {
        startup(name, &value, &format!("--{name}"))?;
    }
    Ok(config)
}

fn serve(args: ServeArgs) -> ExitCode {
    let fail = |what: String| {
        eprintln!("error: {what}");
        ExitCode::FAILURE
    };
    let config = match serve_config(&args) {
        Ok(config) => std::sync::Arc::new(config),
        Err(e) => return fail(e),
    };
    let cache_bytes = config.get_u64("cache-size") / 4096 * 4096;
    let durability_name = config.get("durability");
    let durability = match durability_name.as_str() {
        "commit" => tamer_store::Durability::Commit,
        "periodic" => tamer_store::Durability::Periodic(std::time::Duration::from_secs(1)),
        _ => tamer_store::Durability::None,
    };
    let bind = config.get("bind");
    let loopback = matches!(bind.as_str(), "127.0.0.1" | "::1" | "localhost");
    let protected = config.get("protected-mode") == "yes";
    let requirepass = Some(config.get("requirepass")).filter(|p| !p.is_empty());
    if protected && !loopback && requirepass.is_none() {
        return fail(format!(
            "--bind {bind} reaches beyond this machine and no --requirepass is set: set one, or \
             --protected-mode no to serve anyone who connects"
        ));
    }
    let dir = PathBuf::from(config.get("dir"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(format!("creating {}: {e}", dir.display()));
    }
    let dispatch = match config.get("dispatch").as_str() {
        "partitioned" => tamer_server::net::Dispatch::Partitioned,
        _ => tamer_server::net::Dispatch::Shared,
    };
    let prefetch = config.get("prefetch") == "yes";
    let cores = match config.get_u64("cores") as usize {
        // One CPU is left to the kernel's network work and the clients: on this project's
        // 2-vCPU machine, with redis-benchmark beside it, two cores served 2.5x fewer
        // unpipelined requests than one (idle cores spin for the next request).
        0 => allowed_cpus().saturating_sub(1).max(1),
        n => n,
    };
    let slo_us = Some(config.get_u64("slo-us")).filter(|&us| us > 0);
    let path = dir.join("tamer.db");
    let started = std::time::Instant::now();
    let options = tamer_store::DbOptions::new(cache_bytes)
        .durability(durability)
        .cores(cores);
    let db = match tamer_store::Db::open(&path, options) {
        Ok(db) => std::sync::Arc::new(db),
        Err(e) => return fail(format!("opening {}: {e}", path.display())),
    };
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let recovery = db.recovery_stats();
    let server_options = tamer_server::net::ServerOptions {
        bind: bind.clone(),
        port: config.get_u64("port") as u16,
        max_clients: config.get_u64("maxclients") as usize,
        requirepass,
        config: config.clone(),
        dispatch,
        slo_us,
        prefetch,
    };
    let server = match tamer_server::net::Server::start(db.clone(), server_options) {
        Ok(server) => server,
        Err(e) => return fail(e),
    };
    let metrics = match start_metrics(&config, &server) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    println!(
        "tamer {} serving {} (cache {} MiB, durability {durability_name}, {cores} cores, dispatch \
         {}, slo {}) on {}; opened in {open_ms:.1} ms (recovery redid {} commit records in {} \
         ms){}",
        env!("CARGO_PKG_VERSION"),
        path.display(),
        cache_bytes >> 20,
        config.get("dispatch"),
        slo_us.map_or("none".into(), |us| format!("{us} µs")),
        server.local_addr,
        recovery.records_redone,
        recovery.ns / 1_000_000,
        metrics.as_ref().map_or(String::new(), |m| format!(
            "; metrics on http://{}/metrics",
            m.local_addr
        )),
    );
    wait_for_stop(&server.stats);
    println!("stopping");
    drop(metrics);
    if let Err(e) = server.stop() {
        eprintln!("error: stopping the server: {e}");
    }
    close_store(db, &path)
}

/// The metrics endpoint, if `metrics-addr` names one.
fn start_metrics(
    config: &tamer_server::config::Config,
    server: &tamer_server::net::Server,
) -> Result<Option<tamer_server::metrics::Metrics>, String> {
    let addr = config.get("metrics-addr");
    if addr.is_empty() {
        return Ok(None);
    }
    tamer_server::metrics::Metrics::start(&addr, server.stats.clone()).map(Some)
}

/// Waits for SIGINT, SIGTERM or `SHUTDOWN`.
fn wait_for_stop(stats: &tamer_server::stats::ServerStats) {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_stop_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_stop_signal as *const () as libc::sighandler_t,
        );
    }
    let ordering = std::sync::atomic::Ordering::SeqCst;
    // Bounded by the signal or SHUTDOWN: polled every 50 ms.
    while !STOP_SIGNAL.load(ordering) && !stats.shutdown.load(ordering) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Closes the store once the jobs still running (which hold handles, and briefly the `Db`
/// for `INFO`) let go of it: waits at most 5 s.
fn close_store(mut db: std::sync::Arc<tamer_store::Db>, path: &std::path::Path) -> ExitCode {
    let mut waited_ms = 0;
    let db = loop {
        match std::sync::Arc::try_unwrap(db) {
            Ok(db) => break db,
            Err(shared) if waited_ms < 5_000 => {
                db = shared;
                std::thread::sleep(std::time::Duration::from_millis(10));
                waited_ms += 10;
            }
            Err(_) => {
                eprintln!("error: the store is still in use at shutdown");
                return ExitCode::FAILURE;
            }
        }
    };
    match db.close() {
        Ok(()) => {
            println!("closed cleanly");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: closing {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// CPUs this process may run on (its affinity mask, as `taskset` sets it).
fn allowed_cpus() -> usize {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    tamer_runtime::online_cpus()
}
