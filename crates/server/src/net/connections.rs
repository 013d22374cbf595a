//! A connection's life on the ring: accepted, receiving (paused and resumed with its
//! parsing), sending its replies, closed once nothing of it is in flight.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::Instant;

use io_uring::{cqueue, opcode, types};

use super::limits::{QUERY_HIGH_BYTES, RECV_BUFFER_BYTES};
use super::network::{clear_pending, Conn, Network};
use super::ring::{Op, BUFFER_GROUP};
use crate::resp::RequestParser;
use crate::session::{Services, Session};

impl Network {
    /// Takes in a connection the listener accepted (or refuses it past `maxclients`) and
    /// starts receiving on it.
    pub(super) fn accept(&mut self, fd: OwnedFd) -> Result<(), String> {
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
        let c = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let stats = &self.shared.stats;
        stats
            .clients
            .register(u64::from(generation), c, fd.as_raw_fd());
        let services = Services {
            watches: self.shared.watches.clone(),
            stats: self.shared.stats.clone(),
            scripts: self.shared.scripts.clone(),
            pubsub: self.shared.pubsub.clone(),
        };
        self.conns[c] = Some(Conn {
            fd,
            generation,
            parser: RequestParser::default(),
            query: Vec::new(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            in_flight: false,
            replies: Vec::new(),
            sending: None,
            session: Some(Session::new(&services, (c, generation))),
            closing: false,
            recv_armed: false,
            recv_paused: false,
            subscriber: false,
            pushed: false,
        });
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

    /// Receives on connection `c` into the pool (a multishot receive).
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

    /// Takes in what a receive on connection `c` of generation `g` brought (or its end),
    /// parses it, and starts a job for it.
    pub(super) fn received(
        &mut self,
        c: usize,
        g: u32,
        result: i32,
        flags: u32,
    ) -> Result<(), String> {
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
    pub(super) fn resume(&mut self, c: usize) -> Result<(), String> {
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

    /// Sends what replies wait, if no send is in flight.
    pub(super) fn flush(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        // A blocked client (RESP3 may block while subscribed) waits with its session here.
        let idle = !conn.in_flight || conn.session.as_ref().is_some_and(|s| s.blocked.is_some());
        if conn.subscriber && idle && conn.sending.is_none() {
            self.take_mail(c);
        }
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

    /// Goes on after a send of connection `c`'s replies: the rest of it, or the next job.
    pub(super) fn sent(&mut self, c: usize, g: u32, result: i32) -> Result<(), String> {
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
