//! String commands with Redis 7.0's semantics, replies and error texts (`t_string.c`).
//! Differences from Redis: a value's size is bounded by the store's `max_value_bytes` (16 MiB
//! by default) rather than `proto-max-bulk-len`; a larger one fails the command with the
//! store's error.

use tamer_store::{DbError, Tx};

use super::numbers::{add_floats, FloatError};
use super::reply::{
    bulk_or_null, fail, finish, refuse, OpError, OpResult, NAN_OR_INFINITY, NOT_FLOAT, NOT_INTEGER,
    OVERFLOW, SYNTAX, WRONGTYPE,
};
use super::spec::KeyFlags;
use super::Context;
use crate::keyspace::events::Class;
use crate::keyspace::store_error;
use crate::keyspace::{self, Entry, Kind};
use crate::resp::{parse_i64, write};

/// Redis's `proto-max-bulk-len`: the largest string `APPEND` and `SETRANGE` may make.
const MAX_STRING_BYTES: u64 = 512 << 20;

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

/// What a key holds, for a command that needs a string.
enum Found {
    Absent,
    String(Entry),
    /// Another kind: the command replies `WRONGTYPE`.
    Other,
}

impl Found {
    /// The string entry (`None`: absent), or `WRONGTYPE`.
    fn string(self) -> OpResult<Option<Entry>> {
        match self {
            Found::Absent => Ok(None),
            Found::String(e) => Ok(Some(e)),
            Found::Other => Err(OpError::WrongType),
        }
    }
}

fn find(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> DbResult<Found> {
    match keyspace::get(ctx, tx, key) {
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
fn find_read(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> DbResult<Found> {
    let found = find(ctx, tx, key)?;
    ctx.count_lookup(!matches!(found, Found::Absent), key);
    Ok(found)
}

fn store(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], entry: &Entry) -> Result {
    ctx.touch(key);
    keyspace::put(ctx, tx, key, entry).map_err(store_error)
}

/// As [`store`], for an entry keeping the expiry time `key` has now, read in this transaction
/// (already in the expiry index).
fn store_kept(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], entry: &Entry) -> Result {
    ctx.touch(key);
    keyspace::put_kept_ttl(ctx, tx, key, entry).map_err(store_error)
}

/// `GET key`.
pub(crate) fn get(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::null(out, ctx.protocol),
        Found::String(e) => write::bulk(out, &e.payload),
        Found::Other => write::error(out, WRONGTYPE),
    }
    Ok(())
}

/// `GETDEL key`.
pub(crate) fn getdel(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let taken = take(ctx, tx, args[1]);
    finish(out, taken, |out, v| {
        bulk_or_null(out, v.as_deref(), ctx.protocol)
    })
}

/// Deletes `key`'s string: its value (`None`: absent).
fn take(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<Vec<u8>>> {
    let Some(e) = find_read(ctx, tx, key)?.string()? else {
        return Ok(None);
    };
    ctx.touch(key);
    keyspace::remove(tx, ctx.namespace, key).map_err(store_error)?;
    ctx.notify(Class::Generic, "del", key);
    Ok(Some(e.payload))
}

/// `GETSET key value`: the old value; the new one without a TTL.
pub(crate) fn getset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let old = replace(ctx, tx, args[1], args[2]);
    finish(out, old, |out, v| {
        bulk_or_null(out, v.as_deref(), ctx.protocol)
    })
}

/// Sets `key`'s string to `value` (no TTL): the string it held (`None`: absent).
fn replace(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], value: &[u8]) -> OpResult<Option<Vec<u8>>> {
    let old = find_read(ctx, tx, key)?.string()?;
    store(ctx, tx, key, &Entry::string(value.to_vec(), None))?;
    ctx.notify(Class::String, "set", key);
    Ok(old.map(|e| e.payload))
}

