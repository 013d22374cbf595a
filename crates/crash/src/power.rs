//! Power loss on the fault-injecting device (`tamer_device::FaultState`): the power goes at a
//! seeded write, each write not covered by a completed flush is kept, dropped or torn at
//! 512-byte sectors by a seeded choice, and the store reopened on what the medium holds is
//! checked. For one seed in four the reopening itself loses power at a seeded write (a second
//! crash, during recovery) and the store is reopened once more: it must then hold exactly what
//! an uninterrupted recovery of the first crash holds.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::{CrashPoint, EmulatorConfig, FaultPlan, FaultState};
use tamer_store::{
    CheckReport, Db, DbError, DbHandle, DbOptions, DeviceKind, Direction, Durability, StripePart,
    Tx, QUEUE_PAGES_MIN,
};

/// A store's contents: every (key, value).
pub type Model = HashMap<Vec<u8>, Vec<u8>>;

/// The index hash key of harness stores: reproducible bucket layouts, so a seed replays.
pub const HASH_KEY: [u64; 2] = [0x7a3e_0009, 0x5eed_0003];

/// What one power-loss point came to (when its checks passed).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// The operation count the store came back at (single-threaded workload).
    pub back_at: usize,
    /// Whether the recovery lost power too.
    pub second_crash: bool,
}

/// Deterministic value bytes for (key, version).
pub fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut x = version.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.len() as u64;
    for &b in key {
        x = (x ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> (i % 8)) as u8
        })
        .collect()
}

/// The tree the single-threaded workload's tree operations change.
pub const TREE_NAME: &[u8] = b"crash-tree";
/// Model keys of that tree's entries start with this.
pub const TREE_PREFIX: &[u8] = b"T:";

/// A tree entry's key in the model.
pub fn tree_model_key(key: &[u8]) -> Vec<u8> {
    [TREE_PREFIX, key].concat()
}

/// Every (key, value) of a store, by a full scan of its keys and of the tree [`TREE_NAME`]
/// (its entries under [`TREE_PREFIX`]; absent and empty are the same); a record that does not
/// read is an error, as is a tree whose count differs from its scan.
pub fn contents(db: &Db) -> Result<Model, String> {
    let mut model = Model::new();
    for item in db.cursor() {
        let (k, v) = item.map_err(|e| format!("the scan: {e}"))?;
        model.insert(k, v);
    }
    let tree = db
        .find_tree(TREE_NAME)
        .map_err(|e| format!("the catalog: {e}"))?;
    if let Some(tree) = tree {
        let mut n = 0u64;
        for item in db.range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Forward) {
            let (k, v) = item.map_err(|e| format!("the tree scan: {e}"))?;
            model.insert(tree_model_key(&k), v);
            n += 1;
        }
        let len = db
            .tree_len(tree)
            .map_err(|e| format!("the tree's count: {e}"))?;
        ensure!(
            len == n,
            "the tree counts {len} entries, its scan found {n}"
        );
    }
    Ok(model)
}

/// Runs `jobs` on the store's user-level threads concurrently; their results in order. A job
/// that panics makes this panic (once the others are done).
pub fn run_parallel<R: Send + 'static>(
    db: &Db,
    jobs: Vec<Box<dyn FnOnce(DbHandle) -> R + Send>>,
) -> Vec<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    let n = jobs.len();
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        let h = db.handle();
        db.runtime()
            .spawn(move || {
                let _ = tx.send((i, job(h)));
            })
            .unwrap_or_else(|_| panic!("spawn"));
    }
    // Only the jobs hold senders: a job that panics drops its own, so `recv` fails once the
    // others are done instead of waiting forever.
    drop(tx);
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (i, r) = rx.recv().expect("a job died (panicked: see above)");
        out[i] = Some(r);
    }
    out.into_iter().map(|r| r.expect("every job")).collect()
}

fn emulator(capacity_bytes: u64) -> EmulatorConfig {
    EmulatorConfig::with_latency_ns(1_000).capacity_bytes(capacity_bytes)
}

