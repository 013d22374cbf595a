//! What the server shares across its threads besides the store: the settings, the counters
//! `INFO` and the metrics endpoint report (updated by the network core and the sessions),
//! the connection registry, and the shutdown request.

pub(crate) mod clients;
pub(crate) mod info;
pub mod latency;
pub mod metrics;
pub(crate) mod monitor;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tamer_store::Db;

use crate::config::Config;
use clients::Clients;
use monitor::Monitor;

/// See the module docs.
#[derive(Debug)]
pub struct ServerStats {
    pub(crate) started: Instant,
    /// Unix time (s) the server started.
    pub(crate) started_unix: u64,
    pub(crate) port: u16,
    pub(crate) config: Arc<Config>,
    pub(crate) monitor: Monitor,
    pub(crate) clients: Clients,
    pub(crate) connections_received: AtomicU64,
    pub(crate) connected: AtomicUsize,
    pub(crate) rejected: AtomicU64,
    pub(crate) commands: AtomicU64,
    /// Requests handed to the runtime (admitted) and refused with `-BUSY` (NACKed).
    pub(crate) admitted: AtomicU64,
    /// Jobs (a connection's batch of requests) that started, their time queued in all and
    /// the longest (ns): from the network core's spawn to a core starting them.
    pub(crate) jobs_started: AtomicU64,
    pub(crate) jobs_queued_ns: AtomicU64,
    pub(crate) jobs_queued_ns_max: AtomicU64,
    pub(crate) busy: AtomicU64,
    /// Admission's measurements and its refusals by cause.
    pub(crate) admission: AdmissionStats,
    /// `SHUTDOWN` asked: the process closes the store and exits.
    pub shutdown: AtomicBool,
    /// The store, for its statistics (weak: the process closes it at exit).
    db: Mutex<Weak<Db>>,
    /// The replication id `INFO replication` shows (random per start, as Redis's).
    pub(crate) replid: String,
    /// Active expiry's counters (`crate::keyspace::expiry`).
    pub(crate) expiry: Arc<crate::keyspace::expiry::ExpiryStats>,
    /// Read lookups that found their key, and those that did not (`keyspace_hits`/`misses`).
    pub(crate) lookups: crate::keyspace::scope::Lookups,
    /// Clients blocked in a blocking pop now (`INFO clients`), as the network last counted.
    pub(crate) blocked_clients: AtomicUsize,
    /// `CLIENT PAUSE` (`crate::keyspace::pause`).
    pub(crate) pause: Arc<crate::keyspace::pause::Pause>,
    /// Pub/sub clients closed because their mail passed its bound
    /// (`client_output_buffer_limit_disconnections`).
    pub(crate) pubsub_overflows: AtomicU64,
    /// The store refused a write for want of device space and no write has succeeded since:
    /// the gate refuses the commands that take space (`-OOM`).
    pub(crate) out_of_space: AtomicBool,
    /// The store is loading while the server serves: the gate lets only the `loading`
    /// commands run. tamer recovers its store before it listens, so nothing sets it yet.
    pub(crate) loading: AtomicBool,
    /// The ACL users and log.
    pub(crate) acl: crate::acl::Acl,
}

/// Counters `INFO` reports (besides `ServerStats::admitted` and `busy`).
#[derive(Debug, Default)]
pub(crate) struct AdmissionStats {
    /// Requests refused with `-BUSY` by the objective.
    pub(crate) refused_slo: AtomicU64,
    /// Requests refused with `-BUSY` by a full queue (the hard bound or the runtime's).
    pub(crate) refused_full: AtomicU64,
    /// The drain rate measured, requests per second (0: not yet).
    pub(crate) rate_per_s: AtomicU64,
    /// Mean service of one request, ns (0: not yet).
    pub(crate) service_ns: AtomicU64,
}

impl ServerStats {
    /// The server's shared state on `port` with `config`, counting the commands `names`.
    pub fn new(port: u16, config: Arc<Config>, names: &[&'static str]) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut seed = now.as_nanos() as u64 ^ u64::from(std::process::id()) << 32;
        let replid: String = (0..40)
            .map(|_| {
                // SplitMix64: an id, not a secret.
                seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = seed;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                char::from_digit(((z ^ (z >> 31)) % 16) as u32, 16).expect("a hex digit")
            })
            .collect();
        let stats = Self {
            started: Instant::now(),
            started_unix: now.as_secs(),
            port,
            config,
            monitor: Monitor::new(names),
            clients: Clients::default(),
            connections_received: AtomicU64::new(0),
            connected: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            jobs_started: AtomicU64::new(0),
            jobs_queued_ns: AtomicU64::new(0),
            jobs_queued_ns_max: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            admission: Default::default(),
            shutdown: AtomicBool::new(false),
            db: Mutex::new(Weak::new()),
            replid,
            expiry: Arc::default(),
            lookups: crate::keyspace::scope::Lookups::default(),
            blocked_clients: AtomicUsize::new(0),
            pause: Arc::default(),
            pubsub_overflows: AtomicU64::new(0),
            out_of_space: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            acl: crate::acl::Acl::default(),
        };
        stats.sync_requirepass();
        stats
    }

    /// Makes the default user's password `requirepass`'s (after it was set).
    pub(crate) fn sync_requirepass(&self) {
        let pass = self.config.requirepass();
        self.acl
            .set_default_password(pass.as_deref().map(Vec::as_slice));
    }

    /// Names the store whose statistics `INFO` and the metrics report.
    pub fn set_db(&self, db: &Arc<Db>) {
        *self.db.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(db);
    }

    /// The store, while it is open.
    pub fn db(&self) -> Option<Arc<Db>> {
        self.db.lock().unwrap_or_else(|p| p.into_inner()).upgrade()
    }

    /// `CONFIG RESETSTAT`: the command, error and connection counters.
    pub fn reset(&self) {
        self.monitor.reset_stats();
        for c in [
            &self.connections_received,
            &self.rejected,
            &self.commands,
            &self.admitted,
            &self.busy,
            &self.lookups.hits,
            &self.lookups.misses,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}
