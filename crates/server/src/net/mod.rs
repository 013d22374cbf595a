//! The network core, on the runtime's own cores (seed 004): one io_uring for every connection
//! (multishot accept, multishot receive into one shared pool of provided buffers, sends of
//! whole reply batches) that every core polls on every scheduling pass
//! ([`tamer_runtime::Poller`]). The core that reaps a receive parses it, decides admission and
//! puts the connection's batch on the shared queue as one job; the core that runs the job
//! pushes its replies' send on the ring itself, and its next pass submits it: no thread hop
//! besides the shared queue. A core with nothing to do blocks in the ring (at most one; the
//! others park), so a packet wakes it.
//!
//! Bounds (per connection unless said): a request larger than [`MAX_QUERY_BYTES`] gets an
//! error and closes its connection (Redis's `client-query-buffer-limit`); parsing stops at
//! [`MAX_PENDING_REQUESTS`] parsed requests waiting for their job and receiving stops past
//! [`QUERY_HIGH_BYTES`] unparsed bytes while parsing waits (resumed once it goes on; one
//! large request alone never pauses it), so a client that
//! pipelines faster than it is served is slowed by TCP, not refused; one job in flight, of at
//! most [`BATCH_REQUESTS`] requests; unsent reply bytes [`MAX_REPLY_BYTES`]
//! (past it the connection is closed, as Redis's `client-output-buffer-limit`); connections
//! [`ServerOptions::max_clients`]; completions handled per poll [`MAX_COMPLETIONS_PER_POLL`].
//! The receive pool is shared: [`RECV_BUFFERS`] buffers of
//! [`RECV_BUFFER_BYTES`] (256 KiB in all, to stay in the L2 cache) in a registered
//! provided-buffer ring; a received buffer is copied into its connection's query bytes and
//! handed back at once by one ring entry and a tail store (no submission, no syscall). In the
//! steady state a poll that pushed entries (sends, re-arms) submits them with one
//! `io_uring_enter`, and a poll with nothing new makes no syscall.

pub mod admission;
pub mod prefetch;

use std::collections::VecDeque;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use tamer_runtime::{Job, Poller};
use tamer_store::{Db, DbError, DbHandle};

use crate::keyspace::dbmap::DbMap;
use crate::keyspace::reclaim::Reclaimer;
use crate::keyspace::watches::Watches;
use crate::keyspace::Databases;
use crate::resp::{write, Parsed, RequestParser};
use crate::session::Session;
use crate::stats::ServerStats;
use admission::{Decision, Meter};

/// Buffers in the shared receive pool.
pub const RECV_BUFFERS: u16 = 64;
/// Bytes of one receive buffer.
pub const RECV_BUFFER_BYTES: usize = 4096;
/// Query bytes received and not yet parsed, per connection (a request larger than this
/// cannot arrive: values are bounded by the store far below it).
pub const MAX_QUERY_BYTES: usize = 64 << 20;
/// Parsed requests waiting for their connection's job (parsing pauses there).
pub const MAX_PENDING_REQUESTS: usize = 4096;
/// Argument bytes of the parsed requests waiting per connection past which parsing waits
/// (one request alone may be larger: it is bounded by [`MAX_QUERY_BYTES`]).
pub const MAX_PENDING_BYTES: usize = 4 << 20;
/// Unparsed bytes past which a connection's receiving pauses while its parsing waits for
/// pending requests to drain.
pub const QUERY_HIGH_BYTES: usize = 4 << 20;
/// How long accepting waits after the process ran out of file descriptors.
const ACCEPT_RETRY_MS: i64 = 100;
/// Requests one job runs.
pub const BATCH_REQUESTS: usize = 64;
/// Reply bytes not yet sent, per connection.
pub const MAX_REPLY_BYTES: usize = 256 << 20;
/// Submission queue entries of the network ring.
const RING_ENTRIES: u32 = 1024;
/// Completions one poll handles (the rest wait for the next pass, a few µs later).
pub const MAX_COMPLETIONS_PER_POLL: usize = 256;
const BUFFER_GROUP: u16 = 7;

/// How the server listens and runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub bind: String,
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
    /// Prefetch the pages of a job's keys before its requests run (seed 004's prefetch on
    /// dispatch; see [`tamer_store::DbHandle::prefetch`]).
    pub prefetch: bool,
    /// The settings (`CONFIG GET/SET`); `max_clients` and `requirepass` above are written
    /// into it at start.
    pub config: Arc<crate::config::Config>,
}

/// Which core runs a connection's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// One shared queue: the next free core runs the next job (seed 004's single queue).
    Shared,
    /// Each connection pinned to one core's inbox (connection number modulo cores): the
    /// RSS/multi-queue baseline seed 004 compares against.
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

