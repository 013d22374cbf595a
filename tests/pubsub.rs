//! Pub/sub checked reply for reply against a real redis-server 7.0, over several connections
//! at once: scripted scenarios (confirmations and their counts, messages by channel, pattern
//! and shard channel, RESP2's subscribed context and RESP3 pushes, `PUBSUB`, `RESET`,
//! publishes inside `MULTI` and scripts) and seeded random sequences. After each step every
//! connection sends a `PING` and everything it got before the `PING`'s reply is that step's
//! record, so no wait depends on timing. Where Redis's order is its hash tables' (`PUBSUB
//! CHANNELS`, an `UNSUBSCRIBE` of everything, a client matching by several patterns) the
//! records are compared as sets. Each run prints its seed; `TAMER_PUBSUB_SEED` replays one.

mod common;

use std::io::Read;

use common::conn::Conn;
use common::{have, temp_dir, Redis, Served};

/// Connections each scenario uses; those listed in [`RESP3`] switch with `HELLO 3` first.
const CONNS: usize = 3;
const RESP3: &[usize] = &[2];

/// A step: the connection (0-based) and the command it sends.
type Step = (usize, &'static [&'static str]);

const SCENARIOS: &[Step] = &[
    (0, &["SUBSCRIBE", "news", "sport"]),
    (0, &["SUBSCRIBE", "news"]),
    (1, &["PUBLISH", "news", "hello"]),
    (1, &["PUBLISH", "nobody", "x"]),
    (0, &["PSUBSCRIBE", "n*", "s?ort", "[ab]"]),
    (1, &["PUBLISH", "news", "twice"]),
    (1, &["PUBLISH", "sport", "goal"]),
    (1, &["PUBLISH", "a", "letter"]),
    (0, &["GET", "k"]),
    (0, &["SET", "k", "v"]),
    (0, &["PING"]),
    (0, &["PING", "hi"]),
    (0, &["SUBSCRIBE"]),
    (0, &["PSUBSCRIBE"]),
    (0, &["UNSUBSCRIBE", "nothere"]),
    (1, &["PUBSUB", "NUMSUB", "news", "sport", "none"]),
    (1, &["PUBSUB", "NUMSUB"]),
    (1, &["PUBSUB", "NUMPAT"]),
    (1, &["PUBSUB", "CHANNELS"]),
    (1, &["PUBSUB", "CHANNELS", "n*"]),
    (1, &["PUBSUB", "CHANNELS", "zzz"]),
    (1, &["PUBSUB", "NOSUCH"]),
    (1, &["PUBSUB"]),
    (1, &["PUBLISH", "news"]),
    (2, &["SUBSCRIBE", "news"]),
    (2, &["GET", "k"]),
    (1, &["PUBLISH", "news", "to three"]),
    (2, &["PING"]),
    (2, &["PSUBSCRIBE", "*"]),
    (1, &["PUBLISH", "other", "star"]),
    (2, &["PUNSUBSCRIBE", "*"]),
    (2, &["UNSUBSCRIBE", "news"]),
    (2, &["UNSUBSCRIBE"]),
    (2, &["PUNSUBSCRIBE"]),
    (0, &["UNSUBSCRIBE", "news"]),
    (0, &["PUNSUBSCRIBE", "n*"]),
    (1, &["PUBLISH", "news", "pattern gone"]),
    (0, &["PUNSUBSCRIBE", "s?ort"]),
    (0, &["PUNSUBSCRIBE", "[ab]"]),
    (0, &["UNSUBSCRIBE", "sport"]),
    (0, &["GET", "k"]),
    (0, &["SSUBSCRIBE", "shard1", "shard2"]),
    (0, &["SUBSCRIBE", "plain"]),
    (1, &["SPUBLISH", "shard1", "s-msg"]),
    (1, &["PUBLISH", "shard1", "not to shard"]),
    (1, &["PUBSUB", "SHARDCHANNELS"]),
    (1, &["PUBSUB", "SHARDCHANNELS", "*1"]),
    (1, &["PUBSUB", "SHARDNUMSUB", "shard1", "x"]),
    (0, &["SUNSUBSCRIBE", "shard1"]),
    (0, &["SUNSUBSCRIBE"]),
    (0, &["UNSUBSCRIBE"]),
    (0, &["PING"]),
    (0, &["SUBSCRIBE", "r"]),
    (0, &["RESET"]),
    (1, &["PUBLISH", "r", "after reset"]),
    (0, &["GET", "k"]),
    (1, &["MULTI"]),
    (1, &["PUBLISH", "m", "queued 1"]),
    (1, &["PUBLISH", "m", "queued 2"]),
    (0, &["SUBSCRIBE", "m"]),
    (1, &["EXEC"]),
    (
        1,
        &[
            "EVAL",
            "return redis.call('publish', 'm', 'from a script')",
            "0",
        ],
    ),
    (2, &["SUBSCRIBE", "m"]),
    (1, &["PUBLISH", "m", "to both"]),
    (2, &["HELLO", "2"]),
    (1, &["PUBLISH", "m", "resp2 now"]),
    (2, &["GET", "k"]),
    (0, &["UNSUBSCRIBE", "m"]),
    (1, &["MULTI"]),
    (1, &["SUBSCRIBE", "inmulti", "second"]),
    (1, &["GET", "k"]),
    (1, &["SSUBSCRIBE", "denied"]),
    (1, &["UNSUBSCRIBE", "nothere"]),
    (1, &["EXEC"]),
    (1, &["UNSUBSCRIBE"]),
    (1, &["SUBSCRIBE", "a", "b", "c"]),
    (1, &["UNSUBSCRIBE", "a", "b", "c", "d"]),
];

