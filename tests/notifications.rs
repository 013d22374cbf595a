//! Keyspace notifications checked event for event against a real redis-server 7.0: one
//! connection runs commands while another, subscribed to `__key*__:*`, records what each
//! command published (everything it received up to a `PING`'s reply, so no wait depends on
//! timing). Scripted scenarios cover every write command's events, a collection emptied, a
//! key created (`n`), a read that misses (`m`), expiry (lazy and active), databases and the
//! class letters; seeded random sequences cover the commands in combinations no list names.
//! Each run prints its seed; `TAMER_NOTIFY_SEED` replays one (`TAMER_NOTIFY_DUMP=FILE` writes
//! its steps).

mod common;

use std::time::Duration;

use common::conn::Conn;
use common::table::{entries, invocation, sorted, unordered, without_short_ttls, Entry};
use common::{have, temp_dir, Redis, Served};
use rand::SeedableRng;

/// A step: a command, or a pause (`SLEEP ms`) that lets keys expire.
type Step = &'static [&'static str];

const SCENARIOS: &[Step] = &[
    &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    &["CONFIG", "GET", "notify-keyspace-events"],
    // Strings.
    &["SET", "s", "1"],
    &["SET", "s", "2", "EX", "100"],
    &["SET", "s", "3", "KEEPTTL", "GET"],
    &["SET", "s", "4", "NX"],
    &["SETNX", "s2", "x"],
    &["SETEX", "s3", "100", "x"],
    &["PSETEX", "s4", "100000", "x"],
    &["GETSET", "s", "5"],
    &["MSET", "m1", "a", "m2", "b"],
    &["MSETNX", "m3", "a", "m4", "b"],
    &["MSETNX", "m3", "a", "m5", "b"],
    &["APPEND", "s", "x"],
    &["APPEND", "new", "x"],
    &["SETRANGE", "s", "1", "yy"],
    &["SETRANGE", "s", "1", ""],
    &["INCR", "n"],
    &["DECR", "n"],
    &["INCRBY", "n", "5"],
    &["DECRBY", "n", "2"],
    &["INCRBYFLOAT", "n", "1.5"],
    &["GETEX", "s", "EX", "50"],
    &["GETEX", "s", "PERSIST"],
    &["GETEX", "s"],
    &["GETDEL", "new"],
    &["GETDEL", "nothere"],
    // Generic.
    &["EXPIRE", "m1", "100"],
    &["PEXPIRE", "m1", "100000"],
    &["EXPIREAT", "m1", "4102444800"],
    &["EXPIRE", "m1", "100", "NX"],
    &["PERSIST", "m1"],
    &["PERSIST", "m1"],
    &["EXPIRE", "m2", "-1"],
    &["PEXPIREAT", "m3", "1"],
    &["EXPIRE", "nothere", "10"],
    &["RENAME", "m4", "r1"],
    &["RENAME", "r1", "r1"],
    &["SET", "r2", "x"],
    &["RENAME", "r1", "r2"],
    &["RENAMENX", "r2", "r3"],
    &["RENAMENX", "s", "r3"],
    &["COPY", "r3", "c1"],
    &["COPY", "r3", "c1", "REPLACE"],
    &["COPY", "r3", "c1"],
    &["COPY", "r3", "c2", "DB", "1"],
    &["MOVE", "r3", "2"],
    &["DEL", "c1", "c2", "nothere"],
    &["UNLINK", "r2"],
    &["SELECT", "2"],
    &["DEL", "r3"],
    &["SELECT", "0"],
    // Lists.
    &["LPUSH", "l", "a", "b"],
    &["RPUSH", "l", "c"],
    &["LPUSHX", "l", "z"],
    &["RPUSHX", "nolist", "z"],
    &["LINSERT", "l", "BEFORE", "a", "i"],
    &["LINSERT", "l", "BEFORE", "nope", "i"],
    &["LSET", "l", "0", "q"],
    &["LREM", "l", "1", "i"],
    &["LREM", "l", "1", "nope"],
    &["LTRIM", "l", "0", "2"],
    &["LTRIM", "l", "0", "-1"],
    &["LPOP", "l"],
    &["RPOP", "l", "1"],
    &["RPOPLPUSH", "l", "l2"],
    &["LMOVE", "l2", "l3", "LEFT", "RIGHT"],
    &["LMOVE", "l3", "l3", "RIGHT", "LEFT"],
    &["RPUSH", "l3", "x", "y"],
    &["LMPOP", "2", "nolist", "l3", "RIGHT", "COUNT", "5"],
    &["RPUSH", "l4", "x"],
    &["BLPOP", "l4", "0.01"],
    &["BRPOP", "l4", "0.01"],
    &["RPUSH", "l4", "x"],
    &["BLMOVE", "l4", "l5", "RIGHT", "LEFT", "0.01"],
    &["BRPOPLPUSH", "l5", "l4", "0.01"],
    &["BLMPOP", "0.01", "1", "l4", "LEFT"],
    &["RPUSH", "l6", "a"],
    &["LTRIM", "l6", "5", "10"],
    // Hashes.
    &["HSET", "h", "a", "1", "b", "2"],
    &["HSET", "h", "a", "1"],
    &["HMSET", "h", "c", "3"],
    &["HSETNX", "h", "a", "9"],
    &["HSETNX", "h", "d", "9"],
    &["HINCRBY", "h", "n", "2"],
    &["HINCRBYFLOAT", "h", "f", "2.5"],
    &["HDEL", "h", "nope"],
    &["HDEL", "h", "a", "b"],
    &["HDEL", "h", "c", "d", "n", "f"],
    // Sets.
    &["SADD", "st", "a", "b", "c"],
    &["SADD", "st", "a"],
    &["SREM", "st", "a", "nope"],
    &["SMOVE", "st", "st2", "b"],
    &["SMOVE", "st", "st2", "nope"],
    &["SPOP", "st"],
    &["SADD", "st", "x"],
    &["SPOP", "st", "1"],
    &["SADD", "st3", "y", "z"],
    &["SINTERSTORE", "dst", "st3", "st2"],
    &["SUNIONSTORE", "dst", "st3", "st2"],
    &["SDIFFSTORE", "dst", "st3", "st3"],
    &["SDIFFSTORE", "dst", "st3", "st3"],
    &["SUNIONSTORE", "dst", "nothere"],
    &["SREM", "st2", "b"],
    // Sorted sets.
    &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"],
    &["ZADD", "z", "1", "a"],
    &["ZADD", "z", "INCR", "5", "a"],
    &["ZADD", "z", "XX", "1", "nope"],
    &["ZINCRBY", "z", "1", "b"],
    &["ZREM", "z", "nope"],
    &["ZREM", "z", "d"],
    &["ZREMRANGEBYSCORE", "z", "0", "0"],
    &["ZREMRANGEBYSCORE", "z", "3", "3"],
    &["ZADD", "zl", "0", "p", "0", "q"],
    &["ZREMRANGEBYLEX", "zl", "[p", "[p"],
    &["ZREMRANGEBYLEX", "zl", "[p", "[p"],
    &["ZREMRANGEBYLEX", "zl", "-", "+"],
    &["ZREMRANGEBYRANK", "z", "0", "0"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z", "1"],
    &["ZADD", "z2", "1", "a", "2", "b"],
    &["ZUNIONSTORE", "zd", "2", "z", "z2"],
    &["ZINTERSTORE", "zd", "2", "z", "z2"],
    &["ZDIFFSTORE", "zd", "1", "z2"],
    &["ZRANGESTORE", "zd2", "z2", "0", "0"],
    &["ZRANGESTORE", "zd2", "z2", "5", "6"],
    &["ZINTERSTORE", "zd", "2", "z2", "nothere"],
    &["ZMPOP", "1", "z2", "MIN", "COUNT", "10"],
    &["ZADD", "z3", "1", "a"],
    &["BZPOPMIN", "z3", "0.01"],
    &["ZADD", "z3", "1", "a"],
    &["BZPOPMAX", "z3", "0.01"],
    &["ZADD", "z3", "1", "a"],
    &["BZMPOP", "0.01", "1", "z3", "MAX"],
    &["ZPOPMIN", "z", "10"],
    // A transaction's events come after EXEC, in its order; a script's too.
    &["MULTI"],
    &["SET", "t1", "a"],
    &["INCR", "t2"],
    &["DEL", "t1"],
    &["EXEC"],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 'v'); return redis.call('del', KEYS[1])",
        "1",
        "e1",
    ],
    // New keys (n) and misses (m) with the others.
    &["CONFIG", "SET", "notify-keyspace-events", "AKEnm"],
    &["SET", "nk", "1"],
    &["SET", "nk", "2"],
    &["GET", "missing"],
    &["MGET", "nk", "missing", "missing2"],
    &["EXISTS", "missing"],
    &["TYPE", "missing"],
    &["TTL", "missing"],
    &["HGET", "missing", "f"],
    &["LRANGE", "missing", "0", "-1"],
    &["SMEMBERS", "missing"],
    &["ZRANGE", "missing", "0", "-1"],
    &["SISMEMBER", "missing", "a"],
    &["STRLEN", "missing"],
    &["INCR", "missing"],
    &["RPUSH", "nl", "a"],
    &["HSET", "nh", "a", "1"],
    &["SADD", "ns", "a"],
    &["ZADD", "nz", "1", "a"],
    &["SUNIONSTORE", "nd", "ns"],
    &["RENAME", "nd", "nd2"],
    &["COPY", "nd2", "nd3"],
    &["MOVE", "nd3", "3"],
    &["SINTERSTORE", "ns2", "ns", "missing"],
    // Expiry: lazy (a read after the time) and active (the expirer, given time).
    &["SET", "x1", "v", "PX", "50"],
    &["SLEEP", "150"],
    &["GET", "x1"],
    &["SET", "x2", "v", "PX", "20"],
    &["SLEEP", "1500"],
    &["EXISTS", "x2"],
    // Databases: no events for FLUSHDB, SWAPDB, FLUSHALL (Redis 7.0's behaviour).
    &["SELECT", "1"],
    &["SET", "d1", "x"],
    &["SWAPDB", "0", "1"],
    &["FLUSHDB"],
    &["SELECT", "0"],
    &["FLUSHALL"],
    // The class letters pick what is published.
    &["CONFIG", "SET", "notify-keyspace-events", "Kl"],
    &["CONFIG", "GET", "notify-keyspace-events"],
    &["RPUSH", "cl", "a"],
    &["SET", "cs", "a"],
    &["DEL", "cl", "cs"],
    &["CONFIG", "SET", "notify-keyspace-events", "Eg$"],
    &["SET", "cs", "a"],
    &["RPUSH", "cl", "a"],
    &["DEL", "cl", "cs"],
    &["CONFIG", "SET", "notify-keyspace-events", "g$"],
    &["SET", "cs", "a"],
    &["CONFIG", "SET", "notify-keyspace-events", "KEq"],
    &["CONFIG", "GET", "notify-keyspace-events"],
    &["CONFIG", "SET", "notify-keyspace-events", ""],
    &["SET", "cs", "b"],
    &["CONFIG", "GET", "notify-keyspace-events"],
];

