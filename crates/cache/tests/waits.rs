//! Waits for other threads park instead of spinning; the cleaner writes back only what a set
//! needs for its next misses.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{emulated, fill, PAGE};
use tamer_cache::{CacheConfig, CLEAN_VICTIMS_WANTED};

/// A writer waits for a reader that holds the page's latch across a 2 ms device read (as a
/// bucket's reader holds it across its record's miss): the writer parks on the latch word
/// instead of yielding in a loop. Mutation caught: latch waits that only yield (the waiting
/// thread would be switched to thousands of times in 2 ms).
#[test]
fn a_writer_waiting_for_a_reader_across_a_miss_parks() {
    let (cache, model) = emulated(CacheConfig::new(64 * PAGE as u64), 2_000_000, 256);
    let mut executor = common::executor(&cache, &model, 4);
    let (reader, writer) = (cache.clone(), cache.clone());
    let order = Arc::new(AtomicU64::new(0));
    let (o1, o2) = (order.clone(), order.clone());
    executor
        .spawn(move || {
            let page = reader.get(1).unwrap();
            page.read(|_| {
                o1.store(1, Ordering::Release);
                // A miss under the shared latch: 2 ms on this device.
                reader.get(2).unwrap();
            });
        })
        .unwrap();
    executor
        .spawn(move || {
            // Page 1 is cached by now (the reader's miss on it came first).
            let page = writer.get(1).unwrap();
            page.write(|b| b[0] = 9);
            o2.store(2, Ordering::Release);
        })
        .unwrap();
    common::run(&mut executor);
    assert_eq!(order.load(Ordering::Acquire), 2);
    let stats = executor.stats();
    assert!(
        stats.yields < 40,
        "{} yields while waiting 2 ms for a latch",
        stats.yields
    );
}

/// Mutation caught: a cleaner that writes back every dirty unreferenced frame (the old rule:
/// pages dirtied again are written twice) instead of just enough for the set's next misses.
#[test]
fn the_cleaner_writes_back_only_what_a_set_needs() {
    // One set of 8 ways.
    let (cache, model) = emulated(CacheConfig::new(8 * PAGE as u64), 1_000, 256);
    let mut executor = common::executor(&cache, &model, 2);
    let job = cache.clone();
    let written = Arc::new(AtomicU64::new(0));
    let w = written.clone();
    executor
        .spawn(move || {
            for page in 0..8u64 {
                job.get(page).unwrap().write(|b| fill(b, page, 1));
            }
            // A miss sweeps the CLOCK hand over the set (clearing reference bits) and evicts
            // one dirty frame; the others stay dirty and unreferenced.
            job.get(100).unwrap();
            let mut cursor = 0;
            let n = job.clean_some(&mut cursor, 1, 1, 8).unwrap();
            w.store(n as u64, Ordering::Relaxed);
            // The set now has its clean victims: another pass writes nothing.
            let again = job.clean_some(&mut cursor, 1, 1, 8).unwrap();
            assert_eq!(again, 0, "a second pass wrote {again}");
        })
        .unwrap();
    common::run(&mut executor);
    let n = written.load(Ordering::Relaxed) as usize;
    assert!(
        (1..=CLEAN_VICTIMS_WANTED).contains(&n),
        "{n} written, at most {CLEAN_VICTIMS_WANTED} needed"
    );
}
