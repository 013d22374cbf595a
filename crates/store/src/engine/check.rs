//! `tamer check`: verifies every checksum and structure of a store and reports what is wrong
//! (as SQLite's `integrity_check` and redb's `check_integrity` do). It reads the whole store:
//! the directory, every bucket, every record (its CRC, its key's hash against its entry) and
//! every map page, and compares the map with what the index references.
//!
//! Memory: one entry per referenced data page and extent (≈ 40 bytes each) plus one bucket's
//! keys at a time. Run it on a store nobody writes meanwhile (the CLI opens it read-only).

use std::collections::{HashMap, HashSet};

use super::directory::mask;
use super::Engine;
use crate::layout::*;
use crate::DbError;

/// Most problems a report lists; more are counted in [`CheckReport::problems_total`].
pub const MAX_PROBLEMS_LISTED: usize = 100;

/// One thing wrong, on one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The page it is on.
    pub page: u64,
    /// What is wrong.
    pub what: String,
}

/// What [`crate::Db::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Index entries (one per key).
    pub keys: u64,
    /// Bucket pages the directory names.
    pub buckets: u64,
    /// Data pages holding live small records.
    pub data_pages: u64,
    /// Pages of extents (large records), heads and tails.
    pub extent_pages: u64,
    /// Pages of the staging queues.
    pub queue_pages: u64,
    /// Pages of the directory's segments (both copies), past its fixed region.
    pub directory_pages: u64,
    /// Pages the map says are free.
    pub free_pages: u64,
    /// Pages the map says are in use that nothing references (space lost, not data).
    pub leaked_pages: u64,
    /// Records read and verified.
    pub records: u64,
    /// Ordered trees, their entries, and their nodes' pages (both copies).
    pub trees: u64,
    /// See `trees`.
    pub tree_entries: u64,
    /// See `trees`.
    pub tree_pages: u64,
    /// The first [`MAX_PROBLEMS_LISTED`] problems.
    pub problems: Vec<Problem>,
    /// Problems found, listed or not.
    pub problems_total: u64,
}

impl CheckReport {
    /// True when nothing is wrong (leaked pages are space, not damage: reported, not wrong).
    pub fn is_clean(&self) -> bool {
        self.problems_total == 0
    }

    fn problem(&mut self, page: u64, what: impl Into<String>) {
        self.problems_total += 1;
        if self.problems.len() < MAX_PROBLEMS_LISTED {
            self.problems.push(Problem {
                page,
                what: what.into(),
            });
        }
    }
}

/// What the index references, per physical page.
#[derive(Default)]
struct Referenced {
    /// Data page → the spans of the records entries point to.
    data_live: HashMap<u64, u32>,
    /// Extent head → its pages.
    extents: HashMap<u64, u64>,
    buckets: HashSet<u64>,
    /// (page, slot) of every record named, to find two entries naming one record.
    records: HashSet<(u64, u8)>,
    /// Tree nodes reached from their roots (first copies).
    tree_nodes: HashSet<u64>,
}

impl Engine {
    /// Checks the whole store; an error only when the check itself cannot go on (a device
    /// error); damage is reported in the [`CheckReport`].
    pub fn check(&self) -> Result<CheckReport, DbError> {
        let _op = self.check_open()?;
        let mut report = CheckReport::default();
        let mut seen = Referenced::default();
        let next_page = self.lock_alloc().next_page;
        self.check_directory(next_page, &mut report, &mut seen)?;
        self.check_trees(next_page, &mut report, &mut seen)?;
        self.check_map(next_page, &mut report, &seen)?;
        if report.keys != self.len() {
            report.problem(
                0,
                format!(
                    "the superblock counts {} keys, the index holds {}",
                    self.len(),
                    report.keys
                ),
            );
        }
        Ok(report)
    }

