//! Set commands with Redis 7.0's semantics, replies and error texts (`t_set.c`). Members are
//! keyed by their hash then themselves (`collections`), so `SMEMBERS` lists them in hash order
//! (Redis: sorted for an intset, its table's order otherwise).

use tamer_store::{DbError, Tx};

use super::args::{intercard_args, pop_count, random_count, scan_cursor, too_long};
use super::collections::{self, existing, or_new, Lookup};
use super::reply::{
    bulk_or_null, fail, finish, refuse, scan_header, write_pairs, OpError, OpResult, SYNTAX,
};
use super::Context;
use crate::keyspace::collection::{
    element_of, hashed_key, load, load_uncounted, random_entries, Coll, Found,
};
use crate::keyspace::events::Class;
use crate::keyspace::{self, Kind};
use crate::resp::write;

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

fn member_key(tx: &Tx<'_>, member: &[u8]) -> Vec<u8> {
    hashed_key(tx, b"", member)
}

/// The member a map key names.
fn member_of(key: &[u8]) -> &[u8] {
    element_of(key, 0)
}

/// Every member of a set.
fn members(tx: &mut Tx<'_>, s: &Coll) -> DbResult<Vec<Vec<u8>>> {
    Ok(s.all(tx, b"")?
        .into_iter()
        .map(|(k, _)| member_of(&k).to_vec())
        .collect())
}

/// Saves a changed set (its key deleted when empty).
fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], s: Coll) -> Result {
    let n = s.len(tx)?;
    s.save(ctx, tx, key, n)
}

/// `SADD key member [member ...]`: the members added.
pub(crate) fn sadd(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if args[2..].iter().any(|m| too_long(m, out)) {
        return Ok(());
    }
    finish(
        out,
        add_members(ctx, tx, args[1], &args[2..]),
        write::integer,
    )
}

/// Adds `members` to `key`'s set (made when absent): how many were new.
fn add_members(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], members: &[&[u8]]) -> OpResult<i64> {
    let mut s = or_new(ctx, tx, key, Kind::Set)?;
    let mut added = 0;
    for m in members {
        let k = member_key(tx, m);
        if s.get(tx, &k)?.is_none() {
            s.put(tx, &k, b"")?;
            added += 1;
        }
    }
    save(ctx, tx, key, s)?;
    if added > 0 {
        ctx.notify(Class::Set, "sadd", key);
    }
    Ok(added)
}

/// `SREM key member [member ...]`: the members removed.
pub(crate) fn srem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::remove_hashed(ctx, tx, args, out, Kind::Set)
}

/// `SISMEMBER key member`.
pub(crate) fn sismember(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    collections::contains_hashed(ctx, tx, args, out, Kind::Set)
}

/// `SMISMEMBER key member [member ...]`: each member looked up as the reply goes.
pub(crate) fn smismember(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let s = match existing(ctx, tx, args[1], Kind::Set, Lookup::Read) {
        Ok(s) => s,
        Err(err) => return fail(out, err),
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
pub(crate) fn scard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::count_entries(ctx, tx, args, out, Kind::Set)
}

/// `SMEMBERS key`.
pub(crate) fn smembers(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let all = collections::entries(ctx, tx, args[1], Kind::Set, b"");
    finish(out, all, |out, all| {
        write::set(out, all.len(), ctx.protocol);
        for (k, _) in &all {
            write::bulk(out, member_of(k));
        }
    })
}

/// `SRANDMEMBER key [count]`.
pub(crate) fn srandmember(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let picked = collections::random_key(ctx, tx, args[1], Kind::Set);
        return finish(out, picked, |out, k| {
            bulk_or_null(out, k.as_deref().map(member_of), p);
        });
    }
    if args.len() > 3 {
        return refuse(out, SYNTAX);
    }
    let Some(count) = random_count(args[2], false, out) else {
        return Ok(());
    };
    let picked = collections::random_picks(ctx, tx, args[1], Kind::Set, count);
    finish(out, picked, |out, picked| {
        write_pairs(out, &picked, false, p, member_of);
    })
}

