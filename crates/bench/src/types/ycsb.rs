//! YCSB-E through tamer's embedded API (an ordered tree: `tree_entries` for a scan,
//! `tree_put` for an insert) against redis-server's sorted set over the network
//! (`ZRANGEBYLEX ... LIMIT 0 n` for a scan, `ZADD 0 member` for an insert; a member is the
//! record's key and value joined, so a scan returns the records as tamer's does). 95 % scans
//! of 1-100 records from a uniform start, 5 % inserts of new records; both in DRAM, both on
//! one core of the server CPU.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tamer_store::{Db, DbOptions, DeviceKind, Direction};

use super::client::{closed_loop, Conn};
use super::scenarios::{fresh_dir, redis};
use super::Ctx;

const VALUE_BYTES: usize = 100;
/// Jobs the embedded closed loop keeps running.
const JOBS: usize = 32;

fn key(n: u64) -> String {
    format!("user{n:012}")
}

fn value(n: u64) -> Vec<u8> {
    let mut v = format!("{n:020}").into_bytes();
    v.resize(VALUE_BYTES, b'v');
    v
}

/// The embedded store's closed loop: `JOBS` jobs of scans and inserts for `window`; ops/s.
#[expect(
    clippy::too_many_lines,
    reason = "one closed loop start to end: the store, the preload, the jobs and their counts, in order"
)]
fn embedded(ctx: &Ctx, window: Duration) -> Result<(f64, u64), String> {
    let plan = ctx.plan;
    let dir = fresh_dir(ctx, "ycsb-embedded")?;
    let options = DbOptions::new(plan.dram_cache_bytes)
        .device(DeviceKind::Uring)
        .cores(1)
        .pin(true)
        .durability(tamer_store::Durability::None);
    let db = Arc::new(Db::open(dir.join("ycsb.db"), options).map_err(|e| e.to_string())?);
    let tree = db.tree(b"usertable").map_err(|e| e.to_string())?;
    let records = plan.ycsb_records;
    for chunk in (0..records).collect::<Vec<_>>().chunks(1_000) {
        let chunk = chunk.to_vec();
        db.run(move |h| {
            h.transaction(|tx| {
                for &n in &chunk {
                    tx.tree_put_unlocked(tree, key(n).as_bytes(), &value(n))?;
                }
                Ok(())
            })
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(records));
    let done = Arc::new(AtomicU64::new(0));
    let run = |measure: bool| -> Result<(f64, u64), String> {
        stop.store(false, Ordering::Release);
        ops.store(0, Ordering::Release);
        done.store(0, Ordering::Release);
        let start = Instant::now();
        for j in 0..JOBS {
            let (h, stop, ops, next, done) = (
                db.handle(),
                stop.clone(),
                ops.clone(),
                next.clone(),
                done.clone(),
            );
            let seed = ctx.seed ^ (j as u64 + 1) << 20;
            db.runtime()
                .spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed);
                    while !stop.load(Ordering::Acquire) {
                        if rng.gen_bool(0.05) {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            let _ = h.tree_put(tree, key(n).as_bytes(), &value(n));
                        } else {
                            let n = rng.gen_range(0..records);
                            let len = rng.gen_range(1..=100);
                            let k = key(n);
                            let _ = h.tree_entries(
                                tree,
                                Bound::Included(k.as_bytes()),
                                Direction::Forward,
                                len,
                                &|_| true,
                            );
                        }
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Release);
                })
                .map_err(|_| "spawning a YCSB-E job".to_string())?;
        }
        std::thread::sleep(window);
        let n = ops.load(Ordering::Acquire);
        let seconds = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        while done.load(Ordering::Acquire) < JOBS as u64 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok((if measure { n as f64 / seconds } else { 0.0 }, n))
    };
    run(false)?;
    let measured = run(true)?;
    let db = Arc::try_unwrap(db).map_err(|_| "the store is still shared".to_string())?;
    db.close().map_err(|e| e.to_string())?;
    Ok(measured)
}

/// redis-server's closed loop (2 threads × 16 connections).
fn over_redis(ctx: &Ctx, window: Duration, warmup: Duration) -> Result<f64, String> {
    let plan = ctx.plan;
    let server = redis(ctx)?;
    let port = server.port();
    let mut c = Conn::connect(port)?;
    let records = plan.ycsb_records;
    let member = |n: u64| -> Vec<u8> {
        let mut m = key(n).into_bytes();
        m.push(b':');
        m.extend_from_slice(&value(n));
        m
    };
    let mut batch = Vec::new();
    for start in (0..records).step_by(500) {
        let mut cmd = vec![b"zadd".to_vec(), b"usertable".to_vec()];
        for n in start..(start + 500).min(records) {
            cmd.push(b"0".to_vec());
            cmd.push(member(n));
        }
        batch.push(cmd);
    }
    for b in batch.chunks(16) {
        if c.pipeline(b)? > 0 {
            return Err("redis refused a ZADD".into());
        }
    }
    let next = AtomicU64::new(records + 1_000_000_000);
    let make = |rng: &mut SmallRng| -> Vec<Vec<u8>> {
        if rng.gen_bool(0.05) {
            let n = next.fetch_add(1, Ordering::Relaxed);
            vec![
                b"zadd".to_vec(),
                b"usertable".to_vec(),
                b"0".to_vec(),
                member(n),
            ]
        } else {
            let n = rng.gen_range(0..records);
            let len: u32 = rng.gen_range(1..=100);
            vec![
                b"zrangebylex".to_vec(),
                b"usertable".to_vec(),
                format!("[{}", key(n)).into_bytes(),
                b"+".to_vec(),
                b"limit".to_vec(),
                b"0".to_vec(),
                len.to_string().into_bytes(),
            ]
        }
    };
    let cpu = Some(plan.load_cpu);
    closed_loop(port, 2, 16, warmup, cpu, ctx.seed, &make)?;
    let m = closed_loop(port, 2, 16, window, cpu, ctx.seed, &make)?;
    if m.errors > 0 {
        return Err(format!(
            "redis YCSB-E: {} errors, {:?}",
            m.errors, m.first_error
        ));
    }
    Ok(m.ops_per_s())
}

/// `types_vs_redis_ycsb_e`.
pub fn ycsb_e(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let (window, warmup) = (ctx.plan.window, ctx.plan.warmup);
    let (ours, redis_first) = if round.is_multiple_of(2) {
        let r = over_redis(ctx, window, warmup)?;
        (embedded(ctx, window)?, r)
    } else {
        let e = embedded(ctx, window)?;
        (e, over_redis(ctx, window, warmup)?)
    };
    ctx.row(json!({"figure": "ycsb_e", "round": round, "tamer_embedded_ops_per_s": ours.0, "redis_ops_per_s": redis_first}));
    ctx.ratio("types_vs_redis_ycsb_e", ours.0, redis_first);
    Ok(())
}
