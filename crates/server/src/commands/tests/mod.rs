//! The commands against Redis 7.0 itself: seeded random command sequences run on a real
//! `redis-server` (from Debian's package; `scripts/install-peers.sh`) and on the keyspace in
//! a real store, every reply compared byte for byte. Without `redis-server` on the PATH the
//! differential test says so and passes, unless `TAMER_REQUIRE_PEERS=1` (set by CI), when it
//! fails. Each test names the mutation it catches.

// A differential test reads as one scenario against Redis: long by nature.
#![allow(clippy::too_many_lines)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tamer_store::{Db, DbOptions, DeviceKind};

mod collections;
mod expiry;

use super::*;
use crate::commands::gate::{self, Snapshot, Verdict};
use crate::commands::spec::Run;
use crate::commands::table;
use crate::resp::reply_len;
use crate::stats::ServerStats;

/// Runs request `args` in `tx` as a client in database 0 would: through the gate (every
/// command a store transaction runs; the session's own are not for these tests).
pub(crate) fn execute(
    ctx: &Context,
    tx: &mut tamer_store::Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result<(), tamer_store::DbError> {
    let client = Snapshot {
        authenticated: true,
        ..Snapshot::default()
    };
    match gate::decide(args, client) {
        Verdict::Run(command) => match command.run {
            Run::Tx(handler) => handler(ctx, tx, args, out),
            Run::WithTable(handler) => handler(&table::TABLE, ctx, tx, args, out),
            other => panic!(
                "{command:?} runs on the session ({:?})",
                matches!(other, Run::Session(_))
            ),
        },
        Verdict::Refuse(refusal) => {
            refusal.write(args, out);
            Ok(())
        }
        other => panic!("{other:?} for a client outside MULTI"),
    }
}

/// Settings and counters for the tests' commands.
pub(crate) fn test_stats() -> &'static ServerStats {
    static STATS: std::sync::OnceLock<ServerStats> = std::sync::OnceLock::new();
    STATS.get_or_init(|| ServerStats::new(0, std::sync::Arc::default(), &[]))
}

pub(crate) fn store() -> Db {
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 64 << 20,
    };
    Db::open("unused", DbOptions::new(8 << 20).device(device).cores(1)).unwrap()
}

/// The database map of [`run`]'s client: its database 0 is namespace `namespace`, database
/// `i` namespace `namespace + i × 10^6` (a fresh set of databases per namespace).
fn map_of(namespace: u32) -> [u32; crate::keyspace::DATABASES] {
    std::array::from_fn(|i| namespace + i as u32 * 1_000_000)
}

/// Runs one request on the store in a transaction of its own, in database 0 of
/// [`map_of`]`(namespace)`; its reply. (The map commands run end to end in `tests/serve.rs`.)
pub(crate) fn run(db: &Db, namespace: u32, now_ms: u64, args: &[Vec<u8>]) -> Vec<u8> {
    let args = args.to_vec();
    db.transaction(move |tx| {
        let map = std::cell::Cell::new(map_of(namespace));
        let ctx = Context::bare(namespace, now_ms, &map, test_stats());
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let mut out = Vec::new();
        execute(&ctx, tx, &refs, &mut out)?;
        Ok(out)
    })
    .unwrap()
}

