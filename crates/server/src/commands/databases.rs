//! The commands on whole databases, with Redis 7.0's semantics, replies and error texts
//! (`db.c`): `DBSIZE`, `SWAPDB`, `FLUSHDB`, `FLUSHALL`, `MOVE`, `COPY`.
//!
//! `SWAPDB`, `FLUSHDB` and `FLUSHALL` change the database map: they run with its gate held
//! exclusively (`crate::keyspace::dbmap`), write the `databases` record in their transaction and leave
//! the new map in [`Context::map`] for the caller to publish once it commits (and for the
//! rest of a `MULTI`/`EXEC` to use). `FLUSHDB` and `FLUSHALL` take O(1) time whatever the
//! databases hold, with or without `ASYNC`/`SYNC`: the old keys become unreachable at once and
//! are reclaimed in the background (`keyspace::reclaim_step`).

use tamer_store::{DbError, Tx};

use super::reply::{finish, refuse, OpError, OpResult, NOT_INTEGER, SYNTAX};
use super::Context;
use crate::keyspace::events::Class;
use crate::keyspace::{self, Databases, KeyspaceError, DATABASES};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

const OUT_OF_RANGE: &str = "ERR DB index is out of range";
const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// A database index as Redis's `getIntFromObjectOrReply` reads it (an `int`), or `None`.
fn parse_index(arg: &[u8]) -> Option<i64> {
    parse_i64(arg).filter(|n| i32::try_from(*n).is_ok())
}

/// A database number in range, or the error reply written (Redis's texts for no integer,
/// no `int`, and no database).
fn database(arg: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    match parse_i64(arg) {
        None => write::error(out, NOT_INTEGER),
        Some(n) if i32::try_from(n).is_err() => write::error(
            out,
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ),
        Some(n) if !(0..DATABASES as i64).contains(&n) => write::error(out, OUT_OF_RANGE),
        Some(n) => return Some(n as usize),
    }
    None
}

/// `DBSIZE`: the keys of the client's database, from its count records (O(1)).
pub(crate) fn dbsize(ctx: &Context, tx: &mut Tx<'_>, _args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let n = keyspace::key_count(tx, ctx.namespace).map_err(OpError::keyspace);
    finish(out, n, |out, n| write::integer(out, n as i64))
}

/// The map's change, after the `databases` record was written in `tx`: the map as the record
/// says, in the context for the caller to publish.
fn reload_map(ctx: &Context, tx: &mut Tx<'_>) -> std::result::Result<(), KeyspaceError> {
    assert!(
        ctx.map_exclusive,
        "a map command runs with the map's gate held exclusively"
    );
    ctx.map.set(Databases::load(tx)?.namespaces);
    Ok(())
}

/// Writes `OK` for a map command that changed the map.
fn ok(out: &mut Vec<u8>, (): ()) {
    write::simple(out, "OK");
}

/// `SWAPDB index1 index2`.
pub(crate) fn swapdb(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(a) = parse_index(args[1]) else {
        return refuse(out, "ERR invalid first DB index");
    };
    let Some(b) = parse_index(args[2]) else {
        return refuse(out, "ERR invalid second DB index");
    };
    let range = 0..DATABASES as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return refuse(out, OUT_OF_RANGE);
    }
    finish(out, swap(ctx, tx, a as usize, b as usize), ok)
}

/// Swaps databases `a` and `b` (their watchers told).
fn swap(ctx: &Context, tx: &mut Tx<'_>, a: usize, b: usize) -> OpResult<()> {
    let (na, nb) = (ctx.map.get()[a], ctx.map.get()[b]);
    ctx.touch_swapped(tx, a, na, Some(nb))?;
    ctx.touch_swapped(tx, b, nb, Some(na))?;
    Databases::swap(tx, a, b)
        .and_then(|()| reload_map(ctx, tx))
        .map_err(OpError::keyspace)
}

/// `FLUSHDB`'s and `FLUSHALL`'s `[ASYNC | SYNC]`: true when valid (both mean the same here).
fn flush_mode_valid(args: &[&[u8]]) -> bool {
    match args {
        [_] => true,
        [_, mode] => matches!(&mode.to_ascii_lowercase()[..], b"async" | b"sync"),
        _ => false,
    }
}

/// `FLUSHDB [ASYNC | SYNC]`.
pub(crate) fn flushdb(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !flush_mode_valid(args) {
        return refuse(out, SYNTAX);
    }
    finish(out, flush_one(ctx, tx), ok)
}

/// Empties the client's database (its watchers told).
fn flush_one(ctx: &Context, tx: &mut Tx<'_>) -> OpResult<()> {
    ctx.touch_swapped(tx, ctx.db, ctx.namespace, None)?;
    Databases::flush(tx, ctx.db)
        .and_then(|_| reload_map(ctx, tx))
        .map_err(OpError::keyspace)
}

