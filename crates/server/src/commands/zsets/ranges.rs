//! The sorted set commands on ranges of ranks, scores or members: the `ZRANGE` family,
//! `ZRANGESTORE`, `ZCOUNT`, `ZLEXCOUNT`, the `ZREMRANGEBY*` family.

use tamer_store::{DbError, Tx};

use super::zset::{lex_end, lex_range, score_end, score_range, LexEnd, ScoreEnd, ZSet};
use super::{existing, save, store, write_members, Scored};
use crate::commands::collections::Lookup;
use crate::commands::reply::{finish, refuse, OpResult, NOT_INTEGER, SYNTAX};
use crate::commands::Context;
use crate::keyspace::events::Class;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

/// A score range's ends that are no floats.
const SCORES_NOT_FLOAT: &str = "ERR min or max is not a float";
/// A lex range's ends that are no range items.
const NOT_LEX_ITEM: &str = "ERR min or max not valid string range item";

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

/// A range request's options: how it names its range, its order, `WITHSCORES`, `LIMIT`.
struct RangeOptions {
    by: RangeForm,
    rev: bool,
    with_scores: bool,
    limit: Option<(i64, i64)>,
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
    let o = range_options(&args[first + 2..], form, rev, store, out)?;
    // In reverse, a score or lex range names its maximum first.
    let (a, b) = if o.rev && matches!(o.by, RangeForm::Score | RangeForm::Lex) {
        (args[first + 1], args[first])
    } else {
        (args[first], args[first + 1])
    };
    let select = match range_select(o.by, a, b) {
        Ok(select) => select,
        Err(text) => {
            write::error(out, text);
            return None;
        }
    };
    let (offset, count) = o.limit.unwrap_or((0, -1));
    Some(RangeSpec {
        select,
        rev: o.rev,
        offset,
        count,
        with_scores: o.with_scores,
    })
}

