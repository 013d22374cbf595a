//! `PUBLISH`, `SPUBLISH` and `PUBSUB`'s subcommands (the subscriptions themselves change the
//! session: `crate::session`). A publish is held in the transaction's effects and goes out
//! once it commits; its reply counts the receivers as the hub has them then.

use tamer_store::{DbError, Tx};

use super::Context;
use crate::pubsub::Kind;
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// tamer's error when one transaction publishes more than its effects hold.
const EFFECTS_FULL: &str = "ERR too many bytes published in one transaction";

fn publish_generic(ctx: &Context, args: &[&[u8]], out: &mut Vec<u8>, shard: bool) -> Result {
    let (channel, payload) = (args[1], args[2]);
    if !ctx.effects.publish(channel, payload, shard) {
        write::error(out, EFFECTS_FULL);
        return Ok(());
    }
    write::integer(out, ctx.pubsub.receivers(channel, shard) as i64);
    Ok(())
}

/// `PUBLISH channel message`.
pub fn publish(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    publish_generic(ctx, args, out, false)
}

/// `SPUBLISH shardchannel message`.
pub fn spublish(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    publish_generic(ctx, args, out, true)
}

fn names_generic(ctx: &Context, args: &[&[u8]], out: &mut Vec<u8>, kind: Kind) -> Result {
    let names = ctx.pubsub.names(kind, args.get(2).copied());
    write::array(out, names.len());
    for n in &names {
        write::bulk(out, n);
    }
    Ok(())
}

/// `PUBSUB CHANNELS [pattern]`.
pub fn channels(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    names_generic(ctx, args, out, Kind::Channel)
}

/// `PUBSUB SHARDCHANNELS [pattern]`.
pub fn shardchannels(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    names_generic(ctx, args, out, Kind::Shard)
}

fn numsub_generic(ctx: &Context, args: &[&[u8]], out: &mut Vec<u8>, kind: Kind) -> Result {
    let names = &args[2..];
    write::array(out, names.len() * 2);
    for n in names {
        write::bulk(out, n);
        write::integer(out, ctx.pubsub.numsub(kind, n) as i64);
    }
    Ok(())
}

/// `PUBSUB NUMSUB [channel ...]`.
pub fn numsub(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    numsub_generic(ctx, args, out, Kind::Channel)
}

/// `PUBSUB SHARDNUMSUB [shardchannel ...]`.
pub fn shardnumsub(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    numsub_generic(ctx, args, out, Kind::Shard)
}

/// `PUBSUB NUMPAT`: patterns subscribed to (distinct).
pub fn numpat(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::integer(out, ctx.pubsub.len(Kind::Pattern) as i64);
    Ok(())
}