    /// Every directory slot, and every bucket once (at its lowest slot).
    fn check_directory(
        &self,
        next_page: u64,
        report: &mut CheckReport,
        seen: &mut Referenced,
    ) -> Result<(), DbError> {
        let global = self.global_depth.load(std::sync::atomic::Ordering::Acquire);
        for index in 0..1u64 << global {
            let (place, _) = dir_place(self.fixed_depth, index);
            let slot_page = self.dir_page_at(place).map_or(0, |(tag, _)| tag);
            let (page, depth) = match self.dir_get(index) {
                Ok(slot) => slot,
                Err(DbError::Corrupt { page, detail }) => {
                    report.problem(page, format!("slot {index} unreadable: {detail}"));
                    continue;
                }
                Err(err) => return Err(err),
            };
            if depth > global {
                report.problem(slot_page, format!("slot {index}: depth {depth} > {global}"));
                continue;
            }
            if !self.managed_below(page, next_page) {
                report.problem(
                    slot_page,
                    format!("slot {index}: bucket page {page} invalid"),
                );
                continue;
            }
            let pattern = index & mask(depth);
            if index != pattern {
                // Visited at its lowest slot: the slot must agree with it.
                let (lowest, lowest_depth) = self.dir_get(pattern)?;
                if (lowest, lowest_depth) != (page, depth) {
                    report.problem(
                        slot_page,
                        format!("slot {index} names bucket {page}, its slot {pattern} {lowest}"),
                    );
                }
                continue;
            }
            if !seen.buckets.insert(page) {
                report.problem(page, "one bucket named by two patterns");
                continue;
            }
            report.buckets += 1;
            self.check_bucket(page, pattern, depth, next_page, report, seen)?;
        }
        Ok(())
    }

    /// True when physical page `page` is a managed page below the high-water mark.
    fn managed_below(&self, page: u64, next_page: u64) -> bool {
        logical(self.space_start, page).is_some_and(|l| l < next_page)
    }

