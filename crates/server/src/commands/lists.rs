//! List commands with Redis 7.0's semantics, replies and error texts (`t_list.c`).
//!
//! A list's map is keyed by positions: 8-byte big-endian numbers spaced `GAP` apart (a push
//! at the head takes the first's less the gap, at the tail the last's plus it; the first
//! element sits at 2^63), and `LINSERT` takes a key strictly between its neighbours
//! (`between`: their midpoint while one exists, else a longer key). An index is a position
//! in the map (`Coll::at`: O(log n) in a tree), so `LINDEX` and `LSET` anywhere, and `LRANGE`
//! from anywhere, cost O(log n + k).

use std::ops::Bound;

use tamer_store::{DbError, Direction, Tx, MAX_TREE_KEY};

use super::args::{mpop_args, pop_count};
use super::collections::{self, existing, or_new, Lookup};
use super::reply::{
    bulk_or_null, finish, refuse, OpError, OpResult, NOT_INTEGER, NO_SUCH_KEY, SYNTAX,
};
use super::Context;
use crate::keyspace::collection::Coll;
use crate::keyspace::events::Class;
use crate::keyspace::Kind;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

/// Spacing of pushed positions: 2^20 `LINSERT`s fit between two pushed neighbours before keys
/// grow, and 2^43 pushes fit on either side of the first element.
pub(super) const GAP: u64 = 1 << 20;
const FIRST: u64 = 1 << 63;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// The head (`LEFT`).
    Left,
    /// The tail (`RIGHT`).
    Right,
}

impl End {
    /// `LEFT` or `RIGHT`, any case.
    pub(super) fn parse(arg: &[u8]) -> Option<End> {
        if arg.eq_ignore_ascii_case(b"left") {
            Some(End::Left)
        } else if arg.eq_ignore_ascii_case(b"right") {
            Some(End::Right)
        } else {
            None
        }
    }

    /// The keyspace event of a push at this end.
    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    /// The keyspace event of a pop from this end.
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }
}

/// The position a list key starts with (a key shorter than 8 bytes: the first's).
fn position_of(key: &[u8]) -> u64 {
    key.get(..8).map_or(FIRST, |b| {
        u64::from_be_bytes(b.try_into().expect("8 bytes"))
    })
}

/// A key strictly between `a` and `b` (either end open), no longer than needed; `None` when
/// it would pass the tree's key bound.
pub(super) fn between(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    let key = match (a, b) {
        (None, None) => FIRST.to_be_bytes().to_vec(),
        (None, Some(b)) => position_of(b).checked_sub(GAP)?.to_be_bytes().to_vec(),
        (Some(a), None) => position_of(a).checked_add(GAP)?.to_be_bytes().to_vec(),
        (Some(a), Some(b)) => {
            let (pa, pb) = (position_of(a), position_of(b));
            if pb > pa + 1 {
                (pa + (pb - pa) / 2).to_be_bytes().to_vec()
            } else {
                byte_midpoint(a, b)
            }
        }
    };
    debug_assert!(a.is_none_or(|a| a < &key[..]) && b.is_none_or(|b| &key[..] < b));
    (key.len() <= MAX_TREE_KEY).then_some(key)
}

/// A byte string strictly between `a < b`, where `b` is not `a` followed by a zero byte
/// (never made here: a midpoint byte is at least 1).
fn byte_midpoint(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(a.len() + 1);
    let mut b_open = false;
    // Bounded: each pass pushes a byte of `a` (or a pad) and ends by the first past both.
    for i in 0.. {
        let x = u16::from(a.get(i).copied().unwrap_or(0));
        let y = if b_open {
            256
        } else {
            b.get(i).copied().map_or(256, u16::from)
        };
        if y > x + 1 {
            k.push(((x + y) / 2) as u8);
            return k;
        }
        k.push(x as u8);
        b_open |= y == x + 1;
        if i > a.len() + b.len() + 1 {
            break;
        }
    }
    unreachable!("a byte string lies between any two distinct ones")
}

/// A list as a command sees it.
struct List {
    coll: Coll,
}

/// The direction that reads a list from `end`.
fn from_end(end: End) -> Direction {
    match end {
        End::Left => Direction::Forward,
        End::Right => Direction::Reverse,
    }
}

