//! Hash commands with Redis 7.0's semantics, replies and error texts (`t_hash.c`). A field is
//! keyed by its hash then itself (`collections`), so `HGETALL`, `HKEYS` and `HVALS` list fields
//! in hash order (Redis: its own table order; neither is insertion order past the listpack).

use tamer_store::{DbError, Tx};

use super::args::too_long;
use super::collections::{load_or_new, Lookup};
use super::numbers::{add_floats, FloatError};
use super::reply::{NAN_OR_INFINITY, NOT_FLOAT, NOT_INTEGER, OVERFLOW, SYNTAX, WRONGTYPE};
use crate::commands::Context;
use crate::keyspace::collection::{hashed_key, load, random_u64, scan_hashed, Coll, Found};
use crate::keyspace::Kind;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

fn field_key(tx: &Tx<'_>, field: &[u8]) -> Vec<u8> {
    hashed_key(tx, b"", field)
}

/// The field a map key names.
fn field_of(key: &[u8]) -> &[u8] {
    crate::keyspace::collection::element_of(key, 0)
}

/// Loads `key`'s hash (see [`super::collections::open`]).
fn read(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
    out: &mut Vec<u8>,
    absent: impl FnOnce(&mut Vec<u8>),
) -> std::result::Result<Option<Coll>, DbError> {
    super::collections::open(ctx, tx, key, Kind::Hash, lookup, out, absent)
}

/// `HSET key field value [field value ...]`: the fields added.
pub fn hset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !args.len().is_multiple_of(2) {
        write::error(out, "ERR wrong number of arguments for 'hset' command");
        return Ok(());
    }
    if let Some(added) = set_pairs(ctx, tx, args, out)? {
        write::integer(out, added as i64);
    }
    Ok(())
}

/// `HMSET key field value [field value ...]`: `OK`.
pub fn hmset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !args.len().is_multiple_of(2) {
        write::error(out, "ERR wrong number of arguments for 'hmset' command");
        return Ok(());
    }
    if set_pairs(ctx, tx, args, out)?.is_some() {
        write::simple(out, "OK");
    }
    Ok(())
}

/// Sets the pairs of `args[2..]`; the fields added (`None`: an error was written).
fn set_pairs(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> std::result::Result<Option<u64>, DbError> {
    if args[2..].chunks(2).any(|p| too_long(p[0], out)) {
        return Ok(None);
    }
    let Some(mut h) = load_or_new(ctx, tx, args[1], Kind::Hash, out)? else {
        return Ok(None);
    };
    let mut added = 0;
    for pair in args[2..].chunks(2) {
        added += u64::from(!h.put(tx, &field_key(tx, pair[0]), pair[1])?);
    }
    let n = h.len(tx)?;
    h.save(ctx, tx, args[1], n)?;
    Ok(Some(added))
}

/// `HSETNX key field value`: 1 when set, 0 when the field existed.
pub fn hsetnx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if too_long(args[2], out) {
        return Ok(());
    }
    let Some(mut h) = load_or_new(ctx, tx, args[1], Kind::Hash, out)? else {
        return Ok(());
    };
    let k = field_key(tx, args[2]);
    if h.get(tx, &k)?.is_some() {
        write::integer(out, 0);
        return Ok(());
    }
    h.put(tx, &k, args[3])?;
    let n = h.len(tx)?;
    h.save(ctx, tx, args[1], n)?;
    write::integer(out, 1);
    Ok(())
}

/// `HGET key field`.
pub fn hget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let Some(h) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
        return Ok(());
    };
    match h.get(tx, &field_key(tx, args[2]))? {
        Some(v) => write::bulk(out, &v),
        None => write::null(out, p),
    }
    Ok(())
}

/// `HMGET key field [field ...]`.
pub fn hmget(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let h = match load(ctx, tx, args[1], Kind::Hash)? {
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        Found::Absent => None,
        Found::Coll(c) => Some(c),
    };
    write::array(out, args.len() - 2);
    for f in &args[2..] {
        let v = match &h {
            Some(h) => h.get(tx, &field_key(tx, f))?,
            None => None,
        };
        match v {
            Some(v) => write::bulk(out, &v),
            None => write::null(out, ctx.protocol),
        }
    }
    Ok(())
}

/// `HDEL key field [field ...]`: the fields removed (the key goes with its last field).
pub fn hdel(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::remove_hashed(ctx, tx, args, out, Kind::Hash)
}

/// `HEXISTS key field`.
pub fn hexists(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::contains_hashed(ctx, tx, args, out, Kind::Hash)
}

/// `HLEN key`.
pub fn hlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::count_entries(ctx, tx, args, out, Kind::Hash)
}

/// `HSTRLEN key field`.
pub fn hstrlen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(h) = read(ctx, tx, args[1], Lookup::Read, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    let len = h.get(tx, &field_key(tx, args[2]))?.map_or(0, |v| v.len());
    write::integer(out, len as i64);
    Ok(())
}

