//! Ordered trees in transactions: own changes seen, aborts undone, conflicts retried, and
//! atomicity across a hash key and a tree under power loss.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{emulated, run_parallel, SeedGuardLite};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::{CrashPoint, EmulatorConfig, FaultPlan, FaultState};
use tamer_store::{Db, DbError, DbHandle, DeviceKind, Direction, TreeId};

type Job<R> = Box<dyn FnOnce(DbHandle) -> R + Send>;

fn store() -> Db {
    Db::open("unused", emulated(1 << 20, 64 << 20).cores(2)).unwrap()
}

fn scan(h: &DbHandle, tree: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
    h.tree_entries(
        tree,
        Bound::Unbounded,
        Direction::Forward,
        usize::MAX,
        &|_| true,
    )
    .unwrap()
    .0
}

/// A transaction's reads of a tree see its own changes (point reads, scans, counts), and an
/// aborted one leaves the tree and the hash index as they were, its new records freed.
/// Catches tree changes that are not undone (the aborted entries stay), an undo that frees
/// the replaced record (the old value unreadable), undone records not released (leaked).
#[test]
fn an_aborted_transaction_undoes_its_tree_changes() {
    let db = store();
    let tree = db.create_tree().unwrap();
    for i in 0..300u32 {
        db.tree_put(tree, format!("k{i:04}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    db.put(b"count", &300u64.to_le_bytes()).unwrap();
    let before = db.run(move |h| scan(h, tree)).unwrap();
    let before_report = db.check().unwrap();
    let result: Result<(), DbError> = db
        .run(move |h| {
            h.transaction(|tx| {
                for i in 0..200u32 {
                    tx.tree_put(tree, format!("k{i:04}").as_bytes(), b"changed")?;
                }
                for i in 200..300u32 {
                    assert!(tx.tree_delete(tree, format!("k{i:04}").as_bytes())?);
                }
                for i in 0..50u32 {
                    tx.tree_put(tree, format!("new{i}").as_bytes(), &[7; 300])?;
                }
                tx.put(b"count", &250u64.to_le_bytes())?;
                assert_eq!(tx.tree_len(tree)?, 250);
                assert_eq!(
                    tx.tree_get(tree, b"k0007")?.as_deref(),
                    Some(&b"changed"[..])
                );
                assert_eq!(tx.tree_get(tree, b"k0250")?, None);
                let (got, _) =
                    tx.tree_entries(tree, Bound::Unbounded, Direction::Reverse, 3, &|_| true)?;
                assert_eq!(got[0].0, b"new9");
                Err(DbError::Runtime("abort".into()))
            })
        })
        .unwrap();
    assert!(result.is_err());
    let after = db.run(move |h| scan(h, tree)).unwrap();
    assert_eq!(after.len(), before.len());
    assert!(after == before, "the tree differs after the abort");
    assert_eq!(db.get(b"count").unwrap().unwrap(), 300u64.to_le_bytes());
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    // At most the open data page, whose records (the aborted ones) are all released.
    assert!(report.leaked_pages <= 1, "{report:?}");
    assert_eq!(report.tree_entries, before_report.tree_entries);
    // A committed one is whole.
    db.run(move |h| {
        h.transaction(|tx| {
            tx.tree_put(tree, b"k0001", b"one")?;
            tx.tree_delete(tree, b"k0002")?;
            tx.put(b"count", &299u64.to_le_bytes())
        })
    })
    .unwrap()
    .unwrap();
    assert_eq!(db.tree_len(tree).unwrap(), 299);
    assert_eq!(
        db.tree_get(tree, b"k0001").unwrap().as_deref(),
        Some(&b"one"[..])
    );
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}

/// Transactions on two cores each move one unit from a counter entry of a shared tree to a
/// new entry and add it to a hash key; wait-die conflicts on the counter key abort and
/// undo applied tree changes. At the end every total agrees and the tree has exactly one
/// entry per committed transaction. Catches a transaction holding the latch that waits for a
/// lock (hangs against a checkpoint), a conflict that does not undo (extra entries), undo
/// out of order.
#[test]
fn conflicting_tree_transactions_serialize() {
    let db = store();
    let tree = db.create_tree().unwrap();
    db.tree_put(tree, b"counter", &0u64.to_le_bytes()).unwrap();
    db.put(b"sum", &0u64.to_le_bytes()).unwrap();
    let runs = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let jobs: Vec<Job<u64>> = (0..6u64)
        .map(|j| -> Job<u64> {
            let runs = runs.clone();
            Box::new(move |h: DbHandle| {
                let mut rng = SmallRng::seed_from_u64(j);
                let mut committed = 0;
                for i in 0..150u64 {
                    let key = format!("e{j}-{i}").into_bytes();
                    let extra = rng.gen_range(0..3u64);
                    h.transaction(|tx| {
                        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // A tree change first, then locks: later locks may find holders.
                        tx.tree_put(tree, &key, &extra.to_le_bytes())?;
                        let c = tx.tree_get(tree, b"counter")?.unwrap();
                        let c = u64::from_le_bytes(c.try_into().unwrap());
                        tx.tree_put(tree, b"counter", &(c + 1).to_le_bytes())?;
                        let s = tx.get(b"sum")?.unwrap();
                        let s = u64::from_le_bytes(s.try_into().unwrap());
                        tx.put(b"sum", &(s + 1 + extra).to_le_bytes())
                    })
                    .unwrap();
                    committed += 1 + extra;
                }
                committed
            })
        })
        .collect();
    let sums: u64 = run_parallel(&db, jobs).into_iter().sum();
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{runs} closure runs for 900 transactions");
    let counter = db.tree_get(tree, b"counter").unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(counter.try_into().unwrap()), 900);
    let sum = db.get(b"sum").unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(sum.try_into().unwrap()), sums);
    assert_eq!(db.tree_len(tree).unwrap(), 901);
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.leaked_pages <= 1, "{report:?}");
    db.close().unwrap();
}

