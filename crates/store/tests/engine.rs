//! The engine against a reference BTreeMap, page-boundary sizes, limits, ENOSPC, checksums,
//! the cursor, space reuse. Seeds are fixed and printed on failure.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_store::{Db, DbError, DbHandle, DeviceKind, MAX_KEY_BYTES};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Job<R> = Box<dyn FnOnce(DbHandle) -> R + Send>;

fn pick_len(rng: &mut SmallRng) -> usize {
    match rng.gen_range(0..20) {
        0 => rng.gen_range(4000..4200),
        1 => rng.gen_range(8000..13000),
        2 => 0,
        _ => rng.gen_range(1..300),
    }
}

/// One user thread's seeded random operations on its own keys, checked against its model.
fn worker(
    h: DbHandle,
    seed: u64,
    thread: usize,
    ops: usize,
    mut model: Model,
) -> Result<Model, String> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (thread as u64).wrapping_mul(0x9E37_79B9));
    for op in 0..ops {
        let key = format!("t{thread}-k{}", rng.gen_range(0..150)).into_bytes();
        let ctx = || {
            format!(
                "seed {seed} thread {thread} op {op} key {:?}",
                String::from_utf8_lossy(&key)
            )
        };
        match rng.gen_range(0..10) {
            0..=3 => {
                let value = value_for(&key, rng.gen(), pick_len(&mut rng));
                h.put(&key, &value)
                    .map_err(|e| format!("{}: put: {e}", ctx()))?;
                model.insert(key.clone(), value);
            }
            4..=5 => {
                let was = h
                    .delete(&key)
                    .map_err(|e| format!("{}: delete: {e}", ctx()))?;
                if was != model.remove(&key).is_some() {
                    return Err(format!("{}: delete returned {was}", ctx()));
                }
            }
            6 => {
                let has = h
                    .contains(&key)
                    .map_err(|e| format!("{}: contains: {e}", ctx()))?;
                if has != model.contains_key(&key) {
                    return Err(format!("{}: contains returned {has}", ctx()));
                }
            }
            _ => {
                let got = h.get(&key).map_err(|e| format!("{}: get: {e}", ctx()))?;
                if got.as_ref() != model.get(&key) {
                    return Err(format!(
                        "{}: get returned {:?} bytes, model {:?}",
                        ctx(),
                        got.map(|v| v.len()),
                        model.get(&key).map(|v| v.len())
                    ));
                }
            }
        }
    }
    Ok(model)
}

fn check_all(db: &Db, expected: &Model, seed: u64) {
    for (k, v) in expected {
        assert_eq!(
            db.get(k)
                .unwrap_or_else(|e| panic!("seed {seed}: get: {e}"))
                .as_ref(),
            Some(v),
            "seed {seed}: key {:?}",
            String::from_utf8_lossy(k)
        );
    }
    let mut seen = BTreeSet::new();
    for item in db.cursor() {
        let (k, v) = item.unwrap_or_else(|e| panic!("seed {seed}: cursor: {e}"));
        assert_eq!(expected.get(&k), Some(&v), "seed {seed}: cursor value");
        assert!(seen.insert(k), "seed {seed}: cursor returned a key twice");
    }
    assert_eq!(
        seen.len(),
        expected.len(),
        "seed {seed}: cursor missed keys"
    );
    assert_eq!(db.len(), expected.len() as u64, "seed {seed}: len");
}

