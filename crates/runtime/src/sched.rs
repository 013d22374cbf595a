//! The scheduling decision, as a pure function of a snapshot of one core's queues, so that its
//! policy order is unit-tested without threads or clocks.
//!
//! AstriFlash (section IV-D): new jobs have priority over pending jobs (jobs parked on
//! a device access) so that device latency overlaps useful work; aging stops starvation: when a
//! pending job has waited longer than the running average device latency, it runs first; the
//! pending set is bounded, and when it is full the core waits for the oldest pending job instead
//! of starting new work. A job resumed before its access completed is resumed with *forced
//! progress*: it is not switched out again, the core waits for its access instead.
//!
//! Deliberate differences: AstriFlash's hardware cannot tell whether a pending job's page has
//! arrived, so its aging may resume a job whose data is not back (and then block the core). Our
//! completion queue tells us, so aging applies to jobs whose accesses *completed* (the oldest
//! of them first), and forced progress happens only when the pending set is full and new work
//! is waiting. And the seed's "running average device latency" is replaced by the device's
//! service time ([`ServiceTime`]), which the policy's own queueing does not inflate.

/// Which order the scheduler serves runnable work in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// AstriFlash: new jobs first, pending jobs after, aging by the device's service time
    /// ([`ServiceTime`]); ready jobs oldest first.
    PriorityAging,
    /// Everything in the order it became runnable (new jobs by arrival, parked jobs by the time
    /// their access completed): the comparison point.
    Fifo,
}

impl Policy {
    /// A byte naming the policy (for an atomic).
    pub(crate) fn code(self) -> u8 {
        match self {
            Policy::PriorityAging => 0,
            Policy::Fifo => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Self {
        match code {
            1 => Policy::Fifo,
            _ => Policy::PriorityAging,
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "priority" | "priority-aging" => Ok(Policy::PriorityAging),
            "fifo" => Ok(Policy::Fifo),
            other => Err(format!("unknown policy {other:?}: use priority or fifo")),
        }
    }
}

/// Completions per window of [`ServiceTime`]: its estimate moves once per window.
pub const SERVICE_WINDOW: u32 = 64;

/// The device's service time as aging uses it: the shortest latency of each window of
/// [`SERVICE_WINDOW`] completions, smoothed over windows (weight 1/4 per window).
///
/// Why not the average latency (AstriFlash's "average flash response time"): on a device whose
/// latency grows with its queue (a real SSD or virtio disk: ≈ 0.1 ms alone, ≈ 1 ms at 64 in
/// flight), the average includes the queueing that new-job priority itself creates. New jobs
/// first → more accesses in flight → a longer average → ready jobs wait longer before they
/// age → more new jobs first: the threshold feeds on itself, every thread ends up parked on the
/// device, and the core idles whenever completions bunch up, while the extra depth buys no
/// throughput once the core is the bottleneck. The window's minimum is the latency of an
/// access that did not queue (or queued least): about the device's own service time, which
/// the policy's own choices do not inflate. On a device with a fixed latency (the emulator)
/// the two are equal and nothing changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceTime {
    estimate_ns: u64,
    window_min_ns: u64,
    window_count: u32,
}

impl ServiceTime {
    /// Starts at `initial_ns` (until the first window completes).
    pub fn new(initial_ns: u64) -> Self {
        Self {
            estimate_ns: initial_ns.max(1),
            window_min_ns: u64::MAX,
            window_count: 0,
        }
    }

    /// One completion's latency (doorbell to reap).
    pub fn record(&mut self, latency_ns: u64) {
        self.window_min_ns = self.window_min_ns.min(latency_ns.max(1));
        self.window_count += 1;
        if self.window_count == SERVICE_WINDOW {
            let min = self.window_min_ns;
            self.estimate_ns = (self.estimate_ns - self.estimate_ns / 4 + min / 4).max(1);
            self.window_min_ns = u64::MAX;
            self.window_count = 0;
        }
    }

    /// The current estimate, in ns.
    pub fn estimate_ns(&self) -> u64 {
        self.estimate_ns
    }
}

/// The oldest pending job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingHead {
    /// When it parked.
    pub parked_at_ns: u64,
    /// All of its accesses have completed.
    pub ready: bool,
}

