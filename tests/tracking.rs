//! Client-side caching (`CLIENT TRACKING`) checked push for push against a real
//! redis-server 7.0: several connections track in each mode (default, `NOLOOP`, `OPTIN`,
//! `BCAST` with prefixes, RESP2 with `REDIRECT` to a subscribed connection) while steps run
//! on one of them; after each step every connection's pushes and messages so far are taken
//! (everything received up to a `PING`'s reply, so no wait depends on timing) and compared
//! with redis-server's. Scripted scenarios cover the options and their errors, each mode's
//! invalidations, `MULTI`, scripts, expiry, flushes, broken redirects and `RESET`; seeded
//! random sequences cover the keyed commands in combinations no list names. Each run prints
//! its seed; `TAMER_TRACKING_SEED` replays one.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::conn::Conn;
use common::table::{entries, invocation, sorted, unordered, without_short_ttls, Entry};
use common::{have, temp_dir, Redis, Served};
use rand::SeedableRng;

/// A step: the connection that runs it, then the command. `SLEEP ms` pauses; `$x` in an
/// argument is connection `x`'s `CLIENT ID`.
type Step = (&'static str, &'static [&'static str]);

/// The connections and how each starts.
const CONNS: &[(&str, &[&[&str]])] = &[
    ("a", &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON"]]),
    (
        "n",
        &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON", "NOLOOP"]],
    ),
    (
        "o",
        &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON", "OPTIN"]],
    ),
    (
        "c",
        &[
            &["HELLO", "3"],
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "k1", "PREFIX", "{t}",
            ],
        ],
    ),
    ("r", &[&["SUBSCRIBE", "__redis__:invalidate"]]),
    ("b", &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "$r"]]),
    ("w", &[]),
    ("t", &[&["HELLO", "3"]]),
    // A RESP3 connection that neither tracks nor subscribes, and a RESP2 tracker that
    // redirects to it (its pushes reach an idle connection the hub did not hold before).
    ("p", &[&["HELLO", "3"]]),
    ("d", &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "$p"]]),
];