/// Draws whether this seed's recovery crashes too, and at which of its writes.
fn second_crash(rng: &mut SmallRng) -> Option<u64> {
    if rng.gen_ratio(1, 4) {
        Some(rng.gen_range(1..16))
    } else {
        None
    }
}

/// The store's device on `parts`: the one part, or a stripe of them in units of
/// `unit_blocks` pages.
pub fn stripe_of(mut parts: Vec<DeviceKind>, unit_blocks: u64) -> DeviceKind {
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    DeviceKind::Striped {
        parts: parts
            .into_iter()
            .map(|device| StripePart {
                path: "unused".into(),
                device,
            })
            .collect(),
        unit_blocks,
    }
}

/// [`stripe_of`] in units of 2 pages, so that a group commit's pages fall on every part.
pub fn device_of(parts: Vec<DeviceKind>) -> DeviceKind {
    stripe_of(parts, 2)
}

/// Reopens after the power loss every part in `states` had (one part, or a stripe), with
/// seeded fates for each part's unflushed writes, and checks the store (`check` clean). With
/// `second = Some(n)` the reopening first runs on fault devices of which the first loses power
/// at its `n`-th write (then all), and the store reopened after that must hold exactly what an
/// uninterrupted reopening holds.
pub fn recover(
    states: &[Arc<FaultState>],
    seed: u64,
    options: &dyn Fn(DeviceKind) -> DbOptions,
    second: Option<u64>,
) -> Result<(Db, CheckReport), String> {
    for state in states {
        state.power_loss();
    }
    let db = match second {
        None => Db::open("unused", options(device_of(crash_images(states, seed))))
            .map_err(|e| format!("reopening after the crash: {e}"))?,
        Some(at) => recover_twice(states, seed, options, at)?,
    };
    let report = db.check().map_err(|e| format!("check: {e}"))?;
    ensure!(report.is_clean(), "check after the crash: {report:?}");
    Ok((db, report))
}

/// What each part's medium holds after its power loss, with seeded fates for its unflushed
/// writes (each part's own, from `seed`).
fn crash_images(states: &[Arc<FaultState>], seed: u64) -> Vec<DeviceKind> {
    states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let fates = state.seeded_fates(seed ^ (i as u64) << 56);
            DeviceKind::Model(
                state
                    .crash_model(EmulatorConfig::with_latency_ns(1_000), &fates)
                    .expect("a crash image"),
            )
        })
        .collect()
}

/// [`recover`] with a second power loss at recovery write `at`: the store reopened after both
/// must hold what an uninterrupted reopening of the first crash holds.
fn recover_twice(
    states: &[Arc<FaultState>],
    seed: u64,
    options: &dyn Fn(DeviceKind) -> DbOptions,
    at: u64,
) -> Result<Db, String> {
    let clean = Db::open("unused", options(device_of(crash_images(states, seed))))
        .map_err(|e| format!("reopening after the crash: {e}"))?;
    let expected = contents(&clean)?;
    clean.close().map_err(|e| format!("closing: {e}"))?;
    let during = recovering_devices(states, seed, at);
    let faulty = during
        .iter()
        .map(|d| DeviceKind::Faulty(d.clone()))
        .collect();
    if let Ok(db) = Db::open("unused", options(device_of(faulty))) {
        for d in &during {
            d.power_loss();
        }
        let _ = db.close();
    }
    for d in &during {
        d.power_loss();
    }
    let db = Db::open(
        "unused",
        options(device_of(crash_images(&during, seed ^ 0x5ec0_0d00))),
    )
    .map_err(|e| format!("reopening after a second crash at recovery write {at}: {e}"))?;
    let got = contents(&db)?;
    ensure!(
        got == expected,
        "after a second crash at recovery write {at}, the store holds {} keys, not the {} an \
         uninterrupted recovery holds (or other values)",
        got.len(),
        expected.len()
    );
    Ok(db)
}