/// `SETNX key value`: 1 when set, 0 when the key existed.
pub(crate) fn setnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let set = set_all_if_absent(ctx, tx, &args[1..])?;
    write::integer(out, i64::from(set));
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
pub(crate) fn set_key_flags(args: &[&[u8]]) -> KeyFlags {
    if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) {
        KeyFlags(KeyFlags::RW.0 | KeyFlags::ACCESS.0 | KeyFlags::UPDATE.0)
    } else {
        KeyFlags(KeyFlags::OW.0 | KeyFlags::UPDATE.0)
    }
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`.
pub(crate) fn set(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(o) = set_options(args, 3, false) else {
        return refuse(out, SYNTAX);
    };
    let expire = match option_expiry(&o, args, ctx.now_ms, "set") {
        Ok(expire) => expire,
        Err(text) => return refuse(out, &text),
    };
    let done = set_string(ctx, tx, args[1], args[2], &o, expire);
    finish(out, done, |out, done| {
        if o.get {
            bulk_or_null(out, done.old.as_deref(), ctx.protocol);
        } else if done.written {
            write::simple(out, "OK");
        } else {
            write::null(out, ctx.protocol);
        }
    })
}

/// What `SET` did: the string the key held (`None`: none) and whether it wrote.
struct SetDone {
    old: Option<Vec<u8>>,
    written: bool,
}

/// `SET`'s work: `value` at `key` as the options ask, expiring at `expire` (`None`: never, or
/// at the key's expiry with `KEEPTTL`). With `GET` the key is read as `GET` reads it and must
/// hold a string.
fn set_string(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    value: &[u8],
    o: &SetOptions,
    expire: Option<u64>,
) -> OpResult<SetDone> {
    if !(o.get || o.keepttl || o.nx || o.xx) {
        // Nothing of the old value matters: `keyspace::put` looks at its head alone.
        store(ctx, tx, key, &Entry::string(value.to_vec(), expire))?;
        notify_set(ctx, key, expire);
        return Ok(SetDone {
            old: None,
            written: true,
        });
    }
    // `SET ... GET` reads the key as `GET` does (counted); a plain `SET` only writes it.
    let found = if o.get {
        find_read(ctx, tx, key)?
    } else {
        find(ctx, tx, key)?
    };
    if o.get && matches!(found, Found::Other) {
        return Err(OpError::WrongType);
    }
    let exists = !matches!(found, Found::Absent);
    let old = match found {
        Found::String(e) => Some(e),
        _ => None,
    };
    let written = !((o.nx && exists) || (o.xx && !exists));
    if written {
        let keep = old
            .as_ref()
            .filter(|_| o.keepttl)
            .and_then(|e| e.expire_at_ms);
        let entry = Entry::string(value.to_vec(), expire.or(keep));
        if expire.is_none() && keep.is_some() {
            store_kept(ctx, tx, key, &entry)?;
        } else {
            store(ctx, tx, key, &entry)?;
        }
        notify_set(ctx, key, expire);
    }
    let old = old.map(|e| e.payload);
    Ok(SetDone { old, written })
}

/// `SET`'s keyspace events: `set`, and `expire` when it set an expiry time.
fn notify_set(ctx: &Context, key: &[u8], expire: Option<u64>) {
    ctx.notify(Class::String, "set", key);
    if expire.is_some() {
        ctx.notify(Class::Generic, "expire", key);
    }
}

/// `MGET key [key ...]`: a nil for each key that is absent or not a string.
pub(crate) fn mget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
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
pub(crate) fn mset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args.len().is_multiple_of(2) {
        return refuse(out, "ERR wrong number of arguments for 'mset' command");
    }
    set_all(ctx, tx, &args[1..])?;
    write::simple(out, "OK");
    Ok(())
}

/// `MSETNX key value [key value ...]`: 1 and every key set, or 0 and none when any exists.
pub(crate) fn msetnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args.len().is_multiple_of(2) {
        return refuse(out, "ERR wrong number of arguments for 'msetnx' command");
    }
    let set = set_all_if_absent(ctx, tx, &args[1..])?;
    write::integer(out, i64::from(set));
    Ok(())
}

/// Sets the strings of `pairs` (key, value, key, value ...), their TTLs cleared.
fn set_all(ctx: &Context, tx: &mut Tx<'_>, pairs: &[&[u8]]) -> Result {
    for pair in pairs.chunks(2) {
        store(ctx, tx, pair[0], &Entry::string(pair[1].to_vec(), None))?;
        ctx.notify(Class::String, "set", pair[0]);
    }
    Ok(())
}

/// [`set_all`] unless any of the keys exists (holding any type): whether it set them.
fn set_all_if_absent(ctx: &Context, tx: &mut Tx<'_>, pairs: &[&[u8]]) -> DbResult<bool> {
    for pair in pairs.chunks(2) {
        if !matches!(find(ctx, tx, pair[0])?, Found::Absent) {
            return Ok(false);
        }
    }
    set_all(ctx, tx, pairs)?;
    Ok(true)
}

/// `INCR key`.
pub(crate) fn incr(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, add_integer(ctx, tx, args[1], 1), write::integer)
}

/// `DECR key`.
pub(crate) fn decr(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, add_integer(ctx, tx, args[1], -1), write::integer)
}

/// `INCRBY key increment`.
pub(crate) fn incrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(by) = parse_i64(args[2]) else {
        return refuse(out, NOT_INTEGER);
    };
    finish(out, add_integer(ctx, tx, args[1], by), write::integer)
}

/// `DECRBY key decrement`.
pub(crate) fn decrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let by = match parse_i64(args[2]) {
        Some(i64::MIN) => return refuse(out, "ERR decrement would overflow"),
        Some(by) => -by,
        None => return refuse(out, NOT_INTEGER),
    };
    finish(out, add_integer(ctx, tx, args[1], by), write::integer)
}

/// Adds `by` to the integer `key` holds (0 when absent), keeping its TTL: the sum.
fn add_integer(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], by: i64) -> OpResult<i64> {
    let (current, ttl) = match find(ctx, tx, key)?.string()? {
        None => (0, None),
        Some(e) => {
            let n = parse_i64(&e.payload).ok_or(OpError::Error(NOT_INTEGER))?;
            (n, e.expire_at_ms)
        }
    };
    let new = current.checked_add(by).ok_or(OpError::Error(OVERFLOW))?;
    let entry = Entry::string(new.to_string().into_bytes(), ttl);
    store_kept(ctx, tx, key, &entry)?;
    ctx.notify(Class::String, "incrby", key);
    Ok(new)
}

/// `INCRBYFLOAT key increment`: the new value as a bulk string; the key's expiry kept.
pub(crate) fn incrbyfloat(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let sum = add_float(ctx, tx, args[1], args[2]);
    finish(out, sum, |out, text| write::bulk(out, &text))
}

/// Adds the float `incr` to the float `key` holds (0 when absent), keeping its TTL: the
/// sum's text.
fn add_float(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], incr: &[u8]) -> OpResult<Vec<u8>> {
    let (current, ttl) = match find(ctx, tx, key)?.string()? {
        None => (None, None),
        Some(e) => (Some(e.payload), e.expire_at_ms),
    };
    let text = add_floats(current.as_deref(), incr).map_err(|err| match err {
        FloatError::NotFloat => OpError::Error(NOT_FLOAT),
        FloatError::NanOrInfinity => OpError::Error(NAN_OR_INFINITY),
    })?;
    let entry = Entry::string(text, ttl);
    store(ctx, tx, key, &entry)?;
    ctx.notify(Class::String, "incrbyfloat", key);
    Ok(entry.payload)
}

/// `APPEND key value`: the new length (the key made if absent, its TTL kept).
pub(crate) fn append(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, append_to(ctx, tx, args[1], args[2]), write::integer)
}

/// Appends `piece` to `key`'s string (made when absent, its TTL kept): the new length.
fn append_to(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], piece: &[u8]) -> OpResult<i64> {
    let (mut value, ttl) = match find(ctx, tx, key)?.string()? {
        None => (Vec::new(), None),
        Some(e) => (e.payload, e.expire_at_ms),
    };
    check_size(ctx, value.len() as u64 + piece.len() as u64)?;
    value.extend_from_slice(piece);
    let len = value.len() as i64;
    store_kept(ctx, tx, key, &Entry::string(value, ttl))?;
    ctx.notify(Class::String, "append", key);
    Ok(len)
}

/// Refuses a string of `len` bytes that `APPEND` or `SETRANGE` would build: past
/// `proto-max-bulk-len` with Redis's text, past the store's largest value before any byte of
/// it is allocated (a small `SETRANGE` could otherwise ask for 512 MiB).
fn check_size(ctx: &Context, len: u64) -> OpResult<()> {
    if len > MAX_STRING_BYTES {
        return Err(OpError::Error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    if len > ctx.max_value_bytes as u64 {
        return Err(OpError::Text(format!(
            "ERR string of {len} bytes exceeds the store's largest value ({} bytes)",
            ctx.max_value_bytes
        )));
    }
    Ok(())
}

/// `STRLEN key`.
pub(crate) fn strlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match find_read(ctx, tx, args[1])? {
        Found::Absent => write::integer(out, 0),
        Found::String(e) => write::integer(out, e.payload.len() as i64),
        Found::Other => write::error(out, WRONGTYPE),
    }
    Ok(())
}

/// `GETRANGE key start end` (inclusive, negative from the end), as Redis 7.0 clamps it.
pub(crate) fn getrange(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let (Some(start), Some(end)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return refuse(out, NOT_INTEGER);
    };
    let value = find_read(ctx, tx, args[1])?.string();
    finish(out, value, |out, e| {
        let value = e.map(|e| e.payload).unwrap_or_default();
        write::bulk(out, substring(&value, start, end));
    })
}

/// The bytes `start..=end` of `value` as `GETRANGE` clamps them (negative from the end).
fn substring(value: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        return b"";
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
        b""
    } else {
        &value[start as usize..=end as usize]
    }
}

/// `SETRANGE key offset value`: the new length (zero-padded; its TTL kept).
pub(crate) fn setrange(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let Some(offset) = parse_i64(args[2]) else {
        return refuse(out, NOT_INTEGER);
    };
    if offset < 0 {
        return refuse(out, "ERR offset is out of range");
    }
    finish(
        out,
        overwrite(ctx, tx, args[1], offset as u64, args[3]),
        write::integer,
    )
}

/// Writes `piece` into `key`'s string at `offset` (zero-padded; made when absent unless
/// `piece` is empty, its TTL kept): the new length.
fn overwrite(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    offset: u64,
    piece: &[u8],
) -> OpResult<i64> {
    let found = find(ctx, tx, key)?.string()?;
    if piece.is_empty() {
        return Ok(found.map_or(0, |e| e.payload.len() as i64));
    }
    let (mut value, ttl) = match found {
        None => (Vec::new(), None),
        Some(e) => (e.payload, e.expire_at_ms),
    };
    let end = offset + piece.len() as u64;
    check_size(ctx, end)?;
    if value.len() < end as usize {
        value.resize(end as usize, 0);
    }
    value[offset as usize..end as usize].copy_from_slice(piece);
    let len = value.len() as i64;
    store_kept(ctx, tx, key, &Entry::string(value, ttl))?;
    ctx.notify(Class::String, "setrange", key);
    Ok(len)
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
    let at = match expire_at_ms(unit, args[2], ctx.now_ms, &command) {
        Ok(at) => at,
        Err(text) => return refuse(out, &text),
    };
    store(ctx, tx, args[1], &Entry::string(args[3].to_vec(), Some(at)))?;
    ctx.notify(Class::String, "set", args[1]);
    ctx.notify(Class::Generic, "expire", args[1]);
    write::simple(out, "OK");
    Ok(())
}

/// `SETEX key seconds value`.
pub(crate) fn setex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setex_generic(ctx, tx, args, out, "ex")
}

/// `PSETEX key milliseconds value`.
pub(crate) fn psetex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setex_generic(ctx, tx, args, out, "px")
}

/// `GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]`: the value, its expiry changed (a
/// time already past deletes the key).
pub(crate) fn getex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(o) = set_options(args, 2, true) else {
        return refuse(out, SYNTAX);
    };
    let expire = option_expiry(&o, args, ctx.now_ms, "getex");
    let value = get_and_expire(ctx, tx, args[1], expire, o.persist);
    finish(out, value, |out, v| {
        bulk_or_null(out, v.as_deref(), ctx.protocol)
    })
}

/// `GETEX`'s work: `key`'s string (`None`: absent), its expiry then set to `expire` (a time
/// already past deletes the key) or, `persist`, removed. `expire` is the expiry's value or
/// its error's text, refused in Redis 7.0's order: after the key's absence and type.
fn get_and_expire(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    expire: std::result::Result<Option<u64>, String>,
    persist: bool,
) -> OpResult<Option<Vec<u8>>> {
    let Some(mut e) = find_read(ctx, tx, key)?.string()? else {
        return Ok(None);
    };
    match expire.map_err(OpError::Text)? {
        Some(at) if at <= ctx.now_ms => {
            ctx.touch(key);
            keyspace::remove(tx, ctx.namespace, key).map_err(store_error)?;
            ctx.notify(Class::Generic, "del", key);
        }
        Some(at) => {
            e.expire_at_ms = Some(at);
            store(ctx, tx, key, &e)?;
            ctx.notify(Class::Generic, "expire", key);
        }
        None if persist && e.expire_at_ms.is_some() => {
            e.expire_at_ms = None;
            store(ctx, tx, key, &e)?;
            ctx.notify(Class::Generic, "persist", key);
        }
        None => {}
    }
    Ok(Some(e.payload))
}

/// Most bytes of `LCS`'s table (Redis allows up to `proto-max-bulk-len`, 512 MiB, per call;
/// tamer keeps one client's transient memory smaller: two 4 KiB strings need 64 MiB).
const MAX_LCS_TABLE_BYTES: u64 = 64 << 20;

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`: the longest common
/// subsequence, its length, or its matching ranges, exactly as Redis 7.0 computes and orders
/// them (`t_string.c`, `lcsCommand`).
pub(crate) fn lcs(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let options = lcs_options(args);
    // As Redis: the keys' types first, then the options.
    let (a, b) = match lcs_strings(ctx, tx, args[1], args[2]) {
        Ok(strings) => strings,
        Err(err) => return fail(out, err),
    };
    let o = match options {
        Ok(o) => o,
        Err(text) => return refuse(out, text),
    };
    let found = longest_common(&a, &b, &o);
    finish(out, found, |out, found| {
        write_lcs(out, &found, &o, ctx.protocol)
    })
}

