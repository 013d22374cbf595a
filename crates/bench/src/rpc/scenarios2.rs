//! The server-side figures of a round: single queue vs partitioned (measured and simulated),
//! overload goodput, durable SETs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use super::scenarios::{base, fresh_dir, redis, tamer};
use super::servers::{free_port, Launch, Server};
use super::sim::{self, Queues, SimSpec};
use super::{slo, Ctx};
use crate::load;

/// The simulation's p99 objective, in mean service times (NeBuLa's).
pub const SIM_SLO_MEANS: f64 = 10.0;

/// Of the arrivals in the skewed run, the share of the hot connections.
pub const HOT_SHARE: f64 = 0.5;

/// `single_vs_partitioned_at_slo`: tamer on both CPUs (`--cores 2`), `--dispatch shared` vs
/// `partitioned`, the flash data set of [`super::scenarios::vs_extstore`] (reopened, cache =
/// the budget), 16 connections of which the first carries half the GETs; then the
/// simulation at `plan.sim_cores`, with the shared run's low-load latencies as service times.
pub fn partitioned(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let dir = ctx.dir.join("tamer-ext");
    if !dir.join("tamer.db").exists() {
        return Err("single_vs_partitioned: no filled store (vs_extstore failed)".into());
    }
    let cores = 2;
    let mut modes = ["shared", "partitioned"];
    modes.rotate_left(round % 2);
    let mut at = [0.0; 2];
    let mut service_ns = Vec::new();
    for mode in modes {
        let cache = ctx.plan.budget_bytes.to_string();
        let flags = [
            "--durability",
            "none",
            "--cores",
            "2",
            "--dispatch",
            mode,
            "--cache-size",
            &cache,
        ];
        let launch = Launch::tamer(free_port()?, &dir, &flags).pinned("0,1");
        let server = Server::start(launch)?;
        let mut o = base(
            ctx,
            server.port(),
            8 * cores,
            ctx.plan.ext_keys(),
            ctx.plan.ext_value_bytes,
        );
        o.mix = "get=1".parse()?;
        o.hot_connections = (cores / 4).max(1);
        o.hot_share = HOT_SHARE;
        let r = slo::search(&o, ctx.slo_ns())?;
        ctx.row(json!({"figure": "single_vs_partitioned", "round": round, "dispatch": mode, "search": r}));
        if mode == "shared" {
            service_ns = service_probe(&o)?;
        }
        at[usize::from(mode != "shared")] = r.at_slo_per_s;
        super::scenarios::terminate(server);
    }
    ctx.ratio("single_vs_partitioned_at_slo", at[0], at[1]);
    simulate(ctx, round, service_ns)
}

/// Service times for the simulation: one connection, one request at a time (closed loop),
/// so no request queues behind another at the server; each latency is the request's service
/// plus the round trip. The generator spins while its request is in flight, so no wake-up
/// of its own is in them.
fn service_probe(o: &load::LoadOptions) -> Result<Vec<u64>, String> {
    let mut probe = o.clone();
    probe.connections = 1;
    probe.pipeline = 1;
    probe.batch = 1;
    probe.rate_per_s = None;
    probe.hot_connections = 0;
    Ok(slo::samples(&load::run(&probe)?))
}

fn simulate(ctx: &mut Ctx, round: usize, service_ns: Vec<u64>) -> Result<(), String> {
    if service_ns.is_empty() {
        return Err("single_vs_partitioned: no service-time samples".into());
    }
    let mean_us = service_ns.iter().sum::<u64>() as f64 / service_ns.len() as f64 / 1e3;
    // NeBuLa's objective: 10 × the mean service time (the bench's SLO can be below the
    // measured service times' own tail on a noisy machine).
    let slo_ns = (SIM_SLO_MEANS * mean_us * 1e3) as u64;
    for &cores in &ctx.plan.sim_cores.clone() {
        let spec = SimSpec::skewed(
            cores,
            HOT_SHARE,
            service_ns.clone(),
            ctx.seed ^ cores as u64,
        );
        let shared = sim::max_rate_at_slo(&spec, Queues::Shared, slo_ns);
        let part = sim::max_rate_at_slo(&spec, Queues::Partitioned, slo_ns);
        ctx.row(json!({"figure": "single_vs_partitioned_sim", "round": round, "cores": cores, "service_mean_us": mean_us, "slo_us": slo_ns / 1_000, "service_samples": service_ns.len(), "shared_per_s": shared, "partitioned_per_s": part}));
        ctx.ratio(
            &format!("single_vs_partitioned_at_slo_sim{cores}"),
            shared,
            part,
        );
    }
    Ok(())
}

