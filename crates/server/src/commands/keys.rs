//! Key commands with Redis 7.0's semantics, replies and error texts (`db.c`, `expire.c`).

use tamer_store::{DbError, Tx};

use super::reply::{finish, refuse, OpError, OpResult, NOT_INTEGER, NO_SUCH_KEY};
use super::Context;
use crate::keyspace::events::Class;
use crate::keyspace::store_error;
use crate::keyspace::{self, Entry};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

/// `key`'s live entry (`None`: absent); a keyspace error is the command's reply.
fn entry(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<Entry>> {
    keyspace::get(ctx, tx, key).map_err(OpError::keyspace)
}

/// As [`entry`] for a command that reads the key (Redis's `lookupKeyRead`): counted in
/// `keyspace_hits`/`misses`.
fn entry_read(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<Entry>> {
    let found = entry(ctx, tx, key)?;
    ctx.count_lookup(found.is_some(), key);
    Ok(found)
}

/// `DEL key [key ...]` and `UNLINK key [key ...]`: how many of the keys were there.
pub(crate) fn del(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, delete_keys(ctx, tx, &args[1..]), write::integer)
}

/// Deletes `keys`: how many of them were there.
fn delete_keys(ctx: &Context, tx: &mut Tx<'_>, keys: &[&[u8]]) -> OpResult<i64> {
    let mut removed = 0;
    for key in keys {
        let was = keyspace::delete(ctx, tx, key).map_err(OpError::keyspace)?;
        if was {
            ctx.touch(key);
            ctx.notify(Class::Generic, "del", key);
        }
        removed += i64::from(was);
    }
    Ok(removed)
}

/// `EXISTS key [key ...]` and `TOUCH key [key ...]`: how many of the keys exist (a key named
/// twice counts twice).
pub(crate) fn exists(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, count_existing(ctx, tx, &args[1..]), write::integer)
}

/// How many of `keys` exist, each read as `EXISTS` reads it.
fn count_existing(ctx: &Context, tx: &mut Tx<'_>, keys: &[&[u8]]) -> OpResult<i64> {
    let mut found = 0;
    for key in keys {
        found += i64::from(entry_read(ctx, tx, key)?.is_some());
    }
    Ok(found)
}

/// `TYPE key`: `none` or the value's type.
pub(crate) fn type_(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, entry_read(ctx, tx, args[1]), |out, e| {
        write::simple(out, e.map_or("none", |e| e.kind.name()));
    })
}

/// Which clock and unit a command's time argument uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TimeArg {
    seconds: bool,
    relative: bool,
}

/// The absolute ms of time argument `arg`, or the error reply's text (Redis 7.0's
/// `expireGenericCommand` checks).
fn absolute_ms(
    arg: &[u8],
    unit: TimeArg,
    now_ms: u64,
    command: &str,
) -> std::result::Result<i64, String> {
    let invalid = || format!("ERR invalid expire time in '{command}' command");
    let mut when = parse_i64(arg).ok_or(NOT_INTEGER)?;
    if unit.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if unit.relative {
        when = when.checked_add(now_ms as i64).ok_or_else(invalid)?;
    }
    Ok(when)
}