fn model_check(open: impl Fn() -> Db, seed: u64) -> Model {
    eprintln!("model check seed {seed}");
    const THREADS: usize = 24;
    let mut models: Vec<Model> = vec![Model::new(); THREADS];
    let mut all = Model::new();
    for round in 0..3 {
        let db = open();
        let jobs: Vec<Job<Result<Model, String>>> = models
            .iter()
            .cloned()
            .enumerate()
            .map(|(t, model)| {
                let s = seed.wrapping_add(round);
                Box::new(move |h: DbHandle| worker(h, s, t, 300, model)) as Box<_>
            })
            .collect();
        for (t, result) in run_parallel(&db, jobs).into_iter().enumerate() {
            models[t] = result.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        all = models
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        check_all(&db, &all, seed);
        db.close()
            .unwrap_or_else(|e| panic!("seed {seed}: close: {e}"));
        let db = open();
        check_all(&db, &all, seed);
        db.close().unwrap();
    }
    all
}

#[test]
fn model_check_emulated_with_reopen() {
    let seed = 0x5EED_0001;
    let first = emulated(4 << 20, 64 << 20);
    let db = Db::open("unused", first).unwrap();
    let model = db.emulator_model().unwrap();
    db.close().unwrap();
    let _ = model_check(
        || {
            Db::open(
                "unused",
                emulated(4 << 20, 0).device(DeviceKind::Model(model.clone())),
            )
            .unwrap()
        },
        seed,
    );
}

#[test]
fn model_check_uring_file_with_reopen() {
    let seed = 0x5EED_0002;
    let file = TempFile(temp_path("model"));
    let _ = model_check(|| Db::open(&file.0, uring(2 << 20)).unwrap(), seed);
}

/// The os-paging baseline's device (the file mapped, the kernel pages) is the same engine on
/// the same file format: a store written through the mapping reopens through io_uring.
#[test]
fn model_check_mmap_file_with_reopen_then_uring() {
    let seed = 0x5EED_0003;
    let file = TempFile(temp_path("model-mmap"));
    let all = model_check(
        || Db::open(&file.0, uring(2 << 20).device(DeviceKind::Mmap)).unwrap(),
        seed,
    );
    let db = Db::open(&file.0, uring(2 << 20)).unwrap();
    check_all(&db, &all, seed);
    db.close().unwrap();
}

#[test]
fn values_around_page_boundaries() {
    let file = TempFile(temp_path("sizes"));
    let mut sizes: Vec<usize> = vec![
        0, 1, 4087, 4088, 4089, 4090, 4091, 4092, 4093, 4094, 4095, 4096, 4097,
    ];
    sizes.extend([
        4056,
        4057,
        4063,
        4064,
        4065,
        8191,
        8192,
        8193,
        3 * 4096,
        1 << 20,
    ]);
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    for &n in &sizes {
        let key = format!("size-{n}").into_bytes();
        db.put(&key, &value_for(&key, 1, n)).unwrap();
    }
    // A large key too (it makes the record an extent).
    let big_key = vec![7u8; 10_000];
    db.put(&big_key, b"v").unwrap();
    let check = |db: &Db| {
        for &n in &sizes {
            let key = format!("size-{n}").into_bytes();
            assert_eq!(
                db.get(&key).unwrap(),
                Some(value_for(&key, 1, n)),
                "size {n}"
            );
        }
        assert_eq!(db.get(&big_key).unwrap(), Some(b"v".to_vec()));
    };
    check(&db);
    db.close().unwrap();
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    check(&db);
    // Overwrite every one with a different size, then back.
    for &n in &sizes {
        let key = format!("size-{n}").into_bytes();
        db.put(&key, &value_for(&key, 2, n / 2 + 3)).unwrap();
        assert_eq!(db.get(&key).unwrap(), Some(value_for(&key, 2, n / 2 + 3)));
        db.put(&key, &value_for(&key, 1, n)).unwrap();
    }
    check(&db);
    db.close().unwrap();
}

#[test]
fn too_large_keys_and_values_are_refused() {
    let db = Db::open(
        "unused",
        emulated(1 << 20, 16 << 20).max_value_bytes(100_000),
    )
    .unwrap();
    let key = vec![1u8; MAX_KEY_BYTES];
    db.put(&key, b"max key").unwrap();
    assert_eq!(db.get(&key).unwrap(), Some(b"max key".to_vec()));
    let long = vec![1u8; MAX_KEY_BYTES + 1];
    let err = db.put(&long, b"x").unwrap_err();
    assert_eq!(
        err,
        DbError::KeyTooLarge {
            len: MAX_KEY_BYTES + 1,
            max: MAX_KEY_BYTES
        }
    );
    assert!(err.to_string().contains("65536"), "{err}");
    assert!(matches!(db.get(&long), Err(DbError::KeyTooLarge { .. })));
    assert_eq!(db.put(b"", b"x"), Err(DbError::EmptyKey));
    db.put(b"k", &vec![3u8; 100_000]).unwrap();
    let err = db.put(b"k", &vec![3u8; 100_001]).unwrap_err();
    assert_eq!(
        err,
        DbError::ValueTooLarge {
            len: 100_001,
            max: 100_000
        }
    );
    assert!(err.to_string().contains("100000"), "{err}");
    assert_eq!(db.get(b"k").unwrap(), Some(vec![3u8; 100_000]), "unchanged");
    assert_eq!(DbError::NotInUserThread, db.handle().get(b"k").unwrap_err());
    db.close().unwrap();
}

fn fill_until_full(db: &Db, seed: u64) -> Model {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut stored = Model::new();
    for i in 0.. {
        let key = format!("fill-{i}").into_bytes();
        let value = value_for(&key, 0, rng.gen_range(100..9000));
        match db.put(&key, &value) {
            Ok(()) => {
                stored.insert(key, value);
            }
            Err(DbError::NoSpace { .. }) => break,
            Err(err) => panic!("seed {seed}: {err}"),
        }
        assert!(i < 1_000_000, "never filled");
    }
    stored
}

#[test]
fn a_full_emulated_device_fails_cleanly_and_space_is_reused() {
    let seed = 0x5EED_0003;
    let db = Db::open("unused", emulated(1 << 20, 1 << 20).max_directory_depth(4)).unwrap();
    let stored = fill_until_full(&db, seed);
    assert!(
        stored.len() > 50,
        "seed {seed}: only {} stored",
        stored.len()
    );
    let err = db.put(b"one more", &vec![0u8; 9000]).unwrap_err();
    assert!(err.to_string().contains("no space"), "{err}");
    check_all(&db, &stored, seed);
    // Deleting frees pages that new puts reuse.
    let mut stored = stored;
    let keys: Vec<Vec<u8>> = stored.keys().take(stored.len() / 2).cloned().collect();
    for k in &keys {
        assert!(db.delete(k).unwrap());
        stored.remove(k);
    }
    for i in 0..20 {
        let key = format!("again-{i}").into_bytes();
        let value = value_for(&key, 0, 5000);
        db.put(&key, &value)
            .unwrap_or_else(|e| panic!("seed {seed}: reuse failed: {e}"));
        stored.insert(key, value);
    }
    check_all(&db, &stored, seed);
    let model = db.emulator_model().unwrap();
    db.close().unwrap();
    let db = Db::open(
        "unused",
        emulated(1 << 20, 0).device(DeviceKind::Model(model)),
    )
    .unwrap();
    check_all(&db, &stored, seed);
    db.close().unwrap();
}

#[test]
fn a_file_size_limit_fails_cleanly() {
    let seed = 0x5EED_0004;
    let file = TempFile(temp_path("limit"));
    let options = uring(1 << 20)
        .max_directory_depth(4)
        .max_file_bytes(Some(2 << 20));
    let db = Db::open(&file.0, options.clone()).unwrap();
    let stored = fill_until_full(&db, seed);
    assert!(stored.len() > 100, "seed {seed}: only {}", stored.len());
    check_all(&db, &stored, seed);
    db.close().unwrap();
    assert!(std::fs::metadata(&file.0).unwrap().len() <= 2 << 20);
    let db = Db::open(&file.0, options).unwrap();
    check_all(&db, &stored, seed);
    db.close().unwrap();
}

/// A closed store of 200 records of 300 bytes (in format 4: the first bucket's two copies are
/// pages 22 and 23, after the superblock copies, the two copies of the 9 directory pages at
/// depth 12 and the first group's two map pages; then two staging queues; then data).
fn flip_store(name: &str) -> (TempFile, Model) {
    let file = TempFile(temp_path(name));
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    let mut model = Model::new();
    for i in 0..200 {
        let key = format!("flip-{i}").into_bytes();
        let value = value_for(&key, 0, 300);
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.close().unwrap();
    (file, model)
}

const FIRST_BUCKET: u64 = 2 + 2 * 9 + 2;
/// After the first bucket's two copies, the staging queues of the two cores (`uring`).
const FIRST_DATA: u64 = FIRST_BUCKET + 2 + 2 * tamer_store::QUEUE_PAGES_MAX;

/// XORs `mask` into byte `at` of page `page` of the file.
fn flip(path: &std::path::Path, page: u64, at: u64, mask: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, page * 4096 + at).unwrap();
    byte[0] ^= mask;
    f.write_all_at(&byte, page * 4096 + at).unwrap();
    f.sync_all().unwrap();
}

/// Every read either returns the stored value or `Corrupt` naming `page`; at least one is
/// `Corrupt`. With `contains` too: a damaged key must not read as absent.
fn expect_corrupt_only_at(db: &Db, model: &Model, page: u64) {
    let mut corrupt = 0;
    for (k, v) in model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "never garbage"),
            Err(DbError::Corrupt { page: p, .. }) => {
                assert_eq!(p, page);
                corrupt += 1;
            }
            Err(err) => panic!("{err}"),
        }
        match db.contains(k) {
            Ok(found) => assert!(found, "a stored key read as absent"),
            Err(DbError::Corrupt { page: p, .. }) => assert_eq!(p, page),
            Err(err) => panic!("{err}"),
        }
    }
    assert!(corrupt > 0, "the flipped page was detected");
}

