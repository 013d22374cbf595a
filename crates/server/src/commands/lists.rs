//! List commands with Redis 7.0's semantics, replies and error texts (`t_list.c`).
//!
//! A list's map is keyed by positions: 8-byte big-endian numbers spaced [`GAP`] apart (a push
//! at the head takes the first's less the gap, at the tail the last's plus it; the first
//! element sits at 2^63), and `LINSERT` takes a key strictly between its neighbours
//! ([`between`]: their midpoint while one exists, else a longer key). An index is a position
//! in the map (`Coll::at`: O(log n) in a tree), so `LINDEX` and `LSET` anywhere, and `LRANGE`
//! from anywhere, cost O(log n + k).

use std::ops::Bound;

use tamer_store::{DbError, Direction, Tx, MAX_TREE_KEY};

use super::collections::{load_or_new, Lookup};
use super::reply::{NOT_INTEGER, NO_SUCH_KEY, SYNTAX, WRONGTYPE};
use crate::commands::Context;
use crate::keyspace::collection::{load_uncounted, Coll, Found};
use crate::keyspace::Kind;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

/// Spacing of pushed positions: 2^20 `LINSERT`s fit between two pushed neighbours before keys
/// grow, and 2^43 pushes fit on either side of the first element.
pub const GAP: u64 = 1 << 20;
const FIRST: u64 = 1 << 63;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

impl End {
    pub fn parse(arg: &[u8]) -> Option<End> {
        if arg.eq_ignore_ascii_case(b"left") {
            Some(End::Left)
        } else if arg.eq_ignore_ascii_case(b"right") {
            Some(End::Right)
        } else {
            None
        }
    }
}

fn position_of(key: &[u8]) -> u64 {
    key.get(..8).map_or(FIRST, |b| {
        u64::from_be_bytes(b.try_into().expect("8 bytes"))
    })
}

/// A key strictly between `a` and `b` (either end open), no longer than needed; `None` when
/// it would pass the tree's key bound.
pub fn between(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
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
pub struct List {
    pub coll: Coll,
}

impl List {
    pub fn len(&self, tx: &mut Tx<'_>) -> DbResult<u64> {
        self.coll.len(tx)
    }

    /// The element at `end`: (key, element).
    fn end(&self, tx: &mut Tx<'_>, end: End) -> DbResult<Option<(Vec<u8>, Vec<u8>)>> {
        let direction = match end {
            End::Left => Direction::Forward,
            End::Right => Direction::Reverse,
        };
        Ok(self
            .coll
            .scan(tx, Bound::Unbounded, direction, 1, &|_| true)?
            .pop())
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
    pub fn push(&mut self, tx: &mut Tx<'_>, end: End, element: &[u8]) -> Result {
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
    pub fn pop(&mut self, tx: &mut Tx<'_>, end: End, count: u64) -> DbResult<Vec<Vec<u8>>> {
        let direction = match end {
            End::Left => Direction::Forward,
            End::Right => Direction::Reverse,
        };
        let taken = self
            .coll
            .scan(tx, Bound::Unbounded, direction, count as usize, &|_| true)?;
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

/// Loads `key`'s list: `None` when the reply is written.
fn read(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
    out: &mut Vec<u8>,
    absent: impl FnOnce(&mut Vec<u8>),
) -> DbResult<Option<List>> {
    Ok(
        super::collections::open(ctx, tx, key, Kind::List, lookup, out, absent)?
            .map(|coll| List { coll }),
    )
}

/// Saves a changed list (its key deleted when empty).
pub fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], l: List) -> Result {
    let n = l.len(tx)?;
    l.coll.save(ctx, tx, key, n)
}

const FULL: &str = "ERR tamer: the list's positions at this end are exhausted";

fn push_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    end: End,
    only_existing: bool,
) -> Result {
    let l = if only_existing {
        match load_uncounted(ctx, tx, args[1], Kind::List)? {
            Found::Absent => {
                write::integer(out, 0);
                return Ok(());
            }
            Found::WrongType => {
                write::error(out, WRONGTYPE);
                return Ok(());
            }
            Found::Coll(c) => c,
        }
    } else {
        let Some(c) = load_or_new(ctx, tx, args[1], Kind::List, out)? else {
            return Ok(());
        };
        c
    };
    let mut l = List { coll: l };
    if !l.room(tx, end, args.len() - 2)? {
        write::error(out, FULL);
        return Ok(());
    }
    for e in &args[2..] {
        l.push(tx, end, e)?;
    }
    let n = l.len(tx)?;
    save(ctx, tx, args[1], l)?;
    write::integer(out, n as i64);
    Ok(())
}

/// `LPUSH key element [element ...]`.
pub fn lpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Left, false)
}