/// The conditions of `EXPIRE`'s family: `NX | XX | GT | LT`.
#[derive(Clone, Copy, Debug, Default)]
struct ExpireIf {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Parses the conditions from `args[3..]`; `None` with the error written.
fn expire_conditions(args: &[&[u8]], out: &mut Vec<u8>) -> Option<ExpireIf> {
    let mut c = ExpireIf::default();
    for opt in &args[3..] {
        match &opt.to_ascii_lowercase()[..] {
            b"nx" => c.nx = true,
            b"xx" => c.xx = true,
            b"gt" => c.gt = true,
            b"lt" => c.lt = true,
            _ => {
                let text = String::from_utf8_lossy(opt);
                write::error(out, &format!("ERR Unsupported option {text}"));
                return None;
            }
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        write::error(
            out,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
        return None;
    }
    if c.gt && c.lt {
        write::error(
            out,
            "ERR GT and LT options at the same time are not compatible",
        );
        return None;
    }
    Some(c)
}

/// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT key time [NX | XX | GT | LT]`: 1 when the
/// expiry was set (or the key deleted, a time in the past), 0 when the key is absent or a
/// condition failed.
fn expire_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    unit: TimeArg,
) -> Result {
    let command = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
    let Some(cond) = expire_conditions(args, out) else {
        return Ok(());
    };
    let when = match absolute_ms(args[2], unit, ctx.now_ms, &command) {
        Ok(when) => when,
        Err(text) => return refuse(out, &text),
    };
    let set = set_expiry(ctx, tx, args[1], when, cond);
    finish(out, set, |out, set| write::integer(out, i64::from(set)))
}

/// Sets `key`'s expiry to `when` (ms; a time already past deletes the key) as `cond` allows:
/// whether it did (not when the key is absent or a condition fails).
fn set_expiry(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    when: i64,
    cond: ExpireIf,
) -> OpResult<bool> {
    let Some(mut e) = entry(ctx, tx, key)? else {
        return Ok(false);
    };
    // No expiry counts as an infinite one for GT and LT.
    let current = e.expire_at_ms.map(|at| at as i64);
    let refused = (cond.nx && current.is_some())
        || (cond.xx && current.is_none())
        || (cond.gt && current.is_none_or(|c| when <= c))
        || (cond.lt && current.is_some_and(|c| when >= c));
    if refused {
        return Ok(false);
    }
    ctx.touch(key);
    if when <= ctx.now_ms as i64 {
        keyspace::remove(tx, ctx.namespace, key).map_err(store_error)?;
        ctx.notify(Class::Generic, "del", key);
    } else {
        e.expire_at_ms = Some(when as u64);
        keyspace::put(ctx, tx, key, &e).map_err(store_error)?;
        ctx.notify(Class::Generic, "expire", key);
    }
    Ok(true)
}

/// `EXPIRE`'s time: seconds from now.
const SECONDS_FROM_NOW: TimeArg = TimeArg {
    seconds: true,
    relative: true,
};
/// `PEXPIRE`'s time: milliseconds from now.
const MS_FROM_NOW: TimeArg = TimeArg {
    seconds: false,
    relative: true,
};
/// `EXPIREAT`'s time: a Unix time in seconds.
const SECONDS_AT: TimeArg = TimeArg {
    seconds: true,
    relative: false,
};
/// `PEXPIREAT`'s time: a Unix time in milliseconds.
const MS_AT: TimeArg = TimeArg {
    seconds: false,
    relative: false,
};

/// `EXPIRE key seconds [NX | XX | GT | LT]`.
pub(crate) fn expire(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(ctx, tx, args, out, SECONDS_FROM_NOW)
}

/// `PEXPIRE key milliseconds [NX | XX | GT | LT]`.
pub(crate) fn pexpire(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(ctx, tx, args, out, MS_FROM_NOW)
}

/// `EXPIREAT key unix-time-seconds [NX | XX | GT | LT]`.
pub(crate) fn expireat(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    expire_generic(ctx, tx, args, out, SECONDS_AT)
}

/// `PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]`.
pub(crate) fn pexpireat(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    expire_generic(ctx, tx, args, out, MS_AT)
}

/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME key`: -2 absent, -1 no expiry, else the time
/// left (or the absolute time), seconds rounded as Redis rounds them.
fn ttl_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    ms: bool,
    absolute: bool,
) -> Result {
    finish(out, entry_read(ctx, tx, args[1]), |out, found| {
        let reply = match found.map(|e| e.expire_at_ms) {
            None => -2,
            Some(None) => -1,
            Some(Some(at)) => {
                let t = if absolute {
                    at as i64
                } else {
                    (at as i64 - ctx.now_ms as i64).max(0)
                };
                if ms {
                    t
                } else {
                    (t + 500) / 1000
                }
            }
        };
        write::integer(out, reply);
    })
}

/// `TTL key`: seconds left.
pub(crate) fn ttl(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, false, false)
}

/// `PTTL key`: milliseconds left.
pub(crate) fn pttl(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, true, false)
}

/// `EXPIRETIME key`: the expiry as a Unix time in seconds.
pub(crate) fn expiretime(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    ttl_generic(ctx, tx, args, out, false, true)
}

/// `PEXPIRETIME key`: the expiry as a Unix time in milliseconds.
pub(crate) fn pexpiretime(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    ttl_generic(ctx, tx, args, out, true, true)
}

/// `PERSIST key`: 1 when an expiry was removed.
pub(crate) fn persist(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let removed = remove_expiry(ctx, tx, args[1]);
    finish(out, removed, |out, removed| {
        write::integer(out, i64::from(removed))
    })
}

/// Removes `key`'s expiry: whether it had one.
fn remove_expiry(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<bool> {
    match entry(ctx, tx, key)? {
        Some(mut e) if e.expire_at_ms.is_some() => {
            e.expire_at_ms = None;
            ctx.touch(key);
            keyspace::put(ctx, tx, key, &e).map_err(store_error)?;
            ctx.notify(Class::Generic, "persist", key);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// `RENAME` (`nx` false: `OK`) and `RENAMENX` (`nx` true: 1 when renamed) `key newkey`.
fn rename_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    nx: bool,
) -> Result {
    let renamed = rename_key(ctx, tx, args[1], args[2], nx);
    finish(out, renamed, |out, renamed| {
        if nx {
            write::integer(out, i64::from(renamed));
        } else {
            write::simple(out, "OK");
        }
    })
}

/// Moves `from`'s value and expiry to `to` (with `nx`, only when `to` is absent): whether it
/// moved; `ERR no such key` when `from` is absent.
fn rename_key(ctx: &Context, tx: &mut Tx<'_>, from: &[u8], to: &[u8], nx: bool) -> OpResult<bool> {
    let Some(e) = entry(ctx, tx, from)? else {
        return Err(OpError::Error(NO_SUCH_KEY));
    };
    if from == to || (nx && entry(ctx, tx, to)?.is_some()) {
        return Ok(false);
    }
    ctx.touch(from);
    ctx.touch(to);
    keyspace::remove_moved(tx, ctx.namespace, from).map_err(store_error)?;
    // `newkey` goes first (its lookup expires it), so that the value arrives as a new key
    // (Redis's `dbAdd`).
    if entry(ctx, tx, to)?.is_some() {
        keyspace::remove(tx, ctx.namespace, to).map_err(store_error)?;
    }
    keyspace::put(ctx, tx, to, &e).map_err(store_error)?;
    ctx.notify(Class::Generic, "rename_from", from);
    ctx.notify(Class::Generic, "rename_to", to);
    Ok(true)
}

/// `RENAME key newkey`: the value and its expiry move (over whatever `newkey` held).
pub(crate) fn rename(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rename_generic(ctx, tx, args, out, false)
}

/// `RENAMENX key newkey`: as `RENAME` when `newkey` is absent.
pub(crate) fn renamenx(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    rename_generic(ctx, tx, args, out, true)
}
