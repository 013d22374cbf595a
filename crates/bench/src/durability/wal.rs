//! The `wal` baseline's redo log: whole (key, value) records appended to a log with group
//! commit, as RocksDB's WAL and Redis's AOF (`appendfsync always`) do. Writers append their
//! records to one pending buffer and wait; a leader (an OS thread of its own, on the last CPU)
//! takes everything pending, writes it with one write and makes it durable with one flush,
//! then releases every writer it covered.
//!
//! The log is a ring of [`LOG_RING_BYTES`] written in whole 4 KiB blocks: a batch that ends
//! inside a block leaves that block's bytes as the *tail*, rewritten (with what follows) by
//! the next batch, as a file system rewrites a partial page. Bytes counted are the blocks
//! written. On the emulated device the log has a second emulated device of its own (the same
//! latencies); on the disk, a preallocated file (`pwrite` + `fdatasync`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tamer_cache::crc32c;
use tamer_device::{now_ns, Arena, EmulatedDevice, EmulatorModel, IoRequest, BLOCK_SIZE};

use super::probe::complete;

/// Size of the log's ring (a checkpointed store truncates its log; the ring stands in).
pub const LOG_RING_BYTES: u64 = 64 << 20;
/// Bytes of a record's header: key length, value length (u32 each).
const RECORD_HEADER: usize = 8;
/// Bytes of a record's trailer: CRC-32C of header, key and value.
const RECORD_TRAILER: usize = 4;
/// Longest a writer waits for its group commit.
const DURABLE_WAIT: Duration = Duration::from_secs(60);
/// Frames of the emulated log's staging buffer (one write request moves at most this many).
const LOG_FRAMES: u32 = 1024;
/// Longest a sleeping leader waits before it looks again (an append wakes it at once).
const LEADER_SLEEP: Duration = Duration::from_millis(10);

/// Appends one record: `[key len u32][value len u32][key][value][crc32c u32]`.
pub fn encode_record(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The records at the start of `bytes`, up to the first that is not whole and valid.
pub fn decode_records(mut bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= RECORD_HEADER + RECORD_TRAILER {
        let key_len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
        let value_len = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
        let body = RECORD_HEADER
            .saturating_add(key_len)
            .saturating_add(value_len);
        if body.saturating_add(RECORD_TRAILER) > bytes.len() {
            break;
        }
        let crc = u32::from_le_bytes(bytes[body..body + 4].try_into().expect("4 bytes"));
        if crc32c(&bytes[..body]) != crc {
            break;
        }
        let key = bytes[RECORD_HEADER..RECORD_HEADER + key_len].to_vec();
        out.push((key, bytes[RECORD_HEADER + key_len..body].to_vec()));
        bytes = &bytes[body + RECORD_TRAILER..];
    }
    out
}

/// Where the next batch goes in the ring, and the partial block it rewrites.
#[derive(Debug, Default)]
pub struct Ring {
    /// Block-aligned offset of the tail block (where the next write starts).
    offset: u64,
    /// The bytes already in the tail block.
    tail: Vec<u8>,
}

impl Ring {
    /// The write for `batch`: its offset and the whole blocks to write (tail + batch, zero
    /// padded); advances past them, keeping a partial last block as the new tail.
    pub fn next_write(&mut self, batch: &[u8]) -> (u64, Vec<u8>) {
        let mut blocks = std::mem::take(&mut self.tail);
        blocks.extend_from_slice(batch);
        let full = blocks.len() / BLOCK_SIZE * BLOCK_SIZE;
        let padded = blocks.len().next_multiple_of(BLOCK_SIZE) as u64;
        if self.offset + padded > LOG_RING_BYTES {
            self.offset = 0;
        }
        let offset = self.offset;
        self.tail = blocks[full..].to_vec();
        self.offset += full as u64;
        blocks.resize(padded as usize, 0);
        (offset, blocks)
    }
}

/// Where the log's blocks go: one write of whole blocks at a block offset, then a flush.
pub trait LogSink: Send {
    /// Writes `blocks` at block `offset` and makes them durable.
    fn write_sync(&mut self, offset: u64, blocks: &[u8]) -> Result<(), String>;
}

/// The log on an emulated device of its own: writes from a staging arena, then a flush,
/// each polled to completion.
pub struct EmulatedLog {
    device: EmulatedDevice,
    arena: Arc<Arena>,
}

impl EmulatedLog {
    /// A log device with `model`'s latencies.
    pub fn new(like: &EmulatorModel) -> Result<Self, String> {
        let model = like
            .config()
            .clone()
            .capacity_bytes(LOG_RING_BYTES)
            .dma_offload(false)
            .build()
            .map_err(|e| format!("log device: {e}"))?;
        let arena = Arc::new(Arena::new(LOG_FRAMES).map_err(|e| e.to_string())?);
        Ok(Self {
            device: EmulatedDevice::new(model, arena.clone()),
            arena,
        })
    }
}

impl LogSink for EmulatedLog {
    fn write_sync(&mut self, offset: u64, blocks: &[u8]) -> Result<(), String> {
        let chunk_bytes = LOG_FRAMES as usize * BLOCK_SIZE;
        for (i, chunk) in blocks.chunks(chunk_bytes).enumerate() {
            let frames = (chunk.len() / BLOCK_SIZE) as u32;
            for f in 0..frames {
                let from = &chunk[f as usize * BLOCK_SIZE..][..BLOCK_SIZE];
                // SAFETY: the arena is this log's own; no request is in flight between calls.
                unsafe { self.arena.frame_mut(f) }.copy_from_slice(from);
            }
            let at = offset + (i * chunk_bytes) as u64;
            complete(&mut self.device, IoRequest::write(at, 0, frames, 1))?;
        }
        complete(&mut self.device, IoRequest::flush(2))
    }
}

/// The log on a preallocated file: `pwrite` then `fdatasync`.
pub struct FileLog {
    file: File,
}

impl FileLog {
    /// Creates `path` with [`LOG_RING_BYTES`] of zeros, synced, so that later syncs write
    /// data only (no size or extent changes), as RocksDB's preallocated WAL files.
    pub fn create(path: &Path) -> Result<Self, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        let zeros = vec![0u8; 1 << 20];
        for at in (0..LOG_RING_BYTES).step_by(zeros.len()) {
            file.write_all_at(&zeros, at)
                .map_err(|e| format!("filling {}: {e}", path.display()))?;
        }
        file.sync_all()
            .map_err(|e| format!("syncing {}: {e}", path.display()))?;
        Ok(Self { file })
    }
}

