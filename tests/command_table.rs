//! The command table and the gate against redis-server 7.0, over every command and
//! subcommand tamer serves (not a sample): each sent with too few and too many arguments,
//! each container with an unknown subcommand, `COMMAND INFO` and `COMMAND DOCS` of each in
//! RESP2 and RESP3, `COMMAND LIST` with each filter, and `COMMAND GETKEYS` and
//! `GETKEYSANDFLAGS` on seeded random invocations built from each command's documented
//! arguments. Every reply is compared with redis-server's (from Debian's package,
//! `scripts/install-peers.sh`); without it the tests say SKIPPED unless
//! `TAMER_REQUIRE_PEERS=1`. Each test names the mutation it catches.

use std::net::TcpStream;

use rand::SeedableRng;

mod common;

use common::table::{entries, invocation, parse, Entry, Resp};
use common::{have, read_replies, send_command, temp_dir, Redis, Served};

/// Sends each request to both servers (pipelined) and returns the pairs of replies.
fn both(
    theirs: &mut TcpStream,
    ours: &mut TcpStream,
    requests: &[Vec<String>],
) -> Vec<(String, String)> {
    for r in requests {
        send_command(theirs, r);
        send_command(ours, r);
    }
    let want = read_replies(theirs, requests.len());
    let got = read_replies(ours, requests.len());
    want.into_iter().zip(got).collect()
}

/// A redis-server and a tamer serve, one connection to each; `None` without redis-server.
fn servers(name: &str) -> Option<(Redis, Served, common::Dir, TcpStream, TcpStream)> {
    if !have("redis-server", &["--version"]) {
        return None;
    }
    let redis = Redis::start().unwrap();
    let dir = temp_dir(name);
    let served = Served::start(&dir.0);
    let (theirs, ours) = (redis.connect(), served.connect());
    Some((redis, served, dir, theirs, ours))
}

/// Catches an arity checked the wrong way for any command or subcommand (`-n` as exactly
/// `n`, a fixed arity as a minimum, a subcommand checked against its container's), a
/// command that panics or hangs instead of replying (the blocking pops once did), an
/// unknown subcommand's text, and an unknown command's quoting (128 bytes in all).
#[test]
fn every_command_with_a_wrong_arity_replies_as_redis() {
    let Some((_redis, _served, _dir, mut theirs, mut ours)) = servers("arity") else {
        return;
    };
    let mut requests = Vec::new();
    let mut covered = 0;
    for e in entries() {
        let words = e.words();
        let min = e.arity.unsigned_abs() as usize;
        let with = |n: usize| -> Vec<String> {
            let mut a = words.clone();
            a.resize(n.max(a.len()), "x".to_string());
            a
        };
        if min > words.len() {
            requests.push(with(min - 1));
        }
        if e.arity > 0 {
            requests.push(with(min + 1));
        }
        if !e.subcommands.is_empty() {
            requests.push(vec![e.name.clone(), "nosuchsub".into()]);
            requests.push(vec![e.name.clone(), "x".repeat(200)]);
        }
        covered += 1;
    }
    let long = "y".repeat(100);
    for unknown in [
        vec!["nosuch".to_string()],
        vec!["nosuch".into(), "a".into(), "b".into()],
        vec!["nosuch".into(), long.clone(), long.clone(), "z".into()],
        vec!["nosuch".into(), "x".repeat(300)],
    ] {
        requests.push(unknown);
    }
    for (request, (want, got)) in requests.iter().zip(both(&mut theirs, &mut ours, &requests)) {
        assert_eq!(got, want, "{request:?}");
    }
    eprintln!(
        "{covered} commands and subcommands, {} requests",
        requests.len()
    );
}

/// Inside `MULTI`, a refused command makes `EXEC` fail; a queued one is queued. Catches the
/// gate's refusals not flagging the transaction, `SHUTDOWN` queued, `HELLO` run at once.
#[test]
fn refusals_inside_multi_abort_exec_as_redis() {
    let Some((_redis, _served, _dir, mut theirs, mut ours)) = servers("multi-gate") else {
        return;
    };
    let lines = [
        "multi",
        "set a 1",
        "get",
        "exec",
        "multi",
        "hello 3",
        "ping",
        "exec",
        "multi",
        "shutdown",
        "set a 2",
        "exec",
        "multi",
        "config nosuch",
        "exec",
        "multi",
        "client id x",
        "discard",
        "get a",
    ];
    let requests: Vec<Vec<String>> = lines
        .iter()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect();
    for (request, (want, got)) in requests.iter().zip(both(&mut theirs, &mut ours, &requests)) {
        // HELLO's map names the server and the connection: compared by shape.
        if request[0] == "exec" && want.starts_with("*2\r\n%7") {
            assert!(got.starts_with("*2\r\n%7"), "{request:?}: {got}");
            continue;
        }
        assert_eq!(got, want, "{request:?}");
    }
}

