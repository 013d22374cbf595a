//! Staging queues and group commit: LAD's flush phase on one device file
//! (`docs/durability.md`).
//!
//! Every change (a put, a delete, a transaction, a compaction move) is applied to the index in
//! DRAM under its keys' locks and the checkpoint latch, and gets a commit timestamp `ts` from
//! one counter. Its *deltas* (which record each key now names) are staged as one commit record
//! in its core's queue: a ring of pages on the device. The records themselves were already
//! written out of place; the queue holds 16 bytes per key. A group commit (one leader at a
//! time, covering everything staged on every core) writes the data pages holding the staged
//! records and the queue pages, then one device flush: every `ts` below the counter it read
//! first is then durable. A checkpoint makes everything up to its `ts` durable in the index
//! itself and empties the queues. A transaction with more deltas than a queue page holds, or
//! one that finds its queue full, is not staged (the overflow path): it is durable once the
//! next checkpoint is, and the durable watermark stops below it until then.
//!
//! Recovery (`recover.rs`) redoes, from the last checkpoint, the queues' valid records with
//! `ts` above the checkpoint's, in `ts` order, up to the first one missing.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tamer_cache::crc32c;
use tamer_runtime::thread;

use super::ledger::Ledger;
use super::{Engine, YieldLock};
use crate::layout::*;
use crate::DbError;

/// Yields a group commit's leader makes, at most, for more transactions to stage before it
/// collects (each a scheduling pass: µs).
const GATHER_YIELDS_MAX: usize = 8;
/// And the longest it gathers, ns (a yield under load is a round of every runnable thread).
const GATHER_NS_MAX: u64 = 50_000;

/// When a write is acknowledged (`DbOptions::durability`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// A write returns before it is durable; it becomes durable with the next checkpoint (at
    /// most `CHECKPOINT_INTERVAL` later while the store changes). A crash keeps the effects
    /// of a prefix of the transactions in commit order. Nothing is staged.
    None,
    /// As `None`, and every staged transaction is made durable by a group commit at least
    /// this often (as Redis's `appendfsync everysec`): a crash loses at most about the last
    /// interval.
    Periodic(Duration),
    /// A write (a put, a delete, a batch, a transaction) returns only once it is durable.
    #[default]
    Commit,
}

/// What one delta does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeltaOp {
    /// The key's entry names this record (inserted or replaced).
    Put = 1,
    /// The key, whose record was this one, is deleted.
    Delete = 2,
    /// A tree entry (the tree and key in the record's key) names this record.
    TreePut = 3,
    /// The tree entry whose record was this one is deleted.
    TreeDelete = 4,
    /// A tree is created: `entry.page` is its root (no record; hash 0).
    TreeCreate = 5,
    /// An empty tree is freed: `entry.page` is its root (no record; hash 0).
    TreeFree = 6,
}

impl DeltaOp {
    /// A change of a tree (redone by `redo_tree`), not of the hash index.
    pub fn is_tree(self) -> bool {
        matches!(
            self,
            DeltaOp::TreePut | DeltaOp::TreeDelete | DeltaOp::TreeCreate | DeltaOp::TreeFree
        )
    }

    /// A tree delta that names a root page, not a record.
    pub fn names_root(self) -> bool {
        matches!(self, DeltaOp::TreeCreate | DeltaOp::TreeFree)
    }
}

/// The index change of one key: a record's place and the key's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Delta {
    pub op: DeltaOp,
    pub hash: u64,
    pub entry: Entry,
}

/// What [`Engine::stage`] did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Staged {
    pub ts: u64,
    pub sync_now: bool,
}

/// A commit record read back from a queue page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CommitRecord {
    pub ts: u64,
    pub deltas: Vec<Delta>,
}

/// How long a write waits for its group commit (a device flush) before it fails.
const DURABLE_WAIT: Duration = Duration::from_secs(60);
/// Data pages a queue remembers for its next group commit; past this a stager leads one.
const PENDING_PAGES_MAX: usize = 4096;