/// Fault devices on each part's crash image (the same fates as [`crash_images`]) for the
/// recovery to run on: the first loses power at its `at`-th write, the others never.
fn recovering_devices(states: &[Arc<FaultState>], seed: u64, at: u64) -> Vec<Arc<FaultState>> {
    states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let crash = if i == 0 {
                CrashPoint::AfterWrites(at)
            } else {
                CrashPoint::Never
            };
            let plan = FaultPlan {
                crash,
                ..FaultPlan::default()
            };
            let fates = state.seeded_fates(seed ^ (i as u64) << 56);
            state
                .after_crash(EmulatorConfig::with_latency_ns(1_000), &fates, plan)
                .expect("a fault device")
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The single-threaded workload against a reference model.

/// One operation of the single-threaded workload.
#[derive(Clone, Debug)]
pub enum SingleOp {
    /// Puts (key, value length, version): the value is [`value_for`] them.
    Put(Vec<u8>, usize, u64),
    /// Deletes a key.
    Delete(Vec<u8>),
    /// `Db::flush`: a checkpoint.
    Flush,
    /// A put in the tree [`TREE_NAME`] (made by the first tree operation), as [`SingleOp::Put`].
    TreePut(Vec<u8>, usize, u64),
    /// A delete in the tree [`TREE_NAME`].
    TreeDelete(Vec<u8>),
}

/// The options of the single-threaded workload's store on `device`.
pub fn single_options(device: DeviceKind) -> DbOptions {
    DbOptions::new(512 << 10)
        .device(device)
        .cores(1)
        .threads_per_core(4)
        .max_directory_depth(8)
        // A one-slot fixed region: every doubling past depth 1 allocates a segment.
        .pinned_directory_depth(1)
        .max_value_bytes(16 << 10)
        .cleaner(false)
        .warm_index(false)
        .hash_key(HASH_KEY)
}

/// `n` seeded operations: puts of small values and some extents over 1,200 keys (enough to
/// split buckets and double the directory), deletes, a flush every 100 or so (checkpoints
/// also run when too many index pages or freed pages wait).
/// The durability mode of a single-threaded seed: `Commit` for half the seeds, `None` and
/// `Periodic` (whose timer does not run here: the cleaner is off) for a quarter each. Drawn
/// from its own generator so the seed's other draws stay as they were.
pub fn single_durability(seed: u64) -> Durability {
    match SmallRng::seed_from_u64(seed ^ 0xd0_7a61).gen_range(0..4) {
        0 => Durability::None,
        1 => Durability::Periodic(Duration::from_millis(1)),
        _ => Durability::Commit,
    }
}

/// The staging queue sizes a seed's store is made with and reopened with. A third of the
/// seeds make it with the smallest queues ([`QUEUE_PAGES_MIN`] pages, not the 128 the device's
/// size gives: another region, and a half-full trigger at 8 pages, though the single-threaded
/// workload's flushes restart the queue before it gets there; the concurrent one's batches
/// are larger). A third reopen it asking for another size (the queues move at open, after
/// recovery; with a second crash, that move is crashed). Drawn from their own generator so the seed's
/// other draws stay as they were.
pub fn staging_queue_pages(seed: u64) -> (Option<u64>, Option<u64>) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e_e9e5);
    let made = rng.gen_ratio(1, 3).then_some(QUEUE_PAGES_MIN);
    let reopened = rng
        .gen_ratio(1, 3)
        .then_some(if made.is_some() { 48 } else { QUEUE_PAGES_MIN });
    (made, reopened)
}

/// The single-threaded workload of `seed`: `n` seeded operations.
pub fn single_workload(seed: u64, n: usize) -> Vec<SingleOp> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let k = rng.gen_range(0..1_200u32);
            let key = k.to_be_bytes().to_vec();
            // Tree keys of 6 to 126 bytes: leaves split after a few dozen entries.
            let tree_key = || format!("t{k:05}{}", "p".repeat(k as usize % 5 * 30)).into_bytes();
            match rng.gen_range(0..100) {
                0 => SingleOp::Flush,
                1..=12 => SingleOp::Delete(key),
                13..=15 => SingleOp::Put(key, rng.gen_range(5_000..12_000), rng.gen()),
                16..=59 => SingleOp::Put(key, rng.gen_range(0..400), rng.gen()),
                60..=71 => SingleOp::TreeDelete(tree_key()),
                72..=73 => SingleOp::TreePut(tree_key(), rng.gen_range(5_000..12_000), rng.gen()),
                _ => SingleOp::TreePut(tree_key(), rng.gen_range(0..300), rng.gen()),
            }
        })
        .collect()
}

