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

pub mod args;
pub mod blocking_pops;
pub mod collections;
pub mod context;
pub mod databases;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod meta;
pub mod reply;
pub mod scan;
pub mod server;
pub mod sets;
pub mod strings;
pub mod zsets;

use tamer_store::{DbError, Tx};

use crate::resp::write;

pub use context::Context;

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
    cmd("blmove", 6, blocking_pops::blmove),
    cmd("blmpop", -5, blocking_pops::blmpop),
    cmd("blpop", -3, blocking_pops::blpop),
    cmd("brpop", -3, blocking_pops::brpop),
    cmd("brpoplpush", 4, blocking_pops::brpoplpush),
    cmd("bzmpop", -5, blocking_pops::bzmpop),
    cmd("bzpopmax", -3, blocking_pops::bzpopmax),
    cmd("bzpopmin", -3, blocking_pops::bzpopmin),
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

/// The commands a session answers itself, besides the table's.
const SESSION_COMMANDS: &[&str] = &[
    "auth", "client", "command", "config", "discard", "echo", "exec", "hello", "info", "lastsave",
    "latency", "memory", "multi", "ping", "quit", "reset", "select", "shutdown", "slowlog", "time",
    "unwatch", "watch",
];

/// Every name commandstats counts: each served command, and each served subcommand of a
/// container (`config|get`), as Redis 7.0 counts them.
pub fn counted_names() -> Vec<&'static str> {
    let mut names = all_command_names();
    for (name, entry) in meta::table() {
        if !CONTAINERS.contains(&name.as_str()) {
            continue;
        }
        let subs = entry.get("info").and_then(|i| i.get("subcommands"));
        for sub in subs.map_or(&[][..], meta::Node::list) {
            if let Some(meta::Node::Str(full)) = sub.get("name") {
                names.push(full.as_str());
            }
        }
    }
    names
}

/// Every command name tamer serves: the table's and the session's.
pub fn all_command_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = COMMANDS.iter().map(|c| c.name).collect();
    names.extend(SESSION_COMMANDS);
    names.sort_unstable();
    names
}

/// The commands whose first argument is a subcommand.
pub const CONTAINERS: &[&str] = &[
    "client", "command", "config", "latency", "memory", "slowlog",
];

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

#[cfg(test)]
pub(crate) mod tests;