/// What `HKEYS`, `HVALS` and `HGETALL` list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listing {
    Keys,
    Values,
    Both,
}

fn listing(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    what: Listing,
) -> Result {
    let p = ctx.protocol;
    let empty = |o: &mut Vec<u8>| match what {
        Listing::Both => write::map(o, 0, p),
        _ => write::array(o, 0),
    };
    let Some(h) = read(ctx, tx, args[1], Lookup::Read, out, empty)? else {
        return Ok(());
    };
    let all = h.all(tx, b"")?;
    match what {
        Listing::Both => write::map(out, all.len(), p),
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
    Ok(())
}

/// `HKEYS key`.
pub fn hkeys(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Keys)
}

/// `HVALS key`.
pub fn hvals(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Values)
}

/// `HGETALL key`.
pub fn hgetall(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    listing(ctx, tx, args, out, Listing::Both)
}

/// `HINCRBY key field increment`.
pub fn hincrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(by) = parse_i64(args[3]) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    if too_long(args[2], out) {
        return Ok(());
    }
    let Some(mut h) = load_or_new(ctx, tx, args[1], Kind::Hash, out)? else {
        return Ok(());
    };
    let k = field_key(tx, args[2]);
    let current = match h.get(tx, &k)? {
        None => 0,
        Some(v) => match parse_i64(&v) {
            Some(n) => n,
            None => {
                write::error(out, "ERR hash value is not an integer");
                return Ok(());
            }
        },
    };
    let Some(new) = current.checked_add(by) else {
        write::error(out, OVERFLOW);
        return Ok(());
    };
    h.put(tx, &k, new.to_string().as_bytes())?;
    let n = h.len(tx)?;
    h.save(ctx, tx, args[1], n)?;
    write::integer(out, new);
    Ok(())
}

/// `HINCRBYFLOAT key field increment`: computed as Redis computes it (`long double`).
pub fn hincrbyfloat(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    // The increment is checked first, as Redis does.
    if !matches!(
        add_floats(None, args[3]),
        Ok(_) | Err(FloatError::NanOrInfinity)
    ) {
        write::error(out, NOT_FLOAT);
        return Ok(());
    }
    if too_long(args[2], out) {
        return Ok(());
    }
    let Some(mut h) = load_or_new(ctx, tx, args[1], Kind::Hash, out)? else {
        return Ok(());
    };
    let k = field_key(tx, args[2]);
    let current = h.get(tx, &k)?;
    let text = match add_floats(current.as_deref(), args[3]) {
        Ok(text) => text,
        Err(FloatError::NotFloat) => {
            write::error(out, "ERR hash value is not a float");
            return Ok(());
        }
        Err(FloatError::NanOrInfinity) => {
            write::error(out, NAN_OR_INFINITY);
            return Ok(());
        }
    };
    h.put(tx, &k, &text)?;
    let n = h.len(tx)?;
    h.save(ctx, tx, args[1], n)?;
    write::bulk(out, &text);
    Ok(())
}

/// `HRANDFIELD key [count [WITHVALUES]]`: random fields; a negative count may repeat them.
pub fn hrandfield(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let Some(h) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
            return Ok(());
        };
        let n = h.len(tx)?;
        let pick = random_u64() % n.max(1);
        match h.at(tx, pick)? {
            Some((k, _)) => write::bulk(out, field_of(&k)),
            None => write::null(out, p),
        }
        return Ok(());
    }
    let with_values = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && a.eq_ignore_ascii_case(b"withvalues") => true,
        Some(_) => {
            write::error(out, SYNTAX);
            return Ok(());
        }
    };
    let Some(count) = super::args::random_count(args[2], with_values, out) else {
        return Ok(());
    };
    let Some(h) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::array(o, 0))? else {
        return Ok(());
    };
    let n = h.len(tx)?;
    let picked = crate::keyspace::collection::random_entries(tx, &h, n, count)?;
    super::reply::write_pairs(out, &picked, with_values, p, field_of);
    Ok(())
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn hscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((cursor, count, pattern)) = super::args::scan_args(args, out) else {
        return Ok(());
    };
    let Some(h) = read(
        ctx,
        tx,
        args[1],
        Lookup::Read,
        out,
        super::reply::empty_scan,
    )?
    else {
        return Ok(());
    };
    let (found, next) = if h.in_tree() {
        scan_hashed(tx, &h, b"", cursor, count)?
    } else {
        (h.all(tx, b"")?, 0) // packed: all at once, as Redis does for a listpack
    };
    let kept: Vec<_> = found
        .iter()
        .filter(|(k, _)| pattern.is_none_or(|p| crate::glob::matches(p, field_of(k))))
        .collect();
    write::array(out, 2);
    write::bulk(out, next.to_string().as_bytes());
    write::array(out, 2 * kept.len());
    for (k, v) in kept {
        write::bulk(out, field_of(k));
        write::bulk(out, v);
    }
    Ok(())
}
