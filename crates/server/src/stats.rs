//! Server-wide counters that `INFO` reports (updated by the network core and the sessions).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What `INFO` reports about the server as a whole.
#[derive(Debug)]
pub struct ServerStats {
    pub started: Instant,
    pub port: u16,
    pub max_clients: usize,
    pub connections_received: AtomicU64,
    pub connected: AtomicUsize,
    pub rejected: AtomicU64,
    pub commands: AtomicU64,
    /// Active expiry's counters (`crate::expiry`).
    pub expiry: Arc<crate::expiry::ExpiryStats>,
}

impl ServerStats {
    pub fn new(port: u16, max_clients: usize) -> Self {
        Self {
            started: Instant::now(),
            port,
            max_clients,
            connections_received: AtomicU64::new(0),
            connected: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            expiry: Arc::default(),
        }
    }

    /// `INFO`'s text for `sections` (empty: every section built), as Redis lays it out:
    /// `# Section` then `field:value` lines, sections separated by a blank line.
    pub fn info(&self, sections: &[Vec<u8>]) -> String {
        let want = |name: &str| {
            sections.is_empty()
                || sections.iter().any(|s| {
                    let s = s.to_ascii_lowercase();
                    s == name.as_bytes() || s == b"all" || s == b"default" || s == b"everything"
                })
        };
        let mut parts = Vec::new();
        let uptime = self.started.elapsed().as_secs();
        if want("server") {
            parts.push(format!(
                "# Server\r\nredis_version:{}\r\ntamer_version:{}\r\nredis_mode:standalone\r\n\
                 os:{} {}\r\narch_bits:64\r\nmultiplexing_api:io_uring\r\nprocess_id:{}\r\n\
                 tcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\n",
                crate::session::REDIS_VERSION,
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                self.port,
                uptime / 86_400,
            ));
        }
        if want("clients") {
            parts.push(format!(
                "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
                self.connected.load(Ordering::Relaxed),
                self.max_clients
            ));
        }
        if want("stats") {
            parts.push(format!(
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
                 rejected_connections:{}\r\n",
                self.connections_received.load(Ordering::Relaxed),
                self.commands.load(Ordering::Relaxed),
                self.rejected.load(Ordering::Relaxed)
            ));
        }
        parts.join("\r\n")
    }
}
