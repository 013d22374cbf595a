//! `--metrics-addr HOST:PORT`: Prometheus's text exposition (format 0.0.4) over HTTP/1.1, from
//! a small responder on its own OS thread: `GET /metrics` answers the metrics, anything else
//! 404 (or 405 for another method); every response closes its connection.
//!
//! Bounds: one scrape served at a time; a request's head is read up to
//! [`MAX_REQUEST_BYTES`] with a [`IO_TIMEOUT_MS`] timeout on each read and write, so a stuck
//! scraper holds the thread at most that long. The metric names are in `docs/config.md`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::stats::monitor::BUCKETS_US;
use crate::stats::ServerStats;

/// Most bytes of a request's head.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Timeout of each read and write of a scrape.
pub const IO_TIMEOUT_MS: u64 = 2_000;

/// The running responder; dropping it stops it.
pub struct Metrics {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Where it listens.
    pub local_addr: std::net::SocketAddr,
}

impl Metrics {
    /// Listens on `addr` and serves `stats`' metrics from a thread of its own.
    pub fn start(addr: &str, stats: Arc<ServerStats>) -> Result<Metrics, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
        let local_addr = listener.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tamer-metrics".into())
            .spawn(move || {
                // Bounded by the stop flag (Drop connects once to wake the accept).
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    match conn {
                        Ok(conn) => {
                            let _ = respond(conn, &stats);
                        }
                        // Out of descriptors, say: wait rather than spin.
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Metrics {
            stop,
            thread: Some(thread),
            local_addr,
        })
    }
}

impl Drop for Metrics {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.local_addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request's head and answers it.
fn respond(mut conn: TcpStream, stats: &ServerStats) -> std::io::Result<()> {
    let timeout = Some(Duration::from_millis(IO_TIMEOUT_MS));
    conn.set_read_timeout(timeout)?;
    conn.set_write_timeout(timeout)?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    // Bounded: at most MAX_REQUEST_BYTES, each read within the timeout.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => ("200 OK", exposition(stats)),
        (b"GET", _) => ("404 Not Found", "not found: try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "GET only\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes())
}

/// One metric family's header and its unlabelled sample.
fn family(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    );
}

/// The metrics as Prometheus's text format.
pub fn exposition(stats: &ServerStats) -> String {
    let mut out = String::new();
    commands(&mut out, stats);
    for (name, kind, help, value) in server_rows(stats) {
        family(&mut out, name, kind, help, value);
    }
    if let Some(db) = stats.db() {
        for (name, kind, help, value) in store_rows(&db) {
            family(&mut out, name, kind, help, value);
        }
    }
    out
}

/// One family: name, type, help, value.
type Row = (&'static str, &'static str, &'static str, u64);

fn server_rows(stats: &ServerStats) -> [Row; 10] {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    [
        (
            "tamer_connected_clients",
            "gauge",
            "Client connections open.",
            stats.connected.load(Ordering::Relaxed) as u64,
        ),
        (
            "tamer_connections_received_total",
            "counter",
            "Connections accepted.",
            load(&stats.connections_received),
        ),
        (
            "tamer_rejected_connections_total",
            "counter",
            "Connections refused (maxclients).",
            load(&stats.rejected),
        ),
        (
            "tamer_admitted_requests_total",
            "counter",
            "Requests handed to the runtime.",
            load(&stats.admitted),
        ),
        (
            "tamer_busy_replies_total",
            "counter",
            "Requests refused with -BUSY (admission NACKs).",
            load(&stats.busy),
        ),
        (
            "tamer_keyspace_hits_total",
            "counter",
            "Read lookups that found their key (INFO keyspace_hits).",
            load(&stats.lookups.hits),
        ),
        (
            "tamer_keyspace_misses_total",
            "counter",
            "Read lookups that did not (INFO keyspace_misses).",
            load(&stats.lookups.misses),
        ),
        (
            "tamer_error_replies_total",
            "counter",
            "Error replies.",
            load(&stats.monitor.total_errors),
        ),
        (
            "tamer_commands_processed_total",
            "counter",
            "Requests run, of any command.",
            load(&stats.commands),
        ),
        (
            "tamer_resident_memory_bytes",
            "gauge",
            "Resident set size of the process.",
            crate::stats::info::rss_bytes(),
        ),
    ]
}

fn store_rows(db: &tamer_store::Db) -> [Row; 10] {
    let cache = db.cache_stats();
    let commit = db.commit_stats();
    let cp = db.checkpoint_stats();
    let writes = crate::stats::info::device_writes(cache.write_backs, &commit, &cp);
    [
        (
            "tamer_cache_hits_total",
            "counter",
            "Page cache hits.",
            cache.hits,
        ),
        (
            "tamer_cache_misses_total",
            "counter",
            "Page cache misses.",
            cache.misses,
        ),
        (
            "tamer_cache_evictions_total",
            "counter",
            "Pages evicted from the cache.",
            cache.evictions,
        ),
        (
            "tamer_device_reads_total",
            "counter",
            "Pages read from the device.",
            cache.misses,
        ),
        (
            "tamer_device_writes_total",
            "counter",
            "Pages written to the device.",
            writes,
        ),
        (
            "tamer_commits_staged_total",
            "counter",
            "Transactions staged for group commit.",
            commit.staged,
        ),
        (
            "tamer_group_commits_total",
            "counter",
            "Group commits (one device flush each).",
            commit.group_commits,
        ),
        (
            "tamer_staging_overflows_total",
            "counter",
            "Transactions made durable by a checkpoint instead.",
            commit.overflows,
        ),
        (
            "tamer_checkpoints_total",
            "counter",
            "Checkpoints.",
            cp.checkpoints,
        ),
        (
            "tamer_runtime_queue_depth",
            "gauge",
            "Jobs waiting in the runtime's shared queue.",
            db.runtime().queued() as u64,
        ),
    ]
}

/// Per-command counters and latency histograms (commands called at least once).
fn commands(out: &mut String, stats: &ServerStats) {
    let active: Vec<_> = stats
        .monitor
        .all()
        .filter(|(_, c)| c.calls.load(Ordering::Relaxed) + c.rejected.load(Ordering::Relaxed) > 0)
        .collect();
    let counters = [
        ("tamer_commands_total", "Commands run, by name."),
        (
            "tamer_commands_failed_total",
            "Commands that replied an error, by name.",
        ),
        (
            "tamer_commands_rejected_total",
            "Commands refused before running, by name.",
        ),
    ];
    for (i, (name, help)) in counters.iter().enumerate() {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} counter\n");
        for (cmd, c) in &active {
            let v = [&c.calls, &c.failed, &c.rejected][i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{cmd=\"{cmd}\"}} {v}");
        }
    }
    let h = "tamer_command_duration_seconds";
    let _ = write!(
        out,
        "# HELP {h} Command latency, by name.\n# TYPE {h} histogram\n"
    );
    for (cmd, c) in &active {
        let mut cumulative = 0;
        for (i, bound_us) in BUCKETS_US.iter().enumerate() {
            cumulative += c.buckets[i].load(Ordering::Relaxed);
            let le = *bound_us as f64 / 1e6;
            let _ = writeln!(out, "{h}_bucket{{cmd=\"{cmd}\",le=\"{le}\"}} {cumulative}");
        }
        // +Inf and the count from the same reads as the buckets, so they never disagree.
        let calls = cumulative + c.buckets[BUCKETS_US.len()].load(Ordering::Relaxed);
        let secs = c.nsec.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{h}_bucket{{cmd=\"{cmd}\",le=\"+Inf\"}} {calls}");
        let _ = writeln!(out, "{h}_sum{{cmd=\"{cmd}\"}} {secs}");
        let _ = writeln!(out, "{h}_count{{cmd=\"{cmd}\"}} {calls}");
    }
    command_waits(out, &active);
}

/// Where each command's time went besides running: `tamer_command_wait_seconds_total` by
/// name and `wait` (device, commit, checkpoint), as `INFO commandsplit` reports it.
fn command_waits(out: &mut String, active: &[(&str, &crate::stats::monitor::CommandCounters)]) {
    let w = "tamer_command_wait_seconds_total";
    let _ = write!(
        out,
        "# HELP {w} Time commands waited, by name and for what.\n# TYPE {w} counter\n"
    );
    for (cmd, c) in active {
        for (wait, ns) in [
            ("device", &c.device_ns),
            ("commit", &c.commit_ns),
            ("checkpoint", &c.checkpoint_ns),
        ] {
            let secs = ns.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{w}{{cmd=\"{cmd}\",wait=\"{wait}\"}} {secs}");
        }
    }
}
