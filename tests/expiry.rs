//! Active expiry end to end: the real `tamer serve` on a real store file, raw TCP clients,
//! SIGKILL and restart; between runs the test opens the store itself and counts what is left
//! (user keys by kind, expiry index records, the cursor), so keys are seen removed without
//! any client touching them. Each test names the mutation it catches.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use tamer_server::keyspace::expiry_index::{decode_chunk, Cursor};
use tamer_server::keyspace::{wall_ms, Entry};
use tamer_store::{Db, DbOptions};

mod common;

use common::{read_replies, temp_dir, Served};

/// Sends `requests` (inline commands) pipelined and returns their replies.
fn pipeline(conn: &mut TcpStream, requests: &[String]) -> Vec<String> {
    let mut bytes = Vec::new();
    for r in requests {
        bytes.extend_from_slice(r.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    conn.write_all(&bytes).unwrap();
    read_replies(conn, requests.len())
}

/// Polls `DBSIZE` every 50 ms until it is `keys` (active expiry removed the rest; `DBSIZE`
/// reads no key, so it expires nothing itself), failing after `deadline`.
fn await_dbsize(conn: &mut TcpStream, keys: usize, deadline: Duration) {
    let start = Instant::now();
    let expected = format!(":{keys}\r\n");
    loop {
        let reply = pipeline(conn, &["DBSIZE".into()]).remove(0);
        if reply == expected {
            return;
        }
        assert!(
            start.elapsed() < deadline,
            "DBSIZE still {reply:?} after {deadline:?}, waiting for {keys}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the store holds, read by the test itself with the server stopped.
#[derive(Debug, Default)]
struct Census {
    /// User keys by their name's first byte: `s` short TTL, `l` long TTL, `p` no TTL.
    short: usize,
    long: usize,
    plain: usize,
    /// A short-TTL key still there although its time has passed.
    overdue: usize,
    /// The short-TTL keys stored (store keys).
    short_keys: std::collections::HashSet<Vec<u8>>,
    /// Index entries: (slot, store key).
    entries: Vec<(u64, Vec<u8>)>,
    cursor: Option<Cursor>,
}

fn census(dir: &Path) -> Census {
    let db = Db::open(dir.join("tamer.db"), DbOptions::new(16 << 20).cores(1)).unwrap();
    let now = wall_ms();
    let mut c = Census::default();
    for item in db.cursor() {
        let (key, value) = item.unwrap();
        let (ns, name) = key.split_at(4);
        if ns != [0, 0, 0, 0] {
            match name.first() {
                Some(b's') => {
                    c.short += 1;
                    c.short_keys.insert(key.clone());
                }
                Some(b'l') => c.long += 1,
                _ => c.plain += 1,
            }
            let e = Entry::decode(&value).unwrap();
            c.overdue += usize::from(name[0] == b's' && e.expired(now));
        } else if name.starts_with(b"xc") && name.len() == 15 {
            let slot = u64::from_be_bytes(name[2..10].try_into().unwrap());
            for entry in decode_chunk(&value).unwrap() {
                c.entries.push((slot, entry.store_key));
            }
        }
    }
    c.cursor = db.transaction(Cursor::load).unwrap();
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    db.close().unwrap();
    c
}

/// Writes `short` keys `s{i}` expiring `ttl_ms` (spread over a second) from now, `long`
/// keys `l{i}` with a 10-minute TTL and `plain` keys `p{i}` without, 500 to a `MULTI`/`EXEC`
/// (one durable commit each).
fn write_keys(conn: &mut TcpStream, short: usize, ttl_ms: u64, long: usize, plain: usize) {
    let mut sets = Vec::new();
    for i in 0..short {
        sets.push(format!(
            "SET s{i} v PX {}",
            ttl_ms + (i as u64 * 7919) % 1_000
        ));
    }
    sets.extend((0..long).map(|i| format!("SET l{i} v EX 600")));
    sets.extend((0..plain).map(|i| format!("SET p{i} v")));
    for batch in sets.chunks(500) {
        let mut requests = vec!["MULTI".to_string()];
        requests.extend_from_slice(batch);
        requests.push("EXEC".into());
        let replies = pipeline(conn, &requests);
        let exec = replies.last().unwrap();
        assert!(
            exec.starts_with(&format!("*{}\r\n+OK", batch.len())),
            "{exec:.40}"
        );
    }
}

/// TTLs survive a SIGKILL and a restart (in `commit` mode every acknowledged `SET ... PX`
/// is durable with its index entry), and the restarted server then removes the keys without
/// any client reading them. Catches index entries written outside the value's transaction
/// (lost at the kill), an expirer that does not resume after a restart, or a TTL lost.
#[test]
fn ttls_survive_sigkill_and_expire_actively_after_restart() {
    let dir = temp_dir("restart");
    let served = Served::start_with(&dir.0, &["--cache-size", "32mb"]);
    write_keys(&mut served.connect(), 3_000, 3_000, 500, 500);
    drop(served); // SIGKILL, before any of them was due
    let served = Served::start_with(&dir.0, &["--cache-size", "32mb"]);
    let mut conn = served.connect();
    let ttls = pipeline(&mut conn, &["PTTL l7".into(), "PTTL p7".into()]);
    let long_ms: i64 = ttls[0][1..ttls[0].len() - 2].parse().unwrap();
    assert!(long_ms > 590_000, "{ttls:?}");
    assert_eq!(ttls[1], ":-1\r\n");
    // The last short key is due ≈ 4 s after it was written; 30 s bounds a stalled machine.
    await_dbsize(&mut conn, 1_000, Duration::from_secs(30));
    drop(conn);
    assert_eq!(served.terminate().0, Some(0));
    let c = census(&dir.0);
    assert_eq!((c.short, c.long, c.plain), (0, 500, 500), "{c:?}");
    assert!(
        c.entries.iter().all(|(_, k)| k[4] == b'l'),
        "only long TTLs indexed"
    );
}

/// SIGKILLs while active expiry is at work lose nothing and leave no index entry that would
/// never be processed. 20,000 keys come due while the server is down; then it is restarted
/// and SIGKILLed after 20 ms of passes, 40 ms, ... up to 1.28 s or until the keys are gone,
/// the test counting what is left after each kill (at least one kill must land with part of
/// the keys gone: mid-work). At the end every short-TTL key is gone, every other key is
/// there, and every entry left is at or after the cursor. Catches a chunk deleted apart from
/// its keys or the cursor moved apart from its chunk (entries lost or left behind the
/// cursor), or an expirer that cannot resume.
#[test]
fn kills_mid_pass_lose_nothing_and_leak_no_entry() {
    let dir = temp_dir("midpass");
    let served = Served::start_with(&dir.0, &["--cache-size", "32mb"]);
    let ttl_ms = 8_000;
    let written = Instant::now();
    write_keys(&mut served.connect(), 20_000, ttl_ms, 1_000, 1_000);
    drop(served); // SIGKILL, before the keys are due
    let write_ms = written.elapsed().as_millis() as u64;
    assert!(write_ms < ttl_ms, "writing took {write_ms} ms");
    assert_eq!(census(&dir.0).short, 20_000);
    // Every short TTL has passed and its slot ended: all 20,000 are due at the restart. The
    // last key was set by `write_ms` with a TTL of at most `ttl_ms` + 999; its 1 s slot ends
    // by 1 s later, and the expirer takes a slot 250 ms after its end (+ 100 ms of margin).
    let due = Duration::from_millis(write_ms + ttl_ms + 999 + 1_000 + 250 + 100);
    std::thread::sleep(due.saturating_sub(written.elapsed()));
    let mut partial = 0;
    let mut left = Vec::new();
    // Runs grow until the keys are gone, so a slow machine still sees kills mid-work.
    for run_ms in [20, 40, 80, 160, 320, 640, 1_280] {
        let served = Served::start_with(&dir.0, &["--cache-size", "32mb"]);
        std::thread::sleep(Duration::from_millis(run_ms));
        drop(served); // SIGKILL
        let c = census(&dir.0);
        assert_eq!(
            (c.long, c.plain),
            (1_000, 1_000),
            "after {run_ms} ms: {c:?}"
        );
        check_no_entry_behind_the_cursor(&c);
        partial += usize::from(c.short > 0 && c.short < 20_000);
        left.push(c.short);
        if c.short == 0 {
            break;
        }
    }
    let served = Served::start_with(&dir.0, &["--cache-size", "32mb"]);
    await_dbsize(&mut served.connect(), 2_000, Duration::from_secs(30));
    assert_eq!(served.terminate().0, Some(0));
    let c = census(&dir.0);
    assert_eq!((c.short, c.long, c.plain, c.overdue), (0, 1_000, 1_000, 0));
    check_no_entry_behind_the_cursor(&c);
    assert!(c.entries.iter().all(|(_, k)| k[4] == b'l'));
    eprintln!("short-TTL keys left after each kill: {left:?} (written in {write_ms} ms)");
    assert!(
        partial > 0,
        "no kill landed mid-work: short keys left {left:?}"
    );
}

/// Every index entry is at or after the cursor's slot, so the expirer will reach it, and
/// every short-TTL key still stored has its entry.
fn check_no_entry_behind_the_cursor(c: &Census) {
    let cursor = c.cursor.expect("the expirer saved its cursor");
    for (slot, _) in &c.entries {
        assert!(
            *slot >= cursor.slot,
            "an entry in slot {slot}, behind {cursor:?}"
        );
    }
    let indexed: std::collections::HashSet<&[u8]> = c.entries.iter().map(|(_, k)| &k[..]).collect();
    for key in &c.short_keys {
        assert!(
            indexed.contains(&key[..]),
            "{key:?} stored without its entry"
        );
    }
}