/// `LCS`'s options.
#[derive(Clone, Copy, Debug, Default)]
struct LcsOptions {
    /// `IDX`: the matching ranges.
    idx: bool,
    /// `LEN`: the length only.
    len: bool,
    /// `WITHMATCHLEN`: each range's length too.
    withmatchlen: bool,
    /// `MINMATCHLEN`: the shortest range listed.
    minmatchlen: i64,
}

/// Parses `LCS`'s options from `args[3..]`, or the error's text.
fn lcs_options(args: &[&[u8]]) -> std::result::Result<LcsOptions, &'static str> {
    let mut o = LcsOptions::default();
    let mut j = 3;
    // Bounded: every pass consumes one or two arguments.
    while j < args.len() {
        let more = j + 1 < args.len();
        match &args[j].to_ascii_lowercase()[..] {
            b"idx" => o.idx = true,
            b"len" => o.len = true,
            b"withmatchlen" => o.withmatchlen = true,
            b"minmatchlen" if more => {
                o.minmatchlen = parse_i64(args[j + 1]).ok_or(NOT_INTEGER)?.max(0);
                j += 1;
            }
            _ => return Err(SYNTAX),
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err("ERR If you want both the length and indexes, please just use IDX.");
    }
    Ok(o)
}

/// The strings `LCS` compares (an absent key is empty), read as `GET` reads them.
fn lcs_strings(ctx: &Context, tx: &mut Tx<'_>, a: &[u8], b: &[u8]) -> OpResult<(Vec<u8>, Vec<u8>)> {
    match (find_read(ctx, tx, a)?, find_read(ctx, tx, b)?) {
        (Found::Other, _) | (_, Found::Other) => Err(OpError::Error(
            "ERR The specified keys must contain string values",
        )),
        (x, y) => {
            let bytes = |f: Found| match f {
                Found::String(e) => e.payload,
                _ => Vec::new(),
            };
            Ok((bytes(x), bytes(y)))
        }
    }
}

