//! The collection types end to end: the real `tamer serve` and a real `redis-server` given the
//! same script of blocking pops (clients blocked in turn, a push serving them, timeouts,
//! `MULTI`, a client that leaves while blocked), every reply compared byte for byte; and
//! redis-py driving hashes, lists, sets and sorted sets. Without the peers the tests say
//! SKIPPED, unless `TAMER_REQUIRE_PEERS=1` (CI).

// Test code: a scenario reads best whole, so the function length limit does not apply.
#![allow(clippy::too_many_lines)]

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{
    call, connect_to, have, read_replies, redis_cli, run_client_script, send_command, temp_dir,
    Redis, Served,
};

/// Waits until the server counts `n` blocked clients (`INFO clients`), at most 10 s.
fn await_blocked(control: &mut TcpStream, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !call(control, &["info", "clients"]).contains(&want) {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The script, on the server at `port`; every reply in order (times rounded to whether they
/// waited).
fn blocking_script(port: u16) -> Vec<String> {
    let mut log = Vec::new();
    let connect = || connect_to(port, Duration::from_secs(20));
    let mut control = connect();
    let mut c: Vec<TcpStream> = (0..6).map(|_| connect()).collect();
    // Three clients block on `q` in turn; one push of three serves them in that order.
    send_command(&mut c[0], &["blpop", "q", "0"]);
    await_blocked(&mut control, 1);
    send_command(&mut c[1], &["blpop", "other", "q", "0"]);
    await_blocked(&mut control, 2);
    send_command(&mut c[2], &["brpop", "q", "0"]);
    await_blocked(&mut control, 3);
    log.push(call(&mut control, &["rpush", "q", "a", "b", "c"]));
    for conn in c.iter_mut().take(3) {
        log.extend(read_replies(conn, 1));
    }
    log.push(call(&mut control, &["llen", "q"]));
    // A timeout: a null array after about 0.3 s.
    let started = Instant::now();
    log.push(call(&mut c[3], &["blpop", "empty", "0.3"]));
    let waited = started.elapsed();
    log.push(format!(
        "waited {}",
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(10)
    ));
    // Errors at once: a wrong type, bad timeouts.
    log.push(call(&mut control, &["set", "s", "x"]));
    log.push(call(&mut c[3], &["blpop", "s", "1"]));
    log.push(call(&mut c[3], &["blpop", "q", "-1"]));
    log.push(call(&mut c[3], &["blpop", "q", "x"]));
    // Inside MULTI a blocking pop does not block.
    log.push(call(&mut c[3], &["multi"]));
    log.push(call(&mut c[3], &["blpop", "q", "0"]));
    log.push(call(&mut c[3], &["exec"]));
    // A pipelined request waits behind the blocked one.
    send_command(&mut c[4], &["brpoplpush", "src", "dst", "0"]);
    send_command(&mut c[4], &["lrange", "dst", "0", "-1"]);
    await_blocked(&mut control, 1);
    log.push(call(&mut control, &["lpush", "src", "x"]));
    log.extend(read_replies(&mut c[4], 2));
    // Sorted sets block too.
    send_command(&mut c[4], &["bzpopmin", "z", "0"]);
    await_blocked(&mut control, 1);
    log.push(call(&mut control, &["zadd", "z", "2", "m2", "1", "m1"]));
    log.extend(read_replies(&mut c[4], 1));
    send_command(
        &mut c[4],
        &["bzmpop", "0", "2", "z", "z2", "max", "count", "5"],
    );
    log.extend(read_replies(&mut c[4], 1));
    send_command(&mut c[4], &["blmpop", "0", "1", "l", "right", "count", "2"]);
    await_blocked(&mut control, 1);
    log.push(call(&mut control, &["rpush", "l", "1", "2", "3"]));
    log.extend(read_replies(&mut c[4], 1));
    // A client that leaves while blocked takes nothing.
    send_command(&mut c[5], &["blpop", "d", "0"]);
    await_blocked(&mut control, 1);
    drop(c.remove(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !call(&mut control, &["info", "clients"]).contains("blocked_clients:0\r\n") {
        assert!(
            Instant::now() < deadline,
            "the closed client stayed blocked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    log.push(call(&mut control, &["lpush", "d", "v"]));
    log.push(call(&mut control, &["llen", "d"]));
    // A key renamed onto the awaited one serves it.
    send_command(&mut c[0], &["blpop", "target", "0"]);
    await_blocked(&mut control, 1);
    log.push(call(&mut control, &["rpush", "source", "r1", "r2"]));
    log.push(call(&mut control, &["rename", "source", "target"]));
    log.extend(read_replies(&mut c[0], 1));
    log.push(call(&mut control, &["lrange", "target", "0", "-1"]));
    log
}

/// The blocking pops reply as Redis 7.0's do, in Redis's order: three clients blocked on one
/// key in turn get the three elements of one push in that order (the `BRPOP` from the right);
/// a timeout replies a null array after it; a wrong type and bad timeouts fail at once; inside
/// `MULTI` nothing blocks; a pipelined request waits behind a blocked one; `BZPOPMIN`,
/// `BZMPOP`, `BLMPOP` are served by the writes that follow; a client that disconnects while
/// blocked takes nothing; a `RENAME` onto an awaited key serves it. Catches waking every
/// waiter (the order breaks), a lost wake-up, a timeout never sent, the next pipelined
/// request run before the blocked one, a closed connection left in the table.
#[test]
fn blocking_pops_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = blocking_script(redis.1);
    let dir = temp_dir("blocking");
    let served = Served::start_with(&dir.0, &["--cores", "2"]);
    let got = blocking_script(served.port);
    assert_eq!(got, want);
}

/// redis-py drives every collection type (tests/py/collections_client.py), with blocking
/// pops served from another thread. Catches a reply redis-py cannot parse or maps to another
/// value (a score's text, a nested array's shape).
#[test]
fn redis_py_drives_the_collections() {
    let python = "/usr/bin/python3";
    if !have(python, &["-c", "import redis"]) {
        return;
    }
    let dir = temp_dir("redis-py-collections");
    let served = Served::start(&dir.0);
    run_client_script(python, "collections_client.py", served.port);
}

/// Collections written with acknowledged commands (many elements: trees; some popped, some
/// keys deleted or expired away) are exactly there after a SIGKILL and a restart, and the
/// store checks clean. Catches a tree change acknowledged before it is durable, a deleted
/// collection's tree coming back, a moved representation losing elements at recovery.
#[test]
fn collections_survive_sigkill() {
    let dir = temp_dir("collections-kill");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let mut script: Vec<Vec<String>> = Vec::new();
    let s = |x: &str| x.to_string();
    for k in 0..6 {
        for chunk in 0..4 {
            let mut hset = vec![s("hset"), format!("h{k}")];
            let mut rpush = vec![s("rpush"), format!("l{k}")];
            let mut zadd = vec![s("zadd"), format!("z{k}")];
            let mut sadd = vec![s("sadd"), format!("s{k}")];
            for i in chunk * 50..(chunk + 1) * 50 {
                hset.extend([format!("f{i}"), format!("value-{k}-{i}")]);
                rpush.push(format!("e{i}"));
                zadd.extend([format!("{}", (i * 7) % 101), format!("m{i}")]);
                sadd.push(format!("m{i}"));
            }
            script.extend([hset, rpush, zadd, sadd]);
        }
        script.push(vec![s("lpop"), format!("l{k}"), s("25")]);
        script.push(vec![s("zremrangebyrank"), format!("z{k}"), s("0"), s("9")]);
    }
    script.push(vec![s("del"), s("h5"), s("l5")]);
    script.push(vec![s("pexpire"), s("z5"), s("1")]);
    let n = script.len();
    for cmd in &script {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        send_command(&mut conn, &args);
    }
    let replies = read_replies(&mut conn, n);
    assert!(replies.iter().all(|r| !r.starts_with('-')), "{replies:?}");
    std::thread::sleep(Duration::from_millis(20)); // z5 expires
    drop(served); // SIGKILL
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    for k in 0..5 {
        let h = call(&mut conn, &["hlen", &format!("h{k}")]);
        assert_eq!(h, ":200\r\n", "h{k}");
        assert_eq!(
            call(&mut conn, &["hget", &format!("h{k}"), "f137"]),
            format!("$11\r\nvalue-{k}-137\r\n")
        );
        assert_eq!(
            call(&mut conn, &["llen", &format!("l{k}")]),
            ":175\r\n",
            "l{k}"
        );
        assert_eq!(
            call(&mut conn, &["lindex", &format!("l{k}"), "0"]),
            "$3\r\ne25\r\n"
        );
        assert_eq!(
            call(&mut conn, &["zcard", &format!("z{k}")]),
            ":190\r\n",
            "z{k}"
        );
        assert_eq!(
            call(&mut conn, &["scard", &format!("s{k}")]),
            ":200\r\n",
            "s{k}"
        );
        assert_eq!(
            call(&mut conn, &["sismember", &format!("s{k}"), "m199"]),
            ":1\r\n"
        );
    }
    assert_eq!(call(&mut conn, &["exists", "h5", "l5", "z5"]), ":0\r\n");
    assert_eq!(call(&mut conn, &["scard", "s5"]), ":200\r\n");
    drop(conn);
    let (code, rest) = served.terminate();
    assert_eq!(code, Some(0), "{rest}");
    let check = Command::new(env!("CARGO_BIN_EXE_tamer"))
        .arg("check")
        .arg(dir.0.join("tamer.db"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// redis-cli, unchanged, on each type: its text for hashes, lists, sets, sorted sets with
/// scores, a blocking pop that times out, `TYPE`. Catches a reply framed or typed so that a
/// real client prints it otherwise.
#[test]
fn redis_cli_shows_the_collections() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let dir = temp_dir("cli-collections");
    let served = Served::start(&dir.0);
    let p = served.port;
    assert_eq!(redis_cli(p, &["hset", "h", "a", "1", "b", "2"]), "2");
    assert_eq!(redis_cli(p, &["hget", "h", "b"]), "2");
    assert_eq!(redis_cli(p, &["rpush", "l", "x", "y", "z"]), "3");
    assert_eq!(redis_cli(p, &["lrange", "l", "0", "-1"]), "x\ny\nz");
    assert_eq!(redis_cli(p, &["sadd", "s", "m"]), "1");
    assert_eq!(redis_cli(p, &["smembers", "s"]), "m");
    assert_eq!(redis_cli(p, &["zadd", "z", "1.5", "a", "2", "b"]), "2");
    assert_eq!(
        redis_cli(p, &["zrange", "z", "0", "-1", "withscores"]),
        "a\n1.5\nb\n2"
    );
    assert_eq!(redis_cli(p, &["zscore", "z", "a"]), "1.5");
    assert_eq!(redis_cli(p, &["blpop", "none", "0.1"]), "");
    assert_eq!(redis_cli(p, &["type", "z"]), "zset");
    assert_eq!(
        redis_cli(p, &["lpush", "h", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let (code, rest) = served.terminate();
    assert_eq!(code, Some(0), "{rest}");
}
