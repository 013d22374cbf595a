//! On-device formats. Every integer is little-endian; every page's last 8 bytes are the cache's
//! CRC-32C trailer, so a page's usable payload is [`PAYLOAD`] bytes.

pub use tamer_cache::PAGE_PAYLOAD as PAYLOAD;

pub const MAGIC: [u8; 8] = *b"TAMERKV\0";
/// Version 5: 48-bit entry tags (11-byte entries, 370 a bucket) and a directory that grows
/// past its fixed region in segments allocated from the space (so past 2^20 slots).
/// Version 4: staging queues (one ring of [`QUEUE_PAGES`] pages per queue, named by the
/// superblock, with the checkpoint's commit timestamp) and map kind [`MapKind::Queue`].
/// Version 3: two superblock copies (pages 0 and 1, written alternately, the newer valid one
/// wins) and a per-store random key for the index hash (SipHash-1-3). Version 2 brought
/// compact bucket entries (9 bytes: a 32-bit hash fragment, a 32-bit page, a 16-byte record
/// slot), 16-byte aligned records and directory slots carrying the bucket's local depth.
/// Older stores are refused with a message.
/// Version 6: ordered trees (B+-tree nodes as two-copy index pages, map kinds
/// [`MapKind::Tree`] and [`MapKind::TreeCopy`], tree records flagged in their header, the
/// catalog tree named by the superblock, deltas of tree changes).
pub const FORMAT_VERSION: u32 = 6;

/// Copies of the superblock, at pages `0..SUPERBLOCK_COPIES`.
pub const SUPERBLOCK_COPIES: u64 = 2;

pub const KIND_BUCKET: u32 = u32::from_le_bytes(*b"BUCK");
pub const KIND_DATA: u32 = u32::from_le_bytes(*b"DATA");
pub const KIND_EXTENT: u32 = u32::from_le_bytes(*b"EXTN");
pub const KIND_MAP: u32 = u32::from_le_bytes(*b"PMAP");
pub const KIND_QUEUE: u32 = u32::from_le_bytes(*b"QUEU");
pub const KIND_TREE: u32 = u32::from_le_bytes(*b"TREE");

// --- staging queues (`docs/durability.md`) ---
//
// A queue is a ring of `queue_pages` consecutive logical pages (the superblock says how many:
// QUEUE_PAGES_MAX, fewer on a small device). A queue page is
// `[kind u32 "QUEU"][queue u32]` then commit records, appended; a page is rewritten whole at
// each group commit as it fills (its earlier records' bytes unchanged, so a torn rewrite keeps
// them), and it is exempt from the page checksum: each record carries its own CRC.
// A commit record: `[magic u32 "CMIT"][bytes u32][ts u64][deltas u32][CRC-32C u32]` then
// `deltas` deltas of [`DELTA_BYTES`]: `[op u8][slot u8][0 u16][page u32][key hash u64]`.
// The CRC covers the record with its CRC field zero.

/// Pages of one staging queue: 1 MiB, or 1/64 of a small device's pages (at least
/// [`QUEUE_PAGES_MIN`]).
pub const QUEUE_PAGES_MAX: u64 = 256;
/// Fewest pages of one staging queue (64 KiB).
pub const QUEUE_PAGES_MIN: u64 = 16;
/// Queue page header: kind u32, queue number u32.
pub const QUEUE_HEADER: usize = 8;
pub const COMMIT_MAGIC: u32 = u32::from_le_bytes(*b"CMIT");
/// Commit record header: magic, bytes, ts, delta count, CRC.
pub const COMMIT_HEADER: usize = 24;
pub const DELTA_BYTES: usize = 16;
/// Deltas one commit record holds (it never spans pages): 253. A transaction with more
/// commits through a checkpoint instead (the overflow path).
pub const MAX_DELTAS: usize = (PAYLOAD - QUEUE_HEADER - COMMIT_HEADER) / DELTA_BYTES;
const _: () = assert!(MAX_DELTAS == 253);
/// Most queues a store has (one per core, up to this).
pub const MAX_QUEUES: u64 = 64;

/// A directory page: `[epoch u64]` then [`DIR_PER_PAGE`] slots. The directory has two copies
/// (regions of `D` pages each); a checkpoint writes a changed page to the copy not holding its
/// last checkpointed image, with the checkpoint's epoch, and open takes, per page, the valid
/// copy with the highest epoch not above the superblock's.
pub const DIR_HEADER: usize = 8;
/// Directory entries per directory page: (4088 - 8) / 8 = 510. Each is a u64: the bucket's
/// first page in the low 55 bits, which of the bucket's two copies holds its last checkpointed
/// image in bit 55, its local depth in the top 8 ([`dir_slot`]): a lookup knows the bucket's
/// hash pattern (its cache placement) before it reads the bucket.
pub const DIR_PER_PAGE: u64 = ((PAYLOAD - DIR_HEADER) / 8) as u64;
const _: () = assert!(DIR_PER_PAGE == 510);
/// The bit of a directory slot saying which copy of the bucket is current.
pub const DIR_COPY_BIT: u64 = 1 << 55;

