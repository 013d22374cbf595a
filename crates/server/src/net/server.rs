//! Starting and stopping the server: the listener, the shared state, the background work
//! (reclaim, active expiry) and the network's poller on the store's runtime.

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tamer_runtime::Poller;
use tamer_store::{Db, DbError};

use super::network::{NetPoller, Routing, Shared};
use super::options::ServerOptions;
use crate::keyspace::dbmap::DbMap;
use crate::keyspace::reclaim::Reclaimer;
use crate::keyspace::watches::Watches;
use crate::keyspace::Databases;
use crate::stats::ServerStats;

/// A running server; [`Server::stop`] ends it.
pub struct Server {
    /// Reclaims flushed databases' keys in the background (stopped with the server).
    reclaimer: Option<Reclaimer>,
    db: Arc<Db>,
    /// The network, polled by the runtime's cores until `stop` (`None` once stopped).
    poller: Option<Arc<NetPoller>>,
    /// The address the server listens on (with the port the system picked for port 0).
    pub local_addr: std::net::SocketAddr,
    /// What the server shares (settings, counters, connections, the shutdown request).
    pub stats: Arc<ServerStats>,
    /// Active expiry, stopped when the server is (dropped after the network stops).
    _expirer: crate::keyspace::expiry::Expirer,
}

impl Server {
    /// Listens on `options`' address and serves `db` on its runtime's cores.
    pub fn start(db: Arc<Db>, mut options: ServerOptions) -> Result<Server, String> {
        options.max_clients = descriptors_for(options.max_clients);
        let listener = TcpListener::bind((options.bind.as_str(), options.port))
            .map_err(|e| format!("listening on {}:{}: {e}", options.bind, options.port))?;
        let local_addr = listener.local_addr().map_err(|e| e.to_string())?;
        crate::keyspace::upgrade(&db).map_err(|e| format!("counting the keys: {e}"))?;
        let databases = db
            .transaction(|tx| Databases::load(tx).map_err(|e| DbError::Runtime(e.to_string())))
            .map_err(|e| format!("loading the databases: {e}"))?;
        let stats = Arc::new(server_stats(&db, &options, local_addr.port())?);
        let scripts = Arc::default();
        crate::commands::scripting::load_at_start(&db, &scripts, &crate::commands::table::TABLE)?;
        let shared = Arc::new(Shared {
            map: DbMap::new(databases.namespaces),
            watches: Arc::new(Watches::default()),
            stats: stats.clone(),
            scripts,
            pubsub: Arc::default(),
            prefetch: options.prefetch,
            prefetch_gate: super::prefetch::Gate::default(),
        });
        crate::commands::server::apply_buffer_limits(&stats.config, &shared.pubsub);
        let reclaimer = Some(Reclaimer::start(db.clone())?);
        let expiry = crate::keyspace::expiry::ExpiryOptions::default();
        let expired_events = crate::pubsub::DirectEvents {
            hub: shared.pubsub.clone(),
            config: shared.stats.config.clone(),
        };
        let expirer = crate::keyspace::expiry::Expirer::start(
            &db,
            expiry,
            shared.stats.expiry.clone(),
            None,
            Some(Arc::new(expired_events)),
            Some(shared.stats.pause.clone()),
        )?;
        let routing = Routing {
            dispatch: options.dispatch,
            slo_us: options.slo_us,
        };
        let poller = NetPoller::start(listener, db.clone(), shared, routing)?;
        Ok(Server {
            reclaimer,
            db,
            poller: Some(poller),
            local_addr,
            stats,
            _expirer: expirer,
        })
    }

    /// Stops accepting and closes every connection; the error that stopped the network
    /// before, if one did.
    pub fn stop(mut self) -> Result<(), String> {
        if let Some(r) = self.reclaimer.take() {
            r.stop();
        }
        self.stop_network()
    }

    fn stop_network(&mut self) -> Result<(), String> {
        let Some(poller) = self.poller.take() else {
            return Ok(());
        };
        poller.stopped.store(true, Ordering::SeqCst);
        let mine: Arc<dyn Poller> = poller.clone();
        self.db.runtime().remove_poller(&mine);
        drop(mine);
        // A core may still be inside a poll: the lock waits for it, and later polls see
        // `stopped` and do nothing.
        poller.lock_net().teardown();
        // Each core drops its copy of the poller (and with it the network's `Db`) at its next
        // pass: wake them all, and wait (at most 1 s) so that the store is the caller's alone
        // once this returns.
        let _ = self.db.runtime().spawn(|| {});
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        while Arc::strong_count(&poller) > 1 && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let error = poller
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        error.map_or(Ok(()), Err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop_network();
    }
}

/// The server's shared state: `options`' settings (the effective `maxclients`, the
/// password) in its registry, the store named for its statistics.
fn server_stats(db: &Arc<Db>, options: &ServerOptions, port: u16) -> Result<ServerStats, String> {
    let max_clients = options.max_clients.to_string();
    let pass = options.requirepass.clone().unwrap_or_default();
    let pairs = [
        ("maxclients", max_clients.as_str()),
        ("requirepass", pass.as_str()),
    ];
    options
        .config
        .set_many(&pairs, crate::config::Origin::Startup)
        .map_err(|e| e.trim_start_matches("ERR ").to_string())?;
    let stats = ServerStats::new(
        port,
        options.config.clone(),
        &crate::commands::table::all_with_subcommands()
            .map(|c| c.name)
            .collect::<Vec<_>>(),
    );
    stats.set_db(db);
    let aclfile = stats.config.get("aclfile");
    let lines = stats.config.users();
    if !aclfile.is_empty() && !lines.is_empty() {
        return Err(
            "users defined in the configuration and an aclfile at the same time: \
                    define them in one place (as Redis refuses both)"
                .into(),
        );
    }
    if !lines.is_empty() {
        let users = crate::acl::file::from_config(&lines)
            .map_err(|e| format!("aborting start because of ACL errors: {e}"))?;
        *stats.acl.users() = users;
        stats.acl.changed();
    }
    if !aclfile.is_empty() {
        let users = crate::acl::file::load(std::path::Path::new(&aclfile))
            .map_err(|e| format!("aborting start because of ACL errors: {e}"))?;
        *stats.acl.users() = users;
        stats.acl.changed();
    }
    Ok(stats)
}

/// Descriptors kept for the store, the listener, the ring and the eventfd beyond the clients.
const RESERVED_FDS: u64 = 64;

/// Raises the open-files limit to serve `max_clients` (as Redis's `adjustOpenFilesLimit`);
/// where the hard limit is lower, serves fewer, and says so.
fn descriptors_for(max_clients: usize) -> usize {
    let want = max_clients as u64 + RESERVED_FDS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads the process's limit into a live struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return max_clients;
    }
    if limit.rlim_cur >= want {
        return max_clients;
    }
    let raised = libc::rlimit {
        rlim_cur: want.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: sets the process's limit from a live struct.
    let cur = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        raised.rlim_cur
    } else {
        limit.rlim_cur
    };
    let served = cur.saturating_sub(RESERVED_FDS).max(1) as usize;
    if served < max_clients {
        eprintln!(
            "warning: the open-files limit ({cur}) allows {served} clients, not maxclients \
             {max_clients}"
        );
    }
    served.min(max_clients)
}
