//! The page map: free space and live bytes are on the device, the allocator is rebuilt from
//! them at open, and extents may straddle a group's map pages.

mod common;

use common::{emulated, value_for};
use tamer_store::{Db, DeviceKind};

fn space(db: &Db) -> (u64, u64) {
    let (high, free, _, leaked) = db.run(|h| h.space_stats()).unwrap();
    assert_eq!(leaked, 0);
    (high, free)
}

/// Pages freed before a clean close are free after reopening (the map, not a list written at
/// close, says so), and new records reuse them instead of growing the store. Mutations
/// caught: a free not recorded in the map, free extents not rebuilt at open.
#[test]
fn free_space_survives_a_clean_close() {
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).cores(1)).unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..4_000u32 {
        db.put(&k.to_be_bytes(), &value_for(&k.to_be_bytes(), 0, 500))
            .unwrap();
    }
    for k in 0..4_000u32 {
        if k % 10 != 0 {
            assert!(db.delete(&k.to_be_bytes()).unwrap());
        }
    }
    // Freed pages are reusable once a checkpoint made the frees durable.
    db.flush().unwrap();
    let before_close = space(&db);
    assert!(before_close.1 > 0, "deleting freed pages");
    db.close().unwrap();
    let reopened = || {
        Db::open(
            "unused",
            emulated(1 << 20, 64 << 20)
                .cores(1)
                .device(DeviceKind::Model(model.clone())),
        )
        .unwrap()
    };
    let db = reopened();
    let (high, free) = space(&db);
    // Closing frees the open page when nothing lives in it; nothing else changes.
    assert_eq!(high, before_close.0);
    assert!(
        (before_close.1..=before_close.1 + 1).contains(&free),
        "{free} pages free after reopening, {} before closing",
        before_close.1
    );
    for k in 4_000..5_000u32 {
        db.put(&k.to_be_bytes(), &value_for(&k.to_be_bytes(), 0, 500))
            .unwrap();
    }
    let (high_after, _) = space(&db);
    assert_eq!(high_after, high, "new records reuse freed pages");
    db.close().unwrap();
    let db = reopened();
    for k in (0..4_000u32).step_by(10).chain(4_000..5_000) {
        assert_eq!(
            db.get(&k.to_be_bytes()).unwrap(),
            Some(value_for(&k.to_be_bytes(), 0, 500)),
            "key {k}"
        );
    }
    db.close().unwrap();
}

/// Values of 3 MiB (extents of 770 pages) straddle the 1018-page groups and their map pages:
/// they read back whole, and freeing them frees every page. Mutation caught: extent pages
/// numbered physically (`first + i`), which overwrites the next group's map pages.
#[test]
fn extents_straddle_map_pages() {
    const LEN: usize = 3 << 20;
    let db = Db::open(
        "unused",
        emulated(4 << 20, 64 << 20).cores(1).max_value_bytes(LEN),
    )
    .unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..4u8 {
        db.put(&[k], &value_for(&[k], 0, LEN)).unwrap();
    }
    for k in 0..4u8 {
        assert_eq!(db.get(&[k]).unwrap(), Some(value_for(&[k], 0, LEN)), "{k}");
    }
    let (high, free) = space(&db);
    assert!(high > 2 * 1018 && free < 10, "{high} pages, {free} free");
    db.close().unwrap();
    let db = Db::open(
        "unused",
        emulated(4 << 20, 64 << 20)
            .cores(1)
            .max_value_bytes(LEN)
            .device(DeviceKind::Model(model)),
    )
    .unwrap();
    for k in 0..4u8 {
        assert_eq!(db.get(&[k]).unwrap(), Some(value_for(&[k], 0, LEN)), "{k}");
        assert!(db.delete(&[k]).unwrap());
    }
    db.flush().unwrap();
    let (high_after, free_after) = space(&db);
    assert_eq!(high_after, high);
    // In use: the first bucket's two copies and the staging queue (64 MiB device / 64).
    let queue_pages = (64 << 20) / 4096 / 64;
    assert!(
        free_after + 2 + queue_pages >= high,
        "{free_after} of {high} pages free once the extents are gone"
    );
    db.close().unwrap();
}

/// Sparse pages left by overwrites are found again after a reopen (the queue of sparse pages
/// is in DRAM only; the page map has every data page's live bytes): 3,000 keys of 300 bytes,
/// every key but one in ten overwritten, closed, reopened, then `compact` frees the old
/// pages. Catches a reopened store that never compacts its old sparse pages (and a dropped
/// hint lost for good: the rescan is the same path).
#[test]
fn sparse_pages_are_found_again_after_a_reopen() {
    let db = Db::open("unused", emulated(2 << 20, 32 << 20).cleaner(false)).unwrap();
    let model = db.emulator_model().unwrap();
    for round in 0..2u8 {
        for k in 0..3_000u32 {
            if round == 0 || k % 10 != 0 {
                db.put(&k.to_be_bytes(), &[round; 300]).unwrap();
            }
        }
    }
    db.close().unwrap();
    let db = Db::open(
        "unused",
        emulated(2 << 20, 32 << 20)
            .cleaner(false)
            .device(DeviceKind::Model(model)),
    )
    .unwrap();
    assert_eq!(db.compaction_stats().queued, 0, "the queue starts empty");
    let (_, free_before) = space(&db);
    let taken = db.compact().unwrap();
    let stats = db.compaction_stats();
    assert!(
        taken > 0 && stats.pages_compacted > 0,
        "{taken} taken, {stats:?}"
    );
    db.flush().unwrap();
    let (_, free_after) = space(&db);
    assert!(
        free_after > free_before,
        "free pages {free_before} -> {free_after}"
    );
    for k in 0..3_000u32 {
        let want = if k % 10 == 0 { 0 } else { 1 };
        assert_eq!(
            db.get(&k.to_be_bytes()).unwrap(),
            Some(vec![want; 300]),
            "key {k}"
        );
    }
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}