fn text(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Catches arity checked the wrong way (`-3` as exactly 3), a case-sensitive lookup, Redis's
/// unknown-command text changed.
#[test]
fn lookup_and_arity_as_redis() {
    let db = store();
    let reply = |args: &[&str]| String::from_utf8(run(&db, 1, 0, &text(args))).unwrap();
    assert_eq!(
        reply(&["get"]),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(reply(&["SeT", "k", "v"]), "+OK\r\n");
    assert_eq!(
        reply(&["set", "k", "v", "nx", "xx"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        reply(&["mset", "a"]),
        "-ERR wrong number of arguments for 'mset' command\r\n"
    );
    assert_eq!(
        reply(&["nosuch", "a", "b"]),
        "-ERR unknown command 'nosuch', with args beginning with: 'a' 'b' \r\n"
    );
    assert!(
        table::TABLE
            .commands
            .windows(2)
            .all(|w| w[0].name < w[1].name),
        "sorted by name"
    );
    db.close().unwrap();
}

/// Expiry by `SET`'s options, at the command's clock. Catches EX taken as ms, PX as s, an
/// expiry not cleared by a plain SET, KEEPTTL ignored.
#[test]
fn set_expiry_options() {
    let db = store();
    let now = 1_000_000;
    let reply = |args: &[&str], at: u64| String::from_utf8(run(&db, 1, at, &text(args))).unwrap();
    reply(&["set", "a", "1", "ex", "10"], now);
    assert_eq!(reply(&["get", "a"], now + 9_999), "$1\r\n1\r\n");
    assert_eq!(reply(&["get", "a"], now + 10_000), "$-1\r\n");
    reply(&["set", "b", "1", "px", "10"], now);
    assert_eq!(reply(&["exists", "b"], now + 10), ":0\r\n");
    reply(&["set", "c", "1", "ex", "10"], now);
    reply(&["set", "c", "2", "keepttl"], now);
    assert_eq!(reply(&["get", "c"], now + 10_000), "$-1\r\n");
    reply(&["set", "d", "1", "ex", "10"], now);
    reply(&["set", "d", "2"], now);
    assert_eq!(reply(&["get", "d"], now + 10_000), "$1\r\n2\r\n");
    assert_eq!(
        reply(&["set", "e", "1", "ex", "0"], now),
        "-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        reply(&["set", "e", "1", "ex", "x"], now),
        "-ERR value is not an integer or out of range\r\n"
    );
    db.close().unwrap();
}

/// A `redis-server` of our own on a free port, killed on drop.
pub(crate) struct Redis {
    child: Child,
    conn: TcpStream,
    buf: Vec<u8>,
}

impl Redis {
    pub(crate) fn start() -> Option<Redis> {
        // Ports 18000-18499 (the machine's share for tests): ten per process, one per test.
        static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        let nth = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10;
        let port = 18_000 + (std::process::id() % 50) as u16 * 10 + nth;
        let child = Process::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let conn = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(conn) => break conn,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("redis-server on port {port} never answered: {e}"),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Some(Redis {
            child,
            conn,
            buf: Vec::new(),
        })
    }

    /// Sends `args` and returns the reply's bytes.
    pub(crate) fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            request.extend_from_slice(a);
            request.extend_from_slice(b"\r\n");
        }
        self.conn.write_all(&request).unwrap();
        // Bounded by the read timeout: every pass reads or returns.
        loop {
            if let Some(n) = reply_len(&self.buf).unwrap() {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 4096];
            let n = self.conn.read(&mut chunk).expect("redis-server's reply");
            assert!(n > 0, "redis-server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One random string or key command over four keys, with values that are integers at the
/// edges, text and empty, and options valid and not. Times that two clocks could disagree on
/// are left out: relative expiries are far in the future and never compared (`GT`/`LT` take
/// absolute times only), and `PTTL`, `EXPIRETIME` and `PEXPIRETIME` are tested on one clock
/// (`expiry_commands_on_one_clock`).
fn arb_command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let key = prop::sample::select(vec!["k1", "k2", "k3", "k4"]);
    let value = prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "10",
        "abc",
        "",
        "9223372036854775807",
        "-9223372036854775808",
        "007",
        " 1",
        "3.5",
        "ohmytext",
        "mynewtext",
        "abcabcab",
    ]);
    let lcs_opt = prop::sample::select(vec![
        vec![],
        vec!["len"],
        vec!["idx"],
        vec!["idx", "withmatchlen"],
        vec!["idx", "minmatchlen", "2"],
        vec!["idx", "minmatchlen", "-1", "withmatchlen"],
        vec!["len", "idx"],
        vec!["minmatchlen"],
        vec!["minmatchlen", "x"],
        vec!["bogus"],
    ]);
    let number = prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "2",
        "5",
        "-3",
        "100",
        "x",
        "9223372036854775807",
        "-9223372036854775808",
    ]);
    let set_opt = prop::sample::select(vec![
        vec![],
        vec!["nx"],
        vec!["xx"],
        vec!["get"],
        vec!["nx", "get"],
        vec!["xx", "get"],
        vec!["keepttl"],
        vec!["ex", "100000"],
        vec!["px", "100000000"],
        vec!["exat", "9999999999"],
        vec!["pxat", "1"],
        vec!["ex", "0"],
        vec!["ex", "-5"],
        vec!["ex", "abc"],
        vec!["nx", "xx"],
        vec!["ex", "10", "keepttl"],
        vec!["ex", "10", "px", "10"],
        vec!["ex", "10", "ex", "20"],
        vec!["bogus"],
        vec!["ex"],
        vec!["get", "get"],
        vec!["persist"],
    ]);
    let getex_opt = prop::sample::select(vec![
        vec![],
        vec!["persist"],
        vec!["ex", "100000"],
        vec!["px", "100000000"],
        vec!["exat", "4000000000"],
        vec!["pxat", "1"],
        vec!["ex", "0"],
        vec!["nx"],
        vec!["ex", "10", "persist"],
        vec!["keepttl"],
        vec!["get"],
    ]);
    let expire = prop::sample::select(vec![
        vec!["expire", "100000"],
        vec!["expire", "100000", "nx"],
        vec!["expire", "100000", "xx"],
        vec!["pexpire", "100000000"],
        vec!["pexpire", "100000000", "xx"],
        vec!["expire", "-1"],
        vec!["expire", "x"],
        vec!["expire", "100000", "nx", "gt"],
        vec!["expire", "1", "gt", "lt"],
        vec!["expire", "1", "bogus"],
        vec!["expireat", "4000000000"],
        vec!["expireat", "4000000001", "gt"],
        vec!["expireat", "3999999999", "lt"],
        vec!["expireat", "4000000000", "gt"],
        vec!["expireat", "4000000000", "lt"],
        vec!["pexpireat", "4000000000500", "gt"],
        vec!["pexpireat", "1"],
        vec!["expireat", "0"],
        vec!["expire", "9223372036854775807"],
        vec!["pexpire", "9223372036854775807"],
        vec!["expireat", "-9223372036854775808"],
    ]);
    let setex = prop::sample::select(vec!["100000", "0", "-1", "x", "9223372036854775807"]);
    let float = prop::sample::select(vec![
        "0.1",
        "0.2",
        "-0.3",
        "10.5",
        "3.0e3",
        "5e-1",
        "2.5",
        "-0",
        "1e400",
        "inf",
        "-inf",
        "nan",
        "abc",
        "",
        " 1",
        "1 ",
        "0x10",
        "1e-5000",
        "1.7976931348623157e308",
        "10.50",
    ]);
    let db_arg = prop::sample::select(vec!["1", "0", "15", "16", "-1", "x", "2147483648"]);
    (
        0..40usize,
        (key.clone(), key),
        value,
        (number.clone(), number),
        (set_opt, getex_opt, expire, lcs_opt),
        (setex, float, db_arg),
    )
        .prop_map(
            |(which, (k, k2), v, (n, m), (opt, gopt, exp, lopt), (sx, f, d))| {
                let mut c: Vec<&str> = match which {
                    0 => vec!["get", k],
                    1 => vec!["set", k, v],
                    2 => vec!["setnx", k, v],
                    3 => vec!["getset", k, v],
                    4 => vec!["getdel", k],
                    5 => vec!["mget", k, k2, "nokey"],
                    6 => vec!["mset", k, v, k2, v],
                    7 => vec!["msetnx", k, v, k2, v],
                    8 => vec!["incr", k],
                    9 => vec!["decrby", k, n],
                    10 => vec!["incrby", k, n],
                    11 => vec!["append", k, v],
                    12 => vec!["strlen", k],
                    13 => vec!["getrange", k, n, m],
                    14 => vec!["setrange", k, if n.starts_with('-') { n } else { "2" }, v],
                    15 => vec!["del", k, k2],
                    16 => vec!["getex", k],
                    17 => vec![exp[0], k],
                    18 => vec!["ttl", k],
                    19 => vec!["persist", k],
                    20 => vec!["type", k],
                    21 => vec!["rename", k, k2],
                    22 => vec!["renamenx", k, k2],
                    23 => vec!["setex", k, sx, v],
                    24 => vec!["psetex", k, sx, v],
                    25 => vec!["lcs", k, k2],
                    26 => vec!["unlink", k, "nokey"],
                    27 | 28 => vec!["incrbyfloat", "f", f],
                    29 => vec!["set", "f", f],
                    30 => vec!["incrbyfloat", k, f],
                    31 => vec!["dbsize"],
                    32 => vec!["copy", k, k2],
                    33 => vec!["copy", k, k2, "replace"],
                    34 => vec!["copy", k, k2, "db", d],
                    35 => vec!["copy", k, k, "db", d, "replace"],
                    36 => vec!["move", k, d],
                    37 => vec!["copy", k, k2, "bogus"],
                    38 => vec!["exists", k, k2, "f"],
                    _ => vec!["touch", k, k2, k],
                };
                match which {
                    1 => c.extend(opt),
                    16 => c.extend(gopt),
                    17 => c.extend(&exp[1..]),
                    25 => c.extend(lopt),
                    _ => {}
                }
                c.iter().map(|a| a.as_bytes().to_vec()).collect()
            },
        )
}

/// Every reply equal to Redis 7.0's, byte for byte, over seeded random sequences. Catches any
/// semantic or error-text difference in the commands built (SET's and GETEX's option rules,
/// integer parsing and overflow, GETRANGE's clamping, EXPIRE's conditions and past times,
/// RENAME of a key to itself, expiries moving with RENAME, INCRBYFLOAT's parse, sum, print
/// and errors, DBSIZE's count off after any create or remove, COPY's and MOVE's options,
/// errors and expiry).
#[test]
fn string_commands_reply_as_redis_does() {
    let Some(redis) = Redis::start() else {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "redis-server is not installed (scripts/install-peers.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: redis-server is not installed (scripts/install-peers.sh)");
        return;
    };
    let db = store();
    // Seeded: `TAMER_TEST_SEED=n` replays another sequence; the seed is printed on failure.
    let seed: u64 = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    // Redis's documented LCS example first, every option, then the random sequences.
    let mut redis = redis;
    let script: &[&[&str]] = &[
        &["mset", "key1", "ohmytext", "key2", "mynewtext"],
        &["lcs", "key1", "key2"],
        &["lcs", "key1", "key2", "len"],
        &["lcs", "key1", "key2", "idx"],
        &["lcs", "key1", "key2", "idx", "minmatchlen", "4"],
        &[
            "lcs",
            "key1",
            "key2",
            "idx",
            "minmatchlen",
            "4",
            "withmatchlen",
        ],
        &["lcs", "key1", "nokey", "idx", "withmatchlen"],
    ];
    for args in script {
        let args = text(args);
        let want = redis.call(&args);
        assert_eq!(
            String::from_utf8_lossy(&run(&db, 999_999, 0, &args)),
            String::from_utf8_lossy(&want),
            "{args:?}"
        );
    }
    let redis = std::cell::RefCell::new(redis);
    let case = std::cell::Cell::new(0u32);
    let result = runner.run(&prop::collection::vec(arb_command(), 1..40), |commands| {
        case.set(case.get() + 1);
        let mut redis = redis.borrow_mut();
        redis.call(&text(&["flushall"]));
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        for args in &commands {
            let want = redis.call(args);
            let got = run(&db, case.get(), now_ms, args);
            prop_assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "after {:?}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            );
        }
        Ok(())
    });
    db.close().unwrap();
    if let Err(e) = result {
        panic!("seed {seed} (TAMER_TEST_SEED={seed} replays it): {e}");
    }
}