    fn check_bucket(
        &self,
        page: u64,
        pattern: u64,
        depth: u32,
        next_page: u64,
        report: &mut CheckReport,
        seen: &mut Referenced,
    ) -> Result<(), DbError> {
        let r = match self.bucket(page, pattern) {
            Ok(r) => r,
            Err(DbError::Corrupt { detail, .. }) => {
                report.problem(page, format!("bucket unreadable: {detail}"));
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        let header = r.read(|b| {
            (
                get_u32(b, 0),
                bucket_depth(b),
                get_u16(b, 6) as usize,
                bucket_pattern(b),
            )
        });
        let entries: Vec<Entry> = r.read(|b| {
            (0..header.2.min(BUCKET_CAP))
                .map(|i| Entry::read(b, i))
                .collect()
        });
        drop(r);
        let (kind, bucket_depth, count, bucket_pattern) = header;
        if kind != KIND_BUCKET || bucket_depth != depth || bucket_pattern != pattern {
            report.problem(
                page,
                format!(
                    "bucket header (kind {kind:#x}, depth {bucket_depth}, pattern \
                     {bucket_pattern}) disagrees with its slot (depth {depth}, pattern {pattern})"
                ),
            );
            return Ok(());
        }
        if count > BUCKET_CAP {
            report.problem(page, format!("count {count} > {BUCKET_CAP}"));
        }
        let mut keys = HashSet::new();
        for e in entries {
            report.keys += 1;
            if e.hash & mask(depth) != pattern {
                report.problem(page, format!("entry hash {:#x} outside the bucket", e.hash));
                continue;
            }
            self.check_entry(&e, page, next_page, report, seen, &mut keys)?;
        }
        Ok(())
    }

    /// One entry: its record is where it says, whole (CRC), its key hashes to the entry, no
    /// other entry names it, and its key is not stored twice.
    fn check_entry(
        &self,
        e: &Entry,
        bucket: u64,
        next_page: u64,
        report: &mut CheckReport,
        seen: &mut Referenced,
        keys: &mut HashSet<Vec<u8>>,
    ) -> Result<(), DbError> {
        if !self.managed_below(e.page, next_page) {
            report.problem(
                bucket,
                format!("entry names page {} (not a record page)", e.page),
            );
            return Ok(());
        }
        if !seen.records.insert((e.page, e.slot)) {
            report.problem(
                bucket,
                format!("two entries name the record at {}/{}", e.page, e.slot),
            );
            return Ok(());
        }
        let (bytes, len) = match self.record_bytes(e, usize::MAX) {
            Ok(found) => found,
            Err(DbError::Corrupt { page, detail }) => {
                report.problem(page, detail);
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        report.records += 1;
        if e.is_extent() && crc32c_of_record(&bytes) != get_u32(&bytes, 8) {
            report.problem(e.page, "extent record checksum mismatch");
            return Ok(());
        }
        let klen = get_u32(&bytes, 0) as usize;
        let key = &bytes[RECORD_HEADER..RECORD_HEADER + klen];
        if tag(self.hash(key)) != e.hash {
            report.problem(e.page, "record's key does not hash to its entry");
        }
        if !keys.insert(key.to_vec()) {
            report.problem(bucket, "one key stored twice");
        }
        if e.is_extent() {
            seen.extents.insert(e.page, extent_pages(len));
        } else {
            *seen.data_live.entry(e.page).or_default() += record_span(e.offset(), len) as u32;
        }
        Ok(())
    }

    /// Every map page against what the index references.
    fn check_map(
        &self,
        next_page: u64,
        report: &mut CheckReport,
        seen: &Referenced,
    ) -> Result<(), DbError> {
        let implied = self.implied_pages(report, seen);
        for l in 0..next_page {
            let page = self.phys(l);
            let entry = match self.map_get(l) {
                Ok(entry) => entry,
                Err(DbError::Corrupt { page, detail }) => {
                    report.problem(page, detail);
                    continue;
                }
                Err(err) => return Err(err),
            };
            let kind = MapKind::of(entry);
            let want = self.expected_kind(l, page, seen, &implied);
            match (kind, want) {
                (None, _) => report.problem(page, format!("map entry {entry:#x} of no kind")),
                (Some(MapKind::Free), None) => report.free_pages += 1,
                (Some(_), None) => report.leaked_pages += 1,
                (Some(k), Some(w)) if k != w => report.problem(
                    page,
                    format!("the map says {k:?}, the index uses it as {w:?}"),
                ),
                (Some(k), Some(_)) => self.count_used(k, page, entry, seen, report),
            }
        }
        Ok(())
    }

    /// The pages the index references through others: buckets' and tree nodes' second
    /// copies, extents' tail pages.
    fn implied_pages(&self, report: &mut CheckReport, seen: &Referenced) -> Implied {
        let mut implied = Implied::default();
        for &bucket in &seen.buckets {
            match self.extent_page(bucket, 1) {
                Ok(p) => implied.bucket_copies.insert(p),
                Err(_) => {
                    report.problem(bucket, "a bucket's second copy is not a managed page");
                    continue;
                }
            };
        }
        for &n in &seen.tree_nodes {
            if let Ok(p) = self.extent_page(n, 1) {
                implied.tree_copies.insert(p);
            }
        }
        for (&head, &pages) in &seen.extents {
            for i in 1..pages {
                match self.extent_page(head, i) {
                    Ok(p) => implied.extent_tails.insert(p),
                    Err(_) => {
                        report.problem(head, "extent runs past the managed pages");
                        break;
                    }
                };
            }
        }
        implied
    }

    /// What the map should say of logical page `l` (physical `page`) by how the index and
    /// the store use it; `None`: unused (free or leaked).
    fn expected_kind(
        &self,
        l: u64,
        page: u64,
        seen: &Referenced,
        implied: &Implied,
    ) -> Option<MapKind> {
        if seen.buckets.contains(&page) {
            Some(MapKind::Bucket)
        } else if seen.data_live.contains_key(&page) {
            Some(MapKind::Data)
        } else if seen.extents.contains_key(&page) {
            Some(MapKind::ExtentHead)
        } else if implied.extent_tails.contains(&page) {
            Some(MapKind::ExtentTail)
        } else if implied.bucket_copies.contains(&page) {
            Some(MapKind::BucketCopy)
        } else if seen.tree_nodes.contains(&page) {
            Some(MapKind::Tree)
        } else if implied.tree_copies.contains(&page) {
            Some(MapKind::TreeCopy)
        } else if self.is_queue_page(l) {
            Some(MapKind::Queue)
        } else if self.is_dir_segment_page(l) {
            Some(MapKind::Directory)
        } else {
            None
        }
    }

    fn count_used(
        &self,
        kind: MapKind,
        page: u64,
        entry: u32,
        seen: &Referenced,
        report: &mut CheckReport,
    ) {
        match kind {
            MapKind::Data => {
                report.data_pages += 1;
                let live = seen.data_live[&page];
                if map_live(entry) != live {
                    report.problem(
                        page,
                        format!(
                            "the map counts {} live bytes, the index's records {live}",
                            map_live(entry)
                        ),
                    );
                }
            }
            MapKind::ExtentHead | MapKind::ExtentTail => report.extent_pages += 1,
            MapKind::Queue => report.queue_pages += 1,
            MapKind::Directory => report.directory_pages += 1,
            MapKind::Tree | MapKind::TreeCopy => report.tree_pages += 1,
            MapKind::Bucket | MapKind::BucketCopy | MapKind::Free => {}
        }
    }
}

impl Engine {
    /// True when logical page `l` is one of the staging queues' pages.
    fn is_queue_page(&self, l: u64) -> bool {
        let first = self.commit.first.load(std::sync::atomic::Ordering::Relaxed);
        (first..first + u64::from(self.commit.queues()) * self.commit.pages()).contains(&l)
    }

    /// True when logical page `l` is a page of an allocated directory segment.
    fn is_dir_segment_page(&self, l: u64) -> bool {
        self.dir_segments
            .iter()
            .map(|s| s.load(std::sync::atomic::Ordering::Acquire))
            .enumerate()
            .take_while(|&(_, first)| first != 0)
            .any(|(s, first)| {
                (first..first + 2 * segment_pages(self.fixed_depth, s as u32)).contains(&l)
            })
    }
}

/// Pages the index references through others ([`Engine::implied_pages`]).
#[derive(Default)]
struct Implied {
    bucket_copies: HashSet<u64>,
    tree_copies: HashSet<u64>,
    extent_tails: HashSet<u64>,
}

fn crc32c_of_record(record: &[u8]) -> u32 {
    tamer_cache::crc32c(&record[RECORD_HEADER..])
}

/// Checks node `b` of tree `tree`, reached as `v`, on its own and against its parent:
/// its shape, tree, level and depth (`false`: a problem that stops the walk below it), then
/// its count and its keys' range (problems reported, the walk goes on).
fn check_node(tree: u64, v: &Visit, b: &[u8], report: &mut CheckReport) -> bool {
    use super::tree::node;
    if let Err(what) = node::check(b) {
        report.problem(v.page, what);
        return false;
    }
    if node::tree(b) != tree || v.level.is_some_and(|l| l != node::level(b)) {
        report.problem(v.page, "a tree node of another tree or level");
        return false;
    }
    if usize::from(node::level(b)) >= TREE_LEVELS_MAX {
        report.problem(v.page, "a tree deeper than its bound");
        return false;
    }
    let n = node::count(b);
    if n == 0 && v.page != tree {
        report.problem(v.page, "an empty tree node below the root");
    }
    if v.count.is_some_and(|c| Some(c) != node::total(b)) {
        report.problem(v.page, "a node's count differs from its parent's");
    }
    let in_range = |k: &[u8]| {
        v.lower.as_deref().is_none_or(|lo| k >= lo) && v.upper.as_deref().is_none_or(|up| k < up)
    };
    let first = usize::from(!node::is_leaf(b));
    if (first..n).any(|i| !node::key(b, i).is_some_and(in_range)) {
        report.problem(v.page, "a key outside its parent's separators");
    }
    true
}

/// A node to visit in a tree walk: its page, the level its parent expects (`None` for the
/// root), the key range its keys must lie in, and the count its parent holds for it.
struct Visit {
    page: u64,
    level: Option<u8>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    count: Option<u64>,
}

impl Engine {
    /// Every tree (a map page of kind tree whose node names itself as its tree is a root):
    /// each node's shape, levels, key ranges against its parent's separators, counts against
    /// its parent's, and every leaf entry's record (its key, its flag, its inline value).
    fn check_trees(
        &self,
        next_page: u64,
        report: &mut CheckReport,
        seen: &mut Referenced,
    ) -> Result<(), DbError> {
        for l in 0..next_page {
            if MapKind::of(self.map_get(l)?) != Some(MapKind::Tree) {
                continue;
            }
            let page = self.phys(l);
            let root = match self.node_page(page) {
                Ok(r) => {
                    r.read(|b| super::tree::node::is_node(b) && super::tree::node::tree(b) == page)
                }
                Err(DbError::Corrupt { page, detail }) => {
                    report.problem(page, detail);
                    continue;
                }
                Err(err) => return Err(err),
            };
            if root {
                report.trees += 1;
                self.check_tree(page, report, seen)?;
            }
        }
        Ok(())
    }

    /// One tree, walked depth first (at most [`TREE_LEVELS_MAX`] levels).
    fn check_tree(
        &self,
        tree: u64,
        report: &mut CheckReport,
        seen: &mut Referenced,
    ) -> Result<(), DbError> {
        use super::tree::node;
        let mut stack = vec![Visit {
            page: tree,
            level: None,
            lower: None,
            upper: None,
            count: None,
        }];
        while let Some(v) = stack.pop() {
            if !seen.tree_nodes.insert(v.page) {
                report.problem(v.page, "a tree node reached twice");
                continue;
            }
            let bytes = match self.node_page(v.page) {
                Ok(r) => r.read(|b| b[..PAYLOAD].to_vec()),
                Err(DbError::Corrupt { page, detail }) => {
                    report.problem(page, detail);
                    continue;
                }
                Err(err) => return Err(err),
            };
            let b = &bytes[..];
            if !check_node(tree, &v, b, report) {
                continue;
            }
            let n = node::count(b);
            if node::is_leaf(b) {
                for i in 0..n {
                    let (key, value) = node::leaf_entry(b, i).expect("checked");
                    self.check_tree_entry(tree, key, value, report, seen)?;
                }
                continue;
            }
            for i in 0..n {
                let (child, count) = node::child(b, i).expect("checked");
                let lower = if i == 0 {
                    v.lower.clone()
                } else {
                    node::key(b, i).map(<[u8]>::to_vec)
                };
                let upper = node::key(b, i + 1)
                    .map(<[u8]>::to_vec)
                    .or_else(|| v.upper.clone());
                stack.push(Visit {
                    page: child,
                    level: Some(node::level(b) - 1),
                    lower,
                    upper,
                    count: Some(count),
                });
            }
        }
        Ok(())
    }

    /// A leaf entry's record: there, whole, flagged a tree record, its key the entry's, the
    /// inline value (if any) its value; counted live.
    fn check_tree_entry(
        &self,
        tree: u64,
        key: &[u8],
        value: super::tree::node::LeafValue<'_>,
        report: &mut CheckReport,
        seen: &mut Referenced,
    ) -> Result<(), DbError> {
        report.tree_entries += 1;
        let e = Entry {
            hash: 0,
            page: value.page,
            slot: value.slot,
        };
        if !seen.records.insert((e.page, e.slot)) {
            report.problem(e.page, "two entries name one record");
            return Ok(());
        }
        let (bytes, len) = match self.record_bytes(&e, usize::MAX) {
            Ok(found) => found,
            Err(DbError::Corrupt { page, detail }) => {
                report.problem(page, detail);
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        report.records += 1;
        let klen = get_u32(&bytes, 0) as usize;
        let want = super::tree::record_key(tree, key);
        if bytes[RECORD_HEADER..RECORD_HEADER + klen] != want[..]
            || get_u32(&bytes, 12) & RECORD_TREE == 0
        {
            report.problem(e.page, "a tree entry's record holds another key");
        }
        if value
            .inline
            .is_some_and(|v| v != &bytes[RECORD_HEADER + klen..])
        {
            report.problem(
                e.page,
                "a tree entry's inline value differs from its record",
            );
        }
        if e.is_extent() {
            seen.extents.insert(e.page, extent_pages(len));
        } else {
            *seen.data_live.entry(e.page).or_default() += record_span(e.offset(), len) as u32;
        }
        Ok(())
    }
}
