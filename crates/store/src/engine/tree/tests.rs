//! The tree against a `BTreeMap` under seeded random operations (splits, merges, root splits
//! and collapses, evictions of a small cache), across close and reopen, and under concurrent
//! writers and readers.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{Db, DbOptions, DeviceKind, Direction, TreeId};

fn options(cores: usize) -> DbOptions {
    DbOptions::new(1 << 20)
        .cores(cores)
        .threads_per_core(8)
        .max_directory_depth(8)
        .cleaner(false)
}

fn new_store(cores: usize) -> Db {
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 256 << 20,
    };
    Db::open("unused", options(cores).device(device)).expect("open")
}

fn reopen(db: Db, cores: usize) -> Db {
    let model = db.emulator_model().expect("emulated");
    db.close().expect("close");
    Db::open("unused", options(cores).device(DeviceKind::Model(model))).expect("reopen")
}

/// A key of `rng`'s choosing among `keys` (varied lengths, shared prefixes).
fn key(rng: &mut SmallRng, keys: u64) -> Vec<u8> {
    let k = rng.gen_range(0..keys);
    let pad = (k % 7) as usize * 20;
    format!("k{:06}{}", k, "x".repeat(pad)).into_bytes()
}

fn value(rng: &mut SmallRng) -> Vec<u8> {
    let len = if rng.gen_bool(0.1) {
        rng.gen_range(129..3000)
    } else {
        rng.gen_range(0..100)
    };
    (0..len).map(|_| rng.gen()).collect()
}

/// Every entry of `tree` in `direction` through the range API, compared with the model.
fn assert_same(db: &Db, tree: TreeId, model: &BTreeMap<Vec<u8>, Vec<u8>>, seed: u64) {
    let forward: Vec<_> = db
        .range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .map(Result::unwrap)
        .collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(forward.len(), want.len(), "seed {seed}: entries");
    assert!(forward == want, "seed {seed}: forward scan differs");
    let mut reverse: Vec<_> = db
        .range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Reverse)
        .map(Result::unwrap)
        .collect();
    reverse.reverse();
    assert!(reverse == want, "seed {seed}: reverse scan differs");
    assert_eq!(
        db.tree_len(tree).unwrap(),
        model.len() as u64,
        "seed {seed}"
    );
}

/// Runs `ops` seeded operations on `tree` and the model: puts (small and large values),
/// deletes, point reads, positions, and bounded scans both ways from random keys.
fn random_ops(db: &Db, tree: TreeId, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, seed: u64, ops: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for op in 0..ops {
        let k = key(&mut rng, 3_000);
        match rng.gen_range(0..100) {
            0..=54 => {
                let v = value(&mut rng);
                db.tree_put(tree, &k, &v).unwrap();
                model.insert(k, v);
            }
            55..=79 => {
                let was = db.tree_delete(tree, &k).unwrap();
                assert_eq!(
                    was,
                    model.remove(&k).is_some(),
                    "seed {seed} op {op}: delete"
                );
            }
            80..=89 => {
                let got = db.tree_get(tree, &k).unwrap();
                assert_eq!(got.as_ref(), model.get(&k), "seed {seed} op {op}: get");
            }
            90..=94 => {
                let rank = db.tree_position(tree, &k).unwrap();
                let want = model.range::<Vec<u8>, _>(..k.clone()).count() as u64;
                assert_eq!(rank, want, "seed {seed} op {op}: position");
                let at = db.run({
                    let i = rng.gen_range(0..model.len() as u64 + 2);
                    move |h| h.tree_key_at(tree, i).map(|k| (i, k))
                });
                let (i, got) = at.unwrap().unwrap();
                let want = model.keys().nth(i as usize).cloned();
                assert_eq!(got, want, "seed {seed} op {op}: key at {i}");
            }
            _ => {
                let end = key(&mut rng, 3_000);
                let (lo, hi) = if k <= end { (k, end) } else { (end, k) };
                let reverse = rng.gen_bool(0.5);
                let direction = if reverse {
                    Direction::Reverse
                } else {
                    Direction::Forward
                };
                let got: Vec<_> = db
                    .range(tree, Bound::Included(&lo), Bound::Excluded(&hi), direction)
                    .take(300)
                    .map(Result::unwrap)
                    .collect();
                let mut want: Vec<_> = model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if reverse {
                    want.reverse();
                }
                want.truncate(300);
                assert!(got == want, "seed {seed} op {op}: range {reverse}");
            }
        }
    }
}

