//! `tamer serve` as a user runs it: the real binary on a real store file, real clients
//! (`redis-cli` from Debian's `redis-tools`, installed by `scripts/install-peers.sh`, and raw
//! TCP). Without `redis-cli` the tests that need it say SKIPPED, unless `TAMER_REQUIRE_PEERS=1`
//! (CI), when they fail. Each test names the mutation it catches.

// Test code: a scenario reads best whole, so the function length limit does not apply.
#![allow(clippy::too_many_lines)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{call, have, read_replies, redis_cli, send_command, temp_dir, Redis, Served};

/// redis-cli talks to it unchanged. Catches a reply framed wrongly for a real client.
#[test]
fn redis_cli_works_unchanged() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let dir = temp_dir("cli");
    let served = Served::start(&dir.0);
    let p = served.port;
    assert_eq!(redis_cli(p, &["ping"]), "PONG");
    assert_eq!(redis_cli(p, &["set", "greeting", "hello world"]), "OK");
    assert_eq!(redis_cli(p, &["get", "greeting"]), "hello world");
    assert_eq!(redis_cli(p, &["incrby", "n", "41"]), "41");
    assert_eq!(redis_cli(p, &["incr", "n"]), "42");
    assert_eq!(redis_cli(p, &["mget", "greeting", "none"]), "hello world");
    assert_eq!(redis_cli(p, &["type", "n"]), "string");
    assert_eq!(
        redis_cli(p, &["select", "16"]),
        "ERR DB index is out of range"
    );
    let (code, rest) = served.terminate();
    assert_eq!(code, Some(0), "{rest}");
    assert!(rest.contains("closed cleanly"), "{rest}");
}

/// 2,000 pipelined requests in one write get 2,000 replies in order; a second connection is
/// served meanwhile; `SELECT` keeps databases apart. On two cores sharing the network (jobs
/// of one connection may run on either). Catches replies reordered across batches or cores,
/// a batch boundary losing a request, one connection's state leaking into another.
#[test]
fn pipelines_are_answered_in_order() {
    let dir = temp_dir("pipeline");
    let served = Served::start_with(&dir.0, &["--cores", "2"]);
    let mut a = served.connect();
    let mut b = served.connect();
    let mut request = Vec::new();
    for i in 0..1000 {
        request.extend_from_slice(format!("SET key{i} value{i}\r\nGET key{i}\r\n").as_bytes());
    }
    a.write_all(&request).unwrap();
    b.write_all(b"SELECT 1\r\nGET key5\r\nSET key5 other\r\nGET key5\r\n")
        .unwrap();
    let replies = read_replies(&mut a, 2000);
    for i in 0..1000 {
        assert_eq!(replies[2 * i], "+OK\r\n");
        assert_eq!(
            replies[2 * i + 1],
            format!("${}\r\nvalue{i}\r\n", format!("value{i}").len())
        );
    }
    assert_eq!(
        read_replies(&mut b, 4),
        ["+OK\r\n", "$-1\r\n", "+OK\r\n", "$5\r\nother\r\n"]
    );
    a.write_all(b"GET key5\r\n").unwrap();
    assert_eq!(read_replies(&mut a, 1), ["$6\r\nvalue5\r\n"]);
}

/// A malformed request gets Redis's protocol error after the replies to the requests before
/// it, and the connection is closed; other clients go on. Catches a parser error that is
/// swallowed, replied out of order, or that takes the server down; connection commands'
/// arity errors.
#[test]
fn bad_input_closes_only_that_connection() {
    let dir = temp_dir("bad");
    let served = Served::start(&dir.0);
    let mut bad = served.connect();
    let mut good = served.connect();
    // Valid requests first, in the same write: their replies come before the error's.
    bad.write_all(b"SET a 1\r\nGET a\r\n*1\r\n$-5\r\nPING\r\n")
        .unwrap();
    let mut rest = Vec::new();
    bad.read_to_end(&mut rest).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&rest),
        "+OK\r\n$1\r\n1\r\n-ERR Protocol error: invalid bulk length\r\n",
        "the replies in order, then the error, then the connection closed"
    );
    good.write_all(b"PING a b\r\nSELECT\r\n").unwrap();
    assert_eq!(
        read_replies(&mut good, 2),
        [
            "-ERR wrong number of arguments for 'ping' command\r\n",
            "-ERR wrong number of arguments for 'select' command\r\n"
        ]
    );
    good.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_replies(&mut good, 1), ["+PONG\r\n"]);
}

/// A pipeline far past the server's pending-request bound and its receive pause (6.6 MB of
/// SETs written while the replies are read) is served whole and in order: backpressure, not
/// refusal. Catches parsing that refuses past the bound, a receive never resumed after its
/// pause, a request lost at a pause.
#[test]
fn a_huge_pipeline_is_slowed_not_refused() {
    let dir = temp_dir("huge");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let n = 30_000;
    let mut writer = conn.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let value = "x".repeat(200);
        let mut request = Vec::new();
        for i in 0..n {
            request.extend_from_slice(format!("SET key{i} {value}\r\n").as_bytes());
        }
        writer.write_all(&request).unwrap();
        writer.write_all(b"GET key29999\r\n").unwrap();
    });
    let replies = read_replies(&mut conn, n + 1);
    sender.join().unwrap();
    assert!(replies[..n].iter().all(|r| r == "+OK\r\n"));
    assert_eq!(replies[n], format!("$200\r\n{}\r\n", "x".repeat(200)));
}

/// One value larger than the receive pause's threshold (6 MiB, past `QUERY_HIGH_BYTES`)
/// arrives whole and reads back. Catches a pause on unparsed bytes alone, which waited for
/// a request that could never complete.
#[test]
fn a_value_past_the_pause_threshold_arrives_whole() {
    let dir = temp_dir("bigvalue");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let value = vec![b'v'; 6 << 20];
    let mut writer = conn.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut request =
            format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).into_bytes();
        request.extend_from_slice(&value);
        request.extend_from_slice(b"\r\nSTRLEN big\r\n");
        writer.write_all(&request).unwrap();
    });
    assert_eq!(read_replies(&mut conn, 2), ["+OK\r\n", ":6291456\r\n"]);
    sender.join().unwrap();
}

/// Acknowledged writes survive a SIGKILL of the server (`--durability commit`, the default),
/// and a restart recovers them. Catches an acknowledgement before the write is durable.
#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = temp_dir("kill");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let mut request = Vec::new();
    for i in 0..300 {
        request.extend_from_slice(format!("SET k{i} v{i}\r\n").as_bytes());
    }
    conn.write_all(&request).unwrap();
    assert!(read_replies(&mut conn, 300).iter().all(|r| r == "+OK\r\n"));
    drop(served); // SIGKILL
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let mut request = Vec::new();
    for i in 0..300 {
        request.extend_from_slice(format!("GET k{i}\r\n").as_bytes());
    }
    conn.write_all(&request).unwrap();
    let replies = read_replies(&mut conn, 300);
    for (i, r) in replies.iter().enumerate() {
        let v = format!("v{i}");
        assert_eq!(
            r,
            &format!("${}\r\n{v}\r\n", v.len()),
            "key k{i} after SIGKILL"
        );
    }
}

/// One random request of a session: transactions (`MULTI`, `EXEC`, `DISCARD`, `WATCH`,
/// `UNWATCH`, nested and misplaced), `SELECT`, `PING`, `ECHO`, refused commands, and data
/// commands over three keys of this case.
fn random_request(rng: &mut rand::rngs::SmallRng, case: u32) -> Vec<String> {
    use rand::Rng;
    let key = format!("c{case}:k{}", rng.gen_range(0..3));
    let value = ["1", "abc", "-5", ""][rng.gen_range(0..4)].to_string();
    let other = format!("c{case}:k{}", rng.gen_range(0..3));
    let db = ["0", "1", "2", "16", "x", "-1"][rng.gen_range(0..6)];
    let float = ["0.1", "1.5e3", "x", "-2"][rng.gen_range(0..4)];
    let words: Vec<&str> = match rng.gen_range(0..34) {
        22 => vec!["dbsize"],
        23 => vec!["swapdb", db, ["0", "1", "2"][rng.gen_range(0..3)]],
        24 => vec!["move", &key, db],
        25 => vec!["copy", &key, &other],
        26 => vec!["copy", &key, &other, "db", db, "replace"],
        27 => vec!["flushdb", ["async", "sync", "bogus"][rng.gen_range(0..3)]],
        28 => vec!["incrbyfloat", &key, float],
        29 => vec!["dbsize", "x"],
        30 => vec!["swapdb", "0"],
        31 if rng.gen_range(0..4) == 0 => vec!["flushall"],
        31 => vec!["flushdb"],
        32 => vec!["type", &key],
        33 => vec!["keys", &key],
        0..=2 => vec!["multi"],
        3..=4 => vec!["exec"],
        5 => vec!["discard"],
        6 => vec!["watch", &key],
        7 => vec!["unwatch"],
        8 => vec!["select", ["0", "1", "2", "16", "x"][rng.gen_range(0..5)]],
        9 => vec!["ping"],
        10 => vec!["echo", &value],
        11 => vec!["nosuchcommand", &key],
        12 => vec!["get"],
        13 => vec!["ping", "a", "b"],
        14..=15 => vec!["set", &key, &value],
        16 => vec!["get", &key],
        17 => vec!["incr", &key],
        18 => vec!["del", &key],
        19 => vec!["append", &key, &value],
        20 => vec!["exists", &key],
        _ => vec!["getset", &key, &value],
    };
    words.iter().map(|w| w.to_string()).collect()
}

/// The same random sessions on redis-server 7.0 and on `tamer serve`, every reply compared
/// byte for byte: `MULTI`/`EXEC`/`DISCARD`/`WATCH` in and out of place, queued errors and
/// `EXECABORT`, `SELECT` inside a transaction, and the database commands (`SWAPDB`,
/// `FLUSHDB`, `FLUSHALL`, `MOVE`, `COPY ... DB`, `DBSIZE`) in and out of `MULTI`. Catches
/// any difference in the session commands' semantics, replies or error texts, a map change
/// not seen by the rest of its `EXEC` or by the next command, a count not following a move.
#[test]
fn sessions_reply_as_redis_does() {
    use rand::SeedableRng;
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed: u64 = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let redis = Redis::start().unwrap();
    let dir = temp_dir("sessions");
    let served = Served::start(&dir.0);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for case in 0..80 {
        let (mut theirs, mut ours) = (redis.connect(), served.connect());
        let mut history = Vec::new();
        for step in 0..60 {
            let args = random_request(&mut rng, case);
            send_command(&mut theirs, &args);
            send_command(&mut ours, &args);
            let want = read_replies(&mut theirs, 1);
            let got = read_replies(&mut ours, 1);
            history.push(args.join(" "));
            assert_eq!(
                got, want,
                "seed {seed} (TAMER_TEST_SEED), case {case} step {step}; the case: {history:?}"
            );
        }
    }
}

