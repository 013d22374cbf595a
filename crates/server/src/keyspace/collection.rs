//! Redis's collection types on the store: hashes, lists, sets and sorted sets.
//!
//! Every collection is an ordered map of byte keys to byte values ([`Coll`]), its keys laid
//! out per type so that the map's order and positions answer the type's commands:
//!
//! ```text
//! hash     [field hash u64 BE][field]            -> value
//! set      [member hash u64 BE][member]          -> (empty)
//! zset     [0][member hash u64 BE][member]       -> score (f64 bits, LE)
//!          [1][score, order-preserving u64 BE][member] -> (empty)
//! list     [position u64 BE](extension bytes)    -> element
//! ```
//!
//! The hash is the store's keyed SipHash (clients cannot make many fields share a prefix), and
//! ordering a hash's or set's entries by it gives `HSCAN`/`SSCAN`/`ZSCAN` a cursor that is a
//! position in a fixed order (the next hash to visit): every element present for a whole scan
//! is returned at least once, whatever changes meanwhile. A sorted set keeps both orders in
//! one map: a member's score by its hash, and (score, member) for ranks and ranges; its size
//! is half the map's.
//!
//! **Two representations.** A small collection is *packed*: the whole map is encoded in the
//! key's value (`[0][entries u32][key len, key, value len, value]...`, lengths as LEB128), read
//! and rewritten whole by a command, as Redis's listpack. Past Redis's representation
//! thresholds for its type ([`packing`]: `hash-max-listpack-*` ...) or [`PACKED_MAX_BYTES`]
//! bytes it moves, once, into an ordered tree of the store (the value becomes
//! `[1][tree u64 LE]`), where an operation costs O(log n) page accesses and a range
//! O(log n + k). The byte bound keeps a packed value in one shared data page and a command's
//! decode and encode near a tree descent's cost (2 KiB is half a page); Redis's thresholds
//! make `OBJECT ENCODING` name what Redis would. A tree never moves back (nor does Redis's
//! encoding), and an emptied collection is deleted with its key.
//!
//! A command holds its key's lock for its whole transaction, which guards the collection's
//! tree: tree operations take no lock per element (`Tx::tree_*_unlocked`).

use std::collections::BTreeMap;
use std::ops::Bound;

use tamer_store::{DbError, Direction, TreeId, Tx, MAX_TREE_KEY};

use super::events::Class;
use super::scope::Scope;
use super::store_error;
use crate::config::Packing;
use crate::keyspace::{self, Entry, KeyspaceError, Kind, IN_TREE, PACKED};

/// Elements a packed collection holds at most (fields, members or list elements).
pub const PACKED_MAX_ELEMENTS: u64 = 128;
/// Bytes a packed collection's encoding takes at most.
pub const PACKED_MAX_BYTES: usize = 2048;
/// Longest field or member: its tree key (with the 9-byte prefix at most) fits a node.
pub const MAX_ELEMENT_KEY: usize = MAX_TREE_KEY - 9;
/// Entries a scan step of a command reads from a tree at once.
const SCAN_BATCH: usize = 256;

type Result<T> = std::result::Result<T, DbError>;

/// What a key holds, for a command on a collection of one kind.
pub enum Found {
    Absent,
    /// Another kind: the command replies `WRONGTYPE`.
    WrongType,
    Coll(Coll),
}

/// Where a collection's map lives.
enum Rep {
    Packed(BTreeMap<Vec<u8>, Vec<u8>>),
    Tree(TreeId),
}

/// A collection as a command sees it: its map, read from its value (packed) or named by it (a
/// tree), and whether the command changed it.
pub struct Coll {
    pub kind: Kind,
    expire_at_ms: Option<u64>,
    rep: Rep,
    /// The key was stored when loaded (a new collection's value is written, not replaced).
    stored: bool,
    /// A packed map changed: its value is rewritten at [`Coll::save`].
    dirty: bool,
    /// Anything changed (watchers are told).
    changed: bool,
}