/// `PTTL`, `EXPIRETIME`, `PEXPIRETIME` and `TTL`'s rounding on one clock. Catches a TTL not
/// rounded to the nearest second, a remaining time that goes negative, absolute and relative
/// mixed up.
#[test]
fn expiry_commands_on_one_clock() {
    let db = store();
    let now = 1_700_000_000_000;
    let reply = |args: &[&str], at: u64| String::from_utf8(run(&db, 1, at, &text(args))).unwrap();
    assert_eq!(reply(&["pttl", "k"], now), ":-2\r\n");
    reply(&["set", "k", "v"], now);
    assert_eq!(reply(&["expiretime", "k"], now), ":-1\r\n");
    reply(&["pexpire", "k", "10499"], now);
    assert_eq!(reply(&["pttl", "k"], now + 1), ":10498\r\n");
    assert_eq!(reply(&["ttl", "k"], now), ":10\r\n");
    assert_eq!(reply(&["ttl", "k"], now - 2), ":11\r\n");
    assert_eq!(
        reply(&["pexpiretime", "k"], now),
        format!(":{}\r\n", now + 10_499)
    );
    assert_eq!(
        reply(&["expiretime", "k"], now),
        format!(":{}\r\n", (now + 10_499 + 500) / 1000)
    );
    assert_eq!(reply(&["persist", "k"], now), ":1\r\n");
    assert_eq!(reply(&["pttl", "k"], now), ":-1\r\n");
    db.close().unwrap();
}