/// One step's record: the command's replies and the events published meanwhile.
type Record = (Vec<String>, Vec<String>);

/// Runs `steps` on a command connection and a subscriber to every keyspace channel.
fn run(port: u16, steps: &[Vec<String>]) -> Vec<Record> {
    let mut cmd = Conn::new(port);
    let mut sub = Conn::new(port);
    sub.send(&["PSUBSCRIBE", "__key*__:*"]);
    sub.next();
    let mut records = Vec::new();
    for step in steps {
        let args: Vec<&str> = step.iter().map(String::as_str).collect();
        if args[0] == "SLEEP" {
            std::thread::sleep(Duration::from_millis(args[1].parse().unwrap()));
            continue;
        }
        cmd.send(&args);
        let reply = cmd.next();
        let reply = if unordered(args[0]) {
            sorted(&reply)
        } else {
            reply
        };
        records.push((vec![reply], sub.drain()));
    }
    records
}

fn compare(steps: &[Vec<String>], want: &[Record], got: &[Record], what: &str) {
    let commands = steps.iter().filter(|s| s[0] != "SLEEP");
    for (i, (step, (w, g))) in commands.zip(want.iter().zip(got)).enumerate() {
        assert_eq!(
            w, g,
            "{what}: step {i} {step:?}: redis-server's (replies, events) left, tamer's right"
        );
    }
    assert_eq!(want.len(), got.len());
}