/// A directory slot: bucket `page` (its first copy) at local `depth`, copy `copy` current.
pub fn dir_slot(page: u64, copy: u64, depth: u32) -> u64 {
    debug_assert!(page < DIR_COPY_BIT && copy < 2 && depth < 256);
    page | (copy * DIR_COPY_BIT) | (u64::from(depth) << 56)
}

/// The (page, local depth) of a directory slot.
pub fn dir_slot_parts(slot: u64) -> (u64, u32) {
    (slot & (DIR_COPY_BIT - 1), (slot >> 56) as u32)
}

/// Which copy of its bucket a directory slot names.
pub fn dir_slot_copy(slot: u64) -> u64 {
    u64::from(slot & DIR_COPY_BIT != 0)
}

/// Byte offset of slot `index` in its directory page.
pub fn dir_slot_offset(index: u64) -> usize {
    DIR_HEADER + (index % DIR_PER_PAGE) as usize * 8
}

/// The page of copy `copy` of directory page `i`, for a directory of `dir_pages` pages.
pub fn dir_page(dir_pages: u64, i: u64, copy: u64) -> u64 {
    debug_assert!(i < dir_pages && copy < 2);
    DIR_START + copy * dir_pages + i
}
/// First directory page.
pub const DIR_START: u64 = SUPERBLOCK_COPIES;

/// Bucket header: kind u32, local depth u16, count u16, pattern u64.
pub const BUCKET_HEADER: usize = 16;
/// Bucket entry: 11 bytes, kept as three arrays so a lookup scans 4-byte tags contiguously:
/// the key hash's bits 16..48 (u32, at `BUCKET_HEADER + 4 i`), its bits 0..16 (u16, at
/// [`BUCKET_TAGS_LOW`]` + 2 i`), then the record's place (page u32 + slot u8, at
/// [`BUCKET_LOCS`]` + 5 i`). The low 48 bits of the hash are the entry's tag
/// ([`TAG_BITS`]): a split reads the bit it splits on from the tag, and the bits above a
/// bucket's depth filter lookups.
pub const ENTRY: usize = 11;
/// Entries per bucket: (4088 - 16) / 11 = 370.
pub const BUCKET_CAP: usize = (PAYLOAD - BUCKET_HEADER) / ENTRY;
/// Where a bucket's array of low tag bits starts.
pub const BUCKET_TAGS_LOW: usize = BUCKET_HEADER + 4 * BUCKET_CAP;
/// Where a bucket's array of places starts.
pub const BUCKET_LOCS: usize = BUCKET_TAGS_LOW + 2 * BUCKET_CAP;
const _: () = assert!(BUCKET_LOCS + 5 * BUCKET_CAP <= PAYLOAD);
const _: () = assert!(BUCKET_CAP == 370);
/// Bits of the key hash an entry keeps (its tag): the directory's depth stays below this, so
/// a split always finds its bit in the tag, with at least `TAG_BITS - depth` bits left to
/// tell keys apart.
pub const TAG_BITS: u32 = 48;
const _: () = assert!(crate::MAX_DIRECTORY_DEPTH + 16 <= TAG_BITS);

/// An entry's tag: the low [`TAG_BITS`] bits of a key hash.
pub fn tag(hash: u64) -> u64 {
    hash & ((1u64 << TAG_BITS) - 1)
}

/// Largest page number + 1: an entry names its page in 32 bits, so a store file holds at
/// most 2^32 pages (16 TiB).
pub const MAX_PAGES: u64 = 1 << 32;

/// Data page header: kind u32, live bytes u32, written bytes u32, closed-at u32.
pub const DATA_HEADER: usize = 16;
/// `closed_at` of a page still open for appends.
pub const OPEN: u32 = u32::MAX;
/// Record header: key length u32, value length u32, CRC-32C of key ‖ value u32, reserved u32.
pub const RECORD_HEADER: usize = 16;
/// Records in data pages start at multiples of this many bytes, so that an entry names its
/// record by a one-byte slot (offset / 16; slot 0 = an extent, as no record starts at 0).
pub const RECORD_ALIGN: usize = 16;
const _: () = assert!(DATA_HEADER.is_multiple_of(RECORD_ALIGN) && PAYLOAD / RECORD_ALIGN < 256);

/// The bytes a record of `len` bytes at `offset` of a data page takes there, padding to the
/// next record's alignment included (the page's end needs no padding).
pub fn record_span(offset: usize, len: usize) -> usize {
    debug_assert!(offset.is_multiple_of(RECORD_ALIGN) && offset + len <= PAYLOAD);
    (offset + len).next_multiple_of(RECORD_ALIGN).min(PAYLOAD) - offset
}
/// Largest record stored in a shared data page; larger ones get their own extent.
pub const MAX_SMALL_RECORD: usize = PAYLOAD - DATA_HEADER;
/// An extent's stream starts with kind u32 + reserved u32; the record follows.
pub const EXTENT_HEADER: usize = 8;