fn faulty(crash: CrashPoint) -> Arc<FaultState> {
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(64 << 20)
        .build()
        .unwrap();
    let plan = FaultPlan {
        crash,
        ..FaultPlan::default()
    };
    FaultState::new(model, plan).unwrap()
}

/// Seeded power losses while transactions add entries to a tree and record the count and the
/// last key in a hash key: after recovery the hash key and the tree agree (never half a
/// transaction), every acknowledged transaction is there, and `check` is clean. Catches tree
/// deltas staged apart from the hash deltas, a tree change a checkpoint captured before its
/// transaction committed, a redo of tree deltas in the wrong order.
#[test]
fn a_hash_key_and_a_tree_change_together_across_power_loss() {
    for seed in 0..40u64 {
        let _guard = SeedGuardLite::new("tree transactions crash", seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let state = faulty(CrashPoint::AfterWrites(rng.gen_range(5..250)));
        let mut acked = 0u64;
        let options = || emulated(1 << 20, 64 << 20).cores(1);
        if let Ok(db) = Db::open(
            "unused",
            options().device(DeviceKind::Faulty(state.clone())),
        ) {
            if let Ok(tree) = db.tree(b"log") {
                for i in 0..400u64 {
                    let n = rng.gen_range(1..6u64);
                    let big = rng.gen_bool(0.1);
                    let r = db.run(move |h| {
                        h.transaction(|tx| {
                            let count = tx
                                .get(b"count")?
                                .map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
                            for j in 0..n {
                                let v = if big {
                                    vec![j as u8; 2000]
                                } else {
                                    vec![j as u8; 20]
                                };
                                tx.tree_put(tree, format!("{i:05}-{j}").as_bytes(), &v)?;
                            }
                            if i % 7 == 3 {
                                // Deletes too: the oldest transaction's first entry.
                                tx.tree_delete(tree, format!("{:05}-0", i - 3).as_bytes())?;
                            }
                            let mut v = (count + n).to_le_bytes().to_vec();
                            v.extend_from_slice(&i.to_le_bytes());
                            tx.put(b"count", &v)
                        })
                    });
                    if !matches!(r, Ok(Ok(()))) {
                        break;
                    }
                    acked = i + 1;
                }
            }
            state.power_loss();
            drop(db);
        }
        state.power_loss();
        let image = state
            .crash_model(
                EmulatorConfig::with_latency_ns(1_000),
                &state.seeded_fates(seed),
            )
            .unwrap();
        let db = Db::open("unused", options().device(DeviceKind::Model(image))).unwrap();
        let report = db.check().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        let Some(tree) = db.find_tree(b"log").unwrap() else {
            assert_eq!(
                acked, 0,
                "seed {seed}: the tree of acknowledged transactions is gone"
            );
            continue;
        };
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = db
            .range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
            .map(Result::unwrap)
            .collect();
        let (count, last) = db.get(b"count").unwrap().map_or((0, None), |v| {
            let c = u64::from_le_bytes(v[..8].try_into().unwrap());
            (c, Some(u64::from_le_bytes(v[8..16].try_into().unwrap())))
        });
        let deleted = last.map_or(0, |l| (0..=l).filter(|i| i % 7 == 3).count() as u64);
        assert_eq!(
            entries.len() as u64 + deleted,
            count,
            "seed {seed}: half a transaction"
        );
        let done = last.map_or(0, |l| l + 1);
        assert!(
            done >= acked,
            "seed {seed}: {done} transactions back, {acked} acknowledged"
        );
        assert!(
            entries
                .keys()
                .all(|k| k.as_slice() < format!("{done:05}").as_bytes()),
            "seed {seed}: an entry of a transaction that did not commit"
        );
        db.close().unwrap();
    }
}

fn reclaim_all(db: &Db) -> u64 {
    let mut total = 0;
    // Bounded: each step deletes a batch or frees a tree.
    for _ in 0..10_000 {
        let (n, more) = db
            .run(|h| {
                let n = h.reclaim_trees()?;
                Ok::<_, DbError>((n, n > 0 || h.reclaim_trees()? > 0))
            })
            .unwrap()
            .unwrap();
        total += n;
        if !more {
            return total;
        }
    }
    panic!("the reclaimer never finished");
}

/// A dropped tree is reclaimed in bounded steps: every entry deleted, every node and record
/// page freed, the catalog's listing gone; another tree is untouched; a drop in an aborted
/// transaction drops nothing. Seeded power losses during the steps: the reopened store is
/// clean and the reclaimer finishes. Catches a step that frees the root before its entries
/// (check finds records unreferenced), a listing left behind (reclaim never ends), a drop not
/// undone with its transaction.
#[test]
fn a_dropped_tree_is_reclaimed_in_steps_even_across_power_loss() {
    let mut crashed_dropped = 0;
    for seed in 0..16u64 {
        let _guard = SeedGuardLite::new("tree reclaim crash", seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let options = || emulated(1 << 20, 64 << 20).cores(1).cleaner(false);
        // Loaded and closed cleanly first; the power loss is armed for what follows.
        let loaded = faulty(CrashPoint::Never);
        let db = Db::open(
            "unused",
            options().device(DeviceKind::Faulty(loaded.clone())),
        )
        .unwrap();
        let (big, kept) = (db.create_tree().unwrap(), db.tree(b"kept").unwrap());
        for chunk in 0..15u32 {
            db.run(move |h| {
                h.transaction(|tx| {
                    for i in chunk * 100..(chunk + 1) * 100 {
                        let v = vec![i as u8; if i % 10 == 0 { 500 } else { 40 }];
                        tx.tree_put(big, format!("{i:05}").as_bytes(), &v)?;
                    }
                    Ok(())
                })
            })
            .unwrap()
            .unwrap();
        }
        db.tree_put(kept, b"k", b"v").unwrap();
        db.close().unwrap();
        let plan = FaultPlan {
            crash: CrashPoint::AfterWrites(rng.gen_range(1..60)),
            ..FaultPlan::default()
        };
        let state = loaded
            .after_crash(
                EmulatorConfig::with_latency_ns(1_000),
                &loaded.seeded_fates(seed),
                plan,
            )
            .unwrap();
        if let Ok(db) = Db::open(
            "unused",
            options().device(DeviceKind::Faulty(state.clone())),
        ) {
            if seed == 0 {
                let r: Result<Result<(), DbError>, DbError> = db.run(move |h| {
                    h.transaction(|tx| {
                        tx.drop_tree(big)?;
                        Err(DbError::Runtime("abort".into()))
                    })
                });
                assert!(matches!(r, Ok(Err(_))));
                assert_eq!(db.tree_len(big).unwrap(), 1_500, "an aborted drop dropped");
            }
            let dropped = db.drop_tree(big).is_ok();
            let steps = rng.gen_range(0..16usize);
            let _ = db.run(move |h| {
                for _ in 0..steps {
                    if h.reclaim_trees().is_err() {
                        break;
                    }
                }
            });
            crashed_dropped += usize::from(dropped);
            state.power_loss();
            drop(db);
        }
        state.power_loss();
        let image = state
            .crash_model(
                EmulatorConfig::with_latency_ns(1_000),
                &state.seeded_fates(seed),
            )
            .unwrap();
        let db = Db::open("unused", options().device(DeviceKind::Model(image))).unwrap();
        assert!(db.check().unwrap().is_clean(), "seed {seed}");
        reclaim_all(&db);
        let report = db.check().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        assert_eq!(db.tree_get(kept, b"k").unwrap().as_deref(), Some(&b"v"[..]));
        // Left: the catalog and `kept` (and `big` if its drop was lost, whole).
        if report.trees == 3 {
            assert_eq!(
                db.tree_len(big).unwrap(),
                1_500,
                "seed {seed}: a lost drop, whole"
            );
        } else {
            assert_eq!(report.trees, 2, "seed {seed}: {report:?}");
            assert_eq!(report.tree_entries, 2, "seed {seed}: {report:?}");
        }
        db.close().unwrap();
    }
    assert!(
        crashed_dropped > 8,
        "the drops ran before most power losses"
    );
}

/// Many small transactions on a tree far larger than a tiny cache (32 sets of 8 ways), each a
/// random insert and a read of another random key, so that the dirty index pages of some set
/// reach its ways between checkpoints. Dirty index pages can be neither evicted nor written
/// before a checkpoint, and a transaction holding the checkpoint latch that misses in such a
/// set waits for a victim no one can free. Catches a store that does not run a checkpoint
/// when a set nears full of dirty index pages (`DbError` "stayed pinned" after the cache's
/// wait bound), and lost or misplaced entries (compared with a `BTreeMap`).
#[test]
fn dirty_tree_pages_never_fill_a_cache_set() {
    let seed = 11;
    let _guard = SeedGuardLite::new("dirty_tree_pages_never_fill_a_cache_set", seed);
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).cores(1)).unwrap();
    let tree = db.create_tree().unwrap();
    let model = db
        .run(move |h| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut model = BTreeMap::new();
            for i in 0..12_000u64 {
                let key = format!("k{:08}", rng.gen_range(0..1_000_000u64)).into_bytes();
                let probe = format!("k{:08}", rng.gen_range(0..1_000_000u64)).into_bytes();
                let value = i.to_le_bytes().repeat(12);
                h.transaction(|tx| {
                    let _ = tx.tree_get(tree, &probe)?;
                    tx.tree_put(tree, &key, &value).map(|_| ())
                })?;
                model.insert(key, value);
            }
            Ok::<_, DbError>(model)
        })
        .unwrap()
        .unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db
        .run(move |h| scan(h, tree))
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(got, model);
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    db.close().unwrap();
}

