//! `CLIENT PAUSE` and `CLIENT UNPAUSE` checked reply for reply against a real redis-server
//! 7.0, over several connections: in `WRITE` mode writes, `PUBLISH`, scripts, an `EXEC` of
//! writes and the queueing of a write wait while reads, read-only scripts and an `EXEC` of
//! reads go on; the waiting clients count as blocked, `CLIENT UNBLOCK` cannot take them out,
//! `CLIENT UNPAUSE` lets them run in order; in `ALL` mode every command waits for the end;
//! a pause given while one is in force keeps the later end and the stronger mode; active
//! expiry stops meanwhile; bad arguments get Redis's errors. No wait depends on timing: a
//! test polls `INFO` until the clients it sent wait, and asserts only lower bounds on time.

mod common;

use std::time::{Duration, Instant};

use common::conn::Conn;
use common::{have, temp_dir, Redis, Served};

/// Sends `args` on `conn` and returns its reply.
fn ask(conn: &mut Conn, args: &[&str]) -> String {
    conn.send(args);
    conn.next()
}

/// Polls `INFO clients` on `conn` until `blocked_clients` is `n` (bounded: 20 s).
fn wait_blocked(conn: &mut Conn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let want = format!("blocked_clients:{n}\r\n");
    while !ask(conn, &["INFO", "clients"]).contains(&want) {
        assert!(Instant::now() < deadline, "never {want:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `WRITE` scenario on `port`: every reply, in order. `unblock`: also sends `CLIENT
/// UNBLOCK` for a postponed client (redis-server 7.0.15 crashes on it: tamer answers 0).
fn write_mode(port: u16, unblock: bool) -> Vec<String> {
    let mut a = Conn::new(port);
    let mut b = Conn::new(port);
    let mut c = Conn::new(port);
    let mut e = Conn::new(port);
    let mut got = vec![ask(&mut a, &["SET", "k", "v0"])];
    let b_id = ask(&mut b, &["CLIENT", "ID"]);
    let b_id = b_id.trim_start_matches(':').trim_end().to_string();
    got.push(ask(&mut a, &["CLIENT", "PAUSE", "100000", "WRITE"]));
    b.send(&["SET", "k", "v1"]);
    b.send(&["GET", "k"]); // behind the write: waits with it
    wait_blocked(&mut a, 1);
    c.send(&["PUBLISH", "ch", "m"]);
    wait_blocked(&mut a, 2);
    got.push(ask(&mut a, &["GET", "k"]));
    got.push(ask(
        &mut a,
        &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "k"],
    ));
    got.push(ask(&mut a, &["MULTI"]));
    got.push(ask(&mut a, &["GET", "k"]));
    got.push(ask(&mut a, &["EXEC"]));
    got.push(ask(&mut e, &["MULTI"]));
    e.send(&["SET", "k", "v2"]);
    wait_blocked(&mut a, 3);
    if unblock {
        assert_eq!(ask(&mut a, &["CLIENT", "UNBLOCK", &b_id]), ":0\r\n");
    }
    let mut f = Conn::new(port);
    f.send(&["EVAL", "return 1", "0"]);
    wait_blocked(&mut a, 4);
    got.push(ask(&mut a, &["CLIENT", "UNPAUSE"]));
    got.push(f.next());
    got.push(b.next());
    got.push(b.next());
    got.push(c.next());
    got.push(e.next());
    got.push(ask(&mut e, &["EXEC"]));
    got.push(ask(&mut a, &["GET", "k"]));
    got.push(
        ask(&mut a, &["INFO", "clients"])
            .lines()
            .filter(|l| l.starts_with("blocked"))
            .collect(),
    );
    got
}

/// `ALL` mode, a pause combined with one in force, and `CLIENT PAUSE`'s errors on `port`:
/// every reply, in order. Asserts the lower bounds of the waits.
fn all_mode(port: u16) -> Vec<String> {
    let mut a = Conn::new(port);
    let mut b = Conn::new(port);
    let mut got = vec![ask(&mut a, &["CLIENT", "PAUSE", "400", "ALL"])];
    let started = Instant::now();
    got.push(ask(&mut b, &["PING"]));
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "port {port}: PING ran during ALL"
    );
    // WRITE for 1.2 s, then ALL for 10 ms: ALL until 1.2 s.
    got.push(ask(&mut a, &["CLIENT", "PAUSE", "1200", "WRITE"]));
    let started = Instant::now();
    got.push(ask(&mut a, &["CLIENT", "PAUSE", "10", "ALL"]));
    got.push(ask(&mut b, &["GET", "k"]));
    assert!(
        started.elapsed() >= Duration::from_millis(1_000),
        "port {port}: a pause shortened"
    );
    for args in [
        &["CLIENT", "PAUSE", "abc", "foo"][..],
        &["CLIENT", "PAUSE", "abc"],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "sometimes"],
        &["CLIENT", "PAUSE", "1", "WRITE", "x"],
        &["CLIENT", "PAUSE"],
        &["CLIENT", "UNPAUSE", "1"],
        &["CLIENT", "PAUSE", "0", "write"],
        &["CLIENT", "UNPAUSE"],
    ] {
        got.push(ask(&mut a, args));
    }
    got
}

