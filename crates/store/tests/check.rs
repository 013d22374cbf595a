//! `Db::check` (behind `tamer check`): a store written by a mixed workload checks clean, and
//! each kind of damage is reported on the page where it is, never as a panic.

mod common;

use std::sync::Arc;

use common::{emulated, value_for, SeedGuardLite};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::EmulatorModel;
use tamer_store::{CheckReport, Db, DbOptions, DeviceKind};

const PAGE: usize = 4096;
/// The first group's map page (copy 0): after the two superblocks and the two copies of the 9
/// directory pages at depth 12; copy 1 follows, then the first managed page.
const MAP0: u64 = 2 + 2 * 9;

/// The copy of the first group's map page written by the last checkpoint (the higher epoch).
fn current_map(model: &EmulatorModel) -> u64 {
    let epoch = |page: u64| {
        let mut bytes = vec![0u8; PAGE];
        model.read_at(page * PAGE as u64, &mut bytes).unwrap();
        u64::from_le_bytes(bytes[8..16].try_into().unwrap())
    };
    if epoch(MAP0 + 1) > epoch(MAP0) {
        MAP0 + 1
    } else {
        MAP0
    }
}

fn options() -> DbOptions {
    emulated(2 << 20, 64 << 20)
        .cores(1)
        .max_value_bytes(64 << 10)
}

/// A closed store after `ops` seeded puts (small and extent-sized values), overwrites and
/// deletes, enough to split buckets and free pages; returns its device.
fn written(seed: u64, ops: u32) -> Arc<EmulatorModel> {
    let db = Db::open("unused", options()).unwrap();
    let model = db.emulator_model().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..ops {
        let k: u32 = rng.gen_range(0..3_000);
        let key = k.to_be_bytes();
        if rng.gen_bool(0.15) {
            db.delete(&key).unwrap();
        } else {
            let len = if rng.gen_bool(0.05) {
                rng.gen_range(5_000..20_000)
            } else {
                rng.gen_range(0..600)
            };
            db.put(&key, &value_for(&key, u64::from(k), len)).unwrap();
        }
    }
    db.close().unwrap();
    model
}

/// A closed store holding keys `0..n` once each (every record live).
fn fresh(n: u32) -> Arc<EmulatorModel> {
    let db = Db::open("unused", options()).unwrap();
    let model = db.emulator_model().unwrap();
    for k in 0..n {
        db.put(&k.to_be_bytes(), &value_for(&k.to_be_bytes(), 0, 300))
            .unwrap();
    }
    db.close().unwrap();
    model
}

fn check(model: &Arc<EmulatorModel>) -> CheckReport {
    let db = Db::open(
        "unused",
        options()
            .read_only(true)
            .device(DeviceKind::Model(model.clone())),
    )
    .unwrap();
    let report = db.check().unwrap();
    db.close().unwrap();
    report
}

/// Rewrites page `page` of `model` with `f` applied, resealing its checksum, so that only the
/// structure (not the checksum) is wrong.
fn edit_page(model: &EmulatorModel, page: u64, f: impl FnOnce(&mut [u8])) {
    let mut bytes = vec![0u8; PAGE];
    model.read_at(page * PAGE as u64, &mut bytes).unwrap();
    f(&mut bytes);
    tamer_cache::checksum::seal_page(page, &mut bytes);
    model.write_at(page * PAGE as u64, &bytes).unwrap();
}

/// Catches a check that finds problems in a sound store (kinds or live bytes miscounted,
/// extents straddling a group misread) and one that skips records.
#[test]
fn a_store_written_by_a_mixed_workload_checks_clean() {
    for seed in [1u64, 2, 3] {
        let _guard = SeedGuardLite::new("a_store_written_by_a_mixed_workload_checks_clean", seed);
        let model = written(seed, 6_000);
        let report = check(&model);
        assert!(report.is_clean(), "seed {seed}: {report:#?}");
        assert!(
            report.keys > 1_000 && report.records == report.keys,
            "{report:?}"
        );
        assert!(report.buckets > 1 && report.extent_pages > 0, "{report:?}");
        assert!(report.free_pages > 0, "deletes freed pages: {report:?}");
    }
}

/// A map entry whose live bytes disagree with the records the index names is reported on that
/// page. Catches a check that does not compare the map with the index.
#[test]
fn a_wrong_live_count_in_the_map_is_reported() {
    let model = written(7, 2_000);
    // The first data page's entry: find a data entry (kind 2) in map page 0 and add 16.
    let mut changed = None;
    edit_page(&model, current_map(&model), |b| {
        for i in 0..1018usize {
            let at = 16 + 4 * i;
            let entry = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            if entry >> 28 == 2 && entry & 0xffff > 0 {
                b[at..at + 4].copy_from_slice(&(entry + 16).to_le_bytes());
                changed = Some(MAP0 + 2 + i as u64);
                return;
            }
        }
    });
    let page = changed.expect("a data page in the first group");
    let report = check(&model);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.page == page && p.what.contains("live bytes")),
        "{report:#?}"
    );
}

/// A page the index uses but the map calls free (the allocator would hand it out again) is
/// reported. Catches a check that counts free pages without asking who uses them.
#[test]
fn a_used_page_the_map_calls_free_is_reported() {
    let model = written(8, 2_000);
    // The first managed page is the first bucket.
    edit_page(&model, MAP0, |b| {
        b[16..20].copy_from_slice(&0u32.to_le_bytes())
    });
    let report = check(&model);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.page == MAP0 + 2 && p.what.contains("Free")),
        "{report:#?}"
    );
}

/// A damaged record (a flipped value byte: data pages are not page-checksummed) is reported
/// on its page, and the check goes on. Catches a check that stops at the first problem or
/// does not verify record CRCs.
#[test]
fn a_damaged_record_is_reported_and_the_check_goes_on() {
    let model = fresh(500);
    let clean = check(&model);
    assert!(clean.is_clean(), "{clean:#?}");
    // The first data page after the first bucket holds records from byte 16 on.
    let mut page = vec![0u8; PAGE];
    let data = (MAP0 + 3..MAP0 + 1000)
        .find(|&p| {
            model.read_at(p * PAGE as u64, &mut page).unwrap();
            &page[0..4] == b"DATA" && u32::from_le_bytes(page[16..20].try_into().unwrap()) > 0
        })
        .expect("a data page");
    model
        .read_at(data * PAGE as u64 + 40, &mut page[..1])
        .unwrap();
    page[0] ^= 0x10;
    model.write_at(data * PAGE as u64 + 40, &page[..1]).unwrap();
    let report = check(&model);
    assert!(!report.is_clean());
    assert!(
        report
            .problems
            .iter()
            .all(|p| p.page == data || p.what.contains("live")),
        "{report:#?}"
    );
    assert!(
        report.records + 1 >= clean.records,
        "{report:?} vs {clean:?}"
    );
}