// --- the space region and its page map ---
//
// Past the directory, the file is a sequence of *groups*: [map copy 0][map copy 1] then
// MAP_ENTRIES managed pages. A managed page has a *logical* number (managed pages counted
// from 0, map pages skipped) used by the allocator and extents, and its physical page
// number, used everywhere else (entries, the cache, the device). The map page of a group says
// of each of its pages whether it is free, and a data page's live bytes; it replaces a free
// list written at close, so the allocator's state is on the device at all times.
// Copy 1 is reserved for the checkpoints that alternate copies.

// --- ordered trees ---
//
// A tree is a B+-tree whose nodes are two-copy index pages (as buckets: changed only in
// DRAM, written to their other copy by a checkpoint); which copy is current is the low bit
// of the first page's map entry ([`tree_map_entry`]), so open learns it from the map it reads
// anyway. A tree is named by its root's physical page, which never moves (a root split moves
// the root's entries into two new children). A node: `[kind u32 "TREE"][level u8 (0: leaf)]
// [0 u8][count u16][tree u64 (the root's page)][heap u16][garbage u16][0 u32][0 u64]`, then
// `count` u16 offsets of its entries in key order, then free space, then the entries' heap
// up to the payload's end. A leaf entry: `[key len u16][inline len u16][record page u32]
// [record slot u8][key][inline value]` (inline len [`INLINE_NONE`]: the value is only in the
// record). An inner entry: `[key len u16][child page u32][entries below it u64][key]`, the
// first entry's key empty (it covers everything below the second's key).
// Every tree entry's value lives in a record (as a hash entry's does), whose key is
// `[tree u64 big-endian][key]` and whose header's flags say [`RECORD_TREE`]: recovery redoes
// a tree change from the record its delta names, as it redoes a put.

/// Tree node header bytes.
pub const NODE_HEADER: usize = 32;
/// Leaf entry header: key len u16, inline len u16, record page u32, record slot u8.
pub const LEAF_ENTRY_HEADER: usize = 9;
/// Inner entry header: key len u16, child page u32, count u64.
pub const INNER_ENTRY_HEADER: usize = 14;
/// An inline length saying the value is not inline.
pub const INLINE_NONE: u16 = u16::MAX;
/// Largest value kept inline in a leaf (larger ones are read from their record).
pub const INLINE_MAX: usize = 128;
/// Largest tree key: a node holds at least three entries of the largest size, so a split
/// always leaves two non-empty halves with room for the entry that caused it.
pub const MAX_TREE_KEY: usize = 1024;
const _: () = assert!(
    NODE_HEADER + 3 * (2 + LEAF_ENTRY_HEADER + MAX_TREE_KEY + INLINE_MAX) <= PAYLOAD
        && NODE_HEADER + 3 * (2 + INNER_ENTRY_HEADER + MAX_TREE_KEY) <= PAYLOAD
);
/// Most entries a node can hold (every entry takes its offset and a header).
pub const NODE_ENTRIES_MAX: usize = (PAYLOAD - NODE_HEADER) / (2 + LEAF_ENTRY_HEADER);
/// Most levels a tree may have (a deeper one is damaged: with three entries a node at
/// least, 40 levels hold more than 2^63 entries).
pub const TREE_LEVELS_MAX: usize = 40;
/// A record header flag: the record is a tree entry's.
pub const RECORD_TREE: u32 = 1;

/// Copies of each group's map page.
pub const MAP_COPIES: u64 = 2;
/// Map page: kind u32 "PMAP", group u32, epoch u64, then one u32 entry per managed page.
pub const MAP_HEADER: usize = 16;
/// Managed pages per group: (4088 - 16) / 4 = 1018.
pub const MAP_ENTRIES: u64 = ((PAYLOAD - MAP_HEADER) / 4) as u64;
/// Physical pages per group.
pub const GROUP_PAGES: u64 = MAP_COPIES + MAP_ENTRIES;
const _: () = assert!(MAP_ENTRIES == 1018 && MAP_HEADER + 4 * MAP_ENTRIES as usize <= PAYLOAD);

/// A map entry's kind (top 4 bits); the low 16 bits hold a data page's live bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    Free = 0,
    Bucket = 1,
    Data = 2,
    /// The first page of an extent.
    ExtentHead = 3,
    /// Any later page of an extent.
    ExtentTail = 4,
    /// A bucket's second copy (the page after its first, [`MapKind::Bucket`]).
    BucketCopy = 5,
    /// A page of a staging queue.
    Queue = 6,
    /// A page of a directory segment (both copies of each of its pages).
    Directory = 7,
    /// A tree node's first copy; the entry's lowest bit says which copy is current
    /// ([`tree_map_entry`]).
    Tree = 8,
    /// A tree node's second copy (the page after its first).
    TreeCopy = 9,
}