/// `WATCH` across two connections: a write by another client between `WATCH` and `EXEC`
/// aborts the transaction (a null reply), on both servers alike; an untouched watch commits.
/// Catches a watch that is not checked, or checked outside the transaction.
#[test]
fn watch_aborts_on_another_clients_write() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("watch");
    let served = Served::start(&dir.0);
    let script = |a: &mut TcpStream, b: &mut TcpStream| -> Vec<String> {
        let mut replies = Vec::new();
        let mut on = |conn: &mut TcpStream, words: &[&str]| {
            send_command(
                conn,
                &words.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
            );
            replies.extend(read_replies(conn, 1));
        };
        on(a, &["set", "w", "1"]);
        on(a, &["watch", "w"]);
        on(b, &["set", "w", "2"]);
        on(a, &["multi"]);
        on(a, &["incr", "w"]);
        on(a, &["exec"]);
        on(a, &["watch", "w"]);
        on(a, &["multi"]);
        on(a, &["incr", "w"]);
        on(a, &["exec"]);
        on(a, &["get", "w"]);
        replies
    };
    let theirs = script(&mut redis.connect(), &mut redis.connect());
    let ours = script(&mut served.connect(), &mut served.connect());
    assert_eq!(theirs[5], "*-1\r\n", "redis aborts");
    assert_eq!(ours, theirs);
}

/// Past `--maxclients` a new connection gets Redis's error and is closed; the others go on,
/// and a freed slot is usable again. Catches a limit not enforced, or a slot never freed.
#[test]
fn maxclients_refuses_the_extra_connection() {
    let dir = temp_dir("maxclients");
    let served = Served::start_with(&dir.0, &["--maxclients", "2"]);
    let mut a = served.connect();
    let mut b = served.connect();
    a.write_all(b"PING\r\n").unwrap();
    b.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_replies(&mut a, 1), ["+PONG\r\n"]);
    assert_eq!(read_replies(&mut b, 1), ["+PONG\r\n"]);
    let mut extra = served.connect();
    let mut refused = Vec::new();
    extra.read_to_end(&mut refused).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR max number of clients reached\r\n"
    );
    drop(b);
    // The slot frees once the server sees the close; retry for a while.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = served.connect();
        c.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).unwrap_or(0);
        if &buf[..n] == b"+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never reused");
        std::thread::sleep(Duration::from_millis(50));
    }
    a.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_replies(&mut a, 1), ["+PONG\r\n"]);
}

/// Seeded random bytes (RESP-ish and not) on 300 connections, each closed after: the server
/// never dies and answers a well-formed client afterwards. Catches a panic or a wedged
/// network thread on any malformed input (the parser's own property tests cover its replies).
#[test]
fn random_bytes_never_take_the_server_down() {
    use rand::{Rng, SeedableRng};
    let dir = temp_dir("fuzz");
    let served = Served::start(&dir.0);
    let seed = 7u64;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let alphabet = b"*$+-:\r\n0123456789-abcSETGET \"'\\x";
    for round in 0..300 {
        let mut conn = served.connect();
        conn.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let len = rng.gen_range(1..200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.gen_bool(0.9) {
                    alphabet[rng.gen_range(0..alphabet.len())]
                } else {
                    rng.gen()
                }
            })
            .collect();
        let _ = conn.write_all(&bytes);
        // End of input: the server answers what it can and closes.
        let _ = conn.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = conn.read_to_end(&mut sink);
        drop(conn);
        if round % 50 == 49 {
            let mut probe = served.connect();
            probe.write_all(b"PING\r\n").unwrap();
            assert_eq!(
                read_replies(&mut probe, 1),
                ["+PONG\r\n"],
                "seed {seed} round {round}"
            );
        }
    }
    let (code, rest) = served.terminate();
    assert_eq!(code, Some(0), "{rest}");
}

/// `HELLO`, `CLIENT` and RESP3 as redis-server answers them (the `HELLO` map's `server` and
/// `id` differ by design and are compared by shape). Catches a wrong RESP3 encoding after
/// `HELLO 3`, error texts, `CLIENT` name rules.
#[test]
fn hello_and_client_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("hello");
    let served = Served::start(&dir.0);
    let script: &[&[&str]] = &[
        &["hello", "4"],
        &["hello", "x"],
        &["hello", "2", "bogus"],
        &["client", "setname", "a b"],
        &["client", "setname", "me"],
        &["client", "getname"],
        &["client", "foo"],
        &["client"],
        &["auth", "x"],
        &["auth", "a", "b"],
        &["hello", "3"],
        &["get", "nokey"],
        &["mget", "nokey", "nokey"],
        &["set", "h", "1", "nx", "get"],
        &["client", "getname"],
        &["exec"],
        &["multi"],
        &["exec"],
        &["hello", "2"],
        &["get", "nokey"],
    ];
    // HELLO's map names the server and the client id: compared up to the id, the name
    // masked.
    let mask = |words: &[&str], reply: &str| {
        if words[0] != "hello" || !reply.starts_with(['%', '*']) {
            return reply.to_string();
        }
        reply
            .replace("$5\r\nredis\r\n", "$5\r\nSERVER\r\n")
            .replace("$5\r\ntamer\r\n", "$5\r\nSERVER\r\n")
            .split("$2\r\nid\r\n")
            .next()
            .unwrap()
            .to_string()
    };
    replay_against_redis(&redis, &served, script, mask);
}

/// Sends each request of `script` to redis-server and to tamer in turn and compares their
/// replies, each through `mask` (given the request) first.
fn replay_against_redis(
    redis: &Redis,
    served: &Served,
    script: &[&[&str]],
    mask: impl Fn(&[&str], &str) -> String,
) {
    let (mut theirs, mut ours) = (redis.connect(), served.connect());
    for words in script {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        send_command(&mut theirs, &args);
        send_command(&mut ours, &args);
        let (want, got) = (read_replies(&mut theirs, 1), read_replies(&mut ours, 1));
        assert_eq!(mask(words, &got[0]), mask(words, &want[0]), "{words:?}");
    }
}

/// `CLIENT` and other container commands inside `MULTI`, byte for byte against redis-server:
/// `CLIENT SETNAME/GETNAME` run in their places at `EXEC` (after `SELECT` in the same
/// transaction), an unknown subcommand or a subcommand's wrong arity is refused at queueing
/// and aborts `EXEC`. Mutations caught: `CLIENT` run inside the store transaction (it failed
/// as an unknown command), its reply out of place, subcommands not checked at queueing.
#[test]
fn client_inside_multi_replies_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("client-multi");
    let served = Served::start(&dir.0);
    let script: &[&[&str]] = &[
        &["multi"],
        &["client", "setname", "first"],
        &["select", "2"],
        &["client", "getname"],
        &["set", "k", "v"],
        &["client", "setname", "second"],
        &["client", "getname"],
        &["config", "get", "maxclients"],
        &["exec"],
        &["client", "getname"],
        &["multi"],
        &["client", "bogus"],
        &["client", "setname"],
        &["config", "nope"],
        &["get", "k"],
        &["exec"],
        &["get", "k"],
    ];
    replay_against_redis(&redis, &served, script, |_, reply| reply.to_string());
}

