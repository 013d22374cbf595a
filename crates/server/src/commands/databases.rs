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

use super::reply::{keyspace_error, NOT_INTEGER, SYNTAX};
use super::Context;
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
pub fn dbsize(ctx: &Context, tx: &mut Tx<'_>, _args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match keyspace::key_count(tx, ctx.namespace) {
        Ok(n) => write::integer(out, n as i64),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
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

/// `SWAPDB index1 index2`.
pub fn swapdb(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(a) = parse_index(args[1]) else {
        write::error(out, "ERR invalid first DB index");
        return Ok(());
    };
    let Some(b) = parse_index(args[2]) else {
        write::error(out, "ERR invalid second DB index");
        return Ok(());
    };
    let range = 0..DATABASES as i64;
    if !range.contains(&a) || !range.contains(&b) {
        write::error(out, OUT_OF_RANGE);
        return Ok(());
    }
    let (na, nb) = (ctx.map.get()[a as usize], ctx.map.get()[b as usize]);
    ctx.touch_swapped(tx, a as usize, na, Some(nb))?;
    ctx.touch_swapped(tx, b as usize, nb, Some(na))?;
    let swapped = Databases::swap(tx, a as usize, b as usize).and_then(|()| reload_map(ctx, tx));
    match swapped {
        Ok(()) => write::simple(out, "OK"),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
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
pub fn flushdb(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !flush_mode_valid(args) {
        write::error(out, SYNTAX);
        return Ok(());
    }
    ctx.touch_swapped(tx, ctx.db, ctx.namespace, None)?;
    match Databases::flush(tx, ctx.db).and_then(|_| reload_map(ctx, tx)) {
        Ok(()) => write::simple(out, "OK"),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
}

/// `FLUSHALL [ASYNC | SYNC]`.
pub fn flushall(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !flush_mode_valid(args) {
        write::error(out, SYNTAX);
        return Ok(());
    }
    for (db, ns) in ctx.map.get().into_iter().enumerate() {
        ctx.touch_swapped(tx, db, ns, None)?;
    }
    match Databases::flush_all(tx).and_then(|()| reload_map(ctx, tx)) {
        Ok(()) => write::simple(out, "OK"),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
}

/// `MOVE key db`: 1 when moved (with its expiry); 0 when absent here or present there.
pub fn move_(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(db) = database(args[2], out) else {
        return Ok(());
    };
    if db == ctx.db {
        write::error(out, SAME_OBJECT);
        return Ok(());
    }
    let (src, dst) = (ctx.namespace, ctx.map.get()[db]);
    let moved = (|| -> std::result::Result<bool, KeyspaceError> {
        let Some(entry) = keyspace::get(tx, src, args[1], ctx.now_ms)? else {
            return Ok(false);
        };
        if keyspace::get(tx, dst, args[1], ctx.now_ms)?.is_some() {
            return Ok(false);
        }
        keyspace::put(tx, dst, args[1], &entry)?;
        keyspace::remove_moved(tx, src, args[1])?;
        ctx.touch_in(ctx.db, args[1]);
        ctx.touch_in(db, args[1]);
        Ok(true)
    })();
    match moved {
        Ok(moved) => write::integer(out, i64::from(moved)),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 when copied (with its
/// expiry); 0 when the source is absent or the destination exists without `REPLACE`.
pub fn copy(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (mut db, mut replace) = (ctx.db, false);
    let mut j = 3;
    // Bounded: every pass consumes one or two arguments, or replies.
    while j < args.len() {
        let more = args.len() - j - 1;
        match &args[j].to_ascii_lowercase()[..] {
            b"replace" => replace = true,
            b"db" if more >= 1 => {
                let Some(n) = database(args[j + 1], out) else {
                    return Ok(());
                };
                db = n;
                j += 1;
            }
            _ => {
                write::error(out, SYNTAX);
                return Ok(());
            }
        }
        j += 1;
    }
    if db == ctx.db && args[1] == args[2] {
        write::error(out, SAME_OBJECT);
        return Ok(());
    }
    let (src, dst) = (ctx.namespace, ctx.map.get()[db]);
    let copied = (|| -> std::result::Result<bool, KeyspaceError> {
        let found = keyspace::get(tx, src, args[1], ctx.now_ms)?;
        // The source is read as Redis's `lookupKeyRead` reads it (counted).
        ctx.count_lookup(found.is_some());
        let Some(entry) = found else {
            return Ok(false);
        };
        if !replace && keyspace::get(tx, dst, args[2], ctx.now_ms)?.is_some() {
            return Ok(false);
        }
        // A collection in a tree gets a tree of its own.
        let entry = crate::keyspace::collection::copied(tx, entry)?;
        keyspace::put(tx, dst, args[2], &entry)?;
        ctx.touch_in(db, args[2]);
        Ok(true)
    })();
    match copied {
        Ok(copied) => write::integer(out, i64::from(copied)),
        Err(err) => return keyspace_error(out, err),
    }
    Ok(())
}
