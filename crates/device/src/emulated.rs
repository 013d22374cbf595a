//! The killer-microsecond study's microsecond-latency device emulator, in software.
//!
//! The device is DRAM-backed and shared by every core's handle. Its model:
//! - a request becomes visible to the device at the doorbell ([`Device::submit`]);
//! - it is admitted when fewer than `queue_depth` requests are in service device-wide (otherwise
//!   it waits in the handle's submission queue, as a full hardware queue would make it wait);
//! - an admitted request occupies the device's transfer pipe for `service_ns` =
//!   max(len ÷ bandwidth, 1 ÷ IOPS) (zero when uncapped), queued behind earlier transfers;
//! - its deadline is pipe start + `service_ns` + latency + seeded jitter in `[0, jitter_ns]`;
//! - it completes when the owner polls at or after the deadline, never earlier; the data moves
//!   at that moment (the polling core stands in for the device's DMA engine, so the 4 KiB copy
//!   costs that core what a DRAM-resident copy would).
//!
//! What it does not model: device-internal parallelism limits other than the queue-depth cap,
//! write amplification, or wear. Admission after a slot frees on another core happens at that
//! core's next poll, not at the instant the slot freed.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{
    now_ns, validate, Arena, Completion, Device, DeviceError, DeviceStats, IoKind, IoRequest,
    BLOCK_SIZE,
};

/// Number of lock stripes guarding block copies (a block maps to stripe `block % STRIPES`).
const STRIPES: usize = 256;

/// Largest emulated device: 64 GiB of DRAM.
pub const MAX_EMULATED_BYTES: u64 = 64 << 30;

/// One stripe lock on its own cache line, so cores copying different blocks do not contend.
#[repr(align(64))]
struct Stripe(Mutex<()>);

/// One handle's running total of completion time, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct CopySlot(AtomicU64);

/// Handles share [`COPY_SLOTS`] counters of completion time (handle `i` adds to slot `i % 16`).
const COPY_SLOTS: usize = 16;

/// Bound of the DMA engine's queue; a request that finds it full is copied by its poller.
pub const DMA_QUEUE_DEPTH: usize = 65_536;

// States of a DMA slot word (low 2 bits; the rest is the slot's generation, so a stale job
// for a reused slot never matches).
const DMA_FREE: u64 = 0;
const DMA_PENDING: u64 = 1;
const DMA_COPYING: u64 = 2;
const DMA_DONE: u64 = 3;

fn dma_word(generation: u64, state: u64) -> u64 {
    generation << 2 | state
}

/// One handle's DMA slots: one per request it may have in flight.
struct DmaSlots {
    words: Box<[AtomicU64]>,
}

/// A copy queued for the DMA engine.
struct DmaJob {
    slots: Arc<DmaSlots>,
    slot: u32,
    /// The slot word that makes the job current: (generation, PENDING).
    word: u64,
    request: IoRequest,
    /// The first frame of the request (frames are consecutive in the arena).
    frame_base: *mut u8,
}

// SAFETY: `frame_base` is only dereferenced after the job wins its slot (PENDING → COPYING),
// which the owning handle makes impossible before it completes the request or drops (it
// cancels or waits for every slot first), while the frames are still in I/O and the arena
// alive.
unsafe impl Send for DmaJob {}

