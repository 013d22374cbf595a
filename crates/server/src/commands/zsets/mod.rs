//! Sorted set commands with Redis 7.0's semantics, replies and error texts (`t_zset.c`).
//!
//! A sorted set's map holds each member twice (`collections`): `[0][hash][member] -> score`
//! answers a member's score, `[1][score order][member] -> score` orders members by (score,
//! member) so that positions in it are ranks (`Coll::rank` and `Coll::at`: O(log n) in a
//! tree). The score order is the score's bits made to sort as numbers (-0 sorts as 0, as
//! Redis compares them; the exact score is the value). Scores print as Redis 7.0 prints them,
//! `%.17g`.
//!
//! The files: `zset` the sorted set on its collection and its ranges as keys, `members`
//! the commands on members, `ranges` on ranges, `algebra` the set operations, `pops`
//! the pops.

use tamer_store::{DbError, Tx};

use super::collections::{self, Lookup};
use super::numbers::double_text;
use super::Context;
use crate::keyspace::events::Class;
use crate::keyspace::{self, Kind};
use crate::resp::{write, Protocol};

mod algebra;
mod members;
mod pops;
mod ranges;
mod zset;

pub(crate) use algebra::{zdiff, zdiffstore, zinter, zintercard, zinterstore, zunion, zunionstore};
pub(crate) use members::{
    zadd, zcard, zincrby, zmscore, zrandmember, zrank, zrem, zrevrank, zscan, zscore,
};
pub(super) use pops::{mpop_at, pop_first};
pub(crate) use pops::{zmpop, zpopmax, zpopmin};
pub(crate) use ranges::{
    zcount, zlexcount, zrange, zrangebylex, zrangebyscore, zrangestore, zremrangebylex,
    zremrangebyrank, zremrangebyscore, zrevrange, zrevrangebylex, zrevrangebyscore,
};
use zset::ZSet;

type Result = std::result::Result<(), DbError>;

/// Members with their scores, in reply order.
type Scored = Vec<(Vec<u8>, f64)>;

/// `key`'s sorted set (`None`: absent); `WRONGTYPE` when it holds another type.
fn existing(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    lookup: Lookup,
) -> super::reply::OpResult<Option<ZSet>> {
    Ok(collections::existing(ctx, tx, key, Kind::ZSet, lookup)?.map(|coll| ZSet { coll }))
}

/// Saves a changed sorted set (its key deleted when empty).
fn save(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], z: ZSet) -> Result {
    let n = z.card(tx)?;
    z.coll.save(ctx, tx, key, n)
}

/// Stores `members` as the sorted set at `dst`, replacing whatever it held (an empty one
/// deletes it): the keyspace event `event` (or `del`, `new`) as Redis's `setKey` and
/// `dbDelete`.
fn store(
    ctx: &Context,
    tx: &mut Tx<'_>,
    dst: &[u8],
    members: &[(Vec<u8>, f64)],
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
    let mut z = ZSet::new();
    for (m, s) in members {
        z.set(tx, m, *s, None)?;
    }
    // Written over whatever `dst` held (`keyspace::put` drops a replaced value's tree).
    save(ctx, tx, dst, z)?;
    ctx.notify(Class::Zset, event, dst);
    Ok(())
}

/// A score reply: RESP3 a double, RESP2 its text in a bulk string.
pub(super) fn write_score(out: &mut Vec<u8>, x: f64, protocol: Protocol) {
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
