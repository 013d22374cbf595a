//! tamer alone with its data far larger than its cache: the session workload at 30× the
//! cache, device reads per point operation on large collections, and a large sorted set in a
//! small cache.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::client::{args, closed_loop, info_field, Conn};
use super::scenarios::{fresh_dir, load_sessions, session_op, tamer};
use super::Ctx;

/// A point operation's request maker.
type MakeOp = Box<dyn Fn(&mut SmallRng) -> Vec<Vec<u8>>>;

/// Loads the large collections: `n` of each type, `elements` each (values of 100 bytes).
fn load_collections(port: u16, n: u64, elements: u64) -> Result<(), String> {
    let mut c = Conn::connect(port)?;
    let value = "v".repeat(100);
    for i in 0..n {
        let mut cmds = Vec::new();
        for start in (0..elements).step_by(500) {
            let range = start..(start + 500).min(elements);
            let mut h = args(&["hset", &format!("big:h{i}")]);
            let mut z = args(&["zadd", &format!("big:z{i}")]);
            let mut s = args(&["sadd", &format!("big:s{i}")]);
            let mut l = args(&["rpush", &format!("big:l{i}")]);
            for j in range {
                h.extend([format!("f{j}").into_bytes(), value.clone().into_bytes()]);
                z.extend([
                    format!("{}", (j * 7919) % 1_000_003).into_bytes(),
                    format!("m{j}-{value}").into_bytes(),
                ]);
                s.push(format!("m{j}-{value}").into_bytes());
                l.push(format!("e{j}-{value}").into_bytes());
            }
            cmds.extend([h, z, s, l]);
        }
        if c.pipeline(&cmds)? > 0 {
            return Err("an error reply while loading the collections".into());
        }
    }
    Ok(())
}

/// Device reads per operation of `ops` point operations made by `make` (one connection).
fn reads_per_op(
    port: u16,
    ops: u64,
    seed: u64,
    make: &dyn Fn(&mut SmallRng) -> Vec<Vec<u8>>,
) -> Result<f64, String> {
    let mut c = Conn::connect(port)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let before = info_field(&mut c, "tamer", "device_reads")?;
    for _ in 0..ops {
        c.call(&make(&mut rng))?;
    }
    let after = info_field(&mut c, "tamer", "device_reads")?;
    Ok((after - before) / ops as f64)
}

/// The session workload at 30× the cache and `cold_collection_reads_per_op`.
#[expect(
    clippy::too_many_lines,
    reason = "one scenario start to end: the server, the load, the measured reads and the teardown, in order"
)]
pub fn cold(ctx: &mut Ctx, _round: usize) -> Result<(), String> {
    let plan = ctx.plan.clone();
    let dir = fresh_dir(ctx, "tamer-cold")?;
    let cache = plan.cold_cache_bytes.to_string();
    let server = tamer(ctx, &dir, &["--durability", "none", "--cache-size", &cache])?;
    let port = server.port();
    let sessions = plan.cold_sessions();
    let started = Instant::now();
    load_sessions(port, sessions, ctx.seed)?;
    load_collections(port, plan.cold_collections, plan.cold_elements)?;
    let load_s = started.elapsed().as_secs_f64();
    let make = |rng: &mut SmallRng| session_op(rng, sessions);
    let cpu = Some(plan.load_cpu);
    closed_loop(port, 2, 16, plan.warmup, cpu, ctx.seed, &make)?;
    let m = closed_loop(port, 2, 16, plan.window, cpu, ctx.seed, &make)?;
    if m.errors > 0 {
        return Err(format!(
            "cold sessions: {} errors, {:?}",
            m.errors, m.first_error
        ));
    }
    ctx.record("cold_session_ops_per_s", m.ops_per_s());
    ctx.record("cold_session_p99_us", m.p(0.99));
    let (n, e) = (plan.cold_collections, plan.cold_elements);
    let pick = move |rng: &mut SmallRng| (rng.gen_range(0..n), rng.gen_range(0..e));
    let value = "v".repeat(100);
    let ops: [(&str, MakeOp); 4] = [
        (
            "hget",
            Box::new(move |rng| {
                let (i, j) = pick(rng);
                args(&["hget", &format!("big:h{i}"), &format!("f{j}")])
            }),
        ),
        (
            "zscore",
            Box::new({
                let value = value.clone();
                move |rng| {
                    let (i, j) = pick(rng);
                    args(&["zscore", &format!("big:z{i}"), &format!("m{j}-{value}")])
                }
            }),
        ),
        (
            "sismember",
            Box::new({
                let value = value.clone();
                move |rng| {
                    let (i, j) = pick(rng);
                    args(&["sismember", &format!("big:s{i}"), &format!("m{j}-{value}")])
                }
            }),
        ),
        (
            "lindex",
            Box::new(move |rng| {
                let (i, j) = pick(rng);
                args(&[
                    "lindex",
                    &format!("big:l{i}"),
                    if j % 2 == 0 { "0" } else { "-1" },
                ])
            }),
        ),
    ];
    let samples = 2_000u64.min(n * 50);
    let mut worst: f64 = 0.0;
    let mut per = serde_json::Map::new();
    for (name, make) in &ops {
        let r = reads_per_op(port, samples, ctx.seed, make.as_ref())?;
        ctx.record(&format!("cold_reads_per_op_{name}"), r);
        per.insert(name.to_string(), json!(r));
        worst = worst.max(r);
    }
    ctx.record("cold_collection_reads_per_op", worst);
    ctx.row(
        json!({"figure": "cold", "sessions": sessions, "cache_bytes": plan.cold_cache_bytes,
        "collections": n, "elements": e, "load_s": load_s, "session_ops_per_s": m.ops_per_s(),
        "session_p50_us": m.p(0.5), "session_p99_us": m.p(0.99), "reads_per_op": per}),
    );
    drop(server);
    Ok(())
}