const SCENARIOS: &[Step] = &[
    // Default mode: a read remembers, another's write invalidates once.
    ("a", &["GET", "k1"]),
    ("w", &["SET", "k1", "v"]),
    ("w", &["SET", "k1", "v2"]),
    ("a", &["MGET", "k1", "k2", "k3"]),
    ("a", &["GET", "k1"]),
    ("w", &["DEL", "k1", "k2", "k3"]),
    ("w", &["DEL", "k2"]),
    // A write by the tracker itself: the reply, then the push.
    ("a", &["GET", "k2"]),
    ("a", &["SET", "k2", "x"]),
    ("a", &["SET", "k2", "y"]),
    // A read that fails still remembers; a write command never does.
    ("w", &["RPUSH", "l", "x"]),
    ("a", &["GET", "l"]),
    ("a", &["INCR", "n1"]),
    ("a", &["GETSET", "g", "1"]),
    ("w", &["RPUSH", "l", "y"]),
    ("w", &["SET", "n1", "5"]),
    ("w", &["SET", "g", "2"]),
    // Key names, not databases.
    ("a", &["GET", "k3"]),
    ("w", &["SELECT", "1"]),
    ("w", &["SET", "k3", "db1"]),
    ("w", &["SELECT", "0"]),
    // NOLOOP: its own writes are not reported, and still forget the key.
    ("n", &["GET", "k2"]),
    ("n", &["SET", "k2", "z"]),
    ("w", &["SET", "k2", "zz"]),
    ("n", &["GET", "k2"]),
    ("w", &["SET", "k2", "zzz"]),
    // OPTIN: only after CLIENT CACHING yes, for one command (CLIENT ones aside).
    ("o", &["GET", "k1"]),
    ("w", &["SET", "k1", "1"]),
    ("o", &["CLIENT", "CACHING", "yes"]),
    ("o", &["CLIENT", "ID"]),
    ("o", &["GET", "k1"]),
    ("o", &["GET", "k2"]),
    ("w", &["MSET", "k1", "2", "k2", "2"]),
    ("o", &["CLIENT", "CACHING", "yes"]),
    ("o", &["MULTI"]),
    ("o", &["GET", "k1"]),
    ("o", &["GET", "k3"]),
    ("o", &["EXEC"]),
    ("o", &["GET", "k2"]),
    ("w", &["MSET", "k1", "3", "k2", "3", "k3", "3"]),
    ("o", &["CLIENT", "CACHING", "no"]),
    ("o", &["CLIENT", "CACHING", "maybe"]),
    ("a", &["CLIENT", "CACHING", "yes"]),
    ("w", &["CLIENT", "CACHING", "yes"]),
    // MULTI: every read remembered, the pushes after EXEC's reply.
    ("a", &["MULTI"]),
    ("a", &["GET", "m1"]),
    ("a", &["SET", "m2", "x"]),
    ("a", &["MGET", "m3", "m4"]),
    ("a", &["EXEC"]),
    ("a", &["MULTI"]),
    ("a", &["SET", "m1", "1"]),
    ("a", &["SET", "m3", "1"]),
    ("a", &["GET", "m1"]),
    ("a", &["EXEC"]),
    ("w", &["MSET", "m1", "2", "m2", "2", "m3", "2", "m4", "2"]),
    // Scripts remember their declared keys once they read, not the keys read.
    (
        "a",
        &["EVAL", "return redis.call('get','undeclared')", "1", "decl"],
    ),
    ("w", &["MSET", "undeclared", "1", "decl", "1"]),
    ("a", &["EVAL", "return 1", "1", "e3"]),
    (
        "a",
        &["EVAL_RO", "return redis.call('get',KEYS[1])", "1", "e4"],
    ),
    ("w", &["MSET", "e3", "1", "e4", "1"]),
    // Expiry: the expirer invalidates (after a pause long enough for both servers' active
    // expiry; a lazy expiry would race it).
    ("a", &["GET", "x1"]),
    ("w", &["SET", "x1", "v", "PX", "50"]),
    ("a", &["GET", "x1"]),
    ("SLEEP", &["1500"]),
    ("a", &["GET", "x1"]),
    ("w", &["SET", "x1", "again"]),
    // BCAST: a message per prefix, the keys sorted; other keys not reported.
    (
        "w",
        &["MSET", "k1b", "1", "k1a", "1", "k2", "1", "{t}k4", "1"],
    ),
    ("c", &["SET", "k1", "own"]),
    ("c", &["GET", "k2"]),
    ("w", &["SET", "k2", "4"]),
    // RESP2 through a redirect to a subscribed connection.
    ("b", &["GET", "k3"]),
    ("w", &["SET", "k3", "4"]),
    ("b", &["CLIENT", "GETREDIR"]),
    ("d", &["MGET", "k3", "k2"]),
    ("w", &["MSET", "k2", "5", "k3", "5"]),
    ("d", &["CLIENT", "TRACKINGINFO"]),
    // Flushes: a null to every tracking client, the table emptied.
    ("a", &["GET", "k1"]),
    ("w", &["SELECT", "5"]),
    ("w", &["FLUSHDB"]),
    ("w", &["SELECT", "0"]),
    ("w", &["SET", "k1", "after"]),
    ("a", &["FLUSHALL"]),
    // TRACKINGINFO and GETREDIR in each mode.
    ("a", &["CLIENT", "TRACKINGINFO"]),
    ("n", &["CLIENT", "TRACKINGINFO"]),
    ("o", &["CLIENT", "CACHING", "yes"]),
    ("o", &["CLIENT", "TRACKINGINFO"]),
    ("o", &["PING"]),
    ("o", &["CLIENT", "TRACKINGINFO"]),
    ("c", &["CLIENT", "TRACKINGINFO"]),
    ("b", &["CLIENT", "TRACKINGINFO"]),
    ("w", &["CLIENT", "TRACKINGINFO"]),
    ("w", &["CLIENT", "GETREDIR"]),
    ("a", &["CLIENT", "GETREDIR"]),
    // The options' errors, in Redis's order.
    ("w", &["CLIENT", "TRACKING", "ON", "FOO"]),
    ("w", &["CLIENT", "TRACKING", "MAYBE"]),
    ("w", &["CLIENT", "TRACKING", "ON", "REDIRECT", "abc"]),
    ("w", &["CLIENT", "TRACKING", "ON", "REDIRECT", "0"]),
    ("w", &["CLIENT", "TRACKING", "ON", "REDIRECT", "-1"]),
    (
        "w",
        &[
            "CLIENT", "TRACKING", "ON", "REDIRECT", "$r", "REDIRECT", "$r",
        ],
    ),
    ("w", &["CLIENT", "TRACKING", "OFF", "REDIRECT", "99999"]),
    (
        "w",
        &["CLIENT", "TRACKING", "ON", "PREFIX", "x", "OPTIN", "OPTOUT"],
    ),
    (
        "w",
        &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN", "OPTOUT"],
    ),
    ("w", &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
    (
        "w",
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab",
        ],
    ),
    ("w", &["CLIENT", "TRACKING", "ON", "REDIRECT"]),
    ("w", &["CLIENT", "TRACKING"]),
    ("w", &["CLIENT", "CACHING"]),
    ("w", &["CLIENT", "GETREDIR", "x"]),
    ("a", &["CLIENT", "TRACKING", "ON", "BCAST"]),
    ("o", &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
    ("o", &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
    ("c", &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "k1x"]),
    ("c", &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "{t}"]),
    ("c", &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "z"]),
    ("c", &["CLIENT", "TRACKINGINFO"]),
    ("w", &["SET", "zz", "1"]),
    // Re-enabling replaces the flags; OFF, then ON again.
    ("n", &["CLIENT", "TRACKING", "ON"]),
    ("n", &["CLIENT", "TRACKINGINFO"]),
    ("n", &["GET", "k1"]),
    ("n", &["SET", "k1", "self"]),
    ("n", &["GET", "k2"]),
    ("n", &["CLIENT", "TRACKING", "OFF", "BCAST", "PREFIX", "x"]),
    ("n", &["CLIENT", "TRACKINGINFO"]),
    ("w", &["SET", "k2", "off"]),
    ("n", &["CLIENT", "TRACKING", "ON"]),
    ("n", &["GET", "k3"]),
    ("w", &["SET", "k3", "on"]),
    // A RESP3 tracker whose redirect client is killed: broken, told at each message.
    ("t", &["CLIENT", "TRACKING", "ON", "REDIRECT", "$w"]),
    ("t", &["GET", "k1"]),
    ("t", &["GET", "k2"]),
    ("a", &["CLIENT", "KILL", "ID", "$w"]),
    ("a", &["MSET", "k1", "1", "k2", "2"]),
    ("t", &["CLIENT", "TRACKINGINFO"]),
    ("t", &["CLIENT", "GETREDIR"]),
    ("t", &["SET", "k9", "x"]),
    ("t", &["CLIENT", "TRACKING", "ON"]),
    ("t", &["CLIENT", "TRACKINGINFO"]),
    // HELLO 2 without a redirect: still tracking, nothing sent; RESET: off.
    ("a", &["GET", "k5"]),
    ("a", &["HELLO", "2"]),
    ("n", &["SET", "k5", "1"]),
    ("a", &["CLIENT", "TRACKINGINFO"]),
    ("a", &["HELLO", "3"]),
    ("a", &["GET", "k5"]),
    ("a", &["RESET"]),
    ("a", &["CLIENT", "TRACKINGINFO"]),
    ("n", &["SET", "k5", "2"]),
];