fn owned(steps: &[Step]) -> Vec<Vec<String>> {
    steps
        .iter()
        .map(|s| s.iter().map(|w| w.to_string()).collect())
        .collect()
}

/// Mutations caught (each fails a step): an event's name or class wrong for any command
/// above (`incrby` for `INCR`, `zincr` for `ZADD INCR`, `rename_from`/`rename_to`,
/// `move_from`/`move_to`, `copy_to`, the `*store` names), `del` missing when a pop or a
/// removal empties a collection or a store command's result is empty, an event for a write
/// that changed nothing, `new` missing or sent for an overwrite, `keymiss` from a write
/// lookup, keyspace and keyevent channels swapped or in the other order, a transaction's
/// events before `EXEC`, lazy or active expiry without `expired`, `FLUSHDB` publishing,
/// the class letters misparsed or shown otherwise than Redis.
#[test]
fn keyspace_events_as_redis_sends_them() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let steps = owned(SCENARIOS);
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("notify-scenarios");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(&steps, &want, &got, "keyspace notification scenarios");
}

/// Commands a random sequence draws from: those with keys, but not scripts (their bodies
/// are random words), not the blocking ones (they wait on another client), not the ones
/// that set a TTL in ms (a short one would expire on one server's timing and not the
/// other's), nor those whose reply is random, the time left (the two servers run at
/// different times) or a scan's page from a random cursor (Redis's hash table order).
fn drawn(e: &Entry) -> bool {
    let left_out = [
        "eval",
        "eval_ro",
        "evalsha",
        "evalsha_ro",
        "pexpire",
        "psetex",
        "object",
        "memory",
        "spop",
        "srandmember",
        "hrandfield",
        "zrandmember",
        "ssubscribe",
        "sunsubscribe",
        "spublish",
        "ttl",
        "pttl",
        "expiretime",
        "hscan",
        "sscan",
        "zscan",
        "pexpiretime",
    ];
    e.has_keys
        && !e.has_flag("blocking")
        && !left_out.contains(&e.name.split('|').next().unwrap_or(""))
}

/// Seeded random sequences over every keyed command with every class on (`AKEnm`).
/// Mutations caught: those of the scenarios, over combinations and argument shapes no list
/// names (an event for a refused command, an option that changes the event).
#[test]
fn random_commands_publish_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed = std::env::var("TAMER_NOTIFY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24_025);
    eprintln!("random keyspace events: seed {seed} (TAMER_NOTIFY_SEED replays it)");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let pool: Vec<Entry> = entries().into_iter().filter(drawn).collect();
    let mut steps = vec![["CONFIG", "SET", "notify-keyspace-events", "AKEnm"]
        .map(String::from)
        .to_vec()];
    for _ in 0..1500 {
        let e = &pool[rand::Rng::gen_range(&mut rng, 0..pool.len())];
        steps.push(without_short_ttls(invocation(e, &mut rng)));
    }
    if let Ok(path) = std::env::var("TAMER_NOTIFY_DUMP") {
        let text: Vec<String> = steps.iter().map(|s| format!("{s:?}")).collect();
        std::fs::write(path, text.join("\n")).unwrap();
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("notify-random");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(
        &steps,
        &want,
        &got,
        &format!("random keyspace events, seed {seed}"),
    );
}
