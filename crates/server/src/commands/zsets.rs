//! Sorted set commands with Redis 7.0's semantics, replies and error texts (`t_zset.c`).
//!
//! A sorted set's map holds each member twice (`collections`): `[0][hash][member] -> score`
//! answers a member's score, `[1][score order][member] -> score` orders members by (score,
//! member) so that positions in it are ranks (`Coll::rank` and `Coll::at`: O(log n) in a
//! tree). The score order is the score's bits made to sort as numbers (-0 sorts as 0, as
//! Redis compares them; the exact score is the value). Scores print as Redis 7.0 prints them,
//! `%.17g`.

use std::ops::Bound;

use tamer_store::{DbError, Direction, Tx};

use super::args::too_long;
use super::collections::Lookup;
use super::numbers::{double_text, parse_double};
use super::reply::{NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE};
use crate::commands::Context;
use crate::keyspace::collection::{hashed_key, load_uncounted, Coll, Found};
use crate::keyspace::{self, Kind};
use crate::resp::{parse_i64, write, Protocol};

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;
/// Members with their scores, in reply order.
pub type Scored = Vec<(Vec<u8>, f64)>;

const MEMBERS: u8 = 0;
const BY_SCORE: u8 = 1;

/// A score reply: RESP3 a double, RESP2 its text in a bulk string.
pub fn write_score(out: &mut Vec<u8>, x: f64, protocol: Protocol) {
    let text = double_text(x);
    match protocol {
        Protocol::Resp2 => write::bulk(out, text.as_bytes()),
        Protocol::Resp3 => {
            out.push(b',');
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The score's bits made to sort as the numbers do (-0 as 0).
fn order(x: f64) -> u64 {
    let x = if x == 0.0 { 0.0 } else { x };
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn score_of(value: &[u8]) -> DbResult<f64> {
    let bits: [u8; 8] = value.try_into().map_err(|_| {
        crate::keyspace::store_error(keyspace::KeyspaceError::Corrupt("a score".into()))
    })?;
    Ok(f64::from_le_bytes(bits))
}

/// The (score, member) key of the score order.
fn score_key(score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + member.len());
    k.push(BY_SCORE);
    k.extend_from_slice(&order(score).to_be_bytes());
    k.extend_from_slice(member);
    k
}

/// A bound of the score order's keys: every key of a score below `x` (`past` false) or at
/// most `x` (`past` true) sorts below it.
fn score_bound(x: f64, past: bool) -> Vec<u8> {
    let mut k = vec![BY_SCORE];
    let o = order(x);
    k.extend_from_slice(&if past { o.saturating_add(1) } else { o }.to_be_bytes());
    k
}

/// A sorted set as a command sees it.
pub struct ZSet {
    pub coll: Coll,
}

impl ZSet {
    fn member_key(tx: &Tx<'_>, member: &[u8]) -> Vec<u8> {
        hashed_key(tx, &[MEMBERS], member)
    }

    /// Members.
    pub fn card(&self, tx: &mut Tx<'_>) -> DbResult<u64> {
        Ok(self.coll.len(tx)? / 2)
    }

    pub fn score(&self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<Option<f64>> {
        self.coll
            .get(tx, &Self::member_key(tx, member))?
            .map(|v| score_of(&v))
            .transpose()
    }

    /// Sets `member`'s score (its old place in the score order removed first). A -0 is stored
    /// as 0, as Redis's packed encoding keeps it (the command's reply still prints `-0`).
    pub fn set(&mut self, tx: &mut Tx<'_>, member: &[u8], score: f64, old: Option<f64>) -> Result {
        if let Some(old) = old {
            self.coll.del(tx, &score_key(old, member))?;
        }
        let score = if score == 0.0 { 0.0 } else { score };
        let bits = score.to_le_bytes();
        self.coll.put(tx, &Self::member_key(tx, member), &bits)?;
        self.coll.put(tx, &score_key(score, member), &bits)?;
        Ok(())
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<bool> {
        let Some(score) = self.score(tx, member)? else {
            return Ok(false);
        };
        self.coll.del(tx, &Self::member_key(tx, member))?;
        self.coll.del(tx, &score_key(score, member))?;
        Ok(true)
    }

    /// `member`'s rank (0: the lowest score), if it is a member.
    pub fn rank(&self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<Option<u64>> {
        let Some(score) = self.score(tx, member)? else {
            return Ok(None);
        };
        Ok(Some(
            self.coll.rank(tx, &score_key(score, member))? - self.card(tx)?,
        ))
    }

    /// Members whose score-order keys are below `key`.
    fn below(&self, tx: &mut Tx<'_>, key: &[u8]) -> DbResult<u64> {
        Ok(self.coll.rank(tx, key)?.saturating_sub(self.card(tx)?))
    }

    /// The members of ranks `from..=to` (ascending), or, `rev`, of ranks counted from the
    /// highest score, highest first: (member, score).
    pub fn by_rank(
        &self,
        tx: &mut Tx<'_>,
        from: u64,
        to: u64,
        rev: bool,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        let n = self.card(tx)?;
        if from > to || from >= n {
            return Ok(Vec::new());
        }
        let to = to.min(n - 1);
        let count = (to - from + 1) as usize;
        let (start, direction) = if rev {
            (n - 1 - from, Direction::Reverse)
        } else {
            (from, Direction::Forward)
        };
        let Some((first, _)) = self.coll.at(tx, n + start)? else {
            return Ok(Vec::new());
        };
        self.scan_from(tx, Bound::Included(&first), direction, count, &|_| true)
    }

    /// Up to `limit` members of the score order from `from` in `direction` while `within`.
    fn scan_from(
        &self,
        tx: &mut Tx<'_>,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        let in_order = |k: &[u8]| k.first() == Some(&BY_SCORE) && within(k);
        let found = self.coll.scan(tx, from, direction, limit, &in_order)?;
        found
            .into_iter()
            .map(|(k, v)| Ok((k[9..].to_vec(), score_of(&v)?)))
            .collect()
    }
}

/// A score range's end: a value, exclusive or not.
#[derive(Clone, Copy, Debug)]
pub struct ScoreEnd {
    pub value: f64,
    pub exclusive: bool,
}

/// Parses a `ZRANGEBYSCORE` end (`(` for exclusive, `-inf`/`+inf`).
fn score_end(arg: &[u8]) -> Option<ScoreEnd> {
    let (exclusive, rest) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    Some(ScoreEnd {
        value: parse_double(rest)?,
        exclusive,
    })
}

/// A lex range's end: `-`, `+`, or a member inclusive (`[`) or exclusive (`(`).
#[derive(Clone, Debug)]
pub enum LexEnd {
    Min,
    Max,
    Member { member: Vec<u8>, exclusive: bool },
}

fn lex_end(arg: &[u8]) -> Option<LexEnd> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(LexEnd::Min),
        b'+' if arg.len() == 1 => Some(LexEnd::Max),
        b'[' => Some(LexEnd::Member {
            member: arg[1..].to_vec(),
            exclusive: false,
        }),
        b'(' => Some(LexEnd::Member {
            member: arg[1..].to_vec(),
            exclusive: true,
        }),
        _ => None,
    }
}

/// A range of a sorted set as the score order's keys: `lo` (included) to `hi` (excluded).
struct KeyRange {
    lo: Vec<u8>,
    hi: Vec<u8>,
}

fn score_range(min: ScoreEnd, max: ScoreEnd) -> KeyRange {
    KeyRange {
        lo: score_bound(min.value, min.exclusive),
        hi: score_bound(max.value, !max.exclusive),
    }
}

/// A lex range as keys of the score order, for members that share one score (`score`: the
/// first member's; Redis leaves a lex range over mixed scores unspecified).
fn lex_range(min: &LexEnd, max: &LexEnd, score: f64) -> KeyRange {
    let key = |end: &LexEnd, upper: bool| -> Vec<u8> {
        match end {
            LexEnd::Min => score_bound(score, false),
            LexEnd::Max => score_bound(score, true),
            LexEnd::Member { member, exclusive } => {
                let mut k = score_key(score, member);
                // Past the member: the smallest key above it.
                if *exclusive != upper {
                    k.push(0);
                }
                k
            }
        }
    };
    KeyRange {
        lo: key(min, false),
        hi: key(max, true),
    }
}

impl ZSet {
    /// The members in `range`, ascending (or descending, `rev`), after skipping `offset`, at
    /// most `count` (`None`: all).
    fn in_range(
        &self,
        tx: &mut Tx<'_>,
        range: &KeyRange,
        rev: bool,
        offset: u64,
        count: Option<u64>,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        if range.lo >= range.hi {
            return Ok(Vec::new());
        }
        let (lo, hi) = (self.below(tx, &range.lo)?, self.below(tx, &range.hi)?);
        if lo >= hi {
            return Ok(Vec::new());
        }
        let n = hi - lo;
        if offset >= n {
            return Ok(Vec::new());
        }
        let take = count.map_or(n - offset, |c| c.min(n - offset));
        let card = self.card(tx)?;
        let start = if rev { hi - 1 - offset } else { lo + offset };
        let Some((first, _)) = self.coll.at(tx, card + start)? else {
            return Ok(Vec::new());
        };
        let direction = if rev {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        self.scan_from(
            tx,
            Bound::Included(&first),
            direction,
            take as usize,
            &|_| true,
        )
    }

    /// Members in `range`.
    fn count_in(&self, tx: &mut Tx<'_>, range: &KeyRange) -> DbResult<u64> {
        if range.lo >= range.hi {
            return Ok(0);
        }
        let (lo, hi) = (self.below(tx, &range.lo)?, self.below(tx, &range.hi)?);
        Ok(hi.saturating_sub(lo))
    }

    /// The lowest score (the score a lex range assumes every member has).
    fn first_score(&self, tx: &mut Tx<'_>) -> DbResult<f64> {
        Ok(self
            .by_rank(tx, 0, 0, false)?
            .first()
            .map_or(0.0, |(_, s)| *s))
    }
}

/// Loads `key`'s sorted set: `None` when the reply is written.
fn read(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
    out: &mut Vec<u8>,
    absent: impl FnOnce(&mut Vec<u8>),
) -> DbResult<Option<ZSet>> {
    Ok(
        super::collections::open(ctx, tx, key, Kind::ZSet, lookup, out, absent)?
            .map(|coll| ZSet { coll }),
    )
}

/// Saves a changed sorted set (its key deleted when empty).
fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], z: ZSet) -> Result {
    let n = z.card(tx)?;
    z.coll.save(ctx, tx, key, n)
}

/// Writes members (with their scores when `with_scores`: RESP2 one flat array, RESP3 an
/// array of pairs).
fn write_members(
    out: &mut Vec<u8>,
    members: &[(Vec<u8>, f64)],
    with_scores: bool,
    protocol: Protocol,
) {
    let resp3 = protocol == Protocol::Resp3;
    if with_scores && !resp3 {
        write::array(out, 2 * members.len());
    } else {
        write::array(out, members.len());
    }
    for (m, s) in members {
        if with_scores && resp3 {
            write::array(out, 2);
        }
        write::bulk(out, m);
        if with_scores {
            write_score(out, *s, protocol);
        }
    }
}

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
}

/// Adds or updates one member as `ZADD` with `flags` does; `Err` with the NaN error text.
fn add_one(
    tx: &mut Tx<'_>,
    z: &mut ZSet,
    member: &[u8],
    score: f64,
    f: AddFlags,
) -> DbResult<std::result::Result<Outcome, &'static str>> {
    let Some(cur) = z.score(tx, member)? else {
        if f.xx {
            return Ok(Ok(Outcome::Skipped));
        }
        z.set(tx, member, score, None)?;
        return Ok(Ok(Outcome::Added(score)));
    };
    if f.nx {
        return Ok(Ok(Outcome::Skipped));
    }
    let new = if f.incr { cur + score } else { score };
    if new.is_nan() {
        return Ok(Err("ERR resulting score is not a number (NaN)"));
    }
    if (f.lt && new >= cur) || (f.gt && new <= cur) {
        return Ok(Ok(Outcome::Skipped));
    }
    if new == cur {
        return Ok(Ok(Outcome::Same(new)));
    }
    z.set(tx, member, new, Some(cur))?;
    Ok(Ok(Outcome::Updated(new)))
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

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
pub fn zadd(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (f, first) = add_flags(args);
    let elements = &args[first..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        write::error(out, SYNTAX);
        return Ok(());
    }
    if f.nx && f.xx {
        write::error(
            out,
            "ERR XX and NX options at the same time are not compatible",
        );
        return Ok(());
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        write::error(
            out,
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        );
        return Ok(());
    }
    if f.incr && elements.len() > 2 {
        write::error(
            out,
            "ERR INCR option supports a single increment-element pair",
        );
        return Ok(());
    }
    let mut pairs = Vec::with_capacity(elements.len() / 2);
    for p in elements.chunks(2) {
        let Some(score) = parse_double(p[0]) else {
            write::error(out, NOT_FLOAT);
            return Ok(());
        };
        if too_long(p[1], out) {
            return Ok(());
        }
        pairs.push((score, p[1]));
    }
    add_pairs(ctx, tx, args[1], &pairs, f, out)
}

fn add_pairs(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    f: AddFlags,
    out: &mut Vec<u8>,
) -> Result {
    let coll = match load_uncounted(ctx, tx, key, Kind::ZSet)? {
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        Found::Absent if f.xx => None,
        Found::Absent => Some(Coll::new(Kind::ZSet)),
        Found::Coll(c) => Some(c),
    };
    let (mut added, mut updated, mut last) = (0, 0, None);
    if let Some(coll) = coll {
        let mut z = ZSet { coll };
        for &(score, member) in pairs {
            match add_one(tx, &mut z, member, score, f)? {
                Err(text) => {
                    save(ctx, tx, key, z)?;
                    write::error(out, text);
                    return Ok(());
                }
                Ok(Outcome::Added(s)) => (added, last) = (added + 1, Some(s)),
                Ok(Outcome::Updated(s)) => (updated, last) = (updated + 1, Some(s)),
                Ok(Outcome::Same(s)) => last = Some(s),
                Ok(Outcome::Skipped) => {}
            }
        }
        save(ctx, tx, key, z)?;
    }
    if f.incr {
        match last {
            Some(s) => write_score(out, s, ctx.protocol),
            None => write::null(out, ctx.protocol),
        }
    } else {
        write::integer(out, if f.ch { added + updated } else { added });
    }
    Ok(())
}

/// `ZINCRBY key increment member`.
pub fn zincrby(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(by) = parse_double(args[2]) else {
        write::error(out, NOT_FLOAT);
        return Ok(());
    };
    if too_long(args[3], out) {
        return Ok(());
    }
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    add_pairs(ctx, tx, args[1], &[(by, args[3])], f, out)
}

/// `ZREM key member [member ...]`.
pub fn zrem(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(mut z) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    let mut removed = 0;
    for m in &args[2..] {
        removed += i64::from(z.remove(tx, m)?);
    }
    save(ctx, tx, args[1], z)?;
    write::integer(out, removed);
    Ok(())
}

/// `ZSCORE key member`.
pub fn zscore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
        return Ok(());
    };
    match z.score(tx, args[2])? {
        Some(s) => write_score(out, s, p),
        None => write::null(out, p),
    }
    Ok(())
}

