//! Recovery from the staging queues (`docs/durability.md`, "Recovery"): the store is loaded as
//! of its last checkpoint; this redoes the queues' commit records with a timestamp above the
//! checkpoint's, in timestamp order, up to the first one missing (a transaction that never
//! became durable: none after it was acknowledged, since a group commit acknowledges only
//! below every timestamp it covers).
//!
//! Pass 1 reads every record a kept delta names (its CRC, its key's hash): a record that does
//! not read back whole ends the prefix there (its transaction's flush never completed). It
//! claims the pages those records live in (the checkpoint's map may say they are free: they
//! were allocated after it) and counts their live bytes, so no page is freed or reused while a
//! later delta still names it. Pass 2 applies the deltas as the operations did (splits
//! included). Nothing is written until the checkpoint that ends the open, so a crash during
//! recovery leaves the same checkpoint and queues: recovery is idempotent.
//!
//! Both passes go through the records a window at a time ([`WINDOW`]), the pages a window
//! needs read together first ([`BATCH`] reads in flight): the records its deltas name, and for
//! the redo also the records its keys name now (a replaced record's page is read to free it),
//! so that recovery costs a few device round trips per window rather than per record. It
//! reports its progress to [`DbOptions::on_recovery_progress`](crate::DbOptions) after every
//! queue page and window, and past a second logs it every second.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tamer_cache::BATCH;

use super::buckets::Linked;
use super::commit::{decode_page, CommitRecord, DeltaOp};
use super::{corrupt, Engine};
use crate::layout::*;
use crate::DbError;

/// Commit records whose pages recovery fetches together.
const WINDOW: usize = 64;

/// What recovery at open redid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Valid commit records above the checkpoint's timestamp, in every queue.
    pub records_found: u64,
    /// Those redone: the prefix of consecutive timestamps whose records read back whole.
    pub records_redone: u64,
    /// The index changes those records held, applied.
    pub deltas_redone: u64,
    /// Queue pages read.
    pub queue_pages_read: u64,
    /// Time recovery took, ns.
    pub ns: u64,
}

/// The steps of recovery, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryPhase {
    /// Reading the staging queues' pages (`total`: cores × queue pages).
    ReadingQueues,
    /// Pass 1: reading the records the commit records name (`total`: commit records).
    CheckingRecords,
    /// Pass 2: applying the deltas (`total`: commit records kept by pass 1).
    Redoing,
}

/// Where recovery is, as reported to [`DbOptions::on_recovery_progress`](crate::DbOptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryProgress {
    /// The step recovery is in.
    pub phase: RecoveryPhase,
    /// Units of `phase` done, of `total`.
    pub done: u64,
    /// See `done`.
    pub total: u64,
    /// Since recovery began.
    pub elapsed: Duration,
}

/// A callback for recovery's progress (called on the recovering core: keep it short).
#[derive(Clone)]
pub struct RecoveryObserver(pub Arc<dyn Fn(&RecoveryProgress) + Send + Sync>);

impl std::fmt::Debug for RecoveryObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryObserver")
    }
}

impl Engine {
    /// Redoes the queues' records above the checkpoint `sb` names (see the module docs).
    pub(super) fn recover_queues(&self, sb: &Superblock) -> Result<RecoveryStats, DbError> {
        let start = tamer_device::now_ns();
        let mut stats = RecoveryStats::default();
        let mut records = Vec::new();
        let queue_pages = u64::from(sb.queues) * u64::from(sb.queue_pages);
        let mut progress = Progress::new(self.recovery_observer.clone(), start);
        for q in 0..u64::from(sb.queues) {
            for p in 0..u64::from(sb.queue_pages) {
                let page = self.queue_page(q, p);
                stats.queue_pages_read += 1;
                progress.step(
                    RecoveryPhase::ReadingQueues,
                    stats.queue_pages_read,
                    queue_pages,
                );
                match self.cache.get(page) {
                    Ok(r) => r.read(|b| {
                        let found = decode_page(b).into_iter().filter(|r| r.ts > sb.commit_ts);
                        records.extend(found);
                    }),
                    // A queue page whose first write was torn fails its checksum: it holds no
                    // durable record.
                    Err(err) => tracing::warn!("staging queue page {page} unreadable: {err}"),
                }
            }
        }
        stats.records_found = records.len() as u64;
        records.sort_by_key(|r| r.ts);
        records.dedup_by_key(|r| r.ts);
        let max_seen = records.last().map_or(sb.commit_ts, |r| r.ts);
        let mut prefix = Vec::new();
        for r in records {
            if r.ts != sb.commit_ts + 1 + prefix.len() as u64 {
                break;
            }
            prefix.push(r);
        }
        let kept = self.claim_records(&prefix, &mut progress)?;
        if kept < prefix.len() {
            tracing::warn!(
                "recovery: commit record {} names a record that did not reach the device whole: \
                 it and the {} after it were never acknowledged and are dropped",
                prefix[kept].ts,
                prefix.len() - kept - 1
            );
        }
        for window in prefix[..kept].chunks(WINDOW) {
            self.fetch_pages(window, true)?;
            for r in window {
                // A checkpoint between records (the index pages redone fill the cache) names
                // the records before this one as its own.
                self.commit.next_ts.store(r.ts, Ordering::SeqCst);
                self.checkpoint_if_over()?;
                self.redo(r)?;
                stats.records_redone += 1;
                stats.deltas_redone += r.deltas.len() as u64;
            }
            progress.step(RecoveryPhase::Redoing, stats.records_redone, kept as u64);
        }
        // Above every timestamp any queue holds: records past the prefix are never redone.
        self.commit.next_ts.store(max_seen + 1, Ordering::SeqCst);
        self.commit.durable_ts.store(max_seen, Ordering::SeqCst);
        stats.ns = tamer_device::now_ns().saturating_sub(start);
        if stats.records_found > 0 {
            tracing::info!(
                "recovery redid {} of {} commit records ({} deltas) in {} ms",
                stats.records_redone,
                stats.records_found,
                stats.deltas_redone,
                stats.ns / 1_000_000
            );
        }
        Ok(stats)
    }

