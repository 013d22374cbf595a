//! A device striped over several (one per NVMe drive, say): block `b` lives on part
//! `(b / unit) % n`, at block `(b / (unit × n)) × unit + b % unit` of it. A request is split at
//! stripe-unit boundaries into one request per piece, pushed to the parts, and completes once
//! every piece has (with the first error, if any). A flush goes to every part and completes
//! once all have: every write reaped before it was pushed is then durable on its part, which
//! is [`IoKind::Flush`]'s promise. The store above sees one device and one page space.
//!
//! Bounds: at most `queue_depth` requests in flight (the smallest part's depth divided by the
//! most pieces one request may need), a piece table of that many entries; a push that would
//! overfill a part is refused whole with [`DeviceError::QueueFull`] before any piece is pushed.

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Completion, Device, DeviceError, DeviceFile, DeviceStats, IoKind, IoRequest, BLOCK_SIZE,
};

/// Default stripe unit: 64 blocks (256 KiB), so sequential extents keep whole device requests
/// and random 4 KiB pages spread over every part.
pub const STRIPE_UNIT_BLOCKS: u64 = 64;

/// The capacity of `parts` parts striped in units of `unit_blocks` blocks, the smallest
/// holding `smallest_bytes`: its whole units, times the parts.
pub fn striped_capacity(smallest_bytes: u64, unit_blocks: u64, parts: usize) -> u64 {
    let unit_bytes = unit_blocks * BLOCK_SIZE as u64;
    smallest_bytes / unit_bytes * unit_bytes * parts as u64
}

/// Where a device block lives: (part, block on that part).
pub fn stripe_place(block: u64, unit: u64, parts: u64) -> (usize, u64) {
    debug_assert!(unit > 0 && parts > 0);
    let stripe = block / unit;
    (
        (stripe % parts) as usize,
        (stripe / parts) * unit + block % unit,
    )
}

/// The files of a store striped over several (one file: no striping): their striped
/// capacity, and growth of every file together.
#[derive(Debug)]
pub struct FileSet {
    files: Vec<Arc<DeviceFile>>,
    unit_blocks: u64,
}

impl FileSet {
    /// `files` (at least one) striped in units of `unit_blocks` blocks.
    pub fn new(files: Vec<Arc<DeviceFile>>, unit_blocks: u64) -> Result<Self, DeviceError> {
        if files.is_empty() || unit_blocks == 0 {
            return Err(DeviceError::Config(
                "a file set needs at least one file and a unit of at least one block".into(),
            ));
        }
        Ok(Self { files, unit_blocks })
    }

    /// The parts, in stripe order.
    pub fn files(&self) -> &[Arc<DeviceFile>] {
        &self.files
    }

    fn unit_bytes(&self) -> u64 {
        self.unit_blocks * BLOCK_SIZE as u64
    }

    /// The striped device's capacity: whole units of the smallest file, times the files (one
    /// file: its capacity).
    pub fn capacity_bytes(&self) -> u64 {
        if let [file] = &self.files[..] {
            return file.capacity_bytes();
        }
        let smallest = self
            .files
            .iter()
            .map(|f| f.capacity_bytes())
            .min()
            .unwrap_or(0);
        striped_capacity(smallest, self.unit_blocks, self.files.len())
    }

    /// Each file's size for a striped capacity of at least `bytes`.
    pub fn part_bytes(&self, bytes: u64) -> u64 {
        if self.files.len() == 1 {
            return bytes;
        }
        bytes
            .div_ceil(self.unit_bytes() * self.files.len() as u64)
            .saturating_mul(self.unit_bytes())
    }

    /// Grows every file so the striped capacity is at least `bytes` (`DeviceFile::grow_to`
    /// each: a file that cannot grow stops it with that error, the others keep what they
    /// got, and the capacity stays the smallest file's).
    pub fn grow_to(&self, bytes: u64) -> Result<u64, DeviceError> {
        let part = self.part_bytes(bytes);
        for file in &self.files {
            file.grow_to(part)?;
        }
        Ok(self.capacity_bytes())
    }
}

