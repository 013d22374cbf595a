//! Applications, end to end against the real binary: redis-py's `Lock` contended by 8
//! processes, a token-bucket rate limiter in Lua that must decide as redis-server decides
//! for the same arrival sequence (`tests/py/`), node-redis's client-side cache
//! (`tests/js/`), and a Celery worker with its Redis broker and result backend.

mod common;

use std::path::Path;
use std::process::Command;

use common::{have, temp_dir, Redis, Served};

const PYTHON: &str = "/usr/bin/python3";

/// Runs `tests/py/<script>` against `port`: its standard output (panics, with its output,
/// unless it succeeds).
fn client_output(script: &str, port: u16) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let out = Command::new(PYTHON)
        .arg(path)
        .arg(port.to_string())
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// redis-py's `Lock`, 8 processes, 1,000 acquisitions: no two inside at once, no lost
/// update. Mutations caught: a script that is not atomic (two holders), a lock released by
/// another's token, a lost counter update, a reply redis-py cannot parse.
#[test]
fn redis_py_lock_keeps_mutual_exclusion_across_processes() {
    if !have(PYTHON, &["-c", "import redis"]) {
        return;
    }
    let dir = temp_dir("apps-lock");
    let served = Served::start(&dir.0);
    let out = client_output("lock_client.py", served.port);
    assert!(out.contains("no overlap"), "{out}");
}

/// A token-bucket limiter in Lua: the same 2,000 decisions as redis-server for the same
/// arrival sequence, and exactly a bucket's tokens allowed to 8 threads at one instant.
/// Mutations caught: Lua number formatting or `HMGET`'s nils converted otherwise than
/// Redis's (a decision differs), a script run twice or not atomically (the burst).
#[test]
fn a_lua_rate_limiter_decides_as_on_redis() {
    if !have(PYTHON, &["-c", "import redis"]) || !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    drop(redis.connect()); // waits until it listens
    let want = client_output("rate_limiter_client.py", redis.1);
    let dir = temp_dir("apps-limiter");
    let served = Served::start(&dir.0);
    let got = client_output("rate_limiter_client.py", served.port);
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        assert_eq!(w, g, "decision {i}: redis-server's left, tamer's right");
    }
    assert_eq!(want.lines().count(), got.lines().count());
}

/// node-redis's client-side cache (RESP3, `CLIENT TRACKING`), as an application turns it
/// on, against tamer and redis-server: cached reads never reach the server, and every
/// rewrite of a cached key is seen. Needs `scripts/install-js-clients.sh`. Mutations
/// caught: a read not remembered (the cache never fills: refetches), an invalidation lost
/// or sent for the wrong key (a stale read past the bound), a push node-redis cannot parse.
#[test]
fn node_redis_client_side_cache_sees_every_write() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let clients = root.join("target/js-clients");
    let installed = clients.join("node_modules/redis/package.json").exists();
    if !installed {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "node-redis is missing (scripts/install-js-clients.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: node-redis is not installed (scripts/install-js-clients.sh)");
        return;
    }
    if !have("node", &["--version"]) {
        return;
    }
    let script = root.join("tests/js/caching_client.mjs");
    let run = |port: u16| {
        let out = Command::new("node")
            .arg(&script)
            .arg(port.to_string())
            .arg(&clients)
            .output()
            .expect("running node");
        assert!(
            out.status.success(),
            "caching_client.mjs on port {port}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if have("redis-server", &["--version"]) {
        let redis = Redis::start().expect("starting redis-server");
        drop(redis.connect());
        run(redis.1);
    }
    let dir = temp_dir("apps-caching");
    let served = Served::start(&dir.0);
    run(served.port);
}

/// A real Celery worker (prefork, 2 processes; Redis broker and result backend) runs 1,000
/// tasks, a tenth always failing, a tenth failing once and retried, a tenth with a 1 s
/// countdown; every result arrives, right, and every task ran exactly as often as it should.
/// Run on redis-server too, to keep the script honest. Needs `scripts/install-py-apps.sh`.
/// Mutations caught: a `BRPOP` wake-up lost or given twice (a task lost or run twice), a
/// result's pub/sub message lost (a `get` that times out), `MULTI`/`EXEC` or sorted-set
/// replies kombu cannot parse, an acknowledgement (`ZREM`/`HDEL` of the unacked index) lost.
#[test]
fn a_celery_worker_runs_every_task_once() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/py-apps/bin/python");
    if !python.exists() {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "Celery is missing (scripts/install-py-apps.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: Celery is not installed (scripts/install-py-apps.sh)");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/celery_client.py");
    let run = |port: u16| {
        let out = Command::new(&python)
            .arg(&script)
            .arg(port.to_string())
            .output()
            .expect("running celery_client.py");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("celery ok"),
            "celery_client.py on port {port}:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if have("redis-server", &["--version"]) {
        let redis = Redis::start().expect("starting redis-server");
        drop(redis.connect());
        run(redis.1);
    }
    let dir = temp_dir("apps-celery");
    let served = Served::start(&dir.0);
    run(served.port);
}