    /// Pass 1: checks every record the records' deltas name and claims its pages; returns how
    /// many records (from the first) passed. A device or map error fails recovery.
    fn claim_records(
        &self,
        records: &[CommitRecord],
        progress: &mut Progress,
    ) -> Result<usize, DbError> {
        for (w, window) in records.chunks(WINDOW).enumerate() {
            // A page that cannot be read fails its record's check below.
            let _ = self.fetch_pages(window, false);
            for (j, r) in window.iter().enumerate() {
                if !self.claim_one(r)? {
                    return Ok(w * WINDOW + j);
                }
            }
            let done = (w * WINDOW + window.len()) as u64;
            progress.step(RecoveryPhase::CheckingRecords, done, records.len() as u64);
        }
        Ok(records.len())
    }

    /// Reads into the cache the first data page of every record `window`'s deltas name and,
    /// with `current`, of every record whose hash matches theirs in the buckets now (the
    /// records a redo replaces), the reads overlapped.
    fn fetch_pages(&self, window: &[CommitRecord], current: bool) -> Result<(), DbError> {
        let named: Vec<u64> = window
            .iter()
            .flat_map(|r| r.deltas.iter())
            .filter(|d| !d.op.names_root())
            .map(|d| d.entry.page)
            .collect();
        self.fetch_all(named)?;
        if current {
            // The keys' buckets first (index pages: their frames' class), then what they name.
            let mut buckets = Vec::new();
            for d in window.iter().flat_map(|r| &r.deltas) {
                if !d.op.is_tree() {
                    buckets.push(self.bucket_for(d.hash)?);
                }
            }
            buckets.sort_unstable();
            buckets.dedup();
            self.fetch_buckets(&buckets)?;
            let mut pages = Vec::new();
            for d in window.iter().flat_map(|r| &r.deltas) {
                if d.op.is_tree() {
                    continue;
                }
                let matches = self.read_bucket_of(d.hash, |bytes, count| {
                    let mut found = Vec::new();
                    let mut from = 0;
                    while let Some(i) = next_hash_match(bytes, count, d.hash, from) {
                        found.push(Entry::read(bytes, i).page);
                        from = i + 1;
                    }
                    Ok(found)
                })?;
                pages.extend(matches);
            }
            self.fetch_all(pages)?;
        }
        Ok(())
    }

    /// Reads `pages` into the cache, at most [`BATCH`] reads in flight.
    fn fetch_all(&self, mut pages: Vec<u64>) -> Result<(), DbError> {
        pages.sort_unstable();
        pages.dedup();
        for chunk in pages.chunks(BATCH) {
            let fetches = chunk
                .iter()
                .map(|&p| self.cache.prefetch(p))
                .collect::<Result<Vec<_>, _>>()?;
            for fetch in fetches {
                fetch.wait()?;
            }
        }
        Ok(())
    }

    /// Checks one record's deltas and claims its pages; false when a record it names did not
    /// reach the device whole.
    fn claim_one(&self, r: &CommitRecord) -> Result<bool, DbError> {
        {
            for d in r.deltas.iter().filter(|d| !d.op.names_root()) {
                let whole = match self.record_key(&d.entry) {
                    Ok(key) => {
                        self.hash(&key) == d.hash
                            && self
                                .read_record(&d.entry, &key, true)
                                .is_ok_and(|v| v.is_some())
                    }
                    Err(_) => false,
                };
                if !whole {
                    return Ok(false);
                }
            }
            for d in &r.deltas {
                match d.op {
                    DeltaOp::Put | DeltaOp::TreePut => self.claim_record(&d.entry)?,
                    DeltaOp::TreeCreate => {
                        // The root's pages, so that no redone split takes them first.
                        let l = self.logical_of(d.entry.page)?;
                        self.claim_page(l, MapKind::Tree)?;
                        self.claim_page(l + 1, MapKind::TreeCopy)?;
                    }
                    DeltaOp::Delete | DeltaOp::TreeDelete | DeltaOp::TreeFree => {}
                }
            }
        }
        Ok(true)
    }