/// What the staging queues and group commits did since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions staged in a queue (each a put, a delete, a batch or a transaction).
    pub staged: u64,
    /// Transactions too large for a queue page (or finding their queue full): durable through
    /// a checkpoint instead.
    pub overflows: u64,
    /// Group commits (each one device flush).
    pub group_commits: u64,
    /// Queue pages and data pages written by group commits.
    pub queue_pages_written: u64,
    /// See `queue_pages_written`.
    pub data_pages_written: u64,
}

/// One core's queue: the page being filled, kept in DRAM, and what the next group commit
/// writes.
pub(crate) struct Queue {
    /// Ring page being filled (`0..pages`), its image, and the bytes used in it.
    page: u64,
    image: Box<[u8]>,
    used: usize,
    /// Images of ring pages filled since the last group commit took them.
    sealed: Vec<(u64, Box<[u8]>)>,
    /// The image changed since the last group commit took it.
    changed: bool,
    /// Data pages holding staged records not yet written by a group commit.
    data_pages: Vec<u64>,
}

impl Queue {
    fn new(number: u32) -> Self {
        let mut q = Queue {
            page: 0,
            image: vec![0u8; PAYLOAD].into_boxed_slice(),
            used: QUEUE_HEADER,
            sealed: Vec::new(),
            changed: false,
            data_pages: Vec::new(),
        };
        q.restart(number);
        q
    }

    /// Back to ring page 0, empty (after a checkpoint made every staged record durable).
    fn restart(&mut self, number: u32) {
        self.page = 0;
        self.image.fill(0);
        put_u32(&mut self.image, 0, KIND_QUEUE);
        put_u32(&mut self.image, 4, number);
        self.used = QUEUE_HEADER;
        self.sealed.clear();
        self.changed = false;
        self.data_pages.clear();
    }
}

/// The commit machinery of one store: the ledger (timestamps, queues, the durable
/// watermark; its fields `next_ts` and `durable_ts` are reached through `Deref`) and what
/// group commits need besides.
pub(crate) struct Commit {
    pub mode: Durability,
    ledger: Ledger<Queue>,
    /// Logical page of the first queue's first ring page, and the pages of each (set at load).
    pub first: AtomicU64,
    pub pages: AtomicU64,
    /// Held by the group commit's leader, and by a checkpoint.
    pub leader: YieldLock,
    /// Bumped at the end of every group commit and checkpoint (waiters watch it).
    rounds: AtomicU64,
    /// A queue filled half its ring: the next change runs a checkpoint first.
    pub half_full: AtomicBool,
    stats: Mutex<CommitStats>,
}

impl Deref for Commit {
    type Target = Ledger<Queue>;

    fn deref(&self) -> &Ledger<Queue> {
        &self.ledger
    }
}

impl Commit {
    /// Wakes every write waiting for a group commit (they re-check their condition).
    pub(super) fn wake_waiters(&self) {
        self.rounds.fetch_add(1, Ordering::AcqRel);
    }

    /// `queues` queues, timestamps continuing after `last_ts`.
    pub fn new(mode: Durability, queues: u32, last_ts: u64) -> Self {
        debug_assert!(queues >= 1 && u64::from(queues) <= MAX_QUEUES);
        Self {
            mode,
            ledger: Ledger::new((0..queues).map(Queue::new).collect(), last_ts),
            first: AtomicU64::new(0),
            pages: AtomicU64::new(QUEUE_PAGES_MAX),
            leader: YieldLock(AtomicBool::new(false)),
            rounds: AtomicU64::new(0),
            half_full: AtomicBool::new(false),
            stats: Mutex::new(CommitStats::default()),
        }
    }

    pub fn queues(&self) -> u32 {
        self.ledger.queues() as u32
    }

    /// Pages of each queue's ring.
    pub fn pages(&self) -> u64 {
        self.pages.load(Ordering::Relaxed)
    }

    fn lock_stats(&self) -> MutexGuard<'_, CommitStats> {
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> CommitStats {
        *self.lock_stats()
    }
}