/// One step's record: the reply and, per connection, what it received meanwhile.
type Record = (String, BTreeMap<String, Vec<String>>);

/// The connections, started as [`CONNS`] says, and their IDs.
struct Clients {
    conns: BTreeMap<&'static str, Conn>,
    ids: BTreeMap<String, String>,
    /// Connections inside `MULTI` (a `PING` would be queued: not drained until `EXEC`).
    in_multi: Vec<String>,
}

impl Clients {
    fn start(port: u16) -> Clients {
        let mut c = Clients {
            conns: BTreeMap::new(),
            ids: BTreeMap::new(),
            in_multi: Vec::new(),
        };
        for (name, _) in CONNS {
            let mut conn = Conn::new(port);
            conn.send(&["CLIENT", "ID"]);
            let id = conn.next();
            c.ids
                .insert(name.to_string(), id[1..id.len() - 2].to_string());
            c.conns.insert(name, conn);
        }
        for (name, setup) in CONNS {
            for args in *setup {
                let args = c.resolve(args);
                let conn = c.conns.get_mut(name).unwrap();
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                conn.send(&refs);
                conn.next();
            }
        }
        c
    }

    /// `$x` arguments as connection `x`'s ID.
    fn resolve<S: AsRef<str>>(&self, args: &[S]) -> Vec<String> {
        args.iter()
            .map(|a| {
                let a = a.as_ref();
                match a.strip_prefix('$').and_then(|n| self.ids.get(n)) {
                    Some(id) => id.clone(),
                    None => a.to_string(),
                }
            })
            .collect()
    }