/// A parsed `COMMAND INFO` entry with its subcommands kept to `served` and sorted (Redis
/// lists them in its hash table's order, and lists the ones tamer does not serve).
fn normalized_info(mut info: Resp, served: &[String]) -> Resp {
    if let Resp::List(_, fields) = &mut info {
        if let Some(Resp::List(_, subs)) = fields.get_mut(9) {
            subs.retain(|s| match s {
                Resp::List(_, f) => matches!(&f[0], Resp::Bulk(n) if served.contains(&String::from_utf8_lossy(n).into_owned())),
                _ => true,
            });
            subs.sort();
        }
    }
    info
}

/// A parsed `COMMAND DOCS` map with each `subcommands` map kept to `served` and sorted.
fn normalized_docs(docs: Resp, served: &[String]) -> Resp {
    match docs {
        Resp::Map(pairs) => Resp::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let v = if k == Resp::Bulk(b"subcommands".to_vec()) {
                        subcommand_docs(v, served)
                    } else {
                        normalized_docs(v, served)
                    };
                    (k, v)
                })
                .collect(),
        ),
        // RESP2: a flat array of pairs.
        Resp::List(b'*', items) if items.len() % 2 == 0 && !items.is_empty() => {
            let is_docs = matches!(&items[0], Resp::Bulk(k) if k == b"summary");
            if !is_docs {
                return Resp::List(
                    b'*',
                    items
                        .into_iter()
                        .map(|v| normalized_docs(v, served))
                        .collect(),
                );
            }
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                let v = if k == Resp::Bulk(b"subcommands".to_vec()) {
                    subcommand_docs(v, served)
                } else {
                    v
                };
                out.push(k);
                out.push(v);
            }
            Resp::List(b'*', out)
        }
        other => other,
    }
}

fn subcommand_docs(v: Resp, served: &[String]) -> Resp {
    let keep = |k: &Resp| matches!(k, Resp::Bulk(n) if served.contains(&String::from_utf8_lossy(n).into_owned()));
    match v {
        Resp::Map(pairs) => {
            let mut pairs: Vec<_> = pairs.into_iter().filter(|(k, _)| keep(k)).collect();
            pairs.sort();
            Resp::Map(pairs)
        }
        Resp::List(kind, items) => {
            let mut pairs: Vec<(Resp, Resp)> = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                if keep(&k) {
                    pairs.push((k, v));
                }
            }
            pairs.sort();
            Resp::List(kind, pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())
        }
        other => other,
    }
}

/// Catches a `COMMAND INFO` or `COMMAND DOCS` entry unlike Redis's for any command or
/// subcommand served, in either protocol: a flag, a category, a key spec, an argument, a
/// set written as an array in RESP3, a subcommand's entry missing.
#[test]
fn command_info_and_docs_of_every_command_as_redis() {
    let Some((_redis, _served, _dir, mut theirs, mut ours)) = servers("command-info") else {
        return;
    };
    let all = entries();
    let served: Vec<String> = all.iter().map(|e| e.name.clone()).collect();
    for protocol in ["2", "3"] {
        for conn in [&mut theirs, &mut ours] {
            send_command(conn, &["hello", protocol]);
            read_replies(conn, 1);
        }
        let mut requests = Vec::new();
        for e in &all {
            for sub in ["info", "docs"] {
                requests.push(vec!["command".to_string(), sub.to_string(), e.name.clone()]);
            }
        }
        requests.push(vec!["command".into(), "info".into(), "nosuch".into()]);
        requests.push(vec![
            "command".into(),
            "docs".into(),
            "nosuch".into(),
            "get".into(),
        ]);
        for (request, (want, got)) in requests.iter().zip(both(&mut theirs, &mut ours, &requests)) {
            let (want, got) = if request[1] == "info" {
                let one = |r: &str| match parse(r) {
                    Resp::List(k, items) => Resp::List(
                        k,
                        items
                            .into_iter()
                            .map(|i| normalized_info(i, &served))
                            .collect(),
                    ),
                    other => other,
                };
                (one(&want), one(&got))
            } else {
                (
                    normalized_docs(parse(&want), &served),
                    normalized_docs(parse(&got), &served),
                )
            };
            assert_eq!(got, want, "{request:?} in RESP{protocol}");
        }
    }
    eprintln!(
        "COMMAND INFO and DOCS of {} commands and subcommands, RESP2 and RESP3",
        all.len()
    );
}