impl LogSink for FileLog {
    fn write_sync(&mut self, offset: u64, blocks: &[u8]) -> Result<(), String> {
        self.file
            .write_all_at(blocks, offset)
            .map_err(|e| format!("log write: {e}"))?;
        self.file.sync_data().map_err(|e| format!("log sync: {e}"))
    }
}

/// A log between windows: its device and where its next write goes.
pub type LogState = (Box<dyn LogSink>, Ring);

/// What writers fill: the records not yet taken by the leader, the last sequence number
/// given out, and whether the leader sleeps (then an append wakes it).
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    last_seq: u64,
    leader_asleep: bool,
}

/// A running group-commit log (see the module docs). [`GroupLog::finish`] stops its leader.
pub struct GroupLog {
    pending: Mutex<Pending>,
    /// The leader sleeps on it while nothing is pending.
    work: Condvar,
    /// Every sequence number up to this one is durable.
    durable: AtomicU64,
    stop: AtomicBool,
    failed: AtomicBool,
    /// Bytes written to the log's device (whole blocks) and group commits (flushes).
    pub bytes_written: AtomicU64,
    /// Group commits (one flush each).
    pub syncs: AtomicU64,
    leader: Mutex<Option<JoinHandle<LogState>>>,
}

impl GroupLog {
    /// Starts a leader (an OS thread) on `sink`, continuing at `ring`.
    pub fn start(sink: Box<dyn LogSink>, ring: Ring) -> Arc<Self> {
        let log = Arc::new(Self {
            pending: Mutex::new(Pending::default()),
            work: Condvar::new(),
            durable: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            bytes_written: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            leader: Mutex::new(None),
        });
        let leader_log = log.clone();
        let handle = std::thread::spawn(move || leader_log.lead(sink, ring));
        *log.leader.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        log
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends the records of one transaction; returns its sequence number.
    pub fn append(&self, records: &[(&[u8], &[u8])]) -> u64 {
        let mut pending = self.lock();
        for (key, value) in records {
            encode_record(key, value, &mut pending.bytes);
        }
        pending.last_seq += 1;
        let (seq, wake) = (pending.last_seq, pending.leader_asleep);
        drop(pending);
        if wake {
            self.work.notify_one();
        }
        seq
    }

    /// Parks the calling user-level thread until `seq` is durable.
    pub fn wait(&self, seq: u64) -> Result<(), String> {
        let deadline = now_ns() + DURABLE_WAIT.as_nanos() as u64;
        loop {
            let durable = self.durable.load(Ordering::Acquire);
            if durable >= seq {
                return Ok(());
            }
            if self.failed.load(Ordering::Acquire) || now_ns() > deadline {
                return Err("the log's group commit failed or stalled".into());
            }
            tamer_runtime::thread::wait_while_eq(&self.durable, durable, deadline);
        }
    }

    /// Takes everything pending into `batch` (sleeping while nothing is); returns the last
    /// sequence number it covers, `None` when told to stop.
    fn take(&self, batch: &mut Vec<u8>) -> Option<u64> {
        let mut pending = self.lock();
        while pending.bytes.is_empty() {
            if self.stop.load(Ordering::Acquire) {
                return None;
            }
            pending.leader_asleep = true;
            pending = self
                .work
                .wait_timeout(pending, LEADER_SLEEP)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            pending.leader_asleep = false;
        }
        std::mem::swap(batch, &mut pending.bytes);
        Some(pending.last_seq)
    }

    /// The leader: takes everything pending, one write + one flush, publishes it durable.
    fn lead(&self, mut sink: Box<dyn LogSink>, mut ring: Ring) -> LogState {
        let mut batch = Vec::new();
        while let Some(covered) = self.take(&mut batch) {
            let (offset, blocks) = ring.next_write(&batch);
            batch.clear();
            if let Err(err) = sink.write_sync(offset, &blocks) {
                eprintln!("error: wal group commit: {err}");
                self.failed.store(true, Ordering::Release);
                break;
            }
            self.bytes_written
                .fetch_add(blocks.len() as u64, Ordering::Relaxed);
            self.syncs.fetch_add(1, Ordering::Relaxed);
            self.durable.store(covered, Ordering::Release);
        }
        (sink, ring)
    }

    /// Stops the leader (after its group commit in progress) and returns its sink and ring.
    pub fn finish(&self) -> Result<LogState, String> {
        self.stop.store(true, Ordering::Release);
        self.work.notify_one();
        let handle = self
            .leader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or("the log's leader was already stopped")?;
        handle
            .join()
            .map_err(|_| "the log's leader panicked".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a wrong length field, a CRC not covering the key or value, or decoding past a
    /// damaged record.
    #[test]
    fn records_round_trip_and_a_damaged_one_ends_the_log() {
        let mut log = Vec::new();
        encode_record(b"key-1", &[7u8; 100], &mut log);
        encode_record(b"k2", b"", &mut log);
        assert_eq!(
            log.len(),
            2 * (RECORD_HEADER + RECORD_TRAILER) + 5 + 100 + 2
        );
        let records = decode_records(&log);
        assert_eq!(
            records,
            vec![
                (b"key-1".to_vec(), vec![7u8; 100]),
                (b"k2".to_vec(), vec![])
            ]
        );
        let mut damaged = log.clone();
        damaged[RECORD_HEADER + 5 + 50] ^= 1; // a value byte of the first record
        assert!(decode_records(&damaged).is_empty());
        assert_eq!(decode_records(&log[..log.len() - 1]).len(), 1);
    }

    /// Catches: a tail block not rewritten (records lost between batches), an offset that
    /// skips or overlaps blocks, or a ring that does not wrap.
    #[test]
    fn the_ring_rewrites_the_partial_tail_block() {
        let mut ring = Ring::default();
        let (at, blocks) = ring.next_write(&[1u8; 100]);
        assert_eq!((at, blocks.len()), (0, BLOCK_SIZE));
        let (at, blocks) = ring.next_write(&[2u8; BLOCK_SIZE]);
        assert_eq!((at, blocks.len()), (0, 2 * BLOCK_SIZE));
        assert_eq!(&blocks[..100], &[1u8; 100][..]);
        assert_eq!(blocks[100], 2);
        assert_eq!(blocks[BLOCK_SIZE + 99], 2);
        assert_eq!(blocks[BLOCK_SIZE + 100], 0);
        let (at, blocks) = ring.next_write(&[3u8; 10]);
        assert_eq!((at, blocks.len()), (BLOCK_SIZE as u64, BLOCK_SIZE));
        assert_eq!(blocks[99], 2);
        assert_eq!(blocks[100], 3);
        ring.offset = LOG_RING_BYTES - BLOCK_SIZE as u64;
        let (at, _) = ring.next_write(&[4u8; BLOCK_SIZE]);
        assert_eq!(at, 0, "a write past the ring's end starts over at 0");
    }
}
