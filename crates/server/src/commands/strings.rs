//! String commands with Redis 7.0's semantics, replies and error texts (`t_string.c`).
//! Differences from Redis: a value's size is bounded by the store's `max_value_bytes` (16 MiB
//! by default) rather than `proto-max-bulk-len`; a larger one fails the command with the
//! store's error.

use tamer_store::{DbError, Tx};

use super::numbers::{add_floats, FloatError};
use super::reply::{NAN_OR_INFINITY, NOT_FLOAT, NOT_INTEGER, OVERFLOW, SYNTAX, WRONGTYPE};
use super::spec::KeyFlags;
use super::Context;
use crate::keyspace::store_error;
use crate::keyspace::{self, Entry, Kind};
use crate::resp::{parse_i64, write};

/// Redis's `proto-max-bulk-len`: the largest string `APPEND` and `SETRANGE` may make.
const MAX_STRING_BYTES: u64 = 512 << 20;

type Result = std::result::Result<(), DbError>;

/// What a key holds, for a command that needs a string.
enum Found {
    Absent,
    String(Entry),
    /// Another kind: the command replies `WRONGTYPE`.
    Other,
}

fn find(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> std::result::Result<Found, DbError> {
    match keyspace::get(tx, ctx.namespace, key, ctx.now_ms) {
        Ok(None) => Ok(Found::Absent),
        Ok(Some(e)) if e.kind == Kind::String => Ok(Found::String(e)),
        Ok(Some(_)) => Ok(Found::Other),
        Err(keyspace::KeyspaceError::Store(err)) => Err(err),
        // A value the keyspace cannot read is no string: refused, never overwritten blindly.
        Err(_) => Ok(Found::Other),
    }
}

/// As [`find`] for a command that reads the key (Redis's `lookupKeyRead`): counted in
/// `keyspace_hits`/`misses` (a value of another type is a hit).
fn find_read(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> std::result::Result<Found, DbError> {
    let found = find(ctx, tx, key)?;
    ctx.count_lookup(!matches!(found, Found::Absent));
    Ok(found)
}

fn store(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], entry: &Entry) -> Result {
    ctx.touch(key);
    keyspace::put(tx, ctx.namespace, key, entry).map_err(store_error)
}

/// As [`store`], for an entry keeping the expiry time `key` has now, read in this transaction
/// (already in the expiry index).
fn store_kept(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], entry: &Entry) -> Result {
    ctx.touch(key);
    keyspace::put_kept_ttl(tx, ctx.namespace, key, entry).map_err(store_error)
}

/// `GET key`.
pub fn get(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::null(out, ctx.protocol),
        Found::String(e) => write::bulk(out, &e.payload),
        Found::Other => write::error(out, WRONGTYPE),
    }
    Ok(())
}

/// `GETDEL key`.
pub fn getdel(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::null(out, ctx.protocol),
        Found::String(e) => {
            ctx.touch(args[1]);
            keyspace::remove(tx, ctx.namespace, args[1]).map_err(store_error)?;
            write::bulk(out, &e.payload);
        }
        Found::Other => write::error(out, WRONGTYPE),
    }
    Ok(())
}

/// `GETSET key value`: the old value; the new one without a TTL.
pub fn getset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let mut reply = Vec::new();
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::null(&mut reply, ctx.protocol),
        Found::String(e) => write::bulk(&mut reply, &e.payload),
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    }
    store(ctx, tx, args[1], &Entry::string(args[2].to_vec(), None))?;
    out.extend_from_slice(&reply);
    Ok(())
}

/// `SETNX key value`: 1 when set, 0 when the key existed.
pub fn setnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let exists = keyspace::get(tx, ctx.namespace, args[1], ctx.now_ms)
        .map(|e| e.is_some())
        .or_else(|e| match e {
            keyspace::KeyspaceError::Store(err) => Err(err),
            _ => Ok(true),
        })?;
    if !exists {
        store(ctx, tx, args[1], &Entry::string(args[2].to_vec(), None))?;
    }
    write::integer(out, i64::from(!exists));
    Ok(())
}

/// The options of `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`
/// and of `GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// The expiry option (`"ex"`, ...) and the index of its value.
    expire: Option<(&'static str, usize)>,
}

