//! The ring's side of the network: its set-up and teardown, the provided receive buffers,
//! submissions, and the completions of a poll handed to what they are for.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use tamer_store::Db;

use super::admission::Meter;
use super::limits::{MAX_COMPLETIONS_PER_POLL, RECV_BUFFERS, RECV_BUFFER_BYTES};
use super::network::{Done, Network, Routing, Shared};

/// How long accepting waits after the process ran out of file descriptors.
const ACCEPT_RETRY_MS: i64 = 100;
/// The provided-buffer group the pool is registered as, which receives draw from.
pub(super) const BUFFER_GROUP: u16 = 7;

/// What a completion is for: (kind, connection, generation) packed in `user_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
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
    /// The `user_data` of an entry for this operation.
    pub(super) fn pack(self) -> u64 {
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

    /// The operation a completion's `user_data` names.
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

impl Network {
    /// The network on `ring`, its receive pool registered and accepting on `listener` armed.
    pub(super) fn new(
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

    /// The network with nothing registered or armed, its receive pool allocated.
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

    /// Accepts on the listener (a multishot accept), if it is still open.
    fn arm_accept(&mut self) -> Result<(), String> {
        let Some(listener) = &self.listener else {
            return Ok(());
        };
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .build()
            .user_data(Op::Accept.pack());
        self.push(entry)
    }

    /// Pushes `entry` on the submission queue, submitting first when the queue is full.
    pub(super) fn push(&mut self, entry: squeue::Entry) -> Result<(), String> {
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
    pub(super) fn give_back(&mut self, bid: u16) {
        assert!(bid < RECV_BUFFERS, "buffer {bid} is not the pool's");
        const { assert!(RECV_BUFFERS.is_power_of_two()) };
        let slot = (self.buf_tail & (RECV_BUFFERS - 1)) as usize;
        // SAFETY: `slot` is inside the ring, which is never freed; the kernel reads entries
        // only below the tail, which is published after the entry is written, so no one else
        // reads or writes this one now; buffer `bid` is inside the pool.
        unsafe {
            let entry = &mut *self.buf_ring.add(slot);
            entry.set_addr(self.pool.add(bid as usize * RECV_BUFFER_BYTES) as u64);
            entry.set_len(RECV_BUFFER_BYTES as u32);
            entry.set_bid(bid);
        }
        self.buf_tail = self.buf_tail.wrapping_add(1);
        // SAFETY: the ring's tail is an aligned u16 inside its first entry (never freed), which
        // the kernel only reads, atomically; no reference to the entry lives past the block
        // above. The release store publishes the entry written there.
        unsafe {
            let tail = types::BufRingEntry::tail(self.buf_ring).cast_mut();
            std::sync::atomic::AtomicU16::from_ptr(tail).store(self.buf_tail, Ordering::Release);
        }
    }

    /// Reads the wake eventfd, so that a core waiting in the ring returns when it is written.
    pub(super) fn arm_wake(&mut self) -> Result<(), String> {
        let buf = (&mut *self.wake_buf as *mut u64).cast::<u8>();
        let entry = opcode::Read::new(types::Fd(self.wake_fd), buf, 8)
            .build()
            .user_data(Op::Wake.pack());
        self.push(entry)
    }

    /// Closes every connection and the listener (the server stops).
    pub(super) fn teardown(&mut self) {
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
    pub(super) fn poll_once(&mut self, done: Vec<Done>) -> Result<usize, String> {
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
        handled += self.serve_mail()?;
        let blocked = self.shared.watches.blocks.len();
        self.shared
            .stats
            .blocked_clients
            .store(blocked, Ordering::Relaxed);
        Ok(handled)
    }

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

    /// Hands one completion to what it is for.
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
}