/// The model after `op`.
pub fn single_apply(model: &mut Model, op: &SingleOp) {
    match op {
        SingleOp::Put(k, len, version) => {
            model.insert(k.clone(), value_for(k, *version, *len));
        }
        SingleOp::Delete(k) => {
            model.remove(k);
        }
        SingleOp::TreePut(k, len, version) => {
            model.insert(tree_model_key(k), value_for(k, *version, *len));
        }
        SingleOp::TreeDelete(k) => {
            model.remove(&tree_model_key(k));
        }
        SingleOp::Flush => {}
    }
}

/// Runs `ops` on `db` up to the first that fails; returns the ops done and the count at the
/// last flush that returned.
pub fn run_single_ops(db: &Db, ops: &[SingleOp]) -> (usize, usize) {
    let (mut done, mut flushed) = (0, 0);
    let mut tree = None;
    for op in ops {
        let ok = match op {
            SingleOp::Put(k, len, version) => db.put(k, &value_for(k, *version, *len)).is_ok(),
            SingleOp::Delete(k) => db.delete(k).is_ok(),
            SingleOp::Flush => db.flush().is_ok(),
            SingleOp::TreePut(k, len, version) => {
                if tree.is_none() {
                    tree = db.tree(TREE_NAME).ok();
                }
                tree.is_some_and(|t| db.tree_put(t, k, &value_for(k, *version, *len)).is_ok())
            }
            SingleOp::TreeDelete(k) => {
                if tree.is_none() {
                    tree = db.tree(TREE_NAME).ok();
                }
                tree.is_some_and(|t| db.tree_delete(t, k).is_ok())
            }
        };
        if !ok {
            break;
        }
        done += 1;
        if matches!(op, SingleOp::Flush) {
            flushed = done;
        }
    }
    (done, flushed)
}

/// The op count in `from..=done + 1` after which the store held exactly `got`, if any (op
/// `done` was in flight at the crash: it may have become durable without being acknowledged).
pub fn state_at(got: &Model, ops: &[SingleOp], from: usize, done: usize) -> Option<usize> {
    let mut expected = Model::new();
    for op in &ops[..from] {
        single_apply(&mut expected, op);
    }
    for at in from..=done + 1 {
        if *got == expected {
            return Some(at);
        }
        match ops.get(at) {
            Some(op) => single_apply(&mut expected, op),
            None => break,
        }
    }
    None
}

/// One power-loss point of the single-threaded workload: runs 600 seeded operations until the
/// power goes (at a seeded write, or after the last operation), reopens and checks: `check`
/// clean with at most 2 leaked pages, the scan's key count equal to `len`, every operation that
/// returned present (`Durability::Commit`), and the scan equal to the reference model after
/// some operation at or after the last `flush` that returned.
pub fn single_once(seed: u64) -> Result<Outcome, String> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc4a5);
    let plan = FaultPlan {
        // The workload writes ≈ 100-170 pages: most crash points fall inside it.
        crash: CrashPoint::AfterWrites(rng.gen_range(1..150)),
        write_cache_bytes: rng.gen_range(4..256) << 12,
    };
    let second = second_crash(&mut rng);
    let durability = single_durability(seed);
    let (made, reopened) = staging_queue_pages(seed);
    let options = move |device| {
        single_options(device)
            .durability(durability)
            .staging_queue_pages(made)
    };
    let reopen_options = move |device| {
        single_options(device)
            .durability(durability)
            .staging_queue_pages(reopened)
    };
    let state = FaultState::fresh(emulator(32 << 20), plan).expect("a fault device");
    let ops = single_workload(seed, 600);
    // Ops completed (in order, up to the first failure) and the count at the last flush that
    // returned: the store must come back at or after it.
    let (mut done, mut flushed) = (0, 0);
    if let Ok(db) = Db::open("unused", options(DeviceKind::Faulty(state.clone()))) {
        (done, flushed) = run_single_ops(&db, &ops);
        // The process dies with the power: the close fails on the dead device (quietly, where
        // a drop would warn about it).
        state.power_loss();
        let _ = db.close();
    }
    let (db, report) = recover(std::slice::from_ref(&state), seed, &reopen_options, second)?;
    let at = check_single(
        db,
        &report,
        &ops,
        Acked { done, flushed },
        durability,
        reopened,
    )?;
    if std::env::var_os("CRASH_VERBOSE").is_some() {
        eprintln!(
            "seed {seed}: ops {done}, last flush at {flushed}, back at {at}, second crash \
             {second:?}, {:?}",
            state.counts()
        );
    }
    Ok(Outcome {
        back_at: at,
        second_crash: second.is_some(),
    })
}