/// A flipped byte among a bucket's entries, which only the page checksum can catch (an entry
/// is just numbers). Mutation caught: bucket pages exempt from verification.
#[test]
fn a_flipped_byte_in_a_bucket_is_a_checksum_error() {
    let (file, model) = flip_store("flip-bucket");
    // Both copies: whichever the last checkpoint wrote is the one read.
    flip(&file.0, FIRST_BUCKET, 40, 0x40);
    flip(&file.0, FIRST_BUCKET + 1, 40, 0x40);
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    expect_corrupt_only_at(&db, &model, FIRST_BUCKET);
    drop(db);
}

/// A flipped byte in a data page's first record key: data pages are exempt from the page
/// checksum, so the record's CRC must catch it on every read, `contains` included. Mutation
/// caught: the CRC checked only when the whole value is returned (the key then no longer
/// matches and `contains` says absent).
#[test]
fn a_flipped_byte_in_a_record_is_a_checksum_error() {
    let (file, model) = flip_store("flip-record");
    flip(&file.0, FIRST_DATA, 33, 0x40);
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    expect_corrupt_only_at(&db, &model, FIRST_DATA);
    drop(db);
}

/// A data page whose trailer no longer matches (an append's rewrite torn in its last sector)
/// still serves its records. Mutation caught: data pages verified by the page checksum (every
/// record of the page becomes unreadable).
#[test]
fn a_torn_data_page_trailer_keeps_its_records() {
    let (file, model) = flip_store("flip-trailer");
    flip(&file.0, FIRST_DATA, 4090, 0xff);
    let db = Db::open(&file.0, uring(1 << 20)).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    drop(db);
}