/// Parses a range request's options (`args`: those after its ends); `None` with the error
/// written.
fn range_options(
    args: &[&[u8]],
    form: RangeForm,
    rev: bool,
    store: bool,
    out: &mut Vec<u8>,
) -> Option<RangeOptions> {
    let mut o = RangeOptions {
        by: form,
        rev,
        with_scores: false,
        limit: None,
    };
    let mut i = 0;
    // Bounded: every pass consumes one or three arguments, or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"withscores" if !store => o.with_scores = true,
            b"limit" if more >= 2 => {
                let (Some(off), Some(c)) = (parse_i64(args[i + 1]), parse_i64(args[i + 2])) else {
                    write::error(out, NOT_INTEGER);
                    return None;
                };
                o.limit = Some((off, c));
                i += 2;
            }
            b"byscore" if form == RangeForm::Any && o.by == RangeForm::Any => {
                o.by = RangeForm::Score;
            }
            b"bylex" if form == RangeForm::Any && o.by == RangeForm::Any => o.by = RangeForm::Lex,
            b"rev" if form == RangeForm::Any => o.rev = true,
            _ => {
                write::error(out, SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    // As Redis: only a count other than -1 conflicts with a range by rank.
    let limited = o.limit.is_some_and(|(_, count)| count != -1);
    if limited && matches!(o.by, RangeForm::Any | RangeForm::Rank) {
        write::error(
            out,
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return None;
    }
    if o.with_scores && o.by == RangeForm::Lex {
        write::error(
            out,
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        );
        return None;
    }
    Some(o)
}

/// The range a request's ends `a`, `b` (lowest first) name as `by`, or the error's text.
fn range_select(by: RangeForm, a: &[u8], b: &[u8]) -> std::result::Result<Select, &'static str> {
    match by {
        RangeForm::Any | RangeForm::Rank => match (parse_i64(a), parse_i64(b)) {
            (Some(start), Some(stop)) => Ok(Select::Rank(start, stop)),
            _ => Err(NOT_INTEGER),
        },
        RangeForm::Score => match (score_end(a), score_end(b)) {
            (Some(min), Some(max)) => Ok(Select::Score(min, max)),
            _ => Err(SCORES_NOT_FLOAT),
        },
        RangeForm::Lex => match (lex_end(a), lex_end(b)) {
            (Some(min), Some(max)) => Ok(Select::Lex(min, max)),
            _ => Err(NOT_LEX_ITEM),
        },
    }
}

/// The members a range request selects, in reply order.
fn select(tx: &mut Tx<'_>, z: &ZSet, spec: &RangeSpec) -> DbResult<Scored> {
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

/// The members of `key`'s sorted set a range request selects, in reply order (none when
/// absent; `lookup` as the command reads the key).
fn range(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    spec: &RangeSpec,
    lookup: Lookup,
) -> OpResult<Scored> {
    match existing(ctx, tx, key, lookup)? {
        Some(z) => Ok(select(tx, &z, spec)?),
        None => Ok(Vec::new()),
    }
}

/// The `ZRANGE` family: the members selected (with their scores, `WITHSCORES`).
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
    let members = range(ctx, tx, args[1], &spec, Lookup::Read);
    finish(out, members, |out, members| {
        write_members(out, &members, spec.with_scores, ctx.protocol);
    })
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub(crate) fn zrange(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Any, false)
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
pub(crate) fn zrevrange(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Rank, true)
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub(crate) fn zrangebyscore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Score, false)
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
pub(crate) fn zrevrangebyscore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Score, true)
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
pub(crate) fn zrangebylex(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Lex, false)
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
pub(crate) fn zrevrangebylex(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    range_generic(ctx, tx, args, out, RangeForm::Lex, true)
}

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]`: the members
/// stored.
pub(crate) fn zrangestore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let Some(spec) = range_spec(args, 3, RangeForm::Any, false, true, out) else {
        return Ok(());
    };
    let stored = range(ctx, tx, args[2], &spec, Lookup::Read).and_then(|members| {
        store(ctx, tx, args[1], &members, "zrangestore")?;
        Ok(members.len())
    });
    finish(out, stored, |out, n| write::integer(out, n as i64))
}

/// The `ZREMRANGEBY*` family: the members removed.
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
    let event = match form {
        RangeForm::Rank => "zremrangebyrank",
        RangeForm::Score => "zremrangebyscore",
        RangeForm::Lex | RangeForm::Any => "zremrangebylex",
    };
    let removed = remove_range(ctx, tx, args[1], &spec, event);
    finish(out, removed, |out, n| write::integer(out, n as i64))
}

/// Removes the members of `key`'s sorted set a range request selects: how many.
fn remove_range(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    spec: &RangeSpec,
    event: &'static str,
) -> OpResult<usize> {
    let Some(mut z) = existing(ctx, tx, key, Lookup::Write)? else {
        return Ok(0);
    };
    let members = select(tx, &z, spec)?;
    for (m, s) in &members {
        z.remove_scored(tx, m, *s)?;
    }
    if !members.is_empty() {
        ctx.notify(Class::Zset, event, key);
    }
    save(ctx, tx, key, z)?;
    Ok(members.len())
}

/// `ZREMRANGEBYRANK key start stop`.
pub(crate) fn zremrangebyrank(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Rank)
}

/// `ZREMRANGEBYSCORE key min max`.
pub(crate) fn zremrangebyscore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Score)
}

/// `ZREMRANGEBYLEX key min max`.
pub(crate) fn zremrangebylex(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    remrange(ctx, tx, args, out, RangeForm::Lex)
}

/// `ZCOUNT key min max`.
pub(crate) fn zcount(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let (Some(min), Some(max)) = (score_end(args[2]), score_end(args[3])) else {
        return refuse(out, SCORES_NOT_FLOAT);
    };
    let n = count(ctx, tx, args[1], |tx, z| {
        z.count_in(tx, &score_range(min, max))
    });
    finish(out, n, |out, n| write::integer(out, n as i64))
}

/// `ZLEXCOUNT key min max`.
pub(crate) fn zlexcount(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let (Some(min), Some(max)) = (lex_end(args[2]), lex_end(args[3])) else {
        return refuse(out, NOT_LEX_ITEM);
    };
    let n = count(ctx, tx, args[1], |tx, z| {
        let s = z.first_score(tx)?;
        z.count_in(tx, &lex_range(&min, &max, s))
    });
    finish(out, n, |out, n| write::integer(out, n as i64))
}

/// The members of `key`'s sorted set `within` counts (0 when absent).
fn count(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    within: impl FnOnce(&mut Tx<'_>, &ZSet) -> DbResult<u64>,
) -> OpResult<u64> {
    match existing(ctx, tx, key, Lookup::Read)? {
        Some(z) => Ok(within(tx, &z)?),
        None => Ok(0),
    }
}