/// `SPOP key [count]`: random members removed.
pub(crate) fn spop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let Some(count) = pop_count(args, out) else {
        return Ok(());
    };
    let popped = pop_members(ctx, tx, args[1], count.unwrap_or(1));
    finish(out, popped, |out, popped| match count {
        None => bulk_or_null(out, popped.first().map(|(k, _)| member_of(k)), p),
        Some(_) => {
            write::set(out, popped.len(), p);
            for (k, _) in &popped {
                write::bulk(out, member_of(k));
            }
        }
    })
}

/// Removes up to `count` random members of `key`'s set: their entries (none when absent).
fn pop_members(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    count: u64,
) -> OpResult<collections::Entries> {
    let Some(mut s) = existing(ctx, tx, key, Kind::Set, Lookup::Write)? else {
        return Ok(Vec::new());
    };
    let n = s.len(tx)?;
    // `count` came from an `i64`.
    let picked = random_entries(tx, &s, n, count as i64)?;
    for (k, _) in &picked {
        s.del(tx, k)?;
    }
    if !picked.is_empty() {
        ctx.notify(Class::Set, "spop", key);
    }
    save(ctx, tx, key, s)?;
    Ok(picked)
}

/// `SMOVE source destination member`: 1 when moved.
pub(crate) fn smove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let moved = move_member(ctx, tx, args[1], args[2], args[3]);
    finish(out, moved, |out, moved| {
        write::integer(out, i64::from(moved))
    })
}

/// Moves `member` from `src`'s set to `dst`'s: whether `src` held it (both the same key:
/// whether it is a member).
fn move_member(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src_key: &[u8],
    dst_key: &[u8],
    member: &[u8],
) -> OpResult<bool> {
    // As Redis: an absent source is 0 before any type check; then both types.
    let src = load_uncounted(ctx, tx, src_key, Kind::Set)?;
    let dst = load_uncounted(ctx, tx, dst_key, Kind::Set)?;
    let (mut src, dst) = match (src, dst) {
        (Found::Absent, _) => return Ok(false),
        (Found::WrongType, _) | (_, Found::WrongType) => return Err(OpError::WrongType),
        (Found::Coll(s), Found::Absent) => (s, None),
        (Found::Coll(s), Found::Coll(d)) => (s, Some(d)),
    };
    let k = member_key(tx, member);
    if src_key == dst_key {
        return Ok(src.get(tx, &k)?.is_some());
    }
    if !src.del(tx, &k)? {
        return Ok(false);
    }
    ctx.notify(Class::Set, "srem", src_key);
    save(ctx, tx, src_key, src)?;
    let mut dst = dst.unwrap_or_else(|| Coll::new(Kind::Set));
    if dst.get(tx, &k)?.is_none() {
        dst.put(tx, &k, b"")?;
        save(ctx, tx, dst_key, dst)?;
        ctx.notify(Class::Set, "sadd", dst_key);
    }
    Ok(true)
}

/// How [`combine`] combines its sets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sets named by `keys` combined by `op` (an intersection stops at `limit` members), as
/// Redis reads them: every key's type checked first (`WRONGTYPE`); an absent key is an
/// empty set.
fn combine(
    ctx: &Context,
    tx: &mut Tx<'_>,
    keys: &[&[u8]],
    op: Op,
    limit: usize,
) -> OpResult<Vec<Vec<u8>>> {
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        match load(ctx, tx, key, Kind::Set)? {
            Found::WrongType => return Err(OpError::WrongType),
            Found::Absent => sets.push(None),
            Found::Coll(c) => sets.push(Some(c)),
        }
    }
    Ok(match op {
        // An intersection with an absent (empty) set is empty.
        Op::Inter if sets.iter().any(Option::is_none) => Vec::new(),
        Op::Inter => intersection(tx, sets.into_iter().flatten().collect(), limit)?,
        Op::Union => union(tx, &sets)?,
        Op::Diff => difference(tx, &sets)?,
    })
}

