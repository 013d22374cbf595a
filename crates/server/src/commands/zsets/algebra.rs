//! The sorted set algebra: `ZUNION`, `ZINTER`, `ZDIFF`, their `*STORE` forms and
//! `ZINTERCARD`, on sorted sets and sets (a set's members score 1).

use std::collections::{HashMap, HashSet};

use tamer_store::{DbError, Tx};

use super::zset::ZSet;
use super::{store, write_members, Scored};
use crate::commands::args::intercard_limit;
use crate::commands::numbers::parse_double;
use crate::commands::reply::{finish, OpError, OpResult, NOT_INTEGER, SYNTAX};
use crate::commands::Context;
use crate::keyspace::collection::{element_of, load_uncounted, Found};
use crate::keyspace::{self, Kind};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

/// Reads a sorted set or set for `ZUNION`/`ZINTER`/`ZDIFF` as Redis's `lookupKeyRead` does:
/// (member, score) pairs (a set's members score 1; none when absent); `WRONGTYPE` for
/// another type.
fn operand(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Scored> {
    let entry = match keyspace::get(ctx, tx, key) {
        Ok(None) => {
            ctx.count_lookup(false, key);
            return Ok(Vec::new());
        }
        Ok(Some(e)) => e,
        Err(keyspace::KeyspaceError::Store(err)) => return Err(err.into()),
        Err(_) => return Err(OpError::WrongType),
    };
    ctx.count_lookup(true, key);
    if !matches!(entry.kind, Kind::ZSet | Kind::Set) {
        return Err(OpError::WrongType);
    }
    let Found::Coll(coll) = load_uncounted(ctx, tx, key, entry.kind)? else {
        return Err(OpError::WrongType);
    };
    if entry.kind == Kind::Set {
        let all = coll.all(tx, b"")?;
        return Ok(all
            .into_iter()
            .map(|(k, _)| (element_of(&k, 0).to_vec(), 1.0))
            .collect());
    }
    let z = ZSet { coll };
    let n = z.card(tx)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    Ok(z.by_rank(tx, 0, n - 1, false)?)
}

/// The operands of a set operation, read (and type-checked) in order.
fn operands(ctx: &Context, tx: &mut Tx<'_>, keys: &[&[u8]]) -> OpResult<Vec<Scored>> {
    let mut inputs = Vec::with_capacity(keys.len());
    for key in keys {
        inputs.push(operand(ctx, tx, key)?);
    }
    Ok(inputs)
}

/// How `ZUNION`/`ZINTER` combine a member's scores.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Which set operation a command runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

/// A parsed `ZUNION`/`ZINTER`/`ZDIFF` request's options.
struct SetOpSpec {
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
}

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

/// The keys of a set operation (`numkeys` at `args[first]`) and where its options start;
/// `None` with the error written.
fn setop_keys<'b, 'a>(
    args: &'b [&'a [u8]],
    first: usize,
    name: &str,
    out: &mut Vec<u8>,
) -> Option<(&'b [&'a [u8]], usize)> {
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
    Some((&args[first + 1..first + 1 + n], first + 1 + n))
}

/// A set operation's options from `args[i..]` for `n` keys, or the error's text (replied
/// once the keys are read, as Redis does).
fn setop_options(
    args: &[&[u8]],
    n: usize,
    mut i: usize,
    call: SetOpCall<'_>,
) -> std::result::Result<SetOpSpec, &'static str> {
    let mut spec = SetOpSpec {
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        with_scores: false,
    };
    // Bounded: every pass consumes one or more arguments, or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"weights" if call.op != SetOp::Diff && more >= n => {
                for j in 0..n {
                    spec.weights[j] =
                        parse_double(args[i + 1 + j]).ok_or("ERR weight value is not a float")?;
                }
                i += n;
            }
            b"aggregate" if call.op != SetOp::Diff && more >= 1 => {
                spec.aggregate = match &args[i + 1].to_ascii_lowercase()[..] {
                    b"sum" => Aggregate::Sum,
                    b"min" => Aggregate::Min,
                    b"max" => Aggregate::Max,
                    _ => return Err(SYNTAX),
                };
                i += 1;
            }
            b"withscores" if !call.store => spec.with_scores = true,
            _ => return Err(SYNTAX),
        }
        i += 1;
    }
    Ok(spec)
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

/// A score times its weight, a NaN product as 0.
fn weigh(s: f64, w: f64) -> f64 {
    let x = s * w;
    if x.is_nan() {
        0.0
    } else {
        x
    }
}

/// The result of a set operation on `inputs`, sorted by (score, member).
fn setop(spec: &SetOpSpec, inputs: &[Scored], op: SetOp) -> Scored {
    if inputs.is_empty() {
        return Vec::new();
    }
    let acc = match op {
        SetOp::Union => union(spec, inputs),
        SetOp::Inter => intersection(spec, inputs),
        SetOp::Diff => difference(inputs),
    };
    let mut result: Scored = acc.into_iter().collect();
    result.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    result
}

