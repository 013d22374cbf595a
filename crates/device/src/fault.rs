//! A fault-injecting device over the emulator: power loss with what a drive's volatile write
//! cache may lose, read errors and a full device, on demand or at a seeded point.
//!
//! # The power-loss model
//!
//! The [`FaultState`] (shared by every core's [`FaultyDevice`] handle) keeps the device's
//! *durable image*: what survives a power loss for certain. A write moves into it only when a
//! flush that covers it completes ([`crate::IoKind::Flush`]: it covers the writes whose
//! completions were reaped before the flush was pushed), or when the drive's write cache, of
//! [`FaultPlan::write_cache_bytes`], is full and destages its oldest completed write (as a real
//! drive does on its own). Every other write, completed or still in flight, is *unflushed*:
//! at a power loss each one is kept, dropped, or torn at 512-byte sectors (a subset of its
//! sectors reaches the medium), by a seeded choice or an explicit [`Fate`] per write, applied
//! in completion order over the durable image (in-flight writes after, in push order). So
//! writes may persist out of order, and a later write to a block may persist while an earlier
//! one does not: what a drive without power-loss protection is allowed to do.
//!
//! After the power loss every request fails with `EIO` (the host is gone); the test then builds
//! the crash image ([`FaultState::crash_model`]) and reopens a store on it.
//!
//! Memory: the durable image (kept sparse, in chunks of [`IMAGE_CHUNK_BYTES`]: chunks never
//! written and zero cost nothing, so a crash image of a mostly empty device is cheap to build)
//! plus the unflushed writes' data, at most `write_cache_bytes` of completed writes plus the
//! writes in flight.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{
    Arena, Completion, Device, DeviceError, DeviceStats, EmulatedDevice, EmulatorConfig,
    EmulatorModel, IoKind, IoRequest, BLOCK_SIZE,
};

/// The unit of a torn write: a sector.
pub const SECTOR_BYTES: usize = 512;
const _: () = assert!(BLOCK_SIZE.is_multiple_of(SECTOR_BYTES) && BLOCK_SIZE / SECTOR_BYTES <= 64);

/// The unit of the sparse durable image: a chunk is allocated when a write first reaches it
/// (or when it holds non-zero bytes at [`FaultState::new`]).
pub const IMAGE_CHUNK_BYTES: usize = 64 << 10;
const _: () = assert!(IMAGE_CHUNK_BYTES.is_multiple_of(BLOCK_SIZE));

/// A device's bytes as chunks of [`IMAGE_CHUNK_BYTES`]; an absent chunk reads as zeros.
#[derive(Clone)]
struct SparseImage {
    len_bytes: usize,
    chunks: Vec<Option<Box<[u8]>>>,
}

impl SparseImage {
    /// The model's current contents; chunks that read as zeros stay absent.
    fn of_model(model: &EmulatorModel) -> Result<Self, DeviceError> {
        let len_bytes = model.capacity_bytes() as usize;
        let mut chunks = Vec::with_capacity(len_bytes.div_ceil(IMAGE_CHUNK_BYTES));
        let mut buffer = vec![0u8; IMAGE_CHUNK_BYTES];
        for start in (0..len_bytes).step_by(IMAGE_CHUNK_BYTES) {
            let len = IMAGE_CHUNK_BYTES.min(len_bytes - start);
            model.read_at(start as u64, &mut buffer[..len])?;
            let zero = is_zero(&buffer[..len]);
            chunks.push((!zero).then(|| buffer[..len].to_vec().into_boxed_slice()));
        }
        Ok(Self { len_bytes, chunks })
    }

    /// All zeros, `len_bytes` long.
    fn zeros(len_bytes: usize) -> Self {
        Self {
            len_bytes,
            chunks: vec![None; len_bytes.div_ceil(IMAGE_CHUNK_BYTES)],
        }
    }

