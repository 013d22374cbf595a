//! The index in DRAM: a cold point read costs exactly one device read when the index fits the
//! cache's share; the index is read in at open; an index that does not fit is paged, never
//! refused; the budget's split is reported; old formats are refused with a clear message.

mod common;

use common::{emulated, temp_path, uring, TempFile};
use tamer_store::{Db, DbError, DeviceKind};

const VALUE_BYTES: usize = 1_000;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// A store of `keys` records of `VALUE_BYTES` on an emulated device, closed; returns the
/// device to reopen it.
fn loaded(keys: u64) -> DeviceKind {
    let options = emulated(8 << 20, 64 << 20).cores(1).warm_index(false);
    let db = Db::open("unused", options).unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..keys {
        db.put(&key(k), &common::value_for(&key(k), 1, VALUE_BYTES))
            .unwrap();
    }
    db.close().unwrap();
    DeviceKind::Model(model)
}

/// Reads `k` and returns the device reads (cache misses) and index misses it cost.
fn read_cost(db: &Db, k: u64) -> (u64, u64) {
    let before = db.cache_stats();
    let value = db.get(&key(k)).unwrap().expect("stored");
    assert_eq!(value, common::value_for(&key(k), 1, VALUE_BYTES), "key {k}");
    let after = db.cache_stats();
    (
        after.misses - before.misses,
        after.index_misses - before.index_misses,
    )
}

/// Mutations caught: buckets not read in at open (the first read of each bucket costs two
/// device reads), buckets evicted by data misses (later reads cost two), a lookup that reads
/// a record whose hash fragment does not match.
#[test]
fn a_cold_read_costs_exactly_one_device_read_when_the_index_fits() {
    let keys = 4_000;
    let device = loaded(keys);
    // 1 MiB of frames: the index (~10 buckets) fits; the 1.4 MiB of records do not.
    let db = Db::open(
        "unused",
        emulated(1 << 20, 64 << 20).device(device).cores(1),
    )
    .unwrap();
    let stats = db.index_stats().unwrap();
    assert!(stats.fits(), "{stats:?}");
    assert_eq!(stats.resident_index_pages, stats.buckets, "read in at open");
    assert_eq!(stats.keys, keys);
    // Records far apart (distinct data pages).
    for k in (0..keys).step_by(97) {
        assert_eq!(read_cost(&db, k), (1, 0), "key {k}");
    }
    // A sweep over every record turns the data frames over several times; the buckets stay.
    let before = db.cache_stats();
    for k in 0..keys {
        db.get(&key(k)).unwrap().expect("stored");
    }
    let swept = db.cache_stats();
    assert_eq!(
        swept.index_misses, before.index_misses,
        "a bucket was evicted"
    );
    assert!(swept.misses - before.misses > 1_000);
    // Records read early in the sweep are cold again: one read each.
    for k in (48..keys / 2).step_by(97) {
        assert_eq!(read_cost(&db, k), (1, 0), "after the sweep, key {k}");
    }
    let after = db.index_stats().unwrap();
    assert_eq!(after.resident_index_pages, after.buckets);
    db.close().unwrap();
}

/// The control for the test above: without the warm-up, a bucket's first use is an index
/// miss, so the counting can tell the two apart.
#[test]
fn without_the_warm_up_a_bucket_is_read_on_first_use() {
    let device = loaded(2_000);
    let options = emulated(1 << 20, 64 << 20)
        .device(device)
        .cores(1)
        .warm_index(false);
    let db = Db::open("unused", options).unwrap();
    assert_eq!(db.index_stats().unwrap().resident_index_pages, 0);
    assert_eq!(read_cost(&db, 0), (2, 1));
    db.close().unwrap();
}

/// Mutation caught: an index larger than its share failing (or a lookup giving up) instead
/// of paging its buckets in and out.
#[test]
fn an_index_that_does_not_fit_is_paged_and_every_key_reads_back() {
    let keys = 20_000u64;
    let options = emulated(8 << 20, 64 << 20).cores(1).warm_index(false);
    let db = Db::open("unused", options).unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..keys {
        db.put(&key(k), &common::value_for(&key(k), 2, 40)).unwrap();
    }
    db.close().unwrap();
    // Two sets of 8 frames: far fewer than the ~60 buckets.
    let pinned = 9 * 4096; // the directory at depth 12
    let options = emulated(pinned + 2 * 8 * 4096, 64 << 20)
        .device(DeviceKind::Model(model))
        .cores(1);
    let db = Db::open("unused", options).unwrap();
    let stats = db.index_stats().unwrap();
    assert!(!stats.fits(), "{stats:?}");
    assert!(stats.bytes_per_key() > 0.0);
    for k in (0..keys).step_by(7) {
        let value = db.get(&key(k)).unwrap().expect("stored");
        assert_eq!(value, common::value_for(&key(k), 2, 40), "key {k}");
    }
    assert!(db.cache_stats().index_misses > 0);
    db.close().unwrap();
}