impl MapKind {
    pub fn of(entry: u32) -> Option<MapKind> {
        Some(match entry >> 28 {
            0 => MapKind::Free,
            1 => MapKind::Bucket,
            2 => MapKind::Data,
            3 => MapKind::ExtentHead,
            4 => MapKind::ExtentTail,
            5 => MapKind::BucketCopy,
            6 => MapKind::Queue,
            7 => MapKind::Directory,
            8 => MapKind::Tree,
            9 => MapKind::TreeCopy,
            _ => return None,
        })
    }
}

/// A map entry of `kind` with `live` bytes.
pub fn map_entry(kind: MapKind, live: u32) -> u32 {
    debug_assert!(live <= PAYLOAD as u32 && (live == 0 || kind == MapKind::Data));
    (kind as u32) << 28 | live
}

/// The map entry of a tree node's first page whose current copy is `copy`.
pub fn tree_map_entry(copy: u64) -> u32 {
    debug_assert!(copy < 2);
    (MapKind::Tree as u32) << 28 | copy as u32
}

/// The live bytes of a map entry.
pub fn map_live(entry: u32) -> u32 {
    entry & 0xffff
}

/// First page of the space region (the first group's map copy 0), after the superblocks and
/// the two copies of a directory of `dir_pages` pages.
pub fn space_start(dir_pages: u64) -> u64 {
    DIR_START + 2 * dir_pages
}

/// The physical page of logical page `l`.
pub fn physical(space_start: u64, l: u64) -> u64 {
    space_start + (l / MAP_ENTRIES) * GROUP_PAGES + MAP_COPIES + l % MAP_ENTRIES
}

/// The logical page of physical page `p`, `None` for a page outside the managed pages (a
/// superblock, the directory, a map page).
pub fn logical(space_start: u64, p: u64) -> Option<u64> {
    let offset = p.checked_sub(space_start)?;
    let (group, at) = (offset / GROUP_PAGES, offset % GROUP_PAGES);
    (at >= MAP_COPIES).then(|| group * MAP_ENTRIES + at - MAP_COPIES)
}

/// The physical page of copy `copy` of group `group`'s map page.
pub fn map_page(space_start: u64, group: u64, copy: u64) -> u64 {
    debug_assert!(copy < MAP_COPIES);
    space_start + group * GROUP_PAGES + copy
}

/// Managed pages whose physical page is below `end` (the file's size in pages).
pub fn logical_below(space_start: u64, end: u64) -> u64 {
    let offset = end.saturating_sub(space_start);
    let (group, at) = (offset / GROUP_PAGES, offset % GROUP_PAGES);
    group * MAP_ENTRIES + at.saturating_sub(MAP_COPIES)
}

pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Pages of one copy of a directory of 2^`depth` slots (the fixed region holds
/// 2^`fixed_depth` slots).
pub fn dir_pages(depth: u32) -> u64 {
    (1u64 << depth).div_ceil(DIR_PER_PAGE)
}

// --- the directory past its fixed region ---
//
// The directory's first 2^fixed_depth slots live in the fixed region (pages 2.., two copies,
// pinned in DRAM). Past it, doubling from depth d to d + 1 (d >= fixed_depth) allocates
// segment s = d - fixed_depth from the space: `dir_pages(d)` directory pages holding slots
// 2^d..2^(d+1), each as two consecutive logical pages (its copies, map kind
// [`MapKind::Directory`]); the superblock names each segment's first logical page. A segment
// page has the fixed region's format (`[epoch u64]` then 510 slots) and is an index page
// like a bucket: changed only in DRAM, written to its other copy by a checkpoint, chosen at
// open by epoch.

/// Where a directory slot lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirPlace {
    /// Page `i` of the fixed region.
    Fixed(u64),
    /// Page `k` of segment `s`.
    Segment { s: u32, k: u64 },
}

/// Directory slot `index`'s page and its offset in that page, for a fixed region of
/// 2^`fixed_depth` slots.
pub fn dir_place(fixed_depth: u32, index: u64) -> (DirPlace, usize) {
    if index < 1u64 << fixed_depth {
        return (
            DirPlace::Fixed(index / DIR_PER_PAGE),
            dir_slot_offset(index),
        );
    }
    // index is in 2^d..2^(d+1) for d = its highest bit: segment d - fixed_depth.
    let d = 63 - index.leading_zeros();
    let within = index - (1u64 << d);
    let place = DirPlace::Segment {
        s: d - fixed_depth,
        k: within / DIR_PER_PAGE,
    };
    (place, dir_slot_offset(within))
}

/// Directory pages of segment `s` (one copy), for a fixed region of 2^`fixed_depth` slots.
pub fn segment_pages(fixed_depth: u32, s: u32) -> u64 {
    dir_pages(fixed_depth + s)
}