    /// Copies `bytes` in at `offset`, allocating the chunks it reaches.
    fn write(&mut self, offset: usize, mut bytes: &[u8]) {
        assert!(
            offset + bytes.len() <= self.len_bytes,
            "write past the image"
        );
        let mut at = offset;
        while !bytes.is_empty() {
            let index = at / IMAGE_CHUNK_BYTES;
            let within = at % IMAGE_CHUNK_BYTES;
            let chunk_len = IMAGE_CHUNK_BYTES.min(self.len_bytes - index * IMAGE_CHUNK_BYTES);
            let chunk =
                self.chunks[index].get_or_insert_with(|| vec![0u8; chunk_len].into_boxed_slice());
            let n = bytes.len().min(chunk_len - within);
            chunk[within..within + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            at += n;
        }
    }

    /// The whole image, zeros included.
    fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len_bytes];
        for (index, chunk) in self.chunks.iter().enumerate() {
            if let Some(chunk) = chunk {
                let at = index * IMAGE_CHUNK_BYTES;
                out[at..at + chunk.len()].copy_from_slice(chunk);
            }
        }
        out
    }

    /// Writes the present chunks into `model` (a new model reads zeros elsewhere).
    fn write_into(&self, model: &EmulatorModel) -> Result<(), DeviceError> {
        for (index, chunk) in self.chunks.iter().enumerate() {
            if let Some(chunk) = chunk {
                model.write_at((index * IMAGE_CHUNK_BYTES) as u64, chunk)?;
            }
        }
        Ok(())
    }
}

/// True when every byte is zero (word at a time: this scans whole devices).
fn is_zero(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(16);
    let words_zero = words.by_ref().fold(0u128, |acc, w| {
        acc | u128::from_ne_bytes(w.try_into().expect("16 bytes"))
    });
    words_zero == 0 && words.remainder().iter().all(|&b| b == 0)
}

/// When the power goes out by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// Never (only [`FaultState::power_loss`]).
    Never,
    /// When the `n`-th write completes (counted from 1 over every handle); that write is
    /// unflushed, and its completion is reported as failed.
    AfterWrites(u64),
    /// When the `n`-th flush completes: its writes are durable, its completion is reported as
    /// failed (the host died before it saw it).
    AfterFlushes(u64),
}

/// What a fault-injecting device does.
#[derive(Clone, Debug)]
pub struct FaultPlan {
    /// When the power goes.
    pub crash: CrashPoint,
    /// Most bytes of completed, unflushed writes the drive's cache holds; beyond it the oldest
    /// becomes durable. At least one block.
    pub write_cache_bytes: u64,
}

impl Default for FaultPlan {
    fn default() -> Self {
        Self {
            crash: CrashPoint::Never,
            write_cache_bytes: 16 << 20,
        }
    }
}

/// What a power loss does to one unflushed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Every sector reaches the medium.
    Keep,
    /// None does.
    Drop,
    /// Sector `i` (of the whole write) reaches the medium when bit `i % 64` of `mask` is set.
    Tear {
        /// One bit per sector, repeating every 64 sectors.
        mask: u64,
    },
}

/// One write not yet known durable.
#[derive(Debug)]
struct Unflushed {
    /// Push order, device-wide.
    id: u64,
    offset_bytes: u64,
    data: Box<[u8]>,
    /// Completion order, once completed.
    completed: Option<u64>,
}

/// Counters of a [`FaultState`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Writes whose completion was reported.
    pub writes_completed: u64,
    /// Flushes whose completion was reported.
    pub flushes_completed: u64,
    /// Unflushed writes (completed or in flight) right now, or at the power loss.
    pub unflushed_writes: usize,
    /// Writes the drive made durable on its own because its cache was full.
    pub destaged_writes: u64,
    /// Whether the power was lost.
    pub crashed: bool,
}

