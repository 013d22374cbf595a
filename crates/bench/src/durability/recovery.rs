//! Recovery time after a power loss (emulated device): a `lad` store on the fault-injecting
//! emulator ([`tamer_device::FaultState`]) takes updates at 256 in flight for
//! [`Plan::recovery_run`]; then the power goes, the store is dropped without a close (the
//! process dies with the power, as in the store's crash tests), and a store is opened on the
//! crash image, every unflushed write kept (a drive with power-loss protection). Reported:
//! the open's time and what [`Db::recovery_stats`] says recovery redid.

use std::sync::Arc;
use std::time::Instant;

use tamer_device::{Fate, FaultPlan, FaultState};
use tamer_store::{Db, DeviceKind, RecoveryStats, WriteBatch, MAX_DELTAS};

use super::drive::window;
use super::plan::{Config, Plan, Point, Workload};
use super::stores::{emulator_config, seeded_value};
use crate::BenchOptions;

/// Keys of the recovery store at most (it is loaded with durable puts).
const RECOVERY_KEYS_MAX: u64 = 200_000;

/// What the reopen after the crash took and redid.
pub(super) struct Recovery {
    pub(super) open_ms: f64,
    pub(super) stats: RecoveryStats,
    pub(super) txns_before_crash: u64,
}

/// Runs the crash and the reopen.
pub(super) fn measure(plan: &Plan, options: &BenchOptions) -> Result<Recovery, String> {
    let plan = Plan {
        keys: plan.keys.min(RECOVERY_KEYS_MAX),
        warmup: std::time::Duration::ZERO,
        measure: plan.recovery_run,
        settle: false,
        ..plan.clone()
    };
    let config = emulator_config(&plan, options.seed);
    let model = config.clone().build().map_err(|e| e.to_string())?;
    let state = FaultState::new(model, FaultPlan::default()).map_err(|e| e.to_string())?;
    let path = options.data_dir.join("durability-recovery.store");
    let value = seeded_value(options.seed ^ 0x7ec0);
    let db = Db::open(
        &path,
        plan.store_options(Config::Lad, DeviceKind::Faulty(state.clone())),
    )
    .map_err(|e| format!("opening the recovery store: {e}"))?;
    load(&db, &plan, &value)?;
    let point = Point {
        workload: Workload::Update,
        in_flight: 256,
    };
    let w = window(&db, None, &plan, point, &value, options.seed ^ 0xc4a5)?;
    eprintln!("recovery: the power goes now (the store's errors that follow are expected)");
    state.power_loss();
    drop(db);
    let fates = vec![Fate::Keep; state.counts().unflushed_writes];
    let image = state
        .crash_model(config, &fates)
        .map_err(|e| format!("the crash image: {e}"))?;
    let started = Instant::now();
    let db = Db::open(
        &path,
        plan.store_options(Config::Lad, DeviceKind::Model(image)),
    )
    .map_err(|e| format!("reopening after the crash: {e}"))?;
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let stats = db.recovery_stats();
    db.close().map_err(|e| e.to_string())?;
    Ok(Recovery {
        open_ms,
        stats,
        txns_before_crash: w.txns,
    })
}

/// The recovery store's keys, in durable batches that each fit one staging-queue page.
fn load(db: &Db, plan: &Plan, value: &Arc<Vec<u8>>) -> Result<(), String> {
    let (keys, value) = (plan.keys, value.clone());
    db.run(move |h| {
        let mut k = 0;
        while k < keys {
            let mut batch = WriteBatch::new();
            for k in k..(k + MAX_DELTAS as u64).min(keys) {
                batch.put(&super::drive::key(k), &value);
            }
            h.write(batch)?;
            k += MAX_DELTAS as u64;
        }
        h.sync()
    })
    .and_then(|r| r)
    .map_err(|e| format!("loading the recovery store: {e}"))
}