/// A running server; [`Server::stop`] ends it.
pub struct Server {
    /// Reclaims flushed databases' keys in the background (stopped with the server).
    reclaimer: Option<Reclaimer>,
    db: Arc<Db>,
    /// The network, polled by the runtime's cores until `stop` (`None` once stopped).
    poller: Option<Arc<NetPoller>>,
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
        let shared = Arc::new(Shared {
            map: DbMap::new(databases.namespaces),
            watches: Arc::new(Watches::default()),
            stats: stats.clone(),
            prefetch: options.prefetch,
        });
        let reclaimer = Some(Reclaimer::start(db.clone())?);
        let expiry = crate::keyspace::expiry::ExpiryOptions::default();
        let expirer = crate::keyspace::expiry::Expirer::start(
            &db,
            expiry,
            shared.stats.expiry.clone(),
            None,
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

fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// The network as the runtime's cores see it: the ring (its queues touched only under `net`'s
/// lock; a waiting core enters it without the lock), the connections, and the results of
/// jobs that finished while another core held the lock.
struct NetPoller {
    ring: Arc<IoUring>,
    net: Mutex<Network>,
    /// Finished jobs waiting for the lock, and how many (read without the lock).
    done: Mutex<Vec<Done>>,
    done_count: AtomicUsize,
    /// A core is blocked in the ring ([`Poller::wait`]); wakes write `wake`.
    waiting: AtomicBool,
    wake: OwnedFd,
    /// Set by [`Server::stop`] or a ring error: polls do nothing from then on.
    stopped: AtomicBool,
    /// The ring error that stopped the network.
    error: Mutex<Option<String>>,
    /// The watches, for their table of blocked clients (read by `wait`).
    blocks: Arc<Watches>,
}

impl NetPoller {
    fn start(
        listener: TcpListener,
        db: Arc<Db>,
        shared: Arc<Shared>,
        routing: Routing,
    ) -> Result<Arc<Self>, String> {
        // SAFETY: eventfd returns a new descriptor (or -1, checked).
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut builder = IoUring::builder();
        if db.runtime().cores() == 1 {
            // One core submits every request (the first poll submits the set-up's entries),
            // so its completions' task work can wait for that core's next enter (flagged in
            // the ring, which a poll checks) instead of an interrupt while it runs requests:
            // this took a fifth of the core under redis-benchmark. With more cores a request's
            // task work belongs to the core that submitted it, which may be parked.
            builder.setup_coop_taskrun().setup_taskrun_flag();
        }
        let ring = builder
            .build(RING_ENTRIES)
            .map_err(|e| format!("io_uring: {e}"))?;
        let ring = Arc::new(ring);
        let watches = shared.watches.clone();
        let mut net = Network::new(listener, db.clone(), shared, routing, ring.clone())?;
        net.wake_fd = wake.as_raw_fd();
        net.arm_wake()?;
        let poller = Arc::new_cyclic(|me: &Weak<NetPoller>| {
            net.me = me.clone();
            NetPoller {
                ring: ring.clone(),
                net: Mutex::new(net),
                done: Mutex::new(Vec::new()),
                done_count: AtomicUsize::new(0),
                waiting: AtomicBool::new(false),
                wake,
                stopped: AtomicBool::new(false),
                error: Mutex::new(None),
                blocks: watches,
            }
        });
        let weak = Arc::downgrade(&poller);
        poller.blocks.blocks.set_waker(Box::new(move || {
            if let Some(p) = weak.upgrade() {
                p.wake();
            }
        }));
        // The entries pushed while setting up (accept, the wake read) are submitted by the
        // first poll, from a core.
        db.runtime()
            .set_poller(poller.clone())
            .map_err(|_| "a server already runs on this store's runtime".to_string())?;
        Ok(poller)
    }

    fn lock_net(&self) -> std::sync::MutexGuard<'_, Network> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a finished job's replies to its connection: at once when no other core holds
    /// the network (the replies' send is pushed by the core that ran the job), else through
    /// `done`, which the holder or the next poll drains.
    fn finish(&self, done: Done) {
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        match self.net.try_lock() {
            Ok(mut net) => {
                // Stopped while this waited for the lock: the network is torn down.
                if !self.stopped.load(Ordering::Acquire) {
                    if let Err(e) = net.job_done(done) {
                        self.fail(e);
                    }
                }
                return;
            }
            Err(std::sync::TryLockError::Poisoned(_)) => {
                self.fail("a panic under the network's lock".into());
                return;
            }
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(done);
        self.done_count.fetch_add(1, Ordering::SeqCst);
        self.wake();
    }

    /// Stops the network after a ring error (kept for [`Server::stop`]).
    fn fail(&self, e: String) {
        eprintln!("error: the network stopped: {e}");
        self.stopped.store(true, Ordering::SeqCst);
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        error.get_or_insert(e);
    }
}

impl Poller for NetPoller {
    fn poll(&self) -> usize {
        if self.stopped.load(Ordering::Relaxed) {
            return 0;
        }
        let mut net = match self.net.try_lock() {
            Ok(net) => net,
            Err(std::sync::TryLockError::WouldBlock) => return 0,
            Err(std::sync::TryLockError::Poisoned(_)) => {
                self.fail("a panic under the network's lock".into());
                return 0;
            }
        };
        // Stopped between the check above and the lock: the network is torn down.
        if self.stopped.load(Ordering::Acquire) {
            return 0;
        }
        let done = if self.done_count.load(Ordering::Acquire) > 0 {
            let mut queued = self.done.lock().unwrap_or_else(|p| p.into_inner());
            self.done_count.store(0, Ordering::Release);
            std::mem::take(&mut *queued)
        } else {
            Vec::new()
        };
        match net.poll_once(done) {
            Ok(handled) => handled,
            Err(e) => {
                self.fail(e);
                0
            }
        }
    }

    fn wait(&self, timeout_ns: u64, still_idle: &dyn Fn() -> bool) -> bool {
        if self.stopped.load(Ordering::Acquire) || self.waiting.swap(true, Ordering::SeqCst) {
            return false;
        }
        // A blocked client's timeout is kept by the polls: wake for the earliest.
        let timeout_ns = match self.blocks.blocks.next_deadline_ns() {
            Some(d) => timeout_ns.min(d.saturating_sub(tamer_device::now_ns()).max(1)),
            None => timeout_ns,
        };
        // Pairs with the fence in `wake`: either the waker sees `waiting`, or this sees what
        // it queued before waking.
        fence(Ordering::SeqCst);
        if still_idle() && self.done_count.load(Ordering::SeqCst) == 0 {
            let ts = types::Timespec::new()
                .sec(timeout_ns / 1_000_000_000)
                .nsec((timeout_ns % 1_000_000_000) as u32);
            let args = types::SubmitArgs::new().timespec(&ts);
            // Returns at once when completions wait; submits what polls pushed since.
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e)
                    if [libc::ETIME, libc::EINTR, libc::EBUSY, libc::EAGAIN]
                        .contains(&e.raw_os_error().unwrap_or(0)) => {}
                Err(e) => self.fail(format!("io_uring wait: {e}")),
            }
        }
        self.waiting.store(false, Ordering::SeqCst);
        true
    }

    fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            signal(self.wake.as_raw_fd());
        }
    }
}

