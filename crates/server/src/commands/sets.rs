//! Set commands with Redis 7.0's semantics, replies and error texts (`t_set.c`). Members are
//! keyed by their hash then themselves (`collections`), so `SMEMBERS` lists them in hash order
//! (Redis: sorted for an intset, its table's order otherwise).

use tamer_store::{DbError, Tx};

use super::args::too_long;
use super::collections::{load_or_new, Lookup};
use super::reply::{SYNTAX, WRONGTYPE};
use crate::commands::Context;
use crate::keyspace::collection::{
    hashed_key, load, load_uncounted, random_u64, scan_hashed, Coll, Found,
};
use crate::keyspace::{self, Kind};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

fn member_key(tx: &Tx<'_>, member: &[u8]) -> Vec<u8> {
    hashed_key(tx, b"", member)
}

fn member_of(key: &[u8]) -> &[u8] {
    crate::keyspace::collection::element_of(key, 0)
}

/// Loads `key`'s set (see [`super::collections::open`]).
fn read(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
    out: &mut Vec<u8>,
    absent: impl FnOnce(&mut Vec<u8>),
) -> std::result::Result<Option<Coll>, DbError> {
    super::collections::open(ctx, tx, key, Kind::Set, lookup, out, absent)
}

/// Every member of a set.
fn members(tx: &mut Tx<'_>, s: &Coll) -> std::result::Result<Vec<Vec<u8>>, DbError> {
    Ok(s.all(tx, b"")?
        .into_iter()
        .map(|(k, _)| member_of(&k).to_vec())
        .collect())
}

/// `SADD key member [member ...]`: the members added.
pub fn sadd(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args[2..].iter().any(|m| too_long(m, out)) {
        return Ok(());
    }
    let Some(mut s) = load_or_new(ctx, tx, args[1], Kind::Set, out)? else {
        return Ok(());
    };
    let mut added = 0;
    for m in &args[2..] {
        let k = member_key(tx, m);
        if s.get(tx, &k)?.is_none() {
            s.put(tx, &k, b"")?;
            added += 1;
        }
    }
    let n = s.len(tx)?;
    s.save(ctx, tx, args[1], n)?;
    write::integer(out, added);
    Ok(())
}

/// `SREM key member [member ...]`: the members removed.
pub fn srem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::remove_hashed(ctx, tx, args, out, Kind::Set)
}

/// `SISMEMBER key member`.
pub fn sismember(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::contains_hashed(ctx, tx, args, out, Kind::Set)
}

/// `SMISMEMBER key member [member ...]`.
pub fn smismember(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let s = match load(ctx, tx, args[1], Kind::Set)? {
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        Found::Absent => None,
        Found::Coll(c) => Some(c),
    };
    write::array(out, args.len() - 2);
    for m in &args[2..] {
        let found = match &s {
            Some(s) => s.get(tx, &member_key(tx, m))?.is_some(),
            None => false,
        };
        write::integer(out, i64::from(found));
    }
    Ok(())
}

/// `SCARD key`.
pub fn scard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::collections::count_entries(ctx, tx, args, out, Kind::Set)
}

/// `SMEMBERS key`.
pub fn smembers(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let Some(s) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::set(o, 0, p))? else {
        return Ok(());
    };
    let all = members(tx, &s)?;
    write::set(out, all.len(), p);
    for m in &all {
        write::bulk(out, m);
    }
    Ok(())
}

/// `SRANDMEMBER key [count]`.
pub fn srandmember(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let Some(s) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
            return Ok(());
        };
        let n = s.len(tx)?;
        let pick = random_u64() % n.max(1);
        match s.at(tx, pick)? {
            Some((k, _)) => write::bulk(out, member_of(&k)),
            None => write::null(out, p),
        }
        return Ok(());
    }
    if args.len() > 3 {
        write::error(out, SYNTAX);
        return Ok(());
    }
    let Some(count) = super::args::random_count(args[2], false, out) else {
        return Ok(());
    };
    let Some(s) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::array(o, 0))? else {
        return Ok(());
    };
    let n = s.len(tx)?;
    let picked = crate::keyspace::collection::random_entries(tx, &s, n, count)?;
    super::reply::write_pairs(out, &picked, false, p, member_of);
    Ok(())
}

