//! Integration tests of the `tamer-device` implementations: uring, emulated and sync.
//!
//! Every random choice is seeded; a failing test prints its seed. File-backed devices live in a
//! fresh directory under `std::env::temp_dir()` removed when the test ends.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::any;
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, RngSeed, TestRunner};
use tamer_device::{
    fill_with_data, open_device, uring_available, Arena, Completion, Device, DeviceError,
    DeviceFile, DeviceSpec, EmulatedDevice, EmulatorConfig, EmulatorModel, FileMap, IoRequest,
    MmapDevice, SyncDevice, UringConfig, UringDevice, BLOCK_SIZE,
};

use common::{
    clear_frame, fill_frame, frame_contents, reap, reap_ok, SeedGuard, SplitMix, TestDir,
};

const BLOCK: u64 = BLOCK_SIZE as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Uring,
    Emulated,
    Sync,
    Mmap,
}

const KINDS: [Kind; 4] = [Kind::Uring, Kind::Emulated, Kind::Sync, Kind::Mmap];

/// One device under test with its arena and (for file-backed kinds) its temp directory.
struct Rig {
    device: Box<dyn Device>,
    arena: Arc<Arena>,
    /// The file of a file-backed device; dropped (with the directory) after the device.
    file: Option<Arc<DeviceFile>>,
    _dir: Option<TestDir>,
}

/// True when io_uring works here; otherwise prints why the uring case of `test` is skipped.
fn uring_ok(test: &str) -> bool {
    match uring_available() {
        Ok(()) => true,
        Err(err) => {
            eprintln!("{test}: skipping the uring device: {err}");
            false
        }
    }
}

/// Opens a `kind` device of `blocks` blocks over a fresh arena of `arena_frames` frames.
/// `depth` is the ring size (uring) or queue depth (sync); the emulator's handle depth is fixed.
/// Returns `None` (after printing why) when `kind` is uring and io_uring is unavailable.
fn rig(kind: Kind, test: &str, arena_frames: u32, blocks: u64, depth: u32) -> Option<Rig> {
    let arena = Arc::new(Arena::new(arena_frames).expect("arena"));
    match kind {
        Kind::Emulated => {
            let model = EmulatorConfig::with_latency_ns(2_000)
                .capacity_bytes(blocks * BLOCK)
                .build()
                .expect("emulator model");
            let device = EmulatedDevice::new(model, arena.clone());
            Some(Rig {
                device: Box::new(device),
                arena,
                file: None,
                _dir: None,
            })
        }
        Kind::Uring | Kind::Sync | Kind::Mmap => {
            if kind == Kind::Uring && !uring_ok(test) {
                return None;
            }
            let dir = TestDir::new(&format!("{test}-{kind:?}"));
            let file = dir.device_file("data", blocks);
            let device: Box<dyn Device> = match kind {
                Kind::Uring => {
                    let config = UringConfig { entries: depth };
                    Box::new(UringDevice::open(file.clone(), arena.clone(), config).expect("uring"))
                }
                Kind::Mmap => {
                    let map = Arc::new(FileMap::new(file.clone()).expect("mmap"));
                    Box::new(MmapDevice::new(map, arena.clone(), depth as usize))
                }
                _ => Box::new(SyncDevice::new(file.clone(), arena.clone(), depth as usize)),
            };
            Some(Rig {
                device,
                arena,
                file: Some(file),
                _dir: Some(dir),
            })
        }
    }
}

fn expected_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Uring => "uring",
        Kind::Emulated => "emulated",
        Kind::Sync => "sync",
        Kind::Mmap => "mmap",
    }
}

/// Pattern seed of the data a test writes to `block` in round `round`.
fn pattern_seed(seed: u64, round: u64, block: u64) -> u64 {
    seed ^ round.wrapping_mul(0xa076_1d64_78bd_642f) ^ block.wrapping_mul(0xe703_7ed1_a0b4_28db)
}