/// Parameters of the emulated device. Build with [`EmulatorConfig::with_latency_ns`] or a preset.
#[derive(Clone, Debug, PartialEq)]
pub struct EmulatorConfig {
    /// Time from a request's admission to its completion, before jitter.
    pub latency_ns: u64,
    /// Uniform extra latency in `[0, jitter_ns]`, drawn from a seeded generator per handle.
    pub jitter_ns: u64,
    /// Seed of the jitter generators (each handle mixes in its index).
    pub seed: u64,
    /// Requests in service at once, device-wide; `None` for no cap.
    pub queue_depth: Option<usize>,
    /// Requests per second, device-wide; `None` for no cap.
    pub iops: Option<u64>,
    /// Bytes per second, device-wide; `None` for no cap.
    pub bandwidth_bytes_per_s: Option<u64>,
    /// The device's size, bytes.
    pub capacity_bytes: u64,
    /// Move data with a DMA engine instead of on the polling core: requests are queued for
    /// [`EmulatorModel::run_dma`], which some other thread (on another CPU) calls; a request
    /// whose copy is not done by its deadline is copied by the polling core, as without it.
    pub dma_offload: bool,
    /// Account the polling cores' completion time ([`EmulatorModel::completion_cpu_ns`]): one
    /// extra clock read per batch of completions, so off by default.
    pub completion_accounting: bool,
    /// Time a flush ([`IoKind::Flush`]) takes from admission to completion, jitter added: what
    /// the drive spends making its write cache durable. It takes a queue slot but not the
    /// transfer pipe. Default: `latency_ns` (one round trip; an NVMe drive with power-loss
    /// protection acknowledges a flush in about that, ≈ 10-20 µs on flash).
    pub flush_latency_ns: u64,
}

impl EmulatorConfig {
    /// A device with fixed latency, no jitter, no caps and 64 MiB of capacity.
    pub fn with_latency_ns(latency_ns: u64) -> Self {
        Self {
            latency_ns,
            jitter_ns: 0,
            seed: 0x7a3e_5eed,
            queue_depth: None,
            iops: None,
            bandwidth_bytes_per_s: None,
            capacity_bytes: 64 << 20,
            dma_offload: false,
            completion_accounting: false,
            flush_latency_ns: latency_ns,
        }
    }

    /// Named presets: `1us`, `scm` (4 µs, storage-class memory), `flash` (50 µs).
    pub fn preset(name: &str) -> Result<Self, DeviceError> {
        let latency_ns = match name {
            "1us" => 1_000,
            "scm" | "4us" => 4_000,
            "flash" | "50us" => 50_000,
            other => {
                return Err(DeviceError::Config(format!(
                    "unknown emulator preset {other:?}: use 1us, scm (4 µs) or flash (50 µs)"
                )))
            }
        };
        Ok(Self::with_latency_ns(latency_ns))
    }

    /// Sets [`EmulatorConfig::jitter_ns`].
    pub fn jitter_ns(mut self, jitter_ns: u64) -> Self {
        self.jitter_ns = jitter_ns;
        self
    }

    /// Sets [`EmulatorConfig::seed`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Caps the requests in service at once, device-wide.
    pub fn queue_depth(mut self, queue_depth: usize) -> Self {
        self.queue_depth = Some(queue_depth);
        self
    }

    /// Caps the requests per second, device-wide.
    pub fn iops(mut self, iops: u64) -> Self {
        self.iops = Some(iops);
        self
    }

    /// Caps the bytes per second, device-wide.
    pub fn bandwidth_bytes_per_s(mut self, bytes_per_s: u64) -> Self {
        self.bandwidth_bytes_per_s = Some(bytes_per_s);
        self
    }

    /// Sets [`EmulatorConfig::capacity_bytes`].
    pub fn capacity_bytes(mut self, capacity_bytes: u64) -> Self {
        self.capacity_bytes = capacity_bytes;
        self
    }

    /// See [`EmulatorConfig::dma_offload`].
    pub fn dma_offload(mut self, on: bool) -> Self {
        self.dma_offload = on;
        self
    }

    /// See [`EmulatorConfig::flush_latency_ns`].
    pub fn flush_latency_ns(mut self, flush_latency_ns: u64) -> Self {
        self.flush_latency_ns = flush_latency_ns;
        self
    }

    /// See [`EmulatorConfig::completion_accounting`].
    pub fn completion_accounting(mut self, on: bool) -> Self {
        self.completion_accounting = on;
        self
    }

    /// Validates and allocates the device's DRAM.
    pub fn build(self) -> Result<Arc<EmulatorModel>, DeviceError> {
        EmulatorModel::new(self)
    }

    /// Time one request of `len_bytes` occupies the transfer pipe.
    fn service_ns(&self, len_bytes: u64) -> u64 {
        let by_iops = self.iops.map_or(0, |iops| 1_000_000_000 / iops.max(1));
        let by_bandwidth = self.bandwidth_bytes_per_s.map_or(0, |bw| {
            (len_bytes as u128 * 1_000_000_000 / bw.max(1) as u128) as u64
        });
        by_iops.max(by_bandwidth)
    }
}