struct Journal {
    durable: SparseImage,
    /// In push order.
    unflushed: VecDeque<Unflushed>,
    unflushed_completed_bytes: u64,
    next_id: u64,
    completed_seq: u64,
    counts: FaultCounts,
    read_errors: BTreeSet<u64>,
    /// Writes ending past this byte fail with `ENOSPC`.
    no_space_from_bytes: Option<u64>,
}

/// The state every [`FaultyDevice`] handle of one device shares.
pub struct FaultState {
    model: Arc<EmulatorModel>,
    plan: FaultPlan,
    journal: Mutex<Journal>,
}

impl std::fmt::Debug for FaultState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultState")
            .field("plan", &self.plan)
            .field("counts", &self.counts())
            .finish()
    }
}

impl FaultState {
    /// Faults over `model`, whose current contents are taken as durable.
    pub fn new(model: Arc<EmulatorModel>, plan: FaultPlan) -> Result<Arc<Self>, DeviceError> {
        let durable = SparseImage::of_model(&model)?;
        Self::with_image(model, plan, durable)
    }

    /// Faults over a new model built from `config`: all zeros, so nothing to read.
    pub fn fresh(config: EmulatorConfig, plan: FaultPlan) -> Result<Arc<Self>, DeviceError> {
        let model = config.build()?;
        let durable = SparseImage::zeros(model.capacity_bytes() as usize);
        Self::with_image(model, plan, durable)
    }

    /// Faults over a new model (with `config`'s timing) holding this device's crash image for
    /// `fates`: [`FaultState::crash_model`] wrapped by [`FaultState::new`], without reading the
    /// image back (a test that crashes a recovering store).
    pub fn after_crash(
        &self,
        config: EmulatorConfig,
        fates: &[Fate],
        plan: FaultPlan,
    ) -> Result<Arc<Self>, DeviceError> {
        let image = self.sparse_crash_image(fates);
        let model = config.capacity_bytes(image.len_bytes as u64).build()?;
        image.write_into(&model)?;
        Self::with_image(model, plan, image)
    }

    fn with_image(
        model: Arc<EmulatorModel>,
        plan: FaultPlan,
        durable: SparseImage,
    ) -> Result<Arc<Self>, DeviceError> {
        if plan.write_cache_bytes < BLOCK_SIZE as u64 {
            return Err(DeviceError::Config(format!(
                "write_cache_bytes {}: at least one block",
                plan.write_cache_bytes
            )));
        }
        assert_eq!(durable.len_bytes as u64, model.capacity_bytes());
        Ok(Arc::new(Self {
            model,
            plan,
            journal: Mutex::new(Journal {
                durable,
                unflushed: VecDeque::new(),
                unflushed_completed_bytes: 0,
                next_id: 0,
                completed_seq: 0,
                counts: FaultCounts::default(),
                read_errors: BTreeSet::new(),
                no_space_from_bytes: None,
            }),
        }))
    }