/// The logical page of copy `copy` of page `k` of the segment starting at logical `first`.
pub fn segment_page(first: u64, k: u64, copy: u64) -> u64 {
    debug_assert!(copy < 2);
    first + 2 * k + copy
}

/// Where the superblock lists the directory segments (u64 each, at most [`MAX_SEGMENTS`]).
const SEGMENTS_AT: usize = 128;
/// Most directory segments: one per depth past the fixed region.
pub const MAX_SEGMENTS: usize = crate::MAX_DIRECTORY_DEPTH as usize;
const _: () = assert!(SEGMENTS_AT + 8 * MAX_SEGMENTS <= STRIPE_AT);
/// Where the superblock keeps the stripe: parts u32, then (at + 8) the unit u64.
const STRIPE_AT: usize = 376;
/// Where the superblock names the catalog tree's root.
const CATALOG_AT: usize = STRIPE_AT + 16;
const _: () = assert!(CATALOG_AT + 8 <= PAYLOAD);

/// The superblock (pages 0 and 1: each write goes to the copy not holding the newest, with
/// the next sequence number, so a torn write leaves the other copy intact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Incremented by every superblock write; the valid copy with the higher one is current.
    pub sequence: u64,
    /// The last checkpoint: index pages (directory and map pages) with a higher epoch on the
    /// device are from a checkpoint that did not complete and are ignored.
    pub epoch: u64,
    /// The index hash's key, chosen at random when the store is created (so that keys crafted
    /// to collide cannot be computed without it).
    pub hash_key: [u64; 2],
    pub max_depth: u32,
    pub global_depth: u32,
    /// Depth of the directory's fixed region (at most `max_depth`): 2^fixed_depth slots.
    pub fixed_depth: u32,
    /// The directory segments allocated so far (first logical page each): segment `s` holds
    /// slots 2^(fixed_depth+s)..2^(fixed_depth+s+1). At least `global_depth - fixed_depth`.
    pub dir_segments: Vec<u64>,
    /// Parts the store is striped over (1: one file or device) and the stripe unit in pages
    /// (1 for one part).
    pub stripe_parts: u32,
    pub stripe_unit: u64,
    /// 1 when the store was closed cleanly (the free list and high-water mark are current).
    pub clean: bool,
    /// First logical page never allocated (the high-water mark).
    pub next_page: u64,
    pub key_count: u64,
    pub max_value_bytes: u64,
    /// Every transaction with a commit timestamp up to this one is in the checkpoint; the
    /// queues' records above it are redone at open.
    pub commit_ts: u64,
    /// The staging queues: the logical page of the first (the others follow, `queue_pages`
    /// each), and how many.
    pub queue_first: u64,
    pub queues: u32,
    pub queue_pages: u32,
    /// The catalog tree's root (named trees: name → tree), made with the store.
    pub catalog: u64,
}

impl Superblock {
    pub fn encode(&self, b: &mut [u8]) {
        b[..PAYLOAD].fill(0);
        b[0..8].copy_from_slice(&MAGIC);
        put_u32(b, 8, FORMAT_VERSION);
        put_u32(b, 12, tamer_cache::PAGE_SIZE as u32);
        put_u32(b, 16, self.max_depth);
        put_u32(b, 20, self.global_depth);
        put_u32(b, 24, dir_pages(self.fixed_depth) as u32);
        put_u32(b, 28, u32::from(self.clean));
        put_u64(b, 32, self.next_page);
        put_u64(b, 48, self.key_count);
        put_u64(b, 56, self.max_value_bytes);
        put_u64(b, 64, self.sequence);
        put_u64(b, 72, self.hash_key[0]);
        put_u64(b, 80, self.hash_key[1]);
        put_u64(b, 88, self.epoch);
        put_u64(b, 96, self.commit_ts);
        put_u64(b, 104, self.queue_first);
        put_u32(b, 112, self.queues);
        put_u32(b, 116, self.queue_pages);
        put_u32(b, 120, self.fixed_depth);
        assert!(
            self.dir_segments.len() <= MAX_SEGMENTS,
            "segments fit the superblock"
        );
        put_u32(b, 124, self.dir_segments.len() as u32);
        for (s, &first) in self.dir_segments.iter().enumerate() {
            put_u64(b, SEGMENTS_AT + 8 * s, first);
        }
        put_u32(b, STRIPE_AT, self.stripe_parts);
        put_u64(b, STRIPE_AT + 8, self.stripe_unit);
        put_u64(b, CATALOG_AT, self.catalog);
    }

