//! The registry of connections (`CLIENT LIST`, `CLIENT INFO`, `CLIENT KILL`): the network
//! thread adds a connection when it accepts it and removes it before closing its socket;
//! each session updates its own entry (name, database, last command) as it runs commands.
//!
//! `CLIENT KILL` shuts the socket of a matching connection down (`shutdown(2)`, under the
//! registry's lock, so the descriptor cannot have been closed and reused meanwhile): the
//! network then sees the end of its stream and closes it the usual way, after any job
//! of it in flight. A client that kills itself is closed after the reply (its session's
//! `quit`), as Redis does. Bounds: one entry per open connection (`maxclients`).

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::pubsub::tracking::{Client, Redirect};
use crate::resp::Protocol;

/// What a session updates about itself.
#[derive(Clone, Debug)]
pub struct ClientState {
    pub name: Vec<u8>,
    pub db: usize,
    /// The last command, as Redis names it (`get`, `client|list`).
    pub cmd: String,
    pub last_active: Instant,
    pub no_evict: bool,
    /// Commands queued in `MULTI` (`None`: not in `MULTI`).
    pub multi: Option<usize>,
    pub resp: u8,
    /// Channels, patterns and shard channels it subscribes to.
    pub subscriptions: [usize; 3],
    /// `CLIENT TRACKING`: whether in `BCAST` mode, and the redirect client (0: none).
    pub tracking: Option<(bool, u64)>,
    /// The ACL user it is authenticated as.
    pub user: Vec<u8>,
}

/// One connection.
#[derive(Debug)]
pub struct ClientEntry {
    pub id: u64,
    /// Its connection's slot at the network (with `id`, how the pub/sub hub names it).
    pub slot: usize,
    pub addr: String,
    pub laddr: String,
    /// Its socket (`-1`: a session without one, in tests).
    pub fd: RawFd,
    pub created: Instant,
    state: Mutex<ClientState>,
    /// Killed (its socket shut down): no longer listed or killed again, though the network
    /// thread may not have closed it yet.
    killed: AtomicBool,
}

impl ClientEntry {
    /// An entry for connection `id` on socket `fd` (addresses read from the socket).
    pub fn new(id: u64, slot: usize, fd: RawFd) -> Self {
        let (addr, laddr) = socket_addrs(fd);
        let now = Instant::now();
        Self {
            id,
            slot,
            addr,
            laddr,
            fd,
            created: now,
            state: Mutex::new(ClientState {
                name: Vec::new(),
                db: 0,
                cmd: "NULL".into(),
                last_active: now,
                no_evict: false,
                multi: None,
                resp: 2,
                subscriptions: [0; 3],
                tracking: None,
                user: b"default".to_vec(),
            }),
            killed: AtomicBool::new(false),
        }
    }

    pub fn state(&self) -> ClientState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `CLIENT KILL` shut its socket down (it closes soon), or it is closed.
    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    pub fn update(&self, f: impl FnOnce(&mut ClientState)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Its `CLIENT LIST` line (without the newline). The buffer and memory fields Redis
    /// reports are not tracked per connection here: they read 0 (`docs/commands.md`).
    pub fn line(&self) -> String {
        let s = self.state();
        let mut flags = String::new();
        if s.subscriptions.iter().any(|&n| n > 0) {
            flags.push('P');
        }
        if s.multi.is_some() {
            flags.push('x');
        }
        if let Some((bcast, _)) = s.tracking {
            flags.push('t');
            if bcast {
                flags.push('B');
            }
        }
        if s.no_evict {
            flags.push('e');
        }

        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} \
             psub={} ssub={} multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 \
             obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&s.name),
            self.created.elapsed().as_secs(),
            s.last_active.elapsed().as_secs(),
            s.db,
            s.subscriptions[0],
            s.subscriptions[1],
            s.subscriptions[2],
            s.multi.map_or(-1, |n| n as i64),
            s.cmd,
            String::from_utf8_lossy(&s.user),
            s.tracking.map_or(-1, |(_, r)| r as i64),
            s.resp
        )
    }
}

