//! What the runtime's cores call: the network's [`Poller`] (a poll under the network's lock,
//! a wait in the ring, a wake), its start, and a job's hand-back of its result.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use io_uring::{types, IoUring};
use tamer_runtime::Poller;
use tamer_store::Db;

use super::network::{Done, NetPoller, Network, Routing, Shared};

/// Submission queue entries of the network ring.
const RING_ENTRIES: u32 = 1024;

/// Wakes a core waiting in the ring: eventfd `fd`'s read is armed on it.
fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

impl NetPoller {
    /// Sets up the ring, the network on it (listening on `listener`) and the wake eventfd,
    /// and registers the poller with `db`'s runtime, whose cores poll it from then on.
    pub(super) fn start(
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
            // the ring, which a poll checks) instead of interrupting it while it runs requests
            // (an interrupt per completion costs a loaded core dearly). With more cores a
            // request's task work belongs to the core that submitted it, which may be parked.
            builder.setup_coop_taskrun().setup_taskrun_flag();
        }
        let ring = builder
            .build(RING_ENTRIES)
            .map_err(|e| format!("io_uring: {e}"))?;
        let ring = Arc::new(ring);
        let watches = shared.watches.clone();
        let pubsub = shared.pubsub.clone();
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
        let weak = Arc::downgrade(&poller);
        pubsub.set_waker(Box::new(move || {
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

    /// The network, for a caller that may wait for it (a poisoned lock is taken as is).
    pub(super) fn lock_net(&self) -> std::sync::MutexGuard<'_, Network> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a finished job's replies to its connection: at once when no other core holds
    /// the network (the replies' send is pushed by the core that ran the job), else through
    /// `done`, which the holder or the next poll drains.
    pub(super) fn finish(&self, done: Done) {
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

    /// Stops the network after a ring error (kept for [`Server::stop`](super::Server::stop)).
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
