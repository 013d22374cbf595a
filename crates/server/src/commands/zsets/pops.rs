//! The sorted set pops: `ZPOPMIN`, `ZPOPMAX`, `ZMPOP`, and the pops the blocking forms
//! (`crate::commands::blocking_pops`) make.

use tamer_store::{DbError, Tx};

use super::{existing, save, write_members, write_score, Scored};
use crate::commands::args::{mpop_args, pop_count};
use crate::commands::collections::Lookup;
use crate::commands::reply::{finish, OpResult};
use crate::commands::Context;
use crate::keyspace::events::Class;
use crate::resp::{write, Protocol};

type Result = std::result::Result<(), DbError>;

/// Pops up to `count` members of the lowest (`max` false) or highest scores from `key`'s
/// sorted set (its key deleted with its last member; none when absent).
fn pop(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], max: bool, count: u64) -> OpResult<Scored> {
    let Some(mut z) = existing(ctx, tx, key, Lookup::Write)? else {
        return Ok(Vec::new());
    };
    if count == 0 {
        return Ok(Vec::new());
    }
    let popped = z.by_rank(tx, 0, count - 1, max)?;
    for (m, s) in &popped {
        z.remove_scored(tx, m, *s)?;
    }
    if !popped.is_empty() {
        let event = if max { "zpopmax" } else { "zpopmin" };
        ctx.notify(Class::Zset, event, key);
    }
    save(ctx, tx, key, z)?;
    Ok(popped)
}

/// Pops up to `count` members from the first of `keys` whose sorted set has any, as `ZMPOP`
/// and the blocking pops do: that key and its members (`None`: none has any; `WRONGTYPE` at
/// the first key of another type).
pub(crate) fn pop_first<'k>(
    ctx: &Context,
    tx: &mut Tx<'_>,
    keys: &[&'k [u8]],
    max: bool,
    count: u64,
) -> OpResult<Option<(&'k [u8], Scored)>> {
    for &key in keys {
        let popped = pop(ctx, tx, key, max, count)?;
        if !popped.is_empty() {
            return Ok(Some((key, popped)));
        }
    }
    Ok(None)
}

/// `ZPOPMIN`, `ZPOPMAX key [count]`: the members popped with their scores.
fn pop_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    max: bool,
) -> Result {
    let Some(count) = pop_count(args, out) else {
        return Ok(());
    };
    let popped = pop(ctx, tx, args[1], max, count.unwrap_or(1));
    finish(out, popped, |out, popped| {
        if count.is_some() {
            // RESP3: an array of pairs; RESP2: one flat array.
            write_members(out, &popped, true, ctx.protocol);
        } else {
            // One pop: a flat [member, score] (or nothing) in both protocols.
            write::array(out, 2 * popped.len());
            for (m, s) in &popped {
                write::bulk(out, m);
                write_score(out, *s, ctx.protocol);
            }
        }
    })
}

/// `ZPOPMIN key [count]`.
pub(crate) fn zpopmin(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, false)
}

/// `ZPOPMAX key [count]`.
pub(crate) fn zpopmax(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, true)
}

/// `MIN` (false) or `MAX` (true), any case.
fn min_or_max(arg: &[u8]) -> Option<bool> {
    if arg.eq_ignore_ascii_case(b"min") {
        Some(false)
    } else if arg.eq_ignore_ascii_case(b"max") {
        Some(true)
    } else {
        None
    }
}

/// Writes `ZMPOP`'s reply: `[key, [[member, score], ...]]`.
fn write_mpop(out: &mut Vec<u8>, key: &[u8], popped: &[(Vec<u8>, f64)], protocol: Protocol) {
    write::array(out, 2);
    write::bulk(out, key);
    write::array(out, popped.len());
    for (m, s) in popped {
        write::array(out, 2);
        write::bulk(out, m);
        write_score(out, *s, protocol);
    }
}

/// `ZMPOP numkeys key [key ...] MIN | MAX [COUNT count]`.
pub(crate) fn zmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    mpop_at(ctx, tx, args, 1, out)
}

/// `ZMPOP`'s work on `numkeys key [key ...] MIN | MAX [COUNT count]` from `args[first]`
/// (`BZMPOP`'s start after its timeout): `[key, [[member, score], ...]]`, or a null array.
pub(crate) fn mpop_at(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    first: usize,
    out: &mut Vec<u8>,
) -> Result {
    let Some((keys, max, count)) = mpop_args(args, first, min_or_max, out) else {
        return Ok(());
    };
    let popped = pop_first(ctx, tx, keys, max, count);
    finish(out, popped, |out, popped| match popped {
        Some((key, popped)) => write_mpop(out, key, &popped, ctx.protocol),
        None => write::null_array(out, ctx.protocol),
    })
}