/// Loads `key`'s collection of `kind` (a read lookup, counted in `keyspace_hits`/`misses`).
pub fn load(scope: &Scope, tx: &mut Tx<'_>, key: &[u8], kind: Kind) -> Result<Found> {
    let found = load_uncounted(scope, tx, key, kind)?;
    scope.count_lookup(!matches!(found, Found::Absent), key);
    Ok(found)
}

/// [`load`] without counting a lookup (a write command's `lookupKeyWrite`).
pub fn load_uncounted(scope: &Scope, tx: &mut Tx<'_>, key: &[u8], kind: Kind) -> Result<Found> {
    let entry = match keyspace::get_cached(scope, tx, key) {
        Ok(None) => return Ok(Found::Absent),
        Ok(Some(e)) => e,
        Err(KeyspaceError::Store(err)) => return Err(err),
        // A value the keyspace cannot read is no collection: refused, never overwritten.
        Err(_) => return Ok(Found::WrongType),
    };
    if entry.kind != kind {
        return Ok(Found::WrongType);
    }
    Coll::from_entry(entry, true).map(Found::Coll)
}

/// A key of a tree-backed value copied for `COPY`: a new tree with every entry (within the
/// store's transaction bounds).
pub fn copied(tx: &mut Tx<'_>, entry: Entry) -> Result<Entry> {
    let Some(tree) = keyspace::tree_of(&entry.encode()) else {
        return Ok(entry);
    };
    let copy = tx.create_tree()?;
    let mut from = Bound::Unbounded;
    // Bounded: every batch moves past its last key.
    loop {
        let (batch, end) = tx.tree_entries(
            tree,
            from.as_ref().map(Vec::as_slice),
            Direction::Forward,
            SCAN_BATCH,
            &|_| true,
        )?;
        for (k, v) in &batch {
            tx.tree_put_unlocked(copy, k, v)?;
        }
        match batch.last() {
            Some((k, _)) if !end => from = Bound::Excluded(k.clone()),
            _ => break,
        }
    }
    Ok(tree_entry(entry.kind, entry.expire_at_ms, copy))
}

fn tree_entry(kind: Kind, expire_at_ms: Option<u64>, tree: TreeId) -> Entry {
    let mut payload = vec![IN_TREE];
    payload.extend_from_slice(&tree.0.to_le_bytes());
    Entry {
        kind,
        expire_at_ms,
        payload,
    }
}