/// Parses the options from `args[first..]` as Redis 7.0's `parseExtendedStringArgumentsOrReply`
/// does for `SET` (`getex` false) or `GETEX` (true): an expiry option may repeat, the last one
/// counting; `NX` and `XX`, an expiry and `KEEPTTL` or `PERSIST`, exclude each other.
fn set_options(args: &[&[u8]], first: usize, getex: bool) -> Option<SetOptions> {
    let mut o = SetOptions::default();
    let mut j = first;
    // Bounded: every pass consumes one or two arguments.
    while j < args.len() {
        let opt = args[j].to_ascii_lowercase();
        let has_next = j + 1 < args.len();
        let other_expiry = |name: &str| o.expire.is_some_and(|(n, _)| n != name);
        match &opt[..] {
            b"nx" if !o.xx && !getex => o.nx = true,
            b"xx" if !o.nx && !getex => o.xx = true,
            b"get" if !getex => o.get = true,
            b"keepttl" if o.expire.is_none() && !getex => o.keepttl = true,
            b"persist" if o.expire.is_none() && getex => o.persist = true,
            b"ex" | b"px" | b"exat" | b"pxat" => {
                let name = match &opt[..] {
                    b"ex" => "ex",
                    b"px" => "px",
                    b"exat" => "exat",
                    _ => "pxat",
                };
                if o.keepttl || o.persist || other_expiry(name) || !has_next {
                    return None;
                }
                o.expire = Some((name, j + 1));
                j += 1;
            }
            _ => return None,
        }
        j += 1;
    }
    Some(o)
}

/// The absolute expiry time in ms of `SET`'s option `name` with value `arg`, or the error
/// reply's text.
fn expire_at_ms(
    name: &str,
    arg: &[u8],
    now_ms: u64,
    command: &str,
) -> std::result::Result<u64, String> {
    let invalid = || format!("ERR invalid expire time in '{command}' command");
    let n = parse_i64(arg).ok_or_else(|| NOT_INTEGER.to_string())?;
    if n <= 0 {
        return Err(invalid());
    }
    let ms = match name {
        "ex" | "exat" => n.checked_mul(1000).ok_or_else(invalid)?,
        _ => n,
    };
    let at = match name {
        "ex" | "px" => ms.checked_add(now_ms as i64).ok_or_else(invalid)?,
        _ => ms,
    };
    Ok(at as u64)
}

/// The absolute expiry time the options' `EX`/`PX`/`EXAT`/`PXAT` ask for (`None`: none), or
/// the error reply's text.
fn option_expiry(
    o: &SetOptions,
    args: &[&[u8]],
    now_ms: u64,
    command: &str,
) -> std::result::Result<Option<u64>, String> {
    o.expire
        .map(|(name, at)| expire_at_ms(name, args[at], now_ms, command))
        .transpose()
}