impl List {
    fn len(&self, tx: &mut Tx<'_>) -> DbResult<u64> {
        self.coll.len(tx)
    }

    /// Up to `limit` elements read from the head (`Forward`) or the tail: (key, element).
    fn read(
        &self,
        tx: &mut Tx<'_>,
        direction: Direction,
        limit: usize,
    ) -> DbResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.coll
            .scan(tx, Bound::Unbounded, direction, limit, &|_| true)
    }

    /// The element at `end`: (key, element).
    fn end(&self, tx: &mut Tx<'_>, end: End) -> DbResult<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.read(tx, from_end(end), 1)?.pop())
    }

    /// Whether `n` more elements fit at `end` (2^43 pushes fit on either side).
    fn room(&self, tx: &mut Tx<'_>, end: End, n: usize) -> DbResult<bool> {
        let Some((edge, _)) = self.end(tx, end)? else {
            return Ok(true);
        };
        let need = GAP.saturating_mul(n as u64);
        let p = position_of(&edge);
        Ok(match end {
            End::Left => p >= need,
            End::Right => p.checked_add(need).is_some(),
        })
    }

    /// Pushes `element` at `end` (the caller checked [`List::room`]).
    fn push(&mut self, tx: &mut Tx<'_>, end: End, element: &[u8]) -> Result {
        let edge = self.end(tx, end)?.map(|(k, _)| k);
        let key = match (edge.as_deref(), end) {
            (None, _) => Some(FIRST.to_be_bytes().to_vec()),
            (Some(e), End::Left) => between(None, Some(e)),
            (Some(e), End::Right) => between(Some(e), None),
        };
        let key = key.expect("room was checked");
        self.coll.put(tx, &key, element)?;
        Ok(())
    }

    /// Pops up to `count` elements from `end`.
    fn pop(&mut self, tx: &mut Tx<'_>, end: End, count: u64) -> DbResult<Vec<Vec<u8>>> {
        let taken = self.read(tx, from_end(end), count as usize)?;
        for (k, _) in &taken {
            self.coll.del(tx, k)?;
        }
        Ok(taken.into_iter().map(|(_, v)| v).collect())
    }

    /// The element at index `i` (negative from the end): (key, element).
    fn at(&self, tx: &mut Tx<'_>, i: i64) -> DbResult<Option<(Vec<u8>, Vec<u8>)>> {
        let n = self.len(tx)? as i64;
        let i = if i < 0 { n + i } else { i };
        if i < 0 || i >= n {
            return Ok(None);
        }
        self.coll.at(tx, i as u64)
    }

    /// Elements `start..=stop` as `LRANGE` reads them (negative from the end, clamped).
    fn range(&self, tx: &mut Tx<'_>, start: i64, stop: i64) -> DbResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let n = self.len(tx)? as i64;
        let start = if start < 0 { (n + start).max(0) } else { start };
        let stop = if stop < 0 { n + stop } else { stop.min(n - 1) };
        if start > stop || start >= n {
            return Ok(Vec::new());
        }
        let Some((first, _)) = self.coll.at(tx, start as u64)? else {
            return Ok(Vec::new());
        };
        let count = (stop - start + 1) as usize;
        self.coll.scan(
            tx,
            Bound::Included(&first),
            Direction::Forward,
            count,
            &|_| true,
        )
    }
}

/// `key`'s list (`None`: absent); `WRONGTYPE` when it holds another type.
fn existing_list(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
) -> OpResult<Option<List>> {
    Ok(existing(ctx, tx, key, Kind::List, lookup)?.map(|coll| List { coll }))
}

/// Saves a changed list (its key deleted when empty).
fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], l: List) -> Result {
    let n = l.len(tx)?;
    l.coll.save(ctx, tx, key, n)
}

/// The error of a push past the positions an end has left.
const FULL: &str = "ERR tamer: the list's positions at this end are exhausted";

/// `LPUSH`, `RPUSH`, `LPUSHX`, `RPUSHX key element [element ...]`: the list's length.
fn push_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    end: End,
    only_existing: bool,
) -> Result {
    let n = push(ctx, tx, args[1], &args[2..], end, only_existing);
    finish(out, n, |out, n| write::integer(out, n as i64))
}

