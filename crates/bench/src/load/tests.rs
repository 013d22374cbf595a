//! `tamer load` against real servers: a redis-server and a memcached of the test's own
//! (Debian's packages, `scripts/install-peers.sh`), small counts, seconds. Without the peer
//! a test says SKIPPED, unless `TAMER_REQUIRE_PEERS=1` (CI), when it fails.

use std::time::Duration;

use super::*;
use crate::rpc::servers::{ask, free_port, have, Launch, Server};

fn peer(program: &str) -> bool {
    if have(program) {
        return true;
    }
    assert!(
        std::env::var("TAMER_REQUIRE_PEERS").is_err(),
        "{program} is not installed (scripts/install-peers.sh) and TAMER_REQUIRE_PEERS is set"
    );
    eprintln!("SKIPPED: {program} is not installed (scripts/install-peers.sh)");
    false
}

/// The report without its histograms, for assertion messages.
fn brief(r: &LoadReport) -> String {
    serde_json::to_string(r).unwrap_or_default()
}

fn seed() -> u64 {
    let seed = std::env::var("TAMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x10ad);
    eprintln!("TAMER_TEST_SEED={seed}");
    seed
}

/// The count in `INFO commandstats`' `cmdstat_NAME:calls=N`.
fn calls(info: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Counts add up against the server's own: every key filled (no GET misses, DBSIZE = keys),
/// and the operations answered equal the GETs + SETs + transactions redis-server executed.
/// Catches: a fill that skips or repeats keys, a transaction's four replies counted as four
/// operations (or a reply matched to the wrong request), operations lost between threads.
#[test]
fn counts_add_up_against_redis() {
    if !peer("redis-server") {
        return;
    }
    let server = Server::start(Launch::redis(free_port().unwrap(), &[])).unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.keys = 3_000;
    opts.fill = true;
    opts.connections = 6;
    opts.threads = 2;
    opts.pipeline = 8;
    opts.mix = "get=60,set=30,multi=10".parse().unwrap();
    opts.duration = Duration::from_millis(700);
    opts.seed = seed();
    let r = run(&opts).unwrap();
    let fill = r.fill.unwrap();
    assert_eq!((fill.keys, fill.errors), (3_000, 0));
    assert_eq!(
        (r.nil, r.errors, r.busy, r.unfinished),
        (0, 0, 0, 0),
        "{}",
        brief(&r)
    );
    assert!(r.answered > 1_000, "{}", brief(&r));
    assert_eq!(r.answered, r.ok);
    assert!(ask(server.port(), "DBSIZE")
        .unwrap()
        .starts_with(":3000\r\n"));
    let info = ask(server.port(), "INFO commandstats").unwrap();
    let (gets, sets, multis) = (
        calls(&info, "get"),
        calls(&info, "set"),
        calls(&info, "multi"),
    );
    assert_eq!(calls(&info, "exec"), multis);
    assert_eq!(
        gets + (sets - 3_000 - 2 * multis) + multis,
        r.answered,
        "{info}"
    );
}

/// Every reply of a server that refuses everything (`requirepass` set, no AUTH) is counted
/// as an error, none as success. Catches: an error reply counted as ok or as BUSY.
#[test]
fn error_replies_are_counted() {
    if !peer("redis-server") {
        return;
    }
    let server = Server::start(Launch::redis(
        free_port().unwrap(),
        &["--requirepass", "secret"],
    ))
    .unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.connections = 2;
    opts.pipeline = 4;
    opts.duration = Duration::from_millis(300);
    opts.seed = seed();
    let r = run(&opts).unwrap();
    assert!(r.errors > 100, "{}", brief(&r));
    assert_eq!((r.ok, r.nil, r.busy), (0, 0, 0), "{}", brief(&r));
    assert_eq!(r.admitted_latency.p50_us, 0.0);
}

/// Setup commands run on every connection before its first request: RESP3 (`HELLO 3`, a map
/// reply) and `CLIENT TRACKING ON`, after which GETs are counted as usual and the server
/// tracks the keys read; a setup command answered with an error fails the run, naming it.
/// Catches: a RESP3 map not parsed (the handshake fails or a setup reply is taken for a GET's),
/// setup skipped, a refused setup ignored.
#[test]
fn setup_commands_run_before_the_load() {
    if !peer("redis-server") {
        return;
    }
    let server = Server::start(Launch::redis(free_port().unwrap(), &[])).unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.keys = 200;
    opts.fill = true;
    opts.connections = 3;
    opts.pipeline = 4;
    opts.mix = "get=1".parse().unwrap();
    opts.duration = Duration::from_millis(300);
    opts.seed = seed();
    let command = |parts: &[&str]| parts.iter().map(|p| p.as_bytes().to_vec()).collect();
    opts.setup = vec![
        command(&["HELLO", "3"]),
        command(&["CLIENT", "TRACKING", "ON"]),
    ];
    let r = run(&opts).unwrap();
    assert!(r.answered > 100, "{}", brief(&r));
    assert_eq!((r.errors, r.nil, r.busy), (0, 0, 0), "{}", brief(&r));
    let info = ask(server.port(), "INFO stats").unwrap();
    let tracked: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("tracking_total_keys:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(tracked > 0, "no key tracked: {info}");
    opts.setup = vec![command(&["HELLO", "9"])];
    let refused = run(&opts).unwrap_err();
    assert!(
        refused.contains("setup HELLO 9") && refused.contains("NOPROTO"),
        "{refused}"
    );
}

/// memcached's text protocol: filled keys all hit, the answers equal memcached's own
/// `cmd_get + cmd_set` less the fill. Catches: a VALUE reply split wrong (a desync shows as
/// a protocol error), a hit counted as a miss, operations not counted.
#[test]
fn memcached_get_and_set() {
    if !peer("memcached") {
        return;
    }
    let server = Server::start(Launch::memcached(free_port().unwrap(), &["-m", "64"])).unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.protocol = Protocol::Memcache;
    opts.keys = 2_000;
    opts.value_bytes = 300;
    opts.fill = true;
    opts.connections = 3;
    opts.pipeline = 4;
    opts.mix = "get=80,set=20".parse().unwrap();
    opts.duration = Duration::from_millis(500);
    opts.seed = seed();
    let r = run(&opts).unwrap();
    assert_eq!(r.fill.unwrap().keys, 2_000);
    assert_eq!(
        (r.nil, r.errors, r.connection_errors),
        (0, 0, 0),
        "{}",
        brief(&r)
    );
    let stats = ask(server.port(), "stats").unwrap();
    let stat = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    assert_eq!(stat("get_hits"), stat("cmd_get"));
    assert_eq!(stat("cmd_get") + stat("cmd_set") - 2_000, r.answered);
}

/// Open loop: a server stopped (SIGSTOP) for 300 ms in the middle of a 1 s window puts the
/// p99 past 200 ms, because the requests due during the stall are timed from when they were
/// due, not from when a connection was free to send them. Catches: latency measured from the
/// actual send (closed-loop style, coordinated omission), where only the few requests in
/// flight at the stall would see it.
#[test]
fn open_loop_latency_includes_a_stall() {
    if !peer("redis-server") {
        return;
    }
    let server = Server::start(Launch::redis(free_port().unwrap(), &[])).unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.connections = 4;
    opts.rate_per_s = Some(2_000.0);
    opts.duration = Duration::from_millis(1_000);
    opts.seed = seed();
    let r = std::thread::scope(|s| {
        let load = s.spawn(|| run(&opts));
        std::thread::sleep(Duration::from_millis(350));
        server.signal(libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(300));
        server.signal(libc::SIGCONT);
        load.join().unwrap()
    })
    .unwrap();
    assert_eq!(
        (r.errors, r.unfinished, r.overflowed),
        (0, 0, 0),
        "{}",
        brief(&r)
    );
    assert!(
        (1_500..2_600).contains(&r.answered),
        "Poisson at 2000/s for 1 s: {r:?}"
    );
    assert!(r.latency.p99_us >= 200_000.0, "p99 {} µs", r.latency.p99_us);
    assert!(r.latency.p50_us < 200_000.0, "p50 {} µs", r.latency.p50_us);
}

/// The SLO search against redis-server with a generous objective (1 s): it steps its rate
/// up, every step but a failing last one within the objective, and the figure is a step's
/// throughput, at most the capacity. Catches: a search that never steps, a figure taken from
/// a failing step, rates not ascending.
#[test]
fn slo_search_steps_up() {
    if !peer("redis-server") {
        return;
    }
    let server = Server::start(Launch::redis(free_port().unwrap(), &[])).unwrap();
    let mut opts = LoadOptions::new(server.port());
    opts.connections = 4;
    opts.duration = Duration::from_millis(200);
    opts.seed = seed();
    let slo_ns = 1_000_000_000;
    let r = crate::rpc::slo::search(&opts, slo_ns).unwrap();
    assert!(
        r.capacity_per_s > 0.0 && r.steps.len() >= 2,
        "{:?} {} {}",
        r.steps,
        r.capacity_per_s,
        r.at_slo_per_s
    );
    assert!(
        r.steps.windows(2).all(|w| w[0].0 < w[1].0),
        "{:?} {} {}",
        r.steps,
        r.capacity_per_s,
        r.at_slo_per_s
    );
    let passing = &r.steps[..r.steps.len() - 1];
    assert!(
        passing.iter().all(|s| s.2 <= 1e6),
        "{:?} {} {}",
        r.steps,
        r.capacity_per_s,
        r.at_slo_per_s
    );
    assert!(
        r.steps.iter().any(|s| s.1 == r.at_slo_per_s),
        "{:?} {} {}",
        r.steps,
        r.capacity_per_s,
        r.at_slo_per_s
    );
    assert!(
        r.at_slo_per_s > 0.0 && r.at_slo_per_s <= 1.2 * r.capacity_per_s,
        "{:?} {} {}",
        r.steps,
        r.capacity_per_s,
        r.at_slo_per_s
    );
}
