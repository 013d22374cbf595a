//! The `redb` baseline (real disk): the same keys and values in a redb database with the same
//! cache bytes, and windows of small durable transactions (`Durability::Immediate`, one put of
//! a random key each) from [`Plan::redb_threads`] OS threads. redb runs one write transaction
//! at a time and makes each durable on its own commit (no group commit).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redb::{Database, ReadableDatabase, TableDefinition};

use super::drive::{histogram, key};
use super::plan::Plan;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");
/// Keys inserted per load transaction.
const LOAD_BATCH: u64 = 100_000;

/// What one redb window measured.
pub(super) struct RedbWindow {
    pub(super) txns: u64,
    pub(super) secs: f64,
    pub(super) latency: hdrhistogram::Histogram<u64>,
}

impl RedbWindow {
    pub(super) fn txns_per_s(&self) -> f64 {
        self.txns as f64 / self.secs.max(1e-9)
    }
}

/// Creates `path` afresh holding keys `0..plan.keys`.
pub(super) fn load(path: &Path, plan: &Plan, value: &[u8]) -> Result<Arc<Database>, String> {
    let started = Instant::now();
    let _ = std::fs::remove_file(path);
    let db = Database::builder()
        .set_cache_size(plan.cache_bytes as usize)
        .create(path)
        .map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut k = 0;
    while k < plan.keys {
        let txn = db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut table = txn.open_table(TABLE).map_err(|e| e.to_string())?;
            for k in k..(k + LOAD_BATCH).min(plan.keys) {
                table
                    .insert(&key(k)[..], value)
                    .map_err(|e| e.to_string())?;
            }
        }
        txn.commit().map_err(|e| e.to_string())?;
        k += LOAD_BATCH;
    }
    check_loaded(&db, plan)?;
    eprintln!(
        "redb: loaded {} keys in {:.1} s",
        plan.keys,
        started.elapsed().as_secs_f64()
    );
    Ok(Arc::new(db))
}

/// The last key must be there.
fn check_loaded(db: &Database, plan: &Plan) -> Result<(), String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let table = txn.open_table(TABLE).map_err(|e| e.to_string())?;
    let last = key(plan.keys.saturating_sub(1));
    match table.get(&last[..]).map_err(|e| e.to_string())? {
        Some(_) => Ok(()),
        None => Err("redb: the loaded keys are missing".into()),
    }
}

/// One durable put of `k`.
fn put(db: &Database, k: u64, value: &[u8]) -> Result<(), String> {
    let mut txn = db.begin_write().map_err(|e| e.to_string())?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| e.to_string())?;
    {
        let mut table = txn.open_table(TABLE).map_err(|e| e.to_string())?;
        table
            .insert(&key(k)[..], value)
            .map_err(|e| e.to_string())?;
    }
    txn.commit().map_err(|e| e.to_string())
}

/// A window of durable puts from the plan's threads, keys drawn from `seed`.
pub(super) fn window(
    db: &Arc<Database>,
    plan: &Plan,
    value: &Arc<Vec<u8>>,
    seed: u64,
) -> Result<RedbWindow, String> {
    let recording = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let latencies = Arc::new(Mutex::new(histogram()));
    let mut threads = Vec::new();
    for t in 0..plan.redb_threads {
        let (db, value, keys) = (db.clone(), value.clone(), plan.keys);
        let (recording, stop, latencies) = (recording.clone(), stop.clone(), latencies.clone());
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let mut rng = SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9));
            let mut mine = histogram();
            while !stop.load(Ordering::Acquire) {
                let started = Instant::now();
                put(&db, rng.gen_range(0..keys), &value)?;
                if recording.load(Ordering::Acquire) {
                    mine.saturating_record(started.elapsed().as_nanos().max(1) as u64);
                }
            }
            let _ = latencies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add(&mine);
            Ok(())
        }));
    }
    std::thread::sleep(plan.warmup);
    let started = Instant::now();
    recording.store(true, Ordering::Release);
    std::thread::sleep(plan.measure);
    recording.store(false, Ordering::Release);
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().map_err(|_| "a redb thread panicked")??;
    }
    let latency = latencies.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(RedbWindow {
        txns: latency.len(),
        secs,
        latency,
    })
}
