//! Hash commands with Redis 7.0's semantics, replies and error texts (`t_hash.c`). A field is
//! keyed by its hash then itself (`collections`), so `HGETALL`, `HKEYS` and `HVALS` list fields
//! in hash order (Redis: its own table order; neither is insertion order past the listpack).

use tamer_store::{DbError, Tx};

use super::args::{random_count, scan_cursor, too_long};
use super::collections::{self, existing, or_new, Lookup};
use super::numbers::{add_floats, FloatError};
use super::reply::{
    bulk_or_null, fail, finish, refuse, scan_header, write_pairs, OpError, OpResult,
    NAN_OR_INFINITY, NOT_FLOAT, NOT_INTEGER, OVERFLOW, SYNTAX,
};
use super::Context;
use crate::keyspace::collection::{element_of, hashed_key, Coll};
use crate::keyspace::events::Class;
use crate::keyspace::Kind;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

fn field_key(tx: &Tx<'_>, field: &[u8]) -> Vec<u8> {
    hashed_key(tx, b"", field)
}

/// The field a map key names.
fn field_of(key: &[u8]) -> &[u8] {
    element_of(key, 0)
}

/// `HSET key field value [field value ...]`: the fields added.
pub(crate) fn hset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !args.len().is_multiple_of(2) {
        return refuse(out, "ERR wrong number of arguments for 'hset' command");
    }
    if args[2..].chunks(2).any(|p| too_long(p[0], out)) {
        return Ok(());
    }
    let added = set_fields(ctx, tx, args[1], &args[2..]);
    finish(out, added, |out, added| write::integer(out, added as i64))
}

/// `HMSET key field value [field value ...]`: `OK`.
pub(crate) fn hmset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !args.len().is_multiple_of(2) {
        return refuse(out, "ERR wrong number of arguments for 'hmset' command");
    }
    if args[2..].chunks(2).any(|p| too_long(p[0], out)) {
        return Ok(());
    }
    let added = set_fields(ctx, tx, args[1], &args[2..]);
    finish(out, added, |out, _| write::simple(out, "OK"))
}

/// Sets the fields of `pairs` (field, value, field, value ...) in `key`'s hash (made when
/// absent): the fields added.
fn set_fields(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], pairs: &[&[u8]]) -> OpResult<u64> {
    let mut h = or_new(ctx, tx, key, Kind::Hash)?;
    let mut added = 0;
    for pair in pairs.chunks(2) {
        added += u64::from(!h.put(tx, &field_key(tx, pair[0]), pair[1])?);
    }
    save(ctx, tx, key, h)?;
    ctx.notify(Class::Hash, "hset", key);
    Ok(added)
}

/// Saves a changed hash (its key deleted when empty).
fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], h: Coll) -> Result {
    let n = h.len(tx)?;
    h.save(ctx, tx, key, n)
}

/// `HSETNX key field value`: 1 when set, 0 when the field existed.
pub(crate) fn hsetnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if too_long(args[2], out) {
        return Ok(());
    }
    let set = set_field_if_absent(ctx, tx, args[1], args[2], args[3]);
    finish(out, set, |out, set| write::integer(out, i64::from(set)))
}

/// Sets `field` of `key`'s hash (made when absent) unless it exists: whether it did.
fn set_field_if_absent(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    field: &[u8],
    value: &[u8],
) -> OpResult<bool> {
    let mut h = or_new(ctx, tx, key, Kind::Hash)?;
    let k = field_key(tx, field);
    if h.get(tx, &k)?.is_some() {
        return Ok(false);
    }
    h.put(tx, &k, value)?;
    save(ctx, tx, key, h)?;
    ctx.notify(Class::Hash, "hset", key);
    Ok(true)
}

/// `HGET key field`.
pub(crate) fn hget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let value = field(ctx, tx, args[1], args[2]);
    finish(out, value, |out, v| {
        bulk_or_null(out, v.as_deref(), ctx.protocol)
    })
}

/// `HSTRLEN key field`.
pub(crate) fn hstrlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let value = field(ctx, tx, args[1], args[2]);
    finish(out, value, |out, v| {
        write::integer(out, v.map_or(0, |v| v.len()) as i64);
    })
}

/// The value of `field` in `key`'s hash (`None`: either is absent; a read lookup).
fn field(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], field: &[u8]) -> OpResult<Option<Vec<u8>>> {
    let Some(h) = existing(ctx, tx, key, Kind::Hash, Lookup::Read)? else {
        return Ok(None);
    };
    Ok(h.get(tx, &field_key(tx, field))?)
}

/// `HMGET key field [field ...]`: each value read as the reply goes.
pub(crate) fn hmget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let h = match existing(ctx, tx, args[1], Kind::Hash, Lookup::Read) {
        Ok(h) => h,
        Err(err) => return fail(out, err),
    };
    write::array(out, args.len() - 2);
    for f in &args[2..] {
        let v = match &h {
            Some(h) => h.get(tx, &field_key(tx, f))?,
            None => None,
        };
        bulk_or_null(out, v.as_deref(), ctx.protocol);
    }
    Ok(())
}