    /// A reply with the connections' IDs named (`:$r`), as the two servers number them
    /// apart (in the replies that carry IDs only).
    fn named(&self, reply: String, ids: bool) -> String {
        if !ids && !reply.contains("tracking-redir-broken") {
            return reply;
        }
        let mut out = reply;
        for (name, id) in &self.ids {
            out = out.replace(&format!(":{id}\r\n"), &format!(":${name}\r\n"));
        }
        out
    }

    /// Runs `args` on connection `on`; its reply and everything each connection received.
    fn step(&mut self, on: &str, args: &[String], killed: &mut Vec<String>) -> Record {
        let args = self.resolve(args);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if std::env::var("TAMER_TRACKING_TRACE").is_ok() {
            eprintln!("{on}: {refs:?}");
        }
        let conn = self.conns.get_mut(on).unwrap();
        conn.send(&refs);
        let reply = conn.next();
        if refs.len() == 4 && refs[1].eq_ignore_ascii_case("kill") {
            let victim = self.ids.iter().find(|(_, id)| **id == refs[3]);
            killed.extend(victim.map(|(n, _)| n.clone()));
        }
        let word = refs[0].to_ascii_lowercase();
        if word == "multi" && reply.starts_with('+') {
            self.in_multi.push(on.to_string());
        } else if ["exec", "discard", "reset"].contains(&word.as_str()) {
            self.in_multi.retain(|n| n != on);
        }
        let mut received = BTreeMap::new();
        for (name, conn) in self.conns.iter_mut() {
            let skipped = killed.iter().chain(&self.in_multi).any(|k| k == name);
            if skipped {
                continue;
            }
            let got: Vec<String> = conn.drain().into_iter().collect();
            received.insert(name.to_string(), got);
        }
        let received = received
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().map(|r| self.named(r, false)).collect()))
            .collect();
        let sub = refs
            .get(1)
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        let ids = word == "client" && ["getredir", "trackinginfo", "id"].contains(&sub.as_str());
        let reply = if unordered(&word) {
            sorted(&reply)
        } else {
            reply
        };
        // HELLO's map names the server and numbers the connection its way.
        let reply = match reply.as_bytes()[0] {
            b'*' | b'%' if word == "hello" => "(HELLO's map)".to_string(),
            _ => reply,
        };
        (self.named(reply, ids), received)
    }
}

fn run(port: u16, steps: &[(String, Vec<String>)]) -> Vec<Record> {
    let mut clients = Clients::start(port);
    let mut killed = Vec::new();
    let mut records = Vec::new();
    for (on, args) in steps {
        if on == "SLEEP" {
            std::thread::sleep(Duration::from_millis(args[0].parse().unwrap()));
            continue;
        }
        records.push(clients.step(on, args, &mut killed));
    }
    records
}

fn compare(steps: &[(String, Vec<String>)], want: &[Record], got: &[Record], what: &str) {
    let run = steps.iter().filter(|(on, _)| on != "SLEEP");
    for (i, (step, (w, g))) in run.zip(want.iter().zip(got)).enumerate() {
        assert_eq!(
            w, g,
            "{what}: step {i} {step:?}: redis-server's (reply, received) left, tamer's right"
        );
    }
    assert_eq!(want.len(), got.len());
}

fn owned(steps: &[Step]) -> Vec<(String, Vec<String>)> {
    steps
        .iter()
        .map(|(on, s)| (on.to_string(), s.iter().map(|w| w.to_string()).collect()))
        .collect()
}

/// Mutations caught (each fails a step): a read not remembered (or remembered for a write
/// command, a refused one, a script's own call instead of its declared keys, a database
/// apart), an invalidation sent twice or to a client that did not read the key, the
/// tracker's own push before its reply or before `EXEC`'s, `NOLOOP` reporting its own
/// writes or keeping the key, `OPTIN`'s flag lasting past one command (or spent by a
/// `CLIENT` one, or inside `MULTI`), `BCAST` keys unsorted or outside the prefixes, a
/// RESP2 redirect not sent as a message, a flush's null missing for any client, an error
/// text or its order among the checks, a prefix overlap let through, `TRACKINGINFO`'s flags
/// or their order, a broken redirect not flagged or not told, `HELLO 2` still pushing,
/// `RESET` leaving tracking on.
#[test]
fn tracking_pushes_as_redis_sends_them() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let steps = owned(SCENARIOS);
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("tracking-scenarios");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(&steps, &want, &got, "tracking scenarios");
}

