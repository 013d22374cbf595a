//! The state the network's files share: the poller the runtime's cores call, the network
//! behind its lock (the ring, the receive pool, the connections, admission's meter), a
//! connection, what it received, and a finished job's result. Their code is in the siblings
//! that use them: this file names none of those.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, Weak};

use io_uring::{types, IoUring};
use tamer_store::{Db, DbHandle};

use super::admission::{Decision, Meter};
use super::limits::{MAX_PENDING_BYTES, MAX_PENDING_REQUESTS};
use super::options::Dispatch;
use crate::keyspace::dbmap::DbMap;
use crate::keyspace::watches::Watches;
use crate::resp::RequestParser;
use crate::session::Session;
use crate::stats::ServerStats;

/// The network as the runtime's cores see it: the ring (its queues touched only under `net`'s
/// lock; a waiting core enters it without the lock), the connections, and the results of
/// jobs that finished while another core held the lock.
pub(super) struct NetPoller {
    pub(super) ring: Arc<IoUring>,
    pub(super) net: Mutex<Network>,
    /// Finished jobs waiting for the lock, and how many (read without the lock).
    pub(super) done: Mutex<Vec<Done>>,
    pub(super) done_count: AtomicUsize,
    /// A core is blocked in the ring ([`tamer_runtime::Poller::wait`]); wakes write `wake`.
    pub(super) waiting: AtomicBool,
    pub(super) wake: OwnedFd,
    /// Set by [`Server::stop`](super::Server::stop) or a ring error: polls do nothing from then on.
    pub(super) stopped: AtomicBool,
    /// The ring error that stopped the network.
    pub(super) error: Mutex<Option<String>>,
    /// The watches, for their table of blocked clients (read by `wait`).
    pub(super) blocks: Arc<Watches>,
}

/// A finished job's result for one connection.
pub(super) struct Done {
    pub(super) conn: usize,
    pub(super) generation: u32,
    pub(super) replies: Vec<u8>,
    pub(super) session: Session,
    /// Requests the job ran, and the time it ran (ns).
    pub(super) requests: usize,
    pub(super) job_ns: u64,
    /// Requests after a command that blocked: back to the front of the connection's queue.
    pub(super) rest: Vec<Vec<Vec<u8>>>,
    /// The job ran a blocked command again.
    pub(super) retry: bool,
}

/// What jobs and the network share.
pub(super) struct Shared {
    /// The databases' namespaces in the store.
    pub(super) map: DbMap,
    /// The writes' watchers (`WATCH`, blocked clients).
    pub(super) watches: Arc<Watches>,
    /// The server's counters, settings and client list.
    pub(super) stats: Arc<ServerStats>,
    /// The scripts (`EVAL`, `SCRIPT`).
    pub(super) scripts: Arc<crate::commands::scripting::Scripts>,
    /// Pub/sub's channels, subscribers and their mail.
    pub(super) pubsub: Arc<crate::pubsub::Hub>,
    /// Prefetch a job's keys before it runs ([`super::ServerOptions::prefetch`]).
    pub(super) prefetch: bool,
    /// Whether a batch is worth prefetching now (the cache missed lately).
    pub(super) prefetch_gate: super::prefetch::Gate,
}

/// One client connection, under the network's lock.
pub(super) struct Conn {
    pub(super) fd: OwnedFd,
    pub(super) generation: u32,
    pub(super) parser: RequestParser,
    pub(super) query: Vec<u8>,
    /// Parsed requests, and the error that ends the stream, in arrival order.
    pub(super) pending: VecDeque<Pending>,
    /// Argument bytes of the requests in `pending`.
    pub(super) pending_bytes: usize,
    pub(super) in_flight: bool,
    /// Replies waiting to be sent, and the bytes of the send in flight (kept alive for it).
    pub(super) replies: Vec<u8>,
    pub(super) sending: Option<(Vec<u8>, usize)>,
    /// Its session (`None` while a job has it).
    pub(super) session: Option<Session>,
    /// Closing once its job and sends are done (after `QUIT` or an error reply).
    pub(super) closing: bool,
    pub(super) recv_armed: bool,
    /// Receiving stopped (its multishot receive cancelled) until the query bytes drain.
    pub(super) recv_paused: bool,
    /// Its session subscribes to something (as of its last job): mail may wait for it.
    pub(super) subscriber: bool,
    /// The hub sent it a tracking invalidation (as a `REDIRECT` client): mail may wait for
    /// it whatever its session does, until it closes.
    pub(super) pushed: bool,
}

