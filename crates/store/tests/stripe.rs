//! A store striped over several devices (`DeviceKind::Striped`): every page where the stripe
//! says, reopened with the same parts, refused with others; acknowledged commits survive a
//! power loss on every part (a flush must reach each part a transaction wrote); on files,
//! every file grows.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{temp_path, TempFile, TEST_HASH_KEY};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_crash::power::stripe_of;
use tamer_device::{CrashPoint, EmulatorConfig, EmulatorModel, FaultPlan, FaultState};
use tamer_store::{Db, DbError, DbOptions, DeviceKind, Durability, StripePart};

fn key(k: u64) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

/// Values from 10 bytes to three pages: extents cross stripe units.
fn value(k: u64, round: u64) -> Vec<u8> {
    let len = [10, 300, 5_000, 12_000][(k % 4) as usize];
    common::value_for(&key(k), round, len)
}

fn striped(parts: Vec<DeviceKind>, unit_blocks: u64) -> DbOptions {
    DbOptions::new(4 << 20)
        .device(stripe_of(parts, unit_blocks))
        .cores(2)
        .threads_per_core(16)
        .max_directory_depth(12)
        .pinned_directory_depth(4)
        .hash_key(TEST_HASH_KEY)
}

fn models(n: usize) -> Vec<Arc<EmulatorModel>> {
    (0..n)
        .map(|_| {
            EmulatorConfig::with_latency_ns(2_000)
                .capacity_bytes(64 << 20)
                .build()
                .unwrap()
        })
        .collect()
}

fn on(models: &[Arc<EmulatorModel>]) -> Vec<DeviceKind> {
    models
        .iter()
        .map(|m| DeviceKind::Model(m.clone()))
        .collect()
}

/// 3 emulated parts in units of 4 pages: 3,000 keys (values up to three pages) written,
/// checked, reopened and read back, every part holding pages; a reopen with 2 parts, another
/// unit or the parts in another order is refused. Catches pieces written at the request's
/// offset instead of their part's, raw reads at open not striped (the superblock or the
/// copies read from the wrong part), a stripe not recorded or not checked.
#[test]
fn a_striped_store_reopens_on_its_parts_and_refuses_others() {
    let parts = models(3);
    let db = Db::open("unused", striped(on(&parts), 4)).unwrap();
    for k in 0..3_000 {
        db.put(&key(k), &value(k, 1)).unwrap();
    }
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{report:?}");
    db.close().unwrap();
    for (i, model) in parts.iter().enumerate() {
        let mut page = vec![0u8; 4096];
        let written = (0..model.capacity_bytes() / 4096 / 8).any(|block| {
            model.read_block(block, &mut page).unwrap();
            page.iter().any(|&b| b != 0)
        });
        assert!(written, "part {i} holds nothing");
    }
    let db = Db::open("unused", striped(on(&parts), 4)).unwrap();
    for k in 0..3_000 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, 1)), "key {k}");
    }
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();

    let refused = |options: DbOptions| match Db::open("unused", options) {
        Ok(db) => {
            let _ = db.close();
            panic!("opened");
        }
        Err(err) => err,
    };
    let err = refused(striped(on(&parts[..2]), 4));
    assert!(matches!(err, DbError::Config(_)), "{err}");
    let err = refused(striped(on(&parts), 8));
    assert!(matches!(err, DbError::Config(_)), "{err}");
    let swapped = vec![parts[0].clone(), parts[2].clone(), parts[1].clone()];
    let err = refused(striped(on(&swapped), 4));
    assert!(matches!(err, DbError::Corrupt { .. }), "{err}");
}