/// `SPOP key [count]`: random members removed.
pub fn spop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    if args.len() > 3 {
        write::error(out, SYNTAX);
        return Ok(());
    }
    let count = match args.get(2).map(|a| parse_i64(a)) {
        None => None,
        Some(Some(c)) if c >= 0 => Some(c),
        Some(_) => {
            write::error(out, "ERR value is out of range, must be positive");
            return Ok(());
        }
    };
    let absent = |o: &mut Vec<u8>| match count {
        None => write::null(o, p),
        Some(_) => write::set(o, 0, p),
    };
    let Some(mut s) = read(ctx, tx, args[1], Lookup::Write, out, absent)? else {
        return Ok(());
    };
    let n = s.len(tx)?;
    let picked = crate::keyspace::collection::random_entries(tx, &s, n, count.unwrap_or(1))?;
    for (k, _) in &picked {
        s.del(tx, k)?;
    }
    let left = s.len(tx)?;
    s.save(ctx, tx, args[1], left)?;
    match count {
        None => match picked.first() {
            Some((k, _)) => write::bulk(out, member_of(k)),
            None => write::null(out, p),
        },
        Some(_) => {
            write::set(out, picked.len(), p);
            for (k, _) in &picked {
                write::bulk(out, member_of(k));
            }
        }
    }
    Ok(())
}

/// `SMOVE source destination member`: 1 when moved.
pub fn smove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (src_key, dst_key, member) = (args[1], args[2], args[3]);
    // As Redis: an absent source is 0 before any type check; then both types.
    let src = load_uncounted(ctx, tx, src_key, Kind::Set)?;
    let dst = load_uncounted(ctx, tx, dst_key, Kind::Set)?;
    let (mut src, dst) = match (src, dst) {
        (Found::Absent, _) => {
            write::integer(out, 0);
            return Ok(());
        }
        (Found::WrongType, _) | (_, Found::WrongType) => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        (Found::Coll(s), Found::Absent) => (s, None),
        (Found::Coll(s), Found::Coll(d)) => (s, Some(d)),
    };
    let k = member_key(tx, member);
    if src_key == dst_key {
        write::integer(out, i64::from(src.get(tx, &k)?.is_some()));
        return Ok(());
    }
    if !src.del(tx, &k)? {
        write::integer(out, 0);
        return Ok(());
    }
    let n = src.len(tx)?;
    src.save(ctx, tx, src_key, n)?;
    let mut dst = dst.unwrap_or_else(|| Coll::new(Kind::Set));
    if dst.get(tx, &k)?.is_none() {
        dst.put(tx, &k, b"")?;
        let n = dst.len(tx)?;
        dst.save(ctx, tx, dst_key, n)?;
    }
    write::integer(out, 1);
    Ok(())
}

/// How [`combine`] combines its sets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sets named by `keys` combined by `op`, as Redis reads them: `None` with `WRONGTYPE`
/// written when any key holds another type; an absent key is an empty set.
fn combine(
    ctx: &Context,
    tx: &mut Tx<'_>,
    keys: &[&[u8]],
    op: Op,
    out: &mut Vec<u8>,
    limit: usize,
) -> std::result::Result<Option<Vec<Vec<u8>>>, DbError> {
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        match load(ctx, tx, key, Kind::Set)? {
            Found::WrongType => {
                write::error(out, WRONGTYPE);
                return Ok(None);
            }
            Found::Absent => sets.push(None),
            Found::Coll(c) => sets.push(Some(c)),
        }
    }
    let mut result = Vec::new();
    // An intersection with an absent (empty) set is empty; every key's type was checked.
    if op == Op::Inter && sets.iter().any(Option::is_none) {
        return Ok(Some(result));
    }
    match op {
        Op::Inter => {
            let mut sized = Vec::with_capacity(sets.len());
            for s in sets.into_iter().flatten() {
                sized.push((s.len(tx)?, s));
            }
            sized.sort_by_key(|(n, _)| *n);
            let Some(((_, first), rest)) = sized.split_first() else {
                return Ok(Some(result));
            };
            for m in members(tx, first)? {
                if result.len() >= limit {
                    break;
                }
                let k = member_key(tx, &m);
                let mut everywhere = true;
                for (_, s) in rest {
                    if s.get(tx, &k)?.is_none() {
                        everywhere = false;
                        break;
                    }
                }
                if everywhere {
                    result.push(m);
                }
            }
        }
        Op::Union => {
            let mut seen = std::collections::BTreeSet::new();
            for s in sets.iter().flatten() {
                seen.extend(members(tx, s)?);
            }
            result.extend(seen);
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Ok(Some(result));
            };
            for m in members(tx, first)? {
                let k = member_key(tx, &m);
                let mut elsewhere = false;
                for s in sets[1..].iter().flatten() {
                    if s.get(tx, &k)?.is_some() {
                        elsewhere = true;
                        break;
                    }
                }
                if !elsewhere {
                    result.push(m);
                }
            }
        }
    }
    Ok(Some(result))
}