/// How far the single-threaded workload got before the power went: operations that returned,
/// and the count at the last flush that returned.
#[derive(Clone, Copy)]
struct Acked {
    done: usize,
    flushed: usize,
}

/// [`single_once`]'s checks of the reopened store (closed here); the operation count it came
/// back at.
fn check_single(
    db: Db,
    report: &CheckReport,
    ops: &[SingleOp],
    acked: Acked,
    durability: Durability,
    reopened: Option<u64>,
) -> Result<usize, String> {
    let Acked { done, flushed } = acked;
    ensure!(
        report.leaked_pages <= 2,
        "{} leaked pages (at most 2): {report:?}",
        report.leaked_pages
    );
    ensure!(
        reopened.is_none_or(|pages| report.queue_pages == pages),
        "reopened asking for {reopened:?} staging queue pages, the map has {}",
        report.queue_pages
    );
    let got = contents(&db)?;
    let keys = got.keys().filter(|k| !k.starts_with(TREE_PREFIX)).count();
    ensure!(
        keys as u64 == db.len(),
        "the scan found {keys} keys, the store counts {}",
        db.len()
    );
    db.close().map_err(|e| format!("closing: {e}"))?;
    // Only `Commit` acknowledges durable writes; every mode keeps a state at or after the
    // last flush (a checkpoint) that returned.
    ensure!(
        durability != Durability::Commit || state_at(&got, ops, done, done).is_some(),
        "the store is not the state after the {done} ops that returned (nor after the one in \
         flight): an acknowledged write was lost"
    );
    let Some(at) = state_at(&got, ops, flushed, done) else {
        return Err(format!(
            "the store is no state between op {flushed} (the last flush that returned) and op \
             {done} ({} keys, {durability:?})",
            got.len()
        ));
    };
    Ok(at)
}

// ---------------------------------------------------------------------------------------------
// Bank transfers and churn on two cores.

/// Accounts of the bank workload.
pub const ACCOUNTS: u32 = 64;
/// Each account's opening balance.
pub const START: u64 = 1_000;
/// Keys of the churn job.
pub const CHURN_KEYS: u32 = 600;

/// Account `i`'s key.
pub fn account(i: u32) -> Vec<u8> {
    format!("acct-{i}").into_bytes()
}

/// Account `i`'s balance, read in `tx`.
pub fn balance(tx: &mut Tx<'_>, i: u32) -> Result<u64, DbError> {
    let v = tx.get(&account(i))?.expect("accounts are never deleted");
    Ok(u64::from_le_bytes(v[..8].try_into().unwrap()))
}

/// Moves up to `amount` from account `a` to `b` (a transaction: read both, write both).
pub fn transfer(h: &DbHandle, a: u32, b: u32, amount: u64) -> Result<(), DbError> {
    h.transaction(|tx| {
        let (x, y) = (balance(tx, a)?, balance(tx, b)?);
        let amount = amount.min(x);
        tx.put(&account(a), &(x - amount).to_le_bytes())?;
        tx.put(&account(b), &(y + amount).to_le_bytes())?;
        Ok(())
    })
}

/// Every account at its opening balance, in one batch.
pub fn open_accounts(db: &Db) -> Result<(), DbError> {
    let values: Vec<(Vec<u8>, Vec<u8>)> = (0..ACCOUNTS)
        .map(|i| (account(i), START.to_le_bytes().to_vec()))
        .collect();
    let pairs: Vec<(&[u8], &[u8])> = values
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    db.put_many(&pairs)
}

