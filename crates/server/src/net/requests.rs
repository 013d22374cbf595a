//! A connection's requests: parsed on arrival with admission's decision, handed on as one
//! job at a time, refused with `-BUSY`, and the job's result taken back.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tamer_runtime::Job;
use tamer_store::DbHandle;

use super::admission::{self, Decision};
use super::jobs::{run_batch, session_job};
use super::limits::{BATCH_REQUESTS, MAX_QUERY_BYTES, MAX_REPLY_BYTES};
use super::network::{clear_pending, Conn, Done, Network, Pending, Shared};
use super::options::Dispatch;
use crate::resp::{write, Parsed};

/// Whether command `name` starts or ends a transaction (admission refuses it only at the
/// hard bound).
fn is_transaction_boundary(name: &[u8]) -> bool {
    use crate::commands::{spec::TamerFlags, table::lookup};
    lookup(name).is_some_and(|c| c.tamer.contains(TamerFlags::TRANSACTION_BOUNDARY))
}

/// The reply to a request admission refused.
const BUSY_TEXT: &str = "BUSY the server is at its latency objective's bound, retry later";

impl Network {
    /// Parses what the connection received into pending requests; a protocol error or a
    /// limit passed queues its error reply behind them and stops the parsing for good.
    pub(super) fn parse(&mut self, c: usize) -> Result<(), String> {
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
                    // Admission on arrival (NeBuLa): the wait ahead is every request
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
    /// waiting first is replied instead, and requests refused on arrival get `-BUSY`).
    pub(super) fn dispatch(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        if conn.in_flight || conn.pending.is_empty() {
            return self.flush(c);
        }
        match conn.pending.front() {
            Some(Pending::Fatal(_)) => {
                let dropped = conn.reply_fatal();
                self.meter.dropped(dropped, Instant::now());
                self.flush(c)
            }
            Some(Pending::Busy(..)) => {
                let [slo, full] = conn.reply_busy();
                let admission = &self.shared.stats.admission;
                admission.refused_slo.fetch_add(slo, Ordering::Relaxed);
                admission.refused_full.fetch_add(full, Ordering::Relaxed);
                let busy = &self.shared.stats.busy;
                busy.fetch_add(slo + full, Ordering::Relaxed);
                self.dispatch(c)
            }
            _ => self.start_job(c),
        }
    }

    /// Hands the admitted requests at the front of connection `c`'s pending ones to a job
    /// (at most [`BATCH_REQUESTS`]); when the runtime refuses it they get `-BUSY` instead.
    fn start_job(&mut self, c: usize) -> Result<(), String> {
        let Some(conn) = self.conns[c].as_mut() else {
            return Ok(());
        };
        let batch = conn.take_batch();
        let n = batch.len();
        debug_assert!(n > 0, "a request is at the front");
        let generation = conn.generation;
        let spawned = Instant::now();
        let run = move |handle: &DbHandle, shared: &Shared, session| {
            run_batch(handle, shared, (c, generation), spawned, session, batch)
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

    /// Takes a finished job's result back to its connection: its replies go out, requests
    /// after a blocked command wait again, and the connection's next job starts.
    pub(super) fn job_done(&mut self, d: Done) -> Result<(), String> {
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
        conn.subscriber = session.receives_mail() || conn.pushed;
        let blocks = &self.shared.watches.blocks;
        if conn.closing && session.blocked.take().is_some() {
            blocks.remove(client);
        }
        if let Some(b) = &session.blocked {
            // Still blocked: the connection stays busy; its replies so far go out.
            if d.retry {
                blocks.retried(client, false);
            } else if b.postponed {
                blocks.postpone(client, b.deadline_ns.expect("a pause ends"));
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
}

impl Conn {
    /// Replies the fatal error at the front of the pending requests and drops those behind
    /// it; returns how many admitted requests were dropped (admission stops counting them).
    fn reply_fatal(&mut self) -> usize {
        if let Some(Pending::Fatal(text)) = self.pending.pop_front() {
            write::error(&mut self.replies, &text);
        }
        clear_pending(self)
    }

    /// Replies `-BUSY` to the requests refused on arrival at the front of the pending ones;
    /// returns how many were refused by the objective and by a full queue.
    fn reply_busy(&mut self) -> [u64; 2] {
        let mut refused = [0u64; 2];
        // Bounded by the pending requests (at most MAX_PENDING_REQUESTS).
        while let Some(&Pending::Busy(why, boundary)) = self.pending.front() {
            refused[usize::from(why != Decision::RefuseSlo)] += 1;
            self.pending.pop_front();
            write::error(&mut self.replies, BUSY_TEXT);
            // A refused command inside MULTI aborts it at EXEC, as a queueing error does;
            // a refused EXEC, DISCARD or RESET ends it (the client saw it not run).
            if let Some(session) = self.session.as_mut() {
                session.refused(boundary);
            }
        }
        refused
    }

    /// Takes the admitted requests at the front of the pending ones, at most
    /// [`BATCH_REQUESTS`].
    fn take_batch(&mut self) -> Vec<Vec<Vec<u8>>> {
        let mut batch = Vec::new();
        // Bounded: at most BATCH_REQUESTS requests.
        while batch.len() < BATCH_REQUESTS {
            match self.pending.front() {
                Some(Pending::Request(_)) => {
                    if let Some(Pending::Request(args)) = self.pending.pop_front() {
                        let bytes = args.iter().map(Vec::len).sum::<usize>();
                        self.pending_bytes = self.pending_bytes.saturating_sub(bytes);
                        batch.push(args);
                    }
                }
                _ => break,
            }
        }
        batch
    }
}