/// The shared state of one emulated device: its memory and its device-wide caps.
pub struct EmulatorModel {
    config: EmulatorConfig,
    memory: Box<[UnsafeCell<u8>]>,
    stripes: Box<[Stripe]>,
    in_service: AtomicUsize,
    pipe_free_ns: AtomicU64,
    /// CPU time handles spent completing requests (moving their data), per handle slot.
    copy_ns: Box<[CopySlot]>,
    next_slot: AtomicUsize,
    /// The DMA engine's queue, when `config.dma_offload`.
    dma: Option<crossbeam_queue::ArrayQueue<DmaJob>>,
    /// Copies the DMA engine made, and copies a polling core made because the engine had not.
    dma_copies: AtomicU64,
    dma_missed: AtomicU64,
}

// SAFETY: `memory` is only accessed under the stripe lock of the block being copied.
unsafe impl Sync for EmulatorModel {}
// SAFETY: as above; the model owns its memory.
unsafe impl Send for EmulatorModel {}

impl EmulatorModel {
    fn new(config: EmulatorConfig) -> Result<Arc<Self>, DeviceError> {
        let capacity_bytes = config.capacity_bytes / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;
        if capacity_bytes == 0 || capacity_bytes > MAX_EMULATED_BYTES {
            return Err(DeviceError::Config(format!(
                "emulated capacity of {} bytes: must be 4 KiB ..= 64 GiB",
                config.capacity_bytes
            )));
        }
        if config.queue_depth == Some(0) || config.iops == Some(0) {
            return Err(DeviceError::Config(
                "queue depth and IOPS caps must be positive".into(),
            ));
        }
        if config.bandwidth_bytes_per_s == Some(0) {
            return Err(DeviceError::Config(
                "a bandwidth cap must be positive".into(),
            ));
        }
        let config = EmulatorConfig {
            capacity_bytes,
            ..config
        };
        // A zeroed Vec<u8> comes from calloc, so untouched pages cost no DRAM until written.
        let memory: Box<[u8]> = vec![0u8; capacity_bytes as usize].into_boxed_slice();
        // SAFETY: UnsafeCell<u8> has the same layout as u8.
        let memory = unsafe { Box::from_raw(Box::into_raw(memory) as *mut [UnsafeCell<u8>]) };
        let stripes = (0..STRIPES).map(|_| Stripe(Mutex::new(()))).collect();
        let dma = config
            .dma_offload
            .then(|| crossbeam_queue::ArrayQueue::new(DMA_QUEUE_DEPTH));
        Ok(Arc::new(Self {
            config,
            memory,
            stripes,
            in_service: AtomicUsize::new(0),
            pipe_free_ns: AtomicU64::new(0),
            copy_ns: (0..COPY_SLOTS).map(|_| CopySlot::default()).collect(),
            next_slot: AtomicUsize::new(0),
            dma,
            dma_copies: AtomicU64::new(0),
            dma_missed: AtomicU64::new(0),
        }))
    }

    /// CPU time, in ns, that the polling cores of every handle spent completing requests so
    /// far (0 unless [`EmulatorConfig::completion_accounting`] is on): moving the data between the emulator's DRAM and the frames, which stands in for
    /// the device's DMA (a real device does it without the CPU). Benchmarks use it to say how
    /// much of a gap to DRAM is the emulation's own cost.
    pub fn completion_cpu_ns(&self) -> u64 {
        self.copy_ns
            .iter()
            .map(|slot| slot.0.load(Ordering::Relaxed))
            .sum()
    }

    /// The parameters the model was built with.
    pub fn config(&self) -> &EmulatorConfig {
        &self.config
    }

