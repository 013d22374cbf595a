//! Scripts and functions under kill -9: clients run transfers between accounts as `EVAL`
//! scripts and as `FCALL`s of a loaded library against `tamer serve --durability commit`,
//! which is killed with SIGKILL at a seeded instant, restarted, and checked: every
//! acknowledged transfer is there (its receipt key holds its outcome), no transfer is half
//! applied (the accounts' total is what it was), and the library is still loaded. Three
//! kills per run; `TAMER_SCRIPT_CRASH_SEED` replays one.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{temp_dir, Served};

const ACCOUNTS: u64 = 20;
const BALANCE: u64 = 1_000;
const CLIENTS: u64 = 4;
const KILLS: u64 = 3;

/// Moves ARGV[1] from KEYS[1] to KEYS[2] when KEYS[1] has it, and writes the outcome to the
/// receipt KEYS[3]: 1 moved, 0 refused.
const TRANSFER: &str = "local from = tonumber(redis.call('GET', KEYS[1]))
local amount = tonumber(ARGV[1])
if from < amount then
  redis.call('SET', KEYS[3], '0')
  return 0
end
redis.call('DECRBY', KEYS[1], amount)
redis.call('INCRBY', KEYS[2], amount)
redis.call('SET', KEYS[3], '1')
return 1";

fn library() -> String {
    format!(
        "#!lua name=bank\nredis.register_function('transfer', function(KEYS, ARGV)\n{TRANSFER}\nend)"
    )
}

/// A RESP request.
fn request(args: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// The reply to one request, or `None` once the server is gone.
fn ask(conn: &mut TcpStream, args: &[String]) -> Option<String> {
    conn.write_all(&request(args)).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // Bounded by the read timeout: every pass reads or returns.
    loop {
        if let Ok(Some(len)) = tamer_server::resp::reply_len(&buf) {
            return Some(String::from_utf8_lossy(&buf[..len]).into_owned());
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

/// xorshift, seeded.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One client's transfers until the server goes: the acknowledged (receipt, outcome) pairs.
fn client(port: u16, seed: u64, round: u64, stop: Arc<AtomicBool>) -> Vec<(String, String)> {
    let mut conn = common::connect_to(port, Duration::from_secs(30));
    let mut rng = Rng(seed.max(1));
    let mut acked = Vec::new();
    // Bounded: the server is killed within seconds (then every request fails).
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (a, b) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS));
        let amount = (1 + rng.below(300)).to_string();
        let receipt = format!("receipt:{round}:{seed}:{i}");
        let keys = [format!("acct:{a}"), format!("acct:{b}"), receipt.clone()];
        let mut args = if i % 2 == 0 {
            vec!["EVAL".to_string(), TRANSFER.to_string()]
        } else {
            vec!["FCALL".to_string(), "transfer".to_string()]
        };
        args.push("3".into());
        args.extend(keys);
        args.push(amount);
        match ask(&mut conn, &args) {
            Some(reply) if reply == ":1\r\n" || reply == ":0\r\n" => {
                acked.push((receipt, reply[1..2].to_string()));
            }
            Some(reply) => panic!("transfer {args:?}: {reply}"),
            None => break,
        }
    }
    acked
}

/// The accounts' total and the receipts' values after a restart.
fn check(served: &Served, acked: &[(String, String)]) {
    let mut conn = served.connect();
    let mut total = 0u64;
    for a in 0..ACCOUNTS {
        let reply = ask(&mut conn, &words(&["GET", &format!("acct:{a}")])).expect("a reply");
        let value: u64 = reply
            .lines()
            .nth(1)
            .and_then(|l| l.parse().ok())
            .expect("a balance");
        total += value;
    }
    assert_eq!(total, ACCOUNTS * BALANCE, "a transfer was half applied");
    for (receipt, outcome) in acked {
        let reply = ask(&mut conn, &words(&["GET", receipt])).expect("a reply");
        assert_eq!(
            reply,
            format!("$1\r\n{outcome}\r\n"),
            "acknowledged transfer {receipt} lost"
        );
    }
    let listed = ask(
        &mut conn,
        &words(&["FUNCTION", "LIST", "LIBRARYNAME", "bank"]),
    )
    .unwrap();
    assert!(
        listed.contains("transfer"),
        "the library was lost: {listed}"
    );
}

/// Mutations caught: a script's writes applied without its commit (a half transfer after
/// the kill), a reply sent before the commit (an acknowledged receipt missing), FCALL's
/// library kept only in memory.
#[test]
fn acknowledged_scripts_survive_kill_9_whole() {
    let seed = std::env::var("TAMER_SCRIPT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24_027u64);
    eprintln!("scripts under kill -9: seed {seed} (TAMER_SCRIPT_CRASH_SEED replays it)");
    let dir = temp_dir("script-crash");
    let mut served = Served::start_with(&dir.0, &["--durability", "commit"]);
    let mut conn = served.connect();
    let mut mset = vec!["MSET".to_string()];
    for a in 0..ACCOUNTS {
        mset.push(format!("acct:{a}"));
        mset.push(BALANCE.to_string());
    }
    assert_eq!(ask(&mut conn, &mset).unwrap(), "+OK\r\n");
    let load = vec!["FUNCTION".into(), "LOAD".into(), library()];
    assert_eq!(ask(&mut conn, &load).unwrap(), "$4\r\nbank\r\n");
    let mut rng = Rng(seed);
    let mut acked_all: Vec<(String, String)> = Vec::new();
    for round in 0..KILLS {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (port, stop, acked) = (served.port, stop.clone(), acked.clone());
                let client_seed = seed * 100 + round * 10 + c;
                std::thread::spawn(move || {
                    let mine = client(port, client_seed, round, stop);
                    acked.lock().unwrap().extend(mine);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
        drop(served); // SIGKILL
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        acked_all.extend(acked.lock().unwrap().drain(..));
        served = Served::start_with(&dir.0, &["--durability", "commit"]);
        check(&served, &acked_all);
        eprintln!(
            "round {round}: {} acknowledged transfers so far, all there",
            acked_all.len()
        );
    }
    assert!(!acked_all.is_empty(), "no transfer was acknowledged");
}