/// `ZMSCORE key member [member ...]`.
pub fn zmscore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    let z = match crate::keyspace::collection::load(ctx, tx, args[1], Kind::ZSet)? {
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        Found::Absent => None,
        Found::Coll(coll) => Some(ZSet { coll }),
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
pub fn zcard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    write::integer(out, z.card(tx)? as i64);
    Ok(())
}

/// `ZCOUNT key min max`.
pub fn zcount(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(min), Some(max)) = (score_end(args[2]), score_end(args[3])) else {
        write::error(out, "ERR min or max is not a float");
        return Ok(());
    };
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    write::integer(out, z.count_in(tx, &score_range(min, max))? as i64);
    Ok(())
}

/// `ZLEXCOUNT key min max`.
pub fn zlexcount(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(min), Some(max)) = (lex_end(args[2]), lex_end(args[3])) else {
        write::error(out, "ERR min or max not valid string range item");
        return Ok(());
    };
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    let s = z.first_score(tx)?;
    write::integer(out, z.count_in(tx, &lex_range(&min, &max, s))? as i64);
    Ok(())
}

fn rank_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    rev: bool,
) -> Result {
    let p = ctx.protocol;
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
        return Ok(());
    };
    match z.rank(tx, args[2])? {
        Some(r) if rev => write::integer(out, (z.card(tx)? - 1 - r) as i64),
        Some(r) => write::integer(out, r as i64),
        None => write::null(out, p),
    }
    Ok(())
}