    /// The device's size, bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.config.capacity_bytes
    }

    /// Writes seeded pseudo-random data over the whole device (block `i` starts with `i` as a
    /// little-endian u64), so reads touch real memory pages rather than the shared zero page, as
    /// a benchmark needs. Not for use while requests are in service.
    pub fn fill_with_data(&self, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        for (block, chunk) in self.memory.chunks(BLOCK_SIZE).enumerate() {
            let _guard = self.stripes[block % STRIPES]
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // SAFETY: the block is guarded by its stripe lock; UnsafeCell<u8> is layout-compatible
            // with u8 and the chunk is BLOCK_SIZE bytes of `memory`.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(chunk.as_ptr() as *mut u8, chunk.len()) };
            rng.fill(bytes);
            bytes[..8].copy_from_slice(&(block as u64).to_le_bytes());
        }
    }

    /// Copies device bytes at `offset` into `out` (outside the data path: a tool's or a test's
    /// view of the medium, e.g. to read a superblock before opening a cache on it).
    pub fn read_at(&self, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.copy_at(offset, out.len(), |device| out.copy_from_slice(device))
    }

    /// Overwrites device bytes at `offset` with `data` (a test's fault injection).
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.copy_at(offset, data.len(), |device| device.copy_from_slice(data))
    }

    fn copy_at(
        &self,
        offset: u64,
        len: usize,
        f: impl FnOnce(&mut [u8]),
    ) -> Result<(), DeviceError> {
        if len == 0 {
            return Ok(());
        }
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.capacity_bytes()) {
            return Err(DeviceError::OutOfRange {
                offset_bytes: offset,
                len_bytes: len as u64,
                capacity_bytes: self.capacity_bytes(),
            });
        }
        // Take every stripe in order: no request copies meanwhile.
        let _guards: Vec<_> = self
            .stripes
            .iter()
            .map(|s| s.0.lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // SAFETY: every stripe lock is held, so no other access to `memory` runs; the range was
        // checked above and UnsafeCell<u8> is layout-compatible with u8. The pointer comes from
        // the whole slice, so it may cover `len` bytes.
        let bytes = unsafe {
            let start = UnsafeCell::raw_get(self.memory.as_ptr().add(offset as usize));
            std::slice::from_raw_parts_mut(start, len)
        };
        f(bytes);
        Ok(())
    }

    /// Copies block `block` into `out` (4 KiB) exactly as a read request's completion does (its
    /// stripe lock, one copy): the DRAM baseline of the microsecond study reads this way, so it
    /// touches the very memory the device serves from.
    pub fn read_block(&self, block: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        let capacity_blocks = self.capacity_bytes() / BLOCK_SIZE as u64;
        if out.len() != BLOCK_SIZE || block >= capacity_blocks {
            return Err(DeviceError::OutOfRange {
                offset_bytes: block.saturating_mul(BLOCK_SIZE as u64),
                len_bytes: out.len() as u64,
                capacity_bytes: self.capacity_bytes(),
            });
        }
        let _guard = self.stripes[block as usize % STRIPES]
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: the block is inside `memory` (checked) and guarded by its stripe lock; the
        // pointer comes from the whole slice; `out` is a distinct allocation of 4096 bytes.
        unsafe {
            let device = UnsafeCell::raw_get(self.memory.as_ptr().add(block as usize * BLOCK_SIZE));
            std::ptr::copy_nonoverlapping(device, out.as_mut_ptr(), BLOCK_SIZE);
        }
        Ok(())
    }

    /// Requests in service device-wide right now; counted only when a queue-depth cap is set
    /// (uncapped, 0).
    pub fn in_service(&self) -> usize {
        self.in_service.load(Ordering::Relaxed)
    }

    fn try_admit(&self) -> bool {
        match self.config.queue_depth {
            // Uncapped: nothing to count, and no shared cache line for every core to write.
            None => true,
            Some(cap) => self
                .in_service
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                    (n < cap).then_some(n + 1)
                })
                .is_ok(),
        }
    }

    fn release(&self) {
        if self.config.queue_depth.is_none() {
            return;
        }
        let before = self.in_service.fetch_sub(1, Ordering::AcqRel);
        assert!(
            before > 0,
            "emulator released more requests than it admitted"
        );
    }

    /// Reserves the transfer pipe for `service_ns` from `admit_ns` on; returns the end.
    fn reserve_pipe(&self, admit_ns: u64, service_ns: u64) -> u64 {
        if service_ns == 0 {
            return admit_ns;
        }
        let mut free = self.pipe_free_ns.load(Ordering::Relaxed);
        loop {
            let start = free.max(admit_ns);
            match self.pipe_free_ns.compare_exchange_weak(
                free,
                start + service_ns,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return start + service_ns,
                Err(now) => free = now,
            }
        }
    }

    /// The DMA engine: performs up to `max_jobs` queued copies (each at most once: a copy its
    /// request's poller already took over is skipped) and returns how many jobs it took off
    /// the queue. Call it from a thread on another CPU than the cores that poll (a benchmark's
    /// load generator calls it in its idle loop). A no-op unless `dma_offload` is set.
    pub fn run_dma(&self, max_jobs: usize) -> usize {
        let Some(queue) = &self.dma else {
            return 0;
        };
        let mut taken = 0;
        while taken < max_jobs {
            let Some(job) = queue.pop() else {
                break;
            };
            taken += 1;
            let slot = &job.slots.words[job.slot as usize];
            let copying = job.word - DMA_PENDING + DMA_COPYING;
            if slot
                .compare_exchange(job.word, copying, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue; // taken over by the poller, or cancelled
            }
            self.transfer_to(&job.request, job.frame_base);
            self.dma_copies.fetch_add(1, Ordering::Relaxed);
            slot.store(job.word - DMA_PENDING + DMA_DONE, Ordering::Release);
        }
        taken
    }

    /// Copies made by the DMA engine, and copies a polling core made itself because the
    /// engine had not reached them by their deadline (or its queue was full).
    pub fn dma_counts(&self) -> (u64, u64) {
        (
            self.dma_copies.load(Ordering::Relaxed),
            self.dma_missed.load(Ordering::Relaxed),
        )
    }

    /// Moves one request's data between the device memory and the arena.
    fn transfer(&self, request: &IoRequest, arena: &Arena) {
        self.transfer_to(request, arena.frame_ptr(request.frame));
    }

    /// Moves one request's data between the device memory and the frames from `frame_base`
    /// (consecutive in the arena).
    fn transfer_to(&self, request: &IoRequest, frame_base: *mut u8) {
        for i in 0..request.frames {
            let block = request.offset_bytes / BLOCK_SIZE as u64 + u64::from(i);
            let _guard = self.stripes[block as usize % STRIPES]
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // A pointer into the whole slice, not `self.memory[i].get()`: a pointer derived
            // from a one-byte element reference may not be used for the other 4095 bytes.
            // SAFETY: the block lies inside `memory` (validated on push).
            let device = UnsafeCell::raw_get(unsafe {
                self.memory.as_ptr().add(block as usize * BLOCK_SIZE)
            });
            // SAFETY: the request's frames are consecutive inside the arena (validated on push).
            let frame = unsafe { frame_base.add(i as usize * BLOCK_SIZE) };
            // SAFETY: the block lies inside `memory` (validated on push) and is guarded by its
            // stripe lock; the frame is inside the arena and marked in I/O, so only this request
            // touches it (its poller or, having won its DMA slot, the DMA engine, never both);
            // the two regions cannot overlap (different allocations).
            unsafe {
                match request.kind {
                    IoKind::Read => std::ptr::copy_nonoverlapping(device, frame, BLOCK_SIZE),
                    IoKind::Write => std::ptr::copy_nonoverlapping(frame, device, BLOCK_SIZE),
                    IoKind::Flush => unreachable!("a flush has no frames"),
                }
            }
        }
    }
}