/// A finished job's result for one connection.
struct Done {
    conn: usize,
    generation: u32,
    replies: Vec<u8>,
    session: Session,
    /// Requests the job ran, and the time it ran (ns).
    requests: usize,
    job_ns: u64,
    /// Requests after a command that blocked: back to the front of the connection's queue.
    rest: Vec<Vec<Vec<u8>>>,
    /// The job ran a blocked command again.
    retry: bool,
}

/// What jobs and the network share.
struct Shared {
    map: DbMap,
    watches: Arc<Watches>,
    stats: Arc<ServerStats>,
    prefetch: bool,
}

struct Conn {
    fd: OwnedFd,
    generation: u32,
    parser: RequestParser,
    query: Vec<u8>,
    /// Parsed requests, and the error that ends the stream, in arrival order.
    pending: VecDeque<Pending>,
    /// Argument bytes of the requests in `pending`.
    pending_bytes: usize,
    in_flight: bool,
    /// Replies waiting to be sent, and the bytes of the send in flight (kept alive for it).
    replies: Vec<u8>,
    sending: Option<(Vec<u8>, usize)>,
    /// Its session (`None` while a job has it).
    session: Option<Session>,
    /// Closing once its job and sends are done (after `QUIT` or an error reply).
    closing: bool,
    recv_armed: bool,
    /// Receiving stopped (its multishot receive cancelled) until the query bytes drain.
    recv_paused: bool,
}

/// What a connection received, in order.
enum Pending {
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
fn clear_pending(conn: &mut Conn) -> usize {
    conn.pending_bytes = 0;
    let pending = &mut conn.pending;
    let admitted = pending
        .iter()
        .filter(|p| matches!(p, Pending::Request(_)))
        .count();
    pending.clear();
    admitted
}

/// Whether command `name` starts or ends a transaction (admission refuses it only at the
/// hard bound).
fn is_transaction_boundary(name: &[u8]) -> bool {
    use crate::commands::{spec::TamerFlags, table::lookup};
    lookup(name).is_some_and(|c| c.tamer.contains(TamerFlags::TRANSACTION_BOUNDARY))
}

/// The reply to a request admission refused.
const BUSY_TEXT: &str = "BUSY the server is at its latency objective's bound, retry later";

/// What a completion is for: (kind, connection, generation) packed in `user_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Accept,
    Wake,
    Recv(usize, u32),
    Send(usize, u32),
    /// The timer after which accepting is armed again.
    AcceptRetry,
    /// A cancellation's own completion (ignored).
    Cancel,
}

impl Op {
    fn pack(self) -> u64 {
        let (kind, conn, generation) = match self {
            Op::Accept => (1u64, 0, 0),
            Op::Wake => (2, 0, 0),
            Op::Recv(c, g) => (4, c as u64, g),
            Op::Send(c, g) => (5, c as u64, g),
            Op::AcceptRetry => (6, 0, 0),
            Op::Cancel => (7, 0, 0),
        };
        debug_assert!(conn < 1 << 28);
        kind << 60 | conn << 32 | u64::from(generation)
    }

    fn unpack(data: u64) -> Op {
        let conn = ((data >> 32) & ((1 << 28) - 1)) as usize;
        let generation = data as u32;
        match data >> 60 {
            1 => Op::Accept,
            2 => Op::Wake,
            4 => Op::Recv(conn, generation),
            5 => Op::Send(conn, generation),
            6 => Op::AcceptRetry,
            7 => Op::Cancel,
            kind => unreachable!("user_data of kind {kind}: only this ring's entries complete"),
        }
    }
}

/// How the network hands requests on (from [`ServerOptions`]).
struct Routing {
    dispatch: Dispatch,
    slo_us: Option<u64>,
}

struct Network {
    /// The ring; its queues are touched only by the holder of the network's lock.
    ring: Arc<IoUring>,
    /// The poller this network is in (jobs hand their results to it).
    me: Weak<NetPoller>,
    /// Completions of one poll, reused.
    completions: Vec<(u64, i32, u32)>,
    listener: Option<TcpListener>,
    wake_fd: RawFd,
    db: Arc<Db>,
    handle: DbHandle,
    shared: Arc<Shared>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u32,
    open: usize,
    /// The receive pool: `RECV_BUFFERS × RECV_BUFFER_BYTES` bytes the kernel writes into, so
    /// only reached through raw pointers (never a slice over all of it).
    pool: *mut u8,
    /// The provided-buffer ring over the pool, and its tail as last published.
    buf_ring: *mut types::BufRingEntry,
    buf_tail: u16,
    wake_buf: Box<u64>,
    retry_at: Box<types::Timespec>,
    /// Admission's measurements (kept under the network's lock).
    meter: Meter,
    cores: usize,
    dispatch: Dispatch,
    /// Admission's objective in ns.
    slo_ns: Option<u64>,
}

// SAFETY: the raw pointers are the receive pool and its buffer ring, allocated once and never
// freed; the network is only reached under its poller's lock, by one core at a time.
unsafe impl Send for Network {}

impl Conn {
    /// Parsing stops until pending requests drain: [`MAX_PENDING_REQUESTS`] of them, or
    /// [`MAX_PENDING_BYTES`] of their arguments.
    fn parsing_waits(&self) -> bool {
        self.pending.len() >= MAX_PENDING_REQUESTS || self.pending_bytes >= MAX_PENDING_BYTES
    }
}

