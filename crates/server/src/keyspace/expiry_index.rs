//! The expiry index: a time-ordered structure in the store that finds the keys whose TTL has
//! passed without scanning the keyspace (the store is a hash, with no ordered iteration).
//!
//! ```text
//! head    [0 u32 BE]"xh"[slot u64 BE][shard u8]              -> [chunks u32 LE]
//! chunk   [0 u32 BE]"xc"[slot u64 BE][shard u8][chunk u32 BE] -> entries, each
//!         [store key len u32 LE][store key][expire-at ms u64 LE]
//! cursor  [0 u32 BE]"xnext"                                   -> [slot u64 LE][shard u8][chunk u32 LE]
//! ```
//!
//! Time is cut into slots of [`SLOT_MS`]; an entry for a store key (namespace included, so it
//! stays right across `SWAPDB`) and its expire-at time goes to slot
//! `max(expire-at, now) / SLOT_MS`, shard `hash(store key) % SHARDS`, in the **same store
//! transaction** that writes the value (so a crash never loses one). A (slot, shard) is a
//! head holding its chunk count and chunks of at most [`CHUNK_BYTES`] (or one entry, when a
//! store key alone is longer): an append reads the head and the last chunk and rewrites that
//! chunk (≤ `CHUNK_BYTES` plus the entry), and also the head when it starts a new chunk.
//! Shards keep concurrent `SET EX`s of one second off a single record (they would conflict on
//! its lock).
//!
//! Entries may be stale (a TTL changed or removed, the key deleted or renamed): the expirer
//! deletes a key only when its current header says it has expired, so a stale entry costs
//! one lookup. The one writer of the cursor is the expirer (`crate::keyspace::expiry`): it processes whole
//! chunks in a transaction (their keys deleted, the chunks deleted and the cursor moved at once),
//! so a crash mid-pass loses nothing and leaves no entry behind the cursor.
//!
//! Why no entry lands behind the cursor: the expirer starts a slot only once the wall clock
//! is past its end, and a writer appends at `max(expire-at, its clock)`, both reading the same
//! clock, so a writer that comes after the slot was started picks a later slot. (A backward
//! step of the wall clock breaks this: such an entry is never processed and its key expires
//! lazily only.)

use tamer_store::{DbError, Tx};

use super::META;

/// Width of a time slot.
pub const SLOT_MS: u64 = 1000;
/// Shards of a slot.
pub const SHARDS: u8 = 16;
/// A chunk takes entries while it stays within this size (a first entry always fits).
pub const CHUNK_BYTES: usize = 512;
/// Bytes an entry adds besides its store key.
pub const ENTRY_OVERHEAD_BYTES: usize = 12;

/// The slot holding time `ms`.
pub fn slot_of(ms: u64) -> u64 {
    ms / SLOT_MS
}

/// The shard of `store_key` (FNV-1a: stable across restarts and versions of Rust).
pub fn shard_of(store_key: &[u8]) -> u8 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in store_key {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h % u32::from(SHARDS)) as u8
}

fn prefixed(tag: &[u8], extra: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + tag.len() + extra);
    k.extend_from_slice(&META.to_be_bytes());
    k.extend_from_slice(tag);
    k
}

/// The head record's key of (`slot`, `shard`).
pub fn head_key(slot: u64, shard: u8) -> Vec<u8> {
    let mut k = prefixed(b"xh", 9);
    k.extend_from_slice(&slot.to_be_bytes());
    k.push(shard);
    k
}

/// The key of chunk `chunk` of (`slot`, `shard`).
pub fn chunk_key(slot: u64, shard: u8, chunk: u32) -> Vec<u8> {
    let mut k = prefixed(b"xc", 13);
    k.extend_from_slice(&slot.to_be_bytes());
    k.push(shard);
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

fn cursor_key() -> Vec<u8> {
    prefixed(b"xnext", 0)
}

fn corrupt(what: &str) -> DbError {
    DbError::Runtime(format!("the expiry index is corrupt: {what}"))
}

/// An index entry: a store key and the expire-at time it was written with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The key in the store (`[namespace][key]`).
    pub store_key: Vec<u8>,
    /// Unix ms.
    pub expire_at_ms: u64,
}

/// Appends the encoded entry to `out`.
pub fn encode_entry(out: &mut Vec<u8>, store_key: &[u8], expire_at_ms: u64) {
    out.extend_from_slice(&(store_key.len() as u32).to_le_bytes());
    out.extend_from_slice(store_key);
    out.extend_from_slice(&expire_at_ms.to_le_bytes());
}

