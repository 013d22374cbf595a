//! `tamer bench apps`: issue 24 §8's application figures, tamer and redis-server side by side.
//!
//! Every figure of every round starts each server fresh, pinned with `taskset` to
//! [`Plan::server_cpu`] (`tamer serve --cores 1 --durability none`; redis-server without
//! persistence), with the clients on [`Plan::load_cpu`]; the two servers alternate which goes
//! first round by round ([`order`]); a figure is the median of its per-round ratios. Beside
//! each rate, the server's CPU time (user + system, `/proc/PID/stat`) over the measured
//! interval ÷ its operations.
//!
//! - `evalsha_vs_redis` ([`evalsha`]): a 3-command Lua script by `redis-benchmark evalsha`;
//! - `publish_fanout_vs_redis` ([`fanout`]): messages delivered per second to 100 subscribers;
//! - `tracking_get_vs_redis` ([`tracking`]): pipelined GETs with `CLIENT TRACKING ON` (RESP3);
//! - `acl_overhead` ([`acl`]): GET/s as a restricted user ÷ as the default user (tamer; the
//!   same for redis-server as `acl_overhead_redis`); not measured, with the server's error
//!   text, while tamer refuses `ACL SETUSER`.
//!
//! A figure below its target ([`report::TARGETS`]) is printed as a miss and the run goes on; a
//! server that does not start or answers with an unexpected error ends the run with an error.

pub mod acl;
pub mod cpu;
pub mod evalsha;
pub mod fanout;
pub mod redis_benchmark;
pub mod report;
pub mod tracking;

pub use cpu::{cpu_jiffies, measure, with_cpu, Cpu, Measured};

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::output::{BenchResult, RoundValues};
use crate::rpc::servers::{free_port, have, Launch, Server};
use crate::BenchOptions;

/// Sizes and durations of `tamer bench apps`, quick and full.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Interleaved rounds.
    pub rounds: usize,
    /// redis-benchmark's clients (`-c`).
    pub clients: usize,
    /// Keys `key:000000000000` .. of the GET figures (preloaded), and redis-benchmark's `-r`.
    pub keys: u64,
    /// Bytes of each preloaded value.
    pub value_bytes: usize,
    /// EVALSHA calls per server and round (`-n`).
    pub evalsha_requests: u64,
    /// Subscribers of the fan-out's one channel.
    pub fanout_subscribers: usize,
    /// PUBLISHes per server and round.
    pub fanout_messages: u64,
    /// PUBLISHes written together.
    pub fanout_batch: usize,
    /// Most PUBLISHes unanswered.
    pub fanout_in_flight_max: u64,
    /// Bytes of each message.
    pub payload_bytes: usize,
    /// Connections of the tracking GETs.
    pub tracking_connections: usize,
    /// GETs in flight on each of them.
    pub tracking_depth: usize,
    /// Measured window of the tracking GETs.
    pub tracking_window: Duration,
    /// GETs per user, server and round of `acl_overhead`, in two redis-benchmark runs.
    pub acl_requests: u64,
    /// The servers' CPU.
    pub server_cpu: usize,
    /// The clients' CPU.
    pub load_cpu: usize,
    /// Figures to run (evalsha, publish_fanout, tracking_get, acl); empty: all.
    pub only: Vec<String>,
}

impl Plan {
    /// The full run's plan, or the CI-sized one (`quick`).
    pub fn new(quick: bool) -> Self {
        Self {
            rounds: if quick { 3 } else { 5 },
            clients: 50,
            keys: 10_000,
            value_bytes: 8,
            evalsha_requests: if quick { 40_000 } else { 100_000 },
            fanout_subscribers: 100,
            fanout_messages: if quick { 50_000 } else { 200_000 },
            fanout_batch: 100,
            fanout_in_flight_max: 1_000,
            payload_bytes: 64,
            tracking_connections: 16,
            tracking_depth: 16,
            tracking_window: Duration::from_millis(if quick { 1_500 } else { 5_000 }),
            acl_requests: if quick { 200_000 } else { 600_000 },
            server_cpu: 1,
            load_cpu: 0,
            only: Vec::new(),
        }
    }
}

/// The two servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `tamer serve`.
    Tamer,
    /// redis-server.
    Redis,
}

impl Kind {
    /// Its name in figures and rows.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tamer => "tamer",
            Kind::Redis => "redis",
        }
    }
}

/// The servers in round `round`'s order: tamer first in even rounds, redis-server in odd.
pub fn order(round: usize) -> [Kind; 2] {
    let mut kinds = [Kind::Tamer, Kind::Redis];
    kinds.rotate_left(round % 2);
    kinds
}

/// The text of a RESP bulk string reply (`$3\r\nabc\r\n`), if it is one.
pub fn bulk_text(reply: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(reply).ok()?;
    let (len, rest) = text.strip_prefix('$')?.split_once("\r\n")?;
    let len: usize = len.parse().ok()?;
    let body = rest.strip_suffix("\r\n")?;
    (body.len() == len).then(|| body.to_string())
}

/// What a figure's round writes to.
pub struct Ctx<'a> {
    /// The plan of the run.
    pub plan: &'a Plan,
    /// This round.
    pub round: usize,
    /// This round's seed.
    pub seed: u64,
    /// Directory for the servers' files.
    dir: PathBuf,
    result: &'a mut BenchResult,
    values: RoundValues,
}