impl std::fmt::Debug for EmulatorModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorModel")
            .field("config", &self.config)
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InService {
    deadline_ns: u64,
    sequence: u64,
    doorbell_ns: u64,
    offset_bytes: u64,
    frame: u32,
    frames: u32,
    tag: u64,
    kind: IoKind,
    /// The request's DMA slot and its PENDING word, or `NO_DMA` (the poller copies).
    dma_slot: u32,
    dma_word: u64,
}

const NO_DMA: u32 = u32::MAX;

/// A per-core handle to an [`EmulatorModel`].
pub struct EmulatedDevice {
    model: Arc<EmulatorModel>,
    arena: Arc<Arena>,
    /// Most requests pushed and not yet reaped on this handle.
    handle_queue_depth: usize,
    /// Pushed, doorbell not yet rung.
    pushed: VecDeque<IoRequest>,
    /// Doorbell rung, waiting for a device-wide queue slot, with the doorbell time.
    waiting: VecDeque<(IoRequest, u64)>,
    /// Admitted, sorted by (deadline, sequence). Without jitter deadlines arrive in order and
    /// an admission is a push at the back; with jitter it is a binary search and an insert
    /// that moves at most `handle_queue_depth` entries.
    in_service: VecDeque<InService>,
    sequence: u64,
    rng: SmallRng,
    stats: DeviceStats,
    /// This handle's slot in the model's completion-time counters.
    copy_slot: usize,
    /// With DMA offload: this handle's slots (one per request in flight) and the free ones.
    dma_slots: Option<Arc<DmaSlots>>,
    dma_free: Vec<u32>,
}

