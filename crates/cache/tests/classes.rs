//! Page classes: index pages placed by their set key and kept ahead of data pages; the
//! bound that leaves every set a data way; a freed data page overwritten as an index page.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{emulated, PAGE};
use tamer_cache::{CacheConfig, PageClass};

/// 4 sets of 8 ways.
const SETS: u64 = 4;
const WAYS: u64 = 8;

fn index(set_key: u64) -> PageClass {
    PageClass::Index { set_key }
}

/// Index pages 10_000.. with set keys 0..n: `n / SETS` per set.
fn index_page(i: u64) -> u64 {
    10_000 + i
}

/// Mutation caught: data misses evicting index frames (the default bound of ways - 1 is not
/// honoured), or index pages placed by page number instead of their set key (then a set
/// overflows and pages its index frames).
#[test]
fn index_pages_stay_resident_under_a_stream_of_data_misses() {
    // More sets than elsewhere: placed by page number instead of their keys, 7 pages per set
    // on average would overflow some set.
    let sets = 32;
    let config = CacheConfig::new(sets * WAYS * PAGE as u64);
    let (cache, model) = emulated(config, 1_000, 20_000);
    let mut executor = common::executor(&cache, &model, 4);
    let job_cache = cache.clone();
    let index_count = sets * (WAYS - 1);
    executor
        .spawn(move || {
            for i in 0..index_count {
                let page = job_cache.get_as(index_page(i), index(i)).unwrap();
                page.read(|b| assert!(b.iter().all(|&x| x == 0)));
            }
            // Far more data pages than the cache holds, each touched twice.
            for round in 0..2 {
                for p in 0..2_000u64 {
                    let _ = round;
                    job_cache.get(p).unwrap();
                }
            }
        })
        .unwrap();
    common::run(&mut executor);
    let before = cache.stats();
    assert_eq!(before.index_misses, index_count);
    assert_eq!(cache.resident_index_frames() as u64, index_count);
    let job_cache = cache.clone();
    executor
        .spawn(move || {
            for i in 0..index_count {
                job_cache.get_as(index_page(i), index(i)).unwrap();
            }
        })
        .unwrap();
    common::run(&mut executor);
    let after = cache.stats();
    assert_eq!(
        after.index_misses, before.index_misses,
        "an index page was evicted"
    );
    assert_eq!(after.index_hits - before.index_hits, index_count);
}