/// A request in flight: its caller's tag, pieces outstanding, the first error, the latest
/// piece's latency.
struct Pending {
    tag: u64,
    remaining: u32,
    error: Option<DeviceError>,
    latency_ns: u64,
}

/// One per-core handle over one handle of each part.
pub struct StripedDevice {
    parts: Vec<Box<dyn Device>>,
    unit: u64,
    /// Slot `i` holds the request whose pieces carry tag `i`.
    pending: Vec<Option<Pending>>,
    free: Vec<u32>,
    /// Parts with pieces pushed since the last doorbell.
    rung: Vec<bool>,
    scratch: Vec<Completion>,
    stats: DeviceStats,
}

impl StripedDevice {
    /// Stripes over `parts` (at least one) in units of `unit_blocks` blocks.
    pub fn new(parts: Vec<Box<dyn Device>>, unit_blocks: u64) -> Result<Self, DeviceError> {
        if parts.is_empty() || unit_blocks == 0 {
            return Err(DeviceError::Config(
                "a striped device needs at least one part and a unit of at least one block".into(),
            ));
        }
        // A request of MAX_REQUEST_FRAMES blocks touches at most this many units.
        let pieces_max = (u64::from(crate::MAX_REQUEST_FRAMES)).div_ceil(unit_blocks) + 1;
        let part_depth = parts.iter().map(|p| p.queue_depth()).min().unwrap_or(0);
        let depth = (part_depth / pieces_max.min(part_depth as u64).max(1) as usize).max(1);
        Ok(Self {
            rung: vec![false; parts.len()],
            parts,
            unit: unit_blocks,
            pending: (0..depth).map(|_| None).collect(),
            free: (0..depth as u32).rev().collect(),
            scratch: Vec::new(),
            stats: DeviceStats::default(),
        })
    }

    /// The pieces of `request`: (part, request for that part with the piece's blocks and
    /// frames).
    fn pieces(&self, request: &IoRequest, tag: u64) -> Vec<(usize, IoRequest)> {
        let n = self.parts.len() as u64;
        if request.kind == IoKind::Flush {
            return (0..self.parts.len())
                .map(|part| (part, IoRequest { tag, ..*request }))
                .collect();
        }
        let first = request.offset_bytes / BLOCK_SIZE as u64;
        let mut out = Vec::new();
        let mut done = 0u64;
        while done < u64::from(request.frames) {
            let block = first + done;
            let room = (self.unit - block % self.unit).min(u64::from(request.frames) - done);
            let (part, at) = stripe_place(block, self.unit, n);
            out.push((
                part,
                IoRequest {
                    kind: request.kind,
                    offset_bytes: at * BLOCK_SIZE as u64,
                    frame: request.frame + done as u32,
                    frames: room as u32,
                    tag,
                },
            ));
            done += room;
        }
        out
    }
}

