//! The whole server fuzzed through its socket: every command and subcommand of the table
//! sent many times, pipelined, with random arities and arguments (seeded invocations built
//! from each command's documented arguments, cut short, stretched with junk, or its name in
//! another case), to a real `tamer serve`. Every request must get exactly one reply, and the
//! server must stay up and exit cleanly. A panic in a handler (the server catches it, and the
//! client never gets that reply) or a hang shows as a missing reply, reported with the batch
//! that lost it and the seed. `TAMER_FUZZ_SEED` and `TAMER_FUZZ_ROUNDS` replay or lengthen a
//! run.
//!
//! Mutations caught: a handler that indexes past its arguments (the blocking pops once did),
//! a command that replies twice or not at all, a blocking command that waits without a
//! timeout on junk arguments.

use std::net::TcpStream;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

mod common;

use common::table::{entries, invocation, Entry};
use common::{read_replies, send_command, temp_dir, Served};

/// Commands left out: they end the connection or the server (`SHUTDOWN`, `QUIT`, `CLIENT
/// KILL` of a random filter may be this connection), silence the replies after them
/// (`CLIENT REPLY OFF`), so those replies cannot come, or add lines of their own
/// (`MONITOR`: `tests/monitor.rs`).
const LEFT_OUT: &[&str] = &["shutdown", "quit", "client|kill", "client|reply", "monitor"];

/// Requests sent before their replies are read.
const BATCH: usize = 32;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One request for `entry`: a documented invocation, cut short, with junk added, or with its
/// name's case changed.
fn request(entry: &Entry, rng: &mut SmallRng) -> Vec<String> {
    let mut args = invocation(entry, rng);
    match rng.gen_range(0..10) {
        0..=4 => {}
        5 | 6 => {
            let keep = rng.gen_range(1..=args.len());
            args.truncate(keep);
        }
        7 | 8 => {
            for _ in 0..rng.gen_range(1..6) {
                let junk: String = (0..rng.gen_range(0..12))
                    .map(|_| rng.gen_range(b' '..=b'~') as char)
                    .collect();
                args.push(junk);
            }
        }
        _ => args[0] = args[0].to_ascii_uppercase(),
    }
    args
}

fn exchange(conn: &mut TcpStream, batch: &[Vec<String>], seed: u64, round: u64) {
    for r in batch {
        send_command(conn, r);
    }
    let replies = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_replies(conn, batch.len())
    }));
    assert!(
        replies.is_ok(),
        "seed {seed} round {round}: a request of this batch got no reply: {batch:?}"
    );
}

#[test]
fn every_command_with_random_arguments_gets_one_reply() {
    let seed = env_u64("TAMER_FUZZ_SEED", 24);
    let rounds = env_u64("TAMER_FUZZ_ROUNDS", 16);
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = temp_dir("fuzz-table");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let commands: Vec<Entry> = entries()
        .into_iter()
        .filter(|e| !LEFT_OUT.contains(&e.name.as_str()))
        .collect();
    let mut sent = 0;
    for round in 0..rounds {
        let mut requests: Vec<Vec<String>> = commands
            .iter()
            .flat_map(|e| (0..2).map(|_| request(e, &mut rng)).collect::<Vec<_>>())
            .collect();
        // Shuffled, so that commands meet each other's data and states.
        for i in (1..requests.len()).rev() {
            requests.swap(i, rng.gen_range(0..=i));
        }
        for batch in requests.chunks(BATCH) {
            exchange(&mut conn, batch, seed, round);
        }
        sent += requests.len();
    }
    // Still serving, whatever the last commands left (a MULTI, RESP3, another database).
    let mut probe = served.connect();
    send_command(&mut probe, &["PING"]);
    assert_eq!(read_replies(&mut probe, 1), ["+PONG\r\n"], "seed {seed}");
    let (code, rest) = served.terminate();
    assert_eq!(code, Some(0), "seed {seed}: {rest}");
    eprintln!(
        "{sent} requests over {} commands and subcommands, seed {seed}",
        commands.len()
    );
}
