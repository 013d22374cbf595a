//! Issue 25's closed-loop figures: `redis-benchmark -c 50 -r 100000 -d 64` (pinned to the
//! load CPU) against each server started fresh (pinned to the server CPU), every test on one
//! server in turn, the servers in an order rotated by the round. A figure is tamer's
//! requests/s ÷ the baseline's, the median of the rounds' ratios; beside each, the server's
//! CPU ns per request (user + system, `/proc/PID/stat`, over the test).
//!
//! - `{get_p16,set_p16,hset_p16,set,mset}_vs_redis`: tamer `--durability none --cores 1` ÷
//!   redis-server without persistence;
//! - `durable_set_vs_aof`, `durable_set_p16_vs_aof`: tamer `--durability commit` ÷
//!   redis-server `--appendonly yes --appendfsync always`, both on the data directory's disk;
//! - `cores2_vs_cores1_min`: tamer `--cores 2` (on both CPUs, as a user of this 2-vCPU
//!   machine runs it) ÷ `--cores 1`, the least over the tests (each test's ratio is kept as
//!   `cores2_vs_cores1_{test}`).

use serde_json::json;

use super::scenarios::fresh_dir;
use super::servers::{free_port, Launch, Server};
use super::Ctx;
use crate::apps::cpu::{measure, Measured};
use crate::apps::redis_benchmark::Run;

/// One redis-benchmark test.
#[derive(Clone, Copy, Debug)]
pub struct Test {
    /// Its name in figures (`set_p16`).
    pub name: &'static str,
    /// redis-benchmark's test (`-t`).
    pub command: &'static str,
    /// Requests per batch (`-P`).
    pub pipeline: usize,
    /// Its requests as a share of the plan's `closed_requests` (a divisor: MSET's are ten
    /// keys each, unpipelined tests run slower).
    pub divisor: u64,
}

/// The tests against tamer `none` and redis-server without persistence, in the order each
/// server runs them (SET first: the GETs then find values).
pub const TESTS: [Test; 6] = [
    test("set", "set", 1, 2),
    test("set_p16", "set", 16, 1),
    test("get", "get", 1, 2),
    test("get_p16", "get", 16, 1),
    test("hset_p16", "hset", 16, 1),
    test("mset", "mset", 1, 10),
];

/// The durable tests (tamer `commit`, redis-server `appendfsync always`).
pub const DURABLE_TESTS: [Test; 2] = [test("set", "set", 1, 4), test("set_p16", "set", 16, 2)];

const fn test(name: &'static str, command: &'static str, pipeline: usize, divisor: u64) -> Test {
    Test {
        name,
        command,
        pipeline,
        divisor,
    }
}

/// The servers of a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    TamerCores1,
    TamerCores2,
    Redis,
    TamerCommit,
    RedisAof,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::TamerCores1 => "tamer",
            Setup::TamerCores2 => "tamer_cores2",
            Setup::Redis => "redis",
            Setup::TamerCommit => "tamer_commit",
            Setup::RedisAof => "redis_aof",
        }
    }

    fn tests(self) -> &'static [Test] {
        match self {
            Setup::TamerCommit | Setup::RedisAof => &DURABLE_TESTS,
            _ => &TESTS,
        }
    }
}