/// `overload_goodput_ratio`: the closed-loop capacity C (50 connections × 4, GET 90 / SET
/// 10), then the open loop at 2 C with up to 64 requests in flight per connection (so the
/// server, not the generator, holds the queue) for `plan.overload`: goodput (answers that
/// are not `-BUSY` or errors, within the SLO) ÷ C. tamer with `--slo-us`; redis-server beside.
pub fn overload(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let mut names = ["tamer", "redis"];
    names.rotate_left(round % 2);
    for name in names {
        let server = match name {
            "tamer" => {
                let dir = fresh_dir(ctx, "tamer-overload")?;
                let slo = ctx.plan.slo_us.to_string();
                tamer(
                    ctx,
                    &dir,
                    &[
                        "--durability",
                        "none",
                        "--cores",
                        "1",
                        "--slo-us",
                        &slo,
                        "--cache-size",
                        "256mb",
                    ],
                )?
            }
            _ => redis(ctx, &[])?,
        };
        let mut o = base(ctx, server.port(), 50, ctx.plan.keys, ctx.plan.value_bytes);
        super::scenarios::fill(&o)?;
        o.pipeline = 4;
        let capacity = load::run(&o)?.throughput_per_s;
        o.pipeline = 64;
        o.rate_per_s = Some(2.0 * capacity);
        o.duration = ctx.plan.overload;
        o.progress = true;
        let (r, max_rss) = with_rss_sampled(&server, || load::run(&o))?;
        let mut server = server;
        let alive = server.alive();
        let goodput = r.goodput_per_s(ctx.slo_ns());
        ctx.row(json!({"figure": "overload", "round": round, "server": name, "capacity_per_s": capacity, "goodput_per_s": goodput, "max_rss_bytes": max_rss, "alive": alive, "report": r}));
        let suffix = if name == "tamer" { "" } else { "_redis" };
        ctx.ratio(
            &format!("overload_goodput_ratio{suffix}"),
            goodput,
            capacity,
        );
        ctx.record(
            &format!("overload_admitted_p99_us{suffix}"),
            r.admitted_latency.p99_us,
        );
        ctx.record(
            &format!("overload_busy_fraction{suffix}"),
            r.busy as f64 / r.answered.max(1) as f64,
        );
        ctx.record(
            &format!("overload_max_rss_mib{suffix}"),
            max_rss as f64 / (1 << 20) as f64,
        );
        ctx.record(
            &format!("overload_survived{suffix}"),
            if alive { 1.0 } else { 0.0 },
        );
    }
    Ok(())
}

/// Runs `f` while a thread samples the server's resident memory every 100 ms; the maximum.
fn with_rss_sampled<T>(
    server: &Server,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<(T, u64), String> {
    let (stop, max) = (AtomicBool::new(false), AtomicU64::new(0));
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                max.fetch_max(server.rss_bytes().unwrap_or(0), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let out = f();
        stop.store(true, Ordering::Relaxed);
        out
    })?;
    Ok((out, max.load(Ordering::Relaxed)))
}

/// `durable_set_vs_redis_aof`: 50 connections closed loop, SETs: tamer `--durability commit`
/// vs redis-server `--appendonly yes --appendfsync always`, both on the data directory's disk.
pub fn durable(ctx: &mut Ctx, round: usize) -> Result<(), String> {
    let mut names = ["tamer", "redis"];
    names.rotate_left(round % 2);
    let mut at = [0.0; 2];
    for name in names {
        let server = match name {
            "tamer" => {
                let dir = fresh_dir(ctx, "tamer-durable")?;
                tamer(
                    ctx,
                    &dir,
                    &[
                        "--durability",
                        "commit",
                        "--cores",
                        "1",
                        "--cache-size",
                        "256mb",
                    ],
                )?
            }
            _ => {
                let dir = fresh_dir(ctx, "redis-aof")?;
                let dir = dir.display().to_string();
                redis(
                    ctx,
                    &[
                        "--appendonly",
                        "yes",
                        "--appendfsync",
                        "always",
                        "--dir",
                        &dir,
                    ],
                )?
            }
        };
        let mut o = base(ctx, server.port(), 50, ctx.plan.keys, ctx.plan.value_bytes);
        o.mix = "set=1".parse()?;
        o.duration = ctx.plan.durable;
        let r = load::run(&o)?;
        ctx.row(json!({"figure": "durable_set", "round": round, "server": name, "report": r}));
        at[usize::from(name != "tamer")] = if r.errors == 0 {
            r.throughput_per_s
        } else {
            f64::NAN
        };
    }
    ctx.ratio("durable_set_vs_redis_aof", at[0], at[1]);
    Ok(())
}
