//! Commands: looked up by name, their arity checked as Redis checks it, then run inside one
//! store transaction on the [`keyspace`](crate::keyspace), writing their reply.
//!
//! A handler writes Redis-level errors (`WRONGTYPE`, syntax, not an integer) into the reply
//! and returns `Ok`; it returns `Err` only for a store error, which the caller handles (a
//! conflict retries the whole transaction, so a handler may run more than once: it writes
//! nothing but its reply and its transaction's changes).
//!
//! Built so far: the string commands of [`strings`], the key commands of [`keys`], the
//! keyspace-wide reads of [`scan`] and the database commands of [`databases`]
//! (`docs/commands.md` lists them); the session's own commands are in `crate::session`.

pub mod databases;
pub mod keys;
pub mod meta;
pub mod scan;
pub mod strings;

use std::cell::Cell;

use tamer_store::{DbError, Tx};

use crate::collections::{blocking, hashes, lists, sets, zsets};
use crate::keyspace::{KeyspaceError, DATABASES};
use crate::resp::{write, Protocol};
use crate::watches::Watches;

/// What a command runs with besides its arguments.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The namespace of the client's database.
    pub namespace: u32,
    /// The client's database.
    pub db: usize,
    /// The database map as this transaction sees it. A map command ([`changes_map`]) changes
    /// it here and in the `databases` record; the caller publishes it once the transaction
    /// commits.
    pub map: &'a Cell<[u32; DATABASES]>,
    /// The caller holds the map's gate exclusively (`crate::dbmap`): required by the map
    /// commands.
    pub map_exclusive: bool,
    /// The command's time (Unix ms; one reading per command, as Redis caches it).
    pub now_ms: u64,
    pub protocol: Protocol,
    /// The server's watched keys, told of every write (`None`: nobody can watch).
    pub watches: Option<&'a Watches>,
    /// The largest value the store takes: a command refuses to build a longer one.
    pub max_value_bytes: usize,
    /// Where read lookups are counted (`INFO stats` `keyspace_hits`/`misses`; `None`: not).
    pub lookups: Option<&'a crate::stats::Lookups>,
}

impl Context<'_> {
    /// One read lookup (Redis's `lookupKeyRead`) that found its key or not.
    pub fn count_lookup(&self, found: bool) {
        if let Some(lookups) = self.lookups {
            lookups.count(found);
        }
    }

    /// A write to `key` of this database: watchers' `EXEC` will abort.
    pub fn touch(&self, key: &[u8]) {
        self.touch_in(self.db, key);
    }

    /// A write to `key` of database `db` (watches are by database, as Redis's).
    pub fn touch_in(&self, db: usize, key: &[u8]) {
        if let Some(w) = self.watches {
            w.touch(&crate::keyspace::store_key(db as u32, key));
        }
    }

    /// The watched keys of database `db` (namespace `ns`) that a swap with namespace `other`
    /// (or a flush: `None`) changes, bumped as Redis's `touchAllWatchedKeysInDb` does: those
    /// stored in `ns` or in `other`. Each is read (locked) in `tx`.
    pub fn touch_swapped(
        &self,
        tx: &mut Tx<'_>,
        db: usize,
        ns: u32,
        other: Option<u32>,
    ) -> Result<(), DbError> {
        let Some(w) = self.watches else {
            return Ok(());
        };
        for watched in w.watched_in(db as u32) {
            let key = &watched[4..];
            let mut stored = tx.contains(&crate::keyspace::store_key(ns, key))?;
            if let Some(other) = other {
                stored |= tx.contains(&crate::keyspace::store_key(other, key))?;
            }
            if stored {
                w.touch(&watched);
            }
        }
        Ok(())
    }
}

/// Whether the command named `name` (lowercase) changes the database map: it runs with the
/// map's gate held exclusively.
pub fn changes_map(name: &[u8]) -> bool {
    matches!(name, b"swapdb" | b"flushdb" | b"flushall")
}

/// A command handler: `args[0]` is the command's name.
pub type Handler = fn(&Context<'_>, &mut Tx<'_>, &[&[u8]], &mut Vec<u8>) -> Result<(), DbError>;

/// One entry of the command table.
#[derive(Clone, Copy)]
pub struct Command {
    /// Lowercase, as `COMMAND` names it.
    pub name: &'static str,
    /// Redis's convention: `n > 0` exactly `n` arguments (the name included), `n < 0` at
    /// least `-n`.
    pub arity: i32,
    pub handler: Handler,
}