/// Every member of `inputs` with its weighted scores aggregated.
fn union(spec: &SetOpSpec, inputs: &[Scored]) -> HashMap<Vec<u8>, f64> {
    let mut acc = HashMap::new();
    for (members, &w) in inputs.iter().zip(&spec.weights) {
        for (m, s) in members {
            let x = weigh(*s, w);
            acc.entry(m.clone())
                .and_modify(|a| *a = combine_scores(*a, x, spec.aggregate))
                .or_insert(x);
        }
    }
    acc
}

/// The members in every one of `inputs` (not empty), with their weighted scores aggregated
/// in Redis's order: the smallest input first.
fn intersection(spec: &SetOpSpec, inputs: &[Scored]) -> HashMap<Vec<u8>, f64> {
    let mut acc = HashMap::new();
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| inputs[i].len());
    let maps: Vec<HashMap<&[u8], f64>> = inputs
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
    acc
}

/// The members of the first of `inputs` (not empty) in none of the others, their scores
/// kept.
fn difference(inputs: &[Scored]) -> HashMap<Vec<u8>, f64> {
    let others: HashSet<&[u8]> = inputs[1..].iter().flatten().map(|(m, _)| &m[..]).collect();
    let mut acc = HashMap::new();
    for (m, s) in &inputs[0] {
        if !others.contains(&m[..]) {
            acc.insert(m.clone(), *s);
        }
    }
    acc
}

/// A set operation as Redis runs it: its keys parsed (`None` with the error written), its
/// operands read and type-checked, its options' error if any, then the result and whether
/// it is wanted `WITHSCORES`.
fn setop_run(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    call: SetOpCall<'_>,
    out: &mut Vec<u8>,
) -> Option<OpResult<(Scored, bool)>> {
    let (keys, at) = setop_keys(args, call.first, call.name, out)?;
    let spec = setop_options(args, keys.len(), at, call);
    Some(operands(ctx, tx, keys).and_then(|inputs| {
        let spec = spec.map_err(OpError::Error)?;
        Ok((setop(&spec, &inputs, call.op), spec.with_scores))
    }))
}

/// `ZUNION`, `ZINTER`, `ZDIFF`: the result (with scores, `WITHSCORES`).
fn setop_command(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: SetOp,
    name: &str,
) -> Result {
    let call = SetOpCall {
        first: 1,
        op,
        store: false,
        name,
    };
    let Some(result) = setop_run(ctx, tx, args, call, out) else {
        return Ok(());
    };
    finish(out, result, |out, (result, with_scores)| {
        write_members(out, &result, with_scores, ctx.protocol);
    })
}

/// `ZUNIONSTORE`, `ZINTERSTORE`, `ZDIFFSTORE`: the members stored.
fn setop_store(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    op: SetOp,
    name: &'static str,
) -> Result {
    let call = SetOpCall {
        first: 2,
        op,
        store: true,
        name,
    };
    let Some(result) = setop_run(ctx, tx, args, call, out) else {
        return Ok(());
    };
    let stored = result.and_then(|(members, _)| {
        store(ctx, tx, args[1], &members, name)?;
        Ok(members.len())
    });
    finish(out, stored, |out, n| write::integer(out, n as i64))
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub(crate) fn zunion(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Union, "zunion")
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub(crate) fn zinter(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Inter, "zinter")
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`.
pub(crate) fn zdiff(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    setop_command(ctx, tx, args, out, SetOp::Diff, "zdiff")
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub(crate) fn zunionstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Union, "zunionstore")
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub(crate) fn zinterstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Inter, "zinterstore")
}

/// `ZDIFFSTORE destination numkeys key [key ...]`.
pub(crate) fn zdiffstore(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    setop_store(ctx, tx, args, out, SetOp::Diff, "zdiffstore")
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub(crate) fn zintercard(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    // As Redis: `numkeys` read as `ZUNION`'s (its texts), then the keys, then the limit.
    let Some((keys, i)) = setop_keys(args, 1, "zintercard", out) else {
        return Ok(());
    };
    let spec = SetOpSpec {
        weights: vec![1.0; keys.len()],
        aggregate: Aggregate::Sum,
        with_scores: false,
    };
    let result = operands(ctx, tx, keys).map(|inputs| setop(&spec, &inputs, SetOp::Inter));
    let mut limit_error = Vec::new();
    let limit = intercard_limit(args, i, &mut limit_error);
    finish(out, result, |out, result| match limit {
        Some(limit) => write::integer(out, result.len().min(limit) as i64),
        None => out.extend_from_slice(&limit_error),
    })
}
