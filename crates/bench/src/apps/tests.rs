//! The pure parts of `bench apps`: reading redis-benchmark's output and replies, the fan-out's
//! frames and their check, the servers' alternation, the verdicts.

use super::acl::{users_in_order, USER};
use super::fanout::{continues_frames, message_frame};
use super::redis_benchmark::{errors_of, requests_per_s, Run};
use super::report::verdict;
use super::{bulk_text, cpu_jiffies, order, Cpu, Kind, Measured};

/// Catches: the header taken for a rate, the quotes not stripped, a zero or missing rate
/// accepted.
#[test]
fn redis_benchmark_csv() {
    let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"GET\",\"81300.81\",\"0.3\"\n";
    assert_eq!(requests_per_s(csv), Some(81_300.81));
    let evalsha = "\"test\",\"rps\"\n\"evalsha 6b1b 1 key:__rand_int__\",\"14512.50\"\n";
    assert_eq!(requests_per_s(evalsha), Some(14_512.5));
    assert_eq!(requests_per_s("\"test\",\"rps\"\n"), None);
    assert_eq!(requests_per_s("\"GET\",\"0.00\"\n"), None);
    assert_eq!(requests_per_s(""), None);
}

/// Catches: the password warning shown as the error, the error line buried after others.
#[test]
fn redis_benchmark_errors() {
    let stderr = "Warning: Using a password with '-a' or '-u' option on the command line \
                  interface may not be safe.\nWARNING: Could not fetch server CONFIG\n\
                  Error from server: NOPERM this user has no permissions\n";
    assert_eq!(
        errors_of(stderr),
        "Error from server: NOPERM this user has no permissions"
    );
    assert_eq!(
        errors_of("Could not connect\n\n"),
        "Could not connect".to_string()
    );
}

/// Catches: the user or its password missing from the command line, the test not last.
#[test]
fn redis_benchmark_arguments() {
    let run = Run {
        port: 17_001,
        cpu: 0,
        clients: 50,
        requests: 1_000,
        keyspace: 10_000,
        user: Some(("bench", "benchpw")),
        test: vec!["-t".into(), "get".into()],
    };
    let line = run.args().join(" ");
    assert_eq!(
        line,
        "-p 17001 -c 50 -n 1000 -r 10000 --csv --user bench -a benchpw -t get"
    );
}

/// Catches: a bulk string's length unchecked, an error or a nil taken for text.
#[test]
fn bulk_strings() {
    assert_eq!(bulk_text(b"$3\r\nabc\r\n"), Some("abc".into()));
    assert_eq!(bulk_text(b"$4\r\nabc\r\n"), None);
    assert_eq!(bulk_text(b"-ERR no\r\n"), None);
    assert_eq!(bulk_text(b"$-1\r\n"), None);
}

/// Catches: a frame of the wrong size (the fan-out's clock would stop early or never), a
/// corrupted or shifted byte let through, a chunk across frames refused.
#[test]
fn fanout_frames() {
    let frame = message_frame(b"fan", &[b'p'; 64]);
    assert_eq!(frame.len(), 97);
    assert!(frame.starts_with(b"*3\r\n$7\r\nmessage\r\n$3\r\nfan\r\n$64\r\np"));
    let stream: Vec<u8> = frame.repeat(3);
    for (offset, len) in [(0, 97), (10, 150), (96, 2), (150, 141)] {
        assert!(continues_frames(
            &frame,
            offset as u64,
            &stream[offset..offset + len]
        ));
    }
    let mut bad = stream.clone();
    bad[130] ^= 1;
    assert!(!continues_frames(&frame, 100, &bad[100..200]));
    assert!(!continues_frames(&frame, 1, &stream[0..10]));
}

/// Catches: the same server first in every round, a round with either server twice.
#[test]
fn servers_alternate() {
    assert_eq!(order(0), [Kind::Tamer, Kind::Redis]);
    assert_eq!(order(1), [Kind::Redis, Kind::Tamer]);
    assert_eq!(order(4), order(0));
}

/// Catches: a value at its target counted as a miss, a missing value as met, CPU per
/// operation dividing by zero.
#[test]
fn verdicts_and_cpu() {
    assert_eq!(verdict(Some(1.0), 1.0), "met");
    assert_eq!(verdict(Some(0.969), 0.97), "miss");
    assert_eq!(verdict(None, 0.97), "not measured");
    let cpu = |server_s, load_busy_fraction| Cpu {
        server_s,
        load_busy_fraction,
    };
    let m = Measured::new(200_000, 4.0, cpu(3.0, 0.5));
    assert_eq!(m.ops_per_s, 50_000.0);
    assert!((m.server_cpu_us_per_op() - 15.0).abs() < 1e-9);
    assert!(Measured::default().server_cpu_us_per_op().is_finite());
    assert_eq!(Measured::new(1, 0.0, Cpu::default()).ops_per_s, 0.0);
}

/// Catches: merged rates averaged rather than taken over the summed time (two runs of 100 k
/// at 100 k/s and 50 k/s are 66.7 k/s, not 75 k), the busy fraction not weighted by time.
#[test]
fn measurements_merge() {
    let a = Measured::new(
        100_000,
        1.0,
        Cpu {
            server_s: 0.5,
            load_busy_fraction: 1.0,
        },
    );
    let b = Measured::new(
        100_000,
        2.0,
        Cpu {
            server_s: 0.7,
            load_busy_fraction: 0.4,
        },
    );
    let m = Measured::default().merge(a).merge(b);
    assert_eq!(m.ops, 200_000);
    assert!((m.ops_per_s - 200_000.0 / 3.0).abs() < 1e-6);
    assert!((m.server_cpu_s - 1.2).abs() < 1e-12);
    assert!((m.load_cpu_busy_fraction - 0.6).abs() < 1e-12);
}

/// Catches: one user always first (a drift within the round then favours it), a round with
/// one user twice as many runs.
#[test]
fn acl_runs_are_abba() {
    assert_eq!(users_in_order(0), [None, Some(USER), Some(USER), None]);
    assert_eq!(users_in_order(1), [Some(USER), None, None, Some(USER)]);
}

/// Catches: idle or iowait counted as busy, the wrong CPU's line (`cpu1` matching `cpu10`),
/// the aggregate `cpu` line taken.
#[test]
fn load_cpu_jiffies() {
    let stat = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 10 1 5 100 4 1 2 3 0 0\ncpu1 7 0 3 50 0 0 0 0 0 0\n\
                cpu10 1 1 1 1 1 1 1 1 0 0\nintr 5\n";
    assert_eq!(cpu_jiffies(stat, 0), Some((22, 126)));
    assert_eq!(cpu_jiffies(stat, 1), Some((10, 60)));
    assert_eq!(cpu_jiffies(stat, 2), None);
}
