//! The in-DRAM comparisons with redis-server: leaderboard, queue, session hash. Each round
//! starts both servers fresh (pinned, one core), loads the same data, runs the same seeded
//! closed loops, in an order rotated by the round.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::client::{args, closed_loop, pin_to, Conn, Measured};
use super::Ctx;
use crate::load::proto::Reply;
use crate::rpc::servers::{free_port, Launch, Server};

/// Connections per driver thread, and driver threads, of the closed loops.
const CONNS: usize = 16;
const THREADS: usize = 2;
/// Queue: producer connections (one thread) and consumer connections (a thread each).
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 8;

pub fn fresh_dir(ctx: &Ctx, name: &str) -> Result<std::path::PathBuf, String> {
    let dir = ctx.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// `tamer serve` on one core pinned to the server CPU, with `flags`.
pub fn tamer(ctx: &Ctx, dir: &std::path::Path, flags: &[&str]) -> Result<Server, String> {
    let mut all = vec!["--cores", "1"];
    all.extend_from_slice(flags);
    let launch = Launch::tamer(free_port()?, dir, &all).pinned(&ctx.plan.server_cpu.to_string());
    Server::start(launch)
}

pub fn redis(ctx: &Ctx) -> Result<Server, String> {
    Server::start(Launch::redis(free_port()?, &[]).pinned(&ctx.plan.server_cpu.to_string()))
}

/// The member a leaderboard operation names: skewed (a few players play most).
fn player(rng: &mut SmallRng, members: u64) -> String {
    let r: f64 = rng.gen();
    format!("player:{}", ((r * r * r) * members as f64) as u64)
}

/// Loads a leaderboard of `members` players (pipelined ZADDs of 500).
fn load_board(port: u16, members: u64) -> Result<(), String> {
    let mut c = Conn::connect(port)?;
    let mut batch = Vec::new();
    for start in (0..members).step_by(500) {
        let mut cmd = args(&["zadd", "board"]);
        for i in start..(start + 500).min(members) {
            cmd.push(format!("{}", (i * 7919) % 100_000).into_bytes());
            cmd.push(format!("player:{i}").into_bytes());
        }
        batch.push(cmd);
        if batch.len() == 16 {
            check(c.pipeline(&batch)?)?;
            batch.clear();
        }
    }
    check(c.pipeline(&batch)?)
}

fn check(errors: usize) -> Result<(), String> {
    if errors > 0 {
        return Err(format!("{errors} error replies while loading"));
    }
    Ok(())
}

/// A session's fields: 10 to 50 of 20 bytes.
fn session_fields(rng: &mut SmallRng, id: u64) -> Vec<Vec<u8>> {
    let n = 10 + (id % 41);
    let mut cmd = vec![b"hset".to_vec(), format!("session:{id}").into_bytes()];
    let stamp: u32 = rng.gen();
    for f in 0..n {
        cmd.push(format!("field{f}").into_bytes());
        cmd.push(format!("{stamp:010}-value{f:04}").into_bytes());
    }
    cmd
}

/// Loads `sessions` sessions (pipelined).
pub fn load_sessions(port: u16, sessions: u64, seed: u64) -> Result<(), String> {
    let mut c = Conn::connect(port)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut batch = Vec::new();
    for id in 0..sessions {
        batch.push(session_fields(&mut rng, id));
        if batch.len() == 64 {
            check(c.pipeline(&batch)?)?;
            batch.clear();
        }
    }
    check(c.pipeline(&batch)?)
}

/// The session workload's request: `HSET` of a whole session or `HGETALL`, half each.
pub fn session_op(rng: &mut SmallRng, sessions: u64) -> Vec<Vec<u8>> {
    let id = rng.gen_range(0..sessions);
    if rng.gen_bool(0.5) {
        session_fields(rng, id)
    } else {
        vec![b"hgetall".to_vec(), format!("session:{id}").into_bytes()]
    }
}

fn leaderboard_op(rng: &mut SmallRng, members: u64) -> Vec<Vec<u8>> {
    let p = player(rng, members);
    match rng.gen_range(0..10) {
        0..=4 => args(&[
            "zincrby",
            "board",
            &format!("{}", rng.gen_range(1..100)),
            &p,
        ]),
        5..=6 => args(&[
            "zadd",
            "board",
            &format!("{}", rng.gen_range(0..100_000)),
            &p,
        ]),
        7..=8 => args(&["zrevrange", "board", "0", "9", "withscores"]),
        _ => args(&["zrevrank", "board", &p]),
    }
}

/// Producers push and consumers pop with `BRPOP` for `window`; the elements consumed.
fn queue(port: u16, window: Duration, cpu: usize, seed: u64) -> Result<(f64, Measured), String> {
    let stop = AtomicBool::new(false);
    let consumed = AtomicU64::new(0);
    let value = vec![b'q'; 100];
    let produced: Result<Measured, String> = std::thread::scope(|s| {
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let (stop, consumed) = (&stop, &consumed);
                s.spawn(move || -> Result<(), String> {
                    pin_to(cpu);
                    let mut c = Conn::connect(port)?;
                    // Bounded: each BRPOP returns within its 1 s timeout.
                    while !stop.load(Ordering::Acquire) {
                        c.send(&args(&["brpop", "queue", "1"]))?;
                        match c.reply()? {
                            (Reply::Ok, _) => {
                                consumed.fetch_add(1, Ordering::Relaxed);
                            }
                            (Reply::Nil, _) => {}
                            (_, bytes) => return Err(String::from_utf8_lossy(&bytes).into_owned()),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let start = Instant::now();
        let make = |_: &mut SmallRng| vec![b"lpush".to_vec(), b"queue".to_vec(), value.clone()];
        let produced = closed_loop(port, 1, PRODUCERS, window, Some(cpu), seed, &make);
        let taken = consumed.load(Ordering::Relaxed);
        let seconds = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        for c in consumers {
            c.join().expect("a consumer")?;
        }
        produced.map(|mut m| {
            m.ops = taken;
            m.seconds = seconds;
            m
        })
    });
    let m = produced?;
    Ok((m.ops_per_s(), m))
}

fn measured_row(m: &Measured, cpu_s: Option<f64>) -> serde_json::Value {
    let cpu_us_per_op = cpu_s.map(|s| s * 1e6 / m.ops.max(1) as f64);
    json!({"ops": m.ops, "seconds": m.seconds, "ops_per_s": m.ops_per_s(), "errors": m.errors,
           "p50_us": m.p(0.5), "p99_us": m.p(0.99), "first_error": m.first_error,
           "server_cpu_us_per_op": cpu_us_per_op})
}

/// `f`, and the server CPU time it took, seconds (`None` where /proc cannot tell).
fn with_cpu<T>(
    server: &Server,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<(T, Option<f64>), String> {
    let before = server.cpu_seconds();
    let out = f()?;
    let used = server.cpu_seconds().zip(before).map(|(a, b)| a - b);
    Ok((out, used))
}

/// `types_vs_redis_{leaderboard,queue,session}`, and `types_cpu_vs_redis_*`: the server CPU
/// time per operation, redis's ÷ tamer's.
pub fn vs_redis(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let plan = ctx.plan.clone();
    let cache = plan.dram_cache_bytes.to_string();
    let mut names = ["tamer", "redis"];
    names.rotate_left(round % 2);
    let mut got = std::collections::BTreeMap::new();
    let mut cpu_us_per_op = std::collections::BTreeMap::new();
    for name in names {
        let server = match name {
            "tamer" => {
                let dir = fresh_dir(ctx, "tamer-dram")?;
                tamer(ctx, &dir, &["--durability", "none", "--cache-size", &cache])?
            }
            _ => redis(ctx)?,
        };
        let port = server.port();
        load_board(port, plan.board_members)?;
        load_sessions(port, plan.sessions, ctx.seed)?;
        let cpu = Some(plan.load_cpu);
        let board = |rng: &mut SmallRng| leaderboard_op(rng, plan.board_members);
        let sessions = |rng: &mut SmallRng| session_op(rng, plan.sessions);
        closed_loop(port, THREADS, CONNS, plan.warmup, cpu, ctx.seed, &board)?;
        let (lb, lb_cpu) = with_cpu(&server, || {
            closed_loop(port, THREADS, CONNS, plan.window, cpu, ctx.seed, &board)
        })?;
        closed_loop(port, THREADS, CONNS, plan.warmup, cpu, ctx.seed, &sessions)?;
        let (se, se_cpu) = with_cpu(&server, || {
            closed_loop(port, THREADS, CONNS, plan.window, cpu, ctx.seed, &sessions)
        })?;
        let ((q, qm), q_cpu) = with_cpu(&server, || {
            queue(port, plan.window, plan.load_cpu, ctx.seed)
        })?;
        let measured = [
            ("leaderboard", &lb, lb_cpu),
            ("session", &se, se_cpu),
            ("queue", &qm, q_cpu),
        ];
        for (w, m, cpu_s) in measured {
            if m.errors > 0 {
                return Err(format!(
                    "{name} {w}: {} errors, first {:?}",
                    m.errors, m.first_error
                ));
            }
            ctx.row(json!({"figure": "vs_redis", "round": round, "server": name, "workload": w, "measured": measured_row(m, cpu_s)}));
        }
        got.insert((name, "leaderboard"), lb.ops_per_s());
        got.insert((name, "session"), se.ops_per_s());
        got.insert((name, "queue"), q);
        for (w, m, cpu_s) in measured {
            if let Some(s) = cpu_s {
                cpu_us_per_op.insert((name, w), s * 1e6 / m.ops.max(1) as f64);
            }
        }
        drop(server);
    }
    for w in ["leaderboard", "queue", "session"] {
        ctx.ratio(
            &format!("types_vs_redis_{w}"),
            got[&("tamer", w)],
            got[&("redis", w)],
        );
        // CPU per operation, redis's ÷ tamer's: above 1, tamer spends less on each.
        if let (Some(t), Some(r)) = (
            cpu_us_per_op.get(&("tamer", w)),
            cpu_us_per_op.get(&("redis", w)),
        ) {
            ctx.ratio(&format!("types_cpu_vs_redis_{w}"), *r, *t);
        }
    }
    Ok(())
}
