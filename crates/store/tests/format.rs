//! Format version 3: two superblock copies (a torn superblock write loses nothing) and the
//! per-store hash key (crafted keys cannot fill a bucket).

mod common;

use common::{emulated, temp_path, uring, TempFile};
use tamer_store::{key_hash, Db, DbError, BUCKET_CAP};

const PAGE: usize = 4096;

/// `emulated` with the default, random hash key (what a server gets).
fn random_key(cache_bytes: u64, capacity_bytes: u64) -> tamer_store::DbOptions {
    let mut options = emulated(cache_bytes, capacity_bytes);
    options.hash_key = None;
    options
}

/// The superblock copy with the higher sequence number, read straight from the file.
fn newest_copy(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).unwrap();
    let mut best = (0, 0);
    for copy in 0..2u64 {
        let mut page = vec![0u8; PAGE];
        file.read_exact_at(&mut page, copy * PAGE as u64).unwrap();
        let sequence = u64::from_le_bytes(page[64..72].try_into().unwrap());
        if sequence > best.1 {
            best = (copy, sequence);
        }
    }
    best.0
}

/// Flips one byte of page `copy` in the file without resealing its checksum: a torn write.
fn tear(path: &std::path::Path, copy: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut page = vec![0u8; PAGE];
    file.read_exact_at(&mut page, copy * PAGE as u64).unwrap();
    page[20] ^= 0x40;
    file.write_all_at(&page, copy * PAGE as u64).unwrap();
}

/// A torn newest superblock (its checkpoint never completed, as a crash during it leaves it)
/// leaves the older copy, and the store opens at that older checkpoint, then redoes the
/// staging queue's records after it: every write that returned is back. Both copies torn is a clear error naming a page.
/// Mutations caught: writing the superblock to one page only (tearing it loses the store),
/// reading only page 0, taking a copy whose checksum fails, a checkpoint that overwrites the
/// previous checkpoint's index pages (the older checkpoint would no longer open whole).
#[test]
fn a_torn_superblock_copy_falls_back_to_the_other() {
    let path = temp_path("format-torn-superblock");
    let _cleanup = TempFile(path.clone());
    // No cleaner: it would run a timed checkpoint between A and B on a slow machine, and
    // fewer records than the test counts would wait in the queue.
    let db = Db::open(&path, uring(1 << 20).cleaner(false)).unwrap();
    for k in 0..200u32 {
        db.put(&k.to_be_bytes(), &[k as u8; 100]).unwrap();
    }
    db.flush().unwrap(); // checkpoint A
    for k in 200..300u32 {
        db.put(&k.to_be_bytes(), &[k as u8; 100]).unwrap();
    }
    for k in 0..50u32 {
        assert!(db.delete(&k.to_be_bytes()).unwrap());
    }
    db.close().unwrap(); // checkpoint B, the newest superblock
    let newest = newest_copy(&path);
    tear(&path, newest);
    let db = Db::open(&path, uring(1 << 20)).unwrap();
    // Checkpoint A, then the staging queue's commit records after it redone: every write
    // (each durable on return) is back.
    let redone = db.recovery_stats();
    assert_eq!(redone.records_redone, 150, "{redone:?}");
    for k in 0..300u32 {
        let want = (k >= 50).then(|| vec![k as u8; 100]);
        assert_eq!(
            db.get(&k.to_be_bytes()).unwrap(),
            want,
            "key {k} after falling back to copy {} (checkpoint A) and redoing the queue",
            1 - newest
        );
    }
    assert_eq!(db.len(), 250);
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
    // The close wrote both copies again (alternately): tear both.
    tear(&path, 0);
    tear(&path, 1);
    match Db::open(&path, uring(1 << 20)) {
        Err(DbError::Corrupt { page, detail }) => {
            assert!(
                page < 2 && detail.contains("superblock"),
                "{page}: {detail}"
            )
        }
        other => panic!("expected a corrupt superblock, got {:?}", other.map(|_| ())),
    }
}

/// Keys crafted offline to share a bucket (the low bits of the hash under a key the attacker
/// can compute) spread over the buckets of a real store, whose key is random: more of them
/// than a bucket holds are all stored. Mutation caught: a store hashing with a fixed key (the
/// crafted keys then land in one bucket at the maximum depth and the put past 452 fails with
/// `IndexFull`).
#[test]
fn keys_crafted_to_collide_do_not_fill_a_bucket() {
    const DEPTH: u32 = 4;
    let guessed = [0u64, 0u64];
    let crafted: Vec<Vec<u8>> = (0u64..)
        .map(|i| format!("flood-{i}").into_bytes())
        .filter(|k| key_hash(guessed, k) & ((1 << DEPTH) - 1) == 0)
        .take(BUCKET_CAP + 100)
        .collect();
    let db = Db::open(
        "unused",
        random_key(1 << 20, 16 << 20).max_directory_depth(DEPTH),
    )
    .unwrap();
    for (i, k) in crafted.iter().enumerate() {
        db.put(k, b"v")
            .unwrap_or_else(|err| panic!("crafted key {i} of {}: {err}", crafted.len()));
    }
    assert_eq!(db.len(), crafted.len() as u64);
    db.close().unwrap();
}

/// A store keeps its hash key across reopening (every key is found again), and two stores
/// get different keys. Mutation caught: a key not persisted (a reopened store would look in
/// the wrong buckets), a constant key.
#[test]
fn the_hash_key_is_per_store_and_persistent() {
    let db = Db::open("unused", random_key(1 << 20, 16 << 20)).unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..2_000u32 {
        db.put(&k.to_be_bytes(), b"v").unwrap();
    }
    db.close().unwrap();
    let db = Db::open(
        "unused",
        random_key(1 << 20, 16 << 20).device(tamer_store::DeviceKind::Model(model.clone())),
    )
    .unwrap();
    for k in 0..2_000u32 {
        assert!(
            db.contains(&k.to_be_bytes()).unwrap(),
            "key {k} after reopen"
        );
    }
    db.close().unwrap();
    let key_of = |model: &tamer_device::EmulatorModel| {
        let mut page = vec![0u8; PAGE];
        let mut best = (0u64, [0u8; 16]);
        for copy in 0..2u64 {
            model.read_at(copy * PAGE as u64, &mut page).unwrap();
            let sequence = u64::from_le_bytes(page[64..72].try_into().unwrap());
            if sequence >= best.0 {
                best = (sequence, page[72..88].try_into().unwrap());
            }
        }
        best.1
    };
    let other = Db::open("unused", random_key(1 << 20, 16 << 20)).unwrap();
    let other_model = other.emulator_model().unwrap();
    other.close().unwrap();
    assert_ne!(key_of(&model), key_of(&other_model));
    assert_ne!(key_of(&model), [0u8; 16]);
}