/// Active expiry makes no pass while a pause is in force: a key past its time is still
/// counted; once the pause ends it goes. Returns the counts.
fn expiry(port: u16) -> Vec<String> {
    let mut a = Conn::new(port);
    let mut got = vec![ask(&mut a, &["FLUSHALL"])];
    got.push(ask(&mut a, &["SET", "t", "1", "PX", "50"]));
    got.push(ask(&mut a, &["CLIENT", "PAUSE", "100000", "WRITE"]));
    std::thread::sleep(Duration::from_millis(2_000));
    got.push(ask(&mut a, &["DBSIZE"]));
    got.push(ask(&mut a, &["CLIENT", "UNPAUSE"]));
    // Bounded: removed within a few passes of either server's expiry.
    let deadline = Instant::now() + Duration::from_secs(20);
    while ask(&mut a, &["DBSIZE"]) != ":0\r\n" {
        assert!(Instant::now() < deadline, "port {port}: never expired");
        std::thread::sleep(Duration::from_millis(50));
    }
    got
}

/// Mutations caught: a write, `PUBLISH` or `EVAL` run during a `WRITE` pause (its reply
/// comes early, `GET` sees `v1`), a read or `EXEC` of reads held back (the test waits),
/// a write queued in `MULTI` during the pause, postponed clients not counted as blocked or
/// released by `CLIENT UNBLOCK` (tamer only), `CLIENT UNPAUSE` that loses or reorders their requests.
#[test]
fn write_pause_holds_back_what_redis_holds_back() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    drop(redis.connect());
    let want = write_mode(redis.1, false);
    let dir = temp_dir("pause-write");
    let served = Served::start(&dir.0);
    assert_eq!(
        write_mode(served.port, true),
        want,
        "tamer's, then redis-server's"
    );
}

/// Mutations caught: a command run during `ALL`, a pause that a later shorter or weaker one
/// shortens or weakens, an error text or order not Redis's.
#[test]
fn all_pause_and_combined_pauses_as_redis() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    drop(redis.connect());
    let want = all_mode(redis.1);
    let dir = temp_dir("pause-all");
    let served = Served::start(&dir.0);
    assert_eq!(all_mode(served.port), want, "tamer's, then redis-server's");
}

/// Mutation caught: the expirer removing keys during a pause (DBSIZE 0 before the unpause).
#[test]
fn no_active_expiry_during_a_pause() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().unwrap();
    drop(redis.connect());
    let want = expiry(redis.1);
    let dir = temp_dir("pause-expiry");
    let served = Served::start(&dir.0);
    assert_eq!(expiry(served.port), want, "tamer's, then redis-server's");
}