/// Mutation caught: a set that fills all its ways with index pages (data pages mapping to it
/// could then never be cached, and a data miss there would evict the index anyway), or an
/// over-full index that fails instead of paging.
#[test]
fn an_index_larger_than_its_bound_is_paged_and_a_data_way_remains() {
    let config = CacheConfig::new(SETS * WAYS * PAGE as u64);
    let (cache, model) = emulated(config, 1_000, 20_000);
    assert_eq!(cache.index_ways_max(), (WAYS - 1) as u32);
    let mut executor = common::executor(&cache, &model, 4);
    let job_cache = cache.clone();
    let failures = Arc::new(AtomicU64::new(0));
    let job_failures = failures.clone();
    executor
        .spawn(move || {
            let index_pass = |round: u8| {
                // 3 × the index frames that fit.
                for i in 0..3 * SETS * WAYS {
                    match job_cache.get_as(index_page(i), index(i)) {
                        Ok(page) => page.write(|b| b[0] = round),
                        Err(_) => {
                            job_failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            };
            index_pass(1);
            // Data pages get a way in every set: each is found again right after its miss.
            for p in 0..64u64 {
                job_cache.get(p).unwrap();
                job_cache.get(p).unwrap();
            }
            // Index pages arriving at a set at its bound replace index frames, not its data way.
            index_pass(2);
        })
        .unwrap();
    common::run(&mut executor);
    assert_eq!(failures.load(Ordering::Relaxed), 0);
    let resident = cache.resident_index_frames() as u64;
    assert!(
        resident <= SETS * (WAYS - 1),
        "{resident} index frames in {SETS} sets of {WAYS} ways"
    );
    let stats = cache.stats();
    assert!(stats.index_misses >= 2 * 3 * SETS * WAYS - SETS * WAYS);
    assert_eq!(
        stats.hits - stats.index_hits,
        64,
        "data pages found right after their miss"
    );
}

/// Mutation caught: a stale dirty copy of a freed data page left in its data set and written
/// back later, over the index page now at that page number.
#[test]
fn overwriting_a_data_page_as_an_index_page_drops_the_stale_copy() {
    let config = CacheConfig::new(SETS * WAYS * PAGE as u64);
    let (cache, model) = emulated(config, 1_000, 1_024);
    let mut executor = common::executor(&cache, &model, 4);
    let job_cache = cache.clone();
    let page = 77u64;
    // A set key whose set differs from the page's data set: try keys until one does.
    executor
        .spawn(move || {
            let data = job_cache.get(page).unwrap();
            data.write(|b| b.fill(0xDA));
            drop(data);
            // The data copy is dirty and unpinned: overwrite the page as an index page in every
            // set (one of these keys lands in another set than the data copy).
            let key = (0..SETS)
                .find(|&k| {
                    let r = job_cache.get_for_overwrite_as(page, index(k)).unwrap();
                    let fresh = r.read(|b| b[0] == 0);
                    if fresh {
                        r.write(|b| b.fill(0x1D));
                    }
                    fresh
                })
                .expect("some set key maps elsewhere");
            let _ = key;
            job_cache.flush().unwrap();
        })
        .unwrap();
    common::run(&mut executor);
    assert_eq!(cache.stats().discarded, 1);
    let mut buf = vec![0u8; PAGE];
    model.read_at(page * PAGE as u64, &mut buf).unwrap();
    assert!(
        buf.iter().all(|&b| b == 0x1D),
        "the stale data copy was written back"
    );
}

/// A stream of pages asked for once does not push out pages asked for often (TinyLFU
/// admission): each one-off page takes its set's probationary frame, not a hot page's.
/// Mutation caught: admitting every miss (plain CLOCK: the stream evicts the hot pages once
/// the hand has cleared their reference bits).
#[test]
fn one_off_pages_do_not_push_out_frequent_ones() {
    let sets = 16;
    let frames = sets * WAYS;
    let (cache, model) = emulated(CacheConfig::new(frames * PAGE as u64), 1_000, 4_096);
    let mut executor = common::executor(&cache, &model, 2);
    let job = cache.clone();
    let misses = Arc::new(AtomicU64::new(0));
    let m = misses.clone();
    executor
        .spawn(move || {
            // Every frame holds a page asked for three times (all resident: pages spread
            // over the sets by hash, so some sets get more than 8: those miss anyway).
            let hot: Vec<u64> = (0..frames).collect();
            for _ in 0..3 {
                for &page in &hot {
                    job.get(page).unwrap();
                }
            }
            let resident: Vec<u64> = {
                let before = job.stats().misses;
                let mut resident = Vec::new();
                for &page in &hot {
                    let b = job.stats().misses;
                    job.get(page).unwrap();
                    if job.stats().misses == b {
                        resident.push(page);
                    }
                }
                assert!(job.stats().misses - before < frames / 2);
                resident
            };
            for page in 1_000..1_000 + 3 * frames {
                job.get(page).unwrap();
            }
            let before = job.stats().misses;
            for &page in &resident {
                job.get(page).unwrap();
            }
            m.store(
                (job.stats().misses - before) * 1_000 / resident.len() as u64,
                Ordering::Relaxed,
            );
        })
        .unwrap();
    common::run(&mut executor);
    let stats = cache.stats();
    assert!(
        stats.admissions_refused > frames,
        "{}",
        stats.admissions_refused
    );
    let per_mille = misses.load(Ordering::Relaxed);
    assert!(
        per_mille < 400,
        "{per_mille} ‰ of the frequent pages were evicted by one-off pages"
    );
}
