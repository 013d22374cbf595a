//! Tests of the fault-injecting device: what a power loss keeps, when flushes cover writes,
//! injected read errors and a full device. Every random choice is seeded; a failing case
//! prints its seed.

mod common;

use std::sync::Arc;

use tamer_device::{
    open_device, Arena, CrashPoint, Device, DeviceSpec, EmulatorConfig, Fate, FaultPlan,
    FaultState, FaultyDevice, IoRequest, BLOCK_SIZE, SECTOR_BYTES,
};

use common::{reap, reap_ok, SeedGuard, SplitMix};

const BLOCK: u64 = BLOCK_SIZE as u64;
const BLOCKS: u64 = 16;

fn faulty(plan: FaultPlan) -> (FaultyDevice, Arc<FaultState>, Arc<Arena>) {
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(BLOCKS * BLOCK)
        .build()
        .unwrap();
    let state = FaultState::new(model, plan).unwrap();
    let arena = Arc::new(Arena::new(8).unwrap());
    (
        FaultyDevice::new(state.clone(), arena.clone(), 1),
        state,
        arena,
    )
}

/// Fills `frame` with `byte`.
fn set_frame(arena: &Arena, frame: u32, byte: u8) {
    // SAFETY: the frame is not in an I/O (the tests push it only after this).
    unsafe { arena.frame_mut(frame).fill(byte) };
}

/// Writes `byte` over `block` and reaps the completion.
fn write_block(device: &mut FaultyDevice, arena: &Arena, block: u64, byte: u8) {
    set_frame(arena, 0, byte);
    device
        .push(IoRequest::write(block * BLOCK, 0, 1, 7))
        .unwrap();
    reap_ok(device, &[7]);
}

fn flush(device: &mut FaultyDevice) {
    device.push(IoRequest::flush(9)).unwrap();
    reap_ok(device, &[9]);
}

fn sector(image: &[u8], block: u64, sector: usize) -> &[u8] {
    let at = block as usize * BLOCK_SIZE + sector * SECTOR_BYTES;
    &image[at..at + SECTOR_BYTES]
}

/// A flushed write survives every fate; an unflushed one is kept, dropped or torn as told.
/// Catches: a flush that covers nothing, fates ignored, a tear mask read backwards.
#[test]
fn flushed_writes_survive_and_unflushed_ones_follow_their_fate() {
    let (mut device, state, arena) = faulty(FaultPlan::default());
    write_block(&mut device, &arena, 1, 0xaa);
    flush(&mut device);
    write_block(&mut device, &arena, 2, 0xbb);
    state.power_loss();
    assert_eq!(state.counts().unflushed_writes, 1);
    let dropped = state.crash_image(&[Fate::Drop]);
    assert!(dropped[BLOCK_SIZE..2 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0xaa));
    assert!(dropped[2 * BLOCK_SIZE..3 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0));
    let kept = state.crash_image(&[Fate::Keep]);
    assert!(kept[2 * BLOCK_SIZE..3 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0xbb));
    let torn = state.crash_image(&[Fate::Tear { mask: 0b1010_0101 }]);
    for s in 0..BLOCK_SIZE / SECTOR_BYTES {
        let want = if 0b1010_0101 >> s & 1 == 1 { 0xbb } else { 0 };
        assert!(
            sector(&torn, 2, s).iter().all(|&b| b == want),
            "sector {s} of a torn write"
        );
    }
}

/// A flush covers only the writes reaped before it was pushed: one pushed in the same batch
/// stays unflushed. Catches: a flush that makes every write in flight durable.
#[test]
fn a_flush_does_not_cover_writes_still_in_flight() {
    let (mut device, state, arena) = faulty(FaultPlan::default());
    set_frame(&arena, 0, 0x11);
    device.push(IoRequest::write(3 * BLOCK, 0, 1, 1)).unwrap();
    device.push(IoRequest::flush(2)).unwrap();
    reap_ok(&mut device, &[1, 2]);
    assert_eq!(state.counts().unflushed_writes, 1, "{:?}", state.counts());
    flush(&mut device);
    assert_eq!(state.counts().unflushed_writes, 0);
    assert_eq!(state.counts().flushes_completed, 2);
}