#[test]
fn cursor_returns_every_key_once_across_splits() {
    let db = Db::open("unused", emulated(2 << 20, 64 << 20)).unwrap();
    let mut model = Model::new();
    for i in 0..3000u32 {
        let key = i.to_be_bytes().to_vec();
        model.insert(key.clone(), vec![i as u8; (i % 50) as usize]);
    }
    let jobs: Vec<Job<()>> = model
        .clone()
        .into_iter()
        .collect::<Vec<_>>()
        .chunks(100)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            Box::new(move |h: DbHandle| {
                for (k, v) in chunk {
                    h.put(&k, &v).unwrap();
                }
            }) as Box<_>
        })
        .collect();
    run_parallel(&db, jobs);
    check_all(&db, &model, 0);
    db.close().unwrap();
}

#[test]
fn data_pages_of_small_records_are_reused() {
    // Only small records: every round fills pages, then deletes everything. Once a round's
    // pages are dead, and a checkpoint (here `flush`) made that durable, they must be reused,
    // so the high-water mark stops growing after round 1.
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    let mut marks = Vec::new();
    for round in 0..6 {
        for i in 0..2_000 {
            let key = format!("k-{i}").into_bytes();
            db.put(&key, &value_for(&key, round, 100)).unwrap();
        }
        for i in 0..2_000 {
            assert!(db.delete(format!("k-{i}").as_bytes()).unwrap());
        }
        db.flush().unwrap();
        let (high, _, _, leaked) = db.run(|h| h.space_stats()).unwrap();
        assert_eq!(leaked, 0);
        marks.push(high);
    }
    // 2000 records of ~110 bytes fill ~60 data pages a round; without reuse the mark would grow
    // by that much every round.
    assert!(
        marks[5] <= marks[1] + 8,
        "high-water mark grew across rounds: {marks:?}"
    );
    db.close().unwrap();
}