    /// `None` for an all-zero page (a new store); an error for anything else but a superblock.
    pub fn decode(b: &[u8]) -> Result<Option<Self>, String> {
        if b[..PAYLOAD].iter().all(|&x| x == 0) {
            return Ok(None);
        }
        if b[0..8] != MAGIC {
            return Err("not a tamer store (bad magic in page 0)".into());
        }
        let version = get_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            ));
        }
        if get_u32(b, 12) as usize != tamer_cache::PAGE_SIZE {
            return Err(format!("page size {}", get_u32(b, 12)));
        }
        let sb = Self {
            max_depth: get_u32(b, 16),
            global_depth: get_u32(b, 20),
            clean: get_u32(b, 28) == 1,
            next_page: get_u64(b, 32),
            key_count: get_u64(b, 48),
            max_value_bytes: get_u64(b, 56),
            sequence: get_u64(b, 64),
            hash_key: [get_u64(b, 72), get_u64(b, 80)],
            epoch: get_u64(b, 88),
            commit_ts: get_u64(b, 96),
            queue_first: get_u64(b, 104),
            queues: get_u32(b, 112),
            queue_pages: get_u32(b, 116),
            fixed_depth: get_u32(b, 120),
            dir_segments: Vec::new(),
            stripe_parts: get_u32(b, STRIPE_AT),
            stripe_unit: get_u64(b, STRIPE_AT + 8),
            catalog: get_u64(b, CATALOG_AT),
        };
        if sb.stripe_parts == 0 || sb.stripe_unit == 0 {
            return Err(format!(
                "striped over {} parts in units of {} pages",
                sb.stripe_parts, sb.stripe_unit
            ));
        }
        let segments = get_u32(b, 124) as usize;
        if segments > MAX_SEGMENTS {
            return Err(format!("{segments} directory segments"));
        }
        let mut sb = sb;
        sb.dir_segments = (0..segments)
            .map(|s| get_u64(b, SEGMENTS_AT + 8 * s))
            .collect();
        if u64::from(sb.queues) > MAX_QUEUES
            || !(QUEUE_PAGES_MIN..=QUEUE_PAGES_MAX).contains(&u64::from(sb.queue_pages))
        {
            return Err(format!(
                "{} staging queues of {} pages",
                sb.queues, sb.queue_pages
            ));
        }
        if sb.max_depth > crate::MAX_DIRECTORY_DEPTH
            || sb.global_depth > sb.max_depth
            || sb.fixed_depth > sb.max_depth
            || sb.fixed_depth + segments as u32 > sb.max_depth
            || sb.global_depth > sb.fixed_depth + segments as u32
        {
            return Err(format!(
                "bad directory depths: global {}, fixed {}, {segments} segments, max {}",
                sb.global_depth, sb.fixed_depth, sb.max_depth
            ));
        }
        Ok(Some(sb))
    }
}

/// One bucket entry: which record, and the hash fragment that filters lookups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The low 32 bits of the key's hash (the directory uses the low `depth` of them, so a
    /// split can redistribute entries without reading their records, up to depth 32; the
    /// bits above a bucket's depth filter candidates: a lookup reads a record whose key is
    /// not its own with probability ≈ entries × 2^-(48 - depth)).
    pub hash: u64,
    /// The record's data page, or its extent's first page.
    pub page: u64,
    /// Offset / [`RECORD_ALIGN`] in the data page; 0 for an extent.
    pub slot: u8,
}

impl Entry {
    /// An entry for a record at `offset` of data page `page` (`offset` 0: an extent).
    pub fn new(hash: u64, page: u64, offset: usize) -> Self {
        debug_assert!(page < MAX_PAGES, "page {page} beyond 2^32");
        debug_assert!(offset.is_multiple_of(RECORD_ALIGN) && offset < PAYLOAD);
        Self {
            hash: tag(hash),
            page,
            slot: (offset / RECORD_ALIGN) as u8,
        }
    }

    pub fn read(b: &[u8], i: usize) -> Self {
        debug_assert!(i < BUCKET_CAP);
        let loc = BUCKET_LOCS + 5 * i;
        Self {
            hash: u64::from(get_u32(b, BUCKET_HEADER + 4 * i)) << 16
                | u64::from(get_u16(b, BUCKET_TAGS_LOW + 2 * i)),
            page: u64::from(get_u32(b, loc)),
            slot: b[loc + 4],
        }
    }

    pub fn write(&self, b: &mut [u8], i: usize) {
        debug_assert!(i < BUCKET_CAP);
        let loc = BUCKET_LOCS + 5 * i;
        debug_assert_eq!(self.hash, tag(self.hash), "an entry keeps a tag");
        put_u32(b, BUCKET_HEADER + 4 * i, (self.hash >> 16) as u32);
        put_u16(b, BUCKET_TAGS_LOW + 2 * i, self.hash as u16);
        put_u32(b, loc, self.page as u32);
        b[loc + 4] = self.slot;
    }

    /// Clears entry `i` (a removed last entry).
    pub fn clear(b: &mut [u8], i: usize) {
        Entry {
            hash: 0,
            page: 0,
            slot: 0,
        }
        .write(b, i);
    }

    /// True when the record has its own extent of consecutive pages.
    pub fn is_extent(&self) -> bool {
        self.slot == 0
    }