/// What the churn job did: its ops in order (key, `Some(version, len)` for a put, `None` for a
/// delete) and whether the last one was in flight at the crash.
pub struct Churn {
    /// The ops started, in order.
    pub ops: Vec<(u32, Option<(u64, usize)>)>,
    /// Whether the last one failed (in flight at the crash).
    pub in_flight: bool,
}

/// Churn key `k`.
pub fn churn_key(k: u32) -> Vec<u8> {
    format!("churn-{k}").into_bytes()
}

/// The churn keys after the first `n` ops.
pub fn churn_state(ops: &[(u32, Option<(u64, usize)>)], n: usize) -> Vec<Option<Vec<u8>>> {
    let mut state = vec![None; CHURN_KEYS as usize];
    for &(k, op) in &ops[..n] {
        state[k as usize] = op.map(|(version, len)| value_for(&churn_key(k), version, len));
    }
    state
}

/// A job inserting, overwriting (small and extent-sized values, enough keys to split buckets)
/// and deleting until the power goes.
pub fn churn(h: &DbHandle, seed: u64) -> Churn {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc4u64);
    let mut ops = Vec::new();
    for version in 0..2_000u64 {
        let k = rng.gen_range(0..CHURN_KEYS);
        let op = match rng.gen_range(0..10) {
            0 | 1 => None,
            2 => Some((version, rng.gen_range(5_000..12_000))),
            _ => Some((version, rng.gen_range(0..300))),
        };
        ops.push((k, op));
        let key = churn_key(k);
        let result = match op {
            None => h.delete(&key).map(|_| ()),
            Some((version, len)) => h.put(&key, &value_for(&key, version, len)),
        };
        if result.is_err() {
            return Churn {
                ops,
                in_flight: true,
            };
        }
    }
    Churn {
        ops,
        in_flight: false,
    }
}

/// The options of the concurrent workload's store on `device`: two cores.
pub fn concurrent_options(device: DeviceKind) -> DbOptions {
    DbOptions::new(512 << 10)
        .device(device)
        .cores(2)
        .threads_per_core(16)
        .max_directory_depth(8)
        .pinned_directory_depth(1)
        .max_value_bytes(16 << 10)
        .cleaner(false)
        .hash_key(HASH_KEY)
}

type Job<R> = Box<dyn FnOnce(DbHandle) -> R + Send>;

/// One power-loss point of the concurrent workload: on two cores, three jobs transfer between
/// accounts while a fourth inserts, overwrites (values up to three pages) and deletes keys,
/// until the power is cut at a seeded write. Checks after reopening: `check` clean, the jobs
/// ended within 30 s of the power loss (a write waiting for a failed group commit is woken),
/// the accounts all present once their batch returned (or all absent), the total conserved (no
/// transaction half applied), and the churn keys exactly as after the churn job's acknowledged
/// ops (or one more, in flight).
pub fn concurrent_once(seed: u64) -> Result<Outcome, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let plan = FaultPlan {
        crash: CrashPoint::AfterWrites(rng.gen_range(10..400)),
        write_cache_bytes: rng.gen_range(4..256) << 12,
    };
    // Drawn from their own stream, so the crash points above stay those of earlier runs.
    let mut own = SmallRng::seed_from_u64(seed ^ 0x5ec0_0d00);
    let second = second_crash(&mut own);
    // Half the seeds stripe the store over two parts; the first loses power at the seeded
    // write, the other when the workload has stopped.
    let parts = if own.gen_bool(0.5) { 2 } else { 1 };
    let states: Vec<Arc<FaultState>> = (0..parts)
        .map(|i| {
            let plan = FaultPlan {
                crash: if i == 0 {
                    plan.crash
                } else {
                    CrashPoint::Never
                },
                ..plan
            };
            FaultState::fresh(emulator(64 << 20), plan).expect("a fault device")
        })
        .collect();
    let faulty = || {
        device_of(
            states
                .iter()
                .map(|s| DeviceKind::Faulty(s.clone()))
                .collect(),
        )
    };
    let mut setup_done = false;
    let mut churned = None;
    let (made, reopened) = staging_queue_pages(seed);
    let options = move |device| concurrent_options(device).staging_queue_pages(made);
    let reopen_options = move |device| concurrent_options(device).staging_queue_pages(reopened);
    if let Ok(db) = Db::open("unused", options(faulty())) {
        setup_done = open_accounts(&db).is_ok();
        if setup_done {
            churned = transfer_and_churn(&db, seed)?;
        }
        for state in &states {
            state.power_loss();
        }
        let _ = db.close();
    }
    let (db, _) = recover(&states, seed, &reopen_options, second)?;
    check_accounts(&db, setup_done)?;
    if let Some(c) = churned {
        check_churn(&db, &c)?;
    }
    db.close().map_err(|e| format!("closing: {e}"))?;
    Ok(Outcome {
        back_at: 0,
        second_crash: second.is_some(),
    })
}