impl Device for StripedDevice {
    fn name(&self) -> &'static str {
        "striped"
    }

    /// Whole stripes of the smallest part, times the parts.
    fn capacity_bytes(&self) -> u64 {
        let smallest = self
            .parts
            .iter()
            .map(|p| p.capacity_bytes())
            .min()
            .unwrap_or(0);
        striped_capacity(smallest, self.unit, self.parts.len())
    }

    fn queue_depth(&self) -> usize {
        self.pending.len()
    }

    fn in_flight(&self) -> usize {
        self.pending.len() - self.free.len()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        if request.kind != IoKind::Flush {
            let end = request.offset_bytes + request.len_bytes();
            if end > self.capacity_bytes() {
                return Err(DeviceError::OutOfRange {
                    offset_bytes: request.offset_bytes,
                    len_bytes: request.len_bytes(),
                    capacity_bytes: self.capacity_bytes(),
                });
            }
            if request.frames == 0 {
                return Err(DeviceError::EmptyRequest);
            }
        }
        let Some(&slot) = self.free.last() else {
            return Err(DeviceError::QueueFull {
                queue_depth: self.pending.len(),
            });
        };
        let pieces = self.pieces(&request, u64::from(slot));
        let mut wanted = vec![0usize; self.parts.len()];
        for (part, _) in &pieces {
            wanted[*part] += 1;
        }
        for (part, &n) in wanted.iter().enumerate() {
            let p = &self.parts[part];
            if p.in_flight() + n > p.queue_depth() {
                return Err(DeviceError::QueueFull {
                    queue_depth: p.queue_depth(),
                });
            }
        }
        // Validation errors (alignment, frames) come from the first piece, before any other
        // piece is pushed: every piece shares the request's alignment and frame range.
        let mut pushed = 0u32;
        for (part, piece) in pieces {
            match self.parts[part].push(piece) {
                Ok(()) => {
                    self.rung[part] = true;
                    pushed += 1;
                }
                Err(err) if pushed == 0 => return Err(err),
                Err(err) => {
                    // A later piece refused after earlier ones went in: the request fails as
                    // a whole when the pushed pieces complete.
                    self.free.pop();
                    self.pending[slot as usize] = Some(Pending {
                        tag: request.tag,
                        remaining: pushed,
                        error: Some(err),
                        latency_ns: 0,
                    });
                    self.stats.pushed += 1;
                    return Ok(());
                }
            }
        }
        self.free.pop();
        self.pending[slot as usize] = Some(Pending {
            tag: request.tag,
            remaining: pushed,
            error: None,
            latency_ns: 0,
        });
        self.stats.pushed += 1;
        Ok(())
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        let mut made = 0;
        for (part, rung) in self.parts.iter_mut().zip(&mut self.rung) {
            if std::mem::take(rung) {
                made += part.submit()?;
            }
        }
        self.stats.doorbells += 1;
        self.stats.submitted += made as u64;
        Ok(made)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut scratch = std::mem::take(&mut self.scratch);
        for part in &mut self.parts {
            part.poll(&mut scratch);
        }
        let reaped = self.finish(&mut scratch, out);
        self.scratch = scratch;
        reaped
    }

    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        self.submit()?;
        // One ring cannot wait on the others: wait on the busiest part in slices of at most
        // 100 µs, reaping every part between them.
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let reaped = self.poll(out);
            let now = std::time::Instant::now();
            if reaped > 0 || self.in_flight() == 0 || now >= deadline {
                return Ok(reaped);
            }
            let slice = (deadline - now).min(Duration::from_micros(100));
            let busiest = (0..self.parts.len())
                .max_by_key(|&i| self.parts[i].in_flight())
                .unwrap_or(0);
            let mut scratch = std::mem::take(&mut self.scratch);
            self.parts[busiest].wait(slice, &mut scratch)?;
            let reaped = self.finish(&mut scratch, out);
            self.scratch = scratch;
            if reaped > 0 {
                return Ok(reaped);
            }
        }
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        for part in &mut self.parts {
            part.flush()?;
        }
        Ok(())
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    fn doorbell_is_cheap(&self) -> bool {
        self.parts.iter().all(|p| p.doorbell_is_cheap())
    }
}

impl StripedDevice {
    /// Counts the pieces in `pieces` (drained) against their requests; appends the requests
    /// whose last piece arrived to `out`. Returns how many.
    fn finish(&mut self, pieces: &mut Vec<Completion>, out: &mut Vec<Completion>) -> usize {
        let mut reaped = 0;
        for piece in pieces.drain(..) {
            let slot = piece.tag as usize;
            let Some(pending) = self.pending.get_mut(slot).and_then(Option::as_mut) else {
                debug_assert!(false, "a piece of no request in flight: tag {slot}");
                continue;
            };
            debug_assert!(pending.remaining > 0);
            pending.remaining -= 1;
            pending.latency_ns = pending.latency_ns.max(piece.latency_ns);
            if let (None, Err(err)) = (&pending.error, piece.result) {
                pending.error = Some(err);
            }
            if pending.remaining == 0 {
                let done = self.pending[slot].take().expect("pending");
                self.free.push(slot as u32);
                let ok = done.error.is_none();
                self.stats.record_completion(done.latency_ns, ok);
                out.push(Completion {
                    tag: done.tag,
                    result: done.error.map_or(Ok(()), Err),
                    latency_ns: done.latency_ns,
                });
                reaped += 1;
            }
        }
        reaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arena, EmulatedDevice, EmulatorConfig, EmulatorModel};