/// The keyed commands a random sequence draws from: not scripts (their bodies are random
/// words), not the blocking ones, not those whose reply is random or the time left, nor a
/// scan's page.
fn drawn(e: &Entry) -> bool {
    let left_out = [
        "eval",
        "eval_ro",
        "evalsha",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
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
        "pexpiretime",
        "hscan",
        "sscan",
        "zscan",
    ];
    e.has_keys
        && !e.has_flag("blocking")
        && !left_out.contains(&e.name.split('|').next().unwrap_or(""))
}

/// Seeded random sequences of keyed commands, each run by one of the trackers or the
/// writer, with an occasional `CLIENT CACHING yes`, flush or `SELECT`. Mutations caught:
/// those of the scenarios, over the commands no scenario names (a read-only command whose
/// keys are not all remembered, a write that changes nothing yet invalidates, a write whose
/// keys are invalidated in another order).
#[test]
fn random_commands_invalidate_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed = std::env::var("TAMER_TRACKING_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(28_112);
    eprintln!("random tracking: seed {seed} (TAMER_TRACKING_SEED replays it)");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let pool: Vec<Entry> = entries().into_iter().filter(drawn).collect();
    let runners = ["a", "n", "o", "c", "b", "w", "t", "d"];
    let mut steps = Vec::new();
    for _ in 0..800 {
        let on = runners[rand::Rng::gen_range(&mut rng, 0..runners.len())];
        let roll: u32 = rand::Rng::gen_range(&mut rng, 0..100);
        let args: Vec<String> = match roll {
            0 => vec!["FLUSHALL".into()],
            1 => vec![
                "SELECT".into(),
                rand::Rng::gen_range(&mut rng, 0..2).to_string(),
            ],
            2..=5 => ["CLIENT", "CACHING", "yes"].map(String::from).to_vec(),
            _ => {
                let e = &pool[rand::Rng::gen_range(&mut rng, 0..pool.len())];
                without_short_ttls(invocation(e, &mut rng))
            }
        };
        steps.push((on.to_string(), args));
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = run(redis.1, &steps);
    let dir = temp_dir("tracking-random");
    let served = Served::start(&dir.0);
    let got = run(served.port, &steps);
    compare(
        &steps,
        &want,
        &got,
        &format!("random tracking, seed {seed}"),
    );
}

/// A client-side cache kept by a RESP3 tracking connection: values by key, dropped as
/// invalidations arrive (a null: everything).
struct Cache {
    conn: Conn,
    values: BTreeMap<String, String>,
    hits: u64,
}

impl Cache {
    /// Applies a push; `false` for a reply.
    fn push(&mut self, frame: &str) -> bool {
        if !frame.starts_with(">2\r\n$10\r\ninvalidate\r\n") {
            return false;
        }
        let value = &frame[">2\r\n$10\r\ninvalidate\r\n".len()..];
        match common::table::parse(value) {
            common::table::Resp::List(_, keys) => {
                for k in keys {
                    if let common::table::Resp::Bulk(k) = k {
                        self.values.remove(&String::from_utf8(k).unwrap());
                    }
                }
            }
            _ => self.values.clear(),
        }
        true
    }

    /// The next reply, the pushes before it applied.
    fn reply(&mut self) -> String {
        // Bounded by the read timeout.
        loop {
            let frame = self.conn.next();
            if !self.push(&frame) {
                return frame;
            }
        }
    }

    /// `key`'s value: cached, or read (and cached) with `GET`.
    fn get(&mut self, key: &str) -> String {
        if let Some(v) = self.values.get(key) {
            self.hits += 1;
            return v.clone();
        }
        self.conn.send(&["GET", key]);
        let v = self.reply();
        self.values.insert(key.to_string(), v.clone());
        v
    }
}

/// A reader and a writer on two cores at once: a cache fed only by invalidations never
/// keeps a value older than the server's once it caught up (a `PING` taken after the
/// writer's burst). Mutations caught: a read's keys remembered after its transaction
/// without the recent writes' check (a write committed between the read and the
/// remembering is never reported), an invalidation owed during the tracker's command taken
/// before that command's reply, a write's invalidation lost.
#[test]
fn a_cache_fed_by_invalidations_is_never_stale() {
    const KEYS: u64 = 16;
    let dir = temp_dir("tracking-race");
    let served = Served::start_with(&dir.0, &["--cores", "2"]);
    let port = served.port;
    let (go, bursts) = std::sync::mpsc::channel::<bool>();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let mut conn = Conn::new(port);
        // Bounded: one burst per message until told to stop.
        while bursts.recv().unwrap() {
            for k in 0..KEYS {
                conn.send(&["INCR", &format!("race:{k}")]);
                conn.next();
            }
            done.send(()).unwrap();
        }
    });
    let mut cache = Cache {
        conn: Conn::new(port),
        values: BTreeMap::new(),
        hits: 0,
    };
    cache.conn.send(&["HELLO", "3"]);
    cache.reply();
    cache.conn.send(&["CLIENT", "TRACKING", "ON"]);
    assert_eq!(cache.reply(), "+OK\r\n");
    let mut check = Conn::new(port);
    let (mut reads, mut bursts_run) = (0u64, 0u64);
    let started = std::time::Instant::now();
    // Bounded: two seconds of bursts.
    while started.elapsed() < Duration::from_secs(2) {
        go.send(true).unwrap();
        let mut i = bursts_run;
        // Reads race the burst until it ends (bounded by the burst's 16 writes).
        while finished.try_recv().is_err() {
            let before = cache.hits;
            cache.get(&format!("race:{}", i % KEYS));
            reads += u64::from(cache.hits == before);
            i += 1;
            cache.conn.send(&["PING"]);
            assert_eq!(cache.reply(), "+PONG\r\n");
        }
        bursts_run += 1;
        cache.conn.send(&["PING"]);
        assert_eq!(cache.reply(), "+PONG\r\n");
        for (key, cached) in &cache.values {
            check.send(&["GET", key]);
            assert_eq!(&check.next(), cached, "{key}: a stale cached value");
        }
    }
    go.send(false).unwrap();
    writer.join().unwrap();
    eprintln!(
        "cache: {bursts_run} bursts, {} hits, {reads} reads",
        cache.hits
    );
    assert!(cache.hits > 0 && reads > 0, "both paths exercised");
}