/// LEB128.
fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get_len(b: &[u8], at: &mut usize) -> Option<usize> {
    let mut n = 0usize;
    for shift in (0..35).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn encode_packed(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
    let mut out = vec![PACKED];
    out.extend_from_slice(&(map.len() as u32).to_le_bytes());
    for (k, v) in map {
        put_len(&mut out, k.len());
        out.extend_from_slice(k);
        put_len(&mut out, v.len());
        out.extend_from_slice(v);
    }
    out
}

fn decode_packed(payload: &[u8]) -> Option<BTreeMap<Vec<u8>, Vec<u8>>> {
    let n = u32::from_le_bytes(payload.get(1..5)?.try_into().ok()?);
    let mut at = 5;
    let mut map = BTreeMap::new();
    for _ in 0..n {
        let klen = get_len(payload, &mut at)?;
        let k = payload.get(at..at + klen)?.to_vec();
        at += klen;
        let vlen = get_len(payload, &mut at)?;
        let v = payload.get(at..at + vlen)?.to_vec();
        at += vlen;
        map.insert(k, v);
    }
    (at == payload.len()).then_some(map)
}

fn corrupt(what: &str) -> DbError {
    store_error(KeyspaceError::Corrupt(what.into()))
}

impl Coll {
    /// An empty collection of `kind`, not stored yet.
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            expire_at_ms: None,
            rep: Rep::Packed(BTreeMap::new()),
            stored: false,
            dirty: false,
            changed: false,
        }
    }

    fn from_entry(entry: Entry, stored: bool) -> Result<Self> {
        let rep = match entry.payload.first() {
            Some(&PACKED) => Rep::Packed(
                decode_packed(&entry.payload).ok_or_else(|| corrupt("a packed collection"))?,
            ),
            Some(&IN_TREE) => {
                let root = entry
                    .payload
                    .get(1..9)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| corrupt("a collection's tree"))?;
                Rep::Tree(TreeId(u64::from_le_bytes(root)))
            }
            _ => return Err(corrupt("a collection's encoding")),
        };
        Ok(Self {
            kind: entry.kind,
            expire_at_ms: entry.expire_at_ms,
            rep,
            stored,
            dirty: false,
            changed: false,
        })
    }

    /// True when the collection lives in a tree.
    pub fn in_tree(&self) -> bool {
        matches!(self.rep, Rep::Tree(_))
    }

    /// Entries of the map.
    pub fn len(&self, tx: &mut Tx<'_>) -> Result<u64> {
        match &self.rep {
            Rep::Packed(m) => Ok(m.len() as u64),
            Rep::Tree(t) => tx.tree_len(*t),
        }
    }

    pub fn get(&self, tx: &mut Tx<'_>, k: &[u8]) -> Result<Option<Vec<u8>>> {
        match &self.rep {
            Rep::Packed(m) => Ok(m.get(k).cloned()),
            Rep::Tree(t) => tx.tree_get_unlocked(*t, k),
        }
    }

    /// Sets `k`; true when it was there.
    pub fn put(&mut self, tx: &mut Tx<'_>, k: &[u8], v: &[u8]) -> Result<bool> {
        self.changed = true;
        match &mut self.rep {
            Rep::Packed(m) => {
                self.dirty = true;
                Ok(m.insert(k.to_vec(), v.to_vec()).is_some())
            }
            Rep::Tree(t) => tx.tree_put_unlocked(*t, k, v),
        }
    }

    /// Removes `k`; true when it was there.
    pub fn del(&mut self, tx: &mut Tx<'_>, k: &[u8]) -> Result<bool> {
        let was = match &mut self.rep {
            Rep::Packed(m) => m.remove(k).is_some(),
            Rep::Tree(t) => tx.tree_delete_unlocked(*t, k)?,
        };
        if was {
            self.changed = true;
            self.dirty |= !self.in_tree();
        }
        Ok(was)
    }

    /// Up to `limit` entries from `from` in `direction` while `within` holds of the key.
    pub fn scan(
        &self,
        tx: &mut Tx<'_>,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match &self.rep {
            Rep::Packed(m) => {
                let range = (from.map(<[u8]>::to_vec), Bound::Unbounded);
                let take = |it: &mut dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>| {
                    it.take_while(|(k, _)| within(k))
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                };
                Ok(match direction {
                    Direction::Forward => take(&mut m.range(range)),
                    Direction::Reverse => {
                        let range = (Bound::Unbounded, from.map(<[u8]>::to_vec));
                        take(&mut m.range(range).rev())
                    }
                })
            }
            Rep::Tree(t) => {
                let mut out = Vec::new();
                let mut at = from.map(<[u8]>::to_vec);
                // Bounded: each batch moves past its last key or ends the scan.
                while out.len() < limit {
                    let want = (limit - out.len()).min(SCAN_BATCH);
                    let (batch, end) = tx.tree_entries(
                        *t,
                        at.as_ref().map(Vec::as_slice),
                        direction,
                        want,
                        within,
                    )?;
                    let last = batch.last().map(|(k, _)| k.clone());
                    out.extend(batch);
                    match last {
                        Some(k) if !end => at = Bound::Excluded(k),
                        _ => break,
                    }
                }
                Ok(out)
            }
        }
    }

    /// Every entry whose key starts with `prefix`, in order (O(n): `HGETALL`, `SMEMBERS`).
    pub fn all(&self, tx: &mut Tx<'_>, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan(
            tx,
            Bound::Included(prefix),
            Direction::Forward,
            usize::MAX,
            &|k| k.starts_with(prefix),
        )
    }

    /// Entries whose keys are below `k`.
    pub fn rank(&self, tx: &mut Tx<'_>, k: &[u8]) -> Result<u64> {
        match &self.rep {
            Rep::Packed(m) => Ok(m
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(k)))
                .count() as u64),
            Rep::Tree(t) => tx.tree_position(*t, k),
        }
    }

    /// The entry at position `i` (0: the first).
    pub fn at(&self, tx: &mut Tx<'_>, i: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match &self.rep {
            Rep::Packed(m) => Ok(usize::try_from(i)
                .ok()
                .and_then(|i| m.iter().nth(i))
                .map(|(k, v)| (k.clone(), v.clone()))),
            Rep::Tree(t) => tx.tree_entry_at(*t, i),
        }
    }

    /// Writes what changed: a packed map's new value (moved into a tree when it outgrew the
    /// packed bounds; a `new` event for a new key), or the key deleted when the collection is
    /// empty (a `del` event, so a command tells its own event before saving a removal). `elements` is the
    /// collection's size in the type's elements (a sorted set's map holds two entries each).
    pub fn save(self, scope: &Scope, tx: &mut Tx<'_>, key: &[u8], elements: u64) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        scope.touch(key);
        if elements == 0 {
            if self.stored {
                keyspace::remove(tx, scope.namespace, key).map_err(store_error)?;
                scope.notify(Class::Generic, "del", key);
            }
            return Ok(());
        }
        let Rep::Packed(map) = &self.rep else {
            return Ok(()); // a tree changes in place
        };
        if !self.dirty {
            return Ok(());
        }
        let packed = encode_packed(map);
        let bounds = packing(scope, self.kind);
        let too_long = || longest_element(self.kind, map) > bounds.max_element_bytes;
        let entry =
            if elements > bounds.max_elements || packed.len() > PACKED_MAX_BYTES || too_long() {
                let tree = tx.create_tree()?;
                for (k, v) in map {
                    tx.tree_put_unlocked(tree, k, v)?;
                }
                tree_entry(self.kind, self.expire_at_ms, tree)
            } else {
                Entry {
                    kind: self.kind,
                    expire_at_ms: self.expire_at_ms,
                    payload: packed,
                }
            };
        let saved = if self.stored {
            keyspace::put_kept_ttl(scope, tx, key, &entry)
        } else {
            keyspace::put(scope, tx, key, &entry)
        };
        saved.map_err(store_error)
    }
}

