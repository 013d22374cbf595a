//! What the server measures about the commands it runs: per-command counters and latency
//! histograms (`INFO commandstats`, the metrics endpoint), error counts by prefix (`INFO
//! errorstats`), the slow log (`SLOWLOG`) and the latency monitor (`LATENCY`).
//!
//! Costs and bounds: a command's counters are atomics in a table fixed at startup (one per
//! command and served subcommand, found by binary search: no lock on the request path); the
//! error table, the slow log and the latency events take a mutex, only when a command fails
//! or passes a threshold. Error prefixes: at most [`MAX_ERROR_PREFIXES`] (past it, new
//! prefixes are counted under `errorstat_OTHER`) of [`MAX_ERROR_PREFIX_BYTES`] each;
//! slow-log entries: `slowlog-max-len` (bounded by [`crate::config::MAX_SLOWLOG_LEN`]) of
//! at most [`SLOWLOG_MAX_ARGS`] arguments of at most [`SLOWLOG_MAX_ARG_BYTES`] bytes each
//! (Redis's own trimming); latency events: one (`command`) with [`LATENCY_HISTORY_LEN`]
//! samples, one per second, as Redis keeps them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (µs) of the latency histograms' buckets, log-spaced 1-2.5-5 from 10 µs to
/// 1 s; a sample above the last lands only in `+Inf`.
pub const BUCKETS_US: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000,
];
/// Distinct error prefixes counted (Redis's bound too).
pub const MAX_ERROR_PREFIXES: usize = 128;
/// Bytes of an error prefix kept.
pub const MAX_ERROR_PREFIX_BYTES: usize = 64;
/// Arguments a slow-log entry keeps (the last one kept says how many more there were).
pub const SLOWLOG_MAX_ARGS: usize = 32;
/// Bytes of an argument a slow-log entry keeps.
pub const SLOWLOG_MAX_ARG_BYTES: usize = 128;
/// Samples of a latency event's history.
pub const LATENCY_HISTORY_LEN: usize = 160;

/// One command's counters.
#[derive(Debug, Default)]
pub struct CommandCounters {
    pub calls: AtomicU64,
    /// Time in all, in ns (INFO shows µs: summing whole µs would drop sub-µs calls).
    pub nsec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Calls per latency bucket (not cumulative; the last one is past `BUCKETS_US`).
    pub buckets: [AtomicU64; BUCKETS_US.len() + 1],
    /// The finer distribution of `LATENCY HISTOGRAM` and `INFO latencystats` (counted while
    /// `latency-tracking` is on).
    pub latency: super::latency::LatencyHistogram,
    /// Of `nsec`, the time parked on the device, waiting for a group commit, waiting for a
    /// checkpoint (`tamer_runtime::thread::Waits`); the rest ran.
    pub device_ns: AtomicU64,
    pub commit_ns: AtomicU64,
    pub checkpoint_ns: AtomicU64,
}

/// One call, as [`Monitor::record_call`] counts it.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub took: Duration,
    pub outcome: Outcome,
    /// Count it in the command's latency distribution (`latency-tracking`).
    pub track_latency: bool,
    /// What it waited for, within `took`.
    pub waits: tamer_runtime::thread::Waits,
}

#[cfg(test)]
impl Call {
    /// A call that waited for nothing.
    pub fn plain(took: Duration, outcome: Outcome) -> Self {
        Self {
            took,
            outcome,
            track_latency: true,
            waits: tamer_runtime::thread::Waits::default(),
        }
    }
}

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused before it ran (arity, authentication): Redis's `rejected_calls`.
    Rejected,
    /// Ran and replied an error: Redis's `failed_calls`.
    Failed,
}