/// Power loss on both parts of a 2-part stripe at a seeded instant while two writers commit
/// (`Durability::Commit`), then each part's unflushed writes kept, dropped or torn by a seeded
/// choice: every acknowledged put is there after the reopen and the store checks clean, for
/// 12 seeds. Catches a flush that reaches only some parts (an acknowledged record or its
/// queue entry on the other part is dropped), a request acknowledged before all its pieces
/// completed.
#[test]
fn acknowledged_commits_survive_a_power_loss_on_every_part() {
    for seed in 0..12u64 {
        let states: Vec<Arc<FaultState>> = (0..2)
            .map(|_| {
                let model = EmulatorConfig::with_latency_ns(5_000)
                    .flush_latency_ns(10_000)
                    .capacity_bytes(32 << 20)
                    .build()
                    .unwrap();
                let plan = FaultPlan {
                    crash: CrashPoint::Never,
                    ..FaultPlan::default()
                };
                FaultState::new(model, plan).unwrap()
            })
            .collect();
        let options = striped(
            states
                .iter()
                .map(|s| DeviceKind::Faulty(s.clone()))
                .collect(),
            2,
        )
        .durability(Durability::Commit)
        .cleaner(false);
        let db = Db::open("unused", options).unwrap();
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..2).map(|_| AtomicU64::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (handle, acked, stop) = (db.handle(), acked.clone(), stop.clone());
                let (tx, rx) = std::sync::mpsc::channel();
                let job = move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let k = w * 1_000_000 + n;
                        if handle.put(&key(k), &value(k, 1)).is_err() {
                            break;
                        }
                        n += 1;
                        acked[w as usize].store(n, Ordering::Release);
                    }
                    let _ = tx.send(());
                };
                db.runtime().spawn(job).unwrap();
                rx
            })
            .collect();
        // Both writers first acknowledge a write (bounded at 10 s), then run a seeded while.
        let started = std::time::Instant::now();
        while acked.iter().any(|a| a.load(Ordering::Acquire) == 0) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "seed {seed}: a writer acknowledged nothing in 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut rng = SmallRng::seed_from_u64(seed);
        std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(20..120)));
        for state in &states {
            state.power_loss();
        }
        stop.store(true, Ordering::Release);
        for rx in writers {
            rx.recv().unwrap();
        }
        let acked: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
        drop(db);
        let crashed: Vec<DeviceKind> = states
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let fates = s.seeded_fates(seed * 10 + i as u64);
                DeviceKind::Model(
                    s.crash_model(EmulatorConfig::with_latency_ns(2_000), &fates)
                        .unwrap(),
                )
            })
            .collect();
        let db = Db::open("unused", striped(crashed, 2)).unwrap_or_else(|err| {
            panic!("seed {seed}: reopen failed: {err}");
        });
        for (w, &n) in acked.iter().enumerate() {
            assert!(n > 0, "seed {seed}: writer {w} acknowledged nothing");
            for i in 0..n {
                let k = w as u64 * 1_000_000 + i;
                assert_eq!(
                    db.get(&key(k)).unwrap(),
                    Some(value(k, 1)),
                    "seed {seed}: acknowledged key {k} lost"
                );
            }
        }
        let report = db.check().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        db.close().unwrap();
    }
}

/// Two files on the disk (io_uring, `O_DIRECT`), units of 64 pages: both grow as the store
/// does, and the store reopens from them. Catches growth of one file only (writes past the
/// other's end fail), a file part opened at the store's path instead of its own.
#[test]
fn a_store_striped_over_two_files_grows_both() {
    let files = [
        TempFile(temp_path("stripe-a")),
        TempFile(temp_path("stripe-b")),
    ];
    let options = || {
        DbOptions::new(4 << 20)
            .device(DeviceKind::Striped {
                parts: files
                    .iter()
                    .map(|f| StripePart {
                        path: f.0.clone(),
                        device: DeviceKind::Uring,
                    })
                    .collect(),
                unit_blocks: tamer_device::STRIPE_UNIT_BLOCKS,
            })
            .cores(2)
            .initial_file_bytes(1 << 20)
    };
    let db = Db::open("unused", options()).unwrap();
    for k in 0..4_000 {
        db.put(&key(k), &value(k, 1)).unwrap();
    }
    db.close().unwrap();
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(&f.0).unwrap().len())
        .collect();
    assert!(sizes.iter().all(|&s| s > 8 << 20), "{sizes:?}");
    assert_eq!(sizes[0], sizes[1], "grown together");
    let db = Db::open("unused", options()).unwrap();
    for k in 0..4_000 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value(k, 1)), "key {k}");
    }
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}