fn assert_frames_idle(arena: &Arena, what: &str) {
    for frame in 0..arena.frame_count() {
        assert!(
            !arena.is_in_io(frame),
            "{what}: frame {frame} left marked as in I/O"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Round trip
// ---------------------------------------------------------------------------------------------

fn round_trip(kind: Kind) {
    const TEST: &str = "round_trip";
    let seed = 0x0005_eed0_0001 ^ kind as u64;
    let _guard = SeedGuard::new(TEST, seed);
    let Some(mut rig) = rig(kind, TEST, 16, 64, 16) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    assert_eq!(device.name(), expected_name(kind));
    assert_eq!(device.capacity_bytes(), 64 * BLOCK);

    // Seeded, distinct block choices: a 3-block run, three single blocks and three more single
    // blocks for the second round, none overlapping.
    let mut rng = SplitMix::new(seed);
    let run = rng.below(64 - 3);
    let mut used: Vec<u64> = (run..run + 3).collect();
    let pick = |rng: &mut SplitMix, used: &mut Vec<u64>| loop {
        let block = rng.below(64);
        if !used.contains(&block) {
            used.push(block);
            return block;
        }
    };
    let singles: Vec<u64> = (0..3).map(|_| pick(&mut rng, &mut used)).collect();
    let later: Vec<u64> = (0..3).map(|_| pick(&mut rng, &mut used)).collect();

    // Round 1: write singles from frames 0..3 and the run from frames 3..6 (one 3-frame write).
    let mut expected = std::collections::HashMap::new();
    for (i, &block) in singles.iter().enumerate() {
        fill_frame(&arena, i as u32, pattern_seed(seed, 1, block));
        expected.insert(block, frame_contents(&arena, i as u32));
    }
    for i in 0..3u32 {
        let block = run + u64::from(i);
        fill_frame(&arena, 3 + i, pattern_seed(seed, 1, block));
        expected.insert(block, frame_contents(&arena, 3 + i));
    }
    for (i, &block) in singles.iter().enumerate() {
        device
            .push(IoRequest::write(block * BLOCK, i as u32, 1, 10 + i as u64))
            .unwrap();
    }
    device
        .push(IoRequest::write(run * BLOCK, 3, 3, 13))
        .unwrap();
    assert_eq!(device.in_flight(), 4);
    for frame in 0..6 {
        assert!(
            arena.is_in_io(frame),
            "{kind:?}: frame {frame} not marked after push"
        );
    }
    reap_ok(device, &[10, 11, 12, 13]);
    assert_eq!(device.in_flight(), 0);
    assert_frames_idle(&arena, "after the writes");

    // Read them back into other frames: singles into 8..11, the run into 11..14 in one request.
    for frame in 8..14 {
        clear_frame(&arena, frame);
    }
    for (i, &block) in singles.iter().enumerate() {
        device
            .push(IoRequest::read(
                block * BLOCK,
                8 + i as u32,
                1,
                20 + i as u64,
            ))
            .unwrap();
    }
    device
        .push(IoRequest::read(run * BLOCK, 11, 3, 23))
        .unwrap();
    reap_ok(device, &[20, 21, 22, 23]);
    for (i, &block) in singles.iter().enumerate() {
        assert!(
            frame_contents(&arena, 8 + i as u32) == expected[&block],
            "{kind:?}: block {block} read back into frame {} differs",
            8 + i
        );
    }
    for i in 0..3u32 {
        let block = run + u64::from(i);
        assert!(
            frame_contents(&arena, 11 + i) == expected[&block],
            "{kind:?}: block {block} of the 3-block read (frame {}) differs",
            11 + i
        );
    }

    // Round 2: reads into frames while writes of other blocks are in flight, all pushed before
    // one doorbell, then reaped together.
    for (i, &block) in later.iter().enumerate() {
        fill_frame(&arena, i as u32, pattern_seed(seed, 2, block));
        expected.insert(block, frame_contents(&arena, i as u32));
    }
    for frame in [6, 7, 8, 14, 15] {
        clear_frame(&arena, frame);
    }
    for (i, &block) in later.iter().enumerate() {
        device
            .push(IoRequest::write(block * BLOCK, i as u32, 1, 30 + i as u64))
            .unwrap();
    }
    device
        .push(IoRequest::read(singles[0] * BLOCK, 14, 1, 33))
        .unwrap();
    device.push(IoRequest::read(run * BLOCK, 6, 3, 34)).unwrap();
    device
        .push(IoRequest::read(singles[2] * BLOCK, 15, 1, 35))
        .unwrap();
    assert_eq!(device.in_flight(), 6);
    assert_eq!(device.submit().unwrap(), 6);
    reap_ok(device, &[30, 31, 32, 33, 34, 35]);
    assert!(
        frame_contents(&arena, 14) == expected[&singles[0]],
        "{kind:?}: concurrent read 33"
    );
    assert!(
        frame_contents(&arena, 15) == expected[&singles[2]],
        "{kind:?}: concurrent read 35"
    );
    for i in 0..3u32 {
        assert!(
            frame_contents(&arena, 6 + i) == expected[&(run + u64::from(i))],
            "{kind:?}: concurrent 3-block read, block {}",
            run + u64::from(i)
        );
    }
    // And the writes of round 2 landed.
    for (i, &block) in later.iter().enumerate() {
        device
            .push(IoRequest::read(
                block * BLOCK,
                9 + i as u32,
                1,
                40 + i as u64,
            ))
            .unwrap();
    }
    reap_ok(device, &[40, 41, 42]);
    for (i, &block) in later.iter().enumerate() {
        assert!(
            frame_contents(&arena, 9 + i as u32) == expected[&block],
            "{kind:?}: round-2 block {block} differs"
        );
    }
    assert_frames_idle(&arena, "at the end");
    let stats = device.stats();
    assert_eq!(
        (stats.pushed, stats.submitted, stats.completed, stats.errors),
        (17, 17, 17, 0)
    );
}

#[test]
fn round_trip_uring() {
    round_trip(Kind::Uring);
}

#[test]
fn round_trip_emulated() {
    round_trip(Kind::Emulated);
}

#[test]
fn round_trip_sync() {
    round_trip(Kind::Sync);
}

#[test]
fn round_trip_mmap() {
    round_trip(Kind::Mmap);
}

/// Data written through one implementation is read back through another on the same file, and
/// one emulated model is shared by its handles.
#[test]
fn implementations_share_their_backing_store() {
    const TEST: &str = "share_backing_store";
    let seed = 0x0005_eed0_0002;
    let _guard = SeedGuard::new(TEST, seed);
    let arena = Arc::new(Arena::new(4).unwrap());

    // Emulated: two handles on one model.
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(16 * BLOCK)
        .build()
        .unwrap();
    let mut a = EmulatedDevice::with_seed(model.clone(), arena.clone(), 1);
    let mut b = EmulatedDevice::with_seed(model, arena.clone(), 2);
    fill_frame(&arena, 0, seed);
    let want = frame_contents(&arena, 0);
    a.push(IoRequest::write(5 * BLOCK, 0, 1, 1)).unwrap();
    reap_ok(&mut a, &[1]);
    b.push(IoRequest::read(5 * BLOCK, 1, 1, 2)).unwrap();
    reap_ok(&mut b, &[2]);
    assert!(
        frame_contents(&arena, 1) == want,
        "emulated handle b does not see a's write"
    );

    // Files: sync writes, uring reads, and the other way round.
    let dir = TestDir::new(TEST);
    let file = dir.device_file("data", 16);
    let mut sync = SyncDevice::new(file.clone(), arena.clone(), 4);
    fill_frame(&arena, 2, seed + 1);
    let want_sync = frame_contents(&arena, 2);
    sync.push(IoRequest::write(3 * BLOCK, 2, 1, 3)).unwrap();
    reap_ok(&mut sync, &[3]);
    if !uring_ok(TEST) {
        return;
    }
    let mut uring = UringDevice::open(file, arena.clone(), UringConfig { entries: 4 }).unwrap();
    clear_frame(&arena, 3);
    uring.push(IoRequest::read(3 * BLOCK, 3, 1, 4)).unwrap();
    reap_ok(&mut uring, &[4]);
    assert!(
        frame_contents(&arena, 3) == want_sync,
        "uring does not read what sync wrote"
    );
    fill_frame(&arena, 0, seed + 2);
    let want_uring = frame_contents(&arena, 0);
    uring.push(IoRequest::write(7 * BLOCK, 0, 1, 5)).unwrap();
    reap_ok(&mut uring, &[5]);
    clear_frame(&arena, 1);
    sync.push(IoRequest::read(7 * BLOCK, 1, 1, 6)).unwrap();
    reap_ok(&mut sync, &[6]);
    assert!(
        frame_contents(&arena, 1) == want_uring,
        "sync does not read what uring wrote"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Errors
// ---------------------------------------------------------------------------------------------

fn request_errors(kind: Kind) {
    const TEST: &str = "request_errors";
    let Some(mut rig) = rig(kind, TEST, 6, 8, 4) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    let cap = 8 * BLOCK;
    let aligned_max = u64::MAX / BLOCK * BLOCK;
    let cases: Vec<(IoRequest, DeviceError)> = vec![
        (
            IoRequest::read(100, 0, 1, 1),
            DeviceError::MisalignedOffset { offset_bytes: 100 },
        ),
        (
            IoRequest::write(4095, 0, 1, 1),
            DeviceError::MisalignedOffset { offset_bytes: 4095 },
        ),
        (
            IoRequest::read(cap + 512, 0, 1, 1),
            DeviceError::MisalignedOffset {
                offset_bytes: cap + 512,
            },
        ),
        (
            IoRequest::read(cap, 0, 1, 1),
            DeviceError::OutOfRange {
                offset_bytes: cap,
                len_bytes: BLOCK,
                capacity_bytes: cap,
            },
        ),
        (
            IoRequest::read(cap - BLOCK, 0, 2, 1),
            DeviceError::OutOfRange {
                offset_bytes: cap - BLOCK,
                len_bytes: 2 * BLOCK,
                capacity_bytes: cap,
            },
        ),
        (
            IoRequest::write(cap - 2 * BLOCK, 0, 3, 1),
            DeviceError::OutOfRange {
                offset_bytes: cap - 2 * BLOCK,
                len_bytes: 3 * BLOCK,
                capacity_bytes: cap,
            },
        ),
        (
            // offset + length overflows u64.
            IoRequest::read(aligned_max, 0, 2, 1),
            DeviceError::OutOfRange {
                offset_bytes: aligned_max,
                len_bytes: 2 * BLOCK,
                capacity_bytes: cap,
            },
        ),
        (IoRequest::read(0, 0, 0, 1), DeviceError::EmptyRequest),
        (IoRequest::write(BLOCK, 3, 0, 1), DeviceError::EmptyRequest),
        (
            IoRequest::read(0, 6, 1, 1),
            DeviceError::BadFrame {
                frame: 6,
                frames: 1,
                arena_frames: 6,
            },
        ),
        (
            IoRequest::write(0, 5, 2, 1),
            DeviceError::BadFrame {
                frame: 5,
                frames: 2,
                arena_frames: 6,
            },
        ),
        (
            IoRequest::read(0, u32::MAX, 2, 1),
            DeviceError::BadFrame {
                frame: u32::MAX,
                frames: 2,
                arena_frames: 6,
            },
        ),
    ];
    for (request, expected) in &cases {
        assert_eq!(
            device.push(*request).as_ref(),
            Err(expected),
            "{kind:?}: push {request:?}"
        );
    }
    // Rejected requests leave no trace.
    assert_eq!(device.in_flight(), 0, "{kind:?}");
    assert_eq!(device.stats().pushed, 0, "{kind:?}");
    assert_frames_idle(&arena, &format!("{kind:?} after rejected pushes"));
    assert_eq!(device.submit().unwrap(), 0);
    assert_eq!(
        device.stats().doorbells,
        0,
        "{kind:?}: doorbell for nothing"
    );

    // The boundaries themselves are fine: the last block, the last frame, the last 3 blocks.
    device.push(IoRequest::read(cap - BLOCK, 5, 1, 2)).unwrap();
    device
        .push(IoRequest::write(cap - 3 * BLOCK, 0, 3, 3))
        .unwrap();
    reap_ok(device, &[2, 3]);

    // Messages name the fix.
    fn message(request: IoRequest, device: &mut dyn Device) -> String {
        device
            .push(request)
            .expect_err("must be rejected")
            .to_string()
    }
    let misaligned = message(IoRequest::read(100, 0, 1, 1), device);
    assert!(
        misaligned.contains("4096") && misaligned.contains("100"),
        "{misaligned}"
    );
    let out_of_range = message(IoRequest::read(cap - BLOCK, 0, 2, 1), device);
    assert!(out_of_range.contains("grow the device"), "{out_of_range}");
    assert!(out_of_range.contains(&cap.to_string()), "{out_of_range}");
    let empty = message(IoRequest::read(0, 0, 0, 1), device);
    assert!(empty.contains("at least one"), "{empty}");
    let bad_frame = message(IoRequest::read(0, 5, 2, 1), device);
    assert!(
        bad_frame.contains("5..7") && bad_frame.contains("6 frames"),
        "{bad_frame}"
    );
}

#[test]
fn request_errors_uring() {
    request_errors(Kind::Uring);
}

#[test]
fn request_errors_emulated() {
    request_errors(Kind::Emulated);
}

#[test]
fn request_errors_sync() {
    request_errors(Kind::Sync);
}

#[test]
fn request_errors_mmap() {
    request_errors(Kind::Mmap);
}

fn frame_busy(kind: Kind) {
    const TEST: &str = "frame_busy";
    let Some(mut rig) = rig(kind, TEST, 6, 8, 4) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    device.push(IoRequest::read(0, 1, 2, 1)).unwrap();
    assert!(arena.is_in_io(1) && arena.is_in_io(2));

    assert_eq!(
        device.push(IoRequest::write(4 * BLOCK, 2, 1, 2)),
        Err(DeviceError::FrameBusy { frame: 2 })
    );
    // A request overlapping at its end: frame 0 must not stay marked.
    assert_eq!(
        device.push(IoRequest::read(BLOCK, 0, 2, 3)),
        Err(DeviceError::FrameBusy { frame: 1 })
    );
    assert!(
        !arena.is_in_io(0),
        "{kind:?}: failed push left frame 0 marked"
    );
    // Overlapping at its start: frame 3 must not be marked.
    assert_eq!(
        device.push(IoRequest::read(2 * BLOCK, 2, 2, 4)),
        Err(DeviceError::FrameBusy { frame: 2 })
    );
    assert!(!arena.is_in_io(3), "{kind:?}: failed push marked frame 3");
    let busy = device.push(IoRequest::read(0, 1, 1, 5)).unwrap_err();
    assert!(
        busy.to_string().contains("wait for its completion"),
        "{busy}"
    );

    assert_eq!(device.in_flight(), 1);
    assert_eq!(device.stats().pushed, 1);
    reap_ok(device, &[1]);
    assert_frames_idle(&arena, "after reaping");
    // Once reaped, the frames are free again.
    device.push(IoRequest::write(4 * BLOCK, 2, 1, 6)).unwrap();
    device.push(IoRequest::read(BLOCK, 0, 2, 7)).unwrap();
    reap_ok(device, &[6, 7]);
}

#[test]
fn frame_busy_uring() {
    frame_busy(Kind::Uring);
}

#[test]
fn frame_busy_emulated() {
    frame_busy(Kind::Emulated);
}

#[test]
fn frame_busy_sync() {
    frame_busy(Kind::Sync);
}

#[test]
fn frame_busy_mmap() {
    frame_busy(Kind::Mmap);
}

/// Fills the queue of a uring (4 entries) or sync (depth 2) device, checks the next push fails
/// with QueueFull until completions are reaped.
fn queue_full(kind: Kind, depth: u32) {
    const TEST: &str = "queue_full";
    let Some(mut rig) = rig(kind, TEST, 8, 8, depth) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    assert_eq!(device.queue_depth(), depth as usize);
    for i in 0..depth {
        device
            .push(IoRequest::read(u64::from(i) * BLOCK, i, 1, u64::from(i)))
            .unwrap();
    }
    let full = DeviceError::QueueFull {
        queue_depth: depth as usize,
    };
    let extra = IoRequest::read(0, depth, 1, 99);
    assert_eq!(
        device.push(extra),
        Err(full.clone()),
        "{kind:?}: push beyond the depth"
    );
    assert!(
        !arena.is_in_io(depth),
        "{kind:?}: rejected push marked its frame"
    );
    let message = full.to_string();
    assert!(message.contains("reap completions") && message.contains(&depth.to_string()));

    // Submitted but not reaped still counts.
    assert_eq!(device.submit().unwrap(), depth as usize);
    assert_eq!(
        device.push(extra),
        Err(full),
        "{kind:?}: push before reaping"
    );
    assert_eq!(device.in_flight(), depth as usize);

    let tags: Vec<u64> = (0..u64::from(depth)).collect();
    reap_ok(device, &tags);
    assert_eq!(device.in_flight(), 0);
    device.push(extra).unwrap();
    reap_ok(device, &[99]);
}

#[test]
fn queue_full_uring() {
    queue_full(Kind::Uring, 4);
}

#[test]
fn queue_full_sync() {
    queue_full(Kind::Sync, 2);
}

#[test]
fn queue_full_mmap() {
    queue_full(Kind::Mmap, 2);
}

/// Writes through the mapping reach the file by the flush (an `O_DIRECT` read, which bypasses
/// the page cache, sees them), and a file grown after mapping is reachable without a remap.
#[test]
fn mmap_flush_reaches_the_file_and_growth_is_mapped() {
    const TEST: &str = "mmap_flush_growth";
    let seed = 0x0005_eed0_00a1;
    let _guard = SeedGuard::new(TEST, seed);
    let dir = TestDir::new(TEST);
    let file = dir.device_file("data", 4);
    let arena = Arc::new(Arena::new(4).unwrap());
    let map = Arc::new(FileMap::new(file.clone()).unwrap());
    let mut mmap = MmapDevice::new(map.clone(), arena.clone(), 4);
    let mut direct = SyncDevice::new(file.clone(), arena.clone(), 4);

    fill_frame(&arena, 0, seed);
    let want = frame_contents(&arena, 0);
    mmap.push(IoRequest::write(2 * BLOCK, 0, 1, 1)).unwrap();
    reap_ok(&mut mmap, &[1]);
    mmap.flush().unwrap();
    clear_frame(&arena, 1);
    direct.push(IoRequest::read(2 * BLOCK, 1, 1, 2)).unwrap();
    reap_ok(&mut direct, &[2]);
    assert!(
        frame_contents(&arena, 1) == want,
        "an O_DIRECT read after the flush does not see the mapped write"
    );

    // Past the end: refused, never touched (a touch would be SIGBUS).
    assert!(matches!(
        mmap.push(IoRequest::read(6 * BLOCK, 2, 1, 3)),
        Err(DeviceError::OutOfRange { .. })
    ));
    file.grow_to(8 * BLOCK).unwrap();
    assert_eq!(mmap.capacity_bytes(), 8 * BLOCK);
    fill_frame(&arena, 2, seed + 1);
    let want_grown = frame_contents(&arena, 2);
    mmap.push(IoRequest::write(6 * BLOCK, 2, 1, 4)).unwrap();
    mmap.push(IoRequest::read(6 * BLOCK, 3, 1, 5)).unwrap();
    reap_ok(&mut mmap, &[4, 5]);
    assert!(frame_contents(&arena, 3) == want_grown);
    assert_frames_idle(&arena, TEST);
}

#[test]
fn queue_full_emulated() {
    let depth = tamer_device::EmulatedDevice::new(
        EmulatorConfig::with_latency_ns(1_000)
            .capacity_bytes(BLOCK)
            .build()
            .unwrap(),
        Arc::new(Arena::new(1).unwrap()),
    )
    .queue_depth();
    let arena = Arc::new(Arena::new(depth as u32 + 1).unwrap());
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(BLOCK)
        .build()
        .unwrap();
    let mut device = EmulatedDevice::new(model, arena.clone());
    for frame in 0..depth as u32 {
        device
            .push(IoRequest::read(0, frame, 1, u64::from(frame)))
            .unwrap();
    }
    let extra = IoRequest::read(0, depth as u32, 1, 9_999);
    assert_eq!(
        device.push(extra),
        Err(DeviceError::QueueFull { queue_depth: depth })
    );
    assert!(!arena.is_in_io(depth as u32));
    let done = reap(&mut device, depth);
    assert!(done.iter().all(|c| c.result.is_ok()));
    device.push(extra).unwrap();
    reap_ok(&mut device, &[9_999]);
}

// ---------------------------------------------------------------------------------------------
// 3. tmpfs and configuration errors
// ---------------------------------------------------------------------------------------------

#[test]
fn tmpfs_has_no_direct_io() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("tmpfs_has_no_direct_io: skipped, /dev/shm does not exist");
        return;
    }
    let dir = shm.join(format!(
        "tamer-device-{}-tmpfs_has_no_direct_io",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data");
    let result = DeviceFile::open(&path, 1 << 20);
    let left_behind = path.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!left_behind, "a refused open left {path:?} behind");
    match result {
        Err(DeviceError::NoDirectIo { path: reported }) => {
            assert_eq!(reported, path.display().to_string());
            let message = DeviceError::NoDirectIo { path: reported }.to_string();
            for needle in ["O_DIRECT", "tmpfs", "ext4"] {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            }
        }
        Err(other) => panic!("expected NoDirectIo on tmpfs, got {other:?} ({other})"),
        Ok(file) => panic!("DeviceFile::open accepted tmpfs: {file:?}"),
    }
}

#[test]
fn configuration_errors() {
    let dir = TestDir::new("configuration_errors");
    assert!(matches!(
        DeviceFile::open(&dir.path().join("tiny"), BLOCK - 1),
        Err(DeviceError::Config(_))
    ));
    // Capacity is rounded down to whole blocks.
    let file = DeviceFile::open(&dir.path().join("round"), 3 * BLOCK + 100).unwrap();
    assert_eq!(file.capacity_bytes(), 3 * BLOCK);
    let file = Arc::new(file);
    let arena = Arc::new(Arena::new(2).unwrap());
    for entries in [0, 3, 8192] {
        let result = UringDevice::open(file.clone(), arena.clone(), UringConfig { entries });
        assert!(
            matches!(result, Err(DeviceError::Config(_))),
            "ring of {entries} entries accepted"
        );
    }
    assert!(Arena::new(0).is_err());
    let bad_models = [
        EmulatorConfig::with_latency_ns(1_000).capacity_bytes(BLOCK - 1),
        EmulatorConfig::with_latency_ns(1_000).queue_depth(0),
        EmulatorConfig::with_latency_ns(1_000).iops(0),
        EmulatorConfig::with_latency_ns(1_000).bandwidth_bytes_per_s(0),
    ];
    for config in bad_models {
        assert!(
            matches!(config.clone().build(), Err(DeviceError::Config(_))),
            "{config:?}"
        );
    }
    assert!(matches!(
        EmulatorConfig::preset("nope"),
        Err(DeviceError::Config(_))
    ));
    assert_eq!(EmulatorConfig::preset("flash").unwrap().latency_ns, 50_000);
    assert_eq!(EmulatorConfig::preset("scm").unwrap().latency_ns, 4_000);
    assert_eq!(EmulatorConfig::preset("1us").unwrap().latency_ns, 1_000);
    let model = EmulatorConfig::with_latency_ns(1)
        .capacity_bytes(5 * BLOCK + 1)
        .build()
        .unwrap();
    assert_eq!(model.capacity_bytes(), 5 * BLOCK);
}

#[test]
fn open_device_opens_every_kind() {
    const TEST: &str = "open_device_every_kind";
    let dir = TestDir::new(TEST);
    let file = dir.device_file("data", 8);
    let arena = Arc::new(Arena::new(4).unwrap());
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(8 * BLOCK)
        .build()
        .unwrap();
    let mut specs = vec![
        ("emulated", DeviceSpec::Emulated { model }),
        (
            "sync",
            DeviceSpec::Sync {
                file: file.clone(),
                queue_depth: 2,
            },
        ),
    ];
    if uring_ok(TEST) {
        specs.push((
            "uring",
            DeviceSpec::Uring {
                file,
                config: UringConfig { entries: 8 },
            },
        ));
    }
    for (index, (name, spec)) in specs.into_iter().enumerate() {
        let mut device = open_device(&spec, arena.clone(), index).unwrap();
        assert_eq!(device.name(), name);
        assert_eq!(device.capacity_bytes(), 8 * BLOCK);
        device.push(IoRequest::write(BLOCK, 0, 2, 1)).unwrap();
        device.push(IoRequest::read(BLOCK, 2, 2, 2)).unwrap();
        reap_ok(&mut *device, &[1, 2]);
    }
}

// ---------------------------------------------------------------------------------------------
// 5. The emulator never completes early
// ---------------------------------------------------------------------------------------------

const PROPTEST_SEED: u64 = 0x7a3e_0005;

#[test]
fn emulator_never_completes_early() {
    let config = ProptestConfig {
        cases: 32,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(PROPTEST_SEED),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (500u64..200_000, 0u64..50_000, 1u32..32, any::<u64>());
    let result = runner.run(&strategy, |(latency_ns, jitter_ns, requests, seed)| {
        check_never_early(latency_ns, jitter_ns, requests, seed);
        Ok(())
    });
    if let Err(err) = result {
        panic!("emulator_never_completes_early failed (proptest seed {PROPTEST_SEED:#x}): {err}");
    }
}

fn check_never_early(latency_ns: u64, jitter_ns: u64, requests: u32, seed: u64) {
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .jitter_ns(jitter_ns)
        .seed(seed)
        .capacity_bytes(64 * BLOCK)
        .build()
        .unwrap();
    let arena = Arc::new(Arena::new(32).unwrap());
    let mut device = EmulatedDevice::new(model, arena);
    let mut rng = SplitMix::new(seed);
    for i in 0..requests {
        let offset = rng.below(64) * BLOCK;
        let request = if rng.below(2) == 0 {
            IoRequest::read(offset, i, 1, u64::from(i))
        } else {
            IoRequest::write(offset, i, 1, u64::from(i))
        };
        device.push(request).unwrap();
    }
    let latency = Duration::from_nanos(latency_ns);
    let start = Instant::now();
    assert_eq!(device.submit().unwrap(), requests as usize);
    let mut done: Vec<Completion> = Vec::new();
    let first = device.poll(&mut done);
    let elapsed = start.elapsed();
    if elapsed < latency {
        // Always the case for latencies of 50 µs and more unless the thread was descheduled
        // between submit and poll.
        assert_eq!(
            first, 0,
            "completion {elapsed:?} after submit, latency {latency:?}"
        );
    } else if latency_ns >= 50_000 {
        eprintln!("note: poll ran {elapsed:?} after submit; the immediate check was moot");
    }
    let give_up = start + Duration::from_secs(5);
    while done.len() < requests as usize {
        assert!(
            Instant::now() < give_up,
            "{} of {requests} after 5 s",
            done.len()
        );
        if device.poll(&mut done) > 0 {
            // Whatever a poll returns, the real time since the doorbell covers the latency.
            assert!(
                start.elapsed() >= latency,
                "completed after {:?}",
                start.elapsed()
            );
        }
    }
    let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..u64::from(requests)).collect::<Vec<_>>());
    for completion in &done {
        assert_eq!(completion.result, Ok(()));
        assert!(
            completion.latency_ns >= latency_ns,
            "tag {} completed after {} ns, latency {latency_ns} ns, jitter {jitter_ns} ns",
            completion.tag,
            completion.latency_ns
        );
    }
    let stats = device.stats();
    assert_eq!(stats.completed, u64::from(requests));
    // The histogram keeps 3 significant digits.
    assert!(
        stats.latency_ns.min() >= latency_ns * 999 / 1000,
        "histogram min below latency"
    );
    assert_eq!(device.model().in_service(), 0);
}

// ---------------------------------------------------------------------------------------------
// 6. Emulator caps
// ---------------------------------------------------------------------------------------------

/// Submits `requests` reads of `frames` frames each and reaps them all, checking after every
/// poll that the model never has more than `cap` in service. Returns the completions' latencies,
/// sorted, and the wall time from just before the doorbell to the last reap.
fn run_capped(
    model: &Arc<EmulatorModel>,
    requests: u32,
    frames: u32,
    cap: Option<usize>,
) -> (Vec<u64>, Duration) {
    let arena = Arc::new(Arena::new(requests * frames).unwrap());
    let mut device = EmulatedDevice::new(model.clone(), arena);
    for i in 0..requests {
        device
            .push(IoRequest::read(0, i * frames, frames, u64::from(i)))
            .unwrap();
    }
    let start = Instant::now();
    device.submit().unwrap();
    if let Some(cap) = cap {
        assert_eq!(model.in_service(), cap.min(requests as usize));
    }
    let mut done = Vec::new();
    while done.len() < requests as usize {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{} of {requests} after 5 s",
            done.len()
        );
        device.poll(&mut done);
        if let Some(cap) = cap {
            assert!(
                model.in_service() <= cap,
                "{} in service, cap {cap}",
                model.in_service()
            );
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(model.in_service(), 0);
    let mut latencies: Vec<u64> = done.iter().map(|c| c.latency_ns).collect();
    latencies.sort_unstable();
    (latencies, elapsed)
}

#[test]
fn emulator_queue_depth_cap() {
    let latency_ns = 20_000;
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .queue_depth(2)
        .build()
        .unwrap();
    let (latencies, elapsed) = run_capped(&model, 8, 1, Some(2));
    assert!(
        elapsed >= Duration::from_nanos(4 * latency_ns),
        "8 requests took {elapsed:?}"
    );
    // Served two at a time: the k-th completion waited for k / 2 earlier rounds.
    for (k, &latency) in latencies.iter().enumerate() {
        let floor = (k as u64 / 2 + 1) * latency_ns;
        assert!(
            latency >= floor,
            "completion {k}: {latency} ns < {floor} ns ({latencies:?})"
        );
    }
}

#[test]
fn emulator_queue_depth_cap_is_device_wide() {
    let latency_ns = 20_000;
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .queue_depth(2)
        .build()
        .unwrap();
    let arena = Arc::new(Arena::new(16).unwrap());
    let mut handles = [
        EmulatedDevice::with_seed(model.clone(), arena.clone(), 1),
        EmulatedDevice::with_seed(model.clone(), arena.clone(), 2),
    ];
    for (h, device) in handles.iter_mut().enumerate() {
        for i in 0..8u32 {
            let frame = h as u32 * 8 + i;
            device
                .push(IoRequest::read(0, frame, 1, u64::from(frame)))
                .unwrap();
        }
    }
    let start = Instant::now();
    for device in &mut handles {
        device.submit().unwrap();
        assert!(model.in_service() <= 2);
    }
    assert_eq!(model.in_service(), 2);
    let mut done = Vec::new();
    while done.len() < 16 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{} of 16 after 5 s",
            done.len()
        );
        for device in &mut handles {
            device.poll(&mut done);
            assert!(
                model.in_service() <= 2,
                "{} in service, cap 2",
                model.in_service()
            );
        }
    }
    // 16 requests, two at a time, each in service for at least the latency.
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_nanos(8 * latency_ns),
        "16 requests took {elapsed:?}"
    );
    assert_eq!(model.in_service(), 0);
}

#[test]
fn emulator_iops_cap() {
    // 100 000 IOPS: one request per 10 µs through the pipe.
    let model = EmulatorConfig::with_latency_ns(1_000)
        .iops(100_000)
        .build()
        .unwrap();
    let (latencies, elapsed) = run_capped(&model, 50, 1, None);
    assert!(
        elapsed >= Duration::from_micros(490),
        "50 requests took {elapsed:?}"
    );
    for (k, &latency) in latencies.iter().enumerate() {
        let floor = (k as u64 + 1) * 10_000 + 1_000;
        assert!(
            latency >= floor,
            "completion {k}: {latency} ns < {floor} ns"
        );
    }
}

#[test]
fn emulator_bandwidth_cap() {
    // 409.6 MB/s: one 4 KiB block per 10 µs.
    let bandwidth = 100_000 * BLOCK;
    let model = EmulatorConfig::with_latency_ns(1_000)
        .bandwidth_bytes_per_s(bandwidth)
        .build();
    let (latencies, elapsed) = run_capped(&model.unwrap(), 50, 1, None);
    assert!(
        elapsed >= Duration::from_micros(490),
        "50 blocks took {elapsed:?}"
    );
    for (k, &latency) in latencies.iter().enumerate() {
        let floor = (k as u64 + 1) * 10_000;
        assert!(
            latency >= floor,
            "completion {k}: {latency} ns < {floor} ns"
        );
    }
    // Multi-block requests take proportionally longer: 3 blocks = 30 µs each.
    let model = EmulatorConfig::with_latency_ns(1_000)
        .bandwidth_bytes_per_s(bandwidth)
        .build();
    let (latencies, elapsed) = run_capped(&model.unwrap(), 10, 3, None);
    assert!(
        elapsed >= Duration::from_micros(290),
        "10 × 3 blocks took {elapsed:?}"
    );
    for (k, &latency) in latencies.iter().enumerate() {
        let floor = (k as u64 + 1) * 30_000;
        assert!(
            latency >= floor,
            "completion {k}: {latency} ns < {floor} ns"
        );
    }
}

/// The model accounts the CPU time its handles spend completing requests (the copies that
/// stand in for DMA): nothing before a completion, something after.
#[test]
fn emulator_counts_completion_cpu_time() {
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(8 * BLOCK)
        .completion_accounting(true)
        .build()
        .unwrap();
    let arena = Arc::new(Arena::new(4).unwrap());
    let mut device = EmulatedDevice::new(model.clone(), arena);
    assert_eq!(model.completion_cpu_ns(), 0);
    for i in 0..4u32 {
        device
            .push(IoRequest::read(u64::from(i) * BLOCK, i, 1, u64::from(i)))
            .unwrap();
    }
    reap_ok(&mut device, &[0, 1, 2, 3]);
    assert!(model.completion_cpu_ns() > 0);
}

/// With DMA offload, a DMA engine on another thread moves the data before the deadline; what
/// it has not reached, the poller moves itself; data is right either way, no completion is
/// early, and a dropped handle's queued jobs are never performed.
#[test]
fn emulator_dma_offload_moves_data_off_the_polling_core() {
    const TEST: &str = "emulator_dma_offload";
    let seed = 0x0005_eed0_0d3a;
    let _guard = SeedGuard::new(TEST, seed);
    let latency_ns = 200_000;
    let model = EmulatorConfig::with_latency_ns(latency_ns)
        .capacity_bytes(64 * BLOCK)
        .dma_offload(true)
        .build()
        .unwrap();
    let arena = Arc::new(Arena::new(32).unwrap());

    // 1. The engine runs between the doorbell and the deadline: it makes every copy.
    let mut device = EmulatedDevice::new(model.clone(), arena.clone());
    for i in 0..16u32 {
        fill_frame(&arena, i, seed + u64::from(i));
        device
            .push(IoRequest::write(u64::from(i) * BLOCK, i, 1, u64::from(i)))
            .unwrap();
    }
    let start = Instant::now();
    device.submit().unwrap();
    assert_eq!(model.run_dma(64), 16);
    reap_ok(&mut device, &(0..16).collect::<Vec<u64>>());
    assert!(start.elapsed() >= Duration::from_nanos(latency_ns));
    assert_eq!(model.dma_counts(), (16, 0));

    // 2. An engine thread races the poller: whoever gets a copy makes it, exactly once.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let engine = {
        let (model, stop) = (model.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                if model.run_dma(64) == 0 {
                    std::thread::yield_now();
                }
            }
        })
    };
    for round in 0..20u64 {
        for i in 0..16u32 {
            clear_frame(&arena, 16 + i);
            device
                .push(IoRequest::read(
                    u64::from(i) * BLOCK,
                    16 + i,
                    1,
                    100 + u64::from(i),
                ))
                .unwrap();
        }
        reap_ok(&mut device, &(100..116).collect::<Vec<u64>>());
        for i in 0..16u32 {
            fill_frame(&arena, i, seed + u64::from(i));
            assert!(
                frame_contents(&arena, 16 + i) == frame_contents(&arena, i),
                "round {round}: block {i} read back wrong"
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    engine.join().unwrap();
    let (by_engine, by_poller) = model.dma_counts();
    assert_eq!(
        by_engine + by_poller,
        16 + 20 * 16,
        "a copy was made twice or never"
    );

    // 2. No engine: every copy falls back to the poller, data still right.
    clear_frame(&arena, 0);
    device.push(IoRequest::read(3 * BLOCK, 0, 1, 7)).unwrap();
    reap_ok(&mut device, &[7]);
    fill_frame(&arena, 1, seed + 3);
    assert!(frame_contents(&arena, 0) == frame_contents(&arena, 1));
    assert_eq!(model.dma_counts(), (by_engine, by_poller + 1));

    // 3. A handle dropped with jobs queued: the engine skips them afterwards.
    device.push(IoRequest::read(5 * BLOCK, 2, 1, 8)).unwrap();
    device.submit().unwrap();
    drop(device);
    assert_frames_idle(&arena, TEST);
    // (Jobs whose copies the poller took over are still queued too: the engine skips them.)
    let mut drained = 0;
    while model.run_dma(64) > 0 {
        drained += 1;
        assert!(drained < 10_000, "the DMA queue never drained");
    }
    assert_eq!(
        model.dma_counts(),
        (by_engine, by_poller + 1),
        "a cancelled job ran"
    );
}

#[test]
fn emulator_drop_returns_slots_and_frames() {
    let model = EmulatorConfig::with_latency_ns(1_000_000)
        .queue_depth(2)
        .build()
        .unwrap();
    let arena = Arc::new(Arena::new(4).unwrap());
    let mut device = EmulatedDevice::new(model.clone(), arena.clone());
    for frame in 0..3 {
        device
            .push(IoRequest::read(0, frame, 1, u64::from(frame)))
            .unwrap();
    }
    device.submit().unwrap();
    device.push(IoRequest::read(0, 3, 1, 3)).unwrap();
    assert_eq!(model.in_service(), 2);
    drop(device);
    assert_eq!(model.in_service(), 0);
    assert_frames_idle(&arena, "after dropping an emulated handle");
}

// ---------------------------------------------------------------------------------------------
// 7. Stats
// ---------------------------------------------------------------------------------------------

fn stats(kind: Kind) {
    const TEST: &str = "stats";
    let Some(mut rig) = rig(kind, TEST, 8, 16, 8) else {
        return;
    };
    let device = &mut *rig.device;
    let snapshot = |device: &dyn Device| {
        let s = device.stats();
        (s.pushed, s.submitted, s.completed, s.errors, s.doorbells)
    };
    assert_eq!(snapshot(device), (0, 0, 0, 0, 0));
    // Submitting nothing rings no doorbell.
    assert_eq!(device.submit().unwrap(), 0);
    assert_eq!(snapshot(device), (0, 0, 0, 0, 0));

    for i in 0..5u32 {
        device
            .push(IoRequest::write(u64::from(i) * BLOCK, i, 1, u64::from(i)))
            .unwrap();
    }
    assert_eq!(snapshot(device), (5, 0, 0, 0, 0));
    assert_eq!(device.stats().in_flight(), 5);
    // One doorbell for the batch.
    assert_eq!(device.submit().unwrap(), 5);
    assert_eq!(snapshot(device), (5, 5, 0, 0, 1));
    assert_eq!(device.submit().unwrap(), 0);
    assert_eq!(
        device.stats().doorbells,
        1,
        "{kind:?}: doorbell with nothing pushed"
    );
    reap_ok(device, &[0, 1, 2, 3, 4]);
    assert_eq!(snapshot(device), (5, 5, 5, 0, 1));
    assert_eq!(device.stats().in_flight(), 0);
    assert_eq!(device.stats().latency_ns.len(), 5);

    // A second batch of 3 (one 3-frame request among them): one more doorbell.
    device.push(IoRequest::read(0, 5, 1, 10)).unwrap();
    device.push(IoRequest::read(BLOCK, 6, 1, 11)).unwrap();
    device.push(IoRequest::read(8 * BLOCK, 0, 3, 12)).unwrap();
    let done = reap_ok(device, &[10, 11, 12]);
    assert_eq!(snapshot(device), (8, 8, 8, 0, 2));
    // Waiting with nothing pushed rings no doorbell either.
    let mut sink = Vec::new();
    assert_eq!(device.wait(Duration::from_millis(1), &mut sink).unwrap(), 0);
    assert_eq!(device.stats().doorbells, 2);
    let stats = device.stats();
    assert_eq!(stats.latency_ns.len(), stats.completed);
    let max = done.iter().map(|c| c.latency_ns.max(1)).max().unwrap();
    assert!(
        stats.latency_ns.max() >= max * 999 / 1000,
        "histogram max below a completion"
    );

    let mut total = tamer_device::DeviceStats::default();
    total.merge(stats);
    total.merge(stats);
    assert_eq!(
        (total.pushed, total.completed, total.doorbells),
        (16, 16, 4)
    );
    assert_eq!(total.latency_ns.len(), 16);
}

#[test]
fn stats_uring() {
    stats(Kind::Uring);
}

#[test]
fn stats_emulated() {
    stats(Kind::Emulated);
}

#[test]
fn stats_sync() {
    stats(Kind::Sync);
}

#[test]
fn doorbell_cost_is_reported() {
    for kind in KINDS {
        let Some(rig) = rig(kind, "doorbell_cost", 1, 1, 1) else {
            continue;
        };
        assert_eq!(
            rig.device.doorbell_is_cheap(),
            kind != Kind::Uring,
            "{kind:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 8. flush and wait
// ---------------------------------------------------------------------------------------------

fn flush_and_wait(kind: Kind) {
    const TEST: &str = "flush_and_wait";
    let Some(mut rig) = rig(kind, TEST, 4, 8, 4) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    device
        .flush()
        .unwrap_or_else(|err| panic!("{kind:?}: flush of an idle device: {err}"));

    // Nothing in flight: returns 0 at once, not after the timeout.
    let mut out = Vec::new();
    let start = Instant::now();
    assert_eq!(device.wait(Duration::from_secs(5), &mut out).unwrap(), 0);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{kind:?}: idle wait took {:?}",
        start.elapsed()
    );
    assert!(out.is_empty());

    // One write in flight (pushed, not submitted: wait rings the doorbell): wait returns it.
    fill_frame(&arena, 0, 0xf1);
    let want = frame_contents(&arena, 0);
    device.push(IoRequest::write(2 * BLOCK, 0, 1, 7)).unwrap();
    assert_eq!(
        device.wait(Duration::from_secs(5), &mut out).unwrap(),
        1,
        "{kind:?}"
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].tag, 7);
    assert_eq!(out[0].result, Ok(()));
    device
        .flush()
        .unwrap_or_else(|err| panic!("{kind:?}: flush after a write: {err}"));

    // One read in flight after an explicit doorbell.
    out.clear();
    device.push(IoRequest::read(2 * BLOCK, 1, 1, 8)).unwrap();
    device.submit().unwrap();
    assert_eq!(
        device.wait(Duration::from_secs(5), &mut out).unwrap(),
        1,
        "{kind:?}"
    );
    assert_eq!(out[0].tag, 8);
    assert!(
        frame_contents(&arena, 1) == want,
        "{kind:?}: read after flush differs"
    );
    assert_eq!(device.in_flight(), 0);
}

#[test]
fn flush_and_wait_uring() {
    flush_and_wait(Kind::Uring);
}

#[test]
fn flush_and_wait_emulated() {
    flush_and_wait(Kind::Emulated);
}

#[test]
fn flush_and_wait_sync() {
    flush_and_wait(Kind::Sync);
}

#[test]
fn uring_wait_returns_when_the_request_completes() {
    // With a request in flight and a generous timeout, wait returns as soon as it completes.
    const TEST: &str = "uring_wait_timeout";
    let Some(mut rig) = rig(Kind::Uring, TEST, 4, 64, 4) else {
        return;
    };
    let device = &mut *rig.device;
    device.push(IoRequest::read(0, 0, 4, 1)).unwrap();
    let start = Instant::now();
    let mut out = Vec::new();
    let mut reaped = device.wait(Duration::from_secs(10), &mut out).unwrap();
    while reaped == 0 {
        // A wait may be interrupted by a signal; it never returns early otherwise.
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "uring wait did not return the read"
        );
        reaped = device.wait(Duration::from_secs(10), &mut out).unwrap();
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].result, Ok(()));
}

#[test]
fn uring_drop_waits_for_requests_in_flight() {
    const TEST: &str = "uring_drop";
    let Some(rig) = rig(Kind::Uring, TEST, 8, 64, 8) else {
        return;
    };
    let Rig {
        mut device,
        arena,
        file,
        _dir,
    } = rig;
    for i in 0..8u32 {
        device
            .push(IoRequest::read(u64::from(i) * BLOCK, i, 1, u64::from(i)))
            .unwrap();
    }
    device.submit().unwrap();
    drop(device);
    assert_frames_idle(&arena, "after dropping a uring handle with reads in flight");
    drop(file);
}

// ---------------------------------------------------------------------------------------------
// 9. fill_with_data seen through uring
// ---------------------------------------------------------------------------------------------

#[test]
fn uring_reads_fill_with_data() {
    const TEST: &str = "uring_reads_fill";
    let seed = 0x0005_eed0_0009;
    let _guard = SeedGuard::new(TEST, seed);
    let blocks = 512; // 2 MiB: two fill chunks
    let Some(mut rig) = rig(Kind::Uring, TEST, 16, blocks, 16) else {
        return;
    };
    let file = rig.file.clone().unwrap();
    fill_with_data(&file, seed).unwrap();
    let arena = rig.arena.clone();
    let device = &mut *rig.device;

    let mut rng = SplitMix::new(seed);
    let mut picks: Vec<u64> = vec![0, blocks - 1, 255, 256];
    picks.extend((0..8).map(|_| rng.below(blocks)));
    for (i, &block) in picks.iter().enumerate() {
        device
            .push(IoRequest::read(block * BLOCK, i as u32, 1, block))
            .unwrap();
    }
    reap_ok(device, &picks);
    for (i, &block) in picks.iter().enumerate() {
        let data = frame_contents(&arena, i as u32);
        let index = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert_eq!(
            index, block,
            "block {block} read into frame {i} starts with {index}"
        );
        assert!(
            data[8..].iter().any(|&b| b != 0),
            "block {block} holds no random data"
        );
    }
    // A 3-block read: each frame starts with its own block index.
    let run = rng.below(blocks - 3);
    device
        .push(IoRequest::read(run * BLOCK, 12, 3, 1_000))
        .unwrap();
    reap_ok(device, &[1_000]);
    for i in 0..3u32 {
        let data = frame_contents(&arena, 12 + i);
        let index = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert_eq!(index, run + u64::from(i));
    }
    // The same seed fills the same data: a sync read of the run matches byte for byte.
    let first: Vec<Vec<u8>> = (12..15).map(|f| frame_contents(&arena, f)).collect();
    let mut sync = SyncDevice::new(file.clone(), arena.clone(), 4);
    sync.push(IoRequest::read(run * BLOCK, 0, 3, 1)).unwrap();
    reap_ok(&mut sync, &[1]);
    for i in 0..3u32 {
        assert!(
            frame_contents(&arena, i) == first[i as usize],
            "sync and uring disagree"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 10. uring syscalls: cooperative task-run, poll without syscalls, one enter per wait
// ---------------------------------------------------------------------------------------------

/// A uring device with the default setup over a filled file of `blocks` blocks (reads of
/// written blocks reach the disk, so they complete from an interrupt, as task work).
fn filled_uring(
    test: &str,
    frames: u32,
    blocks: u64,
) -> Option<(UringDevice, Arc<Arena>, TestDir)> {
    if !uring_ok(test) {
        return None;
    }
    let dir = TestDir::new(test);
    let file = dir.device_file("data", blocks);
    fill_with_data(&file, 0x5eed).unwrap();
    let arena = Arc::new(Arena::new(frames).unwrap());
    let device = UringDevice::open(file, arena.clone(), UringConfig { entries: 16 }).unwrap();
    Some((device, arena, dir))
}

/// True when the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// A ring set up with `IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG` (the default)
/// gets no IPI for a completion: a core that only polls must enter the kernel when the ring
/// flags queued completions. Polling alone (never `wait`) reaps every read, with the right
/// data, on every CPU the test may run on (the disk's interrupts land on some CPU: completions
/// are local there and remote elsewhere), and a poll that entered the kernel came back with
/// completions (all but a few times: see the assertion). (That a remote completion is flushed at once is the unit test
/// `poll_flushes_completions_flagged_from_another_cpu`.)
/// Catches: `poll` that enters without the flag (polls that entered and reaped nothing), a
/// setup that silently drops the flags on a kernel that has them, and a flush that loses
/// completions or mixes up slots (wrong data or a missing read).
#[test]
fn uring_coop_ring_reaps_every_completion_by_polling_alone() {
    const TEST: &str = "uring_coop_poll";
    let blocks = 256;
    let Some((mut device, arena, _dir)) = filled_uring(TEST, 8, blocks) else {
        return;
    };
    if kernel_at_least(5, 19) {
        assert!(device.coop_taskrun(), "kernel ≥ 5.19 refused the flags?");
    } else {
        eprintln!("{TEST}: kernel before 5.19, no cooperative task-run");
    }
    let seed = 0xc00b;
    let _guard = SeedGuard::new(TEST, seed);
    let mut rng = SplitMix::new(seed);
    let mut entered_empty = 0;
    let mut polls = 0;
    let cpus = allowed_cpus();
    const ROUNDS: usize = 16;
    const READS_PER_ROUND: usize = 8;
    for round in 0..ROUNDS {
        set_affinity(&[cpus[round % cpus.len()]]);
        let picks: Vec<u64> = (0..READS_PER_ROUND).map(|_| rng.below(blocks)).collect();
        for (frame, &block) in picks.iter().enumerate() {
            device
                .push(IoRequest::read(
                    block * BLOCK,
                    frame as u32,
                    1,
                    frame as u64,
                ))
                .unwrap();
        }
        device.submit().unwrap();
        let mut done = Vec::new();
        let start = Instant::now();
        while done.len() < picks.len() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "round {round}: polling reaped only {} of {}",
                done.len(),
                picks.len()
            );
            let enters = device.stats().enters;
            let reaped = device.poll(&mut done);
            polls += 1;
            if device.stats().enters > enters && reaped == 0 {
                entered_empty += 1;
            }
        }
        for completion in &done {
            assert_eq!(completion.result, Ok(()));
            let frame = completion.tag as u32;
            let data = frame_contents(&arena, frame);
            let index = u64::from_le_bytes(data[..8].try_into().unwrap());
            assert_eq!(index, picks[frame as usize], "round {round}, frame {frame}");
        }
    }
    set_affinity(&cpus);
    // The flag is also raised for kernel work that posts no completion (a read re-issued after
    // EAGAIN, likelier beside a build or other tests on the same disk: CI once saw 7), so up to
    // one empty entry per four reads is allowed. A poll that enters on every call enters empty
    // on nearly every poll, and a device read takes tens of polls.
    let allowed = ROUNDS * READS_PER_ROUND / 4;
    eprintln!("{TEST}: {entered_empty} empty entries in {polls} polls");
    assert!(
        entered_empty <= allowed && entered_empty * 4 <= polls,
        "poll entered the kernel with nothing flagged {entered_empty} times in {polls} polls \
         (allowed {allowed})"
    );
}

fn set_affinity(cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in `set_affinity`; the kernel fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// `poll` makes no syscall when the ring flags nothing: with nothing in flight, and with a
/// request pushed but not submitted (`poll` never rings the doorbell either).
/// Catches: a `poll` that enters the kernel on every call, and one that submits.
#[test]
fn uring_poll_makes_no_syscall_unless_completions_are_flagged() {
    const TEST: &str = "uring_poll_no_syscall";
    let Some((mut device, _arena, _dir)) = filled_uring(TEST, 2, 16) else {
        return;
    };
    let mut out = Vec::new();
    for _ in 0..10_000 {
        assert_eq!(device.poll(&mut out), 0);
    }
    assert_eq!(
        device.stats().enters,
        0,
        "poll entered the kernel while idle"
    );
    device.push(IoRequest::read(3 * BLOCK, 0, 1, 1)).unwrap();
    for _ in 0..10_000 {
        assert_eq!(device.poll(&mut out), 0);
    }
    assert_eq!(
        device.stats().enters,
        0,
        "poll entered the kernel with nothing submitted"
    );
    assert_eq!(device.stats().submitted, 0, "poll rang the doorbell");
    let done = reap_ok(&mut device, &[1]);
    assert_eq!(done.len(), 1);
}

/// A wait with requests pushed and not submitted rings the doorbell and waits in one
/// `io_uring_enter`; after an explicit doorbell, the wait is at most one more enter.
/// Catches: a wait that submits with a separate syscall before waiting.
#[test]
fn uring_wait_rings_and_waits_in_one_enter() {
    const TEST: &str = "uring_wait_one_enter";
    let Some((mut device, _arena, _dir)) = filled_uring(TEST, 2, 64) else {
        return;
    };
    let mut out = Vec::new();
    device.push(IoRequest::read(5 * BLOCK, 0, 1, 1)).unwrap();
    while out.is_empty() {
        device.wait(Duration::from_secs(5), &mut out).unwrap();
    }
    let stats = device.stats();
    // A signal could interrupt a wait (one more enter); none is expected in a test.
    assert_eq!(
        (stats.enters, stats.doorbells, stats.submitted),
        (1, 1, 1),
        "push + wait"
    );
    out.clear();
    device.push(IoRequest::read(9 * BLOCK, 1, 1, 2)).unwrap();
    device.submit().unwrap();
    while out.is_empty() {
        device.wait(Duration::from_secs(5), &mut out).unwrap();
    }
    let stats = device.stats();
    assert_eq!(stats.doorbells, 2, "push + submit + wait");
    // The read may complete between the submit and the wait (a fast device): the wait then
    // reaps it from the completion queue without entering. A wait that submits separately
    // before waiting would make 4.
    assert!(
        (2..=3).contains(&stats.enters),
        "push + submit + wait: {} enters",
        stats.enters
    );
}

// ---------------------------------------------------------------------------------------------
// Asynchronous flush
// ---------------------------------------------------------------------------------------------

/// A flush request completes like any other (tagged, `Ok`), moves no data, touches no frame,
/// and a malformed one (with frames or an offset) is refused at push. Catches: a device that
/// treats a flush as a 0-byte read or write (uring's length check), one that marks frame 0 as
/// in I/O for it, `validate` letting a flush with frames through.
fn async_flush(kind: Kind) {
    const TEST: &str = "async_flush";
    let Some(mut rig) = rig(kind, TEST, 4, 8, 8) else {
        return;
    };
    let arena = rig.arena.clone();
    let device = &mut *rig.device;
    fill_frame(&arena, 0, 0x5a);
    let want = frame_contents(&arena, 0);
    device.push(IoRequest::write(3 * BLOCK, 0, 1, 1)).unwrap();
    reap_ok(device, &[1]);
    device.push(IoRequest::flush(2)).unwrap();
    assert!(!arena.is_in_io(0), "{kind:?}: a flush marked frame 0");
    assert_eq!(
        device.in_flight(),
        1,
        "{kind:?}: a pushed flush is in flight"
    );
    let done = reap_ok(device, &[2]);
    assert_eq!(done[0].tag, 2);
    let malformed = IoRequest {
        frames: 1,
        ..IoRequest::flush(3)
    };
    let err = device.push(malformed).expect_err("a flush with frames");
    assert!(err.to_string().contains("flush"), "{kind:?}: {err}");
    assert_eq!(device.in_flight(), 0);
    clear_frame(&arena, 1);
    device.push(IoRequest::read(3 * BLOCK, 1, 1, 4)).unwrap();
    reap_ok(device, &[4]);
    assert!(
        frame_contents(&arena, 1) == want,
        "{kind:?}: data after a flush"
    );
    assert_frames_idle(&arena, TEST);
}

#[test]
fn async_flush_uring() {
    async_flush(Kind::Uring);
}

#[test]
fn async_flush_emulated() {
    async_flush(Kind::Emulated);
}

#[test]
fn async_flush_sync() {
    async_flush(Kind::Sync);
}

#[test]
fn async_flush_mmap() {
    async_flush(Kind::Mmap);
}

/// The emulator holds a flush for its flush latency (not the read latency) and takes no pipe
/// time for it: a flush behind a bandwidth-capped transfer is not delayed by it. Catches: the
/// flush latency ignored, or the flush queued on the transfer pipe.
#[test]
fn emulated_flush_takes_its_own_latency() {
    let arena = Arc::new(Arena::new(4).unwrap());
    let model = EmulatorConfig::with_latency_ns(1_000)
        .flush_latency_ns(3_000_000)
        .capacity_bytes(16 * BLOCK)
        .build()
        .unwrap();
    let mut device = EmulatedDevice::new(model.clone(), arena.clone());
    let start = Instant::now();
    device.push(IoRequest::flush(1)).unwrap();
    let done = reap_ok(&mut device, &[1]);
    assert!(
        start.elapsed() >= Duration::from_millis(3) && done[0].latency_ns >= 3_000_000,
        "flush completed after {:?} ({} ns)",
        start.elapsed(),
        done[0].latency_ns
    );
    // 1 MB/s: a 4 KiB write occupies the pipe ≈ 4 ms; a flush pushed with it does not wait.
    let slow = EmulatorConfig::with_latency_ns(1_000)
        .flush_latency_ns(1_000)
        .bandwidth_bytes_per_s(1_000_000)
        .capacity_bytes(16 * BLOCK)
        .build()
        .unwrap();
    let mut device = EmulatedDevice::new(slow, arena.clone());
    device.push(IoRequest::write(0, 0, 1, 1)).unwrap();
    device.push(IoRequest::flush(2)).unwrap();
    let done = reap(&mut device, 2);
    assert_eq!(done[0].tag, 2, "the flush overtakes the capped transfer");
    assert!(done[1].latency_ns >= 4_000_000, "{done:?}");
}