/// Pushes `elements` at `end` of `key`'s list, made when absent unless `only_existing`: its
/// new length (0: absent and not made).
fn push(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    elements: &[&[u8]],
    end: End,
    only_existing: bool,
) -> OpResult<u64> {
    let coll = if only_existing {
        match existing(ctx, tx, key, Kind::List, Lookup::Write)? {
            Some(c) => c,
            None => return Ok(0),
        }
    } else {
        or_new(ctx, tx, key, Kind::List)?
    };
    let mut l = List { coll };
    if !l.room(tx, end, elements.len())? {
        return Err(OpError::Error(FULL));
    }
    for e in elements {
        l.push(tx, end, e)?;
    }
    let n = l.len(tx)?;
    save(ctx, tx, key, l)?;
    ctx.notify(Class::List, end.push_event(), key);
    Ok(n)
}

/// `LPUSH key element [element ...]`.
pub(crate) fn lpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Left, false)
}

/// `RPUSH key element [element ...]`.
pub(crate) fn rpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Right, false)
}

/// `LPUSHX key element [element ...]`.
pub(crate) fn lpushx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Left, true)
}

/// `RPUSHX key element [element ...]`.
pub(crate) fn rpushx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Right, true)
}

/// Pops up to `count` elements from `end` of `key`'s list (its key deleted with its last
/// element): `None` when the key is absent.
fn pop(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    end: End,
    count: u64,
) -> OpResult<Option<Vec<Vec<u8>>>> {
    let Some(mut l) = existing_list(ctx, tx, key, Lookup::Write)? else {
        return Ok(None);
    };
    let popped = l.pop(tx, end, count)?;
    if !popped.is_empty() {
        ctx.notify(Class::List, end.pop_event(), key);
    }
    save(ctx, tx, key, l)?;
    Ok(Some(popped))
}

/// A key and the elements popped from its list.
pub(super) type Popped<'k> = (&'k [u8], Vec<Vec<u8>>);

/// Pops up to `count` elements from `end` of the first of `keys` that holds a list, as
/// `LMPOP` and the blocking pops do: that key and its elements (`None`: every key is absent;
/// `WRONGTYPE` at the first key of another type).
pub(super) fn pop_first<'k>(
    ctx: &Context,
    tx: &mut Tx<'_>,
    keys: &[&'k [u8]],
    end: End,
    count: u64,
) -> OpResult<Option<Popped<'k>>> {
    for &key in keys {
        if let Some(popped) = pop(ctx, tx, key, end, count)?.filter(|p| !p.is_empty()) {
            return Ok(Some((key, popped)));
        }
    }
    Ok(None)
}

/// `LPOP`, `RPOP key [count]`: one element (or null), or an array of up to `count` (a null
/// array when the key is absent).
fn pop_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    end: End,
) -> Result {
    let p = ctx.protocol;
    let Some(count) = pop_count(args, out) else {
        return Ok(());
    };
    let popped = pop(ctx, tx, args[1], end, count.unwrap_or(1));
    finish(out, popped, |out, popped| match (count, popped) {
        (None, popped) => bulk_or_null(
            out,
            popped.as_ref().and_then(|e| e.first()).map(Vec::as_slice),
            p,
        ),
        (Some(_), None) => write::null_array(out, p),
        (Some(_), Some(popped)) => {
            write::array(out, popped.len());
            for e in &popped {
                write::bulk(out, e);
            }
        }
    })
}

/// `LPOP key [count]`.
pub(crate) fn lpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, End::Left)
}

/// `RPOP key [count]`.
pub(crate) fn rpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, End::Right)
}

/// `LLEN key`.
pub(crate) fn llen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    collections::count_entries(ctx, tx, args, out, Kind::List)
}

/// `LINDEX key index`.
pub(crate) fn lindex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let found = element_at(ctx, tx, args[1], parse_i64(args[2]));
    finish(out, found, |out, e| {
        bulk_or_null(out, e.as_deref(), ctx.protocol)
    })
}

/// The element at `index` of `key`'s list (`None`: absent, or no such index). As Redis, the
/// key first, then the index (`None`: not an integer).
fn element_at(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    index: Option<i64>,
) -> OpResult<Option<Vec<u8>>> {
    let Some(l) = existing_list(ctx, tx, key, Lookup::Read)? else {
        return Ok(None);
    };
    let i = index.ok_or(OpError::Error(NOT_INTEGER))?;
    Ok(l.at(tx, i)?.map(|(_, e)| e))
}