#[test]
fn deleted_space_is_reused_not_appended() {
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    for round in 0..5 {
        for i in 0..50 {
            let key = format!("r-{i}").into_bytes();
            db.put(&key, &value_for(&key, round, 20_000)).unwrap();
        }
        for i in 0..200 {
            let key = format!("s-{i}").into_bytes();
            db.put(&key, &value_for(&key, round, 100)).unwrap();
        }
        for i in 0..200 {
            assert!(db.delete(format!("s-{i}").as_bytes()).unwrap());
        }
        // Freed space is reusable once a checkpoint made the frees durable.
        db.flush().unwrap();
    }
    let (high, free, _, leaked) = db.run(|h| h.space_stats()).unwrap();
    // Live data: 50 values of 5 pages; the high-water mark stays near it, not 5 rounds' worth
    // (plus the staging queue's pages).
    assert!(
        high < 50 * 5 * 2 + 40 + tamer_store::QUEUE_PAGES_MAX,
        "high-water mark {high} pages, free {free}"
    );
    assert_eq!(leaked, 0);
    db.close().unwrap();
}

#[test]
fn close_waits_for_operations_in_progress() {
    // Puts running on user-level threads while `close` starts: every put that was acknowledged
    // is there after reopening, and nothing was allocated twice (every value reads back whole).
    let db = Db::open("unused", emulated(2 << 20, 64 << 20)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..200u32 {
        let handle = db.handle();
        let tx = tx.clone();
        let key = format!("c-{i}").into_bytes();
        let value = value_for(&key, 1, 100 + (i as usize * 37) % 6000);
        // A full queue only means this put is not attempted.
        let _ = db.runtime().spawn(move || {
            let acked = handle.put(&key, &value).is_ok();
            let _ = tx.send((key, value, acked));
        });
    }
    drop(tx);
    let model = db.emulator_model().unwrap();
    db.close().unwrap();
    let results: Vec<_> = rx.iter().collect();
    let db = Db::open(
        "unused",
        emulated(2 << 20, 0).device(DeviceKind::Model(model)),
    )
    .unwrap();
    let mut acked = 0;
    for (key, value, ok) in results {
        if ok {
            acked += 1;
            assert_eq!(
                db.get(&key).unwrap().as_deref(),
                Some(&value[..]),
                "{key:?}"
            );
        }
    }
    assert!(acked > 0, "no put ran before close");
    db.close().unwrap();
}

/// A read-only open reads everything, refuses writes, writes nothing (two read-only instances
/// at once leave the file byte-identical), and does not create a missing store.
#[test]
fn read_only_opens_read_and_write_nothing() {
    let file = TempFile(temp_path("read-only"));
    let db = Db::open(&file.0, uring(2 << 20)).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i}").as_bytes(), &vec![i as u8; 300])
            .unwrap();
    }
    // After a flush, a read-only opener sees everything while the writer is still open.
    db.flush().unwrap();
    let reader = Db::open(&file.0, uring(1 << 20).read_only(true)).unwrap();
    for i in (0..500u32).step_by(7) {
        let key = format!("k{i}");
        assert_eq!(
            reader.get(key.as_bytes()).unwrap(),
            Some(vec![i as u8; 300])
        );
    }
    reader.close().unwrap();
    db.close().unwrap();
    let before = std::fs::read(&file.0).unwrap();
    let a = Db::open(&file.0, uring(2 << 20).read_only(true)).unwrap();
    let b = Db::open(&file.0, uring(1 << 20).read_only(true)).unwrap();
    for i in 0..500u32 {
        let key = format!("k{i}");
        assert_eq!(a.get(key.as_bytes()).unwrap(), Some(vec![i as u8; 300]));
        assert_eq!(b.get(key.as_bytes()).unwrap(), Some(vec![i as u8; 300]));
    }
    assert_eq!(a.put(b"x", b"y"), Err(DbError::ReadOnly));
    assert_eq!(b.delete(b"k1"), Err(DbError::ReadOnly));
    a.close().unwrap();
    b.close().unwrap();
    assert!(
        std::fs::read(&file.0).unwrap() == before,
        "a read-only session changed the file"
    );
    // Still a clean store for a writable open.
    let db = Db::open(&file.0, uring(2 << 20)).unwrap();
    assert_eq!(db.len(), 500);
    db.close().unwrap();

    let missing = temp_path("read-only-missing");
    assert!(matches!(
        Db::open(&missing, uring(2 << 20).read_only(true)),
        Err(DbError::Config(_))
    ));
    assert!(!missing.exists(), "a read-only open created {missing:?}");
}

/// Pages in use: the high-water mark less the free pages.
fn pages_in_use(db: &Db) -> u64 {
    let (high, free, _, leaked) = db.run(|h| h.space_stats()).unwrap();
    assert_eq!(leaked, 0, "pages leaked");
    high - free
}