/// The entries of a chunk's bytes.
pub fn decode_chunk(mut bytes: &[u8]) -> Result<Vec<IndexEntry>, DbError> {
    let mut entries = Vec::new();
    while !bytes.is_empty() {
        let len_bytes = bytes.get(..4).ok_or_else(|| corrupt("a short entry"))?;
        let len = u32::from_le_bytes(len_bytes.try_into().expect("4 bytes")) as usize;
        let end = len
            .checked_add(ENTRY_OVERHEAD_BYTES)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| corrupt("an entry past its chunk"))?;
        let at = u64::from_le_bytes(bytes[4 + len..end].try_into().expect("8 bytes"));
        entries.push(IndexEntry {
            store_key: bytes[4..4 + len].to_vec(),
            expire_at_ms: at,
        });
        bytes = &bytes[end..];
    }
    Ok(entries)
}

fn decode_u32(bytes: &[u8], what: &str) -> Result<u32, DbError> {
    let word: [u8; 4] = bytes.try_into().map_err(|_| corrupt(what))?;
    Ok(u32::from_le_bytes(word))
}

/// The chunk count of (`slot`, `shard`); 0 when it has no head.
pub fn chunks(tx: &mut Tx<'_>, slot: u64, shard: u8) -> Result<u32, DbError> {
    match tx.get(&head_key(slot, shard))? {
        None => Ok(0),
        Some(bytes) => decode_u32(&bytes, "a head record"),
    }
}

/// Records in `tx` that `store_key` expires at `expire_at_ms`, written at `now_ms` (the
/// writer's fresh clock: see the module docs for why it matters).
pub fn append(
    tx: &mut Tx<'_>,
    store_key: &[u8],
    expire_at_ms: u64,
    now_ms: u64,
) -> Result<(), DbError> {
    let slot = slot_of(expire_at_ms.max(now_ms));
    let shard = shard_of(store_key);
    let n = chunks(tx, slot, shard)?;
    let add = store_key.len() + ENTRY_OVERHEAD_BYTES;
    let (chunk, mut bytes) = match n.checked_sub(1) {
        Some(last) => match tx.get(&chunk_key(slot, shard, last))? {
            Some(b) if b.len() + add <= CHUNK_BYTES => (last, b),
            Some(_) => (n, Vec::new()),
            None => return Err(corrupt("a head naming a missing chunk")),
        },
        None => (0, Vec::new()),
    };
    if chunk == n {
        let more = n.checked_add(1).ok_or_else(|| corrupt("a slot's chunks"))?;
        tx.put(&head_key(slot, shard), &more.to_le_bytes())?;
    }
    encode_entry(&mut bytes, store_key, expire_at_ms);
    debug_assert!(
        bytes.len() <= CHUNK_BYTES.max(add),
        "a chunk within its bound"
    );
    tx.put(&chunk_key(slot, shard, chunk), &bytes)
}

/// Where the expirer goes on: the next (slot, shard, chunk) to process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The time slot ([`SLOT_MS`] wide).
    pub slot: u64,
    /// The shard within the slot.
    pub shard: u8,
    /// The chunk within the shard.
    pub chunk: u32,
}

impl Cursor {
    /// The first chunk of slot `slot`.
    pub fn at_slot(slot: u64) -> Self {
        Self {
            slot,
            shard: 0,
            chunk: 0,
        }
    }

    /// The first chunk of the next shard (or of the next slot's first shard).
    pub fn next_shard(self) -> Self {
        if self.shard + 1 < SHARDS {
            Self {
                slot: self.slot,
                shard: self.shard + 1,
                chunk: 0,
            }
        } else {
            Self::at_slot(self.slot + 1)
        }
    }

    fn encode(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(13);
        out.extend_from_slice(&self.slot.to_le_bytes());
        out.push(self.shard);
        out.extend_from_slice(&self.chunk.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, DbError> {
        if bytes.len() != 13 || bytes[8] >= SHARDS {
            return Err(corrupt("the cursor"));
        }
        Ok(Self {
            slot: u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
            shard: bytes[8],
            chunk: decode_u32(&bytes[9..], "the cursor")?,
        })
    }

    /// The stored cursor, if any.
    pub fn load(tx: &mut Tx<'_>) -> Result<Option<Self>, DbError> {
        tx.get(&cursor_key())?.map(|b| Self::decode(&b)).transpose()
    }

    /// Stores the cursor.
    pub fn save(self, tx: &mut Tx<'_>) -> Result<(), DbError> {
        tx.put(&cursor_key(), &self.encode())
    }
}

#[cfg(test)]
mod tests;
