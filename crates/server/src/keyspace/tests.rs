//! The keyspace on a real store (the emulated device): encodings, expiry, databases as
//! namespaces across a reopen. Each test names the mutation it catches.

use proptest::prelude::*;
use tamer_store::{Db, DbOptions, DeviceKind};

use super::*;

fn store() -> Db {
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 16 << 20,
    };
    Db::open("unused", DbOptions::new(4 << 20).device(device).cores(1)).unwrap()
}

proptest! {
    /// Any entry reads back as written. Catches a header field moved or an expiry of 0 kept.
    #[test]
    fn entries_round_trip(payload in prop::collection::vec(any::<u8>(), 0..64),
                          at in prop::option::of(1u64..u64::MAX)) {
        let entry = Entry::string(payload, at);
        prop_assert_eq!(Entry::decode(&entry.encode()).unwrap(), entry);
    }

    /// Bytes the keyspace did not write are refused, never misread. Catches a decoder that
    /// accepts short values or unknown kinds.
    #[test]
    fn foreign_values_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..16)) {
        let valid = bytes.len() >= HEADER_BYTES && bytes[0] == 1 && bytes[1..4] == [0, 0, 0];
        prop_assert_eq!(Entry::decode(&bytes).is_ok(), valid);
    }
}

/// `database`'s value of `k`, as `tx` sees it.
fn value_in(tx: &mut Tx<'_>, database: usize) -> Option<Vec<u8>> {
    let ns = Databases::load(tx).unwrap().namespace(database).unwrap();
    get(&crate::keyspace::scope::Scope::detached(ns, 0), tx, b"k")
        .unwrap()
        .map(|e| e.payload)
}

/// An expired key reads as absent and is deleted; a live one is there; `delete` says whether
/// a live key was removed. Catches expiry compared the wrong way (`<` for `<=`), or an
/// expired key counted as deleted.
#[test]
fn expired_keys_read_as_absent() {
    let db = store();
    db.transaction(|tx| {
        put(
            &crate::keyspace::scope::Scope::detached(1, 0),
            tx,
            b"old",
            &Entry::string(b"a".to_vec(), Some(1_000)),
        )
        .unwrap();
        put(
            &crate::keyspace::scope::Scope::detached(1, 0),
            tx,
            b"new",
            &Entry::string(b"b".to_vec(), Some(5_000)),
        )
        .unwrap();
        put(
            &crate::keyspace::scope::Scope::detached(1, 0),
            tx,
            b"ever",
            &Entry::string(b"c".to_vec(), None),
        )
        .unwrap();
        Ok(())
    })
    .unwrap();
    let seen = db
        .transaction(|tx| {
            Ok((
                get(
                    &crate::keyspace::scope::Scope::detached(1, 1_000),
                    tx,
                    b"old",
                )
                .unwrap(),
                get(
                    &crate::keyspace::scope::Scope::detached(1, 1_000),
                    tx,
                    b"new",
                )
                .unwrap()
                .is_some(),
                delete(
                    &crate::keyspace::scope::Scope::detached(1, 1_000),
                    tx,
                    b"old",
                )
                .unwrap(),
                delete(
                    &crate::keyspace::scope::Scope::detached(1, 1_000),
                    tx,
                    b"ever",
                )
                .unwrap(),
            ))
        })
        .unwrap();
    assert_eq!(
        seen,
        (None, true, false, true),
        "(old, new live, old deleted, ever deleted)"
    );
    assert!(
        !db.contains(&store_key(1, b"old")).unwrap(),
        "the expired key was deleted"
    );
    assert!(db.contains(&store_key(1, b"new")).unwrap());
    db.close().unwrap();
}