/// The names in a `COMMAND LIST` reply, sorted.
fn names(reply: &str) -> Vec<String> {
    let mut out: Vec<String> = match parse(reply) {
        Resp::List(_, items) => items
            .into_iter()
            .map(|i| match i {
                Resp::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    out.sort();
    out
}

/// Catches `COMMAND LIST` leaving out subcommands, a filter that matches otherwise than
/// Redis's (case, categories, patterns), `COMMAND COUNT` counting subcommands, and
/// `COMMAND` listing a command tamer does not serve.
#[test]
fn command_list_count_and_all_as_redis() {
    let Some((_redis, _served, _dir, mut theirs, mut ours)) = servers("command-list") else {
        return;
    };
    let all = entries();
    let served: Vec<String> = all.iter().map(|e| e.name.clone()).collect();
    let mut filters: Vec<Vec<String>> = vec![vec![]];
    for cat in [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "STRING",
        "nosuch",
    ] {
        filters.push(vec!["filterby".into(), "aclcat".into(), cat.into()]);
    }
    for pattern in ["*", "z*", "config*", "*|*", "CLIENT|*", "[a-c]*", "?et"] {
        filters.push(vec!["filterby".into(), "pattern".into(), pattern.into()]);
    }
    filters.push(vec!["filterby".into(), "module".into(), "x".into()]);
    for bad in [
        &["filterby"][..],
        &["filterby", "nosuch", "x"],
        &["x", "y", "z"],
    ] {
        filters.push(bad.iter().map(|s| s.to_string()).collect());
    }
    let requests: Vec<Vec<String>> = filters
        .iter()
        .map(|f| [vec!["command".to_string(), "list".to_string()], f.clone()].concat())
        .collect();
    for (request, (want, got)) in requests.iter().zip(both(&mut theirs, &mut ours, &requests)) {
        if want.starts_with('-') {
            assert_eq!(got, want, "{request:?}");
            continue;
        }
        let want: Vec<String> = names(&want)
            .into_iter()
            .filter(|n| served.contains(n))
            .collect();
        assert_eq!(names(&got), want, "{request:?}");
    }
    let tops = all.iter().filter(|e| !e.name.contains('|')).count();
    let count = common::call(&mut ours, &["command", "count"]);
    assert_eq!(count, format!(":{tops}\r\n"));
    let ours_all = match parse(&common::call(&mut ours, &["command"])) {
        Resp::List(_, items) => items,
        other => panic!("{other:?}"),
    };
    assert_eq!(ours_all.len(), tops);
}

/// Catches a key found where Redis finds none or the reverse, for any command with keys: a
/// key spec's begin or find step misread (index, keyword, range with a negative last key or
/// a limit, keynum), flags in another order, an invalid count accepted, a wrong arity or a
/// command without keys answered otherwise than Redis.
#[test]
fn getkeys_of_every_command_as_redis() {
    let Some((_redis, _served, _dir, mut theirs, mut ours)) = servers("getkeys") else {
        return;
    };
    let seed = 23;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut requests = Vec::new();
    let all = entries();
    for e in &all {
        let rounds = if e.has_keys { 24 } else { 1 };
        for round in 0..rounds {
            let mut inv = invocation(e, &mut rng);
            if round % 8 == 7 {
                inv.pop(); // now and then one argument short
            }
            for sub in ["getkeys", "getkeysandflags"] {
                requests.push([vec!["command".to_string(), sub.to_string()], inv.clone()].concat());
            }
        }
    }
    requests.push(vec![
        "command".into(),
        "getkeys".into(),
        "nosuch".into(),
        "a".into(),
    ]);
    for protocol in ["2", "3"] {
        for conn in [&mut theirs, &mut ours] {
            send_command(conn, &["hello", protocol]);
            read_replies(conn, 1);
        }
        for chunk in requests.chunks(256) {
            for (request, (want, got)) in chunk.iter().zip(both(&mut theirs, &mut ours, chunk)) {
                assert_eq!(got, want, "{request:?} in RESP{protocol}, seed {seed}");
            }
        }
    }
    eprintln!(
        "{} GETKEYS requests over {} commands",
        requests.len(),
        all.len()
    );
}

/// The table's entries the tests read are the server's: every name `COMMAND LIST` answers is
/// in meta.json and the reverse. Catches the tests reading another table than the server's.
#[test]
fn the_tests_read_the_servers_table() {
    let dir = temp_dir("table-names");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let listed = names(&common::call(&mut conn, &["command", "list"]));
    let mut ours: Vec<String> = entries().iter().map(|e: &Entry| e.name.clone()).collect();
    ours.sort();
    assert_eq!(listed, ours);
}