/// `INFO stats` `keyspace_hits`/`keyspace_misses` after the same commands on redis-server 7.0
/// and on tamer: the reads that count (GET, MGET, EXISTS, TOUCH, TYPE, the TTL family,
/// STRLEN, GETRANGE, GETEX, GETDEL, GETSET, SET ... GET, LCS, COPY's source, inside EXEC too,
/// an expired key a miss) and the writes that do not; `CONFIG RESETSTAT` zeroes them.
/// Mutations caught: a write counted, a read not counted, a hit and a miss swapped, a counter
/// RESETSTAT leaves.
#[test]
fn keyspace_hits_and_misses_count_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("lookups");
    let served = Served::start(&dir.0);
    let script: &[&[&str]] = &[
        &["config", "resetstat"],
        &["set", "a", "hello"],
        &["set", "b", "world", "get"],
        &["set", "a", "again", "get"],
        &["get", "a"],
        &["get", "nope"],
        &["mget", "a", "b", "nope", "a"],
        &["exists", "a", "nope", "b"],
        &["touch", "a", "nope"],
        &["type", "a"],
        &["type", "nope"],
        &["ttl", "a"],
        &["pttl", "nope"],
        &["expiretime", "a"],
        &["pexpiretime", "nope"],
        &["strlen", "a"],
        &["getrange", "nope", "0", "1"],
        &["getex", "a", "persist"],
        &["getset", "c", "1"],
        &["getdel", "c"],
        &["lcs", "a", "b"],
        &["copy", "a", "d"],
        &["copy", "nope", "e"],
        &["incr", "n"],
        &["append", "a", "x"],
        &["setrange", "f", "0", "x"],
        &["msetnx", "g", "1", "h", "2"],
        &["rename", "d", "dd"],
        &["expire", "dd", "100"],
        &["persist", "dd"],
        &["del", "dd", "nope"],
        &["keys", "a*"],
        &["dbsize"],
        &["multi"],
        &["get", "a"],
        &["exists", "nope"],
        &["set", "i", "1"],
        &["exec"],
        &["set", "short", "v", "px", "1"],
    ];
    replay_against_redis(&redis, &served, script, |_, reply| reply.to_string());
    std::thread::sleep(Duration::from_millis(20));
    let (mut theirs, mut ours) = (redis.connect(), served.connect());
    let counts = |conn: &mut TcpStream| {
        send_command(conn, &["get".to_string(), "short".to_string()]);
        read_replies(conn, 1);
        send_command(conn, &["info".to_string(), "stats".to_string()]);
        let info = read_replies(conn, 1).remove(0);
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| panic!("no {name} in INFO stats"))
        };
        (field("keyspace_hits:"), field("keyspace_misses:"))
    };
    let (want, got) = (counts(&mut theirs), counts(&mut ours));
    assert_eq!(got, want, "(keyspace_hits, keyspace_misses)");
    assert_ne!(want.0, "0", "the script reads keys that exist");
    for conn in [&mut theirs, &mut ours] {
        send_command(conn, &["config".to_string(), "resetstat".to_string()]);
        read_replies(conn, 1);
    }
    let zero = |conn: &mut TcpStream| {
        send_command(conn, &["info".to_string(), "stats".to_string()]);
        let info = read_replies(conn, 1).remove(0);
        info.lines()
            .filter(|l| l.starts_with("keyspace_"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(zero(&mut ours), zero(&mut theirs));
}

/// With `--requirepass`, nothing but `AUTH`, `HELLO` and `QUIT` runs before the password;
/// a wrong one is refused; `HELLO 3 AUTH default <pass>` authenticates and switches at once.
/// Beyond loopback without a password the server refuses to start. Catches a command that
/// slips past the check, a password compared wrongly, protected mode off by default.
#[test]
fn requirepass_and_protected_mode() {
    let dir = temp_dir("auth");
    let served = Served::start_with(&dir.0, &["--requirepass", "sekrit"]);
    let mut c = served.connect();
    c.write_all(b"GET a\r\nAUTH wrong\r\nAUTH default sekrit\r\nSET a 1\r\n")
        .unwrap();
    assert_eq!(
        read_replies(&mut c, 4),
        [
            "-NOAUTH Authentication required.\r\n",
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
            "+OK\r\n",
            "+OK\r\n"
        ]
    );
    let mut d = served.connect();
    d.write_all(b"HELLO 3 AUTH default sekrit\r\nGET nokey\r\n")
        .unwrap();
    let replies = read_replies(&mut d, 2);
    assert!(replies[0].starts_with("%7\r\n"), "{replies:?}");
    assert_eq!(replies[1], "_\r\n");
    let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .args(["serve", "--bind", "0.0.0.0", "--port", "0", "--dir"])
        .arg(&dir.0)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--requirepass"));
}

/// `INFO`, `TIME` and `COMMAND COUNT`/`LIST`, alone and inside `MULTI`: the fields clients
/// read, counters that move, a list as long as the count. Catches a section left out, a
/// counter that never moves, these commands unknown inside `EXEC`.
#[test]
fn info_time_and_command() {
    let dir = temp_dir("info");
    let served = Served::start(&dir.0);
    let mut c = served.connect();
    let info = |c: &mut TcpStream| {
        c.write_all(b"INFO\r\n").unwrap();
        read_replies(c, 1).remove(0)
    };
    let first = info(&mut c);
    for field in [
        "redis_version:7.0.15",
        "redis_mode:standalone",
        "connected_clients:1",
    ] {
        assert!(first.contains(field), "{field} in {first}");
    }
    let commands = |text: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.starts_with("total_commands_processed:"))
            .expect("the counter");
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    };
    let second = info(&mut c);
    assert_eq!(commands(&second), commands(&first) + 1);
    c.write_all(b"COMMAND COUNT\r\nCOMMAND LIST\r\nTIME\r\n")
        .unwrap();
    let replies = read_replies(&mut c, 3);
    let count: usize = replies[0].trim_start_matches(':').trim().parse().unwrap();
    // As Redis's, the list has the subcommands too; the count only the commands.
    let listed: Vec<&str> = replies[1].split("\r\n").skip(2).step_by(2).collect();
    assert_eq!(
        listed
            .iter()
            .filter(|n| !n.is_empty() && !n.contains('|'))
            .count(),
        count,
        "{}",
        replies[1]
    );
    assert!(listed.contains(&"config|get"), "{}", replies[1]);
    assert!(replies[1].contains("$3\r\nset\r\n") && replies[1].contains("$4\r\nexec\r\n"));
    let time: Vec<&str> = replies[2].split("\r\n").collect();
    assert_eq!(time[0], "*2");
    let secs: u64 = time[2].parse().unwrap();
    assert!(secs > 1_700_000_000, "{secs}");
    c.write_all(b"MULTI\r\nTIME\r\nINFO clients\r\nEXEC\r\n")
        .unwrap();
    let replies = read_replies(&mut c, 4);
    assert!(replies[3].starts_with("*2\r\n*2\r\n"), "{}", replies[3]);
    assert!(replies[3].contains("connected_clients:1"), "{}", replies[3]);
}

