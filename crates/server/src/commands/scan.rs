//! The keyspace-wide reads: `KEYS`, `SCAN`, `RANDOMKEY`, with Redis 7.0's replies and errors.
//!
//! They walk the store's extendible hash (`Tx::scan_slots`): directory slots in order, each
//! bucket at its lowest slot, the keys of every namespace mixed (a database's keys are those
//! with its namespace prefix). The `SCAN` cursor is the next directory slot (0: start, and
//! done); a key present for a whole scan is returned at least once while others insert and
//! delete (buckets never merge, and a split only moves keys to a higher slot: the proof is at
//! `Engine::scan_slots`). Keys are read without their locks: a scan sees each key as it is
//! at some moment during the command, not one snapshot of the database (Redis, single
//! threaded, gives `KEYS` a snapshot). Expired keys are left out, not deleted.

use tamer_store::{DbError, Tx};

use super::args::parse_cursor;
use super::reply::{bulk_or_null, refuse, scan_header, INVALID_CURSOR, NOT_INTEGER, SYNTAX};
use super::Context;
use crate::glob;
use crate::keyspace::collection::random_u64;
use crate::keyspace::store_error;
use crate::keyspace::{self, Entry};
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// Directory slots `KEYS` reads per store call (each at most one bucket of keys in memory).
const KEYS_SLOTS_PER_CALL: u64 = 64;
/// `SCAN`'s default `COUNT`.
const DEFAULT_COUNT: u64 = 10;
/// Slots a `SCAN` call may visit per `COUNT` (Redis visits at most 10 × COUNT empty buckets).
const SLOTS_PER_COUNT: u64 = 10;

/// What a scan keeps of the keys it reads.
struct Filter<'a> {
    namespace: u32,
    pattern: Option<&'a [u8]>,
    /// `SCAN ... TYPE`: the type name, any case.
    kind: Option<&'a [u8]>,
    now_ms: u64,
}

impl Filter<'_> {
    /// The user key of store key `skey` when it passes, its value read unlocked.
    fn pass<'k>(
        &self,
        tx: &mut Tx<'_>,
        skey: &'k [u8],
    ) -> std::result::Result<Option<&'k [u8]>, DbError> {
        if skey.len() < 4 || skey[..4] != self.namespace.to_be_bytes() {
            return Ok(None);
        }
        let key = &skey[4..];
        if self.pattern.is_some_and(|p| !glob::matches(p, key)) {
            return Ok(None);
        }
        let Some(bytes) = tx.get_unlocked(skey)? else {
            return Ok(None); // deleted since the bucket was read
        };
        let Ok(entry) = Entry::decode(&bytes) else {
            return Ok(None);
        };
        if entry.expired(self.now_ms) {
            return Ok(None);
        }
        if self
            .kind
            .is_some_and(|k| !k.eq_ignore_ascii_case(entry.kind.name().as_bytes()))
        {
            return Ok(None);
        }
        Ok(Some(key))
    }
}

/// `KEYS pattern`: every live key of the database matching it (O(every key in the store);
/// beyond the reply, one batch of [`KEYS_SLOTS_PER_CALL`] buckets' keys in memory).
pub(crate) fn keys(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let filter = Filter {
        namespace: ctx.namespace,
        pattern: (args[1] != b"*").then_some(args[1]),
        kind: None,
        now_ms: ctx.now_ms,
    };
    let (mut found, mut n) = (Vec::new(), 0);
    every_key(tx, &filter, |key| {
        write::bulk(&mut found, key);
        n += 1;
    })?;
    write::array(out, n);
    out.extend_from_slice(&found);
    Ok(())
}

/// Calls `each` with every key `filter` passes: the store's buckets in slot order, then the
/// keys this transaction created.
fn every_key(tx: &mut Tx<'_>, filter: &Filter, mut each: impl FnMut(&[u8])) -> Result {
    let mut cursor = Some(0);
    // Bounded by the directory: every call advances the cursor by its slots.
    while let Some(start) = cursor {
        let (batch, next) = tx.scan_slots(start, KEYS_SLOTS_PER_CALL)?;
        for skey in &batch {
            if let Some(key) = filter.pass(tx, skey)? {
                each(key);
            }
        }
        cursor = next;
    }
    new_keys(tx, filter, &mut each)
}

/// Calls `each` with the keys `filter` passes that this transaction (a `MULTI`/`EXEC`)
/// created: not in the store's buckets yet.
fn new_keys(tx: &mut Tx<'_>, filter: &Filter, each: &mut impl FnMut(&[u8])) -> Result {
    for skey in tx.buffered_new_keys()? {
        if let Some(key) = filter.pass(tx, &skey)? {
            each(key);
        }
    }
    Ok(())
}

