#!/usr/bin/env python3
"""Writes crates/server/src/commands/meta.json: the COMMAND INFO / COMMAND DOCS metadata of
the commands tamer serves, read from a redis-server 7.0 (the behaviour tamer follows).

    python3 scripts/gen-command-meta.py --port 6379 > crates/server/src/commands/meta.json

The command names are NAMES below (keep them to what `COMMAND LIST` of tamer answers:
`commands::meta::tests` fails when a served command has no entry, or an entry's arity
differs from the command table's). Container commands keep only the subcommands tamer serves
(SUBCOMMANDS). Encoding (read by commands/meta.rs): a JSON object is a RESP map, an array an
array, a string a bulk string, a number an integer; a map's "flags" and "doc_flags" arrays
are sets of simple strings and its "history" array a set; an info's "flags" and "acl" are sets of simple
strings and "tips" a set of bulk strings.
"""

import argparse
import json
import socket

NAMES = """acl append auth blmove blmpop blpop brpop brpoplpush bzmpop bzpopmax bzpopmin client command
config copy dbsize decr decrby del discard echo eval eval_ro evalsha evalsha_ro exec exists expire
expireat expiretime fcall fcall_ro
flushall flushdb function get getdel getex getrange getset hdel hello hexists hget hgetall hincrby
hincrbyfloat hkeys hlen hmget hmset hrandfield hscan hset hsetnx hstrlen hvals incr incrby
incrbyfloat info keys lastsave latency lcs lindex linsert llen lmove lmpop lpop lpos lpush
lpushx lrange lrem lset ltrim memory mget monitor move mset msetnx multi object persist pexpire pexpireat
pexpiretime ping psetex psubscribe pttl publish pubsub punsubscribe quit randomkey rename renamenx reset rpop rpoplpush rpush
rpushx sadd scan scard script sdiff sdiffstore select set setex setnx setrange shutdown sinter
sintercard sinterstore sismember slowlog smembers smismember smove spop spublish srandmember srem
sscan ssubscribe strlen subscribe sunion sunionstore sunsubscribe swapdb time touch ttl type unlink unsubscribe unwatch watch zadd zcard
zcount zdiff zdiffstore zincrby zinter zintercard zinterstore zlexcount zmpop zmscore
zpopmax zpopmin zrandmember zrange zrangebylex zrangebyscore zrangestore zrank zrem
zremrangebylex zremrangebyrank zremrangebyscore zrevrange zrevrangebylex zrevrangebyscore
zrevrank zscan zscore zunion zunionstore""".split()

SUBCOMMANDS = {
    "acl": [
        "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log", "save",
        "setuser", "users", "whoami",
    ],
    "client": [
        "caching", "getname", "getredir", "id", "info", "kill", "list", "no-evict", "pause",
        "reply", "setname", "tracking", "trackinginfo", "unblock", "unpause",
    ],
    "command": ["count", "docs", "getkeys", "getkeysandflags", "info", "list"],
    "config": ["get", "resetstat", "rewrite", "set"],
    "function": ["delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats"],
    "latency": ["histogram", "history", "latest", "reset"],
    "memory": ["usage"],
    "object": ["encoding", "freq", "help", "refcount"],
    "pubsub": ["channels", "numpat", "numsub", "shardchannels", "shardnumsub"],
    "script": ["exists", "flush", "kill", "load"],
    "slowlog": ["get", "len", "reset"],
}


class Simple(str):
    pass


class Set(list):
    pass


def parse(f):
    """One RESP3 value from the file-like `f`."""
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return Simple(rest.decode())
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        data = f.read(int(rest) + 2)[:-2]
        return data.decode()
    if kind in (b"*", b"~"):
        items = [parse(f) for _ in range(int(rest))]
        return Set(items) if kind == b"~" else items
    if kind == b"%":
        n = int(rest)
        out = {}
        for _ in range(n):
            k = parse(f)
            out[k] = parse(f)
        return out
    if kind == b"_":
        return None
    raise RuntimeError(f"unexpected RESP3 type {line!r}")


def request(sock, f, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return parse(f)


def plain(value):
    """Sets and simple strings as JSON arrays and strings (the encoding rule restores them)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value if not isinstance(value, str) else str(value)


def info_entry(info, keep_subs):
    name, arity, flags, first, last, step, acl, tips, specs, subs = info
    entry = {
        "name": name,
        "arity": arity,
        "flags": list(flags),
        "first_key": first,
        "last_key": last,
        "step": step,
        "acl": list(acl),
        "tips": list(tips),
        "key_specs": plain(specs),
    }
    kept = [s for s in subs if s[0].split("|", 1)[1] in keep_subs]
    entry["subcommands"] = [info_entry(s, []) for s in kept]
    return entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=6379)
    port = ap.parse_args().port
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    request(sock, f, "HELLO", "3")
    table = {}
    for name in sorted(NAMES):
        keep = SUBCOMMANDS.get(name, [])
        [info] = request(sock, f, "COMMAND", "INFO", name)
        docs = request(sock, f, "COMMAND", "DOCS", name)[name]
        if "subcommands" in docs:
            docs["subcommands"] = {
                k: v for k, v in docs["subcommands"].items() if k.split("|", 1)[1] in keep
            }
        table[name] = {"info": info_entry(info, keep), "docs": plain(docs)}
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