/// Every command built, sorted by name.
pub const COMMANDS: &[Command] = &[
    cmd("append", 3, strings::append),
    cmd("blmove", 6, blocking::blmove),
    cmd("blmpop", -5, blocking::blmpop),
    cmd("blpop", -3, blocking::blpop),
    cmd("brpop", -3, blocking::brpop),
    cmd("brpoplpush", 4, blocking::brpoplpush),
    cmd("bzmpop", -5, blocking::bzmpop),
    cmd("bzpopmax", -3, blocking::bzpopmax),
    cmd("bzpopmin", -3, blocking::bzpopmin),
    cmd("copy", -3, databases::copy),
    cmd("dbsize", 1, databases::dbsize),
    cmd("decr", 2, strings::decr),
    cmd("decrby", 3, strings::decrby),
    cmd("del", -2, keys::del),
    cmd("exists", -2, keys::exists),
    cmd("expire", -3, keys::expire),
    cmd("expireat", -3, keys::expireat),
    cmd("expiretime", 2, keys::expiretime),
    cmd("flushall", -1, databases::flushall),
    cmd("flushdb", -1, databases::flushdb),
    cmd("get", 2, strings::get),
    cmd("getdel", 2, strings::getdel),
    cmd("getex", -2, strings::getex),
    cmd("getrange", 4, strings::getrange),
    cmd("getset", 3, strings::getset),
    cmd("hdel", -3, hashes::hdel),
    cmd("hexists", 3, hashes::hexists),
    cmd("hget", 3, hashes::hget),
    cmd("hgetall", 2, hashes::hgetall),
    cmd("hincrby", 4, hashes::hincrby),
    cmd("hincrbyfloat", 4, hashes::hincrbyfloat),
    cmd("hkeys", 2, hashes::hkeys),
    cmd("hlen", 2, hashes::hlen),
    cmd("hmget", -3, hashes::hmget),
    cmd("hmset", -4, hashes::hmset),
    cmd("hrandfield", -2, hashes::hrandfield),
    cmd("hscan", -3, hashes::hscan),
    cmd("hset", -4, hashes::hset),
    cmd("hsetnx", 4, hashes::hsetnx),
    cmd("hstrlen", 3, hashes::hstrlen),
    cmd("hvals", 2, hashes::hvals),
    cmd("incr", 2, strings::incr),
    cmd("incrby", 3, strings::incrby),
    cmd("incrbyfloat", 3, strings::incrbyfloat),
    cmd("keys", 2, scan::keys),
    cmd("lcs", -3, strings::lcs),
    cmd("lindex", 3, lists::lindex),
    cmd("linsert", 5, lists::linsert),
    cmd("llen", 2, lists::llen),
    cmd("lmove", 5, lists::lmove),
    cmd("lmpop", -4, lists::lmpop),
    cmd("lpop", -2, lists::lpop),
    cmd("lpos", -3, lists::lpos),
    cmd("lpush", -3, lists::lpush),
    cmd("lpushx", -3, lists::lpushx),
    cmd("lrange", 4, lists::lrange),
    cmd("lrem", 4, lists::lrem),
    cmd("lset", 4, lists::lset),
    cmd("ltrim", 4, lists::ltrim),
    cmd("mget", -2, strings::mget),
    cmd("move", 3, databases::move_),
    cmd("mset", -3, strings::mset),
    cmd("msetnx", -3, strings::msetnx),
    cmd("persist", 2, keys::persist),
    cmd("pexpire", -3, keys::pexpire),
    cmd("pexpireat", -3, keys::pexpireat),
    cmd("pexpiretime", 2, keys::pexpiretime),
    cmd("psetex", 4, strings::psetex),
    cmd("pttl", 2, keys::pttl),
    cmd("randomkey", 1, scan::randomkey),
    cmd("rename", 3, keys::rename),
    cmd("renamenx", 3, keys::renamenx),
    cmd("rpop", -2, lists::rpop),
    cmd("rpoplpush", 3, lists::rpoplpush),
    cmd("rpush", -3, lists::rpush),
    cmd("rpushx", -3, lists::rpushx),
    cmd("sadd", -3, sets::sadd),
    cmd("scan", -2, scan::scan),
    cmd("scard", 2, sets::scard),
    cmd("sdiff", -2, sets::sdiff),
    cmd("sdiffstore", -3, sets::sdiffstore),
    cmd("set", -3, strings::set),
    cmd("setex", 4, strings::setex),
    cmd("setnx", 3, strings::setnx),
    cmd("setrange", 4, strings::setrange),
    cmd("sinter", -2, sets::sinter),
    cmd("sintercard", -3, sets::sintercard),
    cmd("sinterstore", -3, sets::sinterstore),
    cmd("sismember", 3, sets::sismember),
    cmd("smembers", 2, sets::smembers),
    cmd("smismember", -3, sets::smismember),
    cmd("smove", 4, sets::smove),
    cmd("spop", -2, sets::spop),
    cmd("srandmember", -2, sets::srandmember),
    cmd("srem", -3, sets::srem),
    cmd("sscan", -3, sets::sscan),
    cmd("strlen", 2, strings::strlen),
    cmd("sunion", -2, sets::sunion),
    cmd("sunionstore", -3, sets::sunionstore),
    cmd("swapdb", 3, databases::swapdb),
    cmd("touch", -2, keys::exists),
    cmd("ttl", 2, keys::ttl),
    cmd("type", 2, keys::type_),
    cmd("unlink", -2, keys::del),
    cmd("zadd", -4, zsets::zadd),
    cmd("zcard", 2, zsets::zcard),
    cmd("zcount", 4, zsets::zcount),
    cmd("zdiff", -3, zsets::zdiff),
    cmd("zdiffstore", -4, zsets::zdiffstore),
    cmd("zincrby", 4, zsets::zincrby),
    cmd("zinter", -3, zsets::zinter),
    cmd("zintercard", -3, zsets::zintercard),
    cmd("zinterstore", -4, zsets::zinterstore),
    cmd("zlexcount", 4, zsets::zlexcount),
    cmd("zmpop", -4, zsets::zmpop),
    cmd("zmscore", -3, zsets::zmscore),
    cmd("zpopmax", -2, zsets::zpopmax),
    cmd("zpopmin", -2, zsets::zpopmin),
    cmd("zrandmember", -2, zsets::zrandmember),
    cmd("zrange", -4, zsets::zrange),
    cmd("zrangebylex", -4, zsets::zrangebylex),
    cmd("zrangebyscore", -4, zsets::zrangebyscore),
    cmd("zrangestore", -5, zsets::zrangestore),
    cmd("zrank", 3, zsets::zrank),
    cmd("zrem", -3, zsets::zrem),
    cmd("zremrangebylex", 4, zsets::zremrangebylex),
    cmd("zremrangebyrank", 4, zsets::zremrangebyrank),
    cmd("zremrangebyscore", 4, zsets::zremrangebyscore),
    cmd("zrevrange", -4, zsets::zrevrange),
    cmd("zrevrangebylex", -4, zsets::zrevrangebylex),
    cmd("zrevrangebyscore", -4, zsets::zrevrangebyscore),
    cmd("zrevrank", 3, zsets::zrevrank),
    cmd("zscan", -3, zsets::zscan),
    cmd("zscore", 3, zsets::zscore),
    cmd("zunion", -3, zsets::zunion),
    cmd("zunionstore", -4, zsets::zunionstore),
];