/// `RPUSH key element [element ...]`.
pub fn rpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Right, false)
}

/// `LPUSHX key element [element ...]`.
pub fn lpushx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Left, true)
}

/// `RPUSHX key element [element ...]`.
pub fn rpushx(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    push_generic(ctx, tx, args, out, End::Right, true)
}

/// Pops up to `count` from `key`'s list at `end`: `Ok(None)` with `WRONGTYPE` written, an
/// empty result when the key is absent.
pub fn pop_from(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    end: End,
    count: u64,
    out: &mut Vec<u8>,
) -> DbResult<Option<Vec<Vec<u8>>>> {
    let mut l = match load_uncounted(ctx, tx, key, Kind::List)? {
        Found::Absent => return Ok(Some(Vec::new())),
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(None);
        }
        Found::Coll(coll) => List { coll },
    };
    let popped = l.pop(tx, end, count)?;
    save(ctx, tx, key, l)?;
    Ok(Some(popped))
}

fn pop_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    end: End,
) -> Result {
    let p = ctx.protocol;
    if args.len() > 3 {
        write::error(out, SYNTAX);
        return Ok(());
    }
    let count = match args.get(2).map(|a| parse_i64(a)) {
        None => None,
        Some(Some(c)) if c >= 0 => Some(c as u64),
        Some(_) => {
            write::error(out, "ERR value is out of range, must be positive");
            return Ok(());
        }
    };
    let exists = !matches!(load_uncounted(ctx, tx, args[1], Kind::List)?, Found::Absent);
    let Some(popped) = pop_from(ctx, tx, args[1], end, count.unwrap_or(1), out)? else {
        return Ok(());
    };
    match count {
        None => match popped.first() {
            Some(e) => write::bulk(out, e),
            None => write::null(out, p),
        },
        // An absent key with a count: a null array (an existing list never is empty).
        Some(_) if !exists => write::null_array(out, p),
        Some(_) => {
            write::array(out, popped.len());
            for e in &popped {
                write::bulk(out, e);
            }
        }
    }
    Ok(())
}

/// `LPOP key [count]`.
pub fn lpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, End::Left)
}

/// `RPOP key [count]`.
pub fn rpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, End::Right)
}

/// `LLEN key`.
pub fn llen(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(l) = read(ctx, tx, args[1], Lookup::Read, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    write::integer(out, l.len(tx)? as i64);
    Ok(())
}

/// `LINDEX key index`.
pub fn lindex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    // As Redis: the key first, then the index.
    let Some(l) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
        return Ok(());
    };
    let Some(i) = parse_i64(args[2]) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    match l.at(tx, i)? {
        Some((_, e)) => write::bulk(out, &e),
        None => write::null(out, p),
    }
    Ok(())
}

/// `LRANGE key start stop`.
pub fn lrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(start), Some(stop)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    let Some(l) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::array(o, 0))? else {
        return Ok(());
    };
    let elements = l.range(tx, start, stop)?;
    write::array(out, elements.len());
    for (_, e) in &elements {
        write::bulk(out, e);
    }
    Ok(())
}

/// `LSET key index element`.
pub fn lset(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(mut l) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::error(o, NO_SUCH_KEY)
    })?
    else {
        return Ok(());
    };
    let Some(i) = parse_i64(args[2]) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    let Some((k, _)) = l.at(tx, i)? else {
        write::error(out, "ERR index out of range");
        return Ok(());
    };
    l.coll.put(tx, &k, args[3])?;
    save(ctx, tx, args[1], l)?;
    write::simple(out, "OK");
    Ok(())
}

/// The first element equal to `element` from the head: (index, key).
fn find(
    tx: &mut Tx<'_>,
    l: &List,
    element: &[u8],
    from: Direction,
) -> DbResult<Option<(u64, Vec<u8>)>> {
    let all = l
        .coll
        .scan(tx, Bound::Unbounded, from, usize::MAX, &|_| true)?;
    Ok(all
        .into_iter()
        .enumerate()
        .find(|(_, (_, e))| e == element)
        .map(|(i, (k, _))| (i as u64, k)))
}

