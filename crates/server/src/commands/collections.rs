//! What the collection families (hashes, lists, sets, sorted sets) share: looking a key's
//! collection up (absent, or `WRONGTYPE` for another type), reading, scanning and picking
//! its hashed elements, and the commands hashes and sets share on them (Redis's
//! `*GenericCommand`s).

use tamer_store::{DbError, Tx};

use super::args::scan_options;
use super::reply::{finish, OpError, OpResult};
use super::Context;
use crate::keyspace::collection::{
    element_of, hashed_key, load, load_uncounted, random_entries, random_u64, scan_hashed, Coll,
    Found,
};
use crate::keyspace::{events, Kind};
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// A collection's entries: (map key, value).
pub(super) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// How a command looks its key up, as Redis counts it in `keyspace_hits`/`misses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// `lookupKeyRead`: counted.
    Read,
    /// `lookupKeyWrite`: not counted.
    Write,
}

/// `key`'s collection of `kind` (`None`: absent); `WRONGTYPE` when it holds another kind.
pub(super) fn existing(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    lookup: Lookup,
) -> OpResult<Option<Coll>> {
    let found = match lookup {
        Lookup::Read => load(ctx, tx, key, kind)?,
        Lookup::Write => load_uncounted(ctx, tx, key, kind)?,
    };
    match found {
        Found::Absent => Ok(None),
        Found::WrongType => Err(OpError::WrongType),
        Found::Coll(c) => Ok(Some(c)),
    }
}

/// `key`'s collection of `kind`, or a new empty one (a write command's lookup); `WRONGTYPE`
/// when it holds another kind.
pub(super) fn or_new(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], kind: Kind) -> OpResult<Coll> {
    let found = existing(ctx, tx, key, kind, Lookup::Write)?;
    Ok(found.unwrap_or_else(|| Coll::new(kind)))
}

/// Every entry of `key`'s collection of `kind` whose map key starts with `prefix`, in map
/// order (none when absent; a read lookup).
pub(super) fn entries(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    prefix: &[u8],
) -> OpResult<Entries> {
    match existing(ctx, tx, key, kind, Lookup::Read)? {
        Some(c) => Ok(c.all(tx, prefix)?),
        None => Ok(Vec::new()),
    }
}

/// One `HSCAN`/`SSCAN`/`ZSCAN` step over `key`'s entries under `prefix` (hashed elements):
/// those whose element matches the pattern, and the next cursor (none and 0 when absent). A
/// packed collection is returned whole at once, as Redis does for a listpack.
pub(super) fn scan_elements(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    prefix: &[u8],
    args: &[&[u8]],
    cursor: u64,
) -> OpResult<(Entries, u64)> {
    let Some(c) = existing(ctx, tx, key, kind, Lookup::Read)? else {
        return Ok((Vec::new(), 0));
    };
    // As Redis: the options are read once the key is found and of the right type.
    let scan = scan_options(args, cursor).map_err(OpError::Error)?;
    let (mut found, next) = if c.in_tree() {
        scan_hashed(tx, &c, prefix, scan.cursor, scan.count)?
    } else {
        (c.all(tx, prefix)?, 0)
    };
    if let Some(p) = scan.pattern {
        found.retain(|(k, _)| crate::glob::matches(p, element_of(k, prefix.len())));
    }
    Ok((found, next))
}

/// The map key of a random entry of `key`'s hash or set (`None`: absent), as
/// `HRANDFIELD`/`SRANDMEMBER` without a count pick it.
pub(super) fn random_key(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
) -> OpResult<Option<Vec<u8>>> {
    let Some(c) = existing(ctx, tx, key, kind, Lookup::Read)? else {
        return Ok(None);
    };
    let n = c.len(tx)?;
    let pick = random_u64() % n.max(1);
    Ok(c.at(tx, pick)?.map(|(k, _)| k))
}

/// Random entries of `key`'s hash or set as `HRANDFIELD`/`SRANDMEMBER` with a count pick
/// them ([`random_entries`]; none when absent).
pub(super) fn random_picks(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    kind: Kind,
    count: i64,
) -> OpResult<Entries> {
    let Some(c) = existing(ctx, tx, key, kind, Lookup::Read)? else {
        return Ok(Vec::new());
    };
    let n = c.len(tx)?;
    Ok(random_entries(tx, &c, n, count)?)
}

/// `HDEL`/`SREM key element [element ...]` on a collection of `kind` keyed by
/// [`hashed_key`] with no prefix: the elements removed (the key goes with its last one).
pub(super) fn remove_hashed(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result {
    finish(
        out,
        remove_elements(ctx, tx, args[1], &args[2..], kind),
        write::integer,
    )
}

/// Removes `elements` from `key`'s collection of `kind`: how many were there.
fn remove_elements(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    elements: &[&[u8]],
    kind: Kind,
) -> OpResult<i64> {
    let Some(mut c) = existing(ctx, tx, key, kind, Lookup::Write)? else {
        return Ok(0);
    };
    let mut removed = 0;
    for e in elements {
        removed += i64::from(c.del(tx, &hashed_key(tx, b"", e))?);
    }
    if removed > 0 {
        let event = if kind == Kind::Hash { "hdel" } else { "srem" };
        ctx.notify(events::class_of(kind), event, key);
    }
    let n = c.len(tx)?;
    c.save(ctx, tx, key, n)?;
    Ok(removed)
}

/// `HEXISTS`/`SISMEMBER key element` on a collection of `kind` (as [`remove_hashed`]).
pub(super) fn contains_hashed(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result {
    let found = contains(ctx, tx, args[1], args[2], kind);
    finish(out, found, |out, found| {
        write::integer(out, i64::from(found))
    })
}

/// Whether `key`'s collection of `kind` holds `element` (a read lookup).
fn contains(
    ctx: &Context,
    tx: &mut Tx<'_>,
    key: &[u8],
    element: &[u8],
    kind: Kind,
) -> OpResult<bool> {
    let Some(c) = existing(ctx, tx, key, kind, Lookup::Read)? else {
        return Ok(false);
    };
    Ok(c.get(tx, &hashed_key(tx, b"", element))?.is_some())
}

/// `HLEN`/`SCARD`/`LLEN key`: the entries of `key`'s collection of `kind` (0 when absent).
pub(super) fn count_entries(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: Kind,
) -> Result {
    finish(out, len(ctx, tx, args[1], kind), |out, n| {
        write::integer(out, n as i64)
    })
}

/// The entries of `key`'s collection of `kind` (0 when absent; a read lookup).
fn len(ctx: &Context, tx: &mut Tx<'_>, key: &[u8], kind: Kind) -> OpResult<u64> {
    match existing(ctx, tx, key, kind, Lookup::Read)? {
        Some(c) => Ok(c.len(tx)?),
        None => Ok(0),
    }
}
