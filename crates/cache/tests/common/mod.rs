#![allow(dead_code)]

use std::sync::Arc;

use tamer_cache::{CacheConfig, PageCache};
use tamer_device::{EmulatedDevice, EmulatorConfig, EmulatorModel};
use tamer_runtime::{Executor, RuntimeConfig};

pub const PAGE: usize = 4096;

/// A cache and an emulated device of `device_pages` pages with `latency_ns`.
pub fn emulated(
    config: CacheConfig,
    latency_ns: u64,
    device_pages: u64,
) -> (Arc<PageCache>, Arc<EmulatorModel>) {
    let cache = Arc::new(PageCache::new(config).expect("valid config"));
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .capacity_bytes(device_pages * PAGE as u64)
        .build()
        .expect("valid emulator");
    (cache, model)
}

/// One executor with `threads` user-level threads over the cache's arena.
pub fn executor(cache: &PageCache, model: &Arc<EmulatorModel>, threads: usize) -> Executor {
    let device = Box::new(EmulatedDevice::new(model.clone(), cache.arena()));
    let config = RuntimeConfig {
        local_queue: 1024,
        ..RuntimeConfig::with_threads(threads)
    };
    Executor::new(0, config, device, cache.arena()).expect("valid executor")
}

/// Deterministic page content for (page, generation): a header (page, generation) and a
/// pseudo-random body; `check` recomputes it.
pub fn fill(buf: &mut [u8], page: u64, generation: u64) {
    buf[0..8].copy_from_slice(&page.to_le_bytes());
    buf[8..16].copy_from_slice(&generation.to_le_bytes());
    let mut x = page.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ generation.wrapping_add(1);
    for chunk in buf[16..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// The (page, generation) header when the body matches it, else `None`.
pub fn check(buf: &[u8]) -> Option<(u64, u64)> {
    let page = u64::from_le_bytes(buf[0..8].try_into().unwrap());
    let generation = u64::from_le_bytes(buf[8..16].try_into().unwrap());
    let mut expected = vec![0u8; buf.len()];
    fill(&mut expected, page, generation);
    (expected == buf).then_some((page, generation))
}

/// Runs the executor until idle and fails the test if a job panicked (the executor catches
/// job panics).
pub fn run(executor: &mut Executor) {
    executor.run_until_idle();
    assert_eq!(
        executor.stats().jobs_panicked,
        0,
        "a job panicked (see above)"
    );
}

/// Fails the test if a job panicked on any core.
pub fn no_panics(reports: &[tamer_runtime::CoreReport]) {
    let panicked: u64 = reports.iter().map(|r| r.stats.jobs_panicked).sum();
    assert_eq!(panicked, 0, "a job panicked (see above)");
}