/// Seeded random operations on a tree in a 1 MiB cache (256 frames: nodes are evicted and
/// read back), compared with a `BTreeMap` throughout, then scanned whole both ways, checked
/// (`tamer check`'s tree walk: shapes, separators, counts, records), reopened, and compared
/// again; then everything is deleted (merges down to an empty root). Catches a split that
/// loses or misplaces an entry, a merge that drops a sibling's entries, counts not kept
/// (positions), a reverse scan stuck at a leaf boundary, a node not written at a checkpoint
/// (reopen).
#[test]
fn a_tree_matches_a_btreemap_across_reopen() {
    for seed in [11u64, 12, 13] {
        let db = new_store(1);
        let tree = db.create_tree().unwrap();
        let other = db.create_tree().unwrap();
        db.tree_put(other, b"k000001", b"elsewhere").unwrap();
        let mut model = BTreeMap::new();
        random_ops(&db, tree, &mut model, seed, 6_000);
        assert_same(&db, tree, &model, seed);
        let report = db.check().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        assert_eq!(report.trees, 2, "seed {seed}");
        assert_eq!(report.tree_entries, model.len() as u64 + 1, "seed {seed}");
        assert_eq!(report.leaked_pages, 0, "seed {seed}: {report:?}");
        let db = reopen(db, 1);
        assert_same(&db, tree, &model, seed);
        random_ops(&db, tree, &mut model, seed + 100, 2_000);
        assert_same(&db, tree, &model, seed);
        for k in model.keys() {
            assert!(db.tree_delete(tree, k).unwrap(), "seed {seed}");
        }
        model.clear();
        assert_same(&db, tree, &model, seed);
        assert_eq!(
            db.tree_get(other, b"k000001").unwrap().as_deref(),
            Some(&b"elsewhere"[..])
        );
        let report = db.check().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        assert_eq!(
            report.tree_pages, 4,
            "seed {seed}: two roots left: {report:?}"
        );
        db.close().unwrap();
    }
}

/// A named tree is the same tree on every call and after a reopen; another name is another
/// tree; `find_tree` creates nothing. Catches a catalog entry lost at reopen (the superblock
/// not naming the catalog), a second tree made for a name.
#[test]
fn named_trees_persist_across_reopen() {
    let db = new_store(1);
    assert_eq!(db.find_tree(b"users").unwrap(), None);
    let users = db.tree(b"users").unwrap();
    assert_eq!(db.tree(b"users").unwrap(), users);
    let posts = db.tree(b"posts").unwrap();
    assert_ne!(users, posts);
    db.tree_put(users, b"ann", b"1").unwrap();
    db.flush().unwrap();
    db.tree_put(posts, b"hello", b"2").unwrap();
    let db = reopen(db, 1);
    assert_eq!(db.find_tree(b"users").unwrap(), Some(users));
    assert_eq!(db.tree(b"posts").unwrap(), posts);
    assert_eq!(
        db.tree_get(users, b"ann").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        db.tree_get(posts, b"hello").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    assert_eq!(db.find_tree(b"nobody").unwrap(), None);
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.trees, 3);
    db.close().unwrap();
}

/// Prefix scans both ways, the empty prefix, a prefix ending in 0xff.
#[test]
fn prefix_scans_return_exactly_the_prefixed_keys() {
    let db = new_store(1);
    let tree = db.create_tree().unwrap();
    let keys: Vec<&[u8]> = vec![b"a", b"ab", b"abc", b"ab\xff", b"ab\xff\x01", b"ac", b"b"];
    for k in &keys {
        db.tree_put(tree, k, k).unwrap();
    }
    let scan = |prefix: &[u8], direction| -> Vec<Vec<u8>> {
        db.prefix(tree, prefix, direction)
            .map(|r| r.unwrap().0)
            .collect()
    };
    let want = |prefix: &[u8]| -> Vec<Vec<u8>> {
        let mut w: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| k.starts_with(prefix))
            .map(|k| k.to_vec())
            .collect();
        w.sort();
        w
    };
    for prefix in [&b""[..], b"a", b"ab", b"ab\xff", b"abc", b"z"] {
        assert_eq!(scan(prefix, Direction::Forward), want(prefix), "{prefix:?}");
        let mut rev = want(prefix);
        rev.reverse();
        assert_eq!(scan(prefix, Direction::Reverse), rev, "{prefix:?} reverse");
    }
    db.close().unwrap();
}