    /// The emulator model behind the faults (the data as the drive sees it).
    pub fn model(&self) -> &Arc<EmulatorModel> {
        &self.model
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cuts the power now: the unflushed writes are frozen for [`FaultState::crash_image`] and
    /// every request from now on fails. Idempotent.
    pub fn power_loss(&self) {
        self.journal().counts.crashed = true;
    }

    /// The counters so far, with the unflushed writes right now.
    pub fn counts(&self) -> FaultCounts {
        let journal = self.journal();
        FaultCounts {
            unflushed_writes: journal.unflushed.len(),
            ..journal.counts
        }
    }

    /// Reads of `block` fail with `EIO` from now on (a medium error).
    pub fn fail_reads_of(&self, block: u64) {
        self.journal().read_errors.insert(block);
    }

    /// Writes reaching past `bytes` fail with `ENOSPC` from now on; `None` lifts it.
    pub fn no_space_from(&self, bytes: Option<u64>) {
        self.journal().no_space_from_bytes = bytes;
    }

    /// The medium after the power loss, with `fates[i]` for the `i`-th unflushed write (in
    /// the order described in the module doc; missing fates are [`Fate::Drop`]).
    pub fn crash_image(&self, fates: &[Fate]) -> Vec<u8> {
        self.sparse_crash_image(fates).to_vec()
    }

    fn sparse_crash_image(&self, fates: &[Fate]) -> SparseImage {
        let journal = self.journal();
        let mut image = journal.durable.clone();
        for (write, fate) in apply_order(&journal.unflushed).zip(fates.iter().copied()) {
            apply(&mut image, write, fate);
        }
        image
    }

    /// [`FaultState::crash_image`] with fates drawn from `seed`: keep, drop and tear equally
    /// likely, a torn write's sectors each kept with probability 1/2.
    pub fn seeded_fates(&self, seed: u64) -> Vec<Fate> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..self.journal().unflushed.len())
            .map(|_| match rng.gen_range(0..3) {
                0 => Fate::Keep,
                1 => Fate::Drop,
                _ => Fate::Tear { mask: rng.gen() },
            })
            .collect()
    }

    /// A new emulator model (with `config`'s timing) holding the crash image for `fates`: the
    /// device a recovering store opens.
    pub fn crash_model(
        &self,
        config: EmulatorConfig,
        fates: &[Fate],
    ) -> Result<Arc<EmulatorModel>, DeviceError> {
        let image = self.sparse_crash_image(fates);
        let model = config.capacity_bytes(image.len_bytes as u64).build()?;
        image.write_into(&model)?;
        Ok(model)
    }

    /// Registers a write at push: its data is copied now (the frames are the caller's until
    /// the completion, so they hold exactly what the device will write).
    fn push_write(&self, request: &IoRequest, data: Box<[u8]>) -> Result<u64, DeviceError> {
        let mut journal = self.journal();
        if journal.counts.crashed {
            return Err(power_lost());
        }
        let end = request.offset_bytes + request.len_bytes();
        if journal.no_space_from_bytes.is_some_and(|limit| end > limit) {
            return Err(DeviceError::Os {
                what: format!("write at {} (injected full device)", request.offset_bytes),
                errno: libc::ENOSPC,
            });
        }
        let id = journal.next_id;
        journal.next_id += 1;
        journal.unflushed.push_back(Unflushed {
            id,
            offset_bytes: request.offset_bytes,
            data,
            completed: None,
        });
        Ok(id)
    }

    /// A write completed: orders it, destages the oldest when the cache is full, and cuts the
    /// power if the plan says so. False when the completion must be reported as failed.
    fn complete_write(&self, id: u64) -> bool {
        let mut journal = self.journal();
        if journal.counts.crashed {
            return false;
        }
        journal.completed_seq += 1;
        let seq = journal.completed_seq;
        let write = journal
            .unflushed
            .iter_mut()
            .find(|w| w.id == id)
            .expect("a completed write was registered at push");
        assert!(write.completed.is_none(), "write {id} completed twice");
        write.completed = Some(seq);
        journal.unflushed_completed_bytes += write.data.len() as u64;
        journal.counts.writes_completed += 1;
        while journal.unflushed_completed_bytes > self.plan.write_cache_bytes {
            journal.destage_oldest();
        }
        if self.plan.crash == CrashPoint::AfterWrites(journal.counts.writes_completed) {
            journal.counts.crashed = true;
            return false;
        }
        true
    }

    /// A flush pushed now covers every write completed so far.
    fn push_flush(&self) -> Result<u64, DeviceError> {
        let journal = self.journal();
        if journal.counts.crashed {
            return Err(power_lost());
        }
        Ok(journal.completed_seq)
    }

    /// A flush covering completions up to `covers` completed. False when it must be reported
    /// as failed.
    fn complete_flush(&self, covers: u64) -> bool {
        let mut journal = self.journal();
        if journal.counts.crashed {
            return false;
        }
        journal.make_durable(covers);
        journal.counts.flushes_completed += 1;
        if self.plan.crash == CrashPoint::AfterFlushes(journal.counts.flushes_completed) {
            journal.counts.crashed = true;
            return false;
        }
        true
    }

    /// Takes back a write whose push the inner device refused.
    fn forget_write(&self, id: u64) {
        let mut journal = self.journal();
        let at = journal.unflushed.iter().position(|w| w.id == id);
        let write = journal
            .unflushed
            .remove(at.expect("registered"))
            .expect("in range");
        assert!(write.completed.is_none(), "a refused write never completed");
    }

    /// Why a read of `request` fails, if it does.
    fn read_error(&self, request: &IoRequest) -> Option<DeviceError> {
        let journal = self.journal();
        if journal.counts.crashed {
            return Some(power_lost());
        }
        let first = request.offset_bytes / BLOCK_SIZE as u64;
        let bad = journal
            .read_errors
            .range(first..first + u64::from(request.frames));
        bad.into_iter().next().map(|block| DeviceError::Os {
            what: format!("read of block {block} (injected medium error)"),
            errno: libc::EIO,
        })
    }
}

