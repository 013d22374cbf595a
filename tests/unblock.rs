//! `CLIENT UNBLOCK` checked reply for reply against a real redis-server 7.0: a client
//! blocked in `BLPOP`, `BZPOPMIN` and `BLMOVE` is unblocked with its timeout reply or
//! Redis's error, then serves its next request; a client that is not blocked, an unknown
//! id and bad arguments get Redis's replies.

mod common;

use common::conn::Conn;
use common::{have, temp_dir, Redis, Served};

/// Every reply of both connections, in order, with `{id}` standing for the blocked
/// client's id.
fn run(port: u16) -> Vec<String> {
    let mut blocked = Conn::new(port);
    let mut other = Conn::new(port);
    blocked.send(&["CLIENT", "ID"]);
    let id = blocked.next();
    let id = id.trim_start_matches(':').trim_end().to_string();
    let mut got = Vec::new();
    let ask = |conn: &mut Conn, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.replace("{id}", &id)).collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        conn.send(&refs);
        conn.next()
    };
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "{id}"]));
    for (pop, reason) in [
        (&["BLPOP", "nolist", "0"][..], None),
        (&["BZPOPMIN", "nozset", "0"][..], Some("ERROR")),
        (
            &["BLMOVE", "nolist", "dst", "LEFT", "RIGHT", "0"][..],
            Some("TIMEOUT"),
        ),
        (&["BLPOP", "nolist", "nolist2", "0"][..], Some("error")),
    ] {
        blocked.send(pop);
        // A request sent while blocked waits for the unblocking.
        blocked.send(&["ECHO", "after"]);
        // Bounded: the other client polls until the first is blocked (it may not be yet).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut args = vec!["CLIENT", "UNBLOCK", "{id}"];
            args.extend(reason);
            let reply = ask(&mut other, &args);
            if reply == ":1\r\n" || std::time::Instant::now() > deadline {
                got.push(reply);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        got.push(blocked.next());
        got.push(blocked.next());
    }
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "{id}", "ERROR"]));
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "999999"]));
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "-1"]));
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "x"]));
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK", "{id}", "BAD"]));
    got.push(ask(
        &mut other,
        &["CLIENT", "UNBLOCK", "{id}", "ERROR", "extra"],
    ));
    got.push(ask(&mut other, &["CLIENT", "UNBLOCK"]));
    got
}

/// Mutations caught: an unblocked client left waiting or given the other reply, its next
/// request lost or run before the unblocking, `:1` for a client that was not blocked, an
/// argument error other than Redis's.
#[test]
fn client_unblock_replies_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1);
    let dir = temp_dir("unblock");
    let served = Served::start(&dir.0);
    let got = run(served.port);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w, g, "reply {i}: redis-server's left, tamer's right");
    }
    assert_eq!(want.len(), got.len());
}