impl Network {
    fn new(
        listener: TcpListener,
        db: Arc<Db>,
        shared: Arc<Shared>,
        routing: Routing,
        ring: Arc<IoUring>,
    ) -> Result<Self, String> {
        let mut net = Network::blank(db, shared, routing, ring);
        net.listener = Some(listener);
        net.register_ring()?;
        net.arm_accept()?;
        Ok(net)
    }

    fn blank(db: Arc<Db>, shared: Arc<Shared>, routing: Routing, ring: Arc<IoUring>) -> Self {
        let handle = db.handle();
        let cores = db.runtime().cores();
        Network {
            ring,
            me: Weak::new(),
            completions: Vec::with_capacity(MAX_COMPLETIONS_PER_POLL),
            listener: None,
            wake_fd: -1,
            db,
            handle,
            shared,
            conns: Vec::new(),
            free: Vec::new(),
            next_generation: 1,
            meter: Meter::new(),
            cores,
            dispatch: routing.dispatch,
            slo_ns: routing.slo_us.map(|us| us.saturating_mul(1_000)),
            open: 0,
            pool: Box::into_raw(
                vec![0u8; RECV_BUFFERS as usize * RECV_BUFFER_BYTES].into_boxed_slice(),
            )
            .cast::<u8>(),
            buf_ring: std::ptr::null_mut(),
            buf_tail: 0,
            wake_buf: Box::new(0),
            retry_at: Box::new(types::Timespec::new().nsec(ACCEPT_RETRY_MS as u32 * 1_000_000)),
        }
    }

    fn arm_accept(&mut self) -> Result<(), String> {
        let Some(listener) = &self.listener else {
            return Ok(());
        };
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .build()
            .user_data(Op::Accept.pack());
        self.push(entry)
    }