/// The peer's and the local address of a socket, as `ip:port`.
fn socket_addrs(fd: RawFd) -> (String, String) {
    if fd < 0 {
        return (String::new(), String::new());
    }
    use std::os::fd::FromRawFd;
    // SAFETY: borrows the descriptor for two reads; ManuallyDrop never closes it.
    let stream = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
    let show =
        |a: std::io::Result<std::net::SocketAddr>| a.map_or(String::new(), |a| a.to_string());
    (show(stream.peer_addr()), show(stream.local_addr()))
}

/// Which connections `CLIENT KILL` (filter form) closes: every given filter must match.
#[derive(Clone, Debug, Default)]
pub struct KillFilter {
    pub id: Option<u64>,
    pub addr: Option<String>,
    pub laddr: Option<String>,
    /// `USER`: connections authenticated as this user.
    pub user: Option<Vec<u8>>,
    /// `TYPE`: only `normal` connections exist.
    pub type_matches: Option<bool>,
    /// Spare the calling connection (`SKIPME yes`, the default).
    pub skip_me: bool,
}

/// Every connection (see the module docs).
#[derive(Debug, Default)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, Arc<ClientEntry>>>,
}

/// A tracking client's `REDIRECT` reaches this client while it is registered and not
/// killed; the network's generation of a connection is its ID's low 32 bits.
impl Redirect for ClientEntry {
    fn reach(&self) -> Option<(Client, Protocol)> {
        if self.killed() {
            return None;
        }
        let protocol = if self.state().resp == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        Some(((self.slot, self.id as u32), protocol))
    }
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ClientEntry>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds connection `id` in slot `slot` on socket `fd` (the network, on accept).
    pub fn register(&self, id: u64, slot: usize, fd: RawFd) {
        self.lock()
            .insert(id, Arc::new(ClientEntry::new(id, slot, fd)));
    }

    /// Removes connection `id` (the network, before it closes the socket).
    pub fn remove(&self, id: u64) {
        if let Some(entry) = self.lock().remove(&id) {
            // Marked for whoever still holds it (a tracking client's redirect).
            entry.killed.store(true, Ordering::Relaxed);
        }
    }

    /// Forgets every connection (the network, as it stops).
    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientEntry>> {
        self.lock().get(&id).cloned()
    }

    /// Every connection not killed, by id.
    pub fn list(&self) -> Vec<Arc<ClientEntry>> {
        let map = self.lock();
        let live = map.values().filter(|e| !e.killed.load(Ordering::Relaxed));
        live.cloned().collect()
    }

    /// Closes the connections `filter` matches (not `me` itself: the caller closes itself
    /// after its reply): how many matched, `me` included.
    pub fn kill(&self, filter: &KillFilter, me: u64) -> usize {
        let map = self.lock();
        let mut killed = 0;
        for entry in map.values() {
            let matches = !entry.killed.load(Ordering::Relaxed)
                && filter.id.is_none_or(|id| id == entry.id)
                && filter.addr.as_ref().is_none_or(|a| *a == entry.addr)
                && filter.laddr.as_ref().is_none_or(|a| *a == entry.laddr)
                && filter
                    .user
                    .as_ref()
                    .is_none_or(|u| *u == entry.state().user)
                && filter.type_matches.unwrap_or(true)
                && !(filter.skip_me && entry.id == me);
            if !matches {
                continue;
            }
            killed += 1;
            if entry.id != me && entry.fd >= 0 {
                entry.killed.store(true, Ordering::Relaxed);
                // SAFETY: the descriptor is open: its entry is removed before it is closed,
                // under this lock, which we hold.
                unsafe { libc::shutdown(entry.fd, libc::SHUT_RDWR) };
            }
        }
        killed
    }
}
