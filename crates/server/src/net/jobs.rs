//! What a job runs on a core: a connection's batch of requests, or a blocked command again,
//! through the connection's session; and the blocked clients a poll serves.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tamer_runtime::Job;
use tamer_store::DbHandle;

use super::limits::MAX_REPLY_BYTES;
use super::network::{Done, NetPoller, Network, Shared};
use super::prefetch;
use crate::session::Session;

impl Network {
    /// Runs again the blocked clients a write made ready, and replies to those whose timeout
    /// passed (`crate::keyspace::blocked`); returns how many.
    pub(super) fn serve_blocked(&mut self) -> Result<usize, String> {
        let blocks = &self.shared.watches.blocks;
        if blocks.is_empty() && !blocks.has_unblocked() {
            return Ok(0);
        }
        let ready = blocks.take_ready();
        let unblocked = blocks.take_unblocked();
        let now_ns = tamer_device::now_ns();
        let expired = if blocks.next_deadline_ns().is_some_and(|d| d <= now_ns) {
            blocks.take_expired(now_ns)
        } else {
            Vec::new()
        };
        let n = ready.len() + expired.len() + unblocked.len();
        for client in ready {
            self.retry_blocked(client)?;
        }
        let ended = expired.into_iter().map(|client| (client, false));
        for ((c, generation), error) in ended.chain(unblocked) {
            let Some(conn) = self.conn(c, generation) else {
                continue;
            };
            if let Some(session) = conn.session.as_mut() {
                if error {
                    session.unblock_with_error(&mut conn.replies);
                } else {
                    session.time_out(&mut conn.replies);
                }
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
}

/// A job that runs `run` on `session` and hands what it did to the poller `me`, and the slot
/// the session goes to the job through, so that a refused job gives it back.
pub(super) fn session_job(
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

/// Runs one connection's batch of requests on the store, in order, through its session;
/// `spawned` is when the network core queued the job (its time queued is counted).
pub(super) fn run_batch(
    handle: &DbHandle,
    shared: &Shared,
    (conn, generation): (usize, u32),
    spawned: Instant,
    mut session: Session,
    batch: Vec<Vec<Vec<u8>>>,
) -> Done {
    let started = Instant::now();
    count_queued(&shared.stats, started.saturating_duration_since(spawned));
    let requests = batch.len();
    if shared.prefetch {
        prefetch::batch(
            handle,
            &shared.prefetch_gate,
            shared.map.peek(session.db),
            &batch,
        );
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

/// Counts a job's time queued (`INFO tamer`: `jobs_queued_usec_total`, `_max`).
fn count_queued(stats: &crate::stats::ServerStats, queued: std::time::Duration) {
    use std::sync::atomic::Ordering;
    let ns = queued.as_nanos() as u64;
    stats.jobs_started.fetch_add(1, Ordering::Relaxed);
    stats.jobs_queued_ns.fetch_add(ns, Ordering::Relaxed);
    stats.jobs_queued_ns_max.fetch_max(ns, Ordering::Relaxed);
}