/// A snapshot of one core's scheduling state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The present, as the core's clock last read it.
    pub now_ns: u64,
    /// How long a ready or runnable job may be passed over by new jobs: the device's service
    /// time ([`ServiceTime`]), so that a job whose data is back runs once it has waited about
    /// one unqueued device access.
    pub aging_ns: u64,
    /// Jobs parked on device accesses (ready or not).
    pub pending: usize,
    /// The bound on `pending` ([`crate::RuntimeConfig::max_pending`]).
    pub max_pending: usize,
    /// The oldest pending job, if any.
    pub head: Option<PendingHead>,
    /// When the first ready pending job became ready: under [`Policy::PriorityAging`] the
    /// ready job whose job arrived first (oldest first), under [`Policy::Fifo`] the one whose
    /// accesses completed first.
    pub first_ready_at_ns: Option<u64>,
    /// When that job parked.
    pub first_ready_parked_at_ns: Option<u64>,
    /// That job is urgent (`thread::Urgent`: others wait for it, as for a group-commit
    /// leader): it runs before anything else.
    pub first_ready_urgent: bool,
    /// When the first yielded or timer-woken job became runnable.
    pub runnable_at_ns: Option<u64>,
    /// Arrival time of the next new job, if one is queued *and* a user thread is free to run it.
    pub new_job_at_ns: Option<u64>,
}

/// What the core does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Resume the oldest pending job; `forced` when its accesses are not complete, so the core
    /// waits for them rather than switching away again (forward progress).
    ResumeHead {
        /// Its accesses are still in flight.
        forced: bool,
    },
    /// Resume the first ready pending job ([`View::first_ready_at_ns`]: the oldest job under
    /// priority, the first completed under FIFO).
    ResumeReady,
    /// Resume the first yielded or timer-woken job.
    ResumeRunnable,
    /// Start the next new job on a free user thread.
    StartNew,
    /// Nothing can run until a device access completes.
    WaitDevice,
    /// Nothing to do at all.
    Idle,
}