/// The members every one of `sets` holds, at most `limit`: the smallest set's, looked up in
/// the others.
fn intersection(tx: &mut Tx<'_>, sets: Vec<Coll>, limit: usize) -> DbResult<Vec<Vec<u8>>> {
    let mut sized = Vec::with_capacity(sets.len());
    for s in sets {
        sized.push((s.len(tx)?, s));
    }
    sized.sort_by_key(|(n, _)| *n);
    let mut result = Vec::new();
    let Some(((_, first), rest)) = sized.split_first() else {
        return Ok(result);
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
    Ok(result)
}

/// The members any of `sets` holds (`None`: an absent key), in byte order.
fn union(tx: &mut Tx<'_>, sets: &[Option<Coll>]) -> DbResult<Vec<Vec<u8>>> {
    let mut seen = std::collections::BTreeSet::new();
    for s in sets.iter().flatten() {
        seen.extend(members(tx, s)?);
    }
    Ok(seen.into_iter().collect())
}

/// The members of the first of `sets` that none of the others holds (`None`: an absent key).
fn difference(tx: &mut Tx<'_>, sets: &[Option<Coll>]) -> DbResult<Vec<Vec<u8>>> {
    let mut result = Vec::new();
    let Some(Some(first)) = sets.first() else {
        return Ok(result);
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
    Ok(result)
}

/// Stores `members` as the set at `dst`, replacing whatever it held (an empty result deletes
/// it): the keyspace event `event` (or `del`, `new`) as Redis's `setKey` and `dbDelete`.
fn store_members(
    ctx: &Context,
    tx: &mut Tx<'_>,
    dst: &[u8],
    members: &[Vec<u8>],
    event: &'static str,
) -> Result {
    if members.is_empty() {
        // Nothing was there: nothing changed (no watcher or cache told, as Redis's).
        if keyspace::remove(tx, ctx.namespace, dst).map_err(keyspace::store_error)? {
            ctx.touch(dst);
            ctx.notify(Class::Generic, "del", dst);
        }
        return Ok(());
    }
    ctx.touch(dst);
    let mut s = Coll::new(Kind::Set);
    for m in members {
        s.put(tx, &member_key(tx, m), b"")?;
    }
    // Written over whatever `dst` held (`keyspace::put` drops a replaced value's tree).
    s.save(ctx, tx, dst, members.len() as u64)?;
    ctx.notify(Class::Set, event, dst);
    Ok(())
}

/// `SINTER`, `SUNION`, `SDIFF key [key ...]`: the members.
fn generic(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>, op: Op) -> Result {
    let result = combine(ctx, tx, &args[1..], op, usize::MAX);
    finish(out, result, |out, members| {
        write::set(out, members.len(), ctx.protocol);
        for m in &members {
            write::bulk(out, m);
        }
    })
}

/// `SINTERSTORE`, `SUNIONSTORE`, `SDIFFSTORE destination key [key ...]`: the members stored.
fn generic_store(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: Op,
) -> Result {
    let stored = combine(ctx, tx, &args[2..], op, usize::MAX).and_then(|members| {
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        store_members(ctx, tx, args[1], &members, event)?;
        Ok(members.len())
    });
    finish(out, stored, |out, n| write::integer(out, n as i64))
}

/// `SINTER key [key ...]`.
pub(crate) fn sinter(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Inter)
}

/// `SUNION key [key ...]`.
pub(crate) fn sunion(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Union)
}

/// `SDIFF key [key ...]`.
pub(crate) fn sdiff(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    generic(ctx, tx, args, out, Op::Diff)
}

/// `SINTERSTORE destination key [key ...]`.
pub(crate) fn sinterstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    generic_store(ctx, tx, args, out, Op::Inter)
}

/// `SUNIONSTORE destination key [key ...]`.
pub(crate) fn sunionstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    generic_store(ctx, tx, args, out, Op::Union)
}

/// `SDIFFSTORE destination key [key ...]`.
pub(crate) fn sdiffstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    generic_store(ctx, tx, args, out, Op::Diff)
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub(crate) fn sintercard(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let Some((keys, limit)) = intercard_args(args, out) else {
        return Ok(());
    };
    let result = combine(ctx, tx, keys, Op::Inter, limit);
    finish(out, result, |out, members| {
        write::integer(out, members.len() as i64);
    })
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub(crate) fn sscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(cursor) = scan_cursor(args, out) else {
        return Ok(());
    };
    let page = collections::scan_elements(ctx, tx, args[1], Kind::Set, b"", args, cursor);
    finish(out, page, |out, (found, next)| {
        scan_header(out, next, found.len());
        for (k, _) in &found {
            write::bulk(out, member_of(k));
        }
    })
}