/// `HDEL key field [field ...]`: the fields removed (the key goes with its last field).
pub(crate) fn hdel(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::remove_hashed(ctx, tx, args, out, Kind::Hash)
}

/// `HEXISTS key field`.
pub(crate) fn hexists(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::contains_hashed(ctx, tx, args, out, Kind::Hash)
}

/// `HLEN key`.
pub(crate) fn hlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::count_entries(ctx, tx, args, out, Kind::Hash)
}

/// What `HKEYS`, `HVALS` and `HGETALL` list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listing {
    Keys,
    Values,
    Both,
}

/// `HKEYS`, `HVALS`, `HGETALL key`: every field, value, or both (a map).
fn listing(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    what: Listing,
) -> Result {
    let all = collections::entries(ctx, tx, args[1], Kind::Hash, b"");
    finish(out, all, |out, all| {
        match what {
            Listing::Both => write::map(out, all.len(), ctx.protocol),
            _ => write::array(out, all.len()),
        }
        for (k, v) in &all {
            if what != Listing::Values {
                write::bulk(out, field_of(k));
            }
            if what != Listing::Keys {
                write::bulk(out, v);
            }
        }
    })
}

/// `HKEYS key`.
pub(crate) fn hkeys(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Keys)
}

/// `HVALS key`.
pub(crate) fn hvals(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Values)
}

/// `HGETALL key`.
pub(crate) fn hgetall(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Both)
}

/// `HINCRBY key field increment`.
pub(crate) fn hincrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(by) = parse_i64(args[3]) else {
        return refuse(out, NOT_INTEGER);
    };
    if too_long(args[2], out) {
        return Ok(());
    }
    finish(
        out,
        add_integer(ctx, tx, args[1], args[2], by),
        write::integer,
    )
}

/// Adds `by` to the integer in `field` of `key`'s hash (0 when absent): the sum.
fn add_integer(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], field: &[u8], by: i64) -> OpResult<i64> {
    let mut h = or_new(ctx, tx, key, Kind::Hash)?;
    let k = field_key(tx, field);
    let current = match h.get(tx, &k)? {
        None => 0,
        Some(v) => parse_i64(&v).ok_or(OpError::Error("ERR hash value is not an integer"))?,
    };
    let new = current.checked_add(by).ok_or(OpError::Error(OVERFLOW))?;
    h.put(tx, &k, new.to_string().as_bytes())?;
    save(ctx, tx, key, h)?;
    ctx.notify(Class::Hash, "hincrby", key);
    Ok(new)
}

/// `HINCRBYFLOAT key field increment`: computed as Redis computes it (`long double`).
pub(crate) fn hincrbyfloat(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    // The increment is checked first, as Redis does (an infinite one is refused).
    match add_floats(None, args[3]) {
        Ok(_) => {}
        Err(FloatError::NanOrInfinity) => return refuse(out, "ERR value is NaN or Infinity"),
        Err(FloatError::NotFloat) => return refuse(out, NOT_FLOAT),
    }
    if too_long(args[2], out) {
        return Ok(());
    }
    let sum = add_float(ctx, tx, args[1], args[2], args[3]);
    finish(out, sum, |out, text| write::bulk(out, &text))
}

/// Adds the float `incr` to the float in `field` of `key`'s hash (0 when absent): the sum's
/// text.
fn add_float(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    field: &[u8],
    incr: &[u8],
) -> OpResult<Vec<u8>> {
    let mut h = or_new(ctx, tx, key, Kind::Hash)?;
    let k = field_key(tx, field);
    let current = h.get(tx, &k)?;
    let text = add_floats(current.as_deref(), incr).map_err(|err| match err {
        FloatError::NotFloat => OpError::Error("ERR hash value is not a float"),
        FloatError::NanOrInfinity => OpError::Error(NAN_OR_INFINITY),
    })?;
    h.put(tx, &k, &text)?;
    save(ctx, tx, key, h)?;
    ctx.notify(Class::Hash, "hincrbyfloat", key);
    Ok(text)
}

/// `HRANDFIELD key [count [WITHVALUES]]`: random fields; a negative count may repeat them.
pub(crate) fn hrandfield(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let picked = collections::random_key(ctx, tx, args[1], Kind::Hash);
        return finish(out, picked, |out, k| {
            bulk_or_null(out, k.as_deref().map(field_of), p);
        });
    }
    let with_values = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && a.eq_ignore_ascii_case(b"withvalues") => true,
        Some(_) => return refuse(out, SYNTAX),
    };
    let Some(count) = random_count(args[2], with_values, out) else {
        return Ok(());
    };
    let picked = collections::random_picks(ctx, tx, args[1], Kind::Hash, count);
    finish(out, picked, |out, picked| {
        write_pairs(out, &picked, with_values, p, field_of);
    })
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`.
pub(crate) fn hscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(cursor) = scan_cursor(args, out) else {
        return Ok(());
    };
    let page = collections::scan_elements(ctx, tx, args[1], Kind::Hash, b"", args, cursor);
    finish(out, page, |out, (found, next)| {
        scan_header(out, next, 2 * found.len());
        for (k, v) in &found {
            write::bulk(out, field_of(k));
            write::bulk(out, v);
        }
    })
}
