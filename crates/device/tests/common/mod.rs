//! Helpers shared by the integration-test binaries of `tamer-device`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tamer_device::{Arena, Completion, Device, DeviceFile, BLOCK_SIZE};

/// A fresh directory under `std::env::temp_dir()` named after the process and the test, removed
/// (with everything in it) when dropped.
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("tamer-device-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|err| panic!("creating {}: {err}", path.display()));
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens (creating) `name` in this directory as an `O_DIRECT` device file of `blocks` blocks.
    pub fn device_file(&self, name: &str, blocks: u64) -> Arc<DeviceFile> {
        let path = self.path.join(name);
        Arc::new(
            DeviceFile::open(&path, blocks * BLOCK_SIZE as u64)
                .unwrap_or_else(|err| panic!("opening {}: {err}", path.display())),
        )
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Prints the seed of a test if the test panics while this guard is alive.
pub struct SeedGuard {
    test: &'static str,
    seed: u64,
}

impl SeedGuard {
    pub fn new(test: &'static str, seed: u64) -> Self {
        Self { test, seed }
    }
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{} failed with seed {:#x}", self.test, self.seed);
        }
    }
}

/// SplitMix64: a tiny seeded generator, so every random choice of a test is reproducible.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..bound` (bound > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// Fills `frame` of `arena` with a pattern derived from `seed`.
pub fn fill_frame(arena: &Arena, frame: u32, seed: u64) {
    assert!(
        !arena.is_in_io(frame),
        "test bug: filling frame {frame} while in I/O"
    );
    let mut rng = SplitMix::new(seed);
    // SAFETY: the tests use each frame from one thread and only while it is not in I/O.
    let bytes = unsafe { arena.frame_mut(frame) };
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
}

/// A copy of the contents of `frame`.
pub fn frame_contents(arena: &Arena, frame: u32) -> Vec<u8> {
    assert!(
        !arena.is_in_io(frame),
        "test bug: reading frame {frame} while in I/O"
    );
    // SAFETY: as in `fill_frame`.
    unsafe { arena.frame(frame) }.to_vec()
}

/// Zeroes `frame`.
pub fn clear_frame(arena: &Arena, frame: u32) {
    assert!(
        !arena.is_in_io(frame),
        "test bug: clearing frame {frame} while in I/O"
    );
    // SAFETY: as in `fill_frame`.
    unsafe { arena.frame_mut(frame) }.fill(0);
}

/// Submits what was pushed and reaps until `count` completions arrived; panics after 5 s.
pub fn reap(device: &mut dyn Device, count: usize) -> Vec<Completion> {
    device.submit().expect("submit");
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut done = Vec::new();
    while done.len() < count {
        assert!(
            Instant::now() < give_up,
            "{}: only {} of {count} completions after 5 s",
            device.name(),
            done.len()
        );
        if device.poll(&mut done) == 0 {
            device
                .wait(Duration::from_millis(10), &mut done)
                .expect("wait");
        }
    }
    assert_eq!(
        done.len(),
        count,
        "{}: more completions than requests",
        device.name()
    );
    done
}

/// Reaps `count` completions and asserts they all succeeded, with exactly the tags `tags`.
pub fn reap_ok(device: &mut dyn Device, tags: &[u64]) -> Vec<Completion> {
    let done = reap(device, tags.len());
    for completion in &done {
        assert_eq!(
            completion.result,
            Ok(()),
            "{}: tag {}",
            device.name(),
            completion.tag
        );
    }
    let mut got: Vec<u64> = done.iter().map(|c| c.tag).collect();
    got.sort_unstable();
    let mut want = tags.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "{}: completion tags", device.name());
    done
}