    /// Marks the pages of a redone record in use (and its bytes live), as its write did.
    fn claim_record(&self, e: &Entry) -> Result<(), DbError> {
        let (_, len) = self.record_bytes(e, RECORD_HEADER)?;
        let l = self.logical_of(e.page)?;
        if e.is_extent() {
            let n = extent_pages(len);
            for i in 0..n {
                let kind = if i == 0 {
                    MapKind::ExtentHead
                } else {
                    MapKind::ExtentTail
                };
                self.claim_page(l + i, kind)?;
            }
            return Ok(());
        }
        self.claim_page(l, MapKind::Data)?;
        let span = record_span(e.offset(), len);
        let r = self.cache.get(e.page)?;
        r.write(|b| {
            // Settled: no reservation in it is still being written (the page that was open
            // at the crash is never appended to again).
            if get_u32(b, 12) == OPEN {
                let written = get_u32(b, 8).clamp(DATA_HEADER as u32, PAYLOAD as u32);
                put_u32(b, 8, written);
                put_u32(b, 12, written);
            }
            self.add_live(e.page, span as i64)
        })?;
        Ok(())
    }

    /// Logical page `l` holds a redone record of `kind`: taken from the free pages (and the
    /// high-water mark raised past it) when the checkpoint's map says it is free.
    fn claim_page(&self, l: u64, kind: MapKind) -> Result<(), DbError> {
        let entry = self.map_get(l)?;
        match MapKind::of(entry) {
            Some(MapKind::Free) => {}
            Some(k) if k == kind => return Ok(()),
            _ => {
                return Err(corrupt(
                    self.phys(l),
                    "a redone record's page holds another kind",
                ))
            }
        }
        self.ensure_capacity(l + 1, 1)?;
        {
            let mut alloc = self.lock_alloc();
            if l >= alloc.next_page {
                let gap = l - alloc.next_page;
                if gap > 0 {
                    let from = alloc.next_page;
                    alloc.free.give(from, gap);
                }
                alloc.next_page = l + 1;
            } else if !alloc.free.remove(l, 1) {
                return Err(corrupt(self.phys(l), "a redone record's page is not free"));
            }
        }
        self.map_update(l, |_| Ok(map_entry(kind, 0)))?;
        Ok(())
    }

    /// Pass 2: applies one commit record's deltas.
    fn redo(&self, r: &CommitRecord) -> Result<(), DbError> {
        for d in &r.deltas {
            if d.op.is_tree() {
                self.redo_tree(d, r.ts)?;
                continue;
            }
            let key = self.record_key(&d.entry)?;
            match d.op {
                DeltaOp::Put => {
                    let mut e = d.entry;
                    e.hash = tag(d.hash);
                    match self.link(d.hash, &key, e, None)? {
                        Linked::Replaced(old) => self.release(&old),
                        Linked::Inserted => {
                            self.key_count.fetch_add(1, Ordering::Relaxed);
                        }
                        Linked::Unchanged => unreachable!("an unconditional link always links"),
                    }
                }
                DeltaOp::TreePut
                | DeltaOp::TreeDelete
                | DeltaOp::TreeCreate
                | DeltaOp::TreeFree => {
                    unreachable!("redone above")
                }
                DeltaOp::Delete => {
                    if self.unlink(d.hash, &key)?.is_none() {
                        return Err(corrupt(
                            d.entry.page,
                            format!("commit record {} deletes a key that is absent", r.ts),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Recovery's progress: reported to the observer at every step, logged every second once it
/// has taken more than one.
struct Progress {
    observer: Option<RecoveryObserver>,
    start_ns: u64,
    next_log_ns: u64,
}

impl Progress {
    const EVERY_NS: u64 = 1_000_000_000;

    fn new(observer: Option<RecoveryObserver>, start_ns: u64) -> Self {
        Self {
            observer,
            start_ns,
            next_log_ns: start_ns + Self::EVERY_NS,
        }
    }

    /// `done` of `total` units of `phase` so far.
    fn step(&mut self, phase: RecoveryPhase, done: u64, total: u64) {
        debug_assert!(done <= total, "{phase:?}: {done} of {total}");
        let now = tamer_device::now_ns();
        let elapsed = Duration::from_nanos(now.saturating_sub(self.start_ns));
        if let Some(observer) = &self.observer {
            (observer.0)(&RecoveryProgress {
                phase,
                done,
                total,
                elapsed,
            });
        }
        if now >= self.next_log_ns {
            self.next_log_ns = now + Self::EVERY_NS;
            tracing::info!(
                "recovery: {phase:?} {done} of {total} ({} ms so far)",
                elapsed.as_millis()
            );
        }
    }
}