/// `LRANGE key start stop`.
pub(crate) fn lrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(start), Some(stop)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return refuse(out, NOT_INTEGER);
    };
    let elements = range(ctx, tx, args[1], start, stop);
    finish(out, elements, |out, elements| {
        write::array(out, elements.len());
        for (_, e) in &elements {
            write::bulk(out, e);
        }
    })
}

/// The elements `start..=stop` of `key`'s list (none when absent): (key, element).
fn range(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    start: i64,
    stop: i64,
) -> OpResult<Vec<(Vec<u8>, Vec<u8>)>> {
    match existing_list(ctx, tx, key, Lookup::Read)? {
        Some(l) => Ok(l.range(tx, start, stop)?),
        None => Ok(Vec::new()),
    }
}

/// `LSET key index element`.
pub(crate) fn lset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let set = set_at(ctx, tx, args[1], parse_i64(args[2]), args[3]);
    finish(out, set, |out, ()| write::simple(out, "OK"))
}

/// Sets the element at `index` of `key`'s list. As Redis, the key first (`ERR no such
/// key`), then the index (`None`: not an integer), then its range.
fn set_at(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    index: Option<i64>,
    element: &[u8],
) -> OpResult<()> {
    let Some(mut l) = existing_list(ctx, tx, key, Lookup::Write)? else {
        return Err(OpError::Error(NO_SUCH_KEY));
    };
    let i = index.ok_or(OpError::Error(NOT_INTEGER))?;
    let Some((k, _)) = l.at(tx, i)? else {
        return Err(OpError::Error("ERR index out of range"));
    };
    l.coll.put(tx, &k, element)?;
    save(ctx, tx, key, l)?;
    ctx.notify(Class::List, "lset", key);
    Ok(())
}

/// `LINSERT key BEFORE | AFTER pivot element`.
pub(crate) fn linsert(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let before = if args[2].eq_ignore_ascii_case(b"before") {
        true
    } else if args[2].eq_ignore_ascii_case(b"after") {
        false
    } else {
        return refuse(out, SYNTAX);
    };
    finish(
        out,
        insert(ctx, tx, args[1], before, args[3], args[4]),
        write::integer,
    )
}

/// Inserts `element` before or after the first `pivot` of `key`'s list: its new length (0:
/// absent; -1: no pivot).
fn insert(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    before: bool,
    pivot: &[u8],
    element: &[u8],
) -> OpResult<i64> {
    let Some(mut l) = existing_list(ctx, tx, key, Lookup::Write)? else {
        return Ok(0);
    };
    let all = l.read(tx, Direction::Forward, usize::MAX)?;
    let Some((at, _)) = all.into_iter().find(|(_, e)| e == pivot) else {
        return Ok(-1);
    };
    let direction = if before {
        Direction::Reverse
    } else {
        Direction::Forward
    };
    let neighbour = l
        .coll
        .scan(tx, Bound::Excluded(&at), direction, 1, &|_| true)?;
    let other = neighbour.first().map(|(k, _)| k.as_slice());
    let key_between = if before {
        between(other, Some(&at))
    } else {
        between(Some(&at), other)
    };
    let Some(k) = key_between else {
        return Err(OpError::Error(
            "ERR tamer: too many insertions at one place of the list",
        ));
    };
    l.coll.put(tx, &k, element)?;
    let n = l.len(tx)?;
    save(ctx, tx, key, l)?;
    ctx.notify(Class::List, "linsert", key);
    Ok(n as i64)
}

/// `LREM key count element`.
pub(crate) fn lrem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(count) = parse_i64(args[2]) else {
        return refuse(out, NOT_INTEGER);
    };
    finish(
        out,
        remove(ctx, tx, args[1], count, args[3]),
        write::integer,
    )
}