/// Encodes a commit record at `out[..]`; returns its bytes.
pub(crate) fn encode_record(ts: u64, deltas: &[Delta], out: &mut [u8]) -> usize {
    let bytes = COMMIT_HEADER + deltas.len() * DELTA_BYTES;
    debug_assert!(deltas.len() <= MAX_DELTAS && out.len() >= bytes);
    let out = &mut out[..bytes];
    out.fill(0);
    put_u32(out, 0, COMMIT_MAGIC);
    put_u32(out, 4, bytes as u32);
    put_u64(out, 8, ts);
    put_u32(out, 16, deltas.len() as u32);
    for (i, d) in deltas.iter().enumerate() {
        let at = COMMIT_HEADER + i * DELTA_BYTES;
        out[at] = d.op as u8;
        out[at + 1] = d.entry.slot;
        put_u32(out, at + 4, d.entry.page as u32);
        put_u64(out, at + 8, d.hash);
    }
    let crc = crc32c(out);
    put_u32(out, 20, crc);
    bytes
}

/// The valid commit records of a queue page image, in page order. Parsing stops at the first
/// bytes that are not a whole valid record (the unused tail, or a torn append).
pub(crate) fn decode_page(image: &[u8]) -> Vec<CommitRecord> {
    let mut records = Vec::new();
    if get_u32(image, 0) != KIND_QUEUE {
        return records;
    }
    let mut at = QUEUE_HEADER;
    // Bounded: each record is at least COMMIT_HEADER bytes of the page.
    while at + COMMIT_HEADER <= PAYLOAD {
        let b = &image[at..PAYLOAD];
        let (bytes, count) = (get_u32(b, 4) as usize, get_u32(b, 16) as usize);
        if get_u32(b, 0) != COMMIT_MAGIC
            || count > MAX_DELTAS
            || bytes != COMMIT_HEADER + count * DELTA_BYTES
            || bytes > b.len()
        {
            break;
        }
        let mut copy = b[..bytes].to_vec();
        let crc = get_u32(&copy, 20);
        put_u32(&mut copy, 20, 0);
        if crc32c(&copy) != crc {
            break;
        }
        let deltas = (0..count)
            .filter_map(|i| {
                let d = &copy[COMMIT_HEADER + i * DELTA_BYTES..];
                let op = match d[0] {
                    1 => DeltaOp::Put,
                    2 => DeltaOp::Delete,
                    3 => DeltaOp::TreePut,
                    4 => DeltaOp::TreeDelete,
                    5 => DeltaOp::TreeCreate,
                    6 => DeltaOp::TreeFree,
                    _ => return None,
                };
                let hash = get_u64(d, 8);
                Some(Delta {
                    op,
                    hash,
                    entry: Entry {
                        hash: tag(hash),
                        page: u64::from(get_u32(d, 4)),
                        slot: d[1],
                    },
                })
            })
            .collect::<Vec<_>>();
        if deltas.len() != count {
            break; // an unknown op under a valid CRC: not a record this build wrote
        }
        records.push(CommitRecord {
            ts: get_u64(&copy, 8),
            deltas,
        });
        at += bytes;
    }
    records
}

impl Engine {
    /// The physical page of ring page `page` of queue `q`.
    pub(super) fn queue_page(&self, q: u64, page: u64) -> u64 {
        let pages = self.commit.pages();
        debug_assert!(page < pages);
        self.phys(self.commit.first.load(Ordering::Relaxed) + q * pages + page)
    }

