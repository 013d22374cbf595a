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
    get(tx, ns, b"k", 0).unwrap().map(|e| e.payload)
}

/// An expired key reads as absent and is deleted; a live one is there; `delete` says whether
/// a live key was removed. Catches expiry compared the wrong way (`<` for `<=`), or an
/// expired key counted as deleted.
#[test]
fn expired_keys_read_as_absent() {
    let db = store();
    db.transaction(|tx| {
        put(tx, 1, b"old", &Entry::string(b"a".to_vec(), Some(1_000))).unwrap();
        put(tx, 1, b"new", &Entry::string(b"b".to_vec(), Some(5_000))).unwrap();
        put(tx, 1, b"ever", &Entry::string(b"c".to_vec(), None)).unwrap();
        Ok(())
    })
    .unwrap();
    let seen = db
        .transaction(|tx| {
            Ok((
                get(tx, 1, b"old", 1_000).unwrap(),
                get(tx, 1, b"new", 1_000).unwrap().is_some(),
                delete(tx, 1, b"old", 1_000).unwrap(),
                delete(tx, 1, b"ever", 1_000).unwrap(),
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
            put(tx, ns, b"k", &Entry::string(v.to_vec(), None)).unwrap();
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