/// Writers on two cores (each its own keys of one shared tree, and its own tree) while
/// readers scan and read: every reader's scan is sorted and every value it sees is one a
/// writer wrote for that key; at the end the trees hold exactly the writers' last values.
/// Catches a reader that follows a pointer a concurrent split or merge made stale (a scan
/// out of order, a lost key), counts updated out of step, a merge freeing a page a reader
/// holds.
#[test]
fn concurrent_writers_and_readers_agree_with_the_model() {
    let db = new_store(2);
    let shared = db.create_tree().unwrap();
    let writers = 4u64;
    let own: Vec<TreeId> = (0..writers).map(|_| db.create_tree().unwrap()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for w in 0..writers {
        let h = db.handle();
        let tx = tx.clone();
        let mine = own[w as usize];
        db.runtime()
            .spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + w);
                let mut model = BTreeMap::new();
                for i in 0..3_000u64 {
                    let k = format!("{:04}-w{w}", rng.gen_range(0..800)).into_bytes();
                    if rng.gen_bool(0.3) {
                        h.tree_delete(shared, &k).unwrap();
                        h.tree_delete(mine, &k).unwrap();
                        model.remove(&k);
                    } else {
                        let v = format!("{w}:{i}:{}", "v".repeat((i % 50) as usize)).into_bytes();
                        h.tree_put(shared, &k, &v).unwrap();
                        h.tree_put(mine, &k, &v).unwrap();
                        model.insert(k, v);
                    }
                }
                tx.send(Ok((w, model))).unwrap();
            })
            .unwrap();
    }
    for r in 0..2u64 {
        let h = db.handle();
        let tx = tx.clone();
        db.runtime()
            .spawn(move || {
                let mut rng = SmallRng::seed_from_u64(900 + r);
                for _ in 0..300 {
                    let from = format!("{:04}", rng.gen_range(0..800)).into_bytes();
                    let direction = if rng.gen_bool(0.5) {
                        Direction::Forward
                    } else {
                        Direction::Reverse
                    };
                    let (got, _) = h
                        .tree_entries(shared, Bound::Included(&from), direction, 200, &|_| true)
                        .unwrap();
                    for pair in got.windows(2) {
                        let ordered = match direction {
                            Direction::Forward => pair[0].0 < pair[1].0,
                            Direction::Reverse => pair[0].0 > pair[1].0,
                        };
                        assert!(ordered, "a scan out of order");
                    }
                    for (k, v) in &got {
                        let w = k.split(|&b| b == b'w').nth(1).unwrap();
                        assert!(v.starts_with(w), "a value another writer wrote");
                    }
                }
                tx.send(Err(())).unwrap();
            })
            .unwrap();
    }
    drop(tx);
    let mut union = BTreeMap::new();
    let mut models = Vec::new();
    for (w, model) in rx.into_iter().flatten() {
        union.extend(model.clone());
        models.push((w, model));
    }
    assert_eq!(models.len(), writers as usize);
    assert_same(&db, shared, &union, 0);
    for (w, model) in &models {
        assert_same(&db, own[*w as usize], model, *w);
    }
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.leaked_pages, 0, "{report:?}");
    db.close().unwrap();
}

/// Compaction moves live tree records out of sparse pages (the leaf switched to the copy,
/// the value inline as before) and frees them; the values read back the same, before and
/// after a reopen, and `check` (which counts every page's live bytes against the trees'
/// records) is clean. Catches tree records left behind (no page freed), a move that leaves
/// the leaf naming the old place (a freed page read), a move not staged (lost at reopen).
#[test]
fn compaction_moves_tree_records() {
    let db = new_store(1);
    let tree = db.create_tree().unwrap();
    let mut model = BTreeMap::new();
    for i in 0..2_000u32 {
        let v = vec![(i % 251) as u8; 300];
        db.tree_put(tree, format!("{i:05}").as_bytes(), &v).unwrap();
        model.insert(format!("{i:05}").into_bytes(), v);
    }
    // Three in four overwritten: the first pages fall to a quarter live.
    for i in (0..2_000u32).filter(|i| i % 4 != 0) {
        let v = vec![(i % 13) as u8; 200];
        db.tree_put(tree, format!("{i:05}").as_bytes(), &v).unwrap();
        model.insert(format!("{i:05}").into_bytes(), v);
    }
    let pages = db.compact().unwrap();
    let stats = db.compaction_stats();
    assert!(
        pages > 0 && stats.records_moved > 0,
        "{pages} pages, {stats:?}"
    );
    assert_same(&db, tree, &model, 0);
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    let db = reopen(db, 1);
    assert_same(&db, tree, &model, 0);
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}
