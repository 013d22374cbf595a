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
use super::reply::{INVALID_CURSOR, NOT_INTEGER, SYNTAX};
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
pub fn keys(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let all = args[1] == b"*";
    let filter = Filter {
        namespace: ctx.namespace,
        pattern: (!all).then_some(args[1]),
        kind: None,
        now_ms: ctx.now_ms,
    };
    let mut found: Vec<u8> = Vec::new();
    let mut n = 0;
    let mut cursor = Some(0);
    // Bounded by the directory: every call advances the cursor by its slots.
    while let Some(start) = cursor {
        let (batch, next) = tx.scan_slots(start, KEYS_SLOTS_PER_CALL)?;
        for skey in &batch {
            if let Some(key) = filter.pass(tx, skey)? {
                write::bulk(&mut found, key);
                n += 1;
            }
        }
        cursor = next;
    }
    // Keys this transaction (a `MULTI`/`EXEC`) created: not in the store's buckets yet.
    for skey in tx.buffered_new_keys()? {
        if let Some(key) = filter.pass(tx, &skey)? {
            write::bulk(&mut found, key);
            n += 1;
        }
    }
    write::array(out, n);
    out.extend_from_slice(&found);
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
/// keys. A call reads slots until it has read `COUNT` store keys (of any database) or visited
/// 10 × `COUNT` slots: at most `COUNT` + `BUCKET_CAP` keys read and 10 × `COUNT` slots.
pub fn scan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(mut cursor) = parse_cursor(args[1]) else {
        write::error(out, INVALID_CURSOR);
        return Ok(());
    };
    let (count, pattern, kind) = match scan_options(args) {
        Ok(options) => options,
        Err(text) => {
            write::error(out, text);
            return Ok(());
        }
    };
    let filter = Filter {
        namespace: ctx.namespace,
        pattern,
        kind,
        now_ms: ctx.now_ms,
    };
    let max_slots = count.saturating_mul(SLOTS_PER_COUNT);
    let (mut read, mut slots, mut n) = (0u64, 0u64, 0usize);
    let mut found = Vec::new();
    let mut next = Some(cursor);
    if cursor == 0 {
        // Keys this transaction (a `MULTI`/`EXEC`) created: not in the store's buckets yet.
        for skey in tx.buffered_new_keys()? {
            if let Some(key) = filter.pass(tx, &skey)? {
                write::bulk(&mut found, key);
                n += 1;
            }
        }
    }
    while read < count && slots < max_slots {
        let (batch, after) = tx.scan_slots(cursor, 1)?;
        (slots, read) = (slots + 1, read + batch.len() as u64);
        for skey in &batch {
            if let Some(key) = filter.pass(tx, skey)? {
                write::bulk(&mut found, key);
                n += 1;
            }
        }
        next = after;
        match after {
            Some(slot) => cursor = slot,
            None => break,
        }
    }
    write::array(out, 2);
    write::bulk(out, next.unwrap_or(0).to_string().as_bytes());
    write::array(out, n);
    out.extend_from_slice(&found);
    Ok(())
}

/// `RANDOMKEY`: a live key of the database, or null when it has none. From a random slot,
/// the first bucket holding live keys of the database gives one of them at random (a key's
/// chance depends on its bucket's fill: not uniform, as Redis's is not). Nil at once when
/// `DBSIZE` is 0; else at most one pass over the directory.
pub fn randomkey(ctx: &Context, tx: &mut Tx<'_>, _args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if keyspace::key_count(tx, ctx.namespace).map_err(store_error)? == 0 {
        write::null(out, ctx.protocol);
        return Ok(());
    }
    let filter = Filter {
        namespace: ctx.namespace,
        pattern: None,
        kind: None,
        now_ms: ctx.now_ms,
    };
    let slots = tx.directory_slots();
    let start = random_u64() % slots;
    let mut cursor = start;
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
            write::bulk(out, &live[pick]);
            return Ok(());
        }
        cursor = next.unwrap_or(0);
    }
    // Only keys this transaction (a `MULTI`/`EXEC`) created, not in the buckets yet.
    for skey in tx.buffered_new_keys()? {
        if let Some(key) = filter.pass(tx, &skey)? {
            write::bulk(out, key);
            return Ok(());
        }
    }
    write::null(out, ctx.protocol);
    Ok(())
}
