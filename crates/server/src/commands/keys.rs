//! Key commands with Redis 7.0's semantics, replies and error texts (`db.c`, `expire.c`).

use tamer_store::{DbError, Tx};

use super::reply::{keyspace_error, NOT_INTEGER, NO_SUCH_KEY};
use super::Context;
use crate::keyspace::store_error;
use crate::keyspace::{self, Entry};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

/// `key`'s live entry, or the error reply written (`Ok(None)` then means "replied").
fn entry(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    out: &mut Vec<u8>,
) -> std::result::Result<Option<Option<Entry>>, DbError> {
    match keyspace::get(tx, ctx.namespace, key, ctx.now_ms) {
        Ok(e) => Ok(Some(e)),
        Err(err) => keyspace_error(out, err).map(|()| None),
    }
}

/// `DEL key [key ...]`: how many of the keys were there.
pub fn del(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let mut removed = 0;
    for key in &args[1..] {
        match keyspace::delete(tx, ctx.namespace, key, ctx.now_ms) {
            Ok(was) => {
                if was {
                    ctx.touch(key);
                }
                removed += i64::from(was);
            }
            Err(err) => return keyspace_error(out, err),
        }
    }
    write::integer(out, removed);
    Ok(())
}

/// `EXISTS key [key ...]` and `TOUCH key [key ...]`: how many of the keys exist (a key named
/// twice counts twice).
pub fn exists(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let mut found = 0;
    for key in &args[1..] {
        let Some(e) = entry(ctx, tx, key, out)? else {
            return Ok(());
        };
        ctx.count_lookup(e.is_some());
        found += i64::from(e.is_some());
    }
    write::integer(out, found);
    Ok(())
}

/// `TYPE key`: `none` or the value's type.
pub fn type_(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(e) = entry(ctx, tx, args[1], out)? else {
        return Ok(());
    };
    ctx.count_lookup(e.is_some());
    write::simple(out, e.map_or("none", |e| e.kind.name()));
    Ok(())
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
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match &opt.to_ascii_lowercase()[..] {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                let text = String::from_utf8_lossy(opt);
                write::error(out, &format!("ERR Unsupported option {text}"));
                return Ok(());
            }
        }
    }
    if nx && (xx || gt || lt) {
        write::error(
            out,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
        return Ok(());
    }
    if gt && lt {
        write::error(
            out,
            "ERR GT and LT options at the same time are not compatible",
        );
        return Ok(());
    }
    let when = match absolute_ms(args[2], unit, ctx.now_ms, &command) {
        Ok(when) => when,
        Err(text) => {
            write::error(out, &text);
            return Ok(());
        }
    };
    let Some(found) = entry(ctx, tx, args[1], out)? else {
        return Ok(());
    };
    let Some(mut e) = found else {
        write::integer(out, 0);
        return Ok(());
    };
    // No expiry counts as an infinite one for GT and LT.
    let current = e.expire_at_ms.map(|at| at as i64);
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        write::integer(out, 0);
        return Ok(());
    }
    ctx.touch(args[1]);
    if when <= ctx.now_ms as i64 {
        keyspace::remove(tx, ctx.namespace, args[1]).map_err(store_error)?;
    } else {
        e.expire_at_ms = Some(when as u64);
        keyspace::put(tx, ctx.namespace, args[1], &e).map_err(store_error)?;
    }
    write::integer(out, 1);
    Ok(())
}

pub fn expire(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(
        ctx,
        tx,
        args,
        out,
        TimeArg {
            seconds: true,
            relative: true,
        },
    )
}

pub fn pexpire(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(
        ctx,
        tx,
        args,
        out,
        TimeArg {
            seconds: false,
            relative: true,
        },
    )
}

pub fn expireat(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(
        ctx,
        tx,
        args,
        out,
        TimeArg {
            seconds: true,
            relative: false,
        },
    )
}

pub fn pexpireat(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    expire_generic(
        ctx,
        tx,
        args,
        out,
        TimeArg {
            seconds: false,
            relative: false,
        },
    )
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
    let Some(found) = entry(ctx, tx, args[1], out)? else {
        return Ok(());
    };
    ctx.count_lookup(found.is_some());
    let reply = match found {
        None => -2,
        Some(Entry {
            expire_at_ms: None, ..
        }) => -1,
        Some(Entry {
            expire_at_ms: Some(at),
            ..
        }) => {
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
    Ok(())
}

pub fn ttl(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, false, false)
}

pub fn pttl(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, true, false)
}

pub fn expiretime(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, false, true)
}

pub fn pexpiretime(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ttl_generic(ctx, tx, args, out, true, true)
}

/// `PERSIST key`: 1 when an expiry was removed.
pub fn persist(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(found) = entry(ctx, tx, args[1], out)? else {
        return Ok(());
    };
    match found {
        Some(mut e) if e.expire_at_ms.is_some() => {
            e.expire_at_ms = None;
            ctx.touch(args[1]);
            keyspace::put(tx, ctx.namespace, args[1], &e).map_err(store_error)?;
            write::integer(out, 1);
        }
        _ => write::integer(out, 0),
    }
    Ok(())
}

/// `RENAME` (`nx` false) and `RENAMENX` (`nx` true) `key newkey`: the value and its expiry
/// move; `ERR no such key` when `key` is absent.
fn rename_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    nx: bool,
) -> Result {
    let Some(found) = entry(ctx, tx, args[1], out)? else {
        return Ok(());
    };
    let Some(e) = found else {
        write::error(out, NO_SUCH_KEY);
        return Ok(());
    };
    if args[1] == args[2] {
        if nx {
            write::integer(out, 0);
        } else {
            write::simple(out, "OK");
        }
        return Ok(());
    }
    if nx {
        let Some(target) = entry(ctx, tx, args[2], out)? else {
            return Ok(());
        };
        if target.is_some() {
            write::integer(out, 0);
            return Ok(());
        }
    }
    ctx.touch(args[1]);
    ctx.touch(args[2]);
    keyspace::remove_moved(tx, ctx.namespace, args[1]).map_err(store_error)?;
    keyspace::put(tx, ctx.namespace, args[2], &e).map_err(store_error)?;
    if nx {
        write::integer(out, 1);
    } else {
        write::simple(out, "OK");
    }
    Ok(())
}

pub fn rename(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rename_generic(ctx, tx, args, out, false)
}

pub fn renamenx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rename_generic(ctx, tx, args, out, true)
}