    /// Byte offset of the record in its data page (meaningless for an extent).
    pub fn offset(&self) -> usize {
        usize::from(self.slot) * RECORD_ALIGN
    }
}

/// The first entry of bucket `b` (of `count` entries) whose tag is `hash`'s, from entry
/// `from` on: the high 32 bits of the tag are scanned, the low 16 checked on a match.
pub fn next_hash_match(b: &[u8], count: usize, hash: u64, from: usize) -> Option<usize> {
    /// Entries whose high tags one step compares (a branch-free loop the compiler widens).
    const STEP: usize = 16;
    let (high, low) = ((tag(hash) >> 16) as u32, hash as u16);
    let end = count.min(BUCKET_CAP);
    if from >= end {
        return None;
    }
    let highs = &b[BUCKET_HEADER + 4 * from..BUCKET_HEADER + 4 * end];
    for (step, words) in highs.chunks(4 * STEP).enumerate() {
        let mut mask = 0u32;
        for (j, word) in words.chunks_exact(4).enumerate() {
            let same = u32::from_le_bytes(word.try_into().expect("4 bytes")) == high;
            mask |= u32::from(same) << j;
        }
        while mask != 0 {
            let i = from + step * STEP + mask.trailing_zeros() as usize;
            if get_u16(b, BUCKET_TAGS_LOW + 2 * i) == low {
                return Some(i);
            }
            mask &= mask - 1;
        }
    }
    None
}

/// Pages of an extent holding a record of `len` bytes.
pub fn extent_pages(len: usize) -> u64 {
    (EXTENT_HEADER + len).div_ceil(PAYLOAD) as u64
}

/// Bucket header accessors.
pub fn bucket_depth(b: &[u8]) -> u32 {
    u32::from(get_u16(b, 4))
}
/// Entries in a bucket page, never more than fit (a corrupted count is clamped; the entries'
/// own checks then catch the damage).
pub fn bucket_count(b: &[u8]) -> usize {
    (get_u16(b, 6) as usize).min(BUCKET_CAP)
}
pub fn bucket_pattern(b: &[u8]) -> u64 {
    get_u64(b, 8)
}
pub fn init_bucket(b: &mut [u8], depth: u32, pattern: u64) {
    b[..PAYLOAD].fill(0);
    put_u32(b, 0, KIND_BUCKET);
    put_u16(b, 4, depth as u16);
    put_u16(b, 6, 0);
    put_u64(b, 8, pattern);
}
pub fn set_bucket_count(b: &mut [u8], count: usize) {
    put_u16(b, 6, count as u16);
}

/// True when the bucket page `b` is the bucket for `hash`.
pub fn bucket_covers(b: &[u8], hash: u64) -> bool {
    if get_u32(b, 0) != KIND_BUCKET {
        return false;
    }
    let depth = bucket_depth(b);
    // A corrupted depth of 64 or more must not overflow the shift.
    let mask = 1u64.checked_shl(depth).map_or(u64::MAX, |bit| bit - 1);
    hash & mask == bucket_pattern(b)
}