/// One transaction that changes entries in ~80 leaves of a tree far larger than a 1 MiB cache
/// (32 sets): its own dirty nodes put some set near full, which makes a checkpoint due. It
/// is undone and run again once after that checkpoint, then commits. Catches a transaction
/// aborted for the pressure it causes itself on every attempt (thousands of attempts and
/// checkpoints, then `Conflict`), and an undo or retry that loses or doubles a change.
#[test]
fn a_transaction_filling_a_cache_set_itself_still_commits() {
    let seed = 12;
    let _guard = SeedGuardLite::new("a_transaction_filling_a_cache_set_itself", seed);
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).cores(1)).unwrap();
    let tree = db.create_tree().unwrap();
    let key = |i: u64| format!("k{i:08}").into_bytes();
    for i in 0..20_000u64 {
        db.tree_put(tree, &key(i), &[1; 40]).unwrap();
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let picked: Vec<u64> = (0..80).map(|_| rng.gen_range(0..20_000u64)).collect();
    let runs = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (runs2, picked2) = (runs.clone(), picked.clone());
    db.run(move |h| {
        h.transaction(|tx| {
            runs2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            for &i in &picked2 {
                tx.tree_put(tree, &key(i), &[2; 40])?;
            }
            Ok(())
        })
    })
    .unwrap()
    .unwrap();
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    assert!(runs <= 3, "{runs} attempts");
    let changed = db
        .run(move |h| scan(h, tree))
        .unwrap()
        .into_iter()
        .filter(|(_, v)| v[0] == 2)
        .count();
    let mut distinct = picked.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(changed, distinct.len());
    assert_eq!(db.tree_len(tree).unwrap(), 20_000);
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}