    /// Gives a change applied under the checkpoint latch (and its keys' locks) its commit
    /// timestamp and stages its deltas, with the data pages holding its new records, in the
    /// calling core's queue. Returns the timestamp. Under `Durability::None`, and on overflow
    /// (too many deltas for a queue page, or the queue's ring full), nothing is staged: the
    /// change is durable with the next checkpoint. `Staged::sync_now` asks the caller to make
    /// it durable at once whatever the mode (its queue's list of data pages is long).
    pub(super) fn stage(&self, deltas: &[Delta], data_pages: &[u64]) -> Staged {
        // An empty change takes no timestamp: a `ts` never staged would end recovery's prefix.
        assert!(!deltas.is_empty(), "staging a change without deltas");
        let c = &self.commit;
        let q = thread::core_id().unwrap_or(0) % c.ledger.queues();
        if c.mode == Durability::None {
            // Nothing staged, no overflow: the checkpoint makes it durable.
            let (ts, _) = c.ledger.stage(q, |_, _| Some(()));
            return Staged {
                ts,
                sync_now: false,
            };
        }
        let (ts, staged) = c.ledger.stage(q, |queue, ts| {
            self.append_record(q, queue, ts, deltas, data_pages)
        });
        let mut stats = c.lock_stats();
        match staged {
            Some(_) => stats.staged += 1,
            None => stats.overflows += 1,
        }
        Staged {
            ts,
            sync_now: staged.unwrap_or(false),
        }
    }

    /// Appends `ts`'s commit record to queue `q` (sealing its page when full); `None` when it
    /// does not fit (an overflow), else whether the queue's list of data pages is long.
    fn append_record(
        &self,
        q: usize,
        queue: &mut Queue,
        ts: u64,
        deltas: &[Delta],
        data_pages: &[u64],
    ) -> Option<bool> {
        let c = &self.commit;
        let bytes = COMMIT_HEADER + deltas.len() * DELTA_BYTES;
        let fits_page = deltas.len() <= MAX_DELTAS;
        let pages = c.pages();
        if fits_page && queue.used + bytes > PAYLOAD && queue.page + 1 < pages {
            // Seal the page: the next group commit writes its final image.
            let page = queue.page;
            let image = queue.image.clone();
            queue.sealed.push((page, image));
            queue.page += 1;
            let number = q as u32;
            queue.image.fill(0);
            put_u32(&mut queue.image, 0, KIND_QUEUE);
            put_u32(&mut queue.image, 4, number);
            queue.used = QUEUE_HEADER;
            if queue.page >= pages / 2 {
                c.half_full.store(true, Ordering::Release);
            }
        }
        if !fits_page || queue.used + bytes > PAYLOAD {
            return None;
        }
        let used = queue.used;
        let written = encode_record(ts, deltas, &mut queue.image[used..]);
        debug_assert_eq!(written, bytes);
        queue.used += bytes;
        queue.changed = true;
        for &p in data_pages {
            if queue.data_pages.last() != Some(&p) {
                queue.data_pages.push(p);
            }
        }
        Some(queue.data_pages.len() > PENDING_PAGES_MAX)
    }

    /// Returns once every transaction up to `ts` is durable: leads a group commit when none
    /// runs, else waits for the one running; runs a checkpoint when an overflowed transaction
    /// at or below `ts` needs one. Fails when the store failed, or after [`DURABLE_WAIT`].
    pub fn wait_durable(&self, ts: u64) -> Result<(), DbError> {
        if self.commit.is_durable(ts) {
            return Ok(());
        }
        // The caller's request waits for a group commit (its device time included).
        tamer_runtime::thread::account_as(tamer_runtime::thread::WaitKind::Commit, || {
            self.wait_durable_uncounted(ts)
        })
    }

    fn wait_durable_uncounted(&self, ts: u64) -> Result<(), DbError> {
        let c = &self.commit;
        let deadline = tamer_device::now_ns() + DURABLE_WAIT.as_nanos() as u64;
        loop {
            // Read before the failure check: `fail` sets the failure, then bumps `rounds`.
            let round = c.rounds.load(Ordering::Acquire);
            if c.is_durable(ts) {
                return Ok(());
            }
            self.check_failed()?;
            if c.overflowed_by(ts) {
                self.checkpoint_if(false, |e| {
                    e.commit.overflowed_by(ts) && !e.commit.is_durable(ts)
                })?;
                continue;
            }
            if let Some(_leader) = c.leader.try_lock() {
                self.gather_group();
                if let Err(err) = self.group_commit() {
                    // What reached the device is unknown: the store stops taking writes, and
                    // recovery at the next open decides what is durable.
                    self.fail(format!("a group commit failed: {err}"));
                    return Err(err);
                }
                continue;
            }
            if tamer_device::now_ns() > deadline {
                return Err(DbError::Runtime(format!(
                    "a write waited {DURABLE_WAIT:?} for its group commit"
                )));
            }
            // Woken when the running group commit (or checkpoint) ends.
            thread::wait_while_eq(&c.rounds, round, deadline);
        }
    }