/// After a power loss every request fails with EIO and an in-flight one completes with an
/// error; `CrashPoint::AfterWrites(n)` cuts at the n-th write, which is reported failed.
/// Catches: a device that keeps serving after the crash, a crash point off by one.
#[test]
fn power_loss_fails_everything_after_it() {
    let plan = FaultPlan {
        crash: CrashPoint::AfterWrites(2),
        ..FaultPlan::default()
    };
    let (mut device, state, arena) = faulty(plan);
    write_block(&mut device, &arena, 1, 1);
    assert!(!state.counts().crashed);
    set_frame(&arena, 0, 2);
    device.push(IoRequest::write(2 * BLOCK, 0, 1, 5)).unwrap();
    set_frame(&arena, 1, 3);
    device.push(IoRequest::write(3 * BLOCK, 1, 1, 6)).unwrap();
    let done = reap(&mut device, 2);
    assert!(state.counts().crashed);
    assert!(
        done.iter().all(|c| c.result.is_err()),
        "the crashing write and the one after it fail: {done:?}"
    );
    let err = device.push(IoRequest::read(0, 0, 1, 8)).unwrap_err();
    assert!(err.to_string().contains("lost power"), "{err}");
    assert!(device.push(IoRequest::flush(9)).is_err());
    // Both writes after the first are unflushed: the in-flight one too.
    assert_eq!(state.counts().unflushed_writes, 3);
}

/// `CrashPoint::AfterFlushes(n)`: the n-th flush's writes are durable, its completion fails.
/// Catches: the crashing flush's writes lost, or its completion reported as a success.
#[test]
fn a_crash_at_a_flush_keeps_what_it_covered() {
    let plan = FaultPlan {
        crash: CrashPoint::AfterFlushes(1),
        ..FaultPlan::default()
    };
    let (mut device, state, arena) = faulty(plan);
    write_block(&mut device, &arena, 4, 0x44);
    device.push(IoRequest::flush(9)).unwrap();
    let done = reap(&mut device, 1);
    assert!(done[0].result.is_err());
    assert!(state.counts().crashed);
    let image = state.crash_image(&[]);
    assert!(image[4 * BLOCK_SIZE..5 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0x44));
}

/// A full write cache destages its oldest completed write by itself (bounded memory).
/// Catches: an unbounded journal, destaging the newest instead of the oldest.
#[test]
fn a_full_write_cache_destages_the_oldest_write() {
    let plan = FaultPlan {
        write_cache_bytes: 2 * BLOCK,
        ..FaultPlan::default()
    };
    let (mut device, state, arena) = faulty(plan);
    for (block, byte) in [(1, 1u8), (2, 2), (3, 3)] {
        write_block(&mut device, &arena, block, byte);
    }
    let counts = state.counts();
    assert_eq!((counts.destaged_writes, counts.unflushed_writes), (1, 2));
    let image = state.crash_image(&[Fate::Drop, Fate::Drop]);
    assert!(image[BLOCK_SIZE..2 * BLOCK_SIZE].iter().all(|&b| b == 1));
    assert!(image[2 * BLOCK_SIZE..3 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0));
}

/// Injected read errors and a full device. Catches: an injected error on the wrong block, a
/// refused write left registered (it would appear in a crash image), ENOSPC not recognizable.
#[test]
fn read_errors_and_a_full_device_on_demand() {
    let (mut device, state, arena) = faulty(FaultPlan::default());
    state.fail_reads_of(5);
    device.push(IoRequest::read(4 * BLOCK, 0, 2, 1)).unwrap();
    let done = reap(&mut device, 1);
    let err = done[0].result.clone().unwrap_err();
    assert!(err.to_string().contains("block 5"), "{err}");
    device.push(IoRequest::read(6 * BLOCK, 0, 1, 2)).unwrap();
    reap_ok(&mut device, &[2]);

    state.no_space_from(Some(8 * BLOCK));
    let err = device
        .push(IoRequest::write(8 * BLOCK, 0, 1, 3))
        .unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(state.counts().unflushed_writes, 0);
    assert!(!arena.is_in_io(0));
    write_block(&mut device, &arena, 7, 7);
    state.no_space_from(None);
    write_block(&mut device, &arena, 8, 8);
}

