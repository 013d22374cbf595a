//! `MONITOR` checked line for line against a real redis-server 7.0: one connection monitors
//! while another runs commands (plain, refused, in `MULTI`, scripts and functions with the
//! commands they call, secrets redacted, escapes), and the monitor runs commands of its own.
//! Times and client ports differ between the servers and are left out of the comparison.

mod common;

use common::conn::Conn;
use common::{have, temp_dir, Redis, Served};

type Step = &'static [&'static str];

/// What the other connection sends, in order (each waits for its reply).
const STEPS: &[Step] = &[
    &["SET", "a", "1"],
    &["SELECT", "3"],
    &["GET", "x"],
    &["MULTI"],
    &["SET", "c", "3"],
    &["INCR", "c"],
    &["EXEC"],
    &["SELECT", "0"],
    &["EVAL", "redis.call('set','b','2') return redis.call('get','b')", "0"],
    &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
    &["EVAL", "return redis.pcall('nosuch')", "0"],
    &["FUNCTION", "LOAD", "#!lua name=mon\nredis.register_function('f', function(k) return redis.call('get', k[1]) end)"],
    &["FCALL", "f", "1", "x"],
    &["FCALL_RO", "nosuch", "0"],
    &["FUNCTION", "DELETE", "mon"],
    &["HELLO", "2", "AUTH", "default", "pw"],
    &["AUTH", "a", "b"],
    &["AUTH", "x"],
    &["GET"],
    &["NOSUCH"],
    &["CONFIG", "GET", "port"],
    &["CLIENT", "SETNAME", "c1"],
    &["BLPOP", "l", "0.01"],
    &["ECHO", "a\u{1}\t\"b\\\r\n"],
    &["MULTI"],
    &["GET"],
    &["EXEC"],
    &["RPUSH", "l", "x"],
    &["DEL", "l", "a", "b", "c"],
];

/// Everything the monitor received (its lines and its own replies), times and ports left
/// out.
fn run(port: u16) -> Vec<String> {
    let mut monitor = Conn::new(port);
    monitor.send(&["MONITOR"]);
    let mut got = vec![monitor.next()];
    let mut client = Conn::new(port);
    for step in STEPS {
        client.send(step);
        client.next();
    }
    client.send(&["ECHO", "the end"]);
    client.next();
    read_until(&mut monitor, "\"the end\"", &mut got);
    // The monitor's own commands: shown, except those that touch keys (refused). Each is
    // sent once everything before it arrived, so the order does not depend on timing.
    monitor.send(&["PING"]);
    read_until(&mut monitor, "\"PING\"", &mut got);
    monitor.send(&["GET", "y"]);
    read_until(&mut monitor, "-ERR", &mut got);
    monitor.send(&["RESET"]);
    got.push(monitor.next());
    client.send(&["SET", "after", "reset"]);
    client.next();
    monitor.send(&["PING"]);
    got.push(monitor.next());
    got
}

/// Reads the monitor's lines into `got` up to the first holding `marker`.
fn read_until(monitor: &mut Conn, marker: &str, got: &mut Vec<String>) {
    // Bounded by the read timeout: the marker's line comes.
    loop {
        let line = monitor.next();
        let found = line.contains(marker);
        got.push(normalized(&line));
        if found {
            return;
        }
    }
}

/// A monitor line without its time and with `client` for a client's address.
fn normalized(line: &str) -> String {
    let Some(open) = line.find(" [") else {
        return line.to_string();
    };
    let close = line[open..].find(']').map_or(line.len(), |c| open + c);
    let inside = &line[open + 2..close];
    let (db, who) = inside.split_once(' ').unwrap_or((inside, ""));
    let who = if who == "lua" { "lua" } else { "client" };
    format!("[{db} {who}]{}", &line[close + 1..])
}

/// Mutations caught (each fails a line): a command shown before it ran (SELECT's database),
/// a script or function shown after the commands it called, a refused or queued command
/// shown, EXEC before its commands, an admin command shown, a secret not redacted, an
/// escape otherwise than `sdscatrepr`'s, the monitor allowed to read keys, RESET leaving
/// the client monitoring.
#[test]
fn monitor_shows_what_redis_shows() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1);
    let dir = temp_dir("monitor");
    let served = Served::start(&dir.0);
    let got = run(served.port);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w, g, "line {i}: redis-server's left, tamer's right");
    }
    assert_eq!(want.len(), got.len(), "{want:#?}\n{got:#?}");
}