fn reply_members(ctx: &Context, out: &mut Vec<u8>, members: &[Vec<u8>]) {
    write::set(out, members.len(), ctx.protocol);
    for m in members {
        write::bulk(out, m);
    }
}

/// Stores `members` as the set at `dst` (replacing whatever it held; an empty result deletes
/// it) and replies their count.
fn store_members(
    ctx: &Context,
    tx: &mut Tx<'_>,
    dst: &[u8],
    members: &[Vec<u8>],
    out: &mut Vec<u8>,
) -> Result {
    ctx.touch(dst);
    keyspace::remove(tx, ctx.namespace, dst).map_err(crate::keyspace::store_error)?;
    let mut s = Coll::new(Kind::Set);
    for m in members {
        s.put(tx, &member_key(tx, m), b"")?;
    }
    s.save(ctx, tx, dst, members.len() as u64)?;
    write::integer(out, members.len() as i64);
    Ok(())
}

fn generic(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>, op: Op) -> Result {
    if let Some(result) = combine(ctx, tx, &args[1..], op, out, usize::MAX)? {
        reply_members(ctx, out, &result);
    }
    Ok(())
}

fn generic_store(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: Op,
) -> Result {
    if let Some(result) = combine(ctx, tx, &args[2..], op, out, usize::MAX)? {
        store_members(ctx, tx, args[1], &result, out)?;
    }
    Ok(())
}

/// `SINTER key [key ...]`.
pub fn sinter(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Inter)
}

/// `SUNION key [key ...]`.
pub fn sunion(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Union)
}

/// `SDIFF key [key ...]`.
pub fn sdiff(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Diff)
}

/// `SINTERSTORE destination key [key ...]`.
pub fn sinterstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic_store(ctx, tx, args, out, Op::Inter)
}

/// `SUNIONSTORE destination key [key ...]`.
pub fn sunionstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic_store(ctx, tx, args, out, Op::Union)
}

/// `SDIFFSTORE destination key [key ...]`.
pub fn sdiffstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic_store(ctx, tx, args, out, Op::Diff)
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub fn sintercard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((keys, mut i)) = super::args::numkeys(args, out) else {
        return Ok(());
    };
    let mut limit = usize::MAX;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"limit") && i + 1 < args.len() {
            match parse_i64(args[i + 1]) {
                Some(0) => limit = usize::MAX,
                Some(n) if n > 0 => limit = n as usize,
                _ => {
                    write::error(out, "ERR LIMIT can't be negative");
                    return Ok(());
                }
            }
            i += 2;
        } else {
            write::error(out, SYNTAX);
            return Ok(());
        }
    }
    if let Some(result) = combine(ctx, tx, &keys, Op::Inter, out, limit)? {
        write::integer(out, result.len() as i64);
    }
    Ok(())
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn sscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((cursor, count, pattern)) = super::args::scan_args(args, out) else {
        return Ok(());
    };
    let Some(s) = read(
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
    let (found, next) = if s.in_tree() {
        scan_hashed(tx, &s, b"", cursor, count)?
    } else {
        (s.all(tx, b"")?, 0)
    };
    let kept: Vec<&[u8]> = found
        .iter()
        .map(|(k, _)| member_of(k))
        .filter(|m| pattern.is_none_or(|p| crate::glob::matches(p, m)))
        .collect();
    write::array(out, 2);
    write::bulk(out, next.to_string().as_bytes());
    write::array(out, kept.len());
    for m in kept {
        write::bulk(out, m);
    }
    Ok(())
}