/// Handles share one state: a flush on one core covers a write reaped on another (as fsync
/// covers a file's completed writes). Catches: per-handle journals.
#[test]
fn a_flush_on_one_handle_covers_writes_of_another() {
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(BLOCKS * BLOCK)
        .build()
        .unwrap();
    let state = FaultState::new(model, FaultPlan::default()).unwrap();
    let spec = DeviceSpec::Faulty {
        state: state.clone(),
    };
    let arena = Arc::new(Arena::new(8).unwrap());
    let mut a = open_device(&spec, arena.clone(), 0).unwrap();
    let mut b = open_device(&spec, arena.clone(), 1).unwrap();
    set_frame(&arena, 0, 0x5c);
    a.push(IoRequest::write(6 * BLOCK, 0, 1, 1)).unwrap();
    reap_ok(&mut *a, &[1]);
    b.push(IoRequest::flush(2)).unwrap();
    reap_ok(&mut *b, &[2]);
    assert_eq!(state.counts().unflushed_writes, 0);
    state.power_loss();
    let image = state.crash_image(&[]);
    assert!(image[6 * BLOCK_SIZE..7 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0x5c));
}

/// Random writes (single and two-block), flushes and a power loss at a random point, then a
/// crash image with random fates, checked sector by sector against an independent model: each
/// sector holds its last flushed version or one of the unflushed versions written after it;
/// all-keep gives the last version written, all-drop the last flushed one. Catches: a wrong
/// flush coverage, a wrong apply order, sectors mixed across blocks.
#[test]
fn crash_images_hold_only_versions_the_model_allows() {
    for case in 0..200u64 {
        let seed = 0xfa17_0000 + case;
        let _guard = SeedGuard::new("crash_images_hold_only_versions_the_model_allows", seed);
        let mut rng = SplitMix::new(seed);
        let (mut device, state, arena) = faulty(FaultPlan::default());
        // Per block: the last flushed byte, and the bytes written since (in completion order).
        let mut flushed = [0u8; BLOCKS as usize];
        let mut since: Vec<Vec<u8>> = vec![Vec::new(); BLOCKS as usize];
        let steps = 1 + rng.below(12);
        let mut next_byte = 1u8;
        for _ in 0..steps {
            if rng.below(4) == 0 {
                flush(&mut device);
                for block in 0..BLOCKS as usize {
                    if let Some(&last) = since[block].last() {
                        flushed[block] = last;
                    }
                    since[block].clear();
                }
                continue;
            }
            let block = rng.below(BLOCKS - 1);
            let frames = 1 + rng.below(2) as u32;
            for f in 0..frames {
                set_frame(&arena, f, next_byte);
                since[(block + u64::from(f)) as usize].push(next_byte);
            }
            next_byte += 1;
            device
                .push(IoRequest::write(block * BLOCK, 0, frames, 1))
                .unwrap();
            reap_ok(&mut device, &[1]);
        }
        state.power_loss();
        let unflushed = state.counts().unflushed_writes;
        let fates = state.seeded_fates(seed);
        assert_eq!(fates.len(), unflushed);
        let image = state.crash_image(&fates);
        for block in 0..BLOCKS as usize {
            for s in 0..BLOCK_SIZE / SECTOR_BYTES {
                let got = sector(&image, block as u64, s);
                assert!(
                    got.iter().all(|&b| b == got[0]),
                    "block {block} sector {s} mixed"
                );
                assert!(
                    got[0] == flushed[block] || since[block].contains(&got[0]),
                    "block {block} sector {s} holds {} (flushed {}, since {:?})",
                    got[0],
                    flushed[block],
                    since[block]
                );
            }
        }
        let all_keep = state.crash_image(&vec![Fate::Keep; unflushed]);
        let all_drop = state.crash_image(&vec![Fate::Drop; unflushed]);
        for block in 0..BLOCKS as usize {
            let last = since[block].last().copied().unwrap_or(flushed[block]);
            assert_eq!(all_keep[block * BLOCK_SIZE], last, "block {block} all-keep");
            assert_eq!(
                all_drop[block * BLOCK_SIZE],
                flushed[block],
                "block {block} all-drop"
            );
        }
    }
}