/// Whether Redis orders this step's replies by its hash tables.
fn unordered(args: &[&str]) -> bool {
    let name = args[0].to_ascii_uppercase();
    let bare_unsubscribe = args.len() == 1 && name.ends_with("UNSUBSCRIBE");
    let listing = name == "PUBSUB"
        && args.get(1).is_some_and(|s| {
            s.eq_ignore_ascii_case("channels") || s.eq_ignore_ascii_case("shardchannels")
        });
    bare_unsubscribe || listing
}

/// A record compared as a set: its replies (and, inside each array, its lines) sorted, and
/// the counts of (un)subscribe confirmations left out (they follow the order).
fn as_set(replies: &[String]) -> Vec<String> {
    let mut out: Vec<String> = replies
        .iter()
        .map(|r| {
            let mut lines: Vec<&str> = r.split("\r\n").collect();
            if r.contains("unsubscribe\r\n") {
                lines.retain(|l| !l.starts_with(':'));
            }
            lines.sort_unstable();
            lines.join("|")
        })
        .collect();
    out.sort();
    out
}

/// Sorts each run of consecutive pattern messages: one publish reaches a client by each of
/// its matching patterns in Redis's hash order.
fn sort_pattern_runs(record: &mut [String]) {
    let is_pattern = |r: &String| r.contains("$8\r\npmessage\r\n");
    let mut i = 0;
    // Bounded by the record: each pass moves `i` forward.
    while i < record.len() {
        let run = record[i..].iter().take_while(|r| is_pattern(r)).count();
        record[i..i + run].sort();
        i += run.max(1);
    }
}

/// Runs `steps` on fresh connections to `port`: each step's record per connection.
fn run(port: u16, steps: &[(usize, Vec<String>)]) -> Vec<Vec<Vec<String>>> {
    let mut conns: Vec<Conn> = (0..CONNS).map(|_| Conn::new(port)).collect();
    for &c in RESP3 {
        conns[c].send(&["HELLO", "3"]);
        conns[c].next();
    }
    let mut in_multi = [false; CONNS];
    let mut records = Vec::new();
    for (c, args) in steps {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let name = refs[0].to_ascii_uppercase();
        conns[*c].send(&refs);
        let mut record = vec![Vec::new(); CONNS];
        if in_multi[*c] && name != "EXEC" && name != "DISCARD" {
            record[*c].push(conns[*c].next());
        } else {
            in_multi[*c] = name == "MULTI";
            record[*c] = if in_multi[*c] {
                vec![conns[*c].next()]
            } else {
                conns[*c].drain()
            };
        }
        if unordered(&refs) {
            record[*c] = as_set(&record[*c]);
        }
        sort_pattern_runs(&mut record[*c]);
        if name == "HELLO" {
            // Its reply names the connection's id, which differs between the servers.
            record[*c] = vec![format!("{} replies", record[*c].len())];
        }
        for (other, conn) in conns.iter_mut().enumerate() {
            if other != *c && !in_multi[other] {
                // Several patterns' messages come in Redis's hash order.
                record[other] = as_set(&conn.drain());
            }
        }
        records.push(record);
    }
    records
}