/// `SETRANGE` and `APPEND` past the store's largest value are refused before the string is
/// built (a 13-byte request cannot make the server allocate 100 MB). Catches the bound
/// checked only by the store, after the allocation.
#[test]
fn strings_past_the_store_limit_are_refused_first() {
    let db = store();
    let reply = |args: &[&str]| String::from_utf8(run(&db, 1, 0, &text(args))).unwrap();
    let limit = tamer_store::DEFAULT_MAX_VALUE_BYTES;
    assert_eq!(
        reply(&["setrange", "k", "100000000", "x"]),
        format!(
            "-ERR string of 100000001 bytes exceeds the store's largest value ({limit} bytes)\r\n"
        )
    );
    assert_eq!(reply(&["exists", "k"]), ":0\r\n");
    assert_eq!(
        reply(&["setrange", "k", "600000000", "x"]),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    db.close().unwrap();
}

/// The elements of a RESP2 array reply of bulk strings (nested arrays flattened), for the
/// scan tests.
fn bulks(reply: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    // Bounded: every pass consumes one header line (and a bulk's bytes).
    while i < reply.len() {
        let end = i + reply[i..].windows(2).position(|w| w == b"\r\n").unwrap();
        let line = &reply[i..end];
        i = end + 2;
        if line[0] == b'$' {
            let n: usize = std::str::from_utf8(&line[1..]).unwrap().parse().unwrap();
            out.push(reply[i..i + n].to_vec());
            i += n + 2;
        }
    }
    out
}

/// The wall clock in ms.
pub(crate) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Two sorted key lists equal, or a panic naming a few keys in one and not the other.
fn assert_same_keys(got: Vec<Vec<u8>>, want: Vec<Vec<u8>>, what: &str) {
    if got != want {
        let show = |a: &[Vec<u8>], b: &[Vec<u8>]| {
            a.iter()
                .filter(|k| b.binary_search(k).is_err())
                .take(5)
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
        };
        panic!(
            "{what}: {} keys, redis {}; only ours: {:?}; only redis's: {:?}",
            got.len(),
            want.len(),
            show(&got, &want),
            show(&want, &got)
        );
    }
}

/// A full `SCAN` of database 0 of [`map_of`]`(namespace)` with `options`; its keys, sorted.
fn scan_all(db: &Db, namespace: u32, options: &[&str]) -> Vec<Vec<u8>> {
    let mut cursor = b"0".to_vec();
    let mut keys = Vec::new();
    for _ in 0..1_000_000 {
        let mut args = vec![b"scan".to_vec(), cursor];
        args.extend(options.iter().map(|o| o.as_bytes().to_vec()));
        let reply = bulks(&run(db, namespace, wall_ms(), &args));
        cursor = reply[0].clone();
        keys.extend_from_slice(&reply[1..]);
        if cursor == b"0" {
            keys.sort();
            return keys;
        }
    }
    panic!("a scan ends");
}

/// `KEYS`, a whole `SCAN` (with `MATCH`, `COUNT`, `TYPE`), `RANDOMKEY` and `DBSIZE` against
/// redis-server on the same keys, and `SCAN`'s errors byte for byte. Catches another
/// database's keys listed, a glob difference, a scan that skips buckets or stops early, an
/// expired key listed, `TYPE` compared case-sensitively, an option error text changed.
#[test]
fn keyspace_scans_agree_with_redis() {
    let Some(mut redis) = Redis::start() else {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "redis-server is required"
        );
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let db = store();
    let both = |redis: &mut Redis, ns: u32, args: &[&str]| {
        let args = text(args);
        (redis.call(&args), run(&db, ns, wall_ms(), &args))
    };
    // Database 0 (namespace 5) and a neighbour (namespace 6) that must not show.
    for i in 0..1_500 {
        let key = format!("{}:{i}", ["user", "item", "h?llo", "[x]"][i % 4]);
        both(&mut redis, 5, &["set", &key, "v"]);
        run(&db, 6, 0, &text(&["set", &key, "other"]));
    }
    both(&mut redis, 5, &["set", "", "empty key"]);
    both(&mut redis, 5, &["set", "gone", "v", "px", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    let sorted = |reply: Vec<u8>| {
        let mut keys = bulks(&reply);
        keys.sort();
        keys
    };
    for pattern in [
        "*",
        "user:1*",
        "h\\?llo:*",
        "[[]x]:1?",
        "*:[0-2]",
        "[^u]*:7",
        "",
        "gone",
    ] {
        let (want, got) = both(&mut redis, 5, &["keys", pattern]);
        assert_same_keys(sorted(got), sorted(want), &format!("KEYS {pattern}"));
    }
    for options in [
        &["count", "10"][..],
        &["match", "item:*", "count", "7"],
        &["count", "1000"],
        &["type", "STRING", "match", "*1"],
        &["type", "hash"],
    ] {
        let mut want = Vec::new();
        let mut cursor = b"0".to_vec();
        loop {
            let mut args = vec![b"scan".to_vec(), cursor];
            args.extend(options.iter().map(|o| o.as_bytes().to_vec()));
            let reply = bulks(&redis.call(&args));
            cursor = reply[0].clone();
            want.extend_from_slice(&reply[1..]);
            if cursor == b"0" {
                break;
            }
        }
        want.sort();
        want.dedup();
        let mut got = scan_all(&db, 5, options);
        got.dedup();
        assert_same_keys(got, want, &format!("SCAN {options:?}"));
    }
    for args in [
        &["scan", "x"][..],
        &["scan", "-"],
        &["scan", " 1"],
        &["scan", "18446744073709551616"],
        &["scan", "0", "count", "0"],
        &["scan", "0", "count", "x"],
        &["scan", "0", "match"],
        &["scan", "0", "bogus", "1"],
        // Redis's active expiry may have removed it; a read removes it on both.
        &["get", "gone"],
        &["dbsize"],
        &["keys"],
        &["randomkey", "x"],
    ] {
        let (want, got) = both(&mut redis, 5, args);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{args:?}"
        );
    }
    // Cursors past the directory (as `-1` is) end the scan; `+0` and `` start it.
    assert_eq!(
        run(&db, 5, 0, &text(&["scan", "-1"])),
        b"*2\r\n$1\r\n0\r\n*0\r\n"
    );
    for start in ["+0", ""] {
        let reply = bulks(&run(
            &db,
            5,
            wall_ms(),
            &text(&["scan", start, "count", "1000"]),
        ));
        assert!(reply.len() > 100, "SCAN {start:?} starts at the beginning");
    }
    let key = bulks(&run(&db, 5, 0, &text(&["randomkey"]))).pop().unwrap();
    assert_eq!(run(&db, 5, 0, &[b"exists".to_vec(), key]), b":1\r\n");
    assert_eq!(run(&db, 77, 0, &text(&["randomkey"])), b"$-1\r\n");
    db.close().unwrap();
}

/// `INCRBYFLOAT` on Redis's documented examples and the cases where `long double` shows
/// (digits past an `f64`'s, values past its range), compared with redis-server. Catches the
/// arithmetic done in `f64` (0.1 + 0.2, 3000.1's noise, 1e400), trailing zeros kept, `-0`.
#[test]
fn incrbyfloat_computes_as_redis_does() {
    let Some(mut redis) = Redis::start() else {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "redis-server is required"
        );
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let db = store();
    let script: &[&[&str]] = &[
        &["set", "k", "10.50"],
        &["incrbyfloat", "k", "0.1"],
        &["incrbyfloat", "k", "-5"],
        &["set", "k", "5.0e3"],
        &["incrbyfloat", "k", "2.0e2"],
        &["set", "f", "0.1"],
        &["incrbyfloat", "f", "0.2"],
        &["set", "g", "3000"],
        &["incrbyfloat", "g", "0.1"],
        &["incrbyfloat", "h", "1e400"],
        &["incrbyfloat", "h", "1e4932"],
        &["incrbyfloat", "i", "-0.0"],
        &["incrbyfloat", "i", "inf"],
        &["incrbyfloat", "i", "nan"],
        &["incrbyfloat", "i", "0x1p4"],
        &["incrbyfloat", "i", "1e-5000"],
        &["set", "j", "9223372036854775807"],
        &["incrbyfloat", "j", "1"],
        &["set", "l", "abc"],
        &["incrbyfloat", "l", "1"],
        &["incrbyfloat", "m", "1.5", "x"],
    ];
    for args in script {
        let args = text(args);
        let want = redis.call(&args);
        let got = run(&db, 9, 0, &args);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{args:?}"
        );
    }
    db.close().unwrap();
}

/// A whole `SCAN` returns every key present for all of it while another thread inserts
/// enough keys to split buckets many times and deletes others, on a store of two cores. Catches a cursor that is not
/// monotonic in the bucket's pattern (keys moved by a split below the cursor would be
/// missed), a bucket skipped when its slot's depth changed under the scan.
#[test]
fn scan_sees_every_stable_key_during_splits() {
    // Two cores: scans and splits also run at the same moment, not only one after the other.
    let device = DeviceKind::Emulated {
        latency_ns: 1_000,
        capacity_bytes: 64 << 20,
    };
    let options = DbOptions::new(8 << 20).device(device).cores(2);
    let db = std::sync::Arc::new(Db::open("unused", options).unwrap());
    for chunk in 0..10 {
        let keys: Vec<String> = (0..200)
            .map(|i| format!("stable{}", chunk * 200 + i))
            .collect();
        let args: Vec<&str> = std::iter::once("mset")
            .chain(keys.iter().flat_map(|k| [k.as_str(), "v"]))
            .collect();
        run(&db, 3, 0, &text(&args));
    }
    let buckets_before = db.index_stats().unwrap().buckets;
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..30_000u32 {
                run(&db, 3, 0, &text(&["set", &format!("new{i}"), "v"]));
                if i % 3 == 0 {
                    run(&db, 3, 0, &text(&["del", &format!("new{}", i / 2)]));
                }
            }
        })
    };
    let mut scans = 0;
    while !writer.is_finished() || scans == 0 {
        let seen = scan_all(&db, 3, &["count", "5"]);
        let seen: std::collections::HashSet<Vec<u8>> = seen.into_iter().collect();
        for i in 0..2_000 {
            let key = format!("stable{i}");
            assert!(seen.contains(key.as_bytes()), "scan {scans} missed {key}");
        }
        scans += 1;
    }
    writer.join().unwrap();
    let buckets_after = db.index_stats().unwrap().buckets;
    assert!(
        buckets_after > buckets_before * 4,
        "the writer split buckets ({buckets_before} -> {buckets_after})"
    );
    assert!(scans >= 2, "scans ran during the writes ({scans})");
}
