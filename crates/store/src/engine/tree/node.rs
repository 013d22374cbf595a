//! A tree node's page (`layout`, "ordered trees") as pure functions on its bytes.
//!
//! Reads never panic, whatever the bytes: an optimistic reader may see a page in the middle of
//! a change (and discards what it computed when the latch's version moved), and a damaged page
//! must give an error, not a crash. So every read returns `None` for anything out of place.
//! Edits run under the exclusive latch on a node whose shape was checked; they assert what
//! they rely on.
//!
//! Invariants of a well-formed node: `count` offsets follow the header, each names an entry
//! inside the heap (`heap..PAYLOAD`), entries never overlap, keys are strictly increasing
//! (an inner node's first key is empty and covers everything below the second), and
//! `garbage` counts the heap bytes no offset names.

use crate::layout::*;

/// Where a node's fields are.
const LEVEL_AT: usize = 4;
const COUNT_AT: usize = 6;
const TREE_AT: usize = 8;
const HEAP_AT: usize = 16;
const GARBAGE_AT: usize = 18;

/// A leaf entry's value: its record's place and, when small, the value itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeafValue<'a> {
    pub page: u64,
    pub slot: u8,
    pub inline: Option<&'a [u8]>,
}

/// What [`leaf_put`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeafPut {
    Inserted,
    /// The key was there; its entry named this record.
    Replaced {
        page: u64,
        slot: u8,
    },
    /// The entry does not fit: the leaf must split first.
    NoRoom,
}

/// Initializes a node of `level` (0: a leaf) of `tree`, empty.
pub(crate) fn init(b: &mut [u8], level: u8, tree: u64) {
    b[..PAYLOAD].fill(0);
    put_u32(b, 0, KIND_TREE);
    b[LEVEL_AT] = level;
    put_u16(b, COUNT_AT, 0);
    put_u64(b, TREE_AT, tree);
    put_u16(b, HEAP_AT, PAYLOAD as u16);
    put_u16(b, GARBAGE_AT, 0);
}

pub(crate) fn is_node(b: &[u8]) -> bool {
    get_u32(b, 0) == KIND_TREE
}

pub(crate) fn level(b: &[u8]) -> u8 {
    b[LEVEL_AT]
}

pub(crate) fn is_leaf(b: &[u8]) -> bool {
    level(b) == 0
}

/// Entries in the node (as stored: callers that index check against [`NODE_ENTRIES_MAX`]).
pub(crate) fn count(b: &[u8]) -> usize {
    usize::from(get_u16(b, COUNT_AT))
}

/// The tree (its root's page) the node belongs to.
pub(crate) fn tree(b: &[u8]) -> u64 {
    get_u64(b, TREE_AT)
}

fn heap(b: &[u8]) -> usize {
    usize::from(get_u16(b, HEAP_AT))
}

fn garbage(b: &[u8]) -> usize {
    usize::from(get_u16(b, GARBAGE_AT))
}

/// Bytes the node uses: header, offsets and live entries.
pub(crate) fn used(b: &[u8]) -> usize {
    (NODE_HEADER + 2 * count(b) + PAYLOAD.saturating_sub(heap(b))).saturating_sub(garbage(b))
}

/// Bytes an entry could still take (with its offset).
pub(crate) fn free(b: &[u8]) -> usize {
    PAYLOAD.saturating_sub(used(b))
}

fn header_len(leaf: bool) -> usize {
    if leaf {
        LEAF_ENTRY_HEADER
    } else {
        INNER_ENTRY_HEADER
    }
}

/// Entry `i`'s offset and length, checked to lie in the heap.
fn entry_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if i >= count(b) || i >= NODE_ENTRIES_MAX {
        return None;
    }
    let off = usize::from(get_u16(b, NODE_HEADER + 2 * i));
    let leaf = is_leaf(b);
    let h = header_len(leaf);
    if off < heap(b).max(NODE_HEADER) || off + h > PAYLOAD {
        return None;
    }
    let klen = usize::from(get_u16(b, off));
    let vlen = if leaf {
        match get_u16(b, off + 2) {
            INLINE_NONE => 0,
            n => usize::from(n),
        }
    } else {
        0
    };
    let len = h + klen + vlen;
    (klen <= MAX_TREE_KEY && vlen <= INLINE_MAX && off + len <= PAYLOAD).then_some((off, len))
}