/// `LINSERT key BEFORE | AFTER pivot element`.
pub fn linsert(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let before = if args[2].eq_ignore_ascii_case(b"before") {
        true
    } else if args[2].eq_ignore_ascii_case(b"after") {
        false
    } else {
        write::error(out, SYNTAX);
        return Ok(());
    };
    let Some(mut l) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    let Some((_, pivot)) = find(tx, &l, args[3], Direction::Forward)? else {
        write::integer(out, -1);
        return Ok(());
    };
    let neighbour = l.coll.scan(
        tx,
        Bound::Excluded(&pivot),
        if before {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        1,
        &|_| true,
    )?;
    let other = neighbour.first().map(|(k, _)| k.as_slice());
    let key = if before {
        between(other, Some(&pivot))
    } else {
        between(Some(&pivot), other)
    };
    let Some(key) = key else {
        write::error(
            out,
            "ERR tamer: too many insertions at one place of the list",
        );
        return Ok(());
    };
    l.coll.put(tx, &key, args[4])?;
    let n = l.len(tx)?;
    save(ctx, tx, args[1], l)?;
    write::integer(out, n as i64);
    Ok(())
}

/// `LREM key count element`.
pub fn lrem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(count) = parse_i64(args[2]) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    let Some(mut l) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
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
    let all = l
        .coll
        .scan(tx, Bound::Unbounded, direction, usize::MAX, &|_| true)?;
    let mut removed = 0;
    for (k, e) in all {
        if removed == limit {
            break;
        }
        if e == args[3] {
            l.coll.del(tx, &k)?;
            removed += 1;
        }
    }
    save(ctx, tx, args[1], l)?;
    write::integer(out, removed as i64);
    Ok(())
}

/// `LTRIM key start stop`.
pub fn ltrim(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(start), Some(stop)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        write::error(out, NOT_INTEGER);
        return Ok(());
    };
    let Some(mut l) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::simple(o, "OK")
    })?
    else {
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
    save(ctx, tx, args[1], l)?;
    write::simple(out, "OK");
    Ok(())
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
pub fn lpos(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = args[i].to_ascii_lowercase();
        let value = if more >= 1 {
            parse_i64(args[i + 1])
        } else {
            None
        };
        match &opt[..] {
            b"rank" if more >= 1 => match value {
                None => {
                    write::error(out, NOT_INTEGER);
                    return Ok(());
                }
                Some(0) | Some(i64::MIN) => {
                    write::error(
                        out,
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    );
                    return Ok(());
                }
                Some(r) => rank = r,
            },
            b"count" if more >= 1 => match value {
                Some(c) if c >= 0 => count = Some(c),
                Some(_) => {
                    write::error(out, "ERR COUNT can't be negative");
                    return Ok(());
                }
                None => {
                    write::error(out, NOT_INTEGER);
                    return Ok(());
                }
            },
            b"maxlen" if more >= 1 => match value {
                Some(m) if m >= 0 => maxlen = m,
                Some(_) => {
                    write::error(out, "ERR MAXLEN can't be negative");
                    return Ok(());
                }
                None => {
                    write::error(out, NOT_INTEGER);
                    return Ok(());
                }
            },
            _ => {
                write::error(out, SYNTAX);
                return Ok(());
            }
        }
        i += 2;
    }
    let absent = |o: &mut Vec<u8>| match count {
        Some(_) => write::array(o, 0),
        None => write::null(o, p),
    };
    let Some(l) = read(ctx, tx, args[1], Lookup::Read, out, absent)? else {
        return Ok(());
    };
    let n = l.len(tx)?;
    let direction = if rank < 0 {
        Direction::Reverse
    } else {
        Direction::Forward
    };
    let scan_len = if maxlen == 0 {
        usize::MAX
    } else {
        maxlen as usize
    };
    let all = l
        .coll
        .scan(tx, Bound::Unbounded, direction, scan_len, &|_| true)?;
    let mut skip = rank.unsigned_abs() - 1;
    let want = match count {
        Some(0) => usize::MAX,
        Some(c) => c as usize,
        None => 1,
    };
    let mut found = Vec::new();
    for (i, (_, e)) in all.iter().enumerate() {
        if e != args[2] {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let index = if rank < 0 { n - 1 - i as u64 } else { i as u64 };
        found.push(index as i64);
        if found.len() >= want {
            break;
        }
    }
    match count {
        None => match found.first() {
            Some(&i) => write::integer(out, i),
            None => write::null(out, p),
        },
        Some(_) => {
            write::array(out, found.len());
            for i in found {
                write::integer(out, i);
            }
        }
    }
    Ok(())
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end, as `LMOVE` does: `None`
/// when the source is absent or empty; `Err` text for a wrong type.
pub fn move_one(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    out: &mut Vec<u8>,
) -> DbResult<Option<Option<Vec<u8>>>> {
    let source = match load_uncounted(ctx, tx, src, Kind::List)? {
        Found::Absent => return Ok(Some(None)),
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(None);
        }
        Found::Coll(coll) => List { coll },
    };
    // The destination's type is checked before anything moves.
    if matches!(load_uncounted(ctx, tx, dst, Kind::List)?, Found::WrongType) {
        write::error(out, WRONGTYPE);
        return Ok(None);
    }
    let mut source = source;
    let Some(element) = source.pop(tx, from, 1)?.pop() else {
        return Ok(Some(None));
    };
    save(ctx, tx, src, source)?;
    let Some(coll) = load_or_new(ctx, tx, dst, Kind::List, out)? else {
        return Ok(None);
    };
    let mut target = List { coll };
    if !target.room(tx, to, 1)? {
        write::error(out, FULL);
        return Ok(None);
    }
    target.push(tx, to, &element)?;
    save(ctx, tx, dst, target)?;
    Ok(Some(Some(element)))
}

/// `LMOVE source destination LEFT | RIGHT LEFT | RIGHT`.
pub fn lmove(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        write::error(out, SYNTAX);
        return Ok(());
    };
    moved_reply(ctx, tx, args[1], args[2], from, to, out)
}

