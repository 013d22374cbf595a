//! `tamer load`: load against any Redis (RESP) or memcached server.

use std::process::ExitCode;

use clap::Args;

/// `tamer load`'s flags.
#[derive(Args)]
pub struct LoadArgs {
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

/// `tamer load`.
pub fn run(args: LoadArgs) -> ExitCode {
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
        setup: Vec::new(),
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
