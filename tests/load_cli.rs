//! `tamer load` as a user runs it: the real binary against a real `tamer serve` and a real
//! redis-server (Debian's package; without it the test says SKIPPED unless
//! `TAMER_REQUIRE_PEERS=1`). Each test names the mutation it catches.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn tamer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tamer"))
}

/// Runs `tamer load ARGS --json` and parses its report.
fn load(port: u16, args: &[&str]) -> serde_json::Value {
    let out = tamer()
        .args(["load", "--port", &port.to_string(), "--json"])
        .args(args)
        .output()
        .expect("running tamer load");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// `tamer load` against `tamer serve` with GETs, SETs and MULTI/EXEC transactions: every key
/// filled, no errors, no misses, every operation answered. Catches: the CLI not passing a
/// flag through (mix, keys, fill), a transaction's replies miscounted against a server whose
/// EXEC reply is an array.
#[test]
fn load_against_tamer_serve() {
    let dir = std::env::temp_dir().join(format!("tamer-load-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = tamer()
        .args([
            "serve",
            "--port",
            "0",
            "--cache-size",
            "16mb",
            "--durability",
            "none",
            "--dir",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting tamer serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split(" on 127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in the startup line: {line}"));
    let r = load(
        port,
        &[
            "--connections",
            "4",
            "--pipeline",
            "4",
            "--keys",
            "500",
            "--load",
            "--duration",
            "0.5",
            "--warmup",
            "0",
            "--mix",
            "get=50,set=30,multi=20",
            "--value-bytes",
            "100",
        ],
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r["fill"]["keys"], 500, "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["nil"], 0, "{r}");
    assert_eq!(r["unfinished"], 0, "{r}");
    assert!(r["answered"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["answered"], r["ok"], "{r}");
}

/// Flags a user gets wrong are refused with a message, not a panic. Catches: a multi
/// transaction sent over memcached's protocol, a zero pipeline accepted, a Zipfian over more
/// keys than its constant can be summed for in a second or so.
#[test]
fn bad_flags_are_refused() {
    for args in [
        vec!["--protocol", "memcache", "--mix", "multi=1"],
        vec!["--pipeline", "0"],
        vec!["--keys", "200000000", "--distribution", "zipf:0.99"],
        vec!["--distribution", "zipf:2"],
    ] {
        let out = tamer()
            .args(["load", "--port", "1", "--duration", "0.1"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(if args[0] == "--distribution" { 2 } else { 1 }),
            "{args:?}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("panicked"),
            "{args:?}"
        );
    }
}