/// The index's hash of `key`: SipHash-1-3 keyed by the store's 128-bit `hash_key`. Without
/// the key nobody can compute which keys share a bucket, so a client cannot fill one bucket
/// (at the maximum depth, 452 entries) and make every later put to it fail.
pub fn key_hash(hash_key: [u64; 2], key: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher13::new_with_keys(hash_key[0], hash_key[1]);
    hasher.write(key);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logical and physical numbering are inverse, skip exactly the map pages, and stay in
    /// order. Catches an off-by-one at a group's edge.
    #[test]
    fn logical_and_physical_pages_round_trip_across_groups() {
        let start = 11;
        let mut last = None;
        for l in 0..3 * MAP_ENTRIES + 5 {
            let p = physical(start, l);
            assert_eq!(logical(start, p), Some(l), "logical {l} -> physical {p}");
            assert!(last.is_none_or(|q| p > q), "physical pages increase");
            assert_eq!(logical_below(start, p), l, "pages below {p}");
            assert_eq!(logical_below(start, p + 1), l + 1);
            last = Some(p);
        }
        for group in 0..3 {
            for copy in 0..MAP_COPIES {
                assert_eq!(logical(start, map_page(start, group, copy)), None);
            }
        }
        assert_eq!(
            physical(start, MAP_ENTRIES),
            start + GROUP_PAGES + MAP_COPIES
        );
        assert_eq!(logical(start, start - 1), None);
    }

    /// An entry keeps the hash's low 48 bits and a lookup compares all of them. Catches a tag
    /// cut to 32 bits (the hashes differing in bits 32..48 would match), the low array ignored
    /// (bits 0..16), bits above 48 compared, and the arrays overlapping.
    #[test]
    fn entries_keep_48_bit_tags_and_lookups_compare_them_all() {
        let mut b = vec![0u8; PAYLOAD];
        let base = 0xdead_beef_cafe_f00d_u64;
        let hashes = [
            base,
            base ^ 1 << 40,
            base ^ 1 << 3,
            base ^ 1 << 20,
            base ^ 1 << 60,
        ];
        for (i, &h) in hashes.iter().enumerate() {
            Entry::new(h, 1000 + i as u64, 16 * (i + 1)).write(&mut b, i);
        }
        Entry::new(u64::MAX, u32::MAX as u64, 16 * 255).write(&mut b, BUCKET_CAP - 1);
        for (i, &h) in hashes.iter().enumerate() {
            let e = Entry::read(&b, i);
            assert_eq!(
                (e.hash, e.page, e.offset()),
                (tag(h), 1000 + i as u64, 16 * (i + 1))
            );
        }
        assert_eq!(Entry::read(&b, BUCKET_CAP - 1).hash, (1 << TAG_BITS) - 1);
        // The last hash differs from the first only above the tag: it is a match.
        assert_eq!(next_hash_match(&b, hashes.len(), base, 0), Some(0));
        assert_eq!(next_hash_match(&b, hashes.len(), base, 1), Some(4));
        for (i, &h) in hashes.iter().enumerate().take(4).skip(1) {
            assert_eq!(next_hash_match(&b, hashes.len(), h, 0), Some(i), "hash {i}");
        }
        assert_eq!(next_hash_match(&b, hashes.len(), base ^ 1 << 47, 0), None);
    }

    /// The chunked scan finds what a plain scan finds, from every start, in buckets full of
    /// entries sharing high or low tag bits. Catches a step's offset lost (a match in the
    /// second step reported as in the first), a match past `count`, a start ignored, the low
    /// bits not compared after a high match, a step's last entry dropped.
    #[test]
    fn bucket_scan_matches_a_plain_scan() {
        let seed = 0x5eed_2025_u64;
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        for round in 0..200 {
            let mut b = vec![0u8; PAYLOAD];
            let count = (next() as usize % (BUCKET_CAP + 1)).max(1);
            // Few distinct tags: many entries share high bits, low bits or both.
            let pool: Vec<u64> = (0..4).map(|_| next()).collect();
            let pick = |x: u64| pool[(x % 4) as usize] ^ ((x >> 8) % 3) << 2;
            for i in 0..BUCKET_CAP {
                Entry::new(pick(next()), 7, 16).write(&mut b, i);
            }
            for probe in 0..8 {
                let hash = pick(next());
                let from = next() as usize % (count + 2);
                let plain = (from..count).find(|&i| {
                    get_u32(&b, BUCKET_HEADER + 4 * i) == (tag(hash) >> 16) as u32
                        && get_u16(&b, BUCKET_TAGS_LOW + 2 * i) == hash as u16
                });
                assert_eq!(
                    next_hash_match(&b, count, hash, from),
                    plain,
                    "seed {seed:#x} round {round} probe {probe} count {count} from {from}"
                );
            }
        }
    }

    /// Every slot of a directory of depth 12 past fixed regions of depth 0, 1, 4 and 12 has
    /// its own (page, offset); a segment holds exactly the slots its doubling adds, in
    /// `segment_pages` pages. Catches an offset taken from the slot index instead of its
    /// place in the segment, a segment numbered from the wrong depth, an off-by-one at a
    /// segment's first slot.
    #[test]
    fn every_directory_slot_has_its_own_place() {
        for fixed in [0, 1, 4, 12] {
            let mut seen = std::collections::HashSet::new();
            for index in 0..1u64 << 12 {
                let (place, at) = dir_place(fixed, index);
                assert!((DIR_HEADER..DIR_HEADER + 8 * DIR_PER_PAGE as usize).contains(&at));
                assert!(
                    seen.insert((place, at)),
                    "fixed {fixed}: slot {index} shares a place"
                );
                match place {
                    DirPlace::Fixed(i) => {
                        assert!(index < 1 << fixed && i < dir_pages(fixed));
                    }
                    DirPlace::Segment { s, k } => {
                        let depth = fixed + s;
                        assert!((1u64 << depth..1u64 << (depth + 1)).contains(&index));
                        assert!(k < segment_pages(fixed, s), "fixed {fixed} slot {index}");
                    }
                }
            }
            assert_eq!(
                dir_place(fixed, 1 << fixed).0,
                DirPlace::Segment { s: 0, k: 0 }
            );
        }
        assert_eq!(segment_page(100, 3, 1), 107);
    }

    #[test]
    fn map_entries_keep_kind_and_live_bytes() {
        let e = map_entry(MapKind::Data, 4000);
        assert_eq!((MapKind::of(e), map_live(e)), (Some(MapKind::Data), 4000));
        assert_eq!(
            MapKind::of(map_entry(MapKind::ExtentTail, 0)),
            Some(MapKind::ExtentTail)
        );
        assert_eq!(MapKind::of(0xf000_0000), None);
    }
}