/// One round of every closed-loop figure.
pub fn round(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let mut setups = [
        Setup::TamerCores1,
        Setup::Redis,
        Setup::TamerCores2,
        Setup::TamerCommit,
        Setup::RedisAof,
    ];
    let count = setups.len();
    setups.rotate_left(round % count);
    let mut measured: Vec<(Setup, &'static str, Measured)> = Vec::new();
    for setup in setups {
        let server = start(ctx, setup)?;
        for &t in setup.tests() {
            let m = run_test(ctx, &server, t)
                .map_err(|e| format!("{} {}: {e}", setup.name(), t.name))?;
            ctx.row(
                json!({"figure": "closed_loop", "round": round, "server": setup.name(),
                "test": t.name, "measured": m}),
            );
            measured.push((setup, t.name, m));
        }
    }
    let find = |setup: Setup, name: &str| {
        measured
            .iter()
            .find(|(s, n, _)| *s == setup && *n == name)
            .map(|(_, _, m)| *m)
    };
    figures(ctx, &find);
    Ok(())
}

/// The round's ratios and CPU per request from its measurements.
fn figures(ctx: &mut Ctx, find: &dyn Fn(Setup, &str) -> Option<Measured>) {
    for t in TESTS {
        if let (Some(tamer), Some(redis)) =
            (find(Setup::TamerCores1, t.name), find(Setup::Redis, t.name))
        {
            ctx.ratio(
                &format!("{}_vs_redis", t.name),
                tamer.ops_per_s,
                redis.ops_per_s,
            );
            cpu_per_request(ctx, t.name, "tamer", tamer);
            cpu_per_request(ctx, t.name, "redis", redis);
        }
    }
    let mut cores_min = f64::INFINITY;
    for t in TESTS {
        if let (Some(two), Some(one)) = (
            find(Setup::TamerCores2, t.name),
            find(Setup::TamerCores1, t.name),
        ) {
            let ratio = two.ops_per_s / one.ops_per_s;
            ctx.record(&format!("cores2_vs_cores1_{}", t.name), ratio);
            cores_min = cores_min.min(ratio);
        }
    }
    if cores_min.is_finite() {
        ctx.record("cores2_vs_cores1_min", cores_min);
    }
    for t in DURABLE_TESTS {
        if let (Some(tamer), Some(aof)) = (
            find(Setup::TamerCommit, t.name),
            find(Setup::RedisAof, t.name),
        ) {
            ctx.ratio(
                &format!("durable_{}_vs_aof", t.name),
                tamer.ops_per_s,
                aof.ops_per_s,
            );
            cpu_per_request(ctx, &format!("durable_{}", t.name), "tamer", tamer);
            cpu_per_request(ctx, &format!("durable_{}", t.name), "redis", aof);
        }
    }
}

fn cpu_per_request(ctx: &mut Ctx, stem: &str, server: &str, m: Measured) {
    ctx.record(
        &format!("{stem}_cpu_ns_per_req_{server}"),
        m.server_cpu_us_per_op() * 1_000.0,
    );
}

/// Starts `setup`'s server fresh (an empty directory), pinned.
fn start(ctx: &Ctx, setup: Setup) -> Result<Server, String> {
    let dir = fresh_dir(ctx, &format!("closed-{}", setup.name()))?;
    let dir_text = dir.display().to_string();
    let port = free_port()?;
    let server_cpu = ctx.plan.server_cpu.to_string();
    let both_cpus = format!("{},{}", ctx.plan.load_cpu, ctx.plan.server_cpu);
    let tamer = |durability: &str, cores: &str| {
        Launch::tamer(
            port,
            &dir,
            &[
                "--durability",
                durability,
                "--cores",
                cores,
                "--cache-size",
                "256mb",
            ],
        )
    };
    let launch = match setup {
        Setup::TamerCores1 => tamer("none", "1").pinned(&server_cpu),
        Setup::TamerCores2 => tamer("none", "2").pinned(&both_cpus),
        Setup::TamerCommit => tamer("commit", "1").pinned(&server_cpu),
        Setup::Redis => Launch::redis(port, &["--dir", &dir_text]).pinned(&server_cpu),
        Setup::RedisAof => Launch::redis(
            port,
            &[
                "--dir",
                &dir_text,
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
        )
        .pinned(&server_cpu),
    };
    Server::start(launch)
}

/// One redis-benchmark test against `server`: its rate and the server's CPU over it.
fn run_test(ctx: &Ctx, server: &Server, t: Test) -> Result<Measured, String> {
    let run = Run {
        port: server.port(),
        cpu: ctx.plan.load_cpu,
        clients: 50,
        requests: (ctx.plan.closed_requests / t.divisor).max(1_000),
        keyspace: 100_000,
        user: None,
        test: ["-d", "64", "-P", &t.pipeline.to_string(), "-t", t.command]
            .map(String::from)
            .to_vec(),
    };
    measure(&run, server)
}
