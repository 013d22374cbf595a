//! The collection types end to end: the real `tamer serve` and a real `redis-server` given the
//! same script of blocking pops (clients blocked in turn, a push serving them, timeouts,
//! `MULTI`, a client that leaves while blocked), every reply compared byte for byte; and
//! redis-py driving hashes, lists, sets and sorted sets. Without the peers the tests say
//! SKIPPED, unless `TAMER_REQUIRE_PEERS=1` (CI).

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{free_port, read_replies, temp_dir, Served};

fn have(program: &str, args: &[&str]) -> bool {
    let found = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "{program} is missing (scripts/install-peers.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: {program} is not installed (scripts/install-peers.sh)");
    }
    found
}

/// A `redis-server` of our own on a free port; killed on drop.
struct Redis(Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return s;
            }
            Err(e) if Instant::now() > deadline => panic!("connecting: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn send(conn: &mut TcpStream, args: &[&str]) {
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        request.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    conn.write_all(&request).unwrap();
}

fn ask(conn: &mut TcpStream, args: &[&str]) -> String {
    send(conn, args);
    read_replies(conn, 1).remove(0)
}

/// Waits until the server counts `n` blocked clients (`INFO clients`), at most 10 s.
fn await_blocked(control: &mut TcpStream, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ask(control, &["info", "clients"]).contains(&want) {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The script, on the server at `port`; every reply in order (times rounded to whether they
/// waited).
fn blocking_script(port: u16) -> Vec<String> {
    let mut log = Vec::new();
    let mut control = connect(port);
    let mut c: Vec<TcpStream> = (0..6).map(|_| connect(port)).collect();
    // Three clients block on `q` in turn; one push of three serves them in that order.
    send(&mut c[0], &["blpop", "q", "0"]);
    await_blocked(&mut control, 1);
    send(&mut c[1], &["blpop", "other", "q", "0"]);
    await_blocked(&mut control, 2);
    send(&mut c[2], &["brpop", "q", "0"]);
    await_blocked(&mut control, 3);
    log.push(ask(&mut control, &["rpush", "q", "a", "b", "c"]));
    for conn in c.iter_mut().take(3) {
        log.extend(read_replies(conn, 1));
    }
    log.push(ask(&mut control, &["llen", "q"]));
    // A timeout: a null array after about 0.3 s.
    let started = Instant::now();
    log.push(ask(&mut c[3], &["blpop", "empty", "0.3"]));
    let waited = started.elapsed();
    log.push(format!(
        "waited {}",
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3)
    ));
    // Errors at once: a wrong type, bad timeouts.
    log.push(ask(&mut control, &["set", "s", "x"]));
    log.push(ask(&mut c[3], &["blpop", "s", "1"]));
    log.push(ask(&mut c[3], &["blpop", "q", "-1"]));
    log.push(ask(&mut c[3], &["blpop", "q", "x"]));
    // Inside MULTI a blocking pop does not block.
    log.push(ask(&mut c[3], &["multi"]));
    log.push(ask(&mut c[3], &["blpop", "q", "0"]));
    log.push(ask(&mut c[3], &["exec"]));
    // A pipelined request waits behind the blocked one.
    send(&mut c[4], &["brpoplpush", "src", "dst", "0"]);
    send(&mut c[4], &["lrange", "dst", "0", "-1"]);
    await_blocked(&mut control, 1);
    log.push(ask(&mut control, &["lpush", "src", "x"]));
    log.extend(read_replies(&mut c[4], 2));
    // Sorted sets block too.
    send(&mut c[4], &["bzpopmin", "z", "0"]);
    await_blocked(&mut control, 1);
    log.push(ask(&mut control, &["zadd", "z", "2", "m2", "1", "m1"]));
    log.extend(read_replies(&mut c[4], 1));
    send(
        &mut c[4],
        &["bzmpop", "0", "2", "z", "z2", "max", "count", "5"],
    );
    log.extend(read_replies(&mut c[4], 1));
    send(&mut c[4], &["blmpop", "0", "1", "l", "right", "count", "2"]);
    await_blocked(&mut control, 1);
    log.push(ask(&mut control, &["rpush", "l", "1", "2", "3"]));
    log.extend(read_replies(&mut c[4], 1));
    // A client that leaves while blocked takes nothing.
    send(&mut c[5], &["blpop", "d", "0"]);
    await_blocked(&mut control, 1);
    drop(c.remove(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ask(&mut control, &["info", "clients"]).contains("blocked_clients:0\r\n") {
        assert!(
            Instant::now() < deadline,
            "the closed client stayed blocked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    log.push(ask(&mut control, &["lpush", "d", "v"]));
    log.push(ask(&mut control, &["llen", "d"]));
    // A key renamed onto the awaited one serves it.
    send(&mut c[0], &["blpop", "target", "0"]);
    await_blocked(&mut control, 1);
    log.push(ask(&mut control, &["rpush", "source", "r1", "r2"]));
    log.push(ask(&mut control, &["rename", "source", "target"]));
    log.extend(read_replies(&mut c[0], 1));
    log.push(ask(&mut control, &["lrange", "target", "0", "-1"]));
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
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let redis = Redis(child, port);
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
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/py/collections_client.py"
    );
    let out = Command::new(python)
        .arg(script)
        .arg(served.port.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "redis-py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
