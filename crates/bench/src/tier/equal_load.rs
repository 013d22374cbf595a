//! `p99_vs_flash_sync`: `tamer` and `flash-sync` at equal load, half of `flash-sync`'s
//! closed-loop YCSB-C throughput, in alternating open-loop windows. YCSB-C only reads, so
//! both stores open the device read-only, side by side: one window's p99 at low load is at
//! the mercy of the host's millisecond stalls, the median of per-round ratios much less.

use tamer_store::Db;

use super::context::DeviceCtx;
use super::driver::{closed_loop, open_loop};
use super::jobs::{JobContext, Meter};
use super::measurement::{LoadPoint, Point};
use super::plan::{workload_seed, Config, Workload};

/// The equal-load rounds of `dev` after its closed-loop `points` (none without YCSB-C or a
/// `flash-sync` YCSB-C point): the open-loop windows, marked with `fraction` -0.5, in the
/// order run (per round, `tamer` first in even rounds, `flash-sync` first in odd ones).
pub(super) fn equal_load(dev: &DeviceCtx, points: &[Point]) -> Result<Vec<LoadPoint>, String> {
    if !dev.plan.workloads.contains(&Workload::YcsbC) {
        return Ok(Vec::new());
    }
    let sync_ops = points
        .iter()
        .find(|p| p.config == Config::FlashSync && p.workload == Workload::YcsbC)
        .map(|p| p.m.ops_per_s());
    let Some(sync_ops) = sync_ops.filter(|&o| o > 0.0) else {
        return Ok(Vec::new());
    };
    let rate = sync_ops / 2.0;
    let stores = [
        (Config::Tamer, open_read_only(dev, Config::Tamer)?),
        (Config::FlashSync, open_read_only(dev, Config::FlashSync)?),
    ];
    let contexts: Vec<JobContext> = stores
        .iter()
        .map(|(_, db)| dev.job_context(db, Meter::new(dev.plan.cores), dev.payloads.value.clone()))
        .collect();
    // Warm each cache first (a closed-loop pass).
    let seed = workload_seed(dev.options.seed, Workload::YcsbC);
    for ((_, db), ctx) in stores.iter().zip(&contexts) {
        closed_loop(db, dev.plan, Workload::YcsbC, ctx, seed)?;
    }
    let mut load = Vec::with_capacity(2 * dev.plan.equal_load_rounds);
    for round in 0..dev.plan.equal_load_rounds {
        // `tamer` first in even rounds, `flash-sync` first in odd ones (the figure pairs the
        // two configurations' windows by round, whatever their order).
        let mut order: Vec<_> = stores.iter().zip(&contexts).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for ((config, db), ctx) in order {
            let seed = seed ^ 0x5ca1e ^ (round as u64) << 20;
            load.push(window(dev, *config, db, ctx, rate, round, seed)?);
        }
    }
    for (config, db) in stores {
        db.close()
            .map_err(|e| format!("closing {}: {e}", config.name()))?;
    }
    Ok(load)
}

/// `config`'s store, opened read-only on `dev`'s device next to the other.
fn open_read_only(dev: &DeviceCtx, config: Config) -> Result<Db, String> {
    Db::open(&dev.path, dev.db_options(config).read_only(true))
        .map_err(|e| format!("reopening read-only: {e}"))
}

/// One open-loop window of `config` at `rate`, printed.
fn window(
    dev: &DeviceCtx,
    config: Config,
    db: &Db,
    ctx: &JobContext,
    rate: f64,
    round: usize,
    seed: u64,
) -> Result<LoadPoint, String> {
    let m = open_loop(db, dev.plan, Workload::YcsbC, ctx, rate, seed)?;
    println!(
        "  {:<5} {:<10} open loop at half of flash-sync's throughput ({:>7.0}/s), round {round}: p50 {:>9.1} µs  p99 {:>9.1} µs (from hand-over {:>8.1})  dropped {:.1} %  feeder late ≤ {:.0} µs",
        dev.target.name(),
        config.name(),
        rate,
        m.p50_us,
        m.p99_us,
        m.p99_from_submit_us,
        m.drop_fraction() * 100.0,
        m.feeder_max_late_us
    );
    Ok(LoadPoint {
        target: dev.target,
        config,
        workload: Workload::YcsbC,
        fraction: -0.5,
        rate,
        m,
    })
}