fn compare(
    steps: &[(usize, Vec<String>)],
    want: &[Vec<Vec<String>>],
    got: &[Vec<Vec<String>>],
    what: &str,
) {
    for (i, (step, (w, g))) in steps.iter().zip(want.iter().zip(got)).enumerate() {
        assert_eq!(
            w, g,
            "{what}: step {i}, connection {} sent {:?}: redis-server's records (per connection) \
             left, tamer's right",
            step.0, step.1
        );
    }
}

fn owned(steps: &[Step]) -> Vec<(usize, Vec<String>)> {
    steps
        .iter()
        .map(|(c, a)| (*c, a.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// Mutations caught (each fails a step): a confirmation's count off by kind (shard channels
/// counted with channels), a pattern message without its pattern, a message sent to a
/// RESP2 client as a push, the subscribed context letting GET through or refusing PING, a
/// publish counted once per client instead of per subscription, a MULTI's publish sent
/// before EXEC or twice, RESET leaving a subscription, HELLO 2 not changing the frames.
#[test]
fn pubsub_scenarios_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let steps = owned(SCENARIOS);
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("pubsub-scenarios");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(&steps, &want, &got, "pub/sub scenarios");
}

/// A xorshift generator, seeded.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

const CHANNELS: &[&str] = &["a", "b", "news.1", "news.2", "x"];
const PATTERNS: &[&str] = &["*", "news.*", "n?ws*", "[ab]", "x"];

fn random_step(rng: &mut Rng) -> (usize, Vec<String>) {
    let c = rng.below(CONNS as u64) as usize;
    let some = |rng: &mut Rng, from: &[&str]| -> Vec<String> {
        (0..rng.below(3))
            .map(|_| rng.pick(from).to_string())
            .collect()
    };
    let one = |rng: &mut Rng, from: &[&str]| vec![rng.pick(from).to_string()];
    let (name, rest): (&str, Vec<String>) = match rng.below(14) {
        0 | 1 => (
            "SUBSCRIBE",
            [one(rng, CHANNELS), some(rng, CHANNELS)].concat(),
        ),
        2 => ("UNSUBSCRIBE", some(rng, CHANNELS)),
        3 => (
            "PSUBSCRIBE",
            [one(rng, PATTERNS), some(rng, PATTERNS)].concat(),
        ),
        4 => ("PUNSUBSCRIBE", some(rng, PATTERNS)),
        5 => ("SSUBSCRIBE", one(rng, CHANNELS)),
        6 => ("SUNSUBSCRIBE", some(rng, CHANNELS)),
        7..=9 => (
            "PUBLISH",
            vec![rng.pick(CHANNELS).into(), format!("m{}", rng.below(1000))],
        ),
        10 => (
            "SPUBLISH",
            vec![rng.pick(CHANNELS).into(), format!("s{}", rng.below(1000))],
        ),
        11 => ("PUBSUB", vec!["NUMSUB".into(), rng.pick(CHANNELS).into()]),
        12 => ("PUBSUB", vec!["NUMPAT".into()]),
        _ => ("GET", vec!["k".into()]),
    };
    let mut args = vec![name.to_string()];
    args.extend(rest);
    (c, args)
}

/// Seeded random sequences of (un)subscribes and publishes over three connections (one in
/// RESP3). Mutations caught: those of the scenarios, over combinations no list names.
#[test]
fn random_pubsub_sequences_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed = std::env::var("TAMER_PUBSUB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24_024);
    eprintln!("random pub/sub: seed {seed} (TAMER_PUBSUB_SEED replays it)");
    let mut rng = Rng(seed.max(1));
    let steps: Vec<_> = (0..400).map(|_| random_step(&mut rng)).collect();
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("pubsub-random");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(&steps, &want, &got, &format!("random pub/sub, seed {seed}"));
}

/// redis-py's `PubSub` end to end (tests/py/pubsub_client.py). Catches a frame redis-py
/// cannot parse, mail left in the hub of an idle subscriber (nothing wakes the network), or
/// a message lost or reordered in a fan-out.
#[test]
fn redis_py_pubsub_works_unchanged() {
    const PYTHON: &str = "/usr/bin/python3";
    if !have(PYTHON, &["-c", "import redis"]) {
        return;
    }
    let dir = temp_dir("pubsub-redis-py");
    let served = Served::start(&dir.0);
    common::run_client_script(PYTHON, "pubsub_client.py", served.port);
}

/// A subscriber that never reads while 64 MiB are published to it is closed (Redis's
/// `client-output-buffer-limit pubsub`), the server holds no more of its mail, and other
/// clients are served. Checked on both servers. Catches mail that grows without bound, or
/// an overflowed client left open.
#[test]
fn a_subscriber_that_does_not_read_is_closed_past_its_bound() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let dir = temp_dir("pubsub-overflow");
    let served = Served::start(&dir.0);
    for port in [redis.1, served.port] {
        let mut slow = Conn::new(port);
        slow.send(&["SUBSCRIBE", "big"]);
        assert!(slow.next().contains("subscribe"));
        let mut publisher = Conn::new(port);
        let payload = "x".repeat(1 << 20);
        for _ in 0..64 {
            publisher.send(&["PUBLISH", "big", &payload]);
            let n = publisher.next();
            assert!(n == ":1\r\n" || n == ":0\r\n", "{n}");
        }
        // Everything the socket holds, then its end (bounded by the read timeout).
        let mut total = 0usize;
        let mut chunk = vec![0u8; 1 << 20];
        let closed = loop {
            match slow.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(e) => panic!("port {port}: reading after {total} bytes: {e}"),
            }
        };
        assert!(
            closed && total < 48 << 20,
            "port {port}: {total} bytes, then open"
        );
        publisher.send(&["PUBLISH", "big", "after"]);
        assert_eq!(publisher.next(), ":0\r\n", "port {port}");
    }
}