/// `ZRANK key member`.
pub fn zrank(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rank_generic(ctx, tx, args, out, false)
}

/// `ZREVRANK key member`.
pub fn zrevrank(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    rank_generic(ctx, tx, args, out, true)
}

/// What a `ZRANGE`-family request selects.
#[derive(Clone, Debug)]
enum Select {
    Rank(i64, i64),
    Score(ScoreEnd, ScoreEnd),
    Lex(LexEnd, LexEnd),
}

/// A parsed `ZRANGE`-family request.
#[derive(Clone, Debug)]
struct RangeSpec {
    select: Select,
    rev: bool,
    offset: i64,
    count: i64,
    with_scores: bool,
}

/// How a `ZRANGE`-family command names its range.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeForm {
    /// `ZRANGE`/`ZRANGESTORE`: options choose the kind.
    Any,
    Rank,
    Score,
    Lex,
}

/// Parses a range request: `args[first]`, `args[first + 1]` are its ends, options follow.
/// `None` with the error written.
fn range_spec(
    args: &[&[u8]],
    first: usize,
    form: RangeForm,
    rev: bool,
    store: bool,
    out: &mut Vec<u8>,
) -> Option<RangeSpec> {
    let (mut by, mut rev, mut with_scores, mut limit) = (form, rev, false, None);
    let mut i = first + 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"withscores" if !store => with_scores = true,
            b"limit" if more >= 2 => {
                let (Some(o), Some(c)) = (parse_i64(args[i + 1]), parse_i64(args[i + 2])) else {
                    write::error(out, NOT_INTEGER);
                    return None;
                };
                limit = Some((o, c));
                i += 2;
            }
            b"byscore" if form == RangeForm::Any && by == RangeForm::Any => by = RangeForm::Score,
            b"bylex" if form == RangeForm::Any && by == RangeForm::Any => by = RangeForm::Lex,
            b"rev" if form == RangeForm::Any => rev = true,
            _ => {
                write::error(out, SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    if limit.is_some() && matches!(by, RangeForm::Any | RangeForm::Rank) {
        write::error(
            out,
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return None;
    }
    if with_scores && by == RangeForm::Lex {
        write::error(
            out,
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        );
        return None;
    }
    // In reverse, a score or lex range names its maximum first.
    let (a, b) = if rev && matches!(by, RangeForm::Score | RangeForm::Lex) {
        (args[first + 1], args[first])
    } else {
        (args[first], args[first + 1])
    };
    let select = match by {
        RangeForm::Any | RangeForm::Rank => {
            let (Some(s), Some(e)) = (parse_i64(a), parse_i64(b)) else {
                write::error(out, NOT_INTEGER);
                return None;
            };
            Select::Rank(s, e)
        }
        RangeForm::Score => {
            let (Some(min), Some(max)) = (score_end(a), score_end(b)) else {
                write::error(out, "ERR min or max is not a float");
                return None;
            };
            Select::Score(min, max)
        }
        RangeForm::Lex => {
            let (Some(min), Some(max)) = (lex_end(a), lex_end(b)) else {
                write::error(out, "ERR min or max not valid string range item");
                return None;
            };
            Select::Lex(min, max)
        }
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    Some(RangeSpec {
        select,
        rev,
        offset,
        count,
        with_scores,
    })
}

/// The members a range request selects, in reply order.
fn select(tx: &mut Tx<'_>, z: &ZSet, spec: &RangeSpec) -> DbResult<Vec<(Vec<u8>, f64)>> {
    let count = (spec.count >= 0).then_some(spec.count as u64);
    match &spec.select {
        Select::Rank(start, stop) => {
            let n = z.card(tx)? as i64;
            let start = if *start < 0 {
                (n + start).max(0)
            } else {
                *start
            };
            let stop = if *stop < 0 {
                n + stop
            } else {
                (*stop).min(n - 1)
            };
            if start > stop || start >= n || stop < 0 {
                return Ok(Vec::new());
            }
            z.by_rank(tx, start as u64, stop as u64, spec.rev)
        }
        _ if spec.offset < 0 => Ok(Vec::new()),
        Select::Score(min, max) => z.in_range(
            tx,
            &score_range(*min, *max),
            spec.rev,
            spec.offset as u64,
            count,
        ),
        Select::Lex(min, max) => {
            let s = z.first_score(tx)?;
            z.in_range(
                tx,
                &lex_range(min, max, s),
                spec.rev,
                spec.offset as u64,
                count,
            )
        }
    }
}

fn range_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    form: RangeForm,
    rev: bool,
) -> Result {
    let Some(spec) = range_spec(args, 2, form, rev, false, out) else {
        return Ok(());
    };
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::array(o, 0))? else {
        return Ok(());
    };
    let members = select(tx, &z, &spec)?;
    write_members(out, &members, spec.with_scores, ctx.protocol);
    Ok(())
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub fn zrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Any, false)
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
pub fn zrevrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Rank, true)
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub fn zrangebyscore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Score, false)
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
pub fn zrevrangebyscore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Score, true)
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
pub fn zrangebylex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Lex, false)
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
pub fn zrevrangebylex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Lex, true)
}