/// The crash image reopens as a device: a recovering store reads exactly the image.
#[test]
fn a_crash_model_serves_the_crash_image() {
    let (mut device, state, arena) = faulty(FaultPlan::default());
    write_block(&mut device, &arena, 2, 0x22);
    flush(&mut device);
    state.power_loss();
    let model = state
        .crash_model(EmulatorConfig::with_latency_ns(1_000), &[])
        .unwrap();
    let mut block = vec![0u8; BLOCK_SIZE];
    model.read_block(2, &mut block).unwrap();
    assert!(block.iter().all(|&b| b == 0x22));
    assert_eq!(model.capacity_bytes(), BLOCKS * BLOCK);
}

/// The durable image is kept in chunks of `IMAGE_CHUNK_BYTES`: contents present at
/// `FaultState::new` survive, a write across a chunk boundary lands in both chunks, and the
/// model `after_crash` builds reads exactly as `crash_image`. Catches: a chunk index or offset
/// off by one, a zero chunk kept as absent when it held data, `after_crash` skipping fates.
#[test]
fn sparse_image_crosses_chunks_and_after_crash_matches_crash_image() {
    let chunk_blocks = (tamer_device::IMAGE_CHUNK_BYTES / BLOCK_SIZE) as u64;
    let blocks = 2 * chunk_blocks + 3;
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(blocks * BLOCK)
        .build()
        .unwrap();
    let last = (blocks - 1) * BLOCK;
    model.write_at(last, &[0x5a; BLOCK_SIZE]).unwrap();
    let state = FaultState::new(model, FaultPlan::default()).unwrap();
    let arena = Arc::new(Arena::new(8).unwrap());
    let mut device = FaultyDevice::new(state.clone(), arena.clone(), 1);
    set_frame(&arena, 0, 0x11);
    set_frame(&arena, 1, 0x22);
    let across = (chunk_blocks - 1) * BLOCK;
    device.push(IoRequest::write(across, 0, 2, 7)).unwrap();
    reap_ok(&mut device, &[7]);
    flush(&mut device);
    // Into the partial last chunk (3 blocks), flushed: the chunk's length at `write`.
    write_block(&mut device, &arena, blocks - 2, 0x44);
    flush(&mut device);
    write_block(&mut device, &arena, chunk_blocks + 1, 0x33);
    state.power_loss();
    let fates = [Fate::Tear { mask: 0b11 }];
    let image = state.crash_image(&fates);
    assert!(image[last as usize..].iter().all(|&b| b == 0x5a));
    let second_last = (blocks - 2) as usize * BLOCK_SIZE;
    assert!(image[second_last..second_last + BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0x44));
    let at = across as usize;
    assert!(image[at..at + BLOCK_SIZE].iter().all(|&b| b == 0x11));
    assert!(image[at + BLOCK_SIZE..at + 2 * BLOCK_SIZE]
        .iter()
        .all(|&b| b == 0x22));
    let torn = sector(&image, chunk_blocks + 1, 0);
    assert!(torn.iter().all(|&b| b == 0x33));
    assert!(sector(&image, chunk_blocks + 1, 2).iter().all(|&b| b == 0));
    let rebuilt = state
        .after_crash(
            EmulatorConfig::with_latency_ns(1_000),
            &fates,
            FaultPlan::default(),
        )
        .unwrap();
    let mut read = vec![0u8; image.len()];
    rebuilt.model().read_at(0, &mut read).unwrap();
    assert!(
        read == image,
        "after_crash's model differs from crash_image"
    );
    rebuilt.power_loss();
    assert!(
        rebuilt.crash_image(&[]) == image,
        "its durable image differs"
    );
    let fresh = FaultState::fresh(
        EmulatorConfig::with_latency_ns(1_000).capacity_bytes(blocks * BLOCK),
        FaultPlan::default(),
    )
    .unwrap();
    fresh.power_loss();
    assert!(fresh.crash_image(&[]).iter().all(|&b| b == 0));
}