/// The packing bounds of a collection of `kind`: Redis's thresholds from the settings
/// (`hash-max-listpack-*`, `zset-max-listpack-*`, `set-max-intset-entries`; Redis's defaults
/// without settings); a list's are tamer's own ([`PACKED_MAX_ELEMENTS`]). Every packed
/// collection is also bounded by [`PACKED_MAX_BYTES`].
fn packing(scope: &Scope, kind: Kind) -> Packing {
    let defaults = |elements, bytes| Packing {
        max_elements: elements,
        max_element_bytes: bytes,
    };
    match (scope.config, kind) {
        (Some(c), Kind::Hash) => c.hash_packing(),
        (Some(c), Kind::ZSet) => c.zset_packing(),
        (Some(c), Kind::Set) => defaults(c.set_max_entries(), u64::MAX),
        (None, Kind::Hash) => defaults(512, 64),
        (None, Kind::ZSet) => defaults(128, 64),
        (None, Kind::Set) => defaults(512, u64::MAX),
        (_, Kind::List | Kind::String) => defaults(PACKED_MAX_ELEMENTS, u64::MAX),
    }
}

/// The bytes of the longest field, value or member of a packed `map` of `kind` (its keys'
/// layouts: a hash's and a set's are an 8-byte hash then the element; a sorted set's a
/// 1-byte prefix and 8 bytes then the member; a list's values are its elements).
fn longest_element(kind: Kind, map: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    let of = |(k, v): (&Vec<u8>, &Vec<u8>)| -> usize {
        match kind {
            Kind::Hash => k.len().saturating_sub(8).max(v.len()),
            Kind::Set => k.len().saturating_sub(8),
            Kind::ZSet => k.len().saturating_sub(9),
            Kind::List | Kind::String => v.len(),
        }
    };
    map.iter().map(of).max().unwrap_or(0) as u64
}