/// `client-output-buffer-limit pubsub` set live: with no bounds a subscriber that reads only
/// after 40 MiB were published to it gets them all; with a 1 MiB hard bound the same
/// subscriber is closed. Checked on both servers. Catches the setting shown but not applied.
#[test]
fn the_pubsub_buffer_limit_is_applied_live() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let dir = temp_dir("pubsub-limit");
    let served = Served::start(&dir.0);
    let payload = "x".repeat(1 << 20);
    for port in [redis.1, served.port] {
        for (limit, kept) in [("pubsub 0 0 0", true), ("pubsub 1mb 0 0", false)] {
            let mut admin = Conn::new(port);
            admin.send(&["CONFIG", "SET", "client-output-buffer-limit", limit]);
            assert_eq!(admin.next(), "+OK\r\n");
            let mut slow = Conn::new(port);
            slow.send(&["SUBSCRIBE", "big"]);
            assert!(slow.next().contains("subscribe"));
            for _ in 0..40 {
                admin.send(&["PUBLISH", "big", &payload]);
                admin.next();
            }
            let frame = format!("*3\r\n$7\r\nmessage\r\n$3\r\nbig\r\n$1048576\r\n{payload}\r\n");
            let want = 40 * frame.len();
            let (mut got, mut chunk) = (0usize, vec![0u8; 1 << 20]);
            // Bounded by the read timeout: every pass reads or ends.
            let open = loop {
                if got >= want {
                    break true;
                }
                match slow.stream.read(&mut chunk) {
                    Ok(0) => break false,
                    Err(_) => break false,
                    Ok(n) => got += n,
                }
            };
            assert_eq!(
                open, kept,
                "port {port}, {limit}: {got} of {want} bytes read"
            );
            assert!(got <= want, "port {port}: more than was published");
        }
    }
}

