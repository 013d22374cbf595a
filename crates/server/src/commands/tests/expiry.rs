//! Active expiry: the policy's rules one by one, steps driven by a chosen clock on a real store
//! (the emulated device), and the running expirer removing 20,000 keys on the wall clock.
//! Each test names the mutation it catches. Random choices are seeded (`TAMER_TEST_SEED`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tamer_store::{Db, DbError, DbOptions, DeviceKind};

use super::{execute, test_stats};
use crate::commands::Context;
use crate::keyspace::expiry::*;
use crate::keyspace::expiry_index::{self, slot_of, SHARDS, SLOT_MS};
use crate::keyspace::wall_ms;
use crate::keyspace::{self, store_key};

fn store() -> Db {
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 64 << 20,
    };
    Db::open("unused", DbOptions::new(16 << 20).device(device).cores(1)).unwrap()
}

fn seed() -> u64 {
    std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(wall_ms)
}

/// Runs one command in database namespace 1 at `now_ms`; its reply.
fn run(db: &Db, now_ms: u64, args: &[&str]) -> String {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let out = db
        .transaction(move |tx| {
            let map = std::cell::Cell::new([1; crate::keyspace::DATABASES]);
            let ctx = Context::bare(1, now_ms, &map, test_stats());
            let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            let mut out = Vec::new();
            execute(&ctx, tx, &refs, &mut out)?;
            Ok(out)
        })
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// Steps at `now_ms` until nothing is due; the steps' totals.
fn drain(db: &Db, now_ms: u64) -> StepReport {
    let mut total = StepReport::default();
    loop {
        let r = db
            .transaction(move |tx| step(tx, now_ms, &mut Vec::new()))
            .unwrap();
        total.examined += r.examined;
        total.expired += r.expired;
        total.stale += r.stale;
        if !r.moved {
            return total;
        }
    }
}

/// Whether namespace 1 holds `key` in the store (no lazy expiry on the way).
fn stored(db: &Db, key: &str) -> bool {
    db.get(&store_key(1, key.as_bytes())).unwrap().is_some()
}

/// Catches a slot processed before it has ended (a key removed before its time), before its
/// grace has passed (a writer's late append behind the cursor), or one due but not processed.
#[test]
fn a_slot_is_due_exactly_once_it_has_ended_and_its_grace_passed() {
    assert!(!slot_due(5, 5 * SLOT_MS));
    assert!(!slot_due(5, 6 * SLOT_MS - 1));
    assert!(!slot_due(5, 6 * SLOT_MS));
    assert!(!slot_due(5, 6 * SLOT_MS + SLOT_GRACE_MS - 1));
    assert!(slot_due(5, 6 * SLOT_MS + SLOT_GRACE_MS));
    assert!(slot_due(5, 60 * SLOT_MS));
    assert!(!slot_due(u64::MAX, u64::MAX), "no overflow into 'due'");
}

/// Catches a cap ignored or the wrong one reported.
#[test]
fn a_pass_stops_at_its_time_or_entry_cap() {
    let e = Effort {
        max_entries: 100,
        max_time_us: 1_000,
    };
    assert_eq!(cap_reached(e, 99, 999), None);
    assert_eq!(cap_reached(e, 100, 0), Some(Cap::Entries));
    assert_eq!(cap_reached(e, 0, 1_000), Some(Cap::Time));
    assert_eq!(cap_reached(e, 500, 5_000), Some(Cap::Time));
}

/// Catches an effort that does not grow while behind, grows past the maximum, or stays high
/// after catching up.
#[test]
fn effort_doubles_while_behind_and_resets_once_caught_up() {
    let p = EffortPolicy::default();
    let once = next_effort(&p, p.base, true);
    assert_eq!(once.max_entries, 2 * p.base.max_entries);
    assert_eq!(once.max_time_us, 2 * p.base.max_time_us);
    let mut e = p.base;
    for _ in 0..64 {
        e = next_effort(&p, e, true);
    }
    assert_eq!(e, p.max);
    assert_eq!(next_effort(&p, e, false), p.base);
}

/// Catches a new store's cursor starting after entries already written (they would never
/// be processed) or at slot 0 (a walk over 56 years of empty slots).
#[test]
fn a_new_cursor_looks_back_one_hour() {
    let now = 1_700_000_000_000;
    let c = initial_cursor(now);
    assert_eq!(c.slot, slot_of(now) - LOOKBACK_SLOTS);
    assert_eq!((c.shard, c.chunk), (0, 0));
    assert_eq!(initial_cursor(5).slot, 0);
}

/// Random keys with random TTLs, stepped at increasing times: after each drain a key is in
/// the store exactly when its slot has not ended, so never removed before its time; at the
/// end every key and every index record is gone. Catches an entry in the wrong slot, a slot
/// processed early, a chunk or shard skipped, index records left behind.
#[test]
fn keys_are_removed_exactly_when_their_slot_ends() {
    let seed = seed();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let db = store();
    let t0 = wall_ms() + 5_000;
    let mut at = HashMap::new();
    for i in 0..2_000 {
        let when = t0 + rng.gen_range(0..8_000u64);
        let key = format!("k{i}:{}", "x".repeat(rng.gen_range(0..40)));
        let pxat = when.to_string();
        assert_eq!(run(&db, t0, &["SET", &key, "v", "PXAT", &pxat]), "+OK\r\n");
        at.insert(key, when);
    }
    let mut now = t0;
    let mut expired = 0;
    while now < t0 + 10_000 {
        now += rng.gen_range(1..700);
        let r = drain(&db, now);
        expired += r.expired;
        assert_eq!(r.stale, 0, "seed {seed} (TAMER_TEST_SEED)");
        for (key, &when) in &at {
            let ended = slot_due(slot_of(when), now);
            assert_eq!(
                stored(&db, key),
                !ended,
                "{key} at {when}, now {now}, seed {seed}"
            );
        }
    }
    assert_eq!(expired, 2_000);
    // The expirer read (so wrote) the databases record to tell live namespaces from flushed.
    assert_eq!(
        db.len(),
        2,
        "only the cursor and the databases record are left; seed {seed}"
    );
    db.close().unwrap();
}

/// Stale entries are verified, never trusted: `PERSIST`, a later `EXPIRE`, `DEL`, `RENAME`
/// leave entries that do not remove the key; `INCR`, `APPEND` and `SET KEEPTTL` add none.
/// Catches an expirer that deletes whatever an entry names, a renamed key's entry not
/// written, or a kept TTL indexed again.
#[test]
fn stale_entries_are_skipped_and_kept_ttls_not_reindexed() {
    let db = store();
    let t0 = wall_ms() + 5_000;
    let at = (t0 + 1_000).to_string();
    for k in [
        "persisted",
        "later",
        "deleted",
        "renamed",
        "plain",
        "counter",
    ] {
        assert_eq!(run(&db, t0, &["SET", k, "1", "PXAT", &at]), "+OK\r\n");
    }
    assert_eq!(run(&db, t0, &["PERSIST", "persisted"]), ":1\r\n");
    let later = (t0 + 9_000).to_string();
    assert_eq!(run(&db, t0, &["PEXPIREAT", "later", &later]), ":1\r\n");
    assert_eq!(run(&db, t0, &["DEL", "deleted"]), ":1\r\n");
    assert_eq!(run(&db, t0, &["RENAME", "renamed", "moved"]), "+OK\r\n");
    assert_eq!(run(&db, t0, &["INCR", "counter"]), ":2\r\n");
    assert_eq!(run(&db, t0, &["APPEND", "counter", "0"]), ":2\r\n");
    assert_eq!(run(&db, t0, &["SET", "counter", "7", "KEEPTTL"]), "+OK\r\n");
    let r = drain(&db, t0 + 3_000);
    // Entries: six SETs and the rename's; stale: persisted, later, deleted, renamed.
    assert_eq!((r.examined, r.expired, r.stale), (7, 3, 4));
    assert!(stored(&db, "persisted") && stored(&db, "later"));
    for k in ["deleted", "renamed", "moved", "plain", "counter"] {
        assert!(!stored(&db, k), "{k}");
    }
    assert_eq!(run(&db, t0 + 3_000, &["PTTL", "persisted"]), ":-1\r\n");
    let r = drain(&db, t0 + 10_000 + SLOT_GRACE_MS);
    assert_eq!((r.examined, r.expired, r.stale), (1, 1, 0));
    assert!(!stored(&db, "later") && stored(&db, "persisted"));
    db.close().unwrap();
}

/// A step's work is bounded: `STEP_ENTRIES` entries and one more chunk, or
/// `MAX_PROBES_PER_STEP` heads. Catches a step that processes a whole slot (unbounded time
/// with the request path waiting for its locks).
#[test]
fn a_step_is_bounded() {
    let db = store();
    let t0 = wall_ms() + 5_000;
    let at = (t0 + 100).to_string();
    for i in 0..3_000 {
        let k = format!("key{i}");
        run(&db, t0, &["SET", &k, "v", "PXAT", &at]);
    }
    let now = t0 + 2_000;
    let per_chunk = expiry_index::CHUNK_BYTES / (expiry_index::ENTRY_OVERHEAD_BYTES + 8);
    let (mut steps, mut expired) = (0, 0);
    loop {
        let r = db
            .transaction(move |tx| step(tx, now, &mut Vec::new()))
            .unwrap();
        assert!(
            r.examined as usize <= STEP_ENTRIES as usize + per_chunk,
            "{r:?}"
        );
        expired += r.expired;
        steps += 1;
        if !r.moved {
            break;
        }
    }
    assert_eq!(expired, 3_000);
    let probes = (LOOKBACK_SLOTS + 3) as usize * usize::from(SHARDS);
    assert!(
        steps
            >= 3_000 / (STEP_ENTRIES as usize + per_chunk) + probes / MAX_PROBES_PER_STEP as usize
    );
    db.close().unwrap();
}

/// 20,000 keys with 1-2 s TTLs disappear without being accessed while the running expirer's
/// passes go on, `Db::len` falls to the keys without a TTL or with a long one, and no check
/// ever finds a key gone before its time. Catches an expirer not started, one that stops
/// after a pass, deletes early, or leaves most keys to lazy expiry.
#[test]
fn the_running_expirer_removes_20000_keys_without_access() {
    let seed = seed();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let db = store();
    let now = wall_ms();
    let mut keys: Vec<(Vec<u8>, Option<u64>)> = Vec::new();
    for i in 0..24_000u32 {
        let at = match i % 12 {
            0 => None,
            1 => Some(now + 600_000),
            _ => Some(now + rng.gen_range(1_000..2_000)),
        };
        keys.push((format!("key:{i}").into_bytes(), at));
    }
    for batch in keys.chunks(500) {
        let batch = batch.to_vec();
        db.transaction(move |tx| {
            for (k, at) in &batch {
                let e = keyspace::Entry::string(b"value".to_vec(), *at);
                keyspace::put(&crate::keyspace::scope::Scope::detached(1, 0), tx, k, &e)
                    .map_err(|e| DbError::Runtime(e.to_string()))?;
            }
            Ok(())
        })
        .unwrap();
    }
    let stats = Arc::new(ExpiryStats::default());
    let expirer = Expirer::start(
        &db,
        ExpiryOptions::default(),
        stats.clone(),
        None,
        None,
        None,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last_len = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let before_ms = wall_ms();
        let present = present_keys(&db, &keys);
        let after_ms = wall_ms();
        for ((k, at), here) in keys.iter().zip(&present) {
            let may_be_gone = at.is_some_and(|at| at <= after_ms);
            assert!(
                *here || may_be_gone,
                "{k:?} gone before {at:?} (now {before_ms})"
            );
        }
        let len = db.len();
        assert!(len <= last_len, "Db::len rose from {last_len} to {len}");
        last_len = len;
        if stats.expired_keys() == 20_000 || Instant::now() > deadline {
            break;
        }
    }
    drop(expirer);
    assert_eq!(
        stats.expired_keys(),
        20_000,
        "seed {seed} (TAMER_TEST_SEED)"
    );
    // Left: 4,000 keys, the cursor, the long TTLs' heads and chunks (16 shards, ≤ 2 slots).
    assert!(db.len() >= 4_001 && db.len() < 4_001 + 2 * 2 * 16 + 2_000 / 20 + 20);
    assert_eq!(stats.entries_examined(), (20_000, 0));
    db.close().unwrap();
}

/// Whether each key of `keys` is in the store (namespace 1), read in small transactions.
fn present_keys(db: &Db, keys: &[(Vec<u8>, Option<u64>)]) -> Vec<bool> {
    let mut out = Vec::with_capacity(keys.len());
    for batch in keys.chunks(1_000) {
        let names: Vec<Vec<u8>> = batch.iter().map(|(k, _)| store_key(1, k)).collect();
        let here: Vec<bool> = db
            .transaction(move |tx| names.iter().map(|k| tx.contains(k)).collect())
            .unwrap();
        out.extend(here);
    }
    out
}

/// Active expiry's rate on a store file (not a test of behaviour: a measurement, run by
/// hand): 200,000 keys all due at once, drained by the running expirer, in `none` and
/// `commit` durability. `cargo test --release -p tamer-server expiry_rate -- --ignored
/// --nocapture`; `TAMER_EXPIRY_DIR` picks the directory (default: the temp dir).
#[test]
#[ignore]
fn expiry_rate() {
    use tamer_store::Durability;
    let dir = std::env::var("TAMER_EXPIRY_DIR").map_or_else(|_| std::env::temp_dir(), Into::into);
    for (name, durability) in [("none", Durability::None), ("commit", Durability::Commit)] {
        let path = dir.join(format!("expiry-rate-{}.db", std::process::id()));
        let db = Db::open(
            &path,
            DbOptions::new(256 << 20).cores(1).durability(durability),
        );
        let db = db.unwrap();
        let n = 200_000u32;
        let at = wall_ms() + 3_000;
        for batch in (0..n).collect::<Vec<_>>().chunks(1_000) {
            let batch = batch.to_vec();
            db.transaction(move |tx| {
                for i in &batch {
                    let e = keyspace::Entry::string(b"value".to_vec(), Some(at));
                    let k = format!("key:{i}");
                    keyspace::put(
                        &crate::keyspace::scope::Scope::detached(1, 0),
                        tx,
                        k.as_bytes(),
                        &e,
                    )
                    .map_err(|e| DbError::Runtime(e.to_string()))?;
                }
                Ok(())
            })
            .unwrap();
        }
        let stats = Arc::new(ExpiryStats::default());
        let expirer = Expirer::start(
            &db,
            ExpiryOptions::default(),
            stats.clone(),
            None,
            None,
            None,
        )
        .unwrap();
        let due = Duration::from_millis(at.div_ceil(SLOT_MS) * SLOT_MS - wall_ms());
        std::thread::sleep(due);
        let started = Instant::now();
        while stats.expired_keys() < u64::from(n) && started.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let secs = started.elapsed().as_secs_f64();
        drop(expirer);
        println!(
            "durability {name}: {} keys expired in {secs:.2} s after their slot ended: {:.0} keys/s, \
             {} passes, {} capped",
            stats.expired_keys(),
            stats.expired_keys() as f64 / secs,
            stats.passes(),
            stats.expired_time_cap_reached_count()
        );
        db.close().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}

/// A flushed database's keys with TTLs (their namespace dead, its count records deleted by
/// the flush, the reclaimer not yet there) are removed by the expirer without touching counts.
/// Mutation caught: removing them through the counts (the count would go below zero: the
/// step fails with a corrupt-count error and the cursor never moves again).
#[test]
fn a_flushed_databases_keys_expire_without_their_counts() {
    let db = store();
    let t0 = wall_ms();
    for i in 0..10 {
        let key = format!("k{i}");
        assert_eq!(run(&db, t0, &["SET", &key, "v", "PX", "10"]), "+OK\r\n");
    }
    db.transaction(|tx| {
        keyspace::Databases::flush(tx, 0).map_err(|e| DbError::Runtime(e.to_string()))
    })
    .unwrap();
    let r = drain(&db, t0 + 5_000);
    assert_eq!((r.expired, r.stale), (10, 0));
    assert!(!stored(&db, "k0"));
}