/// A field's or member's tree key under `prefix`: its hash, then itself.
pub fn hashed_key(tx: &Tx<'_>, prefix: &[u8], element: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 8 + element.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&tx.hash_of(element).to_be_bytes());
    k.extend_from_slice(element);
    k
}

/// The element a hashed key names (after its prefix and hash).
pub fn element_of(key: &[u8], prefix_len: usize) -> &[u8] {
    &key[(prefix_len + 8).min(key.len())..]
}

/// A `SCAN`-family cursor over hashed keys under `prefix`: the cursor is the next hash to
/// visit (0: the start), each step returns every element of the hashes it reaches (so a
/// stop never splits equal hashes) and about `count` of them.
#[allow(clippy::type_complexity)]
pub fn scan_hashed(
    tx: &mut Tx<'_>,
    coll: &Coll,
    prefix: &[u8],
    cursor: u64,
    count: usize,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, u64)> {
    let mut from = prefix.to_vec();
    from.extend_from_slice(&cursor.to_be_bytes());
    let within = |k: &[u8]| k.starts_with(prefix);
    let mut got = coll.scan(
        tx,
        Bound::Included(&from),
        Direction::Forward,
        count.max(1),
        &within,
    )?;
    let hash_of = |k: &[u8]| -> u64 {
        k.get(prefix.len()..prefix.len() + 8).map_or(u64::MAX, |b| {
            u64::from_be_bytes(b.try_into().expect("8 bytes"))
        })
    };
    let Some(last) = got.last().map(|(k, _)| hash_of(k)) else {
        return Ok((got, 0));
    };
    // Everything else with the last hash, then the next hash is the cursor.
    let mut tail_from = got.last().expect("non-empty").0.clone();
    loop {
        let more = coll.scan(
            tx,
            Bound::Excluded(&tail_from),
            Direction::Forward,
            SCAN_BATCH,
            &|k| within(k) && hash_of(k) == last,
        )?;
        let Some((k, _)) = more.last() else {
            break;
        };
        tail_from = k.clone();
        got.extend(more);
    }
    let next = coll.scan(
        tx,
        Bound::Excluded(&tail_from),
        Direction::Forward,
        1,
        &within,
    )?;
    let cursor = match next.first() {
        // A hash of 0 cannot be a next cursor (0 ends the scan): its element was seen first.
        Some((k, _)) => hash_of(k).max(1),
        None => 0,
    };
    Ok((got, cursor))
}

/// A cheap random number (xorshift on the clock and a counter) for random picks: entries
/// here, a field, member or key (`RANDOMKEY`'s start) for the commands.
pub fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let mut x = STATE.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ tamer_device::now_ns();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Random entries of a collection's first `size` map entries, as Redis's `*RANDFIELD`/
/// `*RANDMEMBER` with a count choose them: `count ≥ size`, all of them; `0 ≤ count < size`,
/// `count` distinct; `count < 0`, `-count` with repeats.
#[allow(clippy::type_complexity)]
pub fn random_entries(
    tx: &mut Tx<'_>,
    coll: &Coll,
    size: u64,
    count: i64,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if size == 0 || count == 0 {
        return Ok(Vec::new());
    }
    let picks: Vec<u64> = if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| random_u64() % size)
            .collect()
    } else if count as u64 >= size {
        return coll.scan(
            tx,
            Bound::Unbounded,
            Direction::Forward,
            size as usize,
            &|_| true,
        );
    } else {
        // Floyd's sampling: `count` distinct positions.
        let mut chosen = std::collections::BTreeSet::new();
        for j in size - count as u64..size {
            let t = random_u64() % (j + 1);
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        chosen.into_iter().collect()
    };
    let mut out = Vec::with_capacity(picks.len());
    for i in picks {
        if let Some(e) = coll.at(tx, i)? {
            out.push(e);
        }
    }
    Ok(out)
}