/// `RPOPLPUSH source destination`.
pub fn rpoplpush(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    moved_reply(ctx, tx, args[1], args[2], End::Right, End::Left, out)
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end and replies with it (a null
/// when `src` is empty).
pub fn moved_reply(
    ctx: &Context,
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    out: &mut Vec<u8>,
) -> Result {
    match move_one(ctx, tx, src, dst, from, to, out)? {
        None => {}
        Some(None) => write::null(out, ctx.protocol),
        Some(Some(e)) => write::bulk(out, &e),
    }
    Ok(())
}

/// `LEFT | RIGHT [COUNT count]` of `LMPOP`/`BLMPOP` from `args[i..]`.
pub fn mpop_options(args: &[&[u8]], i: usize, out: &mut Vec<u8>) -> Option<(End, u64)> {
    let Some(end) = args.get(i).and_then(|a| End::parse(a)) else {
        write::error(out, SYNTAX);
        return None;
    };
    let mut count = None;
    let mut j = i + 1;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"count") && j + 1 < args.len() && count.is_none() {
            match parse_i64(args[j + 1]) {
                Some(c) if c > 0 => count = Some(c as u64),
                _ => {
                    write::error(out, "ERR count should be greater than 0");
                    return None;
                }
            }
            j += 2;
        } else {
            write::error(out, SYNTAX);
            return None;
        }
    }
    Some((end, count.unwrap_or(1)))
}

/// Writes `LMPOP`'s reply: `[key, [element, ...]]`.
pub fn write_mpop(out: &mut Vec<u8>, key: &[u8], popped: &[Vec<u8>]) {
    write::array(out, 2);
    write::bulk(out, key);
    write::array(out, popped.len());
    for e in popped {
        write::bulk(out, e);
    }
}

/// `LMPOP numkeys key [key ...] LEFT | RIGHT [COUNT count]`.
pub fn lmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    mpop_at(ctx, tx, args, 1, out)
}

/// `LMPOP`'s work on `numkeys key [key ...] LEFT | RIGHT [COUNT count]` from `args[first]`
/// (`BLMPOP`'s start after its timeout).
pub fn mpop_at(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    first: usize,
    out: &mut Vec<u8>,
) -> Result {
    let Some((keys, i)) = super::args::mpop_keys(args, first, out) else {
        return Ok(());
    };
    let Some((end, count)) = mpop_options(args, i, out) else {
        return Ok(());
    };
    for key in keys {
        let Some(popped) = pop_from(ctx, tx, key, end, count, out)? else {
            return Ok(());
        };
        if !popped.is_empty() {
            write_mpop(out, key, &popped);
            return Ok(());
        }
    }
    write::null_array(out, ctx.protocol);
    Ok(())
}