/// Removes elements equal to `element` from `key`'s list: `count` of them from the head
/// (negative: from the tail; 0: all): how many.
fn remove(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], count: i64, element: &[u8]) -> OpResult<i64> {
    let Some(mut l) = existing_list(ctx, tx, key, Lookup::Write)? else {
        return Ok(0);
    };
    let direction = if count < 0 {
        Direction::Reverse
    } else {
        Direction::Forward
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let all = l.read(tx, direction, usize::MAX)?;
    let mut removed = 0;
    for (k, e) in all {
        if removed == limit {
            break;
        }
        if e == element {
            l.coll.del(tx, &k)?;
            removed += 1;
        }
    }
    if removed > 0 {
        ctx.notify(Class::List, "lrem", key);
    }
    save(ctx, tx, key, l)?;
    Ok(removed as i64)
}

/// `LTRIM key start stop`.
pub(crate) fn ltrim(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(start), Some(stop)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return refuse(out, NOT_INTEGER);
    };
    finish(out, trim(ctx, tx, args[1], start, stop), |out, ()| {
        write::simple(out, "OK");
    })
}

/// Keeps only the elements `start..=stop` of `key`'s list (as `LRANGE` reads them).
fn trim(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], start: i64, stop: i64) -> OpResult<()> {
    let Some(mut l) = existing_list(ctx, tx, key, Lookup::Write)? else {
        return Ok(());
    };
    let n = l.len(tx)? as i64;
    let start = if start < 0 { (n + start).max(0) } else { start };
    let stop = if stop < 0 { n + stop } else { stop.min(n - 1) };
    let (left, right) = if start > stop || start >= n {
        (n, 0)
    } else {
        (start, n - stop - 1)
    };
    l.pop(tx, End::Left, left as u64)?;
    l.pop(tx, End::Right, right as u64)?;
    ctx.notify(Class::List, "ltrim", key);
    // A trim that keeps every element is still a write to Redis (watchers, caches).
    ctx.touch(key);
    save(ctx, tx, key, l)?;
    Ok(())
}

/// `LPOS`'s options.
#[derive(Clone, Copy, Debug)]
struct LposOptions {
    /// `RANK`: the first match counted (negative: from the tail).
    rank: i64,
    /// `COUNT`: how many matches (0: all; `None`: one, replied alone).
    count: Option<i64>,
    /// `MAXLEN`: how many elements compared (0: all).
    maxlen: i64,
}

/// Parses `LPOS`'s options from `args[3..]`; `None` with the error written.
fn lpos_options(args: &[&[u8]], out: &mut Vec<u8>) -> Option<LposOptions> {
    let mut o = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        let set = match args.get(i + 1) {
            Some(value) => lpos_option(&mut o, &args[i].to_ascii_lowercase(), parse_i64(value)),
            None => Err(SYNTAX),
        };
        if let Err(text) = set {
            write::error(out, text);
            return None;
        }
        i += 2;
    }
    Some(o)
}

/// Sets `LPOS`'s option `name` to `value` (`None`: no integer), or the error's text.
fn lpos_option(
    o: &mut LposOptions,
    name: &[u8],
    value: Option<i64>,
) -> std::result::Result<(), &'static str> {
    // Redis reads COUNT and MAXLEN in a range with its own text for any bad value.
    let Some(v) = value else {
        return Err(match name {
            b"rank" => NOT_INTEGER,
            b"count" => "ERR COUNT can't be negative",
            b"maxlen" => "ERR MAXLEN can't be negative",
            _ => SYNTAX,
        });
    };
    match name {
        b"rank" if v == 0 || v == i64::MIN => return Err(RANK_ZERO),
        b"rank" => o.rank = v,
        b"count" if v < 0 => return Err("ERR COUNT can't be negative"),
        b"count" => o.count = Some(v),
        b"maxlen" if v < 0 => return Err("ERR MAXLEN can't be negative"),
        b"maxlen" => o.maxlen = v,
        _ => return Err(SYNTAX),
    }
    Ok(())
}

/// `LPOS`'s error for a `RANK` of 0 (or of `i64::MIN`, which has no opposite).
const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
pub(crate) fn lpos(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(o) = lpos_options(args, out) else {
        return Ok(());
    };
    let found = positions(ctx, tx, args[1], args[2], &o);
    finish(out, found, |out, found| match o.count {
        None => match found.first() {
            Some(&i) => write::integer(out, i),
            None => write::null(out, ctx.protocol),
        },
        Some(_) => {
            write::array(out, found.len());
            for i in found {
                write::integer(out, i);
            }
        }
    })
}