/// The reported split adds up, and the index costs a bounded number of bytes per key.
/// Mutation caught: bucket counting that counts a bucket once per directory slot.
#[test]
fn the_budget_split_and_bytes_per_key_are_reported() {
    let device = loaded(4_000);
    let budget = 2 << 20;
    let db = Db::open("unused", emulated(budget, 64 << 20).device(device).cores(1)).unwrap();
    let stats = db.index_stats().unwrap();
    assert!(stats.pinned_bytes + stats.frames_bytes <= budget);
    assert!(stats.pinned_bytes + stats.frames_bytes > budget - 32 * 1024);
    assert_eq!(
        stats.data_frames_bytes() + stats.resident_index_pages * 4096,
        stats.frames_bytes
    );
    // 4000 keys in 452-entry buckets: at least 9, at most 16 after splits.
    assert!((9..=16).contains(&stats.buckets), "{stats:?}");
    // Bucket pages at 4096 / (452 × fill ≥ 0.5) ≈ 18 B/key at most, plus the directory.
    let directory = stats.pinned_bytes - 4096;
    let bucket_bytes_per_key = (stats.index_bytes - directory) as f64 / stats.keys as f64;
    assert!(bucket_bytes_per_key < 18.2, "{bucket_bytes_per_key}");
    db.close().unwrap();
}

/// Keys whose buckets split unevenly under `common::TEST_HASH_KEY` (found by search over
/// 8,000-20,000 keys with 370-entry buckets: 38 buckets, and with 6 sets one set holds more
/// than its index ways while the total fits).
const KEYS_UNEVEN: u64 = 11_500;

/// Mutations caught: an index said to fit because its total fits, while buckets of different
/// depths crowd one set beyond its index ways (warmed at open, then pushed out by data pages:
/// a cold read there costs two device reads); a warm-up at open that reads nothing when the
/// index does not fit, or more of a set's bucket pages than its index ways.
#[test]
fn the_index_fits_only_when_every_set_holds_its_buckets() {
    let device = loaded(KEYS_UNEVEN);
    let pinned = 9 * 4096; // the directory at depth 12
    let mut uneven_seen = false;
    for sets in 5..=7u64 {
        let options = emulated(pinned + sets * 8 * 4096, 64 << 20)
            .device(device.clone())
            .cores(1);
        let db = Db::open("unused", options).unwrap();
        let stats = db.index_stats().unwrap();
        uneven_seen |= stats.buckets <= stats.index_capacity_pages && stats.index_sets_over > 0;
        // The warm-up read each set's bucket pages up to its index ways, fitting or not.
        assert_eq!(
            stats.resident_index_pages, stats.placeable_index_pages,
            "{sets} sets: {stats:?}"
        );
        assert_eq!(stats.fits(), stats.placeable_index_pages == stats.buckets);
        if !stats.fits() {
            assert!(stats.placeable_index_pages > 0, "{sets} sets: {stats:?}");
        }
        // Data misses through every set.
        for k in (0..KEYS_UNEVEN).step_by(13) {
            db.get(&key(k)).unwrap().expect("stored");
        }
        let after = db.index_stats().unwrap();
        if stats.fits() {
            assert_eq!(
                after.resident_index_pages, after.buckets,
                "{sets} sets: {after:?}"
            );
        }
        db.close().unwrap();
    }
    assert!(
        uneven_seen,
        "no configuration crowded a set while the total fit"
    );
}