impl Ctx<'_> {
    /// Starts `kind` fresh (an empty directory), pinned to the server CPU.
    pub fn start(&self, kind: Kind) -> Result<Server, String> {
        let dir = self.dir.join(kind.name());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let launch = match kind {
            Kind::Tamer => Launch::tamer(port, &dir, &["--cores", "1", "--durability", "none"]),
            Kind::Redis => Launch::redis(port, &["--dir", &dir.display().to_string()]),
        };
        Server::start(launch.pinned(&self.plan.server_cpu.to_string()))
    }

    /// Each server, started fresh in this round's order: `measure` on it, then it is killed.
    /// Returns tamer's result and redis-server's.
    pub fn each_server<T>(
        &mut self,
        mut measure: impl FnMut(&mut Self, &Server, Kind) -> Result<T, String>,
    ) -> Result<[T; 2], String> {
        let (mut tamer, mut redis) = (None, None);
        for kind in order(self.round) {
            let server = self.start(kind)?;
            let out = measure(self, &server, kind).map_err(|e| format!("{}: {e}", kind.name()))?;
            match kind {
                Kind::Tamer => tamer = Some(out),
                Kind::Redis => redis = Some(out),
            }
        }
        match (tamer, redis) {
            (Some(t), Some(r)) => Ok([t, r]),
            _ => Err("a server was not measured".into()),
        }
    }

    /// `figure` = tamer's rate ÷ redis-server's, and each one's measurements ([`Self::measured`]);
    /// a row of both.
    pub fn compare(&mut self, figure: &str, stem: &str, [tamer, redis]: [Measured; 2]) {
        self.values.ratio(figure, tamer.ops_per_s, redis.ops_per_s);
        self.measured(stem, Kind::Tamer, tamer);
        self.measured(stem, Kind::Redis, redis);
        self.row(json!({"figure": figure, "round": self.round, "tamer": tamer, "redis": redis}));
    }

    /// Records one server's rate, CPU per operation and load CPU's busy fraction under `stem`.
    pub fn measured(&mut self, stem: &str, kind: Kind, m: Measured) {
        let server = kind.name();
        self.values
            .record(&format!("{stem}_per_s_{server}"), m.ops_per_s);
        self.values.record(
            &format!("{stem}_server_cpu_us_per_op_{server}"),
            m.server_cpu_us_per_op(),
        );
        self.values.record(
            &format!("{stem}_load_cpu_busy_fraction_{server}"),
            m.load_cpu_busy_fraction,
        );
    }

    /// `num ÷ den` of this round.
    pub fn ratio(&mut self, figure: &str, num: f64, den: f64) {
        self.values.ratio(figure, num, den);
    }

    /// Adds a JSON row to the result.
    pub fn row(&mut self, row: serde_json::Value) {
        self.result.rows.push(row);
    }

    /// Records a note, once however many rounds give it.
    pub fn note_once(&mut self, note: String) {
        if !self.result.notes.contains(&note) {
            self.result.note(note);
        }
    }
}

type Figure = fn(&mut Ctx) -> Result<(), String>;

/// The figures, by the name `--only` takes, in the order each round runs them.
pub const FIGURES: [(&str, Figure); 4] = [
    ("evalsha", evalsha::round),
    ("publish_fanout", fanout::round),
    ("tracking_get", tracking::round),
    ("acl", acl::round),
];

/// Runs every figure's rounds. A missing peer is noted and nothing is measured; a figure that
/// fails ends the run with its error.
pub fn run(options: &BenchOptions, plan: Plan) -> Result<BenchResult, String> {
    let mut result = BenchResult::new("apps", options.quick, options.seed);
    if let Some(unknown) = plan
        .only
        .iter()
        .find(|o| !FIGURES.iter().any(|(n, _)| n == o))
    {
        return Err(format!("--only: no figure named {unknown}"));
    }
    let missing: Vec<&str> = ["redis-server", "redis-benchmark", "taskset"]
        .into_iter()
        .filter(|p| !have(p))
        .collect();
    if !missing.is_empty() {
        result.note(format!(
            "missing peers: {} (scripts/install-peers.sh): skipped, nothing measured",
            missing.join(", ")
        ));
        report::finish(&mut result, &plan);
        return Ok(result);
    }
    result.note(format!(
        "servers pinned to CPU {} (tamer serve --cores 1 --durability none; redis-server \
         without persistence), started fresh for each figure of each round; clients on CPU {}; \
         medians of {} interleaved rounds",
        plan.server_cpu, plan.load_cpu, plan.rounds
    ));
    let dir = options.data_dir.join("apps");
    let outcome = rounds(options, &plan, &dir, &mut result);
    let _ = std::fs::remove_dir_all(&dir);
    outcome?;
    report::finish(&mut result, &plan);
    Ok(result)
}

/// Every round of every figure wanted; each figure's medians into `result`.
fn rounds(
    options: &BenchOptions,
    plan: &Plan,
    dir: &std::path::Path,
    result: &mut BenchResult,
) -> Result<(), String> {
    let mut values = RoundValues::default();
    for round in 0..plan.rounds {
        for (name, figure) in FIGURES {
            if !plan.only.is_empty() && !plan.only.iter().any(|o| o == name) {
                continue;
            }
            println!("apps round {round}: {name}");
            let mut ctx = Ctx {
                plan,
                round,
                seed: options.seed ^ round as u64,
                dir: dir.to_path_buf(),
                result,
                values: RoundValues::default(),
            };
            let outcome = figure(&mut ctx);
            values.extend(std::mem::take(&mut ctx.values));
            outcome.map_err(|e| format!("round {round} {name}: {e}"))?;
        }
    }
    values.write_figures(result);
    Ok(())
}
