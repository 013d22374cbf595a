//! How the server listens and runs: [`ServerOptions`] and its [`Dispatch`].

use std::sync::Arc;

/// How the server listens and runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The address to listen on (Redis's `bind`).
    pub bind: String,
    /// The TCP port to listen on (0: one the system picks; see [`super::Server::local_addr`]).
    pub port: u16,
    /// Most connections at once (Redis's `maxclients`).
    pub max_clients: usize,
    /// The password every client must give (`AUTH`) before anything else (`requirepass`).
    pub requirepass: Option<String>,
    /// Which core runs a connection's requests.
    pub dispatch: Dispatch,
    /// The latency objective admission keeps queued work under, µs (`None`: only the hard
    /// bounds; see [`crate::net::admission`]).
    pub slo_us: Option<u64>,
    /// Prefetch the pages of a job's keys before its requests run (NeBuLa's prefetch on
    /// dispatch; see [`tamer_store::DbHandle::prefetch`]).
    pub prefetch: bool,
    /// The settings (`CONFIG GET/SET`); `max_clients` and `requirepass` above are written
    /// into it at start.
    pub config: Arc<crate::config::Config>,
}

/// Which core runs a connection's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// One shared queue: the next free core runs the next job (NeBuLa's single queue).
    Shared,
    /// Each connection pinned to one core's inbox (connection number modulo cores): the
    /// RSS/multi-queue baseline NeBuLa compares against.
    Partitioned,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1".into(),
            port: 6379,
            max_clients: 10_000,
            requirepass: None,
            dispatch: Dispatch::Shared,
            slo_us: None,
            prefetch: true,
            config: Arc::default(),
        }
    }
}