/// Entry `i`'s raw bytes (header, key, inline value).
pub(crate) fn raw(b: &[u8], i: usize) -> Option<&[u8]> {
    let (off, len) = entry_at(b, i)?;
    b.get(off..off + len)
}

/// Entry `i`'s key.
pub(crate) fn key(b: &[u8], i: usize) -> Option<&[u8]> {
    let (off, _) = entry_at(b, i)?;
    let klen = usize::from(get_u16(b, off));
    let h = header_len(is_leaf(b));
    b.get(off + h..off + h + klen)
}

/// Leaf entry `i`: its key and value.
pub(crate) fn leaf_entry(b: &[u8], i: usize) -> Option<(&[u8], LeafValue<'_>)> {
    if !is_leaf(b) {
        return None;
    }
    let (off, len) = entry_at(b, i)?;
    let klen = usize::from(get_u16(b, off));
    let start = off + LEAF_ENTRY_HEADER;
    let inline = match get_u16(b, off + 2) {
        INLINE_NONE => None,
        _ => Some(b.get(start + klen..off + len)?),
    };
    let value = LeafValue {
        page: u64::from(get_u32(b, off + 4)),
        slot: b[off + 8],
        inline,
    };
    Some((b.get(start..start + klen)?, value))
}

/// Inner entry `i`: its child's page and the entries below it.
pub(crate) fn child(b: &[u8], i: usize) -> Option<(u64, u64)> {
    if is_leaf(b) {
        return None;
    }
    let (off, _) = entry_at(b, i)?;
    Some((u64::from(get_u32(b, off + 2)), get_u64(b, off + 6)))
}

/// The entries below an inner node (its children's counts summed), or a leaf's count.
pub(crate) fn total(b: &[u8]) -> Option<u64> {
    let n = count(b);
    if n > NODE_ENTRIES_MAX {
        return None;
    }
    if is_leaf(b) {
        return Some(n as u64);
    }
    (0..n).try_fold(0u64, |sum, i| sum.checked_add(child(b, i)?.1))
}

/// In a leaf: `Ok(i)` when entry `i`'s key is `key`, `Err(i)` where it would go.
pub(crate) fn search(b: &[u8], key: &[u8]) -> Option<Result<usize, usize>> {
    let n = count(b);
    if n > NODE_ENTRIES_MAX {
        return None;
    }
    let (mut lo, mut hi) = (0, n);
    // Bounded: the range halves each step.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match self::key(b, mid)?.cmp(key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(Ok(mid)),
        }
    }
    Some(Err(lo))
}