/// A budget too small for the directory is refused with a message naming both.
#[test]
fn a_budget_smaller_than_the_directory_is_refused() {
    match Db::open("unused", emulated(16 << 10, 16 << 20)) {
        Err(DbError::Config(msg)) => assert!(msg.contains("directory"), "{msg}"),
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

/// A store written in format 1 (24-byte bucket entries) is refused, not misread.
#[test]
fn a_version_1_store_is_refused_with_a_clear_error() {
    let path = temp_path("format-v1");
    let _cleanup = TempFile(path.clone());
    let db = Db::open(&path, uring(1 << 20)).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let mut page = vec![0u8; 4096];
        file.read_exact_at(&mut page, 0).unwrap();
        page[8..12].copy_from_slice(&1u32.to_le_bytes());
        tamer_cache::checksum::seal_page(0, &mut page);
        file.write_all_at(&page, 0).unwrap();
    }
    match Db::open(&path, uring(1 << 20)) {
        Err(DbError::Config(msg)) => assert!(msg.contains("format version 1"), "{msg}"),
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

/// Puts `keys` (from `from`) with values naming the key and `round`.
fn put_range(db: &Db, from: u64, keys: u64, round: u64) {
    for k in from..from + keys {
        db.put(&key(k), &common::value_for(&key(k), round, 24))
            .unwrap();
    }
}

/// Every key below `keys` holds its `round` value.
fn assert_range(db: &Db, keys: u64, round: u64) {
    for k in 0..keys {
        let got = db.get(&key(k)).unwrap();
        assert_eq!(got, Some(common::value_for(&key(k), round, 24)), "key {k}");
    }
}

/// The directory past a 4-slot fixed region, in segments: 60,000 keys double it to depth
/// 8-9 (six or seven segments), then the store is checked, reopened (recovery reads the
/// segments' chosen copies), grown further after the reopen, and reopened again.
/// Mutations caught: a slot placed at the wrong segment page or offset (keys lost or a
/// check problem), segments missing from the superblock or ignored at open, segment pages
/// not written by checkpoints (a reopen reads their older copies), a doubling that writes
/// the upper half but not into the new segment.
#[test]
fn the_directory_grows_past_its_fixed_region_in_segments() {
    let options = || {
        emulated(4 << 20, 64 << 20)
            .max_directory_depth(30)
            .pinned_directory_depth(2)
            .cores(1)
    };
    let db = Db::open("unused", options()).unwrap();
    let model = db.emulator_model().unwrap();
    put_range(&db, 0, 60_000, 1);
    assert_range(&db, 60_000, 1);
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.directory_pages > 0, "{report:?}");
    db.close().unwrap();

    let reopen = || Db::open("unused", options().device(DeviceKind::Model(model.clone())));
    let db = reopen().unwrap();
    assert_range(&db, 60_000, 1);
    put_range(&db, 60_000, 40_000, 1);
    put_range(&db, 0, 10_000, 2);
    let grown = db.check().unwrap();
    assert!(grown.is_clean(), "{grown:?}");
    assert!(
        grown.directory_pages > report.directory_pages,
        "{grown:?} vs {report:?}"
    );
    db.close().unwrap();

    let db = reopen().unwrap();
    assert_range(&db, 10_000, 2);
    for k in 10_000..100_000 {
        assert_eq!(
            db.get(&key(k)).unwrap(),
            Some(common::value_for(&key(k), 1, 24)),
            "key {k}"
        );
    }
    assert_eq!(db.len(), 100_000);
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}

/// A store refuses a pinned region deeper than the bound, and an existing store keeps the
/// depths it was created with whatever a reopen asks. Catches the option ignored at creation
/// or taken over the superblock's at reopen.
#[test]
fn the_pinned_region_is_chosen_at_creation() {
    let err = Db::open(
        "unused",
        emulated(4 << 20, 16 << 20).pinned_directory_depth(31),
    )
    .err()
    .expect("refused");
    assert!(matches!(err, DbError::Config(_)), "{err}");
    let db = Db::open(
        "unused",
        emulated(4 << 20, 16 << 20).pinned_directory_depth(3),
    )
    .unwrap();
    let model = db.emulator_model().unwrap();
    put_range(&db, 0, 5_000, 1);
    db.close().unwrap();
    let db = Db::open(
        "unused",
        emulated(4 << 20, 16 << 20)
            .pinned_directory_depth(10)
            .device(DeviceKind::Model(model)),
    )
    .unwrap();
    assert_range(&db, 5_000, 1);
    assert!(db.check().unwrap().directory_pages > 0);
    db.close().unwrap();
}

/// Prefetch reads the records of a batch of keys with their misses overlapped, so the
/// reads that follow cost (almost) no device read. Mutations caught: a prefetch that fetches nothing
/// or only the buckets (the reads after it miss), one that fetches a key's neighbours but not
/// its own record, one that fails on a key that is absent.
#[test]
fn prefetch_brings_a_batch_of_records_in_before_their_reads() {
    let keys = 4_000;
    let device = loaded(keys);
    let db = Db::open(
        "unused",
        emulated(1 << 20, 64 << 20).device(device).cores(1),
    )
    .unwrap();
    let batch: Vec<[u8; 8]> = (0..keys).step_by(131).map(key).collect();
    let (asked, misses_during, misses_after) = db
        .run(move |handle| {
            let mut refs: Vec<&[u8]> = batch.iter().map(|k| &k[..]).collect();
            let absent = key(keys + 7);
            refs.push(&absent);
            let before = handle.cache().stats();
            let asked = handle.prefetch(&refs).unwrap();
            let during = handle.cache().stats();
            for k in &batch {
                assert!(handle.get(k).unwrap().is_some());
            }
            let after = handle.cache().stats();
            (
                asked,
                during.misses - before.misses,
                after.misses - during.misses,
            )
        })
        .unwrap();
    let records = (0..keys).step_by(131).count() as u64;
    assert!(
        asked >= records,
        "asked for {asked} pages, {records} records"
    );
    assert!(misses_during >= records / 2, "{misses_during} reads issued");
    // Cold pages enter a set's probationary frame (the cache's admission): two prefetched
    // pages of one set can displace each other, so a few reads still miss.
    assert!(
        misses_after <= records / 4,
        "{misses_after} of {records} reads missed after prefetch"
    );
}