/// One slow-log entry, as `SLOWLOG GET` replies it.
#[derive(Clone, Debug)]
pub struct SlowEntry {
    pub id: u64,
    pub unix_secs: u64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// A latency event: the latest sample, the largest, and one sample per second.
#[derive(Clone, Debug, Default)]
pub struct LatencyEvent {
    pub latest_secs: u64,
    pub latest_ms: u64,
    pub max_ms: u64,
    pub history: VecDeque<(u64, u64)>,
}

/// The slow log: the next id and the newest entries first.
#[derive(Debug, Default)]
struct SlowLog {
    next_id: u64,
    entries: VecDeque<SlowEntry>,
}

/// See the module docs.
#[derive(Debug)]
pub struct Monitor {
    /// Sorted by name.
    commands: Vec<(&'static str, CommandCounters)>,
    /// Each name's place in `commands` (every call looks its counters up: a hash of a few
    /// bytes instead of a binary search that missed the CPU's cache at each step, 1-3 % of
    /// a pipelined GET's CPU).
    places: rustc_hash::FxHashMap<&'static [u8], usize>,
    errors: Mutex<BTreeMap<String, u64>>,
    pub total_errors: AtomicU64,
    slowlog: Mutex<SlowLog>,
    latency: Mutex<BTreeMap<&'static str, LatencyEvent>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The bucket of a duration.
pub fn bucket_of(us: u64) -> usize {
    BUCKETS_US.partition_point(|&bound| bound < us)
}

impl Monitor {
    /// A monitor counting the commands `names` (lowercase).
    pub fn new(names: &[&'static str]) -> Self {
        let mut names = names.to_vec();
        names.sort_unstable();
        names.dedup();
        let places = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_bytes(), i))
            .collect();
        Self {
            commands: names
                .into_iter()
                .map(|n| (n, CommandCounters::default()))
                .collect(),
            places,
            errors: Mutex::new(BTreeMap::new()),
            total_errors: AtomicU64::new(0),
            slowlog: Mutex::new(SlowLog::default()),
            latency: Mutex::new(BTreeMap::new()),
        }
    }

    /// The counters of the command `name` (lowercase), if it is one tamer serves.
    pub fn counters(&self, name: &[u8]) -> Option<&CommandCounters> {
        self.places.get(name).map(|&i| &self.commands[i].1)
    }

    /// Every command's name and counters, by name.
    pub fn all(&self) -> impl Iterator<Item = (&'static str, &CommandCounters)> {
        self.commands.iter().map(|(n, c)| (*n, c))
    }

    /// Counts one call of `name`.
    pub fn record_call(&self, name: &[u8], call: &Call) {
        let Some(c) = self.counters(name) else {
            return;
        };
        let Call {
            took,
            outcome,
            track_latency,
            waits,
        } = *call;
        if outcome == Outcome::Rejected {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let us = took.as_micros() as u64;
        c.calls.fetch_add(1, Ordering::Relaxed);
        c.nsec.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        c.buckets[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        if track_latency {
            c.latency.record(took.as_nanos() as u64);
        }
        for (counter, ns) in [
            (&c.device_ns, waits.device_ns),
            (&c.commit_ns, waits.commit_ns),
            (&c.checkpoint_ns, waits.checkpoint_ns),
        ] {
            if ns > 0 {
                counter.fetch_add(ns, Ordering::Relaxed);
            }
        }
        if outcome == Outcome::Failed {
            c.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts an error reply by its prefix (its first word, as Redis's `errorstats`).
    pub fn record_error(&self, reply: &[u8]) {
        debug_assert_eq!(reply.first(), Some(&b'-'), "an error reply");
        let text = &reply[1.min(reply.len())..];
        let end = text
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(text.len())
            .min(MAX_ERROR_PREFIX_BYTES);
        let prefix = String::from_utf8_lossy(&text[..end]).into_owned();
        self.total_errors.fetch_add(1, Ordering::Relaxed);
        let mut errors = lock(&self.errors);
        if errors.len() >= MAX_ERROR_PREFIXES && !errors.contains_key(&prefix) {
            *errors.entry("OTHER".to_string()).or_insert(0) += 1;
            return;
        }
        *errors.entry(prefix).or_insert(0) += 1;
    }

    /// The error counts by prefix.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        lock(&self.errors).clone()
    }

    /// `CONFIG RESETSTAT`: every counter, the error counts (the slow log and latency events
    /// have their own resets, as in Redis).
    pub fn reset_stats(&self) {
        for (_, c) in &self.commands {
            for counter in [
                &c.calls,
                &c.nsec,
                &c.rejected,
                &c.failed,
                &c.device_ns,
                &c.commit_ns,
                &c.checkpoint_ns,
            ] {
                counter.store(0, Ordering::Relaxed);
            }
            for b in &c.buckets {
                b.store(0, Ordering::Relaxed);
            }
            c.latency.reset();
        }
        lock(&self.errors).clear();
        self.total_errors.store(0, Ordering::Relaxed);
    }

    /// Adds a slow-log entry (arguments trimmed as Redis trims them), keeping `max_len`.
    pub fn slowlog_push(&self, mut entry: SlowEntry, max_len: usize) {
        let total = entry.args.len();
        if total > SLOWLOG_MAX_ARGS {
            entry.args.truncate(SLOWLOG_MAX_ARGS - 1);
            let more = total - (SLOWLOG_MAX_ARGS - 1);
            entry
                .args
                .push(format!("... ({more} more arguments)").into_bytes());
        }
        for arg in &mut entry.args {
            if arg.len() > SLOWLOG_MAX_ARG_BYTES {
                let more = arg.len() - SLOWLOG_MAX_ARG_BYTES;
                arg.truncate(SLOWLOG_MAX_ARG_BYTES);
                arg.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
            }
        }
        let mut log = lock(&self.slowlog);
        entry.id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(entry);
        log.entries.truncate(max_len);
    }

    /// The newest `n` slow-log entries.
    pub fn slowlog_get(&self, n: usize) -> Vec<SlowEntry> {
        lock(&self.slowlog)
            .entries
            .iter()
            .take(n)
            .cloned()
            .collect()
    }

    pub fn slowlog_len(&self) -> usize {
        lock(&self.slowlog).entries.len()
    }

    pub fn slowlog_reset(&self) {
        lock(&self.slowlog).entries.clear();
    }

    /// A latency sample of `ms` for `event` at `unix_secs` (one per second is kept: the
    /// largest of that second, as Redis's `latencyAddSample`).
    pub fn latency_add(&self, event: &'static str, unix_secs: u64, ms: u64) {
        let mut events = lock(&self.latency);
        let e = events.entry(event).or_default();
        e.latest_secs = unix_secs;
        e.latest_ms = ms;
        e.max_ms = e.max_ms.max(ms);
        match e.history.back_mut() {
            Some((secs, prev)) if *secs == unix_secs => *prev = (*prev).max(ms),
            _ => {
                e.history.push_back((unix_secs, ms));
                if e.history.len() > LATENCY_HISTORY_LEN {
                    e.history.pop_front();
                }
            }
        }
    }

    pub fn latency_events(&self) -> BTreeMap<&'static str, LatencyEvent> {
        lock(&self.latency).clone()
    }

    /// Forgets the named events (all when `names` is empty): how many were forgotten.
    pub fn latency_reset(&self, names: &[&[u8]]) -> usize {
        let mut events = lock(&self.latency);
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let before = events.len();
        events.retain(|name, _| {
            !names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name.as_bytes()))
        });
        before - events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(args: Vec<Vec<u8>>) -> SlowEntry {
        SlowEntry {
            id: 0,
            unix_secs: 1,
            duration_us: 2,
            args,
            addr: "a".into(),
            name: Vec::new(),
        }
    }

    /// Catches a slow log that grows past `slowlog-max-len`, keeps the oldest entries
    /// instead of the newest, reuses ids, or keeps arguments untrimmed.
    #[test]
    fn slowlog_is_bounded_and_trimmed() {
        let m = Monitor::new(&["get"]);
        for i in 0..10u8 {
            m.slowlog_push(entry(vec![vec![i]]), 4);
        }
        assert_eq!(m.slowlog_len(), 4);
        let got = m.slowlog_get(100);
        let ids: Vec<u64> = got.iter().map(|e| e.id).collect();
        assert_eq!(ids, [9, 8, 7, 6]);
        assert_eq!(m.slowlog_get(1)[0].args, [vec![9u8]]);
        m.slowlog_push(entry(vec![vec![b'x'; 200]; 40]), 4);
        let e = &m.slowlog_get(1)[0];
        assert_eq!(e.args.len(), SLOWLOG_MAX_ARGS);
        assert_eq!(e.args[31], b"... (9 more arguments)");
        assert!(e.args[0].ends_with(b"... (72 more bytes)"));
        assert_eq!(e.args[0].len(), 128 + b"... (72 more bytes)".len());
        m.slowlog_push(entry(vec![]), 0);
        assert_eq!(m.slowlog_len(), 0, "max-len 0 keeps nothing");
    }

    /// Catches counters that miss a call, count a rejected call as a call, or a histogram
    /// that puts a sample in the wrong bucket.
    #[test]
    fn calls_are_counted_by_outcome() {
        let m = Monitor::new(&["get", "set"]);
        m.record_call(b"get", &Call::plain(Duration::from_micros(7), Outcome::Ok));
        m.record_call(
            b"get",
            &Call::plain(Duration::from_micros(30), Outcome::Failed),
        );
        m.record_call(
            b"get",
            &Call::plain(Duration::from_micros(30), Outcome::Rejected),
        );
        m.record_call(
            b"nosuch",
            &Call::plain(Duration::from_micros(30), Outcome::Ok),
        );
        let c = m.counters(b"get").unwrap();
        assert_eq!(c.calls.load(Ordering::Relaxed), 2);
        assert_eq!(c.nsec.load(Ordering::Relaxed), 37_000);
        assert_eq!(c.failed.load(Ordering::Relaxed), 1);
        assert_eq!(c.rejected.load(Ordering::Relaxed), 1);
        assert_eq!(c.buckets[0].load(Ordering::Relaxed), 1);
        assert_eq!(c.buckets[2].load(Ordering::Relaxed), 1);
        assert_eq!(bucket_of(10), 0);
        assert_eq!(bucket_of(11), 1);
        assert_eq!(bucket_of(2_000_000), BUCKETS_US.len());
        m.reset_stats();
        assert_eq!(c.calls.load(Ordering::Relaxed), 0);
    }

    /// Catches error prefixes taken past the first word or an unbounded error table.
    #[test]
    fn errors_are_counted_by_prefix_within_a_bound() {
        let m = Monitor::new(&[]);
        m.record_error(b"-ERR syntax error\r\n");
        m.record_error(b"-WRONGTYPE Operation\r\n");
        m.record_error(b"-ERR other\r\n");
        for i in 0..300 {
            m.record_error(format!("-E{i} x\r\n").as_bytes());
        }
        let e = m.errors();
        assert_eq!(e["ERR"], 2);
        assert_eq!(e["WRONGTYPE"], 1);
        assert_eq!(e.len(), MAX_ERROR_PREFIXES + 1);
        assert_eq!(m.total_errors.load(Ordering::Relaxed), 303);
        let m = Monitor::new(&[]);
        m.record_error(format!("-{}\r\n", "X".repeat(1000)).as_bytes());
        assert_eq!(
            m.errors().keys().next().unwrap().len(),
            MAX_ERROR_PREFIX_BYTES
        );
    }

    /// Catches a latency history that keeps two samples of one second, grows without bound
    /// or loses the maximum.
    #[test]
    fn latency_keeps_one_sample_per_second() {
        let m = Monitor::new(&[]);
        m.latency_add("command", 100, 5);
        m.latency_add("command", 100, 9);
        m.latency_add("command", 100, 3);
        for s in 101..400 {
            m.latency_add("command", s, 1);
        }
        let e = &m.latency_events()["command"];
        assert_eq!(e.history.len(), LATENCY_HISTORY_LEN);
        assert_eq!((e.latest_secs, e.latest_ms, e.max_ms), (399, 1, 9));
        assert_eq!(m.latency_reset(&[b"nosuch"]), 0);
        assert_eq!(m.latency_reset(&[b"COMMAND"]), 1);
    }
}