const fn cmd(name: &'static str, arity: i32, handler: Handler) -> Command {
    Command {
        name,
        arity,
        handler,
    }
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    let lower = name.to_ascii_lowercase();
    COMMANDS
        .binary_search_by(|c| c.name.as_bytes().cmp(&lower[..]))
        .ok()
        .map(|i| &COMMANDS[i])
}

/// Runs the request `args` in `tx`, appending its reply to `out`: Redis's error for an
/// unknown command or a wrong number of arguments.
pub fn execute(
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result<(), DbError> {
    assert!(!args.is_empty(), "a request has a name");
    let Some(command) = lookup(args[0]) else {
        write::error(out, &unknown_command_text(args));
        return Ok(());
    };
    let n = args.len() as i32;
    if (command.arity > 0 && n != command.arity) || n < command.arity.abs() {
        write::error(
            out,
            &format!(
                "ERR wrong number of arguments for '{}' command",
                command.name
            ),
        );
        return Ok(());
    }
    (command.handler)(ctx, tx, args, out)
}

/// Redis 7.0's reply to an unknown command: its name and first arguments, each cut at 128
/// bytes.
pub fn unknown_command_text<A: AsRef<[u8]>>(args: &[A]) -> String {
    let args: Vec<&[u8]> = args.iter().map(AsRef::as_ref).collect();
    let show = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(128)]).into_owned();
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        show(args[0])
    );
    for a in &args[1..] {
        text.push_str(&format!("'{}' ", show(a)));
    }
    text
}

/// A keyspace error as the command's reply, or the store error to hand back.
pub(crate) fn keyspace_error(out: &mut Vec<u8>, err: KeyspaceError) -> Result<(), DbError> {
    match err {
        KeyspaceError::Store(err) => Err(err),
        other => {
            write::error(out, &format!("ERR {other}"));
            Ok(())
        }
    }
}

/// A keyspace error as a store error, where no reply can carry it (a corrupt keyspace fails
/// the transaction).
pub(crate) fn store_error(err: KeyspaceError) -> DbError {
    match err {
        KeyspaceError::Store(err) => err,
        other => DbError::Runtime(other.to_string()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