/// `FLUSHALL [ASYNC | SYNC]`.
pub(crate) fn flushall(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    if !flush_mode_valid(args) {
        return refuse(out, SYNTAX);
    }
    finish(out, flush_every(ctx, tx), ok)
}

/// Empties every database (their watchers told).
fn flush_every(ctx: &Context, tx: &mut Tx<'_>) -> OpResult<()> {
    for (db, ns) in ctx.map.get().into_iter().enumerate() {
        ctx.touch_swapped(tx, db, ns, None)?;
    }
    Databases::flush_all(tx)
        .and_then(|()| reload_map(ctx, tx))
        .map_err(OpError::keyspace)
}

/// `MOVE key db`: 1 when moved (with its expiry); 0 when absent here or present there.
pub(crate) fn move_(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(db) = database(args[2], out) else {
        return Ok(());
    };
    if db == ctx.db {
        return refuse(out, SAME_OBJECT);
    }
    let moved = move_key(ctx, tx, args[1], db).map_err(OpError::keyspace);
    finish(out, moved, |out, moved| {
        write::integer(out, i64::from(moved))
    })
}

/// Moves `key` (with its expiry) to database `db` unless it is absent here or present there:
/// whether it moved.
fn move_key(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    db: usize,
) -> std::result::Result<bool, KeyspaceError> {
    let (src, dst) = (ctx.namespace, ctx.map.get()[db]);
    let there = ctx.at(db, dst);
    let Some(entry) = keyspace::get(ctx, tx, key)? else {
        return Ok(false);
    };
    if keyspace::get(&there, tx, key)?.is_some() {
        return Ok(false);
    }
    keyspace::put(&there, tx, key, &entry)?;
    keyspace::remove_moved(tx, src, key)?;
    ctx.notify(Class::Generic, "move_from", key);
    there.notify(Class::Generic, "move_to", key);
    ctx.touch_in(ctx.db, key);
    ctx.touch_in(db, key);
    Ok(true)
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 when copied (with its
/// expiry); 0 when the source is absent or the destination exists without `REPLACE`.
pub(crate) fn copy(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((db, replace)) = copy_options(ctx, args, out) else {
        return Ok(());
    };
    if db == ctx.db && args[1] == args[2] {
        return refuse(out, SAME_OBJECT);
    }
    let copied = copy_key(ctx, tx, args[1], args[2], db, replace).map_err(OpError::keyspace);
    finish(out, copied, |out, copied| {
        write::integer(out, i64::from(copied))
    })
}

/// `COPY`'s `[DB destination-db] [REPLACE]` from `args[3..]`: the database and whether to
/// replace; `None` with the error written.
fn copy_options(ctx: &Context, args: &[&[u8]], out: &mut Vec<u8>) -> Option<(usize, bool)> {
    let (mut db, mut replace) = (ctx.db, false);
    let mut j = 3;
    // Bounded: every pass consumes one or two arguments, or replies.
    while j < args.len() {
        let more = args.len() - j - 1;
        match &args[j].to_ascii_lowercase()[..] {
            b"replace" => replace = true,
            b"db" if more >= 1 => {
                db = database(args[j + 1], out)?;
                j += 1;
            }
            _ => {
                write::error(out, SYNTAX);
                return None;
            }
        }
        j += 1;
    }
    Some((db, replace))
}

/// Copies `src`'s value (with its expiry; a tree of its own for a collection in a tree) to
/// `dst` in database `db`, unless `src` is absent or `dst` exists and not `replace`: whether
/// it copied. `src` is read as Redis's `lookupKeyRead` reads it (counted).
fn copy_key(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    db: usize,
    replace: bool,
) -> std::result::Result<bool, KeyspaceError> {
    let there = ctx.at(db, ctx.map.get()[db]);
    let found = keyspace::get(ctx, tx, src)?;
    ctx.count_lookup(found.is_some(), src);
    let Some(entry) = found else {
        return Ok(false);
    };
    let existing = keyspace::get(&there, tx, dst)?.is_some();
    if !replace && existing {
        return Ok(false);
    }
    let entry = crate::keyspace::collection::copied(tx, entry)?;
    // A replaced `destination` goes first: the copy arrives as a new key (Redis's `dbAdd`).
    if existing {
        keyspace::remove(tx, there.namespace, dst)?;
    }
    keyspace::put(&there, tx, dst, &entry)?;
    there.notify(Class::Generic, "copy_to", dst);
    ctx.touch_in(db, dst);
    Ok(true)
}
