//! `OBJECT ENCODING|REFCOUNT|FREQ|HELP` (Redis 7.0), naming tamer's representations by the
//! closest of Redis's own: a packed hash or sorted set is a `listpack`, one in a tree a
//! `hashtable` or `skiplist`; a set is an `intset` while packed, all integers and within
//! `set-max-intset-entries` (Redis 7.0 keeps other sets in a `hashtable`); a list is a
//! `quicklist` (Redis 7.0's only list encoding); a string is `int`, `embstr` or `raw` by its
//! content, as Redis encodes a string it stores.

use tamer_store::{DbError, Tx};

use super::reply::{finish, OpError, OpResult};
use super::Context;
use crate::keyspace::collection::{element_of, load_uncounted, Found};
use crate::keyspace::{self, Entry, Kind};
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

/// Longest string Redis stores embedded with its object header (`OBJ_ENCODING_EMBSTR`).
const EMBSTR_BYTES_MAX: usize = 44;
/// Integers Redis shares (`OBJ_SHARED_INTEGERS`): their refcount reads as `INT_MAX`.
const SHARED_INTEGERS: i64 = 10_000;

/// The entry of `key`, looked up as Redis's `OBJECT` does (no hit or miss counted).
fn entry(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<Entry>> {
    keyspace::get(ctx, tx, key).map_err(OpError::keyspace)
}

/// Redis's `string2ll`: a canonical 64-bit integer (no sign `+`, no leading zero, no space).
fn canonical_integer(bytes: &[u8]) -> Option<i64> {
    let n = parse_i64(bytes)?;
    (n.to_string().as_bytes() == bytes).then_some(n)
}

/// A string's encoding by its content.
fn string_encoding(value: &[u8]) -> &'static str {
    if value.len() <= 20 && canonical_integer(value).is_some() {
        "int"
    } else if value.len() <= EMBSTR_BYTES_MAX {
        "embstr"
    } else {
        "raw"
    }
}

/// The encoding Redis would show for `key`'s value (`None`: absent).
fn encoding(ctx: &Context, tx: &mut Tx<'_>, key: &[u8]) -> OpResult<Option<&'static str>> {
    let Some(e) = entry(ctx, tx, key)? else {
        return Ok(None);
    };
    if e.kind == Kind::String {
        return Ok(Some(string_encoding(&e.payload)));
    }
    if e.kind == Kind::List {
        return Ok(Some("quicklist"));
    }
    let Found::Coll(c) = load_uncounted(ctx, tx, key, e.kind)? else {
        return Ok(None);
    };
    let name = match (e.kind, c.in_tree()) {
        (Kind::Hash, false) | (Kind::ZSet, false) => "listpack",
        (Kind::Hash, true) => "hashtable",
        (Kind::ZSet, true) => "skiplist",
        (Kind::Set, false) => {
            let members = c.all(tx, b"")?;
            let max = ctx.stats.config.set_max_entries();
            let ints = members
                .iter()
                .all(|(k, _)| canonical_integer(element_of(k, 0)).is_some());
            if ints && members.len() as u64 <= max {
                "intset"
            } else {
                "hashtable"
            }
        }
        _ => "hashtable",
    };
    Ok(Some(name))
}

/// `OBJECT ENCODING key`.
pub(crate) fn object_encoding(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    finish(out, encoding(ctx, tx, args[2]), |out, name| match name {
        Some(name) => write::bulk(out, name.as_bytes()),
        None => write::null(out, ctx.protocol),
    })
}

/// `OBJECT REFCOUNT key`: Redis's count for the value it would hold (a shared small integer
/// reads `INT_MAX`; any other value 1).
pub(crate) fn object_refcount(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    finish(out, entry(ctx, tx, args[2]), |out, e| match e {
        None => write::null(out, ctx.protocol),
        Some(e) => {
            let shared = e.kind == Kind::String
                && canonical_integer(&e.payload).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n));
            write::integer(out, if shared { i64::from(i32::MAX) } else { 1 });
        }
    })
}

/// `OBJECT FREQ key`: Redis's error, since tamer's `maxmemory-policy` is `noeviction` (no
/// LFU counter is kept); a null for an absent key, as Redis looks the key up first.
pub(crate) fn object_freq(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    finish(out, entry(ctx, tx, args[2]), |out, e| match e {
        None => write::null(out, ctx.protocol),
        Some(_) => write::error(
            out,
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please \
             note that when switching between policies at runtime LRU and LFU data will take \
             some time to adjust.",
        ),
    })
}

/// `OBJECT HELP`: Redis's lines.
pub(crate) fn object_help(_: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    const LINES: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    write::array(out, LINES.len());
    for line in LINES {
        write::simple(out, line);
    }
    Ok(())
}
