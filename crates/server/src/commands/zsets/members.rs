//! The sorted set commands on members: `ZADD`, `ZINCRBY`, `ZREM`, `ZSCORE`, `ZMSCORE`,
//! `ZCARD`, `ZRANK`, `ZREVRANK`, `ZRANDMEMBER`, `ZSCAN`.

use tamer_store::{DbError, Tx};

use super::zset::{score_of, ZSet, MEMBERS};
use super::{existing, save, write_members, write_score, Scored};
use crate::commands::args::{random_count, scan_cursor, too_long};
use crate::commands::collections::{scan_elements, Lookup};
use crate::commands::numbers::{double_text, parse_double};
use crate::commands::reply::{
    fail, finish, refuse, scan_header, OpError, OpResult, NOT_FLOAT, SYNTAX,
};
use crate::commands::Context;
use crate::keyspace::collection::{element_of, random_entries, random_u64};
use crate::keyspace::events::Class;
use crate::keyspace::Kind;
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// `ZADD`'s flags.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What one element of a `ZADD` did.
enum Outcome {
    Added(f64),
    Updated(f64),
    Same(f64),
    Skipped,
    /// The increment made a NaN: the command stops there.
    NotANumber,
}

/// Adds or updates one member as `ZADD` with `flags` does.
fn add_one(
    tx: &mut Tx<'_>,
    z: &mut ZSet,
    member: &[u8],
    score: f64,
    f: AddFlags,
) -> std::result::Result<Outcome, DbError> {
    let Some(cur) = z.score(tx, member)? else {
        if f.xx {
            return Ok(Outcome::Skipped);
        }
        z.set(tx, member, score, None)?;
        return Ok(Outcome::Added(score));
    };
    if f.nx {
        return Ok(Outcome::Skipped);
    }
    let new = if f.incr { cur + score } else { score };
    if new.is_nan() {
        return Ok(Outcome::NotANumber);
    }
    if (f.lt && new >= cur) || (f.gt && new <= cur) {
        return Ok(Outcome::Skipped);
    }
    if new == cur {
        return Ok(Outcome::Same(new));
    }
    z.set(tx, member, new, Some(cur))?;
    Ok(Outcome::Updated(new))
}

/// Parses `ZADD`'s flags from `args[2..]`; the index of the first score.
fn add_flags(args: &[&[u8]]) -> (AddFlags, usize) {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        match &args[i].to_ascii_lowercase()[..] {
            b"nx" => f.nx = true,
            b"xx" => f.xx = true,
            b"gt" => f.gt = true,
            b"lt" => f.lt = true,
            b"ch" => f.ch = true,
            b"incr" => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    (f, i)
}

/// The error of flags that exclude each other, or of `INCR` with more than one pair.
fn flags_error(f: AddFlags, pairs: usize) -> Option<&'static str> {
    if f.nx && f.xx {
        Some("ERR XX and NX options at the same time are not compatible")
    } else if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        Some("ERR GT, LT, and/or NX options at the same time are not compatible")
    } else if f.incr && pairs > 1 {
        Some("ERR INCR option supports a single increment-element pair")
    } else {
        None
    }
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
pub(crate) fn zadd(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (f, first) = add_flags(args);
    let elements = &args[first..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        return refuse(out, SYNTAX);
    }
    if let Some(text) = flags_error(f, elements.len() / 2) {
        return refuse(out, text);
    }
    let mut pairs = Vec::with_capacity(elements.len() / 2);
    for p in elements.chunks(2) {
        let Some(score) = parse_double(p[0]) else {
            return refuse(out, NOT_FLOAT);
        };
        if too_long(p[1], out) {
            return Ok(());
        }
        pairs.push((score, p[1]));
    }
    add_reply(ctx, tx, args[1], &pairs, f, out)
}

