//! Each figure's measurements in one round: servers started fresh, pinned, in the round's
//! rotated order; every input recorded as a row.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::servers::{free_port, Launch, Server};
use super::slo;
use super::Ctx;
use crate::load::{self, proto, LoadOptions, Mix, Protocol};

/// The base load: `connections` to `port`, pinned to the load CPU, windows of the plan.
pub fn base(
    ctx: &Ctx,
    port: u16,
    connections: usize,
    keys: u64,
    value_bytes: usize,
) -> LoadOptions {
    let mut o = LoadOptions::new(port);
    o.connections = connections;
    o.keys = keys;
    o.value_bytes = value_bytes;
    o.duration = ctx.plan.step;
    o.warmup = ctx.plan.warmup;
    o.seed = ctx.seed;
    o.cpus = vec![ctx.plan.load_cpu];
    o
}

/// Sets every key (closed loop, 8 connections × 32).
pub fn fill(o: &LoadOptions) -> Result<load::FillReport, String> {
    let mut f = o.clone();
    f.fill = true;
    f.connections = 8;
    f.pipeline = 32;
    f.rate_per_s = None;
    f.duration = Duration::from_millis(1);
    f.warmup = Duration::ZERO;
    f.mix = Mix {
        get: 1,
        set: 0,
        multi: 0,
    };
    f.progress = true;
    Ok(load::run(&f)?.fill.unwrap_or_default())
}