/// The indexes of `element` in `key`'s list as `LPOS` with `o` finds them (none when
/// absent).
fn positions(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    element: &[u8],
    o: &LposOptions,
) -> OpResult<Vec<i64>> {
    let Some(l) = existing_list(ctx, tx, key, Lookup::Read)? else {
        return Ok(Vec::new());
    };
    let n = l.len(tx)?;
    let direction = if o.rank < 0 {
        Direction::Reverse
    } else {
        Direction::Forward
    };
    let scan_len = if o.maxlen == 0 {
        usize::MAX
    } else {
        o.maxlen as usize
    };
    let all = l.read(tx, direction, scan_len)?;
    let mut skip = o.rank.unsigned_abs() - 1;
    let want = match o.count {
        Some(0) => usize::MAX,
        Some(c) => c as usize,
        None => 1,
    };
    let mut found = Vec::new();
    for (i, (_, e)) in all.iter().enumerate() {
        if e != element {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let index = if o.rank < 0 {
            n - 1 - i as u64
        } else {
            i as u64
        };
        found.push(index as i64);
        if found.len() >= want {
            break;
        }
    }
    Ok(found)
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end, as `LMOVE` does: the
/// element (`None`: `src` is absent or empty). Both types, and the destination's room, are
/// checked before anything moves, so a refusal leaves both lists as they were; a list moved
/// onto itself is never emptied on the way (its TTL stays, as in Redis).
fn move_one(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> OpResult<Option<Vec<u8>>> {
    let Some(mut source) = existing_list(ctx, tx, src, Lookup::Write)? else {
        return Ok(None);
    };
    if src == dst {
        if !source.room(tx, to, 1)? {
            return Err(OpError::Error(FULL));
        }
        let Some(element) = source.pop(tx, from, 1)?.pop() else {
            return Ok(None);
        };
        source.push(tx, to, &element)?;
        save(ctx, tx, src, source)?;
        ctx.notify(Class::List, to.push_event(), src);
        ctx.notify(Class::List, from.pop_event(), src);
        return Ok(Some(element));
    }
    let mut target = List {
        coll: or_new(ctx, tx, dst, Kind::List)?,
    };
    if !target.room(tx, to, 1)? {
        return Err(OpError::Error(FULL));
    }
    let Some(element) = source.pop(tx, from, 1)?.pop() else {
        return Ok(None);
    };
    // Redis's order: the destination's push (and `new`), then the source's pop (and `del`).
    target.push(tx, to, &element)?;
    save(ctx, tx, dst, target)?;
    ctx.notify(Class::List, to.push_event(), dst);
    ctx.notify(Class::List, from.pop_event(), src);
    save(ctx, tx, src, source)?;
    Ok(Some(element))
}

/// `LMOVE source destination LEFT | RIGHT LEFT | RIGHT`.
pub(crate) fn lmove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return refuse(out, SYNTAX);
    };
    moved_reply(ctx, tx, args[1], args[2], from, to, out)
}

/// `RPOPLPUSH source destination`.
pub(crate) fn rpoplpush(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    moved_reply(ctx, tx, args[1], args[2], End::Right, End::Left, out)
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end and replies with it (a null
/// when `src` is empty).
pub(super) fn moved_reply(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    out: &mut Vec<u8>,
) -> Result {
    let moved = move_one(ctx, tx, src, dst, from, to);
    finish(out, moved, |out, e| {
        bulk_or_null(out, e.as_deref(), ctx.protocol)
    })
}

/// `LMPOP numkeys key [key ...] LEFT | RIGHT [COUNT count]`.
pub(crate) fn lmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    mpop_at(ctx, tx, args, 1, out)
}

/// `LMPOP`'s work on `numkeys key [key ...] LEFT | RIGHT [COUNT count]` from `args[first]`
/// (`BLMPOP`'s start after its timeout): `[key, [element, ...]]`, or a null array.
pub(super) fn mpop_at(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    first: usize,
    out: &mut Vec<u8>,
) -> Result {
    let Some((keys, end, count)) = mpop_args(args, first, End::parse, out) else {
        return Ok(());
    };
    let popped = pop_first(ctx, tx, keys, end, count);
    finish(out, popped, |out, popped| match popped {
        Some((key, popped)) => {
            write::array(out, 2);
            write::bulk(out, key);
            write::array(out, popped.len());
            for e in &popped {
                write::bulk(out, e);
            }
        }
        None => write::null_array(out, ctx.protocol),
    })
}