/// Databases are namespaces: the same key in two databases is two keys, `SWAPDB` exchanges
/// them, `FLUSHDB` empties one database only, and all of it survives a reopen. Catches a swap
/// that copies instead of exchanging, a flush that reuses a namespace (old keys reappear), a
/// record not written back.
#[test]
fn databases_swap_and_flush_by_namespace() {
    let device = tamer_device::EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(16 << 20)
        .build()
        .unwrap();
    let options = || {
        DbOptions::new(4 << 20)
            .device(DeviceKind::Model(device.clone()))
            .cores(1)
    };
    let db = Db::open("unused", options()).unwrap();
    db.transaction(|tx| {
        for (database, v) in [(0, b"zero"), (1, b"one!")] {
            let ns = Databases::load(tx).unwrap().namespace(database).unwrap();
            put(
                &crate::keyspace::scope::Scope::detached(ns, 0),
                tx,
                b"k",
                &Entry::string(v.to_vec(), None),
            )
            .unwrap();
        }
        Databases::swap(tx, 0, 1).unwrap();
        Ok(())
    })
    .unwrap();
    db.close().unwrap();
    let db = Db::open("unused", options()).unwrap();
    let swapped = db
        .transaction(|tx| Ok((value_in(tx, 0), value_in(tx, 1))))
        .unwrap();
    assert_eq!(swapped, (Some(b"one!".to_vec()), Some(b"zero".to_vec())));
    let (old, after, namespaces, out_of_range) = db
        .transaction(|tx| {
            let old = Databases::flush(tx, 0).unwrap();
            let after = (value_in(tx, 0), value_in(tx, 1));
            let namespaces = Databases::load(tx).unwrap().namespaces;
            let out_of_range = matches!(
                Databases::swap(tx, 0, DATABASES),
                Err(KeyspaceError::NoSuchDatabase(16))
            );
            Ok((old, after, namespaces, out_of_range))
        })
        .unwrap();
    assert_eq!(after, (None, Some(b"zero".to_vec())));
    assert!(
        !namespaces.contains(&old),
        "a flushed namespace is never reused"
    );
    assert!(out_of_range);
    db.close().unwrap();
}

/// A store on one emulated device that survives a reopen (close, then open again).
fn reopenable() -> impl Fn() -> Db {
    let device = tamer_device::EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(64 << 20)
        .build()
        .unwrap();
    move || {
        let options = DbOptions::new(8 << 20)
            .device(DeviceKind::Model(device.clone()))
            .cores(1);
        Db::open("unused", options).unwrap()
    }
}

fn namespace_of(db: &Db, database: usize) -> u32 {
    db.transaction(move |tx| Ok(Databases::load(tx).unwrap().namespace(database).unwrap()))
        .unwrap()
}

fn count(db: &Db, ns: u32) -> u64 {
    db.transaction(move |tx| Ok(key_count(tx, ns).unwrap()))
        .unwrap()
}

/// Runs reclaim steps until idle; how many ran.
fn reclaim_all(db: &Db) -> usize {
    let mut steps = 0;
    while crate::keyspace::reclaim::step(db).unwrap() == Reclaim::Working {
        steps += 1;
        assert!(steps < 1_000_000, "a reclaim pass ends");
    }
    steps
}

/// `key_count` equals a model's count after seeded random creates, overwrites, removes and
/// lazy expiries, and after a reopen. Catches an overwrite counted as a create, an expired
/// key's deletion not counted, a remove of an absent key counted, a shard record not
/// written back.
#[test]
fn key_counts_follow_creates_and_removes() {
    let open = reopenable();
    let db = open();
    let ns = namespace_of(&db, 0);
    let seed: u64 = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut x = seed | 1;
    let mut model = std::collections::HashMap::new();
    for i in 0..2_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("k{}", x % 300).into_bytes();
        let op = x >> 60;
        let now = 1_000 + i;
        let k = key.clone();
        let live = db
            .transaction(move |tx| {
                Ok(match op {
                    0..=7 => {
                        let at = (op == 7).then_some(now + 1);
                        put(
                            &crate::keyspace::scope::Scope::detached(ns, 0),
                            tx,
                            &k,
                            &Entry::string(b"v".to_vec(), at),
                        )
                        .unwrap();
                        Some(at)
                    }
                    8..=11 => {
                        remove(tx, ns, &k).unwrap();
                        None
                    }
                    _ => get(&crate::keyspace::scope::Scope::detached(ns, now), tx, &k)
                        .unwrap()
                        .map(|e| e.expire_at_ms),
                })
            })
            .unwrap();
        match live {
            Some(at) => model.insert(key, at),
            None => model.remove(&key),
        };
        // Keys that expired by now and were read are gone; others still count.
        assert_eq!(count(&db, ns), model.len() as u64, "seed {seed}, op {i}");
    }
    db.close().unwrap();
    let db = open();
    assert_eq!(
        count(&db, ns),
        model.len() as u64,
        "after a reopen, seed {seed}"
    );
    db.close().unwrap();
}