/// In an inner node: the entry whose child covers `key` (the last whose key is at most
/// `key`; the first covers everything below the second's).
pub(crate) fn child_for(b: &[u8], key: &[u8]) -> Option<usize> {
    let n = count(b);
    if n == 0 || n > NODE_ENTRIES_MAX || is_leaf(b) {
        return None;
    }
    // The first entry in 1..n whose key is above `key`; the one before it covers `key`.
    let (mut lo, mut hi) = (1, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if self::key(b, mid)? <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Some(lo - 1)
}

/// A leaf entry's bytes.
pub(crate) fn leaf_entry_bytes(key: &[u8], page: u64, slot: u8, inline: Option<&[u8]>) -> Vec<u8> {
    assert!(key.len() <= MAX_TREE_KEY && page < MAX_PAGES);
    assert!(inline.is_none_or(|v| v.len() <= INLINE_MAX));
    let vlen = inline.map_or(0, <[u8]>::len);
    let mut e = vec![0u8; LEAF_ENTRY_HEADER + key.len() + vlen];
    put_u16(&mut e, 0, key.len() as u16);
    put_u16(&mut e, 2, inline.map_or(INLINE_NONE, |v| v.len() as u16));
    put_u32(&mut e, 4, page as u32);
    e[8] = slot;
    e[LEAF_ENTRY_HEADER..LEAF_ENTRY_HEADER + key.len()].copy_from_slice(key);
    if let Some(v) = inline {
        e[LEAF_ENTRY_HEADER + key.len()..].copy_from_slice(v);
    }
    e
}

/// An inner entry's bytes.
pub(crate) fn inner_entry_bytes(key: &[u8], child: u64, count: u64) -> Vec<u8> {
    assert!(key.len() <= MAX_TREE_KEY && child < MAX_PAGES);
    let mut e = vec![0u8; INNER_ENTRY_HEADER + key.len()];
    put_u16(&mut e, 0, key.len() as u16);
    put_u32(&mut e, 2, child as u32);
    put_u64(&mut e, 6, count);
    e[INNER_ENTRY_HEADER..].copy_from_slice(key);
    e
}

/// Every entry's raw bytes, in order (the node must be well formed).
fn entries(b: &[u8]) -> Vec<Vec<u8>> {
    (0..count(b))
        .map(|i| raw(b, i).expect("a well-formed node").to_vec())
        .collect()
}

/// Rewrites the node with `entries` packed at the heap's end (no garbage left).
fn rebuild(b: &mut [u8], entries: &[Vec<u8>]) {
    let (level, tree) = (level(b), tree(b));
    init(b, level, tree);
    let mut heap = PAYLOAD;
    for (i, e) in entries.iter().enumerate() {
        heap -= e.len();
        assert!(
            heap >= NODE_HEADER + 2 * entries.len(),
            "entries fit the node"
        );
        b[heap..heap + e.len()].copy_from_slice(e);
        put_u16(b, NODE_HEADER + 2 * i, heap as u16);
    }
    put_u16(b, COUNT_AT, entries.len() as u16);
    put_u16(b, HEAP_AT, heap as u16);
}

/// Inserts entry bytes `e` at index `i`; false (nothing changed) when they do not fit.
pub(crate) fn insert_raw(b: &mut [u8], i: usize, e: &[u8]) -> bool {
    let n = count(b);
    assert!(
        i <= n && n < NODE_ENTRIES_MAX,
        "insert {i} into {n} entries"
    );
    if free(b) < e.len() + 2 {
        return false;
    }
    if heap(b) < NODE_HEADER + 2 * (n + 1) + e.len() {
        let all = entries(b);
        rebuild(b, &all);
    }
    let off = heap(b) - e.len();
    b[off..off + e.len()].copy_from_slice(e);
    put_u16(b, HEAP_AT, off as u16);
    let slots = NODE_HEADER + 2 * i..NODE_HEADER + 2 * n;
    b.copy_within(slots, NODE_HEADER + 2 * (i + 1));
    put_u16(b, NODE_HEADER + 2 * i, off as u16);
    put_u16(b, COUNT_AT, (n + 1) as u16);
    true
}

/// Removes entry `i` (its bytes become garbage).
pub(crate) fn remove_at(b: &mut [u8], i: usize) {
    let n = count(b);
    let (_, len) = entry_at(b, i).expect("a well-formed entry");
    b.copy_within(
        NODE_HEADER + 2 * (i + 1)..NODE_HEADER + 2 * n,
        NODE_HEADER + 2 * i,
    );
    put_u16(b, COUNT_AT, (n - 1) as u16);
    if n == 1 {
        put_u16(b, HEAP_AT, PAYLOAD as u16);
        put_u16(b, GARBAGE_AT, 0);
    } else {
        put_u16(b, GARBAGE_AT, (garbage(b) + len) as u16);
    }
}

/// Puts `key` in a leaf naming record (`page`, `slot`), with its value inline when given.
pub(crate) fn leaf_put(
    b: &mut [u8],
    key: &[u8],
    page: u64,
    slot: u8,
    inline: Option<&[u8]>,
) -> LeafPut {
    let e = leaf_entry_bytes(key, page, slot, inline);
    match search(b, key).expect("a well-formed leaf") {
        Ok(i) => {
            let (_, old) = leaf_entry(b, i).expect("a well-formed entry");
            let (old_page, old_slot) = (old.page, old.slot);
            let old_len = raw(b, i).expect("a well-formed entry").len();
            if free(b) + old_len < e.len() {
                return LeafPut::NoRoom;
            }
            remove_at(b, i);
            assert!(insert_raw(b, i, &e), "room was checked");
            LeafPut::Replaced {
                page: old_page,
                slot: old_slot,
            }
        }
        Err(i) => {
            if insert_raw(b, i, &e) {
                LeafPut::Inserted
            } else {
                LeafPut::NoRoom
            }
        }
    }
}

/// Sets inner entry `i`'s count of entries below it.
pub(crate) fn set_count(b: &mut [u8], i: usize, count: u64) {
    let (off, _) = entry_at(b, i).expect("a well-formed entry");
    assert!(!is_leaf(b));
    put_u64(b, off + 6, count);
}

/// Adds `delta` to inner entry `i`'s count.
pub(crate) fn add_count(b: &mut [u8], i: usize, delta: i64) {
    let (_, c) = child(b, i).expect("a well-formed entry");
    let new = c
        .checked_add_signed(delta)
        .expect("a subtree count stays in range");
    set_count(b, i, new);
}

/// Moves the upper half of `b`'s entries (by bytes) into `out`, a node initialized with the
/// same level and tree, and returns the key separating them (the first moved key; in an inner
/// node it moves up and the moved first entry's key becomes empty).
pub(crate) fn split_off(b: &mut [u8], out: &mut [u8]) -> Vec<u8> {
    let all = entries(b);
    let n = all.len();
    assert!(n >= 2, "a node splits with two entries at least");
    assert!(count(out) == 0 && level(out) == level(b) && tree(out) == tree(b));
    let half = all.iter().map(|e| e.len() + 2).sum::<usize>() / 2;
    let mut at = 1;
    let mut bytes = all[0].len() + 2;
    while at < n - 1 && bytes + all[at].len() + 2 <= half {
        bytes += all[at].len() + 2;
        at += 1;
    }
    let sep = key(b, at).expect("a well-formed entry").to_vec();
    let mut upper = all[at..].to_vec();
    if !is_leaf(b) {
        let (child, count) = child(b, at).expect("a well-formed entry");
        upper[0] = inner_entry_bytes(&[], child, count);
    }
    rebuild(b, &all[..at]);
    rebuild(out, &upper);
    sep
}

/// Bytes `left` would use after [`merge`] with `right` (separated by `sep`).
pub(crate) fn merged_used(left: &[u8], right: &[u8], sep: &[u8]) -> usize {
    let extra = if is_leaf(left) { 0 } else { sep.len() };
    used(left) + used(right) - NODE_HEADER + extra
}

/// Appends every entry of `right` (the next node at the same level) to `left`; in inner nodes
/// the first moved entry takes `sep`, the key that separated them. The caller checked
/// [`merged_used`].
pub(crate) fn merge(left: &mut [u8], right: &[u8], sep: &[u8]) {
    assert_eq!(level(left), level(right));
    assert!(merged_used(left, right, sep) <= PAYLOAD);
    let mut all = entries(left);
    let mut moved = entries(right);
    if !is_leaf(right) && !moved.is_empty() {
        let (child, count) = child(right, 0).expect("a well-formed entry");
        moved[0] = inner_entry_bytes(sep, child, count);
    }
    all.extend(moved);
    rebuild(left, &all);
}

/// Makes `b` (the root) an inner node one level up whose children are `entries` (key, child,
/// count), the first key empty.
pub(crate) fn become_inner(b: &mut [u8], level: u8, children: &[(Vec<u8>, u64, u64)]) {
    let tree = tree(b);
    init(b, level, tree);
    let all: Vec<Vec<u8>> = children
        .iter()
        .map(|(k, c, n)| inner_entry_bytes(k, *c, *n))
        .collect();
    rebuild(b, &all);
}

/// Checks a node's shape: every entry in place, keys strictly increasing (an inner node's
/// first empty), the heap accounted for. Returns what is wrong.
pub(crate) fn check(b: &[u8]) -> Result<(), String> {
    if !is_node(b) {
        return Err("not a tree node".into());
    }
    let n = count(b);
    if n > NODE_ENTRIES_MAX || heap(b) > PAYLOAD || heap(b) < NODE_HEADER + 2 * n {
        return Err(format!("{n} entries, heap at {}", heap(b)));
    }
    let mut live = 0;
    let mut spans = Vec::with_capacity(n);
    for i in 0..n {
        let (off, len) = entry_at(b, i).ok_or_else(|| format!("entry {i} out of place"))?;
        live += len;
        spans.push((off, len));
        if !is_leaf(b) && i == 0 && !key(b, 0).is_some_and(<[u8]>::is_empty) {
            return Err("an inner node's first key is not empty".into());
        }
        if i > 0 && key(b, i - 1) >= key(b, i) {
            return Err(format!("keys {} and {i} out of order", i - 1));
        }
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err("entries overlap".into());
    }
    if PAYLOAD - heap(b) != live + garbage(b) {
        return Err(format!(
            "heap of {} bytes holds {live} live and {} garbage",
            PAYLOAD - heap(b),
            garbage(b)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