/// Sends `batches` pipelines of `depth` GETs on each of `conns` connections at once and
/// returns (replies, `-BUSY` replies).
fn flood(served: &Served, conns: usize, batches: usize, depth: usize) -> (usize, usize) {
    let threads: Vec<_> = (0..conns)
        .map(|_| {
            let mut conn = served.connect();
            std::thread::spawn(move || {
                let (mut replies, mut busy) = (0, 0);
                let request = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n".repeat(depth);
                for _ in 0..batches {
                    conn.write_all(&request).unwrap();
                    for reply in read_replies(&mut conn, depth) {
                        replies += 1;
                        if reply.starts_with("-BUSY") {
                            busy += 1;
                        } else {
                            assert_eq!(reply, "$5\r\nvalue\r\n", "a GET's reply");
                        }
                    }
                }
                (replies, busy)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .fold((0, 0), |(r, b), (r2, b2)| (r + r2, b + b2))
}

/// Admission: with an objective far below what queued work takes, requests past the bound
/// get `-BUSY` at once, every request gets exactly one reply in order, and the others are
/// served; without an objective nothing is refused. Mutations caught: the decision ignored
/// (no `-BUSY`), a refused batch's replies dropped or duplicated (the counts differ), a
/// refusal that keeps the connection's session (later requests never run: no values).
#[test]
fn admission_refuses_past_the_objective_with_busy() {
    let dir = temp_dir("admission");
    for (slo, expect_busy) in [(Some("5"), true), (None, false)] {
        let mut extra = vec!["--durability", "none"];
        if let Some(slo) = slo {
            extra.extend(["--slo-us", slo]);
        }
        let served = Served::start_with(&dir.0, &extra);
        let mut conn = served.connect();
        conn.write_all(b"SET key value\r\n").unwrap();
        assert_eq!(read_replies(&mut conn, 1), ["+OK\r\n"]);
        let (conns, batches, depth) = (8, 20, 200);
        let (replies, busy) = flood(&served, conns, batches, depth);
        assert_eq!(replies, conns * batches * depth);
        assert!(busy < replies, "some requests are served: {busy} refused");
        assert_eq!(busy > 0, expect_busy, "slo {slo:?}: {busy} refused");
        conn.write_all(b"INFO tamer\r\n").unwrap();
        let info = read_replies(&mut conn, 1).remove(0);
        let field = |name: &str| -> u64 {
            let line = info.lines().find(|l| l.starts_with(name)).unwrap_or("");
            line.split(':')
                .nth(1)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(u64::MAX)
        };
        assert_eq!(field("busy_replies:"), busy as u64, "{info}");
        assert_eq!(field("busy_replies_slo:"), busy as u64, "{info}");
    }
}

/// `--dispatch partitioned` serves as `shared` does (each connection on one core), and a bad
/// value is refused at startup. Mutations caught: partitioned jobs sent to a core that does
/// not exist (nothing is served), the flag ignored or accepted with any value.
#[test]
fn partitioned_dispatch_serves_and_bad_flags_are_refused() {
    let dir = temp_dir("partitioned");
    let served = Served::start_with(&dir.0, &["--dispatch", "partitioned", "--cores", "2"]);
    let mut conn = served.connect();
    conn.write_all(b"SET key value\r\n").unwrap();
    assert_eq!(read_replies(&mut conn, 1), ["+OK\r\n"]);
    assert_eq!(flood(&served, 5, 5, 50), (1_250, 0));
    drop(served);
    for bad in [
        &["--dispatch", "random"][..],
        &["--prefetch", "maybe"],
        &["--slo-us", "soon"],
        &["--cores", "300"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
            .args(["serve", "--port", "0", "--dir"])
            .arg(&dir.0)
            .args(bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(bad[0].trim_start_matches('-')),
            "{bad:?}: {err}"
        );
    }
}

/// Debian's Python with its `python3-redis` package (scripts/install-peers.sh).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

fn have_redis_py() -> bool {
    let found = Command::new(SYSTEM_PYTHON)
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "redis-py is missing (scripts/install-peers.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: redis-py (python3-redis) is not installed");
    }
    found
}

/// redis-py, unchanged: commands, errors as `ResponseError`, pipelines with and without
/// `MULTI`, `WATCH` transactions from four threads (no increment lost), binary keys and
/// values, a second database (tests/py/redis_py_client.py). Mutations caught: any reply
/// redis-py cannot parse or maps to a different value, a lost update under `WATCH`, `SELECT`
/// not isolating databases.
#[test]
fn redis_py_works_unchanged() {
    if !have_redis_py() {
        return;
    }
    let dir = temp_dir("redis-py");
    let served = Served::start(&dir.0);
    common::run_client_script(SYSTEM_PYTHON, "redis_py_client.py", served.port);
}

/// redis-benchmark, unchanged, with 20 clients and pipelines of 8: it finishes with every
/// request answered, and the keys it wrote are there. Mutations caught: a reply that stalls
/// or confuses redis-benchmark (it hangs or reports errors), SETs acknowledged and not stored.
#[test]
fn redis_benchmark_runs_against_it() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let dir = temp_dir("redis-benchmark");
    let served = Served::start(&dir.0);
    let out = Command::new("redis-benchmark")
        .args(["-p", &served.port.to_string()])
        .args(["-t", "set,get,incr,mset", "-n", "20000", "-r", "1000"])
        .args(["-c", "20", "-P", "8", "-q", "--csv"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for test in ["SET", "GET", "INCR", "MSET"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("\"{test}")))
            .unwrap_or_else(|| panic!("no {test} line in {text}"));
        let rps: f64 = line
            .split(',')
            .nth(1)
            .unwrap()
            .trim_matches('"')
            .parse()
            .unwrap();
        assert!(rps > 0.0, "{line}");
    }
    let value = redis_cli(served.port, &["GET", "key:000000000042"]);
    assert_eq!(
        value.trim().len(),
        3,
        "redis-benchmark's 3-byte value: {value:?}"
    );
}
/// One server-command request per item, for the differential test below: every reply is
/// comparable between redis-server 7.0 and tamer (errors, settings both have alike, empty
/// logs once both slow logs are off).
const ADMIN_REQUESTS: &[&str] = &[
    "config set maxclients abc",
    "config set maxclients 0",
    "config set databases 4",
    "config set foo 1",
    "config set maxclients 10 maxclients 11",
    "config set maxclients",
    "config set requirepass a b",
    "config set slowlog-max-len 7",
    "config set slowlog-max-len 9 maxclients x",
    "config get slowlog-max-len",
    "config set slowlog-log-slower-than x",
    "config set latency-monitor-threshold -1",
    "config get maxclients",
    "config get databases",
    "config get timeout",
    "config get appendonly",
    "config get nosuch*",
    "config get slowlog-log-slower-than",
    "config get",
    "config resetstat x",
    "config foo",
    "slowlog get x",
    "slowlog get -2",
    "slowlog foo",
    "slowlog len",
    "slowlog get",
    "slowlog get 0",
    "slowlog reset",
    "slowlog len x",
    "latency latest",
    "latency history command",
    "latency reset",
    "latency reset a b",
    "latency history",
    "latency foo",
    "latency latest x",
    "latency histogram",
    "latency histogram get nosuch config",
    "info latencystats",
    "config set latency-tracking-info-percentiles 50 abc",
    "config set latency-tracking-info-percentiles 101",
    "config set latency-tracking-info-percentiles 99.9 50.0 1e1",
    "config get latency-tracking-info-percentiles",
    "config set latency-tracking maybe",
    "config get latency-tracking",
    "memory usage",
    "memory foo",
    "memory usage nokey",
    "memory usage nokey samples x",
    "memory usage nokey samples -1",
    "memory usage nokey samples 5",
    "memory usage a b c d",
    "lastsave x",
    "reset x",
    "shutdown abort",
    "shutdown foo",
    "shutdown save nosave",
    "shutdown now abort",
    "client kill 1.2.3.4:5",
    "client kill id x",
    "client kill id 0",
    "client kill skipme maybe",
    "client kill user nobody",
    "client kill foo bar",
    "client kill id 999999",
    "client kill laddr 1.1.1.1:1",
    "client kill",
    "client no-evict maybe",
    "client no-evict on",
    "client no-evict off",
    "client no-evict",
    "client list type foo",
    "client list id x",
    "client list foo",
    "client list id 99999",
    "client list type master",
    "client info x",
    "reset",
];

/// Random sequences of the server commands above on redis-server 7.0 and on `tamer serve`,
/// in RESP2 and RESP3, every reply compared byte for byte. Catches a different error text,
/// arity check, reply type (RESP3 maps and nulls) or a CONFIG SET that is not all-or-none.
#[test]
fn admin_commands_reply_as_redis_does() {
    use rand::{Rng, SeedableRng};
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed: u64 = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let redis = Redis::start().unwrap();
    let dir = temp_dir("admin-diff");
    let served = Served::start(&dir.0);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for case in 0..20 {
        let (mut theirs, mut ours) = (redis.connect(), served.connect());
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        // Latency distributions are timings: off (and emptied) for the random sequence.
        let mut setup = vec![
            "config set slowlog-log-slower-than -1",
            "config set latency-tracking no",
            "config resetstat",
        ];
        if case % 2 == 1 {
            setup.push("hello 3");
        }
        for request in setup {
            send_command(&mut theirs, &words(request));
            send_command(&mut ours, &words(request));
            read_replies(&mut theirs, 1);
            read_replies(&mut ours, 1);
        }
        let mut history = Vec::new();
        for step in 0..40 {
            let request = ADMIN_REQUESTS[rng.gen_range(0..ADMIN_REQUESTS.len())];
            send_command(&mut theirs, &words(request));
            send_command(&mut ours, &words(request));
            history.push(request);
            let want = read_replies(&mut theirs, 1);
            let got = read_replies(&mut ours, 1);
            assert_eq!(
                got, want,
                "seed {seed} (TAMER_TEST_SEED), case {case} step {step}: {history:?}"
            );
        }
    }
}

/// `--config tamer.toml`: its settings apply, a flag overrides the file, and an unknown key
/// or a bad value stops the start with an error naming it; the slow log keeps
/// `slowlog-max-len` entries, the newest first. Catches a file not read, flags not
/// overriding it, bad files accepted, or a slow log past its bound.
#[test]
fn config_file_settings_and_slowlog_bound() {
    let dir = temp_dir("config-file");
    let file = dir.0.join("tamer.toml");
    std::fs::write(&file, "port = 1\nslowlog-max-len = 3\nmaxclients = 50\n").unwrap();
    // --port 0 (Served's) overrides the file's port 1.
    let served = Served::start_with(&dir.0, &["--config", file.to_str().unwrap()]);
    let mut c = served.connect();
    let cmds = "CONFIG GET slowlog-max-len\r\nCONFIG GET maxclients\r\n\
                CONFIG SET slowlog-log-slower-than 0\r\n";
    c.write_all(cmds.as_bytes()).unwrap();
    let replies = read_replies(&mut c, 3);
    assert_eq!(replies[0], "*2\r\n$15\r\nslowlog-max-len\r\n$1\r\n3\r\n");
    assert_eq!(replies[1], "*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n");
    for i in 0..10 {
        c.write_all(format!("echo m{i}\r\n").as_bytes()).unwrap();
    }
    read_replies(&mut c, 10);
    c.write_all(b"SLOWLOG LEN\r\nSLOWLOG GET -1\r\n").unwrap();
    let replies = read_replies(&mut c, 2);
    assert_eq!(replies[0], ":3\r\n");
    // The newest three: SLOWLOG LEN itself, then the last two ECHOs.
    let log = &replies[1];
    assert!(log.starts_with("*3\r\n"), "{log}");
    assert!(log.contains("$7\r\nSLOWLOG\r\n$3\r\nLEN\r\n"), "{log}");
    assert!(
        log.contains("$2\r\nm9\r\n") && log.contains("$2\r\nm8\r\n"),
        "{log}"
    );
    assert!(!log.contains("$2\r\nm7\r\n"), "{log}");
    drop(served);
    for (text, want) in [
        ("nosuch = 1\n", "unknown setting 'nosuch'"),
        (
            "port = \"x\"\n",
            "setting 'port' = \"x\": argument couldn't be parsed",
        ),
        ("durability = \"sometimes\"\n", "commit, periodic, none"),
        ("port = \n", "tamer.toml"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
            .args(["serve", "--port", "0", "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// `CLIENT KILL ID` and the old `ip:port` form close the other connection (it reads the end
/// of its stream), `CLIENT LIST` shows both with their names and last commands, and a client
/// killing itself gets its reply first. Catches a kill that only replies, a registry that
/// misses connections or keeps closed ones.
#[test]
fn client_kill_closes_the_other_connection() {
    let dir = temp_dir("client-kill");
    let served = Served::start(&dir.0);
    let (mut a, mut b, mut c) = (served.connect(), served.connect(), served.connect());
    // Each served once, so the network thread has accepted (and registered) all three.
    for conn in [&mut b, &mut c] {
        conn.write_all(b"PING\r\n").unwrap();
        assert_eq!(read_replies(conn, 1), ["+PONG\r\n"]);
    }
    a.write_all(b"CLIENT SETNAME victim\r\nCLIENT ID\r\n")
        .unwrap();
    let id_a = read_replies(&mut a, 2)[1]
        .trim_start_matches(':')
        .trim()
        .to_string();
    b.write_all(b"CLIENT LIST\r\n").unwrap();
    let list = read_replies(&mut b, 1).remove(0);
    assert_eq!(list.matches("id=").count(), 3, "{list}");
    let line = list
        .lines()
        .find(|l| l.contains("name=victim"))
        .expect("a's line");
    assert!(
        line.contains(&format!("id={id_a} ")) && line.contains("cmd=client|id"),
        "{line}"
    );
    b.write_all(format!("CLIENT KILL ID {id_a}\r\n").as_bytes())
        .unwrap();
    assert_eq!(read_replies(&mut b, 1), [":1\r\n"]);
    let mut buf = [0u8; 16];
    assert_eq!(
        a.read(&mut buf).unwrap_or(0),
        0,
        "the killed connection is closed"
    );
    // The old form, by address, from CLIENT INFO.
    c.write_all(b"CLIENT INFO\r\n").unwrap();
    let info = read_replies(&mut c, 1).remove(0);
    let addr = info
        .split("addr=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    b.write_all(format!("CLIENT KILL {addr}\r\nCLIENT LIST\r\n").as_bytes())
        .unwrap();
    let replies = read_replies(&mut b, 2);
    assert_eq!(replies[0], "+OK\r\n");
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0, "killed by address");
    assert_eq!(replies[1].matches("id=").count(), 1, "{}", replies[1]);
    b.write_all(b"CLIENT KILL SKIPME no ID 999999\r\nCLIENT KILL SKIPME no\r\n")
        .unwrap();
    assert_eq!(read_replies(&mut b, 2), [":0\r\n", ":1\r\n"]);
    assert_eq!(
        b.read(&mut buf).unwrap_or(0),
        0,
        "killed itself after the reply"
    );
}

/// `SHUTDOWN` closes the store cleanly and the process exits 0; a restart finds the data;
/// `SHUTDOWN` inside `MULTI` and `SHUTDOWN ABORT` are refused. Catches a shutdown that
/// kills without closing the store, exits non-zero, or runs from inside a transaction.
#[test]
fn shutdown_closes_the_store_and_exits_0() {
    let dir = temp_dir("shutdown");
    let mut served = Served::start(&dir.0);
    let mut c = served.connect();
    c.write_all(b"SET k v\r\nMULTI\r\nSHUTDOWN\r\nEXEC\r\nSHUTDOWN ABORT\r\nLASTSAVE\r\n")
        .unwrap();
    let replies = read_replies(&mut c, 6);
    assert_eq!(
        replies[2],
        "-ERR Command not allowed inside a transaction\r\n"
    );
    assert!(replies[3].starts_with("-EXECABORT"), "{}", replies[3]);
    assert_eq!(replies[4], "-ERR No shutdown in progress.\r\n");
    let lastsave: u64 = replies[5].trim_start_matches(':').trim().parse().unwrap();
    assert!(lastsave > 1_700_000_000, "{lastsave}");
    // The record of k: header 16, store key 4 + 1, value 12 + 1 = 34 bytes, padded to 48.
    assert_eq!(ask(&mut c, "MEMORY USAGE k"), ":48\r\n");
    c.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    let status = served.child.wait().unwrap();
    let mut rest = String::new();
    served.out.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains("closed cleanly"), "{rest}");
    let again = Served::start(&dir.0);
    let mut c = again.connect();
    c.write_all(b"GET k\r\n").unwrap();
    assert_eq!(read_replies(&mut c, 1), ["$1\r\nv\r\n"]);
}

/// An HTTP GET of `path` on `addr`: the status line and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// A sample's value in a Prometheus exposition (0 when absent).
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// `--metrics-addr`: a scrape answers Prometheus text whose counters move with the commands
/// run (per-command counts, the latency histogram's count, failures, the store's cache and
/// commits, clients); another path is a 404. Catches a metric not wired to its counter, a
/// histogram whose buckets disagree with its count, or an endpoint that never answers.
#[test]
fn metrics_endpoint_counters_move() {
    let dir = temp_dir("metrics");
    let served = Served::start_with(&dir.0, &["--metrics-addr", "127.0.0.1:0"]);
    let addr = served
        .line
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no metrics address in {}", served.line))
        .to_string();
    let (status, before) = http_get(&addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let mut c = served.connect();
    for i in 0..5 {
        c.write_all(format!("SET k{i} v\r\n").as_bytes()).unwrap();
    }
    c.write_all(b"INCR k0\r\nGET k0\r\n").unwrap();
    read_replies(&mut c, 7);
    let (_, after) = http_get(&addr, "/metrics");
    let moved = |series: &str| sample(&after, series) - sample(&before, series);
    assert_eq!(moved("tamer_commands_total{cmd=\"set\"}"), 5.0, "{after}");
    assert_eq!(moved("tamer_commands_total{cmd=\"incr\"}"), 1.0);
    assert_eq!(moved("tamer_commands_failed_total{cmd=\"incr\"}"), 1.0);
    assert_eq!(
        moved("tamer_command_duration_seconds_count{cmd=\"set\"}"),
        5.0
    );
    let inf = "tamer_command_duration_seconds_bucket{cmd=\"set\",le=\"+Inf\"}";
    assert_eq!(sample(&after, inf), 5.0);
    let commit_wait = "tamer_command_wait_seconds_total{cmd=\"set\",wait=\"commit\"}";
    assert!(
        moved(commit_wait) > 0.0,
        "durable SETs wait for commits: {after}"
    );
    assert!(after.contains("tamer_command_wait_seconds_total{cmd=\"set\",wait=\"device\"}"));
    assert!(moved("tamer_commits_staged_total") >= 5.0, "{after}");
    assert!(moved("tamer_cache_hits_total") > 0.0);
    assert!(moved("tamer_admitted_requests_total") >= 1.0);
    assert_eq!(sample(&after, "tamer_connected_clients"), 1.0);
    assert_eq!(moved("tamer_error_replies_total"), 1.0);
    assert_eq!(http_get(&addr, "/other").0, "HTTP/1.1 404 Not Found");
}

/// `COMMAND INFO` and `COMMAND DOCS` of every served command that is not a container (whose
/// subcommands tamer serves only in part), and of unknown names, on redis-server 7.0 and
/// `tamer serve`, RESP2 and RESP3, compared byte for byte. Catches metadata that differs from
/// Redis's (arity, flags, key specs, ACL categories, arguments) or a wrong reply type.
#[test]
fn command_info_and_docs_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("command-meta");
    let served = Served::start(&dir.0);
    let (mut theirs, mut ours) = (redis.connect(), served.connect());
    ours.write_all(b"COMMAND LIST\r\n").unwrap();
    let list = read_replies(&mut ours, 1).remove(0);
    let containers = [
        "acl", "client", "command", "config", "function", "latency", "memory", "object", "pubsub",
        "script", "slowlog",
    ];
    let names: Vec<String> = list
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .filter(|n| !containers.contains(n))
        .map(String::from)
        .collect();
    assert!(names.len() > 40, "{names:?}");
    for protocol in ["2", "3"] {
        for conn in [&mut theirs, &mut ours] {
            send_command(conn, &["hello", protocol]);
            read_replies(conn, 1);
        }
        for name in names.iter().chain([&"nosuch".to_string()]) {
            for sub in ["info", "docs"] {
                let args = ["command".to_string(), sub.to_string(), name.clone()];
                send_command(&mut theirs, &args);
                send_command(&mut ours, &args);
                let want = read_replies(&mut theirs, 1);
                let got = read_replies(&mut ours, 1);
                assert_eq!(got, want, "COMMAND {sub} {name}, RESP{protocol}");
            }
        }
    }
}

/// Sends `request` (inline) on `conn` and reads its one reply.
fn ask(conn: &mut TcpStream, request: &str) -> String {
    conn.write_all(format!("{request}\r\n").as_bytes()).unwrap();
    read_replies(conn, 1).remove(0)
}

/// `CONFIG SET` changes live settings for the running server: `maxclients` lowered refuses
/// the next connection, `requirepass` set makes new connections authenticate (connections
/// already in stay in; `RESET` logs out, as in Redis), and a refused set changes nothing.
/// Catches a setting stored but not read where it applies.
#[test]
fn config_set_changes_live_settings() {
    let dir = temp_dir("config-live");
    let served = Served::start(&dir.0);
    let mut a = served.connect();
    assert_eq!(ask(&mut a, "CONFIG SET maxclients 2"), "+OK\r\n");
    let mut b = served.connect();
    assert_eq!(ask(&mut b, "PING"), "+PONG\r\n");
    let mut extra = served.connect();
    let mut refused = Vec::new();
    extra.read_to_end(&mut refused).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR max number of clients reached\r\n"
    );
    let set = "CONFIG SET maxclients 100 requirepass pw databases 4";
    assert!(ask(&mut a, set).contains("can't set immutable config"));
    assert_eq!(
        ask(&mut a, "CONFIG GET maxclients"),
        "*2\r\n$10\r\nmaxclients\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        ask(&mut a, "CONFIG SET maxclients 100 requirepass pw"),
        "+OK\r\n"
    );
    drop(b);
    let mut c = served.connect();
    assert_eq!(ask(&mut c, "GET k"), "-NOAUTH Authentication required.\r\n");
    assert_eq!(ask(&mut a, "GET k"), "$-1\r\n", "already in: stays in");
    assert_eq!(ask(&mut c, "AUTH pw"), "+OK\r\n");
    assert_eq!(ask(&mut c, "GET k"), "$-1\r\n");
    assert_eq!(ask(&mut c, "RESET"), "+RESET\r\n");
    assert_eq!(ask(&mut c, "GET k"), "-NOAUTH Authentication required.\r\n");
}

/// Reads what `fd` (a pty's master) has for `wait`.
/// Reads what `fd` shows until it contains `until` or `wait` has passed.
fn read_for(fd: i32, until: &str, wait: Duration) -> String {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    // Bounded by the deadline: each pass polls at most 50 ms.
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains(until) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one live pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a live buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        got.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// redis-cli, interactive (on a pseudo-terminal), shows its argument hints for tamer's
/// commands: it builds them from `COMMAND DOCS` at start (counted as `command|docs`). Catches a
/// `COMMAND DOCS` reply redis-cli cannot read (it then shows no hints for commands it does
/// not know itself) or that it never asks for.
#[test]
fn redis_cli_shows_hints() {
    use std::os::fd::FromRawFd;
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let dir = temp_dir("hints");
    let served = Served::start(&dir.0);
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors; the name pointer and termios may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: `slave` is a new descriptor we own; each Stdio gets its own duplicate.
    let tty = |fd: i32| unsafe { Stdio::from_raw_fd(libc::dup(fd)) };
    let mut cli = Command::new("redis-cli")
        .args(["-p", &served.port.to_string()])
        .stdin(tty(slave))
        .stdout(tty(slave))
        .stderr(tty(slave))
        .spawn()
        .unwrap();
    // SAFETY: closes our copy of the slave side.
    unsafe { libc::close(slave) };
    // Generous bounds: redis-cli's start and its COMMAND DOCS can be slow on a loaded machine.
    let prompt = read_for(master, "> ", Duration::from_secs(20));
    assert!(prompt.contains("> "), "no prompt: {prompt:?}");
    let typed = b"getex ";
    // SAFETY: writes a live buffer to the master side.
    unsafe { libc::write(master, typed.as_ptr().cast(), typed.len()) };
    let hint = "key [EX seconds|PX milliseconds|EXAT unix-time-seconds";
    let shown = read_for(master, hint, Duration::from_secs(10));
    let _ = cli.kill();
    let _ = cli.wait();
    // SAFETY: closes the master side we own.
    unsafe { libc::close(master) };
    assert!(shown.contains(hint), "no hint: {shown:?}");
    let mut c = served.connect();
    let stats = ask(&mut c, "INFO commandstats");
    let line = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_command|docs:"))
        .unwrap_or_else(|| panic!("redis-cli never sent COMMAND DOCS: {stats}"));
    assert!(
        line.starts_with("cmdstat_command|docs:calls=1,") && line.ends_with("failed_calls=0"),
        "{line}"
    );
}

/// Seeded random glob patterns (stars, `?`, classes with ranges and `^`, escapes, unclosed
/// classes) matched against a set of names by redis-server 7.0's `KEYS` and by tamer's
/// `glob::matches_iterative` (which `CONFIG GET` uses, without its case folding here), the matches
/// compared. Catches any divergence from Redis's `stringmatchlen`.
#[test]
fn glob_matches_as_redis_keys_does() {
    use rand::{Rng, SeedableRng};
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed: u64 = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let redis = Redis::start().unwrap();
    let mut conn = redis.connect();
    let mut names: Vec<String> = tamer_server::config::SETTINGS
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    names.extend(["a*b", "a?b", "a[b", "a]b", "a\\b", "a-b", "ab", "", "x^y"].map(String::from));
    names.retain(|n| !n.is_empty());
    for name in &names {
        send_command(&mut conn, &["set".into(), name.clone(), "1".into()]);
        read_replies(&mut conn, 1);
    }
    let pieces = [
        "*", "?", "[a-m]", "[^a-m]", "[m-a]", "[abc", "\\*", "\\", "a", "b", "m", "-", "s", "e",
        "[]", "[^]", "[\\]]", "x", "^", "ax", "ma", "slowlog", "max",
    ];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for case in 0..2_000 {
        let pattern: String = (0..rng.gen_range(1..5))
            .map(|_| pieces[rng.gen_range(0..pieces.len())])
            .collect();
        send_command(&mut conn, &["keys".into(), pattern.clone()]);
        let reply = read_replies(&mut conn, 1).remove(0);
        let mut want: Vec<&str> = reply
            .split("\r\n")
            .skip(2)
            .step_by(2)
            .filter(|s| !s.is_empty())
            .collect();
        want.sort_unstable();
        let mut got: Vec<&str> = names
            .iter()
            .filter(|n| {
                tamer_server::glob::matches_iterative(pattern.as_bytes(), n.as_bytes(), false)
            })
            .map(String::as_str)
            .collect();
        got.sort_unstable();
        assert_eq!(
            got, want,
            "seed {seed} (TAMER_TEST_SEED), case {case}: {pattern:?}"
        );
    }
}

/// The same commands on redis-server 7.0 and `tamer serve` after `CONFIG RESETSTAT`, then
/// `INFO commandstats` and `INFO errorstats` compared with the times left out: calls,
/// rejected calls (arity) and failed calls per command and subcommand (`config|get`), errors
/// by prefix. Catches a call counted under another name, a rejection counted as a failure,
/// an unknown command or subcommand counted as a call, or an error prefix miscounted.
#[test]
fn commandstats_count_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("commandstats");
    let served = Served::start(&dir.0);
    let requests = [
        "config resetstat",
        "set a 1",
        "get a",
        "incr a",
        "set s x",
        "incr s",
        "get",
        "config get maxclients",
        "config foo",
        "config get",
        "client list",
        "client info",
        "ping",
        "echo x",
        "nosuch",
        "lastsave",
        "memory usage a",
        "slowlog len",
        "latency latest",
        "command count",
        "getrange a x 1",
        "mget a s nokey",
        "multi",
        "set a 2",
        "incr s",
        "get a",
        "exec",
        "multi",
        "get",
        "exec",
    ];
    // Redis lists in its hash table's order: both sorted.
    let strip = |text: String| -> Vec<String> {
        text.split("\r\n")
            .filter(|l| l.starts_with("cmdstat_") || l.starts_with("errorstat_"))
            .map(|l| {
                let (name, fields) = l.split_once(':').unwrap();
                let kept: Vec<&str> = fields
                    .split(',')
                    .filter(|f| !f.starts_with("usec"))
                    .collect();
                format!("{name}:{}", kept.join(","))
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let mut replies = Vec::new();
    for conn in [&mut redis.connect(), &mut served.connect()] {
        for request in requests {
            ask(conn, request);
        }
        let stats = ask(conn, "INFO commandstats");
        let errors = ask(conn, "INFO errorstats");
        replies.push((strip(stats), strip(errors)));
    }
    assert!(replies[0].0.len() > 10, "{:?}", replies[0]);
    assert_eq!(
        replies[1], replies[0],
        "tamer's (left) vs redis-server's (right)"
    );
}

/// With `latency-monitor-threshold 1` and `slowlog-log-slower-than 1000`, a command of more
/// than a millisecond (`LCS` of two 4,000-byte strings: 16 M table cells) is a `command`
/// latency event (`LATEST`, `HISTORY`) and a slow-log entry with its arguments; `LATENCY
/// RESET` forgets it. Catches a monitor not fed from the request path or a threshold unread.
#[test]
fn latency_monitor_and_slowlog_see_a_slow_command() {
    use rand::{Rng, SeedableRng};
    let dir = temp_dir("latency");
    let served = Served::start(&dir.0);
    let mut c = served.connect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for key in ["a", "b"] {
        let value: String = (0..4_000)
            .map(|_| rng.gen_range(b'a'..b'e') as char)
            .collect();
        send_command(&mut c, &["set".into(), key.into(), value]);
        assert_eq!(read_replies(&mut c, 1), ["+OK\r\n"]);
    }
    assert_eq!(ask(&mut c, "LATENCY LATEST"), "*0\r\n", "off by default");
    let set = "CONFIG SET latency-monitor-threshold 1 slowlog-log-slower-than 1000";
    assert_eq!(ask(&mut c, set), "+OK\r\n");
    assert_eq!(ask(&mut c, "SLOWLOG RESET"), "+OK\r\n");
    assert!(ask(&mut c, "LCS a b LEN").starts_with(':'));
    let latest = ask(&mut c, "LATENCY LATEST");
    assert!(
        latest.starts_with("*1\r\n*4\r\n$7\r\ncommand\r\n:"),
        "{latest}"
    );
    let history = ask(&mut c, "LATENCY HISTORY command");
    // One sample per second with a slow command: the LCS's at least.
    assert!(
        !history.starts_with("*0") && history.contains("*2\r\n:"),
        "{history}"
    );
    let log = ask(&mut c, "SLOWLOG GET");
    assert!(
        log.contains("$3\r\nLCS\r\n$1\r\na\r\n$1\r\nb\r\n$3\r\nLEN\r\n"),
        "{log}"
    );
    // Off first, so that no command past the reset adds an event.
    let off = "CONFIG SET latency-monitor-threshold 0";
    assert_eq!(ask(&mut c, off), "+OK\r\n");
    assert_eq!(ask(&mut c, "LATENCY RESET"), ":1\r\n");
    assert_eq!(ask(&mut c, "LATENCY LATEST"), "*0\r\n");
}

/// `SWAPDB` by one client is seen at once by another that has `SELECT`ed one of the
/// databases, and `WATCH`es on a swapped database abort, on both servers alike. Catches a
/// map kept per connection or read once at connect, a swap not published.
#[test]
fn swapdb_is_seen_by_a_client_in_that_database() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("swapdb");
    let served = Served::start(&dir.0);
    let script = |a: &mut TcpStream, b: &mut TcpStream| -> Vec<String> {
        let steps: &[(bool, &[&str])] = &[
            (true, &["select", "1"]),
            (true, &["set", "k", "in-one"]),
            (false, &["set", "k", "in-zero"]),
            (false, &["set", "only0", "x"]),
            (true, &["watch", "k"]),
            (false, &["swapdb", "0", "1"]),
            (true, &["get", "k"]),
            (true, &["dbsize"]),
            (false, &["get", "k"]),
            (true, &["multi"]),
            (true, &["get", "k"]),
            (true, &["exec"]),
            (true, &["multi"]),
            (true, &["swapdb", "1", "0"]),
            (true, &["get", "k"]),
            (true, &["exec"]),
            (false, &["get", "k"]),
            (false, &["flushdb"]),
            (true, &["dbsize"]),
            (false, &["dbsize"]),
        ];
        steps
            .iter()
            .map(|(on_a, words)| call(if *on_a { &mut *a } else { &mut *b }, words))
            .collect()
    };
    let theirs = script(&mut redis.connect(), &mut redis.connect());
    let ours = script(&mut served.connect(), &mut served.connect());
    assert_eq!(theirs[6], "$7\r\nin-zero\r\n", "redis swaps");
    assert_eq!(ours, theirs);
}

/// The keys of a whole `SCAN` (one client, `COUNT 20`) include every key present for all of
/// it while another client pipelines enough new keys to split the store's buckets many
/// times. Catches a cursor not monotonic in the buckets' patterns (keys moved below it by a
/// split are missed), a scan that ends before the directory does.
#[test]
fn scan_returns_every_stable_key_during_concurrent_writes() {
    let dir = temp_dir("scan");
    let served = Served::start_with(&dir.0, &["--durability", "none"]);
    let mut a = served.connect();
    let mut request = Vec::new();
    for i in 0..3_000 {
        request.extend_from_slice(format!("SET stable:{i} v\r\n").as_bytes());
    }
    a.write_all(&request).unwrap();
    read_replies(&mut a, 3_000);
    let mut b = served.connect();
    let writer = std::thread::spawn(move || {
        for round in 0..40 {
            let mut request = Vec::new();
            for i in 0..1_000 {
                request.extend_from_slice(format!("SET new:{round}:{i} v\r\n").as_bytes());
            }
            b.write_all(&request).unwrap();
            read_replies(&mut b, 1_000);
        }
    });
    let mut scans = 0;
    while !writer.is_finished() || scans < 2 {
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            send_command(
                &mut a,
                &["scan".into(), cursor.clone(), "count".into(), "20".into()],
            );
            let reply = read_replies(&mut a, 1).pop().unwrap();
            let lines: Vec<&str> = reply.split("\r\n").collect();
            cursor = lines[2].to_string();
            seen.extend(lines[5..].iter().step_by(2).map(|k| k.to_string()));
            if cursor == "0" {
                break;
            }
        }
        for i in 0..3_000 {
            assert!(
                seen.contains(&format!("stable:{i}")),
                "scan {scans} missed stable:{i}"
            );
        }
        scans += 1;
    }
    writer.join().unwrap();
    assert_eq!(call(&mut a, &["dbsize"]), ":43000\r\n");
}

/// The store's key count, as `tamer check` reports it, of the store in `dir` (stopped).
fn checked_keys(dir: &Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("check")
        .arg(dir.join("tamer.db"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(": ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("tamer check said: {text}"))
}

/// `DBSIZE` is exact across a SIGKILL, a `FLUSHDB` acknowledged before the SIGKILL stays
/// flushed, and the flushed keys are reclaimed after the restart (the reclaim resumes): the
/// store ends with as many keys as a store that only ever held the surviving ones. Catches
/// counts kept in DRAM only, a count written apart from its key, a flush undone by recovery,
/// a reclaim that does not resume after a crash.
#[test]
fn dbsize_and_flushdb_survive_sigkill_and_space_is_reclaimed() {
    let fill = |conn: &mut TcpStream, db: &str, prefix: &str, n: usize| {
        let mut request = format!("SELECT {db}\r\n").into_bytes();
        for i in 0..n {
            request.extend_from_slice(format!("SET {prefix}{i} {}\r\n", "v".repeat(50)).as_bytes());
        }
        conn.write_all(&request).unwrap();
        read_replies(conn, n + 1);
    };
    let dir = temp_dir("dbsize-kill");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    fill(&mut conn, "0", "keep", 500);
    fill(&mut conn, "1", "gone", 4_000);
    assert_eq!(call(&mut conn, &["flushdb"]), "+OK\r\n");
    fill(&mut conn, "1", "after", 7);
    assert_eq!(call(&mut conn, &["dbsize"]), ":7\r\n");
    drop(served); // SIGKILL, likely mid-reclaim
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    assert_eq!(call(&mut conn, &["dbsize"]), ":500\r\n");
    assert_eq!(call(&mut conn, &["select", "1"]), "+OK\r\n");
    assert_eq!(call(&mut conn, &["dbsize"]), ":7\r\n");
    assert_eq!(call(&mut conn, &["exists", "gone1", "after1"]), ":1\r\n");
    // The same surviving keys written to a fresh store: its key count is the target.
    let control = temp_dir("dbsize-control");
    let other = Served::start(&control.0);
    let mut c = other.connect();
    fill(&mut c, "0", "keep", 500);
    fill(&mut c, "1", "after", 7);
    other.terminate();
    let want = checked_keys(&control.0);
    let mut served = Some(served);
    for attempt in 0..20 {
        std::thread::sleep(Duration::from_millis(500));
        served.take().unwrap().terminate();
        let got = checked_keys(&dir.0);
        if got == want {
            return;
        }
        assert!(
            attempt < 19,
            "{got} keys stored, {want} wanted: flushed keys not reclaimed"
        );
        served = Some(Served::start(&dir.0));
    }
}

/// Pipelines `SET {prefix}{i} {value}`, each followed by a 400-byte `pad{i}` (so the keys'
/// records spread over many data pages), for `i` in `0..n` in database `db`.
fn preload(conn: &mut TcpStream, db: usize, prefix: &str, n: usize, value: &str) {
    call(conn, &["select", &db.to_string()]);
    let pad = "p".repeat(400);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let mut request = Vec::new();
        for i in chunk {
            request.extend_from_slice(format!("SET {prefix}{i} {value}\r\n").as_bytes());
            request.extend_from_slice(format!("SET pad{i} {pad}\r\n").as_bytes());
        }
        conn.write_all(&request).unwrap();
        read_replies(conn, 2 * chunk.len());
    }
    call(conn, &["select", "0"]);
}

/// Transactions of 40 `INCR` of random keys of database 0 from three clients while a fourth
/// swaps databases 0 and 1 over and over. The keys are in both databases, database 0's at
/// 0 and database 1's at 10^6, and the data is larger than the cache, so a transaction
/// parks on misses and a swap can run meanwhile. Each `EXEC` sees one map: its 40 replies are
/// all below 500,000 or all above. Catches a map read per command instead of once per
/// transaction (a swap inside an `EXEC` moves its later increments to the other database),
/// a swap that runs while a command is in flight.
#[test]
fn every_exec_sees_one_database_map_while_swapdb_runs() {
    let dir = temp_dir("swap-race");
    let served = Served::start_with(&dir.0, &["--durability", "none"]);
    let (keys, rounds, clients, incrs) = (30_000, 40, 3, 40);
    let mut setup = served.connect();
    preload(&mut setup, 0, "k", keys, "0");
    preload(&mut setup, 1, "k", keys, "1000000");
    // The writers run `rounds` transactions, and on (up to 50 × as many) until the swapper
    // has swapped 11 times: how many land in a fixed number depends on scheduling.
    let swaps = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = (0..clients)
        .map(|c| {
            let mut conn = served.connect();
            let swaps = swaps.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 + c as u64;
                for round in 0..50 * rounds {
                    if round >= rounds && swaps.load(std::sync::atomic::Ordering::Relaxed) > 10 {
                        break;
                    }
                    let mut script = "MULTI\r\n".to_string();
                    for _ in 0..incrs {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        script.push_str(&format!("INCR k{}\r\n", x % keys as u64));
                    }
                    script.push_str("EXEC\r\n");
                    conn.write_all(script.as_bytes()).unwrap();
                    let exec = read_replies(&mut conn, 2 + incrs).pop().unwrap();
                    let values: Vec<i64> = exec
                        .split("\r\n")
                        .skip(1)
                        .filter(|l| !l.is_empty())
                        .map(|l| l[1..].parse().unwrap())
                        .collect();
                    assert_eq!(values.len(), incrs, "{exec}");
                    let low = values.iter().filter(|&&v| v < 500_000).count();
                    assert!(
                        low == 0 || low == incrs,
                        "one EXEC saw two maps: {values:?}"
                    );
                }
            })
        })
        .collect();
    let mut swapper = served.connect();
    while writers.iter().any(|w| !w.is_finished()) {
        assert_eq!(call(&mut swapper, &["swapdb", "0", "1"]), "+OK\r\n");
        swaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    for w in writers {
        w.join().unwrap();
    }
    let swaps = swaps.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        swaps > 10,
        "the swaps ran during the transactions ({swaps})"
    );
}

/// `INFO keyspace` lists each database holding keys with its exact count, and nothing for
/// the empty ones. Mutations caught: counts of the wrong database (the map ignored), empty
/// databases listed, the section left empty.
#[test]
fn info_keyspace_counts_each_database() {
    let dir = temp_dir("info-keyspace");
    let served = Served::start(&dir.0);
    let mut c = served.connect();
    for words in [
        &["MSET", "a", "1", "b", "2", "c", "3"][..],
        &["SELECT", "3"],
        &["SET", "x", "1"],
        &["SWAPDB", "3", "5"],
    ] {
        let reply = call(&mut c, words);
        assert!(reply.starts_with('+'), "{words:?}: {reply}");
    }
    let info = call(&mut c, &["INFO", "keyspace"]);
    assert!(
        info.contains("# Keyspace\r\ndb0:keys=3\r\ndb5:keys=1\r\n"),
        "{info}"
    );
    assert!(!info.contains("db3:"), "{info}");
}

/// Active expiry keeps `DBSIZE` exact: keys removed by the expirer (never read) leave the
/// count, others stay. Mutation caught: the expirer deleting store keys without the
/// keyspace's count (DBSIZE stays at 60).
#[test]
fn active_expiry_keeps_dbsize_exact() {
    let dir = temp_dir("expiry-dbsize");
    let served = Served::start_with(&dir.0, &["--durability", "none"]);
    let mut c = served.connect();
    // PX 1000: no key can be removed before the first DBSIZE, even after a stall.
    for i in 0..50 {
        assert_eq!(
            call(&mut c, &["SET", &format!("t{i}"), "v", "PX", "1000"]),
            "+OK\r\n"
        );
    }
    for i in 0..10 {
        assert_eq!(call(&mut c, &["SET", &format!("k{i}"), "v"]), "+OK\r\n");
    }
    assert_eq!(call(&mut c, &["DBSIZE"]), ":60\r\n");
    // Bounded: 1 s slots and a pass every 100 ms remove them within about 2.3 s. The
    // statistics are counted when the pass ends, after its deletes commit: wait for both.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = call(&mut c, &["DBSIZE"]);
        let info = call(&mut c, &["INFO", "stats"]);
        if n == ":10\r\n" && info.contains("expired_keys:50\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "DBSIZE still {n}: {info}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `KEYS` pattern of 1,000 stars against a 1,000-byte key is answered (Redis's recursive
/// matcher would need a frame per star: on a user-level thread's 64 KiB stack that overflows
/// and takes the server down). Mutation caught: the recursive matcher used for any pattern.
#[test]
fn keys_with_a_thousand_stars_does_not_take_the_server_down() {
    let dir = temp_dir("keys-stars");
    let served = Served::start(&dir.0);
    let mut c = served.connect();
    let key = "a".repeat(1000);
    assert_eq!(call(&mut c, &["SET", &key, "v"]), "+OK\r\n");
    let pattern = "*a".repeat(1000);
    let reply = call(&mut c, &["KEYS", &pattern]);
    assert_eq!(reply, format!("*1\r\n$1000\r\n{key}\r\n"));
    assert_eq!(call(&mut c, &["PING"]), "+PONG\r\n");
}

/// Keys with TTLs in a flushed database do not stall active expiry: keys of the other
/// databases still expire actively, and DBSIZE stays exact. End to end the reclaimer usually
/// deletes the flushed keys before they are due, so the expirer removing them through the
/// counts is caught by `expiry::tests::a_flushed_databases_keys_expire_without_their_counts`;
/// this test catches a flush that stops active expiry or leaves DBSIZE off.
#[test]
fn active_expiry_goes_on_after_flushdb() {
    let dir = temp_dir("expiry-flushdb");
    let served = Served::start_with(&dir.0, &["--durability", "none"]);
    let mut c = served.connect();
    for i in 0..20 {
        assert_eq!(
            call(&mut c, &["SET", &format!("f{i}"), "v", "PX", "50"]),
            "+OK\r\n"
        );
    }
    assert_eq!(call(&mut c, &["FLUSHDB"]), "+OK\r\n");
    assert_eq!(call(&mut c, &["SELECT", "1"]), "+OK\r\n");
    for i in 0..20 {
        assert_eq!(
            call(&mut c, &["SET", &format!("k{i}"), "v", "PX", "300"]),
            "+OK\r\n"
        );
    }
    assert_eq!(call(&mut c, &["SET", "stay", "v"]), "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = call(&mut c, &["DBSIZE"]);
        if n == ":1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "DBSIZE of db 1 still {n}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let info = call(&mut c, &["INFO", "stats"]);
    assert!(info.contains("expired_keys:"), "{info}");
    assert_eq!(call(&mut c, &["SELECT", "0"]), "+OK\r\n");
    assert_eq!(call(&mut c, &["DBSIZE"]), ":0\r\n");
}

/// Values a test sets a Redis-only setting to: one that differs from the default and is
/// valid, and one that is not (`None`: every value is valid).
fn probe_values(s: &tamer_server::config::Setting) -> (String, Option<String>) {
    use tamer_server::config::Kind;
    match s.kind {
        Kind::Bool => (
            if s.default == "yes" { "no" } else { "yes" }.into(),
            Some("maybe".into()),
        ),
        Kind::Enum(names) => (
            names
                .iter()
                .find(|n| **n != s.default)
                .unwrap()
                .to_uppercase(),
            Some("tamer-probe-x".into()),
        ),
        Kind::Int { min, max } => {
            let d: i64 = s.default.parse().unwrap();
            let other = if d < max { d + 1 } else { min };
            let bad = if max < i64::MAX { max + 1 } else { min - 1 };
            (other.to_string(), Some(bad.to_string()))
        }
        Kind::Memory => ("3mb".into(), Some("3 apples".into())),
        Kind::Save => ("3600 1 300 100".into(), Some("0 1".into())),
        Kind::Text | Kind::KeyspaceEvents => ("tamer probe".into(), None),
        Kind::BufferLimits => ("PUBSUB 1mb 512kb 10".into(), Some("master 1 1 1".into())),
        Kind::Percentiles => ("99.9 50.0 1e1".into(), Some("50 abc".into())),
    }
}

/// Every setting Redis 7.0's `CONFIG GET *` lists is listed by tamer's, and each of Redis's
/// settings that tamer accepts without effect (`config/redis_only.rs`) and their aliases
/// answer `CONFIG GET` and `CONFIG SET` as redis-server does: the default, a valid other
/// value (set, read back, set back), an invalid one (Redis's reason), an immutable or
/// protected one refused. A `Fixed` one shows Redis's default and refuses any other value.
/// `save` and `appendonly` (tamer's, reported without effect) are checked the same way.
/// Mutations caught: a setting missing, a wrong default, kind or range, an immutable one
/// that `CONFIG SET` changes, an alias not resolved.
#[test]
fn redis_settings_answer_config_as_redis_does() {
    use tamer_server::config::{find, setting_at, Mutability, REDIS_ONLY, REDIS_ONLY_ALIASES};
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let mut want = redis.connect();
    let dir = temp_dir("config-redis-only");
    let served = Served::start(&dir.0);
    let mut got = served.connect();
    let names = |conn: &mut TcpStream| -> Vec<String> {
        let reply = call(conn, &["CONFIG", "GET", "*"]);
        let lines: Vec<&str> = reply.split("\r\n").collect();
        lines[2..]
            .iter()
            .step_by(4)
            .map(|s| s.to_string())
            .collect()
    };
    let tamer_names = names(&mut got);
    for name in names(&mut want) {
        assert!(tamer_names.contains(&name), "CONFIG GET * lacks {name}");
    }
    let both = |want: &mut TcpStream, got: &mut TcpStream, args: &[&str]| {
        let w = call(want, args);
        let g = call(got, args);
        assert_eq!(g, w, "{args:?}: tamer's, then redis-server's");
        g
    };
    let aliases = REDIS_ONLY_ALIASES.iter().map(|(a, _)| *a);
    // Two of tamer's own that are Redis's too, taken without effect.
    let own = ["save", "appendonly"];
    for name in REDIS_ONLY.iter().map(|s| s.name).chain(aliases).chain(own) {
        let s = setting_at(find(name).unwrap());
        both(&mut want, &mut got, &["CONFIG", "GET", name]);
        let (other, bad) = probe_values(s);
        // `appendonly yes` would make redis-server write its AOF into the tests' directory.
        let other = if name == "appendonly" {
            s.default.to_string()
        } else {
            other
        };
        match s.mutability {
            Mutability::Live => {
                assert_eq!(
                    both(&mut want, &mut got, &["CONFIG", "SET", name, &other]),
                    "+OK\r\n",
                    "{name}"
                );
                both(&mut want, &mut got, &["CONFIG", "GET", name]);
                if let Some(bad) = bad {
                    both(&mut want, &mut got, &["CONFIG", "SET", name, &bad]);
                }
                both(&mut want, &mut got, &["CONFIG", "SET", name, s.default]);
            }
            Mutability::Immutable | Mutability::Protected => {
                both(&mut want, &mut got, &["CONFIG", "SET", name, s.default]);
            }
            Mutability::Fixed => {
                let refused = call(&mut got, &["CONFIG", "SET", name, &other]);
                assert!(
                    refused.contains("tamer does not support"),
                    "{name}: {refused}"
                );
            }
        }
        both(&mut want, &mut got, &["CONFIG", "GET", name]);
    }
}

/// `CONFIG REWRITE`: without `--config` refused in Redis's words; with it, the file keeps
/// its comments, takes the live values and the ACL users, and a restart from it runs with
/// them. Catches a rewrite that loses a `CONFIG SET`, the users, or the file's comments.
#[test]
fn config_rewrite_keeps_what_was_set_across_a_restart() {
    let dir = temp_dir("config-rewrite");
    let plain = Served::start(&dir.0.join("plain"));
    let mut conn = plain.connect();
    assert_eq!(
        call(&mut conn, &["CONFIG", "REWRITE"]),
        "-ERR The server is running without a config file\r\n"
    );
    drop(conn);
    plain.terminate();
    let file = dir.0.join("tamer.toml");
    std::fs::write(&file, "# kept\nmaxclients = 100\n").unwrap();
    let store = dir.0.join("store");
    let args = ["--config", file.to_str().unwrap()];
    let served = Served::start_with(&store, &args);
    let mut conn = served.connect();
    for command in [
        &["CONFIG", "SET", "maxclients", "321"][..],
        &["CONFIG", "SET", "slowlog-max-len", "9"],
        &["ACL", "SETUSER", "ann", "on", ">pw", "~a*", "+get"],
        &["CONFIG", "REWRITE"],
    ] {
        assert_eq!(call(&mut conn, command), "+OK\r\n", "{command:?}");
    }
    let info = call(&mut conn, &["INFO", "server"]);
    assert!(info.contains("config_file:/"), "{info}");
    let acl = call(&mut conn, &["ACL", "LIST"]);
    drop(conn);
    served.terminate();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("# kept\nmaxclients = 321\n"), "{text}");
    let served = Served::start_with(&store, &args);
    let mut conn = served.connect();
    let get = call(&mut conn, &["CONFIG", "GET", "slowlog-max-len"]);
    assert!(get.ends_with("$1\r\n9\r\n"), "{get}");
    // A `default` user line starts from `reset`, which adds `sanitize-payload` (as Redis's).
    let after = call(&mut conn, &["ACL", "LIST"]).replace(" sanitize-payload", "");
    assert_eq!(
        after.replace("$51\r\nuser default", "$34\r\nuser default"),
        acl
    );
}

/// A copied `redis.conf`'s `appendonly yes` and `appendfsync` choose `durability` when it is
/// not given; `durability` given wins; `appendonly no` leaves tamer's default. Catches the
/// mapping inverted, applied over an explicit `durability`, or applied to Redis's defaults.
#[test]
fn appendfsync_chooses_durability_at_start() {
    let dir = temp_dir("appendfsync");
    let file = dir.0.join("tamer.toml");
    let cases = [
        (
            "appendonly = \"yes\"\nappendfsync = \"everysec\"\n",
            "periodic",
        ),
        ("appendonly = \"yes\"\nappendfsync = \"always\"\n", "commit"),
        ("appendonly = \"yes\"\nappendfsync = \"no\"\n", "none"),
        (
            "appendonly = \"yes\"\nappendfsync = \"no\"\ndurability = \"commit\"\n",
            "commit",
        ),
        ("appendonly = \"no\"\nappendfsync = \"no\"\n", "commit"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        std::fs::write(&file, text).unwrap();
        let store = dir.0.join(format!("store-{i}"));
        let served = Served::start_with(&store, &["--config", file.to_str().unwrap()]);
        assert!(
            served.line.contains(&format!("durability {want},")),
            "{text:?}: {}",
            served.line
        );
        served.terminate();
    }
}

/// `LATENCY HISTOGRAM` and `INFO latencystats` beside redis-server's for the same calls
/// (RESP3): the same commands in the same order, the same calls, levels among Redis's (1, 2,
/// 4, 8, 16, 33, 66, ... µs) with cumulative counts ending at the calls, and the same
/// percentile fields; `latency-tracking no` counts nothing. Timings differ, so the levels'
/// values are not compared. Mutations caught: a command missing or counted twice, a container
/// not bringing its subcommands, counts not cumulative, a level Redis never shows, tracking
/// that cannot be turned off, percentiles not following the setting.
#[test]
fn latency_histograms_have_redis_s_shape() {
    use common::table::{parse, Resp};
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir("latency-histogram");
    let served = Served::start(&dir.0);
    let script: &[&str] = &[
        "hello 3",
        "config resetstat",
        "set a 1",
        "set b 2",
        "get a",
        "get a",
        "get nosuch",
        "config get maxclients",
        "config set latency-tracking-info-percentiles 99.99",
        "latency histogram set get nosuch config get",
        "info latencystats",
        "config set latency-tracking no",
        "get a",
        "latency histogram get",
    ];
    let levels: Vec<i64> = (0..30)
        .map(|k| ((1i64 << (10 + k)) + (1i64 << (3 + k)) - 1) / 1000)
        .collect();
    let run = |mut conn: std::net::TcpStream| -> Vec<String> {
        script
            .iter()
            .map(|line| {
                let words: Vec<&str> = line.split(' ').collect();
                send_command(&mut conn, &words);
                read_replies(&mut conn, 1).remove(0)
            })
            .collect()
    };
    let (theirs, ours) = (run(redis.connect()), run(served.connect()));
    // Commands and calls of a histogram reply; every level checked on the way.
    let shape = |reply: &str| -> Vec<(String, i64)> {
        let Resp::Map(commands) = parse(reply) else {
            panic!("not a map: {reply:?}")
        };
        let mut out = Vec::new();
        for (name, body) in commands {
            let (Resp::Bulk(name), Resp::Map(fields)) = (name, body) else {
                panic!("{reply:?}")
            };
            let (Resp::Int(calls), Resp::Map(histogram)) = (&fields[0].1, &fields[1].1) else {
                panic!("{reply:?}")
            };
            let mut previous = 0;
            for (level, count) in histogram {
                let (Resp::Int(level), Resp::Int(count)) = (level, count) else {
                    panic!("{reply:?}")
                };
                assert!(levels.contains(level), "level {level} in {reply:?}");
                assert!(*count > previous, "not growing: {reply:?}");
                previous = *count;
            }
            assert_eq!(previous, *calls, "{reply:?}");
            out.push((String::from_utf8(name).unwrap(), *calls));
        }
        out
    };
    // A container's subcommands come in Redis's hash order: compared as sets.
    let sorted = |mut v: Vec<(String, i64)>| {
        v.sort();
        v
    };
    for i in [9, 13] {
        assert_eq!(
            sorted(shape(&ours[i])),
            sorted(shape(&theirs[i])),
            "{}",
            script[i]
        );
    }
    let named = shape(&ours[9]);
    assert_eq!(named[..2], [("set".to_string(), 2), ("get".to_string(), 3)]);
    assert_eq!(
        named.last(),
        Some(&("get".to_string(), 3)),
        "a name given twice"
    );
    assert_eq!(
        sorted(named[2..5].to_vec()),
        [
            ("config|get", 1),
            ("config|resetstat", 1),
            ("config|set", 1)
        ]
        .map(|(n, c)| (n.to_string(), c))
        .to_vec()
    );
    let fields = |reply: &str, command: &str| -> Vec<String> {
        let line = reply
            .lines()
            .find(|l| l.starts_with(&format!("latency_percentiles_usec_{command}:")))
            .unwrap_or_else(|| panic!("no {command} in {reply:?}"));
        let values = line.split_once(':').unwrap().1;
        values
            .split(',')
            .map(|f| f.split_once('=').unwrap().0.to_string())
            .collect()
    };
    for command in ["set", "get", "config|get"] {
        assert_eq!(fields(&ours[10], command), fields(&theirs[10], command));
        assert_eq!(fields(&ours[10], command), ["p99.99"]);
    }
    for i in [1, 2, 3, 4, 5, 6, 8, 11, 12] {
        assert_eq!(ours[i], theirs[i], "{}", script[i]);
    }
}

/// `INFO commandsplit` says where each command's time went: a durable SET waits for its
/// group commit, a GET of a cached key waits for nothing durable, the parts never exceed
/// the whole, and jobs' time queued is counted. Mutations caught: the commit wait not
/// counted (or counted for reads), a part larger than the command's time, jobs not counted.
#[test]
fn commandsplit_accounts_for_commit_waits() {
    let dir = temp_dir("commandsplit");
    let served = Served::start(&dir.0);
    let mut c = served.connect();
    for i in 0..20 {
        assert_eq!(call(&mut c, &["SET", &format!("k{i}"), "v"]), "+OK\r\n");
        assert_eq!(call(&mut c, &["GET", &format!("k{i}")]), "$1\r\nv\r\n");
    }
    let info = call(&mut c, &["INFO", "commandsplit"]);
    let field = |command: &str, name: &str| -> u64 {
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("cmdsplit_{command}:")))
            .unwrap_or_else(|| panic!("no {command}: {info}"));
        line.split_once(':')
            .unwrap()
            .1
            .split(',')
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}: {line}"))
            .parse()
            .unwrap()
    };
    assert_eq!(field("set", "calls"), 20);
    assert!(field("set", "usec_commit") > 0, "{info}");
    assert_eq!(field("get", "usec_commit"), 0, "{info}");
    for command in ["set", "get"] {
        let parts: u64 = [
            "usec_running",
            "usec_device",
            "usec_commit",
            "usec_checkpoint",
        ]
        .iter()
        .map(|p| field(command, p))
        .sum();
        assert!(parts <= field(command, "usec") + 4, "{info}");
    }
    let jobs: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("jobs_started:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(jobs >= 40, "{info}");
}
