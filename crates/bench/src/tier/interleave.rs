//! `tiered_vs_dram_interleaved` (emulated device): a second store, `tamer`, on a second
//! emulated device loaded with the same records, measured in closed-loop windows that
//! alternate with the open, warm `dram` store, each pair with the same seeded operations.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::EmulatorModel;
use tamer_store::{Db, DeviceKind};

use super::context::DeviceCtx;
use super::driver::{closed_loop, load};
use super::jobs::{JobContext, Meter};
use super::plan::{options_for, workload_seed, Config, Workload};

/// The second device, built like the first (`dev.model`) and loaded by [`load_second`], when
/// the plan has interleaved rounds and `dev` is the emulated device; `None` otherwise.
pub(super) fn prepare_second(dev: &DeviceCtx) -> Result<Option<Arc<EmulatorModel>>, String> {
    let (Some(model), true) = (&dev.model, dev.plan.interleave_rounds > 0) else {
        return Ok(None);
    };
    let built = model
        .config()
        .clone()
        .build()
        .map_err(|e| format!("second emulated device: {e}"))?;
    load_second(&built, dev)?;
    Ok(Some(built))
}

/// The interleaved windows' second store on `second`, as `tamer` (3 % cache, cleaner).
fn open_second(second: &Arc<EmulatorModel>, dev: &DeviceCtx) -> Result<Db, String> {
    Db::open(
        &dev.path,
        options_for(
            Config::Tamer,
            dev.plan,
            DeviceKind::Model(second.clone()),
            dev.options.poll,
            dev.pages,
        ),
    )
    .map_err(|e| format!("opening the second store: {e}"))
}

/// Loads the second store of the interleaved windows onto `second` (a device like `dram`'s)
/// through `tamer`'s own small cache, and closes it. It runs before `dram` is loaded: a large region written after `dram`'s cache can slow
/// `dram` for minutes, which would flatter `tamer`. (A copy of `dram`'s device would be a store not closed cleanly, which reopens
/// with no free space.)
fn load_second(second: &Arc<EmulatorModel>, dev: &DeviceCtx) -> Result<(), String> {
    let started = Instant::now();
    let loader = open_second(second, dev)?;
    load(&loader, dev.plan, &dev.payloads.value, &dev.payloads.row)?;
    loader
        .close()
        .map_err(|e| format!("closing the second store after its load: {e}"))?;
    eprintln!(
        "emu: loaded the second store (for the interleaved windows) through a {} MiB cache in {:.1} s",
        dev.plan.cache_bytes >> 20,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every workload on `dram` (the open, warm `db`) and on `tamer` (the second store, on
/// `second`, loaded with the same records by [`load_second`]) in alternating closed-loop
/// windows, each pair with the same seeded operations: the machine's slow drift cannot favour
/// either side, and the two stores take the same writes, so they hold the same data
/// throughout. Returns `tamer` ÷ `dram` per round, per workload.
pub(super) fn interleave(
    dev: &DeviceCtx,
    dram: &Db,
    second: &Arc<EmulatorModel>,
) -> Result<Vec<(Workload, Vec<f64>)>, String> {
    let tamer = open_second(second, dev)?;
    check_loaded(dev, &tamer)?;
    let mut out = Vec::with_capacity(dev.plan.workloads.len());
    for &workload in &dev.plan.workloads {
        out.push((workload, rounds(dev, dram, &tamer, workload)?));
    }
    tamer
        .close()
        .map_err(|e| format!("closing the second store: {e}"))?;
    Ok(out)
}

/// The second store must hold the loaded records (an empty store would make it fast and
/// wrong): 64 seeded keys.
fn check_loaded(dev: &DeviceCtx, tamer: &Db) -> Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(dev.options.seed ^ 0x5a4e);
    for _ in 0..64 {
        let key = rng.gen_range(0..dev.plan.records());
        let found = tamer
            .get(&key.to_be_bytes())
            .map_err(|e| format!("second store: {e}"))?;
        if found.is_none() {
            return Err(format!("the second store misses record {key}"));
        }
    }
    Ok(())
}

/// `workload`'s rounds: `dram` and `tamer` in alternating order, with one seed per round;
/// `tamer` ÷ `dram` each.
fn rounds(dev: &DeviceCtx, dram: &Db, tamer: &Db, workload: Workload) -> Result<Vec<f64>, String> {
    let plan = dev.plan;
    let ctx = |db: &Db| -> JobContext {
        dev.job_context(db, Meter::new(plan.cores), dev.payloads.of(workload))
    };
    let (dram_ctx, tamer_ctx) = (ctx(dram), ctx(tamer));
    let mut ratios = Vec::with_capacity(plan.interleave_rounds);
    for round in 0..plan.interleave_rounds {
        let seed = workload_seed(dev.options.seed, workload) ^ (0x1e4e + round as u64);
        // `dram` first in even rounds, `tamer` first in odd ones: a drift within a round
        // favours neither.
        let (d, t) = if round % 2 == 0 {
            let d = closed_loop(dram, plan, workload, &dram_ctx, seed)?;
            (d, closed_loop(tamer, plan, workload, &tamer_ctx, seed)?)
        } else {
            let t = closed_loop(tamer, plan, workload, &tamer_ctx, seed)?;
            (closed_loop(dram, plan, workload, &dram_ctx, seed)?, t)
        };
        if d.errors + t.errors > 0 {
            return Err(format!(
                "interleaved {} round {round}: {} dram and {} tamer operations failed",
                workload.name(),
                d.errors,
                t.errors
            ));
        }
        let r = t.ops_per_s() / d.ops_per_s().max(1e-9);
        println!(
            "  emu   interleaved {:<6} round {round}: dram {:>9.0} ops/s  tamer {:>9.0} ops/s (hits {:.3})  tamer/dram {r:.3}",
            workload.name(),
            d.ops_per_s(),
            t.ops_per_s(),
            t.hit_ratio()
        );
        ratios.push(r);
    }
    Ok(ratios)
}