/// The flags of `SET`'s key, as Redis's `setGetKeys`: read and updated with `GET`, else
/// overwritten.
pub fn set_key_flags(args: &[&[u8]]) -> KeyFlags {
    if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) {
        KeyFlags(KeyFlags::RW.0 | KeyFlags::ACCESS.0 | KeyFlags::UPDATE.0)
    } else {
        KeyFlags(KeyFlags::OW.0 | KeyFlags::UPDATE.0)
    }
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`.
pub fn set(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(o) = set_options(args, 3, false) else {
        write::error(out, SYNTAX);
        return Ok(());
    };
    let expire = match option_expiry(&o, args, ctx.now_ms, "set") {
        Ok(expire) => expire,
        Err(text) => {
            write::error(out, &text);
            return Ok(());
        }
    };
    // `SET ... GET` reads the key as `GET` does (counted); a plain `SET` only writes it.
    let found = if o.get {
        find_read(ctx, tx, args[1])?
    } else {
        find(ctx, tx, args[1])?
    };
    if o.get {
        match &found {
            Found::Absent => write::null(out, ctx.protocol),
            Found::String(e) => write::bulk(out, &e.payload),
            Found::Other => {
                write::error(out, WRONGTYPE);
                return Ok(());
            }
        }
    }
    let exists = !matches!(found, Found::Absent);
    if (o.nx && exists) || (o.xx && !exists) {
        if !o.get {
            write::null(out, ctx.protocol);
        }
        return Ok(());
    }
    let keep = match (&found, o.keepttl) {
        (Found::String(e), true) => e.expire_at_ms,
        _ => None,
    };
    let entry = Entry::string(args[2].to_vec(), expire.or(keep));
    if expire.is_none() && keep.is_some() {
        store_kept(ctx, tx, args[1], &entry)?;
    } else {
        store(ctx, tx, args[1], &entry)?;
    }
    if !o.get {
        write::simple(out, "OK");
    }
    Ok(())
}

/// `MGET key [key ...]`: a nil for each key that is absent or not a string.
pub fn mget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::array(out, args.len() - 1);
    for key in &args[1..] {
        match find_read(ctx, tx, key)? {
            Found::String(e) => write::bulk(out, &e.payload),
            _ => write::null(out, ctx.protocol),
        }
    }
    Ok(())
}

/// `MSET key value [key value ...]`: every key set (TTLs cleared), atomically.
pub fn mset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args.len().is_multiple_of(2) {
        write::error(out, "ERR wrong number of arguments for 'mset' command");
        return Ok(());
    }
    for pair in args[1..].chunks(2) {
        ctx.touch(pair[0]);
        keyspace::put(
            tx,
            ctx.namespace,
            pair[0],
            &Entry::string(pair[1].to_vec(), None),
        )
        .map_err(store_error)?;
    }
    write::simple(out, "OK");
    Ok(())
}

/// `MSETNX key value [key value ...]`: 1 and every key set, or 0 and none when any exists.
pub fn msetnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args.len().is_multiple_of(2) {
        write::error(out, "ERR wrong number of arguments for 'msetnx' command");
        return Ok(());
    }
    for pair in args[1..].chunks(2) {
        if !matches!(find(ctx, tx, pair[0])?, Found::Absent) {
            write::integer(out, 0);
            return Ok(());
        }
    }
    for pair in args[1..].chunks(2) {
        store(ctx, tx, pair[0], &Entry::string(pair[1].to_vec(), None))?;
    }
    write::integer(out, 1);
    Ok(())
}

/// Adds `by` to the integer `key` holds (0 when absent), keeping its TTL.
fn incr_by(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], by: i64, out: &mut Vec<u8>) -> Result {
    let (current, ttl) = match find(ctx, tx, key)? {
        Found::Absent => (0, None),
        Found::String(e) => match parse_i64(&e.payload) {
            Some(n) => (n, e.expire_at_ms),
            None => {
                write::error(out, NOT_INTEGER);
                return Ok(());
            }
        },
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    let Some(new) = current.checked_add(by) else {
        write::error(out, OVERFLOW);
        return Ok(());
    };
    let entry = Entry::string(new.to_string().into_bytes(), ttl);
    store_kept(ctx, tx, key, &entry)?;
    write::integer(out, new);
    Ok(())
}

/// `INCRBYFLOAT key increment`: the new value as a bulk string; the key's expiry kept.
pub fn incrbyfloat(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (current, ttl) = match find(ctx, tx, args[1])? {
        Found::Absent => (None, None),
        Found::String(e) => (Some(e.payload), e.expire_at_ms),
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    let text = match add_floats(current.as_deref(), args[2]) {
        Ok(text) => text,
        Err(FloatError::NotFloat) => {
            write::error(out, NOT_FLOAT);
            return Ok(());
        }
        Err(FloatError::NanOrInfinity) => {
            write::error(out, NAN_OR_INFINITY);
            return Ok(());
        }
    };
    store(ctx, tx, args[1], &Entry::string(text.clone(), ttl))?;
    write::bulk(out, &text);
    Ok(())
}

/// `INCR key`.
pub fn incr(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    incr_by(ctx, tx, args[1], 1, out)
}

/// `DECR key`.
pub fn decr(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    incr_by(ctx, tx, args[1], -1, out)
}

/// `INCRBY key increment`.
pub fn incrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match parse_i64(args[2]) {
        Some(by) => incr_by(ctx, tx, args[1], by, out),
        None => {
            write::error(out, NOT_INTEGER);
            Ok(())
        }
    }
}

/// `DECRBY key decrement`.
pub fn decrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match parse_i64(args[2]) {
        Some(i64::MIN) => {
            write::error(out, "ERR decrement would overflow");
            Ok(())
        }
        Some(by) => incr_by(ctx, tx, args[1], -by, out),
        None => {
            write::error(out, NOT_INTEGER);
            Ok(())
        }
    }
}

/// `APPEND key value`: the new length (the key made if absent, its TTL kept).
pub fn append(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (mut value, ttl) = match find(ctx, tx, args[1])? {
        Found::Absent => (Vec::new(), None),
        Found::String(e) => (e.payload, e.expire_at_ms),
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    if too_long(ctx, value.len() as u64 + args[2].len() as u64, out) {
        return Ok(());
    }
    value.extend_from_slice(args[2]);
    let len = value.len() as i64;
    store_kept(ctx, tx, args[1], &Entry::string(value, ttl))?;
    write::integer(out, len);
    Ok(())
}

/// Refuses (with its error reply) a string of `len` bytes that `APPEND` or `SETRANGE` would
/// build: past `proto-max-bulk-len` with Redis's text, past the store's largest value before
/// any byte of it is allocated (a small `SETRANGE` could otherwise ask for 512 MiB).
fn too_long(ctx: &Context, len: u64, out: &mut Vec<u8>) -> bool {
    if len > MAX_STRING_BYTES {
        write::error(
            out,
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        );
        return true;
    }
    if len > ctx.max_value_bytes as u64 {
        write::error(
            out,
            &format!(
                "ERR string of {len} bytes exceeds the store's largest value ({} bytes)",
                ctx.max_value_bytes
            ),
        );
        return true;
    }
    false
}

/// `STRLEN key`.
pub fn strlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::integer(out, 0),
        Found::String(e) => write::integer(out, e.payload.len() as i64),
        Found::Other => write::error(out, WRONGTYPE),
    }
    Ok(())
}

/// `GETRANGE key start end` (inclusive, negative from the end), as Redis 7.0 clamps it.
pub fn getrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(mut start), Some(mut end)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    let value = match find_read(ctx, tx, args[1])? {
        Found::Absent => Vec::new(),
        Found::String(e) => e.payload,
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        write::bulk(out, b"");
        return Ok(());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        write::bulk(out, b"");
    } else {
        write::bulk(out, &value[start as usize..=end as usize]);
    }
    Ok(())
}

/// `SETRANGE key offset value`: the new length (zero-padded; its TTL kept).
pub fn setrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(offset) = parse_i64(args[2]) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    if offset < 0 {
        write::error(out, "ERR offset is out of range");
        return Ok(());
    }
    let piece = args[3];
    let (mut value, ttl) = match find(ctx, tx, args[1])? {
        Found::Absent if piece.is_empty() => {
            write::integer(out, 0);
            return Ok(());
        }
        Found::Absent => (Vec::new(), None),
        Found::String(e) if piece.is_empty() => {
            write::integer(out, e.payload.len() as i64);
            return Ok(());
        }
        Found::String(e) => (e.payload, e.expire_at_ms),
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    let end = offset as u64 + piece.len() as u64;
    if too_long(ctx, end, out) {
        return Ok(());
    }
    if value.len() < end as usize {
        value.resize(end as usize, 0);
    }
    value[offset as usize..end as usize].copy_from_slice(piece);
    let len = value.len() as i64;
    store_kept(ctx, tx, args[1], &Entry::string(value, ttl))?;
    write::integer(out, len);
    Ok(())
}

/// `SETEX key seconds value` (`unit` "ex") and `PSETEX key milliseconds value` ("px").
fn setex_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    unit: &str,
) -> Result {
    let command = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
    match expire_at_ms(unit, args[2], ctx.now_ms, &command) {
        Ok(at) => {
            store(ctx, tx, args[1], &Entry::string(args[3].to_vec(), Some(at)))?;
            write::simple(out, "OK");
        }
        Err(text) => write::error(out, &text),
    }
    Ok(())
}

pub fn setex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setex_generic(ctx, tx, args, out, "ex")
}

pub fn psetex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setex_generic(ctx, tx, args, out, "px")
}

/// `GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]`: the value, its expiry changed (a
/// time already past deletes the key).
pub fn getex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(o) = set_options(args, 2, true) else {
        write::error(out, SYNTAX);
        return Ok(());
    };
    // Redis 7.0's order: the options' syntax, the key (absent: nil), its type, then the
    // expiry's value.
    let mut e = match find_read(ctx, tx, args[1])? {
        Found::Absent => {
            write::null(out, ctx.protocol);
            return Ok(());
        }
        Found::String(e) => e,
        Found::Other => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
    };
    let expire = match option_expiry(&o, args, ctx.now_ms, "getex") {
        Ok(expire) => expire,
        Err(text) => {
            write::error(out, &text);
            return Ok(());
        }
    };
    write::bulk(out, &e.payload);
    match expire {
        Some(at) if at <= ctx.now_ms => {
            ctx.touch(args[1]);
            keyspace::remove(tx, ctx.namespace, args[1]).map_err(store_error)?;
        }
        Some(at) => {
            e.expire_at_ms = Some(at);
            store(ctx, tx, args[1], &e)?;
        }
        None if o.persist && e.expire_at_ms.is_some() => {
            e.expire_at_ms = None;
            store(ctx, tx, args[1], &e)?;
        }
        None => {}
    }
    Ok(())
}

/// Most bytes of `LCS`'s table (Redis allows up to `proto-max-bulk-len`, 512 MiB, per call;
/// tamer keeps one client's transient memory smaller: two 4 KiB strings need 64 MiB).
pub const MAX_LCS_TABLE_BYTES: u64 = 64 << 20;

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`: the longest common
/// subsequence, its length, or its matching ranges, exactly as Redis 7.0 computes and orders
/// them (`t_string.c`, `lcsCommand`).
pub fn lcs(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (a, b) = match (find_read(ctx, tx, args[1])?, find_read(ctx, tx, args[2])?) {
        (Found::Other, _) | (_, Found::Other) => {
            write::error(out, "ERR The specified keys must contain string values");
            return Ok(());
        }
        (x, y) => {
            let bytes = |f: Found| match f {
                Found::String(e) => e.payload,
                _ => Vec::new(),
            };
            (bytes(x), bytes(y))
        }
    };
    let (mut getidx, mut getlen, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    let mut j = 3;
    // Bounded: every pass consumes one or two arguments.
    while j < args.len() {
        let more = j + 1 < args.len();
        match &args[j].to_ascii_lowercase()[..] {
            b"idx" => getidx = true,
            b"len" => getlen = true,
            b"withmatchlen" => withmatchlen = true,
            b"minmatchlen" if more => {
                let Some(n) = parse_i64(args[j + 1]) else {
                    write::error(out, NOT_INTEGER);
                    return Ok(());
                };
                minmatchlen = n.max(0);
                j += 1;
            }
            _ => {
                write::error(out, SYNTAX);
                return Ok(());
            }
        }
        j += 1;
    }
    if getidx && getlen {
        write::error(
            out,
            "ERR If you want both the length and indexes, please just use IDX.",
        );
        return Ok(());
    }
    let (alen, blen) = (a.len(), b.len());
    let table_bytes = (alen as u64 + 1) * (blen as u64 + 1) * 4;
    if table_bytes > MAX_LCS_TABLE_BYTES {
        write::error(
            out,
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
        return Ok(());
    }
    let width = blen + 1;
    let mut dp = vec![0u32; (alen + 1) * width];
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * width + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * width + j - 1] + 1
            } else {
                dp[(i - 1) * width + j].max(dp[i * width + j - 1])
            };
        }
    }
    let total = dp[alen * width + blen];
    let computelcs = getidx || !getlen;
    let mut result = vec![0u8; if computelcs { total as usize } else { 0 }];
    let mut ranges = Vec::new();
    let mut idx = total as usize;
    // `alen` as the start means "no range open", as in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    let (mut i, mut j) = (alen, blen);
    // Bounded: every pass lowers `i` or `j`.
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * width + j] > dp[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let match_len = (a_end - a_start + 1) as i64;
            if minmatchlen == 0 || match_len >= minmatchlen {
                ranges.push((a_start, a_end, b_start, b_end, match_len));
            }
            a_start = alen;
        }
    }
    if getidx {
        write::map(out, 2, ctx.protocol);
        write::bulk(out, b"matches");
        write::array(out, ranges.len());
        for (a0, a1, b0, b1, len) in ranges {
            write::array(out, 2 + usize::from(withmatchlen));
            write::array(out, 2);
            write::integer(out, a0 as i64);
            write::integer(out, a1 as i64);
            write::array(out, 2);
            write::integer(out, b0 as i64);
            write::integer(out, b1 as i64);
            if withmatchlen {
                write::integer(out, len);
            }
        }
        write::bulk(out, b"len");
        write::integer(out, i64::from(total));
    } else if getlen {
        write::integer(out, i64::from(total));
    } else {
        write::bulk(out, &result);
    }
    Ok(())
}