/// A matching range of `LCS IDX`: where it starts and ends in each string (inclusive), and
/// its length.
type LcsRange = (usize, usize, usize, usize, i64);

/// What `LCS` found.
struct Lcs {
    /// The subsequence (empty with `LEN` alone).
    text: Vec<u8>,
    /// Its length.
    len: u32,
    /// The matching ranges, last first (with `IDX`).
    ranges: Vec<LcsRange>,
}

/// The longest common subsequence of `a` and `b` as Redis 7.0 computes it; refused when its
/// table would pass [`MAX_LCS_TABLE_BYTES`].
fn longest_common(a: &[u8], b: &[u8], o: &LcsOptions) -> OpResult<Lcs> {
    let table_bytes = (a.len() as u64 + 1) * (b.len() as u64 + 1) * 4;
    if table_bytes > MAX_LCS_TABLE_BYTES {
        return Err(OpError::Error(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let dp = lcs_table(a, b);
    Ok(lcs_walk(a, b, &dp, o))
}

/// The dynamic programming table: entry `i * (b.len() + 1) + j` is the length of the longest
/// common subsequence of `a[..i]` and `b[..j]`.
fn lcs_table(a: &[u8], b: &[u8]) -> Vec<u32> {
    let (alen, blen) = (a.len(), b.len());
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
    dp
}

/// Walks the table back from its end as Redis does: the subsequence and its matching ranges
/// (those of `MINMATCHLEN` or more), the last range first.
fn lcs_walk(a: &[u8], b: &[u8], dp: &[u32], o: &LcsOptions) -> Lcs {
    let (alen, blen) = (a.len(), b.len());
    let width = blen + 1;
    let total = dp[alen * width + blen];
    let computelcs = o.idx || !o.len;
    let mut text = vec![0u8; if computelcs { total as usize } else { 0 }];
    let mut ranges = Vec::new();
    let mut idx = total as usize;
    // `alen` as the start means "no range open", as in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    let (mut i, mut j) = (alen, blen);
    // Bounded: every pass lowers `i` or `j`.
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            text[idx - 1] = a[i - 1];
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
            if o.minmatchlen == 0 || match_len >= o.minmatchlen {
                ranges.push((a_start, a_end, b_start, b_end, match_len));
            }
            a_start = alen;
        }
    }
    Lcs {
        text,
        len: total,
        ranges,
    }
}

/// `LCS`'s reply: the ranges and length (`IDX`), the length (`LEN`), or the subsequence.
fn write_lcs(out: &mut Vec<u8>, found: &Lcs, o: &LcsOptions, protocol: crate::resp::Protocol) {
    if o.idx {
        write::map(out, 2, protocol);
        write::bulk(out, b"matches");
        write::array(out, found.ranges.len());
        for &(a0, a1, b0, b1, len) in &found.ranges {
            write::array(out, 2 + usize::from(o.withmatchlen));
            write::array(out, 2);
            write::integer(out, a0 as i64);
            write::integer(out, a1 as i64);
            write::array(out, 2);
            write::integer(out, b0 as i64);
            write::integer(out, b1 as i64);
            if o.withmatchlen {
                write::integer(out, len);
            }
        }
        write::bulk(out, b"len");
        write::integer(out, i64::from(found.len));
    } else if o.len {
        write::integer(out, i64::from(found.len));
    } else {
        write::bulk(out, &found.text);
    }
}