/// Default bound on requests in flight per emulated handle.
pub const EMULATED_HANDLE_QUEUE_DEPTH: usize = 1024;

impl EmulatedDevice {
    /// A handle on `model` moving data to and from `arena`. Its jitter generator is seeded with
    /// the model's seed; give handles on different cores different seeds with
    /// [`EmulatedDevice::with_seed`] (as `open_device` does).
    pub fn new(model: Arc<EmulatorModel>, arena: Arc<Arena>) -> Self {
        let seed = model.config.seed;
        Self::with_seed(model, arena, seed)
    }

    /// As [`EmulatedDevice::new`], with this handle's jitter seed.
    pub fn with_seed(model: Arc<EmulatorModel>, arena: Arc<Arena>, seed: u64) -> Self {
        let copy_slot = model.next_slot.fetch_add(1, Ordering::Relaxed) % COPY_SLOTS;
        let handle_queue_depth = EMULATED_HANDLE_QUEUE_DEPTH;
        Self {
            arena,
            handle_queue_depth,
            pushed: VecDeque::with_capacity(handle_queue_depth),
            waiting: VecDeque::new(),
            in_service: VecDeque::with_capacity(handle_queue_depth),
            sequence: 0,
            rng: SmallRng::seed_from_u64(seed),
            stats: DeviceStats::default(),
            copy_slot,
            dma_slots: model.config.dma_offload.then(|| {
                Arc::new(DmaSlots {
                    words: (0..handle_queue_depth).map(|_| AtomicU64::new(0)).collect(),
                })
            }),
            dma_free: if model.config.dma_offload {
                (0..handle_queue_depth as u32).rev().collect()
            } else {
                Vec::new()
            },
            model,
        }
    }

    /// The device-wide model this handle serves.
    pub fn model(&self) -> &Arc<EmulatorModel> {
        &self.model
    }

    fn admit(&mut self, request: IoRequest, doorbell_ns: u64, admit_ns: u64) {
        let config = &self.model.config;
        let jitter = if config.jitter_ns > 0 {
            self.rng.gen_range(0..=config.jitter_ns)
        } else {
            0
        };
        self.sequence += 1;
        let (deadline_ns, (dma_slot, dma_word)) = if request.kind == IoKind::Flush {
            // No data moves: no pipe time, no copy.
            (admit_ns + config.flush_latency_ns + jitter, (NO_DMA, 0))
        } else {
            let service_ns = config.service_ns(request.len_bytes());
            let pipe_end = self.model.reserve_pipe(admit_ns, service_ns);
            let deadline_ns = pipe_end + config.latency_ns + jitter;
            (deadline_ns, self.queue_dma(&request))
        };
        let entry = InService {
            deadline_ns,
            sequence: self.sequence,
            doorbell_ns,
            offset_bytes: request.offset_bytes,
            frame: request.frame,
            frames: request.frames,
            tag: request.tag,
            kind: request.kind,
            dma_slot,
            dma_word,
        };
        match self.in_service.back() {
            Some(last) if *last > entry => {
                let at = self.in_service.partition_point(|e| *e <= entry);
                self.in_service.insert(at, entry);
            }
            _ => self.in_service.push_back(entry),
        }
        debug_assert!(self.in_service.len() <= self.handle_queue_depth);
    }