/// What a connection received, in order.
pub(super) enum Pending {
    /// Admitted on arrival: counted in admission's queue until it finishes or is dropped.
    Request(Vec<Vec<u8>>),
    /// Refused on arrival: replied `-BUSY` in its turn (why, for the counters; whether it
    /// would have ended a `MULTI`).
    Busy(Decision, bool),
    /// The reply to a request that broke the protocol or a limit: sent after the replies to
    /// the requests before it, then the connection closes.
    Fatal(String),
}

/// Empties `pending`; returns how many admitted requests it held (admission stops counting
/// them).
pub(super) fn clear_pending(conn: &mut Conn) -> usize {
    conn.pending_bytes = 0;
    let pending = &mut conn.pending;
    let admitted = pending
        .iter()
        .filter(|p| matches!(p, Pending::Request(_)))
        .count();
    pending.clear();
    admitted
}

/// How the network hands requests on (from [`ServerOptions`](super::ServerOptions)).
pub(super) struct Routing {
    pub(super) dispatch: Dispatch,
    pub(super) slo_us: Option<u64>,
}

/// The network behind its poller's lock: the ring's buffers, the listener, the connections
/// (indexed by slot; a slot's generation tells a reused slot from its previous connection)
/// and admission's meter.
pub(super) struct Network {
    /// The ring; its queues are touched only by the holder of the network's lock.
    pub(super) ring: Arc<IoUring>,
    /// The poller this network is in (jobs hand their results to it).
    pub(super) me: Weak<NetPoller>,
    /// Completions of one poll, reused.
    pub(super) completions: Vec<(u64, i32, u32)>,
    pub(super) listener: Option<TcpListener>,
    pub(super) wake_fd: RawFd,
    pub(super) db: Arc<Db>,
    pub(super) handle: DbHandle,
    pub(super) shared: Arc<Shared>,
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) free: Vec<usize>,
    pub(super) next_generation: u32,
    pub(super) open: usize,
    /// The receive pool: `RECV_BUFFERS × RECV_BUFFER_BYTES` bytes the kernel writes into, so
    /// only reached through raw pointers (never a slice over all of it).
    pub(super) pool: *mut u8,
    /// The provided-buffer ring over the pool, and its tail as last published.
    pub(super) buf_ring: *mut types::BufRingEntry,
    pub(super) buf_tail: u16,
    pub(super) wake_buf: Box<u64>,
    pub(super) retry_at: Box<types::Timespec>,
    /// Admission's measurements (kept under the network's lock).
    pub(super) meter: Meter,
    pub(super) cores: usize,
    pub(super) dispatch: Dispatch,
    /// Admission's objective in ns.
    pub(super) slo_ns: Option<u64>,
}

// SAFETY: the raw pointers are the receive pool and its buffer ring, allocated once and never
// freed; the network is only reached under its poller's lock, by one core at a time.
unsafe impl Send for Network {}

impl Conn {
    /// Parsing stops until pending requests drain: [`MAX_PENDING_REQUESTS`] of them, or
    /// [`MAX_PENDING_BYTES`] of their arguments.
    pub(super) fn parsing_waits(&self) -> bool {
        self.pending.len() >= MAX_PENDING_REQUESTS || self.pending_bytes >= MAX_PENDING_BYTES
    }
}

impl Network {
    /// Connection `c`, if it is still the one of `generation`.
    pub(super) fn conn(&mut self, c: usize, generation: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(c)
            .and_then(Option::as_mut)
            .filter(|conn| conn.generation == generation)
    }
}