    /// Lets the work ready on this core (requests that arrived with the leader's) stage before
    /// the leader collects, so that one group and one flush carry them: yields while other
    /// threads or new jobs are ready, at most [`GATHER_YIELDS_MAX`] times and
    /// [`GATHER_NS_MAX`]. Threads waiting for the device are not waited for.
    fn gather_group(&self) {
        if !thread::in_user_thread() {
            return;
        }
        let deadline_ns = tamer_device::now_ns() + GATHER_NS_MAX;
        for _ in 0..GATHER_YIELDS_MAX {
            if thread::others_ready() == 0 || tamer_device::now_ns() >= deadline_ns {
                return;
            }
            thread::yield_now();
        }
    }

    /// Makes everything staged so far durable: the leader's work (the caller holds
    /// `commit.leader`).
    fn group_commit(&self) -> Result<(), DbError> {
        // Every committing thread waits for this one: it runs as soon as its writes complete.
        let _urgent = thread::Urgent::new();
        let c = &self.commit;
        let mut data_pages = Vec::new();
        let mut queue_images: Vec<(u64, Box<[u8]>)> = Vec::new();
        let batch = c.ledger.collect(|q, queue| {
            data_pages.append(&mut queue.data_pages);
            for (page, image) in queue.sealed.drain(..) {
                queue_images.push((self.queue_page(q as u64, page), image));
            }
            if queue.changed {
                queue.changed = false;
                queue_images.push((self.queue_page(q as u64, queue.page), queue.image.clone()));
            }
        });
        // Queue images into the cache first, so that data and queue pages go out in one batch
        // of writes (one round trip), then one flush. Their order does not matter: nothing is
        // durable before the flush, and recovery checks every record a commit names.
        let mut pages = data_pages;
        for (page, image) in &queue_images {
            let r = self.cache.get_for_overwrite(*page)?;
            r.write(|b| b[..PAYLOAD].copy_from_slice(image));
            pages.push(*page);
        }
        pages.sort_unstable();
        pages.dedup();
        let written = self.cache.write_back_settled(&pages)?;
        tamer_runtime::io::flush().map_err(|err| DbError::Cache(err.into()))?;
        c.ledger.publish(batch);
        c.rounds.fetch_add(1, Ordering::AcqRel);
        let mut stats = c.lock_stats();
        stats.group_commits += 1;
        // Queue images are always dirty here (unless the cleaner wrote one meanwhile).
        let queue_written = queue_images.len().min(written);
        stats.queue_pages_written += queue_written as u64;
        stats.data_pages_written += (written - queue_written) as u64;
        Ok(())
    }

    /// Makes every transaction so far durable (`Durability::Periodic`'s timer, and `Db::sync`).
    pub fn sync(&self) -> Result<(), DbError> {
        if self.commit.mode == Durability::None {
            return self.checkpoint_if_dirty();
        }
        let last = self.commit.next_ts.load(Ordering::SeqCst) - 1;
        self.wait_durable(last)
    }

    /// A checkpoint made every `ts` up to `ts` durable: the queues start over (their records
    /// are all at or below it) and waiters wake. Called by the checkpoint under the exclusive
    /// checkpoint latch and the leader lock, after its superblock is durable.
    pub(super) fn queues_checkpointed(&self, ts: u64) {
        let c = &self.commit;
        c.ledger
            .checkpointed(ts, |q, queue| queue.restart(q as u32));
        c.half_full.store(false, Ordering::Release);
        c.rounds.fetch_add(1, Ordering::AcqRel);
    }

    /// What the queues and group commits did since open.
    pub fn commit_stats(&self) -> CommitStats {
        self.commit.stats()
    }
}