/// Runs the concurrent workload until the power goes: three jobs transferring between
/// accounts and one churning keys; what the churn job did. An error if the jobs did not end
/// within 30 s of the power loss.
fn transfer_and_churn(db: &Db, seed: u64) -> Result<Option<Churn>, String> {
    let mut jobs: Vec<Job<Option<Churn>>> = Vec::new();
    for w in 0..3u64 {
        jobs.push(Box::new(move |h: DbHandle| {
            let mut rng = SmallRng::seed_from_u64(seed ^ (w << 40));
            for _ in 0..1_000 {
                let a = rng.gen_range(0..ACCOUNTS);
                let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                if transfer(&h, a, b, rng.gen_range(0..100)).is_err() {
                    break;
                }
            }
            None
        }));
    }
    jobs.push(Box::new(move |h: DbHandle| Some(churn(&h, seed))));
    let start = Instant::now();
    let churned = run_parallel(db, jobs).pop().flatten();
    // Liveness, not speed: a write waiting for a group commit that failed must wake
    // and fail, not sit out the store's 60 s bound on that wait.
    ensure!(
        start.elapsed() < Duration::from_secs(30),
        "the jobs took {:?} to end after the power loss",
        start.elapsed()
    );
    Ok(churned)
}

/// The accounts after reopening: all present once their batch returned (all or none
/// otherwise), and when present, their total conserved.
fn check_accounts(db: &Db, setup_done: bool) -> Result<(), String> {
    let mut accounts = 0u32;
    for i in 0..ACCOUNTS {
        accounts += u32::from(
            db.contains(&account(i))
                .map_err(|e| format!("a read: {e}"))?,
        );
    }
    if !setup_done {
        ensure!(
            accounts == 0 || accounts == ACCOUNTS,
            "{accounts} of {ACCOUNTS} accounts: half a batch"
        );
    }
    if accounts == ACCOUNTS {
        let got: u64 = db
            .run(|h| h.transaction(|tx| (0..ACCOUNTS).map(|i| balance(tx, i)).sum()))
            .map_err(|e| format!("a transaction: {e}"))?
            .map_err(|e| format!("a transaction: {e}"))?;
        ensure!(
            got == START * u64::from(ACCOUNTS),
            "the total is {got}, not {}: half a transaction",
            START * u64::from(ACCOUNTS)
        );
    } else {
        ensure!(
            !setup_done,
            "acknowledged accounts lost ({accounts} of {ACCOUNTS})"
        );
    }
    Ok(())
}

/// The churn keys after reopening: as after the churn job's acknowledged ops, or one more.
fn check_churn(db: &Db, c: &Churn) -> Result<(), String> {
    let mut got = Vec::with_capacity(CHURN_KEYS as usize);
    for k in 0..CHURN_KEYS {
        got.push(db.get(&churn_key(k)).map_err(|e| format!("a read: {e}"))?);
    }
    let acked = c.ops.len() - usize::from(c.in_flight);
    ensure!(
        got == churn_state(&c.ops, acked) || got == churn_state(&c.ops, c.ops.len()),
        "the churn keys are not as after the {acked} acknowledged ops"
    );
    Ok(())
}
