//! Resident memory stays within cache + pinned partition + per-core overhead + slack after
//! writing a data set 8× the cache (alone in its test binary: RSS is per process).

mod common;

use common::*;
use tamer_store::{Db, DbHandle};

fn vm_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn resident_memory_is_bounded_by_the_cache() {
    const CACHE: u64 = 8 << 20;
    const DATA: u64 = 64 << 20; // 8× the cache
    const VALUE: usize = 2000;
    let file = TempFile(temp_path("rss"));
    let before = vm_rss_bytes();
    let options = uring(CACHE).cores(2).threads_per_core(16);
    let (cores, threads) = (options.cores as u64, options.threads_per_core as u64);
    let db = Db::open(&file.0, options).unwrap();
    let keys = DATA / VALUE as u64;
    let per_job = keys / 32;
    let jobs: Vec<Box<dyn FnOnce(DbHandle) + Send>> = (0..32)
        .map(|j| {
            Box::new(move |h: DbHandle| {
                for i in j * per_job..(j + 1) * per_job {
                    let key = format!("rss-{i}").into_bytes();
                    h.put(&key, &value_for(&key, 0, VALUE)).unwrap();
                }
            }) as Box<_>
        })
        .collect();
    run_parallel(&db, jobs);
    assert_eq!(
        db.get(b"rss-7").unwrap(),
        Some(value_for(b"rss-7", 0, VALUE))
    );
    let after = vm_rss_bytes();
    let pinned = (1 + 9) * 4096; // superblock + directory at depth 12
    let metadata = (CACHE / 4096) * 40;
    let per_core = threads * 64 * 1024 + (1 << 20); // stacks + ring, histograms, queues
    let slack = 16 << 20; // allocator arenas, test harness, transient buffers
    let bound = CACHE + pinned + metadata + cores * per_core + slack;
    let grown = after.saturating_sub(before);
    eprintln!("RSS grew {grown} bytes writing {DATA} bytes; bound {bound}");
    assert!(grown <= bound, "RSS grew {grown} > bound {bound}");
    db.close().unwrap();
}