#[test]
fn sparse_pages_are_compacted_and_every_value_survives() {
    const SEED: u64 = 0xc0_4ac7;
    const KEYS: u64 = 6_000;
    const VALUE: usize = 100;
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).cleaner(false)).unwrap();
    let mut rng = SmallRng::seed_from_u64(SEED);
    let mut model = Model::new();
    let key = |i: u64| format!("c-{i:05}").into_bytes();
    for i in 0..KEYS {
        let value = value_for(&key(i), 0, VALUE);
        db.put(&key(i), &value).unwrap();
        model.insert(key(i), value);
    }
    let loaded = pages_in_use(&db);
    // Three rounds overwrite a random 95 % of the keys: every page of an earlier round keeps a
    // few live records, so none is freed whole.
    for round in 1..=3u64 {
        for i in 0..KEYS {
            if rng.gen_range(0..100) < 95 {
                let value = value_for(&key(i), round, VALUE);
                db.put(&key(i), &value).unwrap();
                model.insert(key(i), value);
            }
        }
    }
    let before = pages_in_use(&db);
    let queued = db.compaction_stats().queued;
    let taken = db.compact().unwrap();
    // Compacted pages are free once a checkpoint made the moves durable.
    db.flush().unwrap();
    let after = pages_in_use(&db);
    let stats = db.compaction_stats();
    eprintln!(
        "seed {SEED:#x}: {loaded} pages loaded, {before} before compaction ({queued} queued), {after} after; {stats:?}"
    );
    assert_eq!(taken, queued, "compact took every queued page");
    assert!(stats.pages_compacted > 0 && stats.records_moved > 0);
    assert_eq!(stats.hints_dropped, 0);
    // Without compaction the overwrites leave 30-50 % more pages than the live data needs
    // (the loaded count, buckets included; less when a slow run's timed checkpoints let
    // freed pages be reused sooner); compaction must take back most of that.
    assert!(
        before >= loaded * 12 / 10,
        "the overwrites left {before} pages for {loaded} live: the test lost its point"
    );
    assert!(
        after <= loaded * 11 / 10,
        "compaction left {after} pages for {loaded} pages of live data (before: {before})"
    );
    check_all(&db, &model, SEED);
    db.close().unwrap();
}