    fn push(&mut self, entry: squeue::Entry) -> Result<(), String> {
        // SAFETY: every buffer an entry names outlives its completion: the pool and the wake
        // word live as long as the ring, a send's bytes stay in its connection's `sending`.
        // The submission queue is only touched under the network's lock, which `&mut self`
        // holds: no other handle on it exists.
        while unsafe { self.ring.submission_shared().push(&entry) }.is_err() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(format!("io_uring submit: {e}")),
            }
        }
        Ok(())
    }

    /// Registers the provided-buffer ring (`IORING_REGISTER_PBUF_RING`) and fills it with
    /// every pool buffer: from then on a buffer goes back to the kernel by one entry and a
    /// tail store (`give_back`), no submission and no syscall.
    fn register_ring(&mut self) -> Result<(), String> {
        let bytes = RECV_BUFFERS as usize * std::mem::size_of::<types::BufRingEntry>();
        let layout = std::alloc::Layout::from_size_align(bytes, 4096).map_err(|e| e.to_string())?;
        // SAFETY: a non-zero size; zeroed, so the tail starts at 0. Never freed: the kernel
        // reads it until the ring is torn down, which finishes asynchronously after close.
        let ring = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        if ring.is_null() {
            return Err("allocating the buffer ring".into());
        }
        // SAFETY: `ring` is page-aligned, `RECV_BUFFERS` entries long and lives forever.
        unsafe {
            self.ring.submitter().register_buf_ring_with_flags(
                ring as u64,
                RECV_BUFFERS,
                BUFFER_GROUP,
                0,
            )
        }
        .map_err(|e| format!("registering the receive buffer ring: {e}"))?;
        self.buf_ring = ring;
        for bid in 0..RECV_BUFFERS {
            self.give_back(bid);
        }
        Ok(())
    }

    /// Hands pool buffer `bid` back to the kernel through the ring.
    fn give_back(&mut self, bid: u16) {
        assert!(bid < RECV_BUFFERS, "buffer {bid} is not the pool's");
        const { assert!(RECV_BUFFERS.is_power_of_two()) };
        let slot = (self.buf_tail & (RECV_BUFFERS - 1)) as usize;
        // SAFETY: `slot` is inside the ring; the kernel reads entries only below the tail,
        // which is published after the entry is written; buffer `bid` is inside the pool.
        unsafe {
            let entry = &mut *self.buf_ring.add(slot);
            entry.set_addr(self.pool.add(bid as usize * RECV_BUFFER_BYTES) as u64);
            entry.set_len(RECV_BUFFER_BYTES as u32);
            entry.set_bid(bid);
            self.buf_tail = self.buf_tail.wrapping_add(1);
            let tail = types::BufRingEntry::tail(self.buf_ring).cast_mut();
            std::sync::atomic::AtomicU16::from_ptr(tail).store(self.buf_tail, Ordering::Release);
        }
    }

    fn arm_wake(&mut self) -> Result<(), String> {
        let buf = (&mut *self.wake_buf as *mut u64).cast::<u8>();
        let entry = opcode::Read::new(types::Fd(self.wake_fd), buf, 8)
            .build()
            .user_data(Op::Wake.pack());
        self.push(entry)
    }

    /// Closes every connection and the listener (the server stops).
    fn teardown(&mut self) {
        // Out of the registry before any socket closes (CLIENT KILL shuts sockets down).
        self.shared.stats.clients.clear();
        // Every connection and the listener shut down; requests still armed complete on the
        // ring's teardown, which may come later: their buffers are leaked (once per server,
        // 256 KiB), never freed under the kernel.
        for conn in self.conns.iter().flatten() {
            // SAFETY: shuts down sockets we own.
            unsafe { libc::shutdown(conn.fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
        if let Some(listener) = self.listener.take() {
            // SAFETY: as above, for the listening socket.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        let _ = self.ring.submit();
        // The pool is never freed (its raw pointer is simply dropped); the wake word, the timer
        // and every send's bytes are leaked for the same reason.
        Box::leak(std::mem::replace(&mut self.wake_buf, Box::new(0)));
        Box::leak(std::mem::replace(
            &mut self.retry_at,
            Box::new(types::Timespec::new()),
        ));
        for conn in self.conns.iter_mut().flatten() {
            if let Some(sending) = conn.sending.take() {
                std::mem::forget(sending);
            }
        }
        self.conns.clear();
    }

    /// One poll by a core: submits what was pushed since the last (finished jobs' sends) and
    /// runs the ring's deferred work if it flags some (one syscall then, none otherwise),
    /// hands `done` (jobs that finished while another core held the network) to their
    /// connections and handles the completions waiting (at most
    /// [`MAX_COMPLETIONS_PER_POLL`]); what that pushes is submitted by the next poll, which
    /// follows at once. Returns the events handled.
    fn poll_once(&mut self, done: Vec<Done>) -> Result<usize, String> {
        self.submit()?;
        let mut handled = done.len();
        for d in done {
            self.job_done(d)?;
        }
        let mut completions = std::mem::take(&mut self.completions);
        completions.clear();
        // SAFETY: the completion queue is only touched under the network's lock (held).
        let queue = unsafe { self.ring.completion_shared() };
        completions.extend(
            queue
                .take(MAX_COMPLETIONS_PER_POLL)
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        handled += completions.len();
        for &(data, result, flags) in &completions {
            self.complete(Op::unpack(data), result, flags)?;
        }
        self.completions = completions;
        handled += self.serve_blocked()?;
        let blocked = self.shared.watches.blocks.len();
        self.shared
            .stats
            .blocked_clients
            .store(blocked, Ordering::Relaxed);
        Ok(handled)
    }

    /// Runs again the blocked clients a write made ready, and replies to those whose timeout
    /// passed (`crate::keyspace::blocked`); returns how many.
    fn serve_blocked(&mut self) -> Result<usize, String> {
        let blocks = &self.shared.watches.blocks;
        if blocks.is_empty() {
            return Ok(0);
        }
        let ready = blocks.take_ready();
        let now_ns = tamer_device::now_ns();
        let expired = if blocks.next_deadline_ns().is_some_and(|d| d <= now_ns) {
            blocks.take_expired(now_ns)
        } else {
            Vec::new()
        };
        let n = ready.len() + expired.len();
        for client in ready {
            self.retry_blocked(client)?;
        }
        for (c, generation) in expired {
            let Some(conn) = self.conn(c, generation) else {
                continue;
            };
            if let Some(session) = conn.session.as_mut() {
                session.time_out(&mut conn.replies);
            }
            conn.in_flight = false;
            self.dispatch(c)?;
        }
        Ok(n)
    }

    /// Spawns the job that runs blocked client `client`'s command again.
    fn retry_blocked(&mut self, client: (usize, u32)) -> Result<(), String> {
        let (c, generation) = client;
        let blocks = &self.shared.watches.blocks;
        let Some(conn) = self.conns.get_mut(c).and_then(Option::as_mut) else {
            blocks.remove(client);
            return Ok(());
        };
        if conn.generation != generation {
            blocks.remove(client);
            return Ok(());
        }
        let Some(session) = conn.session.take() else {
            blocks.retried(client, false);
            return Ok(());
        };
        let run = move |handle: &DbHandle, shared: &Shared, session| {
            run_retry(handle, shared, c, generation, session)
        };
        let (slot, job) = session_job(&self.handle, &self.shared, &self.me, Some(session), run);
        if self.db.runtime().spawn_job(Job::new(job)).is_err() {
            // The runtime's queue is full: it waits for the next write or its timeout.
            conn.session = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            self.shared.watches.blocks.retried(client, false);
        }
        Ok(())
    }

    /// Submits what was pushed and runs deferred completion work, if there is any (no
    /// syscall otherwise).
    fn submit(&mut self) -> Result<(), String> {
        // SAFETY: as in `push`.
        let queue = unsafe { self.ring.submission_shared() };
        if queue.is_empty() && !queue.taskrun() && !queue.cq_overflow() {
            return Ok(());
        }
        drop(queue);
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(e)
                if [libc::EINTR, libc::EBUSY, libc::EAGAIN]
                    .contains(&e.raw_os_error().unwrap_or(0)) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("io_uring submit: {e}")),
        }
    }

    fn complete(&mut self, op: Op, result: i32, flags: u32) -> Result<(), String> {
        match op {
            Op::Accept => {
                if result >= 0 {
                    // SAFETY: the kernel gave us this new descriptor.
                    let fd = unsafe { OwnedFd::from_raw_fd(result) };
                    self.accept(fd)?;
                }
                let exhausted = [libc::EMFILE, libc::ENFILE, libc::ENOMEM, libc::ENOBUFS];
                if !cqueue::more(flags) {
                    if exhausted.contains(&-result) {
                        // Re-armed at once it would fail at once: wait for descriptors.
                        let entry = opcode::Timeout::new(&*self.retry_at)
                            .build()
                            .user_data(Op::AcceptRetry.pack());
                        self.push(entry)?;
                    } else {
                        self.arm_accept()?;
                    }
                }
            }
            Op::AcceptRetry => self.arm_accept()?,
            Op::Cancel => {}
            // Woke a waiting core; `poll` drains the finished jobs.
            Op::Wake => self.arm_wake()?,
            Op::Recv(c, g) => self.received(c, g, result, flags)?,
            Op::Send(c, g) => self.sent(c, g, result)?,
        }
        Ok(())
    }

    fn conn(&mut self, c: usize, generation: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(c)
            .and_then(Option::as_mut)
            .filter(|conn| conn.generation == generation)
    }

    fn accept(&mut self, fd: OwnedFd) -> Result<(), String> {
        if self.open >= self.shared.stats.config.max_clients() {
            self.shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
            let reply = b"-ERR max number of clients reached\r\n";
            // SAFETY: a best-effort non-blocking write of a static reply before closing.
            unsafe {
                libc::send(
                    fd.as_raw_fd(),
                    reply.as_ptr().cast(),
                    reply.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            return Ok(());
        }
        let one: libc::c_int = 1;
        // SAFETY: sets TCP_NODELAY on a socket we own, from a live int.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let stats = &self.shared.stats;
        stats
            .clients
            .register(u64::from(generation), fd.as_raw_fd());
        let conn = Conn {
            fd,
            generation,
            parser: RequestParser::default(),
            query: Vec::new(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            in_flight: false,
            replies: Vec::new(),
            sending: None,
            session: Some(Session::new(
                self.shared.watches.clone(),
                u64::from(generation),
                self.shared.stats.clone(),
            )),
            closing: false,
            recv_armed: false,
            recv_paused: false,
        };
        let c = match self.free.pop() {
            Some(c) => {
                self.conns[c] = Some(conn);
                c
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.open += 1;
        self.shared
            .stats
            .connected
            .store(self.open, Ordering::Relaxed);
        self.shared
            .stats
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        self.arm_recv(c)
    }

    fn arm_recv(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        conn.recv_armed = true;
        let entry = opcode::RecvMulti::new(types::Fd(conn.fd.as_raw_fd()), BUFFER_GROUP)
            .build()
            .user_data(Op::Recv(c, conn.generation).pack());
        self.push(entry)
    }

    fn received(&mut self, c: usize, g: u32, result: i32, flags: u32) -> Result<(), String> {
        let buffer = cqueue::buffer_select(flags);
        if let Some(bid) = buffer {
            let at = bid as usize * RECV_BUFFER_BYTES;
            let n = result.max(0) as usize;
            assert!(n <= RECV_BUFFER_BYTES, "a receive larger than its buffer");
            // SAFETY: buffer `bid` is ours again (the kernel completed into it), inside the pool.
            let bytes = unsafe { std::slice::from_raw_parts(self.pool.add(at), n) };
            if let Some(conn) = self.conn(c, g) {
                conn.query.extend_from_slice(bytes);
            }
            self.give_back(bid);
        }
        let more = cqueue::more(flags);
        let Some(conn) = self.conn(c, g) else {
            return Ok(());
        };
        if result == -libc::ENOBUFS && !conn.closing {
            // Every pool buffer was in use: they are back now, receive again (unless paused).
            conn.recv_armed = false;
            if conn.recv_paused {
                return Ok(());
            }
            return self.arm_recv(c);
        }
        if result == -libc::ECANCELED && conn.recv_paused {
            // Paused on purpose (too many unparsed bytes); resumed by `resume`.
            conn.recv_armed = false;
            return Ok(());
        }
        if result <= 0 {
            // End of stream or an error: nothing more will be read.
            conn.recv_armed = false;
            conn.closing = true;
            return self.maybe_close(c);
        }
        if !more {
            conn.recv_armed = false;
        }
        self.parse(c)?;
        let rearm = self.conns[c]
            .as_ref()
            .is_some_and(|x| !x.recv_armed && !x.closing && !x.recv_paused);
        if rearm {
            self.arm_recv(c)?;
        }
        self.pause_recv_if_full(c)?;
        self.dispatch(c)
    }

    /// Cancels the connection's receiving while its parsing waits (`MAX_PENDING_REQUESTS`)
    /// and its unparsed bytes pass `QUERY_HIGH_BYTES`. Parsing that goes on never pauses it:
    /// the unparsed bytes are then one incomplete request, bounded by `MAX_QUERY_BYTES`.
    fn pause_recv_if_full(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if !conn.parsing_waits()
            || conn.query.len() <= QUERY_HIGH_BYTES
            || conn.recv_paused
            || conn.closing
        {
            return Ok(());
        }
        conn.recv_paused = true;
        if !conn.recv_armed {
            return Ok(());
        }
        let target = Op::Recv(c, conn.generation).pack();
        let entry = opcode::AsyncCancel::new(target)
            .build()
            .user_data(Op::Cancel.pack());
        self.push(entry)
    }

    /// Parses more once requests drained, and receives again once parsing goes on.
    fn resume(&mut self, c: usize) -> Result<(), String> {
        self.parse(c)?;
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if conn.recv_paused && !conn.parsing_waits() && !conn.closing {
            conn.recv_paused = false;
            if !conn.recv_armed {
                self.arm_recv(c)?;
            }
        }
        Ok(())
    }

    /// Parses what the connection received into pending requests; a protocol error or a
    /// limit passed queues its error reply behind them and stops the parsing for good.
    fn parse(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if conn.closing {
            conn.query.clear();
            return Ok(());
        }
        let mut consumed_total = 0;
        let mut fatal = None;
        // Bounded: every pass consumes bytes or stops.
        loop {
            let buf = &conn.query[consumed_total..];
            match conn.parser.parse(buf) {
                // Enough waits: the rest stays unparsed until they are served.
                _ if conn.parsing_waits() => break,
                Ok(Parsed::Request { args, consumed }) => {
                    // Admission on arrival (seed 004): the wait ahead is every request
                    // admitted and not finished, pending or running, on any connection.
                    // Transaction boundaries are refused only by the hard bound, so that a
                    // client's MULTI state stays what its replies said.
                    let name = args.first().map_or(&[][..], |a| a.bytes(buf));
                    let boundary = is_transaction_boundary(name);
                    let slo_ns = if boundary { None } else { self.slo_ns };
                    let decision = admission::decide(self.meter.snapshot(1, slo_ns));
                    if decision == Decision::Admit {
                        let owned: Vec<Vec<u8>> =
                            args.iter().map(|a| a.bytes(buf).to_vec()).collect();
                        conn.pending_bytes += owned.iter().map(Vec::len).sum::<usize>();
                        conn.pending.push_back(Pending::Request(owned));
                        self.meter.admitted(1, Instant::now());
                    } else {
                        conn.pending.push_back(Pending::Busy(decision, boundary));
                    }
                    consumed_total += consumed;
                }
                Ok(Parsed::Nothing { consumed }) => consumed_total += consumed,
                Ok(Parsed::Incomplete { min_len }) => {
                    if min_len > MAX_QUERY_BYTES {
                        fatal = Some("ERR client query buffer limit reached".to_string());
                    }
                    break;
                }
                Err(e) => {
                    fatal = Some(format!("ERR {e}"));
                    break;
                }
            }
        }
        conn.query.drain(..consumed_total);
        if let Some(text) = fatal {
            conn.pending.push_back(Pending::Fatal(text));
            conn.query.clear();
            conn.closing = true;
        }
        Ok(())
    }

    /// Starts the connection's next job if none runs and requests wait (a fatal error
    /// waiting first is replied instead).
    fn dispatch(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if conn.in_flight || conn.pending.is_empty() {
            return self.flush(c);
        }
        if let Some(Pending::Fatal(_)) = conn.pending.front() {
            if let Some(Pending::Fatal(text)) = conn.pending.pop_front() {
                write::error(&mut conn.replies, &text);
            }
            let dropped = clear_pending(conn);
            self.meter.dropped(dropped, Instant::now());
            return self.flush(c);
        }
        if let Some(Pending::Busy(..)) = conn.pending.front() {
            let mut refused = [0u64; 2];
            // Bounded by the pending requests (at most MAX_PENDING_REQUESTS).
            while let Some(&Pending::Busy(why, boundary)) = conn.pending.front() {
                refused[usize::from(why != Decision::RefuseSlo)] += 1;
                conn.pending.pop_front();
                write::error(&mut conn.replies, BUSY_TEXT);
                // A refused command inside MULTI aborts it at EXEC, as a queueing error does;
                // a refused EXEC, DISCARD or RESET ends it (the client saw it not run).
                if let Some(session) = conn.session.as_mut() {
                    session.refused(boundary);
                }
            }
            let admission = &self.shared.stats.admission;
            admission
                .refused_slo
                .fetch_add(refused[0], Ordering::Relaxed);
            admission
                .refused_full
                .fetch_add(refused[1], Ordering::Relaxed);
            let busy = &self.shared.stats.busy;
            busy.fetch_add(refused[0] + refused[1], Ordering::Relaxed);
            return self.dispatch(c);
        }
        let mut batch = Vec::new();
        // Bounded: at most BATCH_REQUESTS requests.
        while batch.len() < BATCH_REQUESTS {
            match conn.pending.front() {
                Some(Pending::Request(_)) => {
                    if let Some(Pending::Request(args)) = conn.pending.pop_front() {
                        let bytes = args.iter().map(Vec::len).sum::<usize>();
                        conn.pending_bytes = conn.pending_bytes.saturating_sub(bytes);
                        batch.push(args);
                    }
                }
                _ => break,
            }
        }
        let n = batch.len();
        debug_assert!(n > 0, "a request is at the front");
        let generation = conn.generation;
        let run = move |handle: &DbHandle, shared: &Shared, session| {
            run_batch(handle, shared, c, generation, session, batch)
        };
        let session = conn.session.take();
        let (slot, job) = session_job(&self.handle, &self.shared, &self.me, session, run);
        let runtime = self.db.runtime();
        let spawned = match self.dispatch {
            Dispatch::Shared => runtime.spawn_job(Job::new(job)),
            Dispatch::Partitioned => runtime.spawn_on(c % self.cores, job),
        };
        if spawned.is_err() {
            conn.session = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            debug_assert!(conn.session.is_some(), "a refused job never ran");
            self.meter.dropped(n, Instant::now());
            return self.refuse(c, n, Decision::RefuseFull);
        }
        conn.in_flight = true;
        let admitted = &self.shared.stats.admitted;
        admitted.fetch_add(n as u64, Ordering::Relaxed);
        self.flush(c)
    }

    /// Replies `-BUSY` to the `n` requests just taken from connection `c`'s pending ones
    /// (nothing of it is in flight, so the replies keep their order), then goes on.
    fn refuse(&mut self, c: usize, n: usize, why: Decision) -> Result<(), String> {
        let admission = &self.shared.stats.admission;
        let counter = match why {
            Decision::RefuseSlo => &admission.refused_slo,
            _ => &admission.refused_full,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        self.shared
            .stats
            .busy
            .fetch_add(n as u64, Ordering::Relaxed);
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        debug_assert!(!conn.in_flight);
        for _ in 0..n {
            write::error(&mut conn.replies, BUSY_TEXT);
        }
        self.dispatch(c)
    }

    fn job_done(&mut self, d: Done) -> Result<(), String> {
        let now = Instant::now();
        self.meter.finished(d.requests, d.job_ns, now);
        self.meter.publish(&self.shared.stats.admission);
        let client = (d.conn, d.generation);
        let Some(conn) = self
            .conns
            .get_mut(d.conn)
            .and_then(Option::as_mut)
            .filter(|x| x.generation == d.generation)
        else {
            self.shared.watches.blocks.remove(client);
            return Ok(());
        };
        for args in d.rest.into_iter().rev() {
            conn.pending_bytes += args.iter().map(Vec::len).sum::<usize>();
            conn.pending.push_front(Pending::Request(args));
        }
        conn.replies.extend_from_slice(&d.replies);
        let mut session = d.session;
        let blocks = &self.shared.watches.blocks;
        if conn.closing && session.blocked.take().is_some() {
            blocks.remove(client);
        }
        if let Some(b) = &session.blocked {
            // Still blocked: the connection stays busy; its replies so far go out.
            if d.retry {
                blocks.retried(client, false);
            } else {
                blocks.block(client, b.keys.clone(), b.deadline_ns);
            }
            conn.session = Some(session);
            return self.flush(d.conn);
        }
        if d.retry {
            blocks.retried(client, true);
        }
        conn.in_flight = false;
        let quit = session.quit;
        conn.session = Some(session);
        let over = conn.replies.len() > MAX_REPLY_BYTES;
        if quit || over {
            conn.closing = true;
            let dropped = clear_pending(conn);
            self.meter.dropped(dropped, now);
        }
        if over {
            conn.replies.clear();
        }
        self.resume(d.conn)?;
        self.dispatch(d.conn)
    }

    /// Sends what replies wait, if no send is in flight.
    fn flush(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if conn.sending.is_some() || conn.replies.is_empty() {
            return self.maybe_close(c);
        }
        let bytes = std::mem::take(&mut conn.replies);
        let entry = opcode::Send::new(
            types::Fd(conn.fd.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(Op::Send(c, conn.generation).pack());
        conn.sending = Some((bytes, 0));
        self.push(entry)
    }

    fn sent(&mut self, c: usize, g: u32, result: i32) -> Result<(), String> {
        let Some(conn) = self.conn(c, g) else {
            return Ok(());
        };
        let Some((bytes, mut at)) = conn.sending.take() else {
            return Ok(());
        };
        if result < 0 {
            conn.closing = true;
            conn.replies.clear();
            let dropped = clear_pending(conn);
            self.meter.dropped(dropped, Instant::now());
            return self.maybe_close(c);
        }
        at += result as usize;
        if at < bytes.len() {
            let entry = opcode::Send::new(
                types::Fd(conn.fd.as_raw_fd()),
                bytes[at..].as_ptr(),
                (bytes.len() - at) as u32,
            )
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(Op::Send(c, g).pack());
            conn.sending = Some((bytes, at));
            return self.push(entry);
        }
        self.dispatch(c)
    }

    /// Frees a closing connection once nothing of it is in flight.
    fn maybe_close(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        // A blocked client whose connection closes leaves the table (unless its command is
        // running again: that job's end does it).
        if conn.closing {
            if let Some(session) = conn.session.as_mut().filter(|s| s.blocked.is_some()) {
                session.blocked = None;
                self.shared.watches.blocks.remove((c, conn.generation));
                conn.in_flight = false;
            }
        }
        let idle = !conn.in_flight
            && conn.sending.is_none()
            && conn.replies.is_empty()
            && conn.pending.is_empty();
        if !conn.closing || !idle {
            return Ok(());
        }
        if conn.recv_armed {
            // The multishot receive ends with an error once the socket is shut down.
            // SAFETY: shuts down a socket we own.
            unsafe { libc::shutdown(conn.fd.as_raw_fd(), libc::SHUT_RDWR) };
            conn.recv_armed = false;
        }
        // Out of the registry before the socket closes (CLIENT KILL shuts sockets down).
        let id = u64::from(conn.generation);
        self.shared.stats.clients.remove(id);
        self.conns[c] = None;
        self.free.push(c);
        self.open -= 1;
        self.shared
            .stats
            .connected
            .store(self.open, Ordering::Relaxed);
        Ok(())
    }
}

/// A job that runs `run` on `session` and hands what it did to the poller `me`, and the slot
/// the session goes to the job through, so that a refused job gives it back.
fn session_job(
    handle: &DbHandle,
    shared: &Arc<Shared>,
    me: &Weak<NetPoller>,
    session: Option<Session>,
    run: impl FnOnce(&DbHandle, &Shared, Session) -> Done + Send + 'static,
) -> (Arc<Mutex<Option<Session>>>, impl FnOnce() + Send + 'static) {
    let slot = Arc::new(Mutex::new(session));
    let (handle, shared, job_slot, me) = (handle.clone(), shared.clone(), slot.clone(), me.clone());
    let job = move || {
        let session = job_slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("the session, once");
        let done = run(&handle, &shared, session);
        if let Some(poller) = me.upgrade() {
            poller.finish(done);
        }
    };
    (slot, job)
}

/// Runs one connection's batch of requests on the store, in order, through its session.
fn run_batch(
    handle: &DbHandle,
    shared: &Shared,
    conn: usize,
    generation: u32,
    mut session: Session,
    batch: Vec<Vec<Vec<u8>>>,
) -> Done {
    let started = Instant::now();
    let requests = batch.len();
    if shared.prefetch {
        prefetch::batch(handle, shared.map.peek(session.db), &batch);
    }
    let mut replies = Vec::new();
    let mut batch = batch.into_iter();
    let mut waiting = None;
    // Bounded by the batch.
    for args in batch.by_ref() {
        // Past the reply cap the connection is closed when the job ends: run no more.
        if session.quit || replies.len() > MAX_REPLY_BYTES {
            break;
        }
        // After a command that blocked, the gate keeps the rest until it replies.
        if let Some(args) = session.run(handle, &shared.map, args, &mut replies) {
            waiting = Some(args);
            break;
        }
    }
    let rest: Vec<_> = waiting.into_iter().chain(batch).collect();
    Done {
        conn,
        generation,
        replies,
        session,
        requests: requests - rest.len(),
        job_ns: started.elapsed().as_nanos() as u64,
        rest,
        retry: false,
    }
}

/// Runs a blocked command again for its connection (`crate::keyspace::blocked`).
fn run_retry(
    handle: &DbHandle,
    shared: &Shared,
    conn: usize,
    generation: u32,
    mut session: Session,
) -> Done {
    let started = Instant::now();
    let mut replies = Vec::new();
    session.retry_blocked(handle, &shared.map, &mut replies);
    Done {
        conn,
        generation,
        replies,
        session,
        requests: 0,
        job_ns: started.elapsed().as_nanos() as u64,
        rest: Vec::new(),
        retry: true,
    }
}