impl Journal {
    /// Applies, in completion order, every write completed at or before `covers`.
    fn make_durable(&mut self, covers: u64) {
        let mut covered: Vec<Unflushed> = Vec::new();
        let mut kept = VecDeque::with_capacity(self.unflushed.len());
        for write in self.unflushed.drain(..) {
            match write.completed {
                Some(seq) if seq <= covers => covered.push(write),
                _ => kept.push_back(write),
            }
        }
        self.unflushed = kept;
        covered.sort_by_key(|w| w.completed);
        for write in covered {
            self.unflushed_completed_bytes -= write.data.len() as u64;
            apply(&mut self.durable, &write, Fate::Keep);
        }
    }

    /// The drive writes its oldest completed write to the medium by itself.
    fn destage_oldest(&mut self) {
        let oldest = self
            .unflushed
            .iter()
            .filter_map(|w| w.completed)
            .min()
            .expect("completed bytes counted, so a completed write exists");
        let at = self
            .unflushed
            .iter()
            .position(|w| w.completed == Some(oldest))
            .expect("found above");
        let write = self.unflushed.remove(at).expect("in range");
        self.unflushed_completed_bytes -= write.data.len() as u64;
        apply(&mut self.durable, &write, Fate::Keep);
        self.counts.destaged_writes += 1;
    }
}

/// Completed writes by completion order, then writes in flight by push order.
fn apply_order(unflushed: &VecDeque<Unflushed>) -> impl Iterator<Item = &Unflushed> {
    let mut order: Vec<&Unflushed> = unflushed.iter().collect();
    order.sort_by_key(|w| (w.completed.is_none(), w.completed, w.id));
    order.into_iter()
}

fn apply(image: &mut SparseImage, write: &Unflushed, fate: Fate) {
    let base = write.offset_bytes as usize;
    if fate == Fate::Keep {
        image.write(base, &write.data);
        return;
    }
    for (i, sector) in write.data.chunks(SECTOR_BYTES).enumerate() {
        let kept = match fate {
            Fate::Keep => true,
            Fate::Drop => false,
            Fate::Tear { mask } => mask >> (i % 64) & 1 == 1,
        };
        if kept {
            image.write(base + i * SECTOR_BYTES, sector);
        }
    }
}

fn power_lost() -> DeviceError {
    DeviceError::Os {
        what: "device lost power (fault injection)".into(),
        errno: libc::EIO,
    }
}

/// What a handle remembers of a request it passed on.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    request: IoRequest,
    /// The write's journal id, or the flush's coverage.
    mark: u64,
}

/// A per-core handle: an [`EmulatedDevice`] whose writes, flushes and reads go through the
/// shared [`FaultState`].
pub struct FaultyDevice {
    inner: EmulatedDevice,
    state: Arc<FaultState>,
    arena: Arc<Arena>,
    /// Requests passed to `inner`, by the tag given to it.
    tracked: Vec<Option<Tracked>>,
    free: Vec<u32>,
}

