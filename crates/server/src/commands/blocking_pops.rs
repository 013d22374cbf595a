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
use super::reply::{finish, refuse, SYNTAX};
use super::zsets;
use crate::commands::Context;
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// Parses a timeout as Redis's `getTimeoutFromObjectOrReply` (seconds, a float).
pub(crate) fn parse_timeout(arg: &[u8]) -> std::result::Result<f64, &'static str> {
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

/// `BLPOP`, `BRPOP key [key ...] timeout`: `[key, element]` from the first list with one, or
/// a null array.
fn list_pop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>, end: End) -> Result {
    if let Err(text) = parse_timeout(args[args.len() - 1]) {
        return refuse(out, text);
    }
    let popped = lists::pop_first(ctx, tx, &args[1..args.len() - 1], end, 1);
    finish(out, popped, |out, popped| match popped {
        Some((key, popped)) => {
            write::array(out, 2);
            write::bulk(out, key);
            write::bulk(out, &popped[0]);
        }
        None => write::null_array(out, ctx.protocol),
    })
}

/// `BLPOP key [key ...] timeout`.
pub(crate) fn blpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    list_pop(ctx, tx, args, out, End::Left)
}

/// `BRPOP key [key ...] timeout`.
pub(crate) fn brpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    list_pop(ctx, tx, args, out, End::Right)
}

/// `BLMOVE source destination LEFT | RIGHT LEFT | RIGHT timeout`.
pub(crate) fn blmove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return refuse(out, SYNTAX);
    };
    if let Err(text) = parse_timeout(args[5]) {
        return refuse(out, text);
    }
    lists::moved_reply(ctx, tx, args[1], args[2], from, to, out)
}

/// `BRPOPLPUSH source destination timeout`.
pub(crate) fn brpoplpush(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    if let Err(text) = parse_timeout(args[3]) {
        return refuse(out, text);
    }
    lists::moved_reply(ctx, tx, args[1], args[2], End::Right, End::Left, out)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT | RIGHT [COUNT count]`.
pub(crate) fn blmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Err(text) = parse_timeout(args[1]) {
        return refuse(out, text);
    }
    lists::mpop_at(ctx, tx, args, 2, out)
}

/// `BZPOPMIN`, `BZPOPMAX key [key ...] timeout`: `[key, member, score]` from the first
/// sorted set with a member, or a null array.
fn zset_pop(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    max: bool,
) -> Result {
    if let Err(text) = parse_timeout(args[args.len() - 1]) {
        return refuse(out, text);
    }
    let popped = zsets::pop_first(ctx, tx, &args[1..args.len() - 1], max, 1);
    finish(out, popped, |out, popped| match popped {
        Some((key, popped)) => {
            let (m, s) = &popped[0];
            write::array(out, 3);
            write::bulk(out, key);
            write::bulk(out, m);
            zsets::write_score(out, *s, ctx.protocol);
        }
        None => write::null_array(out, ctx.protocol),
    })
}

/// `BZPOPMIN key [key ...] timeout`.
pub(crate) fn bzpopmin(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    zset_pop(ctx, tx, args, out, false)
}

/// `BZPOPMAX key [key ...] timeout`.
pub(crate) fn bzpopmax(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    zset_pop(ctx, tx, args, out, true)
}

/// `BZMPOP timeout numkeys key [key ...] MIN | MAX [COUNT count]`.
pub(crate) fn bzmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Err(text) = parse_timeout(args[1]) {
        return refuse(out, text);
    }
    zsets::mpop_at(ctx, tx, args, 2, out)
}