/// Stores `members` as the sorted set at `dst` (replacing it; an empty one deletes it) and
/// replies their count.
fn store_members(
    ctx: &Context,
    tx: &mut Tx<'_>,
    dst: &[u8],
    members: &[(Vec<u8>, f64)],
    out: &mut Vec<u8>,
) -> Result {
    ctx.touch(dst);
    keyspace::remove(tx, ctx.namespace, dst).map_err(crate::keyspace::store_error)?;
    let mut z = ZSet {
        coll: Coll::new(Kind::ZSet),
    };
    for (m, s) in members {
        z.set(tx, m, *s, None)?;
    }
    save(ctx, tx, dst, z)?;
    write::integer(out, members.len() as i64);
    Ok(())
}

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]`.
pub fn zrangestore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some(spec) = range_spec(args, 3, RangeForm::Any, false, true, out) else {
        return Ok(());
    };
    let z = match crate::keyspace::collection::load(ctx, tx, args[2], Kind::ZSet)? {
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            return Ok(());
        }
        Found::Absent => None,
        Found::Coll(coll) => Some(ZSet { coll }),
    };
    let members = match &z {
        Some(z) => select(tx, z, &spec)?,
        None => Vec::new(),
    };
    store_members(ctx, tx, args[1], &members, out)
}

fn remrange(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    form: RangeForm,
) -> Result {
    let Some(spec) = range_spec(args, 2, form, false, true, out) else {
        return Ok(());
    };
    let Some(mut z) = read(ctx, tx, args[1], Lookup::Write, out, |o| {
        write::integer(o, 0)
    })?
    else {
        return Ok(());
    };
    let members = select(tx, &z, &spec)?;
    for (m, s) in &members {
        z.coll.del(tx, &ZSet::member_key(tx, m))?;
        z.coll.del(tx, &score_key(*s, m))?;
    }
    save(ctx, tx, args[1], z)?;
    write::integer(out, members.len() as i64);
    Ok(())
}

/// `ZREMRANGEBYRANK key start stop`.
pub fn zremrangebyrank(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Rank)
}

/// `ZREMRANGEBYSCORE key min max`.
pub fn zremrangebyscore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Score)
}

/// `ZREMRANGEBYLEX key min max`.
pub fn zremrangebylex(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Lex)
}

/// Pops up to `count` members of the lowest (`max` false) or highest scores from `key`'s
/// sorted set; `None` when the key holds another type (`WRONGTYPE` written).
pub fn pop(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    max: bool,
    count: u64,
    out: &mut Vec<u8>,
) -> DbResult<Option<Scored>> {
    let Some(mut z) = read(ctx, tx, key, Lookup::Write, out, |_| {})? else {
        return match load_uncounted(ctx, tx, key, Kind::ZSet)? {
            Found::Absent => Ok(Some(Vec::new())),
            _ => Ok(None),
        };
    };
    if count == 0 {
        return Ok(Some(Vec::new()));
    }
    let popped = z.by_rank(tx, 0, count - 1, max)?;
    for (m, s) in &popped {
        z.coll.del(tx, &ZSet::member_key(tx, m))?;
        z.coll.del(tx, &score_key(*s, m))?;
    }
    save(ctx, tx, key, z)?;
    Ok(Some(popped))
}

fn pop_generic(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    max: bool,
) -> Result {
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
    let Some(popped) = pop(ctx, tx, args[1], max, count.unwrap_or(1), out)? else {
        return Ok(());
    };
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
    Ok(())
}

/// `ZPOPMIN key [count]`.
pub fn zpopmin(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, false)
}

/// `ZPOPMAX key [count]`.
pub fn zpopmax(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    pop_generic(ctx, tx, args, out, true)
}

/// `[MIN | MAX] [COUNT count]` of `ZMPOP`/`BZMPOP` from `args[i..]`: (max, count).
pub fn mpop_options(args: &[&[u8]], i: usize, out: &mut Vec<u8>) -> Option<(bool, u64)> {
    let max = match args.get(i).map(|a| a.to_ascii_lowercase()) {
        Some(w) if w == b"min" => false,
        Some(w) if w == b"max" => true,
        _ => {
            write::error(out, SYNTAX);
            return None;
        }
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
    Some((max, count.unwrap_or(1)))
}

/// Writes `ZMPOP`'s reply: `[key, [[member, score], ...]]`.
pub fn write_mpop(out: &mut Vec<u8>, key: &[u8], popped: &[(Vec<u8>, f64)], protocol: Protocol) {
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
pub fn zmpop(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((keys, i)) = super::args::mpop_keys(args, 1, out) else {
        return Ok(());
    };
    let Some((max, count)) = mpop_options(args, i, out) else {
        return Ok(());
    };
    for key in keys {
        let Some(popped) = pop(ctx, tx, key, max, count, out)? else {
            return Ok(());
        };
        if !popped.is_empty() {
            write_mpop(out, key, &popped, ctx.protocol);
            return Ok(());
        }
    }
    write::null_array(out, ctx.protocol);
    Ok(())
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub fn zrandmember(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let p = ctx.protocol;
    if args.len() == 2 {
        let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::null(o, p))? else {
            return Ok(());
        };
        let n = z.card(tx)?;
        let pick = crate::keyspace::collection::random_u64() % n.max(1);
        match z.by_rank(tx, pick, pick, false)?.first() {
            Some((m, _)) => write::bulk(out, m),
            None => write::null(out, p),
        }
        return Ok(());
    }
    let with_scores = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && a.eq_ignore_ascii_case(b"withscores") => true,
        Some(_) => {
            write::error(out, SYNTAX);
            return Ok(());
        }
    };
    let Some(count) = super::args::random_count(args[2], with_scores, out) else {
        return Ok(());
    };
    let Some(z) = read(ctx, tx, args[1], Lookup::Read, out, |o| write::array(o, 0))? else {
        return Ok(());
    };
    let n = z.card(tx)?;
    // The member order holds the first `n` map entries: random picks among them.
    let picked = crate::keyspace::collection::random_entries(tx, &z.coll, n, count)?;
    let members: Vec<(Vec<u8>, f64)> = picked
        .into_iter()
        .map(|(k, v)| {
            Ok((
                crate::keyspace::collection::element_of(&k, 1).to_vec(),
                score_of(&v)?,
            ))
        })
        .collect::<DbResult<_>>()?;
    write_members(out, &members, with_scores, p);
    Ok(())
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn zscan(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((cursor, count, pattern)) = super::args::scan_args(args, out) else {
        return Ok(());
    };
    let Some(z) = read(
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
    let (found, next) = if z.coll.in_tree() {
        crate::keyspace::collection::scan_hashed(tx, &z.coll, &[MEMBERS], cursor, count)?
    } else {
        (z.coll.all(tx, &[MEMBERS])?, 0)
    };
    let mut kept = Vec::new();
    for (k, v) in &found {
        let m = crate::keyspace::collection::element_of(k, 1);
        if pattern.is_none_or(|p| crate::glob::matches(p, m)) {
            kept.push((m.to_vec(), score_of(v)?));
        }
    }
    write::array(out, 2);
    write::bulk(out, next.to_string().as_bytes());
    write::array(out, 2 * kept.len());
    for (m, s) in &kept {
        write::bulk(out, m);
        write::bulk(out, double_text(*s).as_bytes());
    }
    Ok(())
}

/// Reads a sorted set or set for `ZUNION`/`ZINTER`/`ZDIFF`: (member, score) pairs (a set's
/// members score 1); `Err(())` for another type.
fn operand(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
) -> DbResult<std::result::Result<Option<Scored>, ()>> {
    let found = keyspace::get(tx, ctx.namespace, key, ctx.now_ms);
    let entry = match found {
        Ok(None) => {
            ctx.count_lookup(false);
            return Ok(Ok(None));
        }
        Ok(Some(e)) => e,
        Err(keyspace::KeyspaceError::Store(err)) => return Err(err),
        Err(_) => return Ok(Err(())),
    };
    ctx.count_lookup(true);
    match entry.kind {
        Kind::ZSet => {
            let Found::Coll(coll) = load_uncounted(ctx, tx, key, Kind::ZSet)? else {
                return Ok(Err(()));
            };
            let z = ZSet { coll };
            let n = z.card(tx)?;
            Ok(Ok(Some(if n == 0 {
                Vec::new()
            } else {
                z.by_rank(tx, 0, n - 1, false)?
            })))
        }
        Kind::Set => {
            let Found::Coll(coll) = load_uncounted(ctx, tx, key, Kind::Set)? else {
                return Ok(Err(()));
            };
            let all = coll.all(tx, b"")?;
            Ok(Ok(Some(
                all.into_iter()
                    .map(|(k, _)| (crate::keyspace::collection::element_of(&k, 0).to_vec(), 1.0))
                    .collect(),
            )))
        }
        _ => Ok(Err(())),
    }
}

/// How `ZUNION`/`ZINTER` combine a member's scores.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

/// A parsed `ZUNION`/`ZINTER`/`ZDIFF` request.
struct SetOpSpec {
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
}

/// The keys of a set operation (`numkeys` at `args[first]`) and where its options start;
/// `None` with the error written.
fn setop_keys<'a>(
    args: &[&'a [u8]],
    first: usize,
    name: &str,
    out: &mut Vec<u8>,
) -> Option<(Vec<&'a [u8]>, usize)> {
    let Some(n) = parse_i64(args[first]) else {
        write::error(out, NOT_INTEGER);
        return None;
    };
    if n < 1 {
        write::error(
            out,
            &format!("ERR at least 1 input key is needed for '{name}' command"),
        );
        return None;
    }
    let n = n as usize;
    if n > args.len() - first - 1 {
        write::error(out, SYNTAX);
        return None;
    }
    Some((args[first + 1..first + 1 + n].to_vec(), first + 1 + n))
}

/// A set operation's options from `args[i..]` (read after its keys, as Redis does).
fn setop_options(
    args: &[&[u8]],
    n: usize,
    mut i: usize,
    op: SetOp,
    store: bool,
    out: &mut Vec<u8>,
) -> Option<SetOpSpec> {
    let mut spec = SetOpSpec {
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        with_scores: false,
    };
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"weights" if op != SetOp::Diff && more >= n => {
                for j in 0..n {
                    let Some(w) = parse_double(args[i + 1 + j]) else {
                        write::error(out, "ERR weight value is not a float");
                        return None;
                    };
                    spec.weights[j] = w;
                }
                i += n;
            }
            b"aggregate" if op != SetOp::Diff && more >= 1 => {
                spec.aggregate = match &args[i + 1].to_ascii_lowercase()[..] {
                    b"sum" => Aggregate::Sum,
                    b"min" => Aggregate::Min,
                    b"max" => Aggregate::Max,
                    _ => {
                        write::error(out, SYNTAX);
                        return None;
                    }
                };
                i += 1;
            }
            b"withscores" if !store => spec.with_scores = true,
            _ => {
                write::error(out, SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    Some(spec)
}

/// Redis's `zunionInterAggregate`: a NaN sum is 0; MIN and MAX keep the target against NaN.
fn combine_scores(target: f64, value: f64, how: Aggregate) -> f64 {
    match how {
        Aggregate::Sum => {
            let s = target + value;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => {
            if value < target {
                value
            } else {
                target
            }
        }
        Aggregate::Max => {
            if value > target {
                value
            } else {
                target
            }
        }
    }
}

/// The operands of a set operation, read (and type-checked) in order; `None` with
/// `WRONGTYPE` written.
#[allow(clippy::type_complexity)]
fn operands(
    ctx: &Context,
    tx: &mut Tx<'_>,
    keys: &[&[u8]],
    out: &mut Vec<u8>,
) -> DbResult<Option<Vec<Scored>>> {
    let mut inputs = Vec::with_capacity(keys.len());
    for key in keys {
        match operand(ctx, tx, key)? {
            Ok(members) => inputs.push(members.unwrap_or_default()),
            Err(()) => {
                write::error(out, WRONGTYPE);
                return Ok(None);
            }
        }
    }
    Ok(Some(inputs))
}

/// The result of a set operation on `inputs`, sorted by (score, member).
fn setop(spec: &SetOpSpec, inputs: &[Vec<(Vec<u8>, f64)>], op: SetOp) -> Vec<(Vec<u8>, f64)> {
    let weigh = |s: f64, w: f64| {
        let x = s * w;
        if x.is_nan() {
            0.0
        } else {
            x
        }
    };
    let mut acc: std::collections::HashMap<Vec<u8>, f64> = std::collections::HashMap::new();
    if inputs.is_empty() {
        return Vec::new();
    }
    match op {
        SetOp::Union => {
            for (members, &w) in inputs.iter().zip(&spec.weights) {
                for (m, s) in members {
                    let x = weigh(*s, w);
                    acc.entry(m.clone())
                        .and_modify(|a| *a = combine_scores(*a, x, spec.aggregate))
                        .or_insert(x);
                }
            }
        }
        SetOp::Inter => {
            let mut order: Vec<usize> = (0..inputs.len()).collect();
            order.sort_by_key(|&i| inputs[i].len());
            let maps: Vec<std::collections::HashMap<&[u8], f64>> = inputs
                .iter()
                .map(|v| v.iter().map(|(m, s)| (&m[..], *s)).collect())
                .collect();
            let first = order[0];
            'members: for (m, s) in &inputs[first] {
                let mut x = weigh(*s, spec.weights[first]);
                for &j in &order[1..] {
                    let Some(&sj) = maps[j].get(&m[..]) else {
                        continue 'members;
                    };
                    // Unlike the first, a later weighted score may be NaN (Redis's order).
                    x = combine_scores(x, sj * spec.weights[j], spec.aggregate);
                }
                acc.insert(m.clone(), x);
            }
        }
        SetOp::Diff => {
            let others: std::collections::HashSet<&[u8]> =
                inputs[1..].iter().flatten().map(|(m, _)| &m[..]).collect();
            for (m, s) in &inputs[0] {
                if !others.contains(&m[..]) {
                    acc.insert(m.clone(), *s);
                }
            }
        }
    }
    let mut result: Vec<(Vec<u8>, f64)> = acc.into_iter().collect();
    result.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    result
}

/// Keys, operands, options, result: a set operation as Redis runs it; `None` when an error
/// was written.
/// Which set operation a command runs and how its arguments lie.
#[derive(Clone, Copy)]
struct SetOpCall<'n> {
    /// Where `numkeys` is.
    first: usize,
    op: SetOp,
    /// A `*STORE` form (no `WITHSCORES`).
    store: bool,
    /// The command's name, for the error text.
    name: &'n str,
}

fn setop_run(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    call: SetOpCall<'_>,
    out: &mut Vec<u8>,
) -> DbResult<Option<(Scored, bool)>> {
    let SetOpCall {
        first,
        op,
        store,
        name,
    } = call;
    let Some((keys, at)) = setop_keys(args, first, name, out) else {
        return Ok(None);
    };
    let Some(inputs) = operands(ctx, tx, &keys, out)? else {
        return Ok(None);
    };
    let Some(spec) = setop_options(args, keys.len(), at, op, store, out) else {
        return Ok(None);
    };
    Ok(Some((setop(&spec, &inputs, op), spec.with_scores)))
}

fn setop_command(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: SetOp,
    name: &str,
) -> Result {
    if let Some((result, with_scores)) = setop_run(
        ctx,
        tx,
        args,
        SetOpCall {
            first: 1,
            op,
            store: false,
            name,
        },
        out,
    )? {
        write_members(out, &result, with_scores, ctx.protocol);
    }
    Ok(())
}

fn setop_store(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: SetOp,
    name: &str,
) -> Result {
    if let Some((result, _)) = setop_run(
        ctx,
        tx,
        args,
        SetOpCall {
            first: 2,
            op,
            store: true,
            name,
        },
        out,
    )? {
        store_members(ctx, tx, args[1], &result, out)?;
    }
    Ok(())
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zunion(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Union, "zunion")
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zinter(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Inter, "zinter")
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`.
pub fn zdiff(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Diff, "zdiff")
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub fn zunionstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Union, "zunionstore")
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub fn zinterstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Inter, "zinterstore")
}

/// `ZDIFFSTORE destination numkeys key [key ...]`.
pub fn zdiffstore(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Diff, "zdiffstore")
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub fn zintercard(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let Some((keys, mut i)) = super::args::numkeys(args, out) else {
        return Ok(());
    };
    let mut limit = usize::MAX;
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
    let Some(inputs) = operands(ctx, tx, &keys, out)? else {
        return Ok(());
    };
    let spec = SetOpSpec {
        weights: vec![1.0; keys.len()],
        aggregate: Aggregate::Sum,
        with_scores: false,
    };
    let result = setop(&spec, &inputs, SetOp::Inter);
    write::integer(out, result.len().min(limit) as i64);
    Ok(())
}