impl FaultyDevice {
    /// A handle on `state`'s model; `seed` seeds its jitter.
    pub fn new(state: Arc<FaultState>, arena: Arc<Arena>, seed: u64) -> Self {
        let inner = EmulatedDevice::with_seed(state.model.clone(), arena.clone(), seed);
        let depth = inner.queue_depth();
        Self {
            inner,
            state,
            arena,
            tracked: vec![None; depth],
            free: (0..depth as u32).rev().collect(),
        }
    }

    /// The caller's completion for what `inner` completed as `done`.
    fn translate(&mut self, done: Completion) -> Completion {
        let slot = done.tag as usize;
        let tracked = self.tracked[slot]
            .take()
            .expect("a completion for a tracked slot");
        self.free.push(slot as u32);
        let request = tracked.request;
        let injected = match request.kind {
            IoKind::Write => (!self.state.complete_write(tracked.mark)).then(power_lost),
            IoKind::Flush => (!self.state.complete_flush(tracked.mark)).then(power_lost),
            IoKind::Read => self.state.read_error(&request),
        };
        let result = match (done.result, injected) {
            (Ok(()), Some(err)) => Err(err),
            (result, _) => result,
        };
        Completion {
            tag: request.tag,
            result,
            latency_ns: done.latency_ns,
        }
    }

    fn translate_all(&mut self, from: usize, out: &mut [Completion]) -> usize {
        for completion in &mut out[from..] {
            *completion = self.translate(completion.clone());
        }
        out.len() - from
    }
}

impl Device for FaultyDevice {
    fn name(&self) -> &'static str {
        "faulty"
    }

    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }

    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        crate::validate(&request, self.capacity_bytes(), &self.arena)?;
        let Some(&slot) = self.free.last() else {
            return Err(DeviceError::QueueFull {
                queue_depth: self.queue_depth(),
            });
        };
        let mark = match request.kind {
            IoKind::Write => {
                let len = request.len_bytes() as usize;
                let mut data = vec![0u8; len].into_boxed_slice();
                // SAFETY: the request was validated (its frames are consecutive inside the
                // arena) and the caller hands the frames to the device until the completion,
                // so nothing writes them during this copy.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.arena.frame_ptr(request.frame),
                        data.as_mut_ptr(),
                        len,
                    )
                };
                self.state.push_write(&request, data)?
            }
            IoKind::Flush => self.state.push_flush()?,
            IoKind::Read => {
                if self.state.counts().crashed {
                    return Err(power_lost());
                }
                0
            }
        };
        let pushed = self.inner.push(IoRequest {
            tag: u64::from(slot),
            ..request
        });
        if let Err(err) = pushed {
            if request.kind == IoKind::Write {
                self.state.forget_write(mark);
            }
            return Err(err);
        }
        self.free.pop();
        self.tracked[slot as usize] = Some(Tracked { request, mark });
        Ok(())
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        self.inner.submit()
    }

    fn submit_at(&mut self, now_ns: u64) -> Result<usize, DeviceError> {
        self.inner.submit_at(now_ns)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let from = out.len();
        self.inner.poll(out);
        self.translate_all(from, out)
    }

    fn poll_at(&mut self, now_ns: u64, out: &mut Vec<Completion>) -> usize {
        let from = out.len();
        self.inner.poll_at(now_ns, out);
        self.translate_all(from, out)
    }

    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        let from = out.len();
        self.inner.wait(timeout, out)?;
        Ok(self.translate_all(from, out))
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        let covers = self.state.push_flush()?;
        if self.state.complete_flush(covers) {
            Ok(())
        } else {
            Err(power_lost())
        }
    }

    fn stats(&self) -> &DeviceStats {
        self.inner.stats()
    }

    fn doorbell_is_cheap(&self) -> bool {
        self.inner.doorbell_is_cheap()
    }
}