/// A fan-out to 100 subscribers that read while one more never does: each of the 100 gets
/// every message, in order; the stalled one, also subscribed to a channel flooded with
/// 64 MiB, is closed past its bound (Redis's `client-output-buffer-limit pubsub`) while the
/// others go on; then `PUBLISH` counts the 100. Checked on both servers. Mutations caught: a
/// message lost, duplicated or reordered for some receivers (a shared frame released
/// early), a stalled receiver that holds up the others' delivery (their reads time out), an
/// overflowed receiver still counted or left open.
#[test]
fn a_fan_out_to_100_subscribers_survives_a_stalled_one() {
    const SUBSCRIBERS: usize = 100;
    const MESSAGES: usize = 1280;
    const FLOOD_EVERY: usize = 20;
    let redis = have("redis-server", &["--version"]).then(|| Redis::start().expect("redis"));
    let dir = temp_dir("pubsub-fan-out");
    let served = Served::start(&dir.0);
    let ports: Vec<u16> = redis.iter().map(|r| r.1).chain([served.port]).collect();
    for port in ports {
        let readers: Vec<_> = (0..SUBSCRIBERS)
            .map(|_| {
                let mut c = Conn::new(port);
                c.send(&["SUBSCRIBE", "news"]);
                assert!(c.next().contains("subscribe"), "port {port}");
                std::thread::spawn(move || {
                    for k in 0..MESSAGES {
                        let m = format!("m{k}");
                        let want = format!(
                            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{m}\r\n",
                            m.len()
                        );
                        assert_eq!(c.next(), want, "port {port}: message {k}");
                    }
                    c
                })
            })
            .collect();
        let mut stalled = Conn::new(port);
        stalled.send(&["SUBSCRIBE", "news", "flood"]);
        let mut publisher = Conn::new(port);
        // The stalled client's confirmations, waited for through a count that includes it.
        publisher.send(&["PUBSUB", "NUMSUB", "flood"]);
        assert_eq!(
            publisher.next(),
            "*2\r\n$5\r\nflood\r\n:1\r\n",
            "port {port}"
        );
        let payload = "x".repeat(1 << 20);
        for k in 0..MESSAGES {
            publisher.send(&["PUBLISH", "news", &format!("m{k}")]);
            let n = publisher.next();
            assert!(n == ":101\r\n" || n == ":100\r\n", "port {port}: {n}");
            if k % FLOOD_EVERY == 0 {
                publisher.send(&["PUBLISH", "flood", &payload]);
                let n = publisher.next();
                assert!(n == ":1\r\n" || n == ":0\r\n", "port {port}: {n}");
            }
        }
        // Kept open until the last count.
        let _readers: Vec<Conn> = readers
            .into_iter()
            .map(|r| r.join().expect("a subscriber saw its messages in order"))
            .collect();
        let mut total = 0usize;
        let mut chunk = vec![0u8; 1 << 20];
        // Everything the socket holds, then its end (bounded by the read timeout).
        let closed = loop {
            match stalled.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(e) => panic!("port {port}: reading after {total} bytes: {e}"),
            }
        };
        assert!(closed && total < 48 << 20, "port {port}: {total} bytes");
        publisher.send(&["PUBLISH", "news", "after"]);
        assert_eq!(publisher.next(), ":100\r\n", "port {port}");
    }
}

/// Reads `conn` up to and including `marker`: everything it received.
fn read_until(conn: &mut Conn, marker: &str) -> Vec<String> {
    let mut got = Vec::new();
    // Bounded by the read timeout.
    loop {
        let r = conn.next();
        let done = r == marker;
        got.push(r);
        if done {
            return got;
        }
    }
}

/// `CLIENT REPLY OFF|SKIP|ON` against redis-server, byte for byte: silenced replies and
/// errors, `SKIP` silencing one reply (and nothing while `OFF`), a bad mode's error, and
/// pub/sub's confirmations and messages still delivered while replies are off, `RESET`
/// turning replies on (and replying). Mutations
/// caught: `SKIP` silencing two replies or none, `ON` not replying, confirmations silenced.
#[test]
fn client_reply_silences_replies_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let run = |port: u16| {
        let mut c = Conn::new(port);
        let mut publisher = Conn::new(port);
        for args in [
            &["CLIENT", "REPLY", "OFF"][..],
            &["SET", "a", "1"],
            &["GET", "a"],
            &["GET"],
            &["NOSUCH"],
            &["CLIENT", "REPLY", "ON"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"],
            &["GET", "a"],
            &["INCR", "a"],
            &["CLIENT", "REPLY", "bad"],
            &["CLIENT", "REPLY", "OFF"],
            &["CLIENT", "REPLY", "SKIP"],
            &["GET", "a"],
            &["SUBSCRIBE", "x"],
        ] {
            c.send(args);
        }
        let mut got = read_until(&mut c, "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n");
        publisher.send(&["PUBLISH", "x", "hello"]);
        assert_eq!(publisher.next(), ":1\r\n");
        for args in [
            &["PING"][..],
            &["UNSUBSCRIBE"],
            &["CLIENT", "REPLY", "ON"],
            &["ECHO", "end"],
        ] {
            c.send(args);
        }
        got.extend(read_until(&mut c, "$3\r\nend\r\n"));
        for args in [
            &["CLIENT", "REPLY", "OFF"][..],
            &["GET", "a"],
            &["RESET"],
            &["ECHO", "end2"],
        ] {
            c.send(args);
        }
        got.extend(read_until(&mut c, "$4\r\nend2\r\n"));
        got
    };
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1);
    let dir = temp_dir("pubsub-client-reply");
    let served = Served::start(&dir.0);
    assert_eq!(run(served.port), want);
}