    fn parts(n: usize, blocks: u64) -> (Vec<Arc<EmulatorModel>>, Arc<Arena>) {
        let models = (0..n)
            .map(|_| {
                EmulatorConfig::with_latency_ns(1_000)
                    .capacity_bytes(blocks * BLOCK_SIZE as u64)
                    .build()
                    .unwrap()
            })
            .collect();
        (models, Arc::new(Arena::new(64).unwrap()))
    }

    fn striped(models: &[Arc<EmulatorModel>], arena: &Arc<Arena>, unit: u64) -> StripedDevice {
        let devices = models
            .iter()
            .map(|m| Box::new(EmulatedDevice::new(m.clone(), arena.clone())) as Box<dyn Device>)
            .collect();
        StripedDevice::new(devices, unit).unwrap()
    }

    fn run(device: &mut StripedDevice, request: IoRequest) -> Completion {
        device.push(request).unwrap();
        device.submit().unwrap();
        let mut done = Vec::new();
        while device.poll(&mut done) == 0 {}
        assert_eq!(done.len(), 1);
        done.pop().unwrap()
    }

    /// Blocks land where `stripe_place` says, a request across units is split and
    /// reassembled, a flush completes once, and reads return what was written. Catches a
    /// piece written at the request's offset instead of its part's, frames not advanced per
    /// piece, a request completed at its first piece, parts swapped.
    #[test]
    fn blocks_land_on_their_parts_and_read_back() {
        let (models, arena) = parts(3, 64);
        let mut device = striped(&models, &arena, 4);
        assert_eq!(device.capacity_bytes(), 3 * 64 * BLOCK_SIZE as u64);
        // Blocks 2..12 (crossing units 0, 1 and 2), each frame filled with its block number.
        for i in 0..10u32 {
            // SAFETY: no I/O on these frames yet.
            unsafe { arena.frame_mut(i).fill(2 + i as u8) };
        }
        let done = run(
            &mut device,
            IoRequest::write(2 * BLOCK_SIZE as u64, 0, 10, 77),
        );
        assert_eq!((done.tag, done.result.is_ok()), (77, true));
        for block in 2..12u64 {
            let (part, at) = stripe_place(block, 4, 3);
            let mut page = vec![0u8; BLOCK_SIZE];
            models[part].read_block(at, &mut page).unwrap();
            assert!(
                page.iter().all(|&b| b == block as u8),
                "block {block} on part {part}"
            );
        }
        assert_eq!(stripe_place(13, 4, 3), (0, 5));
        let done = run(
            &mut device,
            IoRequest::read(2 * BLOCK_SIZE as u64, 20, 10, 78),
        );
        assert!(done.result.is_ok());
        for i in 0..10u32 {
            // SAFETY: the read completed; nothing else uses the frame.
            assert!(unsafe { arena.frame(20 + i) }
                .iter()
                .all(|&b| b == 2 + i as u8));
        }
        let done = run(&mut device, IoRequest::flush(79));
        assert_eq!((done.tag, done.result.is_ok()), (79, true));
        assert_eq!(device.in_flight(), 0);
        assert_eq!(device.stats().completed, 3);
    }

    /// A request past the end is refused whole, and a full piece table refuses before pushing
    /// anything. Catches the range check on the first piece only, a slot leaked by a refusal.
    #[test]
    fn refusals_push_nothing() {
        let (models, arena) = parts(2, 8);
        let mut device = striped(&models, &arena, 4);
        let end = device.capacity_bytes();
        assert!(matches!(
            device.push(IoRequest::read(end - BLOCK_SIZE as u64, 0, 2, 1)),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert_eq!(device.in_flight(), 0);
        let depth = device.queue_depth();
        for i in 0..depth as u32 {
            device
                .push(IoRequest::read(0, i % 60, 1, u64::from(i)))
                .unwrap();
        }
        assert!(matches!(
            device.push(IoRequest::read(0, 61, 1, 999)),
            Err(DeviceError::QueueFull { .. })
        ));
        device.submit().unwrap();
        let mut done = Vec::new();
        while done.len() < depth {
            device.poll(&mut done);
        }
        assert_eq!(device.in_flight(), 0);
    }
}