/// `FLUSHDB` makes its keys unreachable at once and the reclaim deletes every one of them,
/// and their count records, while another database's keys stay: the store's key count returns
/// to what it was before they were written, also when the pass is cut by a reopen. Catches a
/// pass that stops early, deletes a live database's keys, is forgotten across a
/// reopen, or leaves count records behind.
#[test]
fn flushed_keys_are_reclaimed_and_the_pass_resumes() {
    let open = reopenable();
    let db = open();
    let (ns0, ns1) = (namespace_of(&db, 0), namespace_of(&db, 1));
    for i in 0..200u32 {
        db.transaction(move |tx| {
            put(
                &crate::keyspace::scope::Scope::detached(ns1, 0),
                tx,
                format!("keep{i}").as_bytes(),
                &Entry::string(vec![1], None),
            )
            .unwrap();
            Ok(())
        })
        .unwrap();
    }
    let before = db.len();
    for chunk in 0..40u32 {
        db.transaction(move |tx| {
            for i in 0..100 {
                let key = format!("gone{}", chunk * 100 + i);
                put(
                    &crate::keyspace::scope::Scope::detached(ns0, 0),
                    tx,
                    key.as_bytes(),
                    &Entry::string(vec![2; 100], None),
                )
                .unwrap();
            }
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(count(&db, ns0), 4_000);
    db.transaction(|tx| Ok(Databases::flush(tx, 0).unwrap()))
        .unwrap();
    assert_eq!(count(&db, namespace_of(&db, 0)), 0);
    // A few steps, then a reopen mid-pass: the pass resumes from its saved cursor.
    for _ in 0..3 {
        assert_eq!(
            crate::keyspace::reclaim::step(&db).unwrap(),
            Reclaim::Working
        );
    }
    db.close().unwrap();
    let db = open();
    let steps = reclaim_all(&db);
    assert!(steps > 0);
    assert_eq!(
        db.len(),
        before,
        "every flushed key and count record reclaimed"
    );
    assert_eq!(count(&db, ns1), 200);
    let still = db
        .transaction(move |tx| {
            Ok(get(
                &crate::keyspace::scope::Scope::detached(ns1, 0),
                tx,
                b"keep7",
            )
            .unwrap()
            .is_some())
        })
        .unwrap();
    assert!(still, "another database's keys stay");
    assert_eq!(crate::keyspace::reclaim::step(&db).unwrap(), Reclaim::Idle);
    db.close().unwrap();
}

/// A keyspace from before key counts (a 68-byte `databases` record, keys but no count
/// records, a namespace flushed and never reclaimed) is counted once and its garbage
/// reclaimed; a second upgrade does nothing. Catches a store that keeps reporting 0 keys, a
/// dead namespace counted, old garbage never reclaimed, a scan at every start.
#[test]
fn an_old_keyspace_is_counted_once() {
    let open = reopenable();
    let db = open();
    db.transaction(|tx| {
        let mut v1 = Vec::new();
        for ns in 1..=DATABASES as u32 {
            v1.extend_from_slice(&ns.to_le_bytes());
        }
        v1.extend_from_slice(&60u32.to_le_bytes());
        tx.put(&store_key(META, DATABASES_KEY), &v1)?;
        for i in 0..700u32 {
            let ns = [1, 2, 55][i as usize % 3];
            let key = store_key(ns, format!("k{i}").as_bytes());
            tx.put(&key, &Entry::string(vec![0], None).encode())?;
        }
        Ok(())
    })
    .unwrap();
    assert!(upgrade(&db).unwrap());
    assert_eq!(
        (count(&db, 1), count(&db, 2), count(&db, 55)),
        (234, 233, 0)
    );
    reclaim_all(&db);
    let left = db
        .transaction(|tx| Ok(tx.scan_slots(0, 1 << 20)?.0))
        .unwrap()
        .into_iter()
        .filter(|k| k[..4] == 55u32.to_be_bytes())
        .count();
    assert_eq!(left, 0, "the never-reclaimed namespace is reclaimed");
    assert!(!upgrade(&db).unwrap(), "once");
    db.close().unwrap();
}