    /// With DMA offload, hands the request's copy to the DMA engine: takes a slot, marks it
    /// PENDING under a new generation and queues the job. `(NO_DMA, 0)` when offload is off or
    /// the engine's queue is full (the poller copies then).
    fn queue_dma(&mut self, request: &IoRequest) -> (u32, u64) {
        let (Some(slots), Some(queue)) = (&self.dma_slots, &self.model.dma) else {
            return (NO_DMA, 0);
        };
        let slot = self
            .dma_free
            .pop()
            .expect("a DMA slot per request in flight (bounded by the handle's queue depth)");
        let word_ref = &slots.words[slot as usize];
        let old = word_ref.load(Ordering::Acquire);
        debug_assert!(matches!(old & 3, DMA_FREE | DMA_DONE));
        let word = dma_word((old >> 2) + 1, DMA_PENDING);
        word_ref.store(word, Ordering::Release);
        let job = DmaJob {
            slots: slots.clone(),
            slot,
            word,
            request: *request,
            frame_base: self.arena.frame_ptr(request.frame),
        };
        if queue.push(job).is_err() {
            word_ref.store(dma_word(word >> 2, DMA_FREE), Ordering::Release);
            self.dma_free.push(slot);
            return (NO_DMA, 0);
        }
        (slot, word)
    }

    /// Completes an entry's data movement: takes over its DMA job if the engine has not begun
    /// it (copying here), waits for a copy in progress, or finds it done; frees the slot.
    fn finish_dma(&mut self, entry: &InService, request: &IoRequest) {
        if entry.dma_slot == NO_DMA {
            self.model.transfer(request, &self.arena);
            return;
        }
        let slots = self.dma_slots.as_ref().expect("offload on");
        let word_ref = &slots.words[entry.dma_slot as usize];
        let generation = entry.dma_word >> 2;
        let taken = word_ref.compare_exchange(
            entry.dma_word,
            dma_word(generation, DMA_COPYING),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        match taken {
            Ok(_) => {
                self.model.transfer(request, &self.arena);
                self.model.dma_missed.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                // The engine is copying or has copied: wait for DONE (one 4 KiB copy at most).
                while word_ref.load(Ordering::Acquire) != dma_word(generation, DMA_DONE) {
                    std::hint::spin_loop();
                }
            }
        }
        word_ref.store(dma_word(generation, DMA_FREE), Ordering::Release);
        self.dma_free.push(entry.dma_slot);
    }

    fn admit_waiting(&mut self, admit_ns: u64) {
        while let Some(&(request, doorbell_ns)) = self.waiting.front() {
            if !self.model.try_admit() {
                break;
            }
            self.waiting.pop_front();
            self.admit(request, doorbell_ns, admit_ns.max(doorbell_ns));
        }
    }

    /// Earliest deadline of a request in service on this handle.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.in_service.front().map(|entry| entry.deadline_ns)
    }
}

