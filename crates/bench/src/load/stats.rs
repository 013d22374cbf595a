//! What a load worker counts: replies by kind and latency histograms (HDR, ns, 3 significant
//! digits, up to [`MAX_LATENCY_NS`]), for the operations due inside the measured window only.

use hdrhistogram::Histogram;

use super::proto::Reply;

/// Largest latency recorded (longer ones are recorded as this).
pub const MAX_LATENCY_NS: u64 = 100_000_000_000;

/// One load thread's counts and latencies over the measured window.
pub struct Stats {
    window_start_ns: u64,
    window_end_ns: u64,
    /// Operations answered `OK` or with a value.
    pub ok: u64,
    /// GET misses.
    pub nil: u64,
    /// Operations answered with an error (other than `-BUSY`).
    pub errors: u64,
    /// Operations answered `-BUSY`.
    pub busy: u64,
    /// In flight when the drain ended.
    pub unfinished: u64,
    /// Still waiting for a slot when the window ended (open loop).
    pub unsent: u64,
    /// Refused by a full backlog (open loop; never sent).
    pub overflowed: u64,
    /// Connections that failed.
    pub connection_errors: u64,
    /// The last error seen, if any.
    pub last_error: Option<String>,
    /// Every operation answered.
    pub latency: Histogram<u64>,
    /// Operations answered neither `-BUSY` nor an error.
    pub admitted: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static bounds")
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty stats, counting every operation until the window is set.
    pub fn new() -> Self {
        Self {
            window_start_ns: 0,
            window_end_ns: u64::MAX,
            ok: 0,
            nil: 0,
            errors: 0,
            busy: 0,
            unfinished: 0,
            unsent: 0,
            overflowed: 0,
            connection_errors: 0,
            last_error: None,
            latency: histogram(),
            admitted: histogram(),
        }
    }

    /// Operations due in `start_ns..end_ns` are counted.
    pub fn window(&mut self, start_ns: u64, end_ns: u64) {
        self.window_start_ns = start_ns;
        self.window_end_ns = end_ns;
    }

    fn in_window(&self, due_ns: u64) -> bool {
        (self.window_start_ns..self.window_end_ns).contains(&due_ns)
    }

    /// An operation due at `due_ns` answered at `now_ns` with `reply`.
    pub fn record(&mut self, due_ns: u64, now_ns: u64, reply: Reply) {
        if !self.in_window(due_ns) {
            return;
        }
        let ns = now_ns.saturating_sub(due_ns).clamp(1, MAX_LATENCY_NS);
        self.latency.saturating_record(ns);
        match reply {
            Reply::Ok => self.ok += 1,
            Reply::Nil => self.nil += 1,
            Reply::Error => self.errors += 1,
            Reply::Busy => self.busy += 1,
        }
        if matches!(reply, Reply::Ok | Reply::Nil) {
            self.admitted.saturating_record(ns);
        }
    }

    /// Counts an arrival due at `due_ns` that a full backlog refused, if it falls in the window.
    pub fn overflow(&mut self, due_ns: u64) {
        if self.in_window(due_ns) {
            self.overflowed += 1;
        }
    }

    /// A connection failed with these operations due on it: each is an error.
    pub fn connection_failed(&mut self, lost_due_ns: &[u64], error: String) {
        self.connection_errors += 1;
        self.errors += lost_due_ns.iter().filter(|d| self.in_window(**d)).count() as u64;
        self.last_error = Some(error);
    }

    /// Adds `other`'s counts and histograms.
    pub fn merge(&mut self, other: &Stats) {
        self.ok += other.ok;
        self.nil += other.nil;
        self.errors += other.errors;
        self.busy += other.busy;
        self.unfinished += other.unfinished;
        self.unsent += other.unsent;
        self.overflowed += other.overflowed;
        self.connection_errors += other.connection_errors;
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
        let _ = self.latency.add(&other.latency);
        let _ = self.admitted.add(&other.admitted);
    }

    /// Operations answered in the window.
    pub fn answered(&self) -> u64 {
        self.ok + self.nil + self.errors + self.busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: operations outside the window counted, BUSY counted as admitted, a lost
    /// connection's operations not counted as errors, merge dropping a count.
    #[test]
    fn counts_by_window_and_kind() {
        let mut s = Stats::new();
        s.window(100, 200);
        s.record(50, 60, Reply::Ok);
        s.record(100, 150, Reply::Ok);
        s.record(150, 400, Reply::Busy);
        s.record(199, 300, Reply::Nil);
        s.record(200, 300, Reply::Ok);
        assert_eq!((s.ok, s.busy, s.nil), (1, 1, 1));
        assert_eq!(s.latency.len(), 3);
        assert_eq!(s.admitted.len(), 2);
        assert_eq!(s.latency.max(), 250);
        s.connection_failed(&[120, 250], "reset".into());
        assert_eq!(s.errors, 1);
        let mut t = Stats::new();
        t.merge(&s);
        assert_eq!((t.answered(), t.connection_errors), (4, 1));
    }
}
