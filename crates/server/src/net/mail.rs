//! Pub/sub's mail on its way out (`crate::pubsub`): a subscriber's mail joins its replies
//! when nothing of it is in flight (no job, no send), so it follows the replies to the
//! commands it sent before the publish; one whose mail passed its bound is closed.

use std::os::fd::AsRawFd;
use std::time::Instant;

use super::network::{clear_pending, Network};

impl Network {
    /// Serves the subscribers the hub lists as having mail since the last poll; how many.
    pub(super) fn serve_mail(&mut self) -> Result<usize, String> {
        if !self.shared.pubsub.has_mail() {
            return Ok(0);
        }
        let ready = self.shared.pubsub.take_ready();
        let n = ready.len();
        for (c, generation) in ready {
            let Some(conn) = self.conn(c, generation) else {
                continue;
            };
            // Listed, so the hub holds it (an invalidation's redirect client may not know).
            conn.pushed |= !conn.subscriber;
            conn.subscriber = true;
            let blocked = conn.session.as_ref().is_some_and(|s| s.blocked.is_some());
            if (conn.in_flight && !blocked) || conn.sending.is_some() {
                // Its job's end or its send's takes the mail; an overflow closes it now.
                if self.shared.pubsub.overflowed((c, generation)) {
                    self.overflow(c);
                }
                continue;
            }
            self.flush(c)?;
        }
        Ok(n)
    }

    /// Moves connection `c`'s mail into its replies (its session subscribes and nothing of
    /// it is in flight); closes it when its mail overflowed.
    pub(super) fn take_mail(&mut self, c: usize) {
        let Some(conn) = self.conns[c].as_mut() else {
            return;
        };
        debug_assert!(conn.subscriber && conn.sending.is_none());
        let mail = self.shared.pubsub.take_mail((c, conn.generation));
        if mail.overflowed {
            return self.overflow(c);
        }
        conn.replies.extend_from_slice(&mail.bytes);
    }

    /// Connection `c`'s mail passed its bound: it is closed, as Redis closes a pub/sub
    /// client past its output buffer limit (its socket shut down at once, so a send stuck
    /// on a client that does not read fails).
    fn overflow(&mut self, c: usize) {
        let Some(conn) = self.conns[c].as_mut() else {
            return;
        };
        if conn.closing {
            return;
        }
        conn.closing = true;
        conn.replies.clear();
        let dropped = clear_pending(conn);
        self.meter.dropped(dropped, Instant::now());
        // SAFETY: shuts down a socket we own.
        unsafe { libc::shutdown(conn.fd.as_raw_fd(), libc::SHUT_RDWR) };
        let stats = &self.shared.stats;
        stats
            .pubsub_overflows
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}