/// `ZINCRBY key increment member`.
pub(crate) fn zincrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(by) = parse_double(args[2]) else {
        return refuse(out, NOT_FLOAT);
    };
    if too_long(args[3], out) {
        return Ok(());
    }
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    add_reply(ctx, tx, args[1], &[(by, args[3])], f, out)
}

/// Adds `pairs` as `ZADD` with `f` does and replies: the new score with `INCR` (null when
/// skipped), else the members added (and updated, `CH`).
fn add_reply(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    f: AddFlags,
    out: &mut Vec<u8>,
) -> Result {
    finish(out, add(ctx, tx, key, pairs, f), |out, done| {
        if f.incr {
            match done.last {
                Some(s) => write_score(out, s, ctx.protocol),
                None => write::null(out, ctx.protocol),
            }
        } else {
            write::integer(out, done.added + if f.ch { done.updated } else { 0 });
        }
    })
}

/// What a `ZADD` did: members added, members whose score changed, and the last score set.
#[derive(Default)]
struct Added {
    added: i64,
    updated: i64,
    last: Option<f64>,
}

/// Adds or updates the (score, member) `pairs` in `key`'s sorted set as `ZADD` with `f`
/// does (made when absent, unless `XX`). A NaN increment stops it, what came before kept.
fn add(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    f: AddFlags,
) -> OpResult<Added> {
    let mut z = match existing(ctx, tx, key, Lookup::Write)? {
        None if f.xx => return Ok(Added::default()),
        None => ZSet::new(),
        Some(z) => z,
    };
    let mut done = Added::default();
    for &(score, member) in pairs {
        match add_one(tx, &mut z, member, score, f)? {
            Outcome::NotANumber => {
                save(ctx, tx, key, z)?;
                return Err(OpError::Error("ERR resulting score is not a number (NaN)"));
            }
            Outcome::Added(s) => (done.added, done.last) = (done.added + 1, Some(s)),
            Outcome::Updated(s) => (done.updated, done.last) = (done.updated + 1, Some(s)),
            Outcome::Same(s) => done.last = Some(s),
            Outcome::Skipped => {}
        }
    }
    save(ctx, tx, key, z)?;
    if done.added + done.updated > 0 {
        ctx.notify(Class::Zset, if f.incr { "zincr" } else { "zadd" }, key);
    }
    Ok(done)
}

/// `ZREM key member [member ...]`.
pub(crate) fn zrem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, remove(ctx, tx, args[1], &args[2..]), write::integer)
}

/// Removes `members` from `key`'s sorted set: how many were there.
fn remove(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], members: &[&[u8]]) -> OpResult<i64> {
    let Some(mut z) = existing(ctx, tx, key, Lookup::Write)? else {
        return Ok(0);
    };
    let mut removed = 0;
    for m in members {
        removed += i64::from(z.remove(tx, m)?);
    }
    if removed > 0 {
        ctx.notify(Class::Zset, "zrem", key);
    }
    save(ctx, tx, key, z)?;
    Ok(removed)
}

/// `ZSCORE key member`.
pub(crate) fn zscore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    finish(out, score(ctx, tx, args[1], args[2]), |out, s| match s {
        Some(s) => write_score(out, s, ctx.protocol),
        None => write::null(out, ctx.protocol),
    })
}

/// `member`'s score in `key`'s sorted set (`None`: either is absent).
fn score(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], member: &[u8]) -> OpResult<Option<f64>> {
    match existing(ctx, tx, key, Lookup::Read)? {
        Some(z) => Ok(z.score(tx, member)?),
        None => Ok(None),
    }
}

/// `ZMSCORE key member [member ...]`: each score read as the reply goes.
pub(crate) fn zmscore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let z = match existing(ctx, tx, args[1], Lookup::Read) {
        Ok(z) => z,
        Err(err) => return fail(out, err),
    };
    write::array(out, args.len() - 2);
    for m in &args[2..] {
        let s = match &z {
            Some(z) => z.score(tx, m)?,
            None => None,
        };
        match s {
            Some(s) => write_score(out, s, p),
            None => write::null(out, p),
        }
    }
    Ok(())
}

