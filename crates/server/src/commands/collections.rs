//! What the collection families (hashes, lists, sets, sorted sets) share: looking a key's
//! collection up with the reply for an absent key or another type, and the commands hashes
//! and sets share on their hashed elements (Redis's `*GenericCommand`s).

use tamer_store::{DbError, Tx};

use super::reply::WRONGTYPE;
use super::Context;
use crate::keyspace::collection::{hashed_key, load, load_uncounted, Coll, Found};
use crate::keyspace::Kind;
use crate::resp::write;

type Result<T> = std::result::Result<T, DbError>;

/// How a command looks its key up, as Redis counts it in `keyspace_hits`/`misses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// `lookupKeyRead`: counted.
    Read,
    /// `lookupKeyWrite`: not counted.
    Write,
}

/// Loads `key`'s collection of `kind`: `None` when the reply is written (absent: what `absent`
/// writes; another type: `WRONGTYPE`).
pub fn open(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    lookup: Lookup,
    out: &mut Vec<u8>,
    absent: impl FnOnce(&mut Vec<u8>),
) -> Result<Option<Coll>> {
    let found = match lookup {
        Lookup::Read => load(ctx, tx, key, kind)?,
        Lookup::Write => load_uncounted(ctx, tx, key, kind)?,
    };
    match found {
        Found::Absent => {
            absent(out);
            Ok(None)
        }
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            Ok(None)
        }
        Found::Coll(c) => Ok(Some(c)),
    }
}

/// Loads `key`'s collection of `kind`, or a new empty one (a write command's lookup); `None`
/// when the key holds another kind (`WRONGTYPE` written to `out`).
pub fn load_or_new(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    out: &mut Vec<u8>,
) -> Result<Option<Coll>> {
    match load_uncounted(ctx, tx, key, kind)? {
        Found::Absent => Ok(Some(Coll::new(kind))),
        Found::WrongType => {
            write::error(out, WRONGTYPE);
            Ok(None)
        }
        Found::Coll(c) => Ok(Some(c)),
    }
}

/// `HDEL`/`SREM key element [element ...]` on a collection of `kind` keyed by
/// [`hashed_key`] with no prefix: the elements removed (the key goes with its last one).
pub fn remove_hashed(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result<()> {
    let absent = |o: &mut Vec<u8>| write::integer(o, 0);
    let Some(mut c) = open(ctx, tx, args[1], kind, Lookup::Write, out, absent)? else {
        return Ok(());
    };
    let mut removed = 0;
    for e in &args[2..] {
        removed += i64::from(c.del(tx, &hashed_key(tx, b"", e))?);
    }
    let n = c.len(tx)?;
    c.save(ctx, tx, args[1], n)?;
    write::integer(out, removed);
    Ok(())
}

/// `HEXISTS`/`SISMEMBER key element` on a collection of `kind` (as [`remove_hashed`]).
pub fn contains_hashed(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result<()> {
    let absent = |o: &mut Vec<u8>| write::integer(o, 0);
    let Some(c) = open(ctx, tx, args[1], kind, Lookup::Read, out, absent)? else {
        return Ok(());
    };
    let found = c.get(tx, &hashed_key(tx, b"", args[2]))?.is_some();
    write::integer(out, i64::from(found));
    Ok(())
}

/// `HLEN`/`SCARD key`: the entries of `key`'s collection of `kind` (0 when absent).
pub fn count_entries(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result<()> {
    let absent = |o: &mut Vec<u8>| write::integer(o, 0);
    let Some(c) = open(ctx, tx, args[1], kind, Lookup::Read, out, absent)? else {
        return Ok(());
    };
    write::integer(out, c.len(tx)? as i64);
    Ok(())
}