/// `SCAN`'s `COUNT`, `MATCH` pattern (`None`: every key) and `TYPE`.
type ScanOptions<'a> = (u64, Option<&'a [u8]>, Option<&'a [u8]>);

/// `SCAN`'s options, or the error reply's text.
fn scan_options<'a>(args: &[&'a [u8]]) -> std::result::Result<ScanOptions<'a>, &'static str> {
    let (mut count, mut pattern, mut kind) = (DEFAULT_COUNT, None, None);
    let mut i = 2;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"count" if more >= 1 => {
                let n = crate::resp::parse_i64(args[i + 1]).ok_or(NOT_INTEGER)?;
                if n < 1 {
                    return Err(SYNTAX);
                }
                count = n as u64;
            }
            b"match" if more >= 1 => pattern = (args[i + 1] != b"*").then_some(args[i + 1]),
            b"type" if more >= 1 => kind = Some(args[i + 1]),
            _ => return Err(SYNTAX),
        }
        i += 2;
    }
    Ok((count, pattern, kind))
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: the next cursor and a batch of
/// keys.
pub(crate) fn scan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(cursor) = parse_cursor(args[1]) else {
        return refuse(out, INVALID_CURSOR);
    };
    let (count, pattern, kind) = match scan_options(args) {
        Ok(options) => options,
        Err(text) => return refuse(out, text),
    };
    let filter = Filter {
        namespace: ctx.namespace,
        pattern,
        kind,
        now_ms: ctx.now_ms,
    };
    let (mut found, mut n) = (Vec::new(), 0);
    let next = scan_step(tx, &filter, cursor, count, |key| {
        write::bulk(&mut found, key);
        n += 1;
    })?;
    scan_header(out, next, n);
    out.extend_from_slice(&found);
    Ok(())
}

/// One `SCAN` call from `cursor`: calls `each` with the keys `filter` passes, reading slots
/// until it has read `count` store keys (of any database) or visited 10 × `count` slots (at
/// most `count` + `BUCKET_CAP` keys read); the next cursor (0: done).
fn scan_step(
    tx: &mut Tx<'_>,
    filter: &Filter,
    mut cursor: u64,
    count: u64,
    mut each: impl FnMut(&[u8]),
) -> std::result::Result<u64, DbError> {
    let max_slots = count.saturating_mul(SLOTS_PER_COUNT);
    let (mut read, mut slots) = (0u64, 0u64);
    let mut next = Some(cursor);
    if cursor == 0 {
        new_keys(tx, filter, &mut each)?;
    }
    while read < count && slots < max_slots {
        let (batch, after) = tx.scan_slots(cursor, 1)?;
        (slots, read) = (slots + 1, read + batch.len() as u64);
        for skey in &batch {
            if let Some(key) = filter.pass(tx, skey)? {
                each(key);
            }
        }
        next = after;
        match after {
            Some(slot) => cursor = slot,
            None => break,
        }
    }
    Ok(next.unwrap_or(0))
}

/// `RANDOMKEY`: a live key of the database, or null when it has none.
pub(crate) fn randomkey(
    ctx: &Context,
    tx: &mut Tx<'_>,
    _args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let key = random_key(ctx, tx)?;
    bulk_or_null(out, key.as_deref(), ctx.protocol);
    Ok(())
}

/// A live key of the database (`None`: it has none). From a random slot, the first bucket
/// holding live keys of the database gives one of them at random (a key's chance depends on
/// its bucket's fill: not uniform, as Redis's is not). `None` at once when `DBSIZE` is 0;
/// else at most one pass over the directory.
fn random_key(ctx: &Context, tx: &mut Tx<'_>) -> std::result::Result<Option<Vec<u8>>, DbError> {
    if keyspace::key_count(tx, ctx.namespace).map_err(store_error)? == 0 {
        return Ok(None);
    }
    let filter = Filter {
        namespace: ctx.namespace,
        pattern: None,
        kind: None,
        now_ms: ctx.now_ms,
    };
    let slots = tx.directory_slots();
    let mut cursor = random_u64() % slots;
    // Bounded: at most one visit of each slot (the directory may grow meanwhile: the
    // slots counted at the start).
    for _ in 0..=slots {
        let (batch, next) = tx.scan_slots(cursor, 1)?;
        let mut live = Vec::new();
        for skey in &batch {
            if let Some(key) = filter.pass(tx, skey)? {
                live.push(key.to_vec());
            }
        }
        if !live.is_empty() {
            let pick = (random_u64() % live.len() as u64) as usize;
            return Ok(Some(live.swap_remove(pick)));
        }
        cursor = next.unwrap_or(0);
    }
    // Only keys this transaction (a `MULTI`/`EXEC`) created, not in the buckets yet.
    for skey in tx.buffered_new_keys()? {
        if let Some(key) = filter.pass(tx, &skey)? {
            return Ok(Some(key.to_vec()));
        }
    }
    Ok(None)
}