pub fn fresh_dir(ctx: &Ctx, name: &str) -> Result<PathBuf, String> {
    let dir = ctx.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

pub fn tamer(ctx: &Ctx, dir: &Path, flags: &[&str]) -> Result<Server, String> {
    let launch = Launch::tamer(free_port()?, dir, flags).pinned(&ctx.plan.server_cpu.to_string());
    Server::start(launch)
}

pub fn redis(ctx: &Ctx, flags: &[&str]) -> Result<Server, String> {
    Server::start(Launch::redis(free_port()?, flags).pinned(&ctx.plan.server_cpu.to_string()))
}

/// `vs_redis_{get,set}` (unpipelined) and `_p16` (batches of 16): throughput at the SLO, data
/// in DRAM, tamer `--durability none` on one core vs redis-server without persistence.
pub fn vs_redis(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let cache = format!(
        "{}",
        ctx.plan.keys * 4 * (ctx.plan.value_bytes as u64 + 64) + (64 << 20)
    );
    let mut names = ["tamer", "redis"];
    names.rotate_left(round % 2);
    let mut at = std::collections::BTreeMap::new();
    for name in names {
        let server = match name {
            "tamer" => {
                let dir = fresh_dir(ctx, "tamer-dram")?;
                tamer(
                    ctx,
                    &dir,
                    &[
                        "--durability",
                        "none",
                        "--cores",
                        "1",
                        "--cache-size",
                        &cache,
                    ],
                )?
            }
            _ => redis(ctx, &[])?,
        };
        let o = base(ctx, server.port(), 50, ctx.plan.keys, ctx.plan.value_bytes);
        fill(&o)?;
        for (op, mix) in [("get", "get=1"), ("set", "set=1")] {
            for batch in [1, 16] {
                let mut o = o.clone();
                o.mix = mix.parse()?;
                o.batch = batch;
                o.pipeline = 2 * batch;
                let r = slo::search(&o, ctx.slo_ns())?;
                ctx.row(json!({"figure": "vs_redis", "round": round, "server": name, "op": op, "batch": batch, "search": r}));
                at.insert((name, op, batch), r.at_slo_per_s);
            }
        }
    }
    for op in ["get", "set"] {
        for (batch, suffix) in [(1, ""), (16, "_p16")] {
            ctx.ratio(
                &format!("vs_redis_{op}{suffix}"),
                at[&("tamer", op, batch)],
                at[&("redis", op, batch)],
            );
        }
    }
    Ok(())
}

/// Reads `count` keys spread over the data set and checks each value is its key's.
fn verify_sample(port: u16, keys: u64, value_bytes: usize, count: u64) -> Result<f64, String> {
    use std::io::{BufRead, BufReader, Read, Write};
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut writer = stream;
    let mut good = 0;
    for i in 0..count {
        let key = i * (keys / count).max(1) % keys;
        let k = proto::key_text(key);
        let cmd = format!(
            "*2\r\n$3\r\nGET\r\n$16\r\n{}\r\n",
            String::from_utf8_lossy(&k)
        );
        writer
            .write_all(cmd.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if let Some(len) = line
            .strip_prefix('$')
            .and_then(|l| l.trim().parse::<usize>().ok())
        {
            let mut value = vec![0; len + 2];
            reader.read_exact(&mut value).map_err(|e| e.to_string())?;
            good += u64::from(value[..len] == proto::value_for(key, value_bytes)[..]);
        }
    }
    Ok(good as f64 / count as f64)
}

/// `vs_extstore`: the flash data set (30 × the budget) on tamer (`--cache-size` = budget) vs
/// memcached with extstore (`-m` = budget), GETs at the SLO; then redis-server with
/// `maxmemory` = budget under `allkeys-lru` and `noeviction`. Leaves tamer's store filled in
/// `tamer-ext` for [`partitioned`].
pub fn vs_extstore(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let (budget, keys, vb) = (
        ctx.plan.budget_bytes,
        ctx.plan.ext_keys(),
        ctx.plan.ext_value_bytes,
    );
    let mut names = ["tamer", "memcached"];
    names.rotate_left(round % 2);
    let (mut at, mut hits) = ([0.0; 2], [0.0; 2]);
    for name in names {
        let (server, proto) = match name {
            "tamer" => {
                let dir = fresh_dir(ctx, "tamer-ext")?;
                let cache = budget.to_string();
                (
                    tamer(
                        ctx,
                        &dir,
                        &[
                            "--durability",
                            "none",
                            "--cores",
                            "1",
                            "--cache-size",
                            &cache,
                        ],
                    )?,
                    Protocol::Resp,
                )
            }
            _ => {
                let dir = fresh_dir(ctx, "extstore")?;
                let ext = format!(
                    "ext_path={}:{}m",
                    dir.join("extstore").display(),
                    (keys * (vb as u64 + 128) * 2) >> 20
                );
                let mb = (budget >> 20).to_string();
                let launch = Launch::memcached(free_port()?, &["-m", &mb, "-o", &ext])
                    .pinned(&ctx.plan.server_cpu.to_string());
                (Server::start(launch)?, Protocol::Memcache)
            }
        };
        let mut o = base(ctx, server.port(), 50, keys, vb);
        o.protocol = proto;
        let f = fill(&o)?;
        let verified = match proto {
            Protocol::Resp => verify_sample(server.port(), keys, vb, 1_000)?,
            Protocol::Memcache => f64::NAN,
        };
        o.mix = "get=1".parse()?;
        let r = slo::search(&o, ctx.slo_ns())?;
        let nil = last_nil_fraction(&o)?;
        ctx.row(json!({"figure": "vs_extstore", "round": round, "server": name, "keys": keys, "fill": f, "verified_fraction": verified, "miss_fraction": nil, "search": r}));
        if name == "tamer" {
            ctx.record("tamer_ext_verified_fraction", verified);
            ctx.record("tamer_ext_miss_fraction", nil);
            terminate(server);
        } else {
            ctx.record("extstore_miss_fraction", nil);
        }
        at[usize::from(name != "tamer")] = r.at_slo_per_s;
        hits[usize::from(name != "tamer")] = r.at_slo_per_s * (1.0 - nil);
    }
    ctx.ratio("vs_extstore", at[0], at[1]);
    ctx.ratio("vs_extstore_hits", hits[0], hits[1]);
    redis_maxmemory(ctx, round)
}

/// The fraction of GETs that missed in a short closed-loop run.
fn last_nil_fraction(o: &LoadOptions) -> Result<f64, String> {
    let mut c = o.clone();
    c.rate_per_s = None;
    c.duration = Duration::from_millis(500);
    let r = load::run(&c)?;
    Ok(r.nil as f64 / r.answered.max(1) as f64)
}

/// SIGTERM and a wait for a clean close (tamer checkpoints, so its store can be reopened).
pub fn terminate(server: Server) {
    server.signal(libc::SIGTERM);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut server = server;
    while server.alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// redis-server with `maxmemory` = the budget on the flash data set: what it serves.
fn redis_maxmemory(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let (budget, keys, vb) = (
        ctx.plan.budget_bytes,
        ctx.plan.ext_keys(),
        ctx.plan.ext_value_bytes,
    );
    for policy in ["allkeys-lru", "noeviction"] {
        let server = redis(
            ctx,
            &[
                "--maxmemory",
                &budget.to_string(),
                "--maxmemory-policy",
                policy,
            ],
        )?;
        let o = base(ctx, server.port(), 50, keys, vb);
        let f = fill(&o)?;
        let mut g = o.clone();
        g.mix = "get=1".parse()?;
        let nil = last_nil_fraction(&g)?;
        let fill_error_fraction = f.errors as f64 / keys as f64;
        ctx.row(json!({"figure": "vs_extstore", "round": round, "server": format!("redis {policy}"), "fill": f, "fill_error_fraction": fill_error_fraction, "served_fraction": 1.0 - nil}));
        let name = policy.replace('-', "_");
        ctx.record(&format!("redis_{name}_served_fraction"), 1.0 - nil);
        ctx.record(
            &format!("redis_{name}_fill_error_fraction"),
            fill_error_fraction,
        );
    }
    Ok(())
}