/// `ZCARD key`.
pub(crate) fn zcard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let n = existing(ctx, tx, args[1], Lookup::Read).and_then(|z| match z {
        Some(z) => Ok(z.card(tx)?),
        None => Ok(0),
    });
    finish(out, n, |out, n| write::integer(out, n as i64))
}

/// `ZRANK`, `ZREVRANK key member`: the member's rank from the lowest score, or (`rev`) the
/// highest.
fn rank_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    rev: bool,
) -> Result {
    finish(
        out,
        rank(ctx, tx, args[1], args[2], rev),
        |out, r| match r {
            Some(r) => write::integer(out, r as i64),
            None => write::null(out, ctx.protocol),
        },
    )
}

/// `member`'s rank in `key`'s sorted set from the lowest score, or (`rev`) the highest
/// (`None`: either is absent).
fn rank(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    member: &[u8],
    rev: bool,
) -> OpResult<Option<u64>> {
    let Some(z) = existing(ctx, tx, key, Lookup::Read)? else {
        return Ok(None);
    };
    Ok(match z.rank(tx, member)? {
        Some(r) if rev => Some(z.card(tx)? - 1 - r),
        r => r,
    })
}

/// `ZRANK key member`.
pub(crate) fn zrank(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rank_generic(ctx, tx, args, out, false)
}

/// `ZREVRANK key member`.
pub(crate) fn zrevrank(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    rank_generic(ctx, tx, args, out, true)
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub(crate) fn zrandmember(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let picked = random_member(ctx, tx, args[1]);
        return finish(out, picked, |out, m| match m {
            Some(m) => write::bulk(out, &m),
            None => write::null(out, p),
        });
    }
    let with_scores = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && a.eq_ignore_ascii_case(b"withscores") => true,
        Some(_) => return refuse(out, SYNTAX),
    };
    let Some(count) = random_count(args[2], with_scores, out) else {
        return Ok(());
    };
    let picked = random_members(ctx, tx, args[1], count);
    finish(out, picked, |out, picked| {
        write_members(out, &picked, with_scores, p);
    })
}

/// A random member of `key`'s sorted set (`None`: absent).
fn random_member(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<Vec<u8>>> {
    let Some(z) = existing(ctx, tx, key, Lookup::Read)? else {
        return Ok(None);
    };
    let n = z.card(tx)?;
    let pick = random_u64() % n.max(1);
    Ok(z.by_rank(tx, pick, pick, false)?.pop().map(|(m, _)| m))
}

/// Random members of `key`'s sorted set with their scores, as `ZRANDMEMBER` with a count
/// picks them (none when absent).
fn random_members(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], count: i64) -> OpResult<Scored> {
    let Some(z) = existing(ctx, tx, key, Lookup::Read)? else {
        return Ok(Vec::new());
    };
    let n = z.card(tx)?;
    // The member order holds the first `n` map entries: random picks among them.
    let picked = random_entries(tx, &z.coll, n, count)?;
    let mut members = Vec::with_capacity(picked.len());
    for (k, v) in picked {
        members.push((element_of(&k, 1).to_vec(), score_of(&v)?));
    }
    Ok(members)
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
pub(crate) fn zscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(cursor) = scan_cursor(args, out) else {
        return Ok(());
    };
    let page = scan_elements(ctx, tx, args[1], Kind::ZSet, &[MEMBERS], args, cursor).and_then(
        |(found, next)| {
            let mut scored = Vec::with_capacity(found.len());
            for (k, v) in found {
                scored.push((k, score_of(&v)?));
            }
            Ok((scored, next))
        },
    );
    finish(out, page, |out, (found, next)| {
        scan_header(out, next, 2 * found.len());
        for (k, s) in &found {
            write::bulk(out, element_of(k, 1));
            write::bulk(out, double_text(*s).as_bytes());
        }
    })
}