impl Device for EmulatedDevice {
    fn name(&self) -> &'static str {
        "emulated"
    }

    fn capacity_bytes(&self) -> u64 {
        self.model.capacity_bytes()
    }

    fn queue_depth(&self) -> usize {
        self.handle_queue_depth
    }

    fn in_flight(&self) -> usize {
        self.pushed.len() + self.waiting.len() + self.in_service.len()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        validate(&request, self.capacity_bytes(), &self.arena)?;
        if self.in_flight() >= self.handle_queue_depth {
            return Err(DeviceError::QueueFull {
                queue_depth: self.handle_queue_depth,
            });
        }
        self.arena.begin_io(request.frame, request.frames)?;
        self.pushed.push_back(request);
        self.stats.pushed += 1;
        Ok(())
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        if self.pushed.is_empty() {
            return Ok(0);
        }
        self.submit_at(now_ns())
    }

    fn submit_at(&mut self, doorbell_ns: u64) -> Result<usize, DeviceError> {
        let count = self.pushed.len();
        if count == 0 {
            return Ok(0);
        }
        self.stats.doorbells += 1;
        self.stats.submitted += count as u64;
        if self.waiting.is_empty() && self.model.config.queue_depth.is_none() {
            // Uncapped and nothing queued ahead: every request is admitted at its doorbell.
            while let Some(request) = self.pushed.pop_front() {
                self.admit(request, doorbell_ns, doorbell_ns);
            }
            return Ok(count);
        }
        // Requests already waiting keep their place ahead of the new ones.
        while let Some(request) = self.pushed.pop_front() {
            self.waiting.push_back((request, doorbell_ns));
        }
        self.admit_waiting(doorbell_ns);
        Ok(count)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        if self.in_service.is_empty() && self.waiting.is_empty() {
            return 0;
        }
        self.poll_at(now_ns(), out)
    }

    fn poll_at(&mut self, now: u64, out: &mut Vec<Completion>) -> usize {
        let mut reaped = 0;
        if self.in_service.is_empty() && self.waiting.is_empty() {
            return 0;
        }
        self.admit_waiting(now);
        while let Some(&entry) = self.in_service.front() {
            if entry.deadline_ns > now {
                break;
            }
            self.in_service.pop_front();
            let request = IoRequest {
                kind: entry.kind,
                offset_bytes: entry.offset_bytes,
                frame: entry.frame,
                frames: entry.frames,
                tag: entry.tag,
            };
            self.finish_dma(&entry, &request);
            self.arena.end_io(request.frame, request.frames);
            self.model.release();
            // The freed slot serves this handle's oldest waiting request from the moment it freed.
            self.admit_waiting(entry.deadline_ns);
            // A reading from before the deadline never gets here: latency is never negative.
            let latency_ns = now - entry.doorbell_ns;
            self.stats.record_completion(latency_ns, true);
            out.push(Completion {
                tag: entry.tag,
                result: Ok(()),
                latency_ns,
            });
            reaped += 1;
        }
        if reaped > 0 && self.model.config.completion_accounting {
            // One clock read per batch of completions: the copies dominate it.
            self.model.copy_ns[self.copy_slot]
                .0
                .fetch_add(now_ns().saturating_sub(now), Ordering::Relaxed);
        }
        reaped
    }

    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        self.submit()?;
        let give_up_ns = now_ns() + timeout.as_nanos() as u64;
        // A µs device is waited for by spinning: an OS sleep is coarser than its latency.
        loop {
            let reaped = self.poll(out);
            if reaped > 0 || self.in_flight() == 0 || now_ns() >= give_up_ns {
                return Ok(reaped);
            }
            std::hint::spin_loop();
        }
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        // DRAM-backed: completed writes are as durable as this emulated device gets.
        Ok(())
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    fn doorbell_is_cheap(&self) -> bool {
        true
    }
}

impl Drop for EmulatedDevice {
    fn drop(&mut self) {
        // Requests still in service hold device-wide slots and arena frames: give them back.
        let entries: Vec<InService> = self.in_service.drain(..).collect();
        for entry in entries {
            if entry.dma_slot != NO_DMA {
                // Cancel the engine's job (or wait for its copy) before the frames go back:
                // after this the engine can never touch them.
                let slots = self.dma_slots.as_ref().expect("offload on");
                let word_ref = &slots.words[entry.dma_slot as usize];
                let generation = entry.dma_word >> 2;
                if word_ref
                    .compare_exchange(
                        entry.dma_word,
                        dma_word(generation, DMA_FREE),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_err()
                {
                    while word_ref.load(Ordering::Acquire) != dma_word(generation, DMA_DONE) {
                        std::hint::spin_loop();
                    }
                }
            }
            self.model.release();
            self.arena.end_io(entry.frame, entry.frames);
        }
        for (request, _) in self.waiting.drain(..) {
            self.arena.end_io(request.frame, request.frames);
        }
        for request in self.pushed.drain(..) {
            self.arena.end_io(request.frame, request.frames);
        }
    }
}