/// Picks the next thing to run under `policy`.
pub fn decide(policy: Policy, view: &View) -> Decision {
    debug_assert!(
        view.head.is_some() == (view.pending > 0),
        "head exists iff pending > 0"
    );
    debug_assert!(
        view.first_ready_at_ns.is_some() == view.first_ready_parked_at_ns.is_some(),
        "a ready job has both timestamps"
    );
    let full = view.pending > 0 && view.pending >= view.max_pending;
    if full {
        // Bounded pending set: no new job starts. Parked jobs whose data is back go first; with
        // none and new work waiting, the core waits for the oldest (forced progress).
        if view.first_ready_at_ns.is_some() {
            return Decision::ResumeReady;
        }
        if let (Some(head), Some(_)) = (view.head, view.new_job_at_ns) {
            return Decision::ResumeHead {
                forced: !head.ready,
            };
        }
    }
    if view.first_ready_urgent {
        return Decision::ResumeReady;
    }
    let new_job_at_ns = if full { None } else { view.new_job_at_ns };
    match policy {
        Policy::PriorityAging => {
            // Aging: the first ready job runs before new work once it has been parked for the
            // device's service time, so new jobs cannot starve it; so does the first yielded
            // or timer-woken job once it has been runnable that long (a background task that
            // yields or sleeps would otherwise never run under a steady stream of new work).
            // When both have aged, the one that became runnable first goes.
            let aged = |since_ns: u64| view.now_ns.saturating_sub(since_ns) >= view.aging_ns;
            let ready_aged = view
                .first_ready_parked_at_ns
                .filter(|&parked_at_ns| aged(parked_at_ns))
                .and(view.first_ready_at_ns);
            let runnable_aged = view.runnable_at_ns.filter(|&at_ns| aged(at_ns));
            match (ready_aged, runnable_aged) {
                (Some(ready), Some(runnable)) if runnable < ready => {
                    return Decision::ResumeRunnable
                }
                (Some(_), _) => return Decision::ResumeReady,
                (None, Some(_)) => return Decision::ResumeRunnable,
                (None, None) => {}
            }
            if new_job_at_ns.is_some() {
                return Decision::StartNew;
            }
            match (view.first_ready_at_ns, view.runnable_at_ns) {
                (Some(ready), Some(runnable)) if runnable < ready => Decision::ResumeRunnable,
                (Some(_), _) => Decision::ResumeReady,
                (None, Some(_)) => Decision::ResumeRunnable,
                (None, None) if view.pending > 0 => Decision::WaitDevice,
                (None, None) => Decision::Idle,
            }
        }
        Policy::Fifo => {
            let candidates = [
                (view.first_ready_at_ns, Decision::ResumeReady),
                (view.runnable_at_ns, Decision::ResumeRunnable),
                (new_job_at_ns, Decision::StartNew),
            ];
            // Earliest timestamp wins; ties go to the earlier entry (work already started).
            let best = candidates
                .iter()
                .filter_map(|(at, decision)| at.map(|at| (at, *decision)))
                .min_by_key(|(at, _)| *at);
            match best {
                Some((_, decision)) => decision,
                None if view.pending > 0 => Decision::WaitDevice,
                None => Decision::Idle,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> View {
        View {
            now_ns: 1_000_000,
            aging_ns: 50_000,
            pending: 0,
            max_pending: 8,
            head: None,
            first_ready_at_ns: None,
            first_ready_parked_at_ns: None,
            first_ready_urgent: false,
            runnable_at_ns: None,
            new_job_at_ns: None,
        }
    }

    /// One job parked 10 µs ago (younger than the 50 µs average); ready 5 µs ago if `ready`.
    fn with_young_pending(ready: bool) -> View {
        View {
            pending: 1,
            head: Some(PendingHead {
                parked_at_ns: 990_000,
                ready,
            }),
            first_ready_at_ns: ready.then_some(995_000),
            first_ready_parked_at_ns: ready.then_some(990_000),
            ..empty()
        }
    }

    /// One job parked 60 µs ago (older than the average).
    fn with_old_pending(ready: bool) -> View {
        View {
            head: Some(PendingHead {
                parked_at_ns: 940_000,
                ready,
            }),
            first_ready_parked_at_ns: ready.then_some(940_000),
            ..with_young_pending(ready)
        }
    }

    /// Mutation caught: an urgent ready job (a group-commit leader whose writes completed)
    /// passed over by new jobs or a runnable one, under either policy.
    #[test]
    fn an_urgent_ready_job_runs_first() {
        let view = View {
            first_ready_urgent: true,
            new_job_at_ns: Some(999_000),
            runnable_at_ns: Some(900_000),
            ..with_young_pending(true)
        };
        for policy in [Policy::PriorityAging, Policy::Fifo] {
            assert_eq!(decide(policy, &view), Decision::ResumeReady, "{policy:?}");
        }
    }

    #[test]
    fn idle_and_wait() {
        assert_eq!(decide(Policy::PriorityAging, &empty()), Decision::Idle);
        assert_eq!(decide(Policy::Fifo, &empty()), Decision::Idle);
        let waiting = with_young_pending(false);
        assert_eq!(
            decide(Policy::PriorityAging, &waiting),
            Decision::WaitDevice
        );
        assert_eq!(decide(Policy::Fifo, &waiting), Decision::WaitDevice);
    }

    #[test]
    fn new_jobs_have_priority_over_young_ready_pending_jobs() {
        let view = View {
            new_job_at_ns: Some(999_000),
            ..with_young_pending(true)
        };
        assert_eq!(decide(Policy::PriorityAging, &view), Decision::StartNew);
        // FIFO serves whichever became runnable first: the pending job (ready at 995 µs).
        assert_eq!(decide(Policy::Fifo, &view), Decision::ResumeReady);
        // ...and the new job when it arrived earlier.
        let early = View {
            new_job_at_ns: Some(900_000),
            ..view
        };
        assert_eq!(decide(Policy::Fifo, &early), Decision::StartNew);
    }

    #[test]
    fn aging_runs_an_old_ready_job_before_new_work() {
        let view = View {
            new_job_at_ns: Some(999_000),
            ..with_old_pending(true)
        };
        assert_eq!(decide(Policy::PriorityAging, &view), Decision::ResumeReady);
        // Exactly at the average counts as aged.
        let boundary = View {
            first_ready_parked_at_ns: Some(950_000),
            ..view
        };
        assert_eq!(
            decide(Policy::PriorityAging, &boundary),
            Decision::ResumeReady
        );
        // One nanosecond younger does not.
        let young = View {
            first_ready_parked_at_ns: Some(950_001),
            ..view
        };
        assert_eq!(decide(Policy::PriorityAging, &young), Decision::StartNew);
    }

    #[test]
    fn aging_never_blocks_the_core_on_an_access_in_flight() {
        // The oldest job is old but its access has not completed: new work runs meanwhile.
        let view = View {
            new_job_at_ns: Some(999_000),
            ..with_old_pending(false)
        };
        assert_eq!(decide(Policy::PriorityAging, &view), Decision::StartNew);
        let nothing_new = with_old_pending(false);
        assert_eq!(
            decide(Policy::PriorityAging, &nothing_new),
            Decision::WaitDevice
        );
    }

    #[test]
    fn a_full_pending_set_runs_ready_jobs_then_waits_for_the_oldest_instead_of_new_work() {
        for policy in [Policy::PriorityAging, Policy::Fifo] {
            let full = View {
                pending: 8,
                max_pending: 8,
                new_job_at_ns: Some(0),
                ..with_young_pending(false)
            };
            assert_eq!(decide(policy, &full), Decision::ResumeHead { forced: true });
            // A ready job goes first: it shrinks the set without waiting.
            let with_ready = View {
                pending: 8,
                max_pending: 8,
                new_job_at_ns: Some(0),
                ..with_young_pending(true)
            };
            assert_eq!(decide(policy, &with_ready), Decision::ResumeReady);
            // Full but no new work waiting: nothing to protect, so the core just waits.
            let no_new = View {
                new_job_at_ns: None,
                ..full
            };
            assert_eq!(decide(policy, &no_new), Decision::WaitDevice);
            // Below the bound the new job starts.
            let below = View { pending: 7, ..full };
            assert_eq!(decide(policy, &below), Decision::StartNew);
        }
    }

    #[test]
    fn yielded_jobs_run_after_new_jobs_and_in_time_order_with_ready_ones() {
        let view = View {
            runnable_at_ns: Some(990_000),
            ..empty()
        };
        assert_eq!(
            decide(Policy::PriorityAging, &view),
            Decision::ResumeRunnable
        );
        let with_new = View {
            new_job_at_ns: Some(999_000),
            ..view
        };
        assert_eq!(decide(Policy::PriorityAging, &with_new), Decision::StartNew);
        let with_ready = View {
            runnable_at_ns: Some(999_000),
            ..with_young_pending(true)
        };
        assert_eq!(
            decide(Policy::PriorityAging, &with_ready),
            Decision::ResumeReady
        );
        let runnable_first = View {
            runnable_at_ns: Some(991_000),
            ..with_young_pending(true)
        };
        assert_eq!(
            decide(Policy::PriorityAging, &runnable_first),
            Decision::ResumeRunnable
        );
    }

    #[test]
    fn aging_runs_an_old_yielded_job_before_new_work() {
        // Runnable for 60 µs (the average is 50): it runs before the new job.
        let view = View {
            runnable_at_ns: Some(940_000),
            new_job_at_ns: Some(999_000),
            ..empty()
        };
        assert_eq!(
            decide(Policy::PriorityAging, &view),
            Decision::ResumeRunnable
        );
        // Both aged: the one runnable first goes (the ready job became ready at 995 µs).
        let both = View {
            runnable_at_ns: Some(940_000),
            new_job_at_ns: Some(999_000),
            ..with_old_pending(true)
        };
        assert_eq!(
            decide(Policy::PriorityAging, &both),
            Decision::ResumeRunnable
        );
        let ready_first = View {
            runnable_at_ns: Some(949_000),
            first_ready_at_ns: Some(945_000),
            ..both
        };
        assert_eq!(
            decide(Policy::PriorityAging, &ready_first),
            Decision::ResumeReady
        );
    }

    /// Mutation caught: aging by the average (queueing included): a deep queue would raise
    /// the threshold with every window.
    #[test]
    fn the_service_time_follows_the_shortest_latency_not_the_queueing() {
        let mut service = ServiceTime::new(50_000);
        // A loaded device: 63 accesses of each window queued (1 ms), one alone (80 µs).
        for _ in 0..40 {
            for i in 0..SERVICE_WINDOW {
                service.record(if i == 7 { 80_000 } else { 1_000_000 });
            }
        }
        let estimate = service.estimate_ns();
        assert!((79_000..=81_000).contains(&estimate), "{estimate}");
    }

    /// Mutations caught: an estimate that moves before a window is complete, or jumps to a
    /// window's minimum at once (one lucky access would reset the threshold).
    #[test]
    fn the_service_time_moves_once_per_window_by_a_quarter() {
        let mut service = ServiceTime::new(100_000);
        for _ in 0..SERVICE_WINDOW - 1 {
            service.record(20_000);
        }
        assert_eq!(service.estimate_ns(), 100_000, "mid-window");
        service.record(20_000);
        assert_eq!(service.estimate_ns(), 100_000 - 25_000 + 5_000);
        // A device that got slower raises it window by window, to its new service time.
        for _ in 0..50 * SERVICE_WINDOW {
            service.record(300_000);
        }
        let estimate = service.estimate_ns();
        assert!((299_000..=300_000).contains(&estimate), "{estimate}");
    }

    #[test]
    fn policy_parses() {
        assert_eq!("fifo".parse::<Policy>(), Ok(Policy::Fifo));
        assert_eq!("priority".parse::<Policy>(), Ok(Policy::PriorityAging));
        assert!("lifo".parse::<Policy>().is_err());
    }
}