/// Latencies of `samples` operations made by `make` on one connection, µs: (p50, p99).
fn latencies(
    port: u16,
    samples: u64,
    seed: u64,
    make: &dyn Fn(&mut SmallRng, u64) -> Vec<Vec<u8>>,
) -> Result<(f64, f64, f64), String> {
    let mut c = Conn::connect(port)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let before = info_field(&mut c, "tamer", "device_reads")?;
    for i in 0..samples {
        let cmd = make(&mut rng, i);
        let t = Instant::now();
        c.call(&cmd)?;
        let _ = h.record((t.elapsed().as_nanos() as u64).max(1));
    }
    let after = info_field(&mut c, "tamer", "device_reads")?;
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    Ok((us(0.5), us(0.99), (after - before) / samples as f64))
}

/// The large sorted set: loaded with a large cache, then measured in a small one.
#[expect(
    clippy::too_many_lines,
    reason = "one scenario start to end: the load with a large cache, the reopen in a small one and the measured commands, in order"
)]
pub fn big_zset(ctx: &mut Ctx, _round: usize) -> Result<(), String> {
    let plan = ctx.plan.clone();
    let dir = fresh_dir(ctx, "tamer-big-zset")?;
    let load_cache = plan.big_load_cache_bytes.to_string();
    let mut server = tamer(
        ctx,
        &dir,
        &["--durability", "none", "--cache-size", &load_cache],
    )?;
    let members = plan.big_zset;
    let started = Instant::now();
    {
        let mut c = Conn::connect(server.port())?;
        let mut batch = Vec::new();
        for start in (0..members).step_by(1_000) {
            let mut cmd = args(&["zadd", "big"]);
            for i in start..(start + 1_000).min(members) {
                cmd.push(
                    format!("{}", (i.wrapping_mul(2_654_435_761)) % 1_000_000_007).into_bytes(),
                );
                cmd.push(format!("member:{i}").into_bytes());
            }
            batch.push(cmd);
            if batch.len() == 8 {
                if c.pipeline(&batch)? > 0 {
                    return Err("an error reply while loading the sorted set".into());
                }
                batch.clear();
            }
        }
        if c.pipeline(&batch)? > 0 {
            return Err("an error reply while loading the sorted set".into());
        }
        let card = c.call(&args(&["zcard", "big"]))?;
        if card != format!(":{members}\r\n").into_bytes() {
            return Err(format!("ZCARD: {}", String::from_utf8_lossy(&card)));
        }
        c.send(&args(&["shutdown"]))?;
    }
    let load_s = started.elapsed().as_secs_f64();
    server.wait_exit(Duration::from_secs(600))?;
    drop(server);
    let cache = plan.big_cache_bytes.to_string();
    let server = tamer(ctx, &dir, &["--cache-size", &cache])?;
    let port = server.port();
    let samples = plan.big_samples;
    let zadd = |rng: &mut SmallRng, i: u64| {
        args(&[
            "zadd",
            "big",
            &format!("{}", rng.gen_range(0..1_000_000_007u64)),
            &format!("new:{i}"),
        ])
    };
    let zrank = |rng: &mut SmallRng, _| {
        args(&[
            "zrank",
            "big",
            &format!("member:{}", rng.gen_range(0..members)),
        ])
    };
    let zrange = |rng: &mut SmallRng, _| {
        let r = rng.gen_range(0..members - 10);
        args(&[
            "zrange",
            "big",
            &r.to_string(),
            &(r + 9).to_string(),
            "withscores",
        ])
    };
    let mut row = serde_json::Map::new();
    for (name, make) in [
        ("zadd", &zadd as &dyn Fn(&mut SmallRng, u64) -> Vec<Vec<u8>>),
        ("zrank", &zrank),
        ("zrange", &zrange),
    ] {
        let (p50, p99, reads) =
            latencies(port, samples, ctx.seed, make).map_err(|e| format!("{name}: {e}"))?;
        ctx.record(&format!("big_zset_{name}_p50_us"), p50);
        ctx.record(&format!("big_zset_{name}_p99_us"), p99);
        row.insert(
            name.into(),
            json!({"p50_us": p50, "p99_us": p99, "device_reads_per_op": reads}),
        );
    }
    ctx.row(
        json!({"figure": "big_zset", "members": members, "cache_bytes": plan.big_cache_bytes,
        "load_cache_bytes": plan.big_load_cache_bytes, "load_s": load_s, "ops": row}),
    );
    ctx.note(format!(
        "big_zset: {members} members loaded in {load_s:.0} s (cache {} MiB, --durability none), \
         measured after a restart with a {} MiB cache and --durability commit, one connection",
        plan.big_load_cache_bytes >> 20,
        plan.big_cache_bytes >> 20
    ));
    drop(server);
    Ok(())
}