#[test]
fn compaction_races_with_overwrites_and_deletes() {
    const SEED: u64 = 0x7ace;
    const WRITERS: usize = 6;
    const KEYS_PER: u64 = 400;
    let path = TempFile(temp_path("compaction-race"));
    let open = || Db::open(&path.0, uring(1 << 20).cleaner(false)).unwrap();
    let db = open();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Pages the compactors took so far: the writers' second half waits for the first, so that
    // compaction surely runs while they write.
    let taken_total = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut jobs: Vec<Job<Result<Model, String>>> = Vec::new();
    for w in 0..WRITERS {
        let (done, taken_total) = (done.clone(), taken_total.clone());
        jobs.push(Box::new(move |h: DbHandle| {
            let mut rng = SmallRng::seed_from_u64(SEED ^ w as u64);
            let mut model = Model::new();
            for round in 0..8u64 {
                if round == 4 {
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                    while taken_total.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                        if std::time::Instant::now() > deadline {
                            return Err(format!(
                                "seed {SEED:#x}: no page was queued for compaction in 4 rounds"
                            ));
                        }
                        tamer_runtime::thread::sleep(std::time::Duration::from_micros(50));
                    }
                }
                for i in 0..KEYS_PER {
                    let key = format!("w{w}-{i}").into_bytes();
                    match rng.gen_range(0..10) {
                        0 => {
                            let was = h.delete(&key).map_err(|e| format!("delete: {e}"))?;
                            if was != model.remove(&key).is_some() {
                                return Err(format!(
                                    "seed {SEED:#x}: delete of {w}/{i} said {was}"
                                ));
                            }
                        }
                        1..=8 => {
                            let value = value_for(&key, round, rng.gen_range(20..200));
                            h.put(&key, &value).map_err(|e| format!("put: {e}"))?;
                            model.insert(key, value);
                        }
                        _ => {}
                    }
                }
            }
            done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(model)
        }));
    }
    // Two compactors take one page at a time while the writers run.
    for _ in 0..2 {
        let (done, taken_total) = (done.clone(), taken_total.clone());
        jobs.push(Box::new(move |h: DbHandle| {
            let mut taken = 0;
            // Bounded: the writers finish in well under a minute.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while done.load(std::sync::atomic::Ordering::SeqCst) < WRITERS {
                if std::time::Instant::now() > deadline {
                    return Err("the writers did not finish within 60 s".into());
                }
                match h.compact_some(1).map_err(|e| format!("compact: {e}"))? {
                    0 => tamer_runtime::thread::sleep(std::time::Duration::from_micros(20)),
                    n => {
                        taken += n;
                        taken_total.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
            eprintln!("a compactor took {taken} pages while the writers ran");
            // The count travels in the model's only entry.
            Ok(Model::from([(
                b"#taken".to_vec(),
                taken.to_le_bytes().to_vec(),
            )]))
        }));
    }
    let mut model = Model::new();
    let mut taken_while_writing = 0;
    for result in run_parallel(&db, jobs) {
        let mut part = result.unwrap_or_else(|e| panic!("seed {SEED:#x}: {e}"));
        if let Some(taken) = part.remove(b"#taken".as_slice()) {
            taken_while_writing += usize::from_le_bytes(taken.try_into().unwrap());
        }
        model.extend(part);
    }
    assert!(
        taken_while_writing > 0,
        "seed {SEED:#x}: no page was compacted while the writers ran: the race was not tested"
    );
    db.compact().unwrap();
    let stats = db.compaction_stats();
    eprintln!("seed {SEED:#x}: {stats:?}");
    assert!(stats.records_moved > 0, "nothing was compacted: {stats:?}");
    check_all(&db, &model, SEED);
    db.close().unwrap();
    let db = open();
    check_all(&db, &model, SEED);
    db.close().unwrap();
}

#[test]
fn background_compaction_runs_under_space_pressure_only() {
    const SEED: u64 = 0x5ace;
    const KEYS: u64 = 2_000;
    const VALUE: usize = 120;
    let key = |i: u64| format!("p-{i:05}").into_bytes();
    // Room to spare (64 MiB): the cleaner leaves the sparse pages alone.
    let roomy = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    for round in 0..4u64 {
        for i in 0..KEYS {
            roomy
                .put(&key(i), &value_for(&key(i), round, VALUE))
                .unwrap();
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let stats = roomy.compaction_stats();
    assert!(
        stats.queued > 0,
        "seed {SEED:#x}: no sparse page: {stats:?}"
    );
    assert_eq!(stats.pages_compacted, 0, "compacted with room to spare");
    roomy.close().unwrap();
    // A 4 MiB device (1024 pages) and ~75 pages of live data. Key i is written in rounds
    // 0..=i % 40 only, so every round's pages keep a few records for good (the keys it writes
    // last) and none dies whole: ≈ 1500 pages are written, so only compaction under pressure
    // keeps the device from filling.
    let tight = Db::open("unused", emulated(1 << 20, 4 << 20)).unwrap();
    let mut model = Model::new();
    for round in 0..40u64 {
        for i in 0..KEYS {
            if i % 40 >= round {
                let value = value_for(&key(i), round, VALUE);
                tight
                    .put(&key(i), &value)
                    .unwrap_or_else(|e| panic!("seed {SEED:#x}: round {round}: put: {e}"));
                model.insert(key(i), value);
            }
        }
        // The cleaner compacts in the background; give it a moment between rounds.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = tight.compaction_stats();
    eprintln!("seed {SEED:#x}: {stats:?}");
    assert!(stats.pages_compacted > 0, "{stats:?}");
    check_all(&tight, &model, SEED);
    tight.close().unwrap();
}

/// Jobs on both cores put and delete the *same* keys concurrently (the other model checks give
/// each thread its own keys). Whatever the interleaving, each key must end as some job's last
/// operation on it (a value it wrote last, or absent after its last delete), never an older
/// value, a value nobody wrote, or a key stored twice; `check` clean. Catches lost or torn
/// entry switches between racing writers, a release of a record another writer still links.
#[test]
fn concurrent_writers_of_shared_keys_leave_each_key_at_some_last_write() {
    const SEED: u64 = 0x5A4E_D000;
    const JOBS: u64 = 8;
    const KEYS: u64 = 48;
    const OPS: u64 = 600;
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    let jobs: Vec<Job<BTreeMap<u64, Option<Vec<u8>>>>> = (0..JOBS)
        .map(|j| {
            Box::new(move |h: DbHandle| {
                let mut rng = SmallRng::seed_from_u64(SEED ^ j);
                // This job's last operation on each key it touched.
                let mut last = BTreeMap::new();
                for seq in 0..OPS {
                    let k = rng.gen_range(0..KEYS);
                    let key = k.to_be_bytes();
                    if rng.gen_bool(0.2) {
                        h.delete(&key).unwrap();
                        last.insert(k, None);
                    } else {
                        let len = if rng.gen_bool(0.05) { 6_000 } else { 40 };
                        let value = value_for(&key, j << 32 | seq, len);
                        h.put(&key, &value).unwrap();
                        last.insert(k, Some(value));
                    }
                }
                last
            }) as Job<_>
        })
        .collect();
    let lasts = run_parallel(&db, jobs);
    for k in 0..KEYS {
        let got = db.get(&k.to_be_bytes()).unwrap();
        let candidates: Vec<&Option<Vec<u8>>> = lasts.iter().filter_map(|l| l.get(&k)).collect();
        assert!(
            candidates.contains(&&got) || (candidates.is_empty() && got.is_none()),
            "seed {SEED:#x}: key {k} holds {:?} bytes, none of the {} jobs' last operations",
            got.as_ref().map(Vec::len),
            candidates.len()
        );
    }
    let report = db.check().unwrap();
    assert!(report.is_clean(), "seed {SEED:#x}: {report:#?}");
    db.close().unwrap();
}

/// A value that says which write it is: its version in the first 8 bytes, then bytes derived
/// from (key, version), so a reader can tell a whole value from a mixed or stale one.
fn versioned(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut value = version.to_le_bytes().to_vec();
    value.extend(value_for(key, version, len - 8));
    value
}

/// Large values are read outside their bucket's latch (a large read must not hold a bucket
/// latch for its whole length), so a read can race the value's replacement and the
/// checkpoint that makes its pages reusable. Readers of extent-sized values that writers keep
/// replacing, with a checkpoint after every other write, on a 50 µs device with a small cache
/// (reads take many round trips), must always get a whole value some writer wrote. Catches a
/// read outside the latch that misses a checkpoint and returns reused pages (a mixed value, or
/// a checksum error).
#[test]
fn large_reads_outside_the_latch_never_see_reused_pages() {
    const KEYS: u64 = 3;
    // 512 KiB: 8 readers pinning a 15-page batch each (`get_many`) need more frames than a
    // 256 KiB cache has, and wait for one another's sets.
    let options = emulated(512 << 10, 64 << 20)
        .device(DeviceKind::Emulated {
            latency_ns: 50_000,
            capacity_bytes: 64 << 20,
        })
        .max_value_bytes(64 << 10);
    let db = Db::open("unused", options).unwrap();
    let len = |k: u64, v: u64| 30_000 + ((k * 7_919 + v * 104_729) % 30_000) as usize;
    for k in 0..KEYS {
        db.put(&k.to_be_bytes(), &versioned(&k.to_be_bytes(), 0, len(k, 0)))
            .unwrap();
    }
    let mut jobs: Vec<Job<u64>> = Vec::new();
    for w in 0..3u64 {
        jobs.push(Box::new(move |h: DbHandle| {
            for v in 1..=120u64 {
                let k = (v + w) % KEYS;
                let version = w << 32 | v;
                h.put(
                    &k.to_be_bytes(),
                    &versioned(&k.to_be_bytes(), version, len(k, version)),
                )
                .unwrap();
                if v % 2 == 0 {
                    h.flush().unwrap();
                }
            }
            0
        }));
    }
    for r in 0..8u64 {
        jobs.push(Box::new(move |h: DbHandle| {
            let mut reads = 0;
            for i in 0..120u64 {
                let k = (i + r) % KEYS;
                let key = k.to_be_bytes();
                let value = h.get(&key).unwrap().expect("never deleted");
                let version = u64::from_le_bytes(value[..8].try_into().unwrap());
                assert!(
                    value == versioned(&key, version, len(k, version)),
                    "key {k}: a read of version {version} is not that write's value"
                );
                reads += 1;
            }
            reads
        }));
    }
    let done = run_parallel(&db, jobs);
    assert_eq!(done.iter().sum::<u64>(), 8 * 120);
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}