/// The table holds `tracking-table-max-keys` keys at most; each key evicted to keep it is
/// invalidated for its readers. Mutations caught: no eviction, an eviction without its
/// invalidation, `tracking_total_*` miscounted.
#[test]
fn the_table_is_bounded_and_evictions_invalidate() {
    let dir = temp_dir("tracking-bound");
    let served = Served::start(&dir.0);
    let mut admin = Conn::new(served.port);
    admin.send(&["CONFIG", "SET", "tracking-table-max-keys", "10"]);
    assert_eq!(admin.next(), "+OK\r\n");
    let mut cache = Cache {
        conn: Conn::new(served.port),
        values: BTreeMap::new(),
        hits: 0,
    };
    cache.conn.send(&["HELLO", "3"]);
    cache.reply();
    cache.conn.send(&["CLIENT", "TRACKING", "ON"]);
    cache.reply();
    for i in 0..100 {
        cache.get(&format!("bound:{i}"));
    }
    cache.conn.send(&["PING"]);
    assert_eq!(cache.reply(), "+PONG\r\n");
    assert_eq!(cache.values.len(), 10, "evicted keys were invalidated");
    admin.send(&["INFO", "stats"]);
    let info = admin.next();
    for line in ["tracking_total_keys:10", "tracking_total_items:10"] {
        assert!(info.contains(line), "{line} in {info}");
    }
    admin.send(&["INFO", "clients"]);
    assert!(admin.next().contains("tracking_clients:1"));
    // Every key still cached is still tracked: a write reaches the cache.
    let kept: Vec<String> = cache.values.keys().cloned().collect();
    for k in &kept {
        admin.send(&["SET", k, "new"]);
        admin.next();
    }
    cache.conn.send(&["PING"]);
    assert_eq!(cache.reply(), "+PONG\r\n");
    assert!(
        cache.values.is_empty(),
        "{:?} not invalidated",
        cache.values
    );
}
