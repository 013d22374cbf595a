//! The blocking pops: `BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`,
//! `BZPOPMAX`, `BZMPOP`.
//!
//! A handler here makes one attempt, as Redis does for a client that may not block (inside
//! `MULTI`): it pops if it can, else writes the timeout's reply. Outside `MULTI` the session
//! blocks a client whose attempt found nothing (the table names its keys and timeout): the
//! connection waits in the network's table of blocked clients (`crate::keyspace::blocked`), holding no
//! thread, until a write to one of its keys makes it the first in line to try again, or its
//! timeout passes.

use tamer_store::{DbError, Tx};

use super::lists::{self, End};
use super::numbers::parse_double;
use super::reply::{SYNTAX, WRONGTYPE};
use super::zsets;
use crate::commands::Context;
use crate::keyspace::collection::{load_uncounted, Found};
use crate::keyspace::Kind;
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// Parses a timeout as Redis's `getTimeoutFromObjectOrReply` (seconds, a float).
pub fn parse_timeout(arg: &[u8]) -> std::result::Result<f64, &'static str> {
    let Some(t) = parse_double(arg).filter(|t| t.is_finite()) else {
        return Err("ERR timeout is not a float or out of range");
    };
    if t < 0.0 {
        return Err("ERR timeout is negative");
    }
    if t * 1000.0 > i64::MAX as f64 {
        return Err("ERR timeout is out of range");
    }
    Ok(t)
}

fn list_pop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>, end: End) -> Result {
    if let Err(text) = parse_timeout(args[args.len() - 1]) {
        write::error(out, text);
        return Ok(());
    }
    for key in &args[1..args.len() - 1] {
        let Some(popped) = lists::pop_from(ctx, tx, key, end, 1, out)? else {
            return Ok(());
        };
        if let Some(e) = popped.first() {
            write::array(out, 2);
            write::bulk(out, key);
            write::bulk(out, e);
            return Ok(());
        }
    }
    write::null_array(out, ctx.protocol);
    Ok(())
}

/// `BLPOP key [key ...] timeout`.
pub fn blpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    list_pop(ctx, tx, args, out, End::Left)
}

/// `BRPOP key [key ...] timeout`.
pub fn brpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    list_pop(ctx, tx, args, out, End::Right)
}

/// `BLMOVE source destination LEFT | RIGHT LEFT | RIGHT timeout`.
pub fn blmove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        write::error(out, SYNTAX);
        return Ok(());
    };
    if let Err(text) = parse_timeout(args[5]) {
        write::error(out, text);
        return Ok(());
    }
    lists::moved_reply(ctx, tx, args[1], args[2], from, to, out)
}

/// `BRPOPLPUSH source destination timeout`.
pub fn brpoplpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Err(text) = parse_timeout(args[3]) {
        write::error(out, text);
        return Ok(());
    }
    lists::moved_reply(ctx, tx, args[1], args[2], End::Right, End::Left, out)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT | RIGHT [COUNT count]`.
pub fn blmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Err(text) = parse_timeout(args[1]) {
        write::error(out, text);
        return Ok(());
    }
    lists::mpop_at(ctx, tx, args, 2, out)
}

fn zset_pop(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    max: bool,
) -> Result {
    if let Err(text) = parse_timeout(args[args.len() - 1]) {
        write::error(out, text);
        return Ok(());
    }
    for key in &args[1..args.len() - 1] {
        if matches!(load_uncounted(ctx, tx, key, Kind::ZSet)?, Found::WrongType) {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        let Some(popped) = zsets::pop(ctx, tx, key, max, 1, out)? else {
            return Ok(());
        };
        if let Some((m, s)) = popped.first() {
            write::array(out, 3);
            write::bulk(out, key);
            write::bulk(out, m);
            zsets::write_score(out, *s, ctx.protocol);
            return Ok(());
        }
    }
    write::null_array(out, ctx.protocol);
    Ok(())
}

/// `BZPOPMIN key [key ...] timeout`.
pub fn bzpopmin(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    zset_pop(ctx, tx, args, out, false)
}

/// `BZPOPMAX key [key ...] timeout`.
pub fn bzpopmax(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    zset_pop(ctx, tx, args, out, true)
}

/// `BZMPOP timeout numkeys key [key ...] MIN | MAX [COUNT count]`.
pub fn bzmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Err(text) = parse_timeout(args[1]) {
        write::error(out, text);
        return Ok(());
    }
    let Some((keys, i)) = super::args::mpop_keys(args, 2, out) else {
        return Ok(());
    };
    let Some((max, count)) = zsets::mpop_options(args, i, out) else {
        return Ok(());
    };
    for key in keys {
        let Some(popped) = zsets::pop(ctx, tx, key, max, count, out)? else {
            return Ok(());
        };
        if !popped.is_empty() {
            zsets::write_mpop(out, key, &popped, ctx.protocol);
            return Ok(());
        }
    }
    write::null_array(out, ctx.protocol);
    Ok(())
}
