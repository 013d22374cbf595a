//! One core's shared state: the device handle, the ticket table and the scheduling queues.
//!
//! The executor loop and the user-level threads it runs share this through `&Core` on one OS
//! thread (user threads reach it through a thread-local pointer set by the executor). Every
//! field is a `Cell` or `RefCell`, and no borrow is held across a switch.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;
use tamer_device::{now_ns, Arena, Completion, Device, DeviceError, IoRequest};

use crate::config::MAX_OUTSTANDING_PER_THREAD;
use crate::sched::{PendingHead, ServiceTime, View};
use crate::{Job, RuntimeConfig};

/// Index of a user-level thread on its core.
pub type WorkerId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Idle,
    Running,
    /// Waiting for device accesses (in the pending queue).
    Parked,
    /// Yielded or woken by a timer (in the runnable queue).
    Runnable,
    Sleeping,
    /// Waiting for a memory word to change (in the watch list).
    Watching,
}

/// A word a thread waits on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WatchWord {
    U64(*const AtomicU64),
    U32(*const AtomicU32),
}

impl WatchWord {
    /// The word's value now.
    ///
    /// # Safety
    /// The word must be alive (the waiting thread keeps it alive until it resumes).
    pub(crate) unsafe fn load(self) -> u64 {
        // SAFETY: per the caller's contract.
        unsafe {
            match self {
                WatchWord::U64(word) => (*word).load(Ordering::Acquire),
                WatchWord::U32(word) => u64::from((*word).load(Ordering::Acquire)),
            }
        }
    }
}

/// A thread waiting for a word to change: checked by the executor, not by the thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch {
    pub worker: WorkerId,
    /// Points into memory the waiting thread keeps alive while it waits (see
    /// `thread::wait_while_eq`).
    pub word: WatchWord,
    pub expected: u64,
    pub deadline_ns: u64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkerState {
    pub status: Status,
    /// Increments on every park, so stale queue entries can be recognised.
    pub epoch: u32,
    /// Accesses this thread waits for while parked.
    pub awaiting: u32,
    /// Accesses (tickets) this thread holds, done or not.
    pub outstanding: u32,
    /// Resumed before its accesses completed: wait for them instead of switching away.
    pub force_progress: bool,
    pub job_enqueued_ns: u64,
    /// When it last parked.
    pub parked_at_ns: u64,
    /// What its current job waited for so far (`thread::waits`).
    pub waits: crate::waits::Waits,
    /// Others wait for it (`thread::Urgent`): once its accesses complete it runs first.
    pub urgent: bool,
}

/// What one core counted.
#[derive(Clone, Debug)]
pub struct CoreStats {
    /// Jobs a user-level thread began.
    pub jobs_started: u64,
    /// Jobs that ended, including those that panicked (`jobs_panicked` of them).
    pub jobs_completed: u64,
    /// Jobs that ended in a panic (caught; the thread took the next job).
    pub jobs_panicked: u64,
    /// Resumes of a user-level thread (each is a switch in and, later, out).
    pub switches: u64,
    /// Switches away from a thread that waits for device accesses.
    pub parks: u64,
    /// Switches away from a thread that yielded the core.
    pub yields: u64,
    /// Resumes with forced progress (the pending set was full, new work was waiting, and the
    /// oldest pending job's access was still in flight).
    pub forced_progress: u64,
    /// Polls the core spent stalled because the per-core in-flight cap or the device queue was
    /// full.
    pub in_flight_stalls: u64,
    /// Polls the core spent waiting for a thread's own access without switching (demand
    /// access, forced progress).
    pub spin_polls: u64,
    /// Idle waits for the device (nothing runnable): blocking waits, and polls of the spin
    /// before one.
    pub device_waits: u64,
    /// OS sleeps of the core while its only work was threads sleeping on timers (nothing in
    /// flight, nothing watched, no job start or completion for `idle_spin_ns`).
    pub timer_sleeps: u64,
    /// Most jobs parked on device accesses at once.
    pub max_pending_seen: usize,
    /// At the snapshot: aging's threshold (the device's service time) and the average device
    /// latency (doorbell to reap), in ns.
    pub aging_threshold_ns: u64,
    /// See `aging_threshold_ns`.
    pub avg_device_latency_ns: u64,
    /// CPU time of the executor's OS thread (user + kernel) at the snapshot, in ns: what the
    /// core cost, device syscalls and interrupts taken on it included.
    pub cpu_ns: u64,
    /// Of that, the kernel's share as the thread's resource usage reports it (`getrusage`,
    /// tick-sampled on most kernels: a share, not an exact time), in ns.
    pub system_cpu_ns: u64,
    /// Scheduling decisions by kind: start a new job, resume the pending head (forced or
    /// not), resume a ready job, resume a runnable job, wait for the device, idle.
    pub decisions: [u64; 6],
    /// Decisions to wait for the device taken while new jobs were queued on the core: every
    /// user-level thread was busy (parked, ready-but-unaged jobs do not count: those run), so
    /// the thread pool, not the core, held the new work back.
    pub waits_with_jobs_queued: u64,
    /// Time the core had work (threads busy or jobs queued) but nothing runnable: it waited for
    /// the device, a timer or a watched word (spinning or blocked), in nanoseconds.
    pub waiting_ns: u64,
    /// From a job's arrival in a queue to its end, in nanoseconds.
    pub job_latency_ns: Histogram<u64>,
    /// From the reap that found a parked thread's last access complete (it became ready) to
    /// its resume: how long a job whose data is back waits for the core, in nanoseconds.
    pub ready_wait_ns: Histogram<u64>,
    /// From the moment a yielded, timer-woken or watch-woken thread became runnable to its
    /// resume, in nanoseconds.
    pub runnable_wait_ns: Histogram<u64>,
}

impl Default for CoreStats {
    fn default() -> Self {
        Self {
            jobs_started: 0,
            jobs_completed: 0,
            jobs_panicked: 0,
            switches: 0,
            parks: 0,
            yields: 0,
            forced_progress: 0,
            in_flight_stalls: 0,
            spin_polls: 0,
            device_waits: 0,
            timer_sleeps: 0,
            max_pending_seen: 0,
            aging_threshold_ns: 0,
            avg_device_latency_ns: 0,
            cpu_ns: 0,
            system_cpu_ns: 0,
            decisions: [0; 6],
            waits_with_jobs_queued: 0,
            waiting_ns: 0,
            job_latency_ns: wait_histogram(),
            ready_wait_ns: wait_histogram(),
            runnable_wait_ns: wait_histogram(),
        }
    }
}

/// A histogram of nanoseconds from 1 ns to 100 s, 3 significant digits.
fn wait_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static bounds")
}

impl CoreStats {
    /// Adds `other`'s counts to these (maxima take the larger), for totals over cores.
    pub fn merge(&mut self, other: &CoreStats) {
        self.jobs_started += other.jobs_started;
        self.jobs_completed += other.jobs_completed;
        self.jobs_panicked += other.jobs_panicked;
        self.switches += other.switches;
        self.parks += other.parks;
        self.yields += other.yields;
        self.forced_progress += other.forced_progress;
        self.in_flight_stalls += other.in_flight_stalls;
        self.spin_polls += other.spin_polls;
        self.device_waits += other.device_waits;
        self.timer_sleeps += other.timer_sleeps;
        self.max_pending_seen = self.max_pending_seen.max(other.max_pending_seen);
        self.aging_threshold_ns = self.aging_threshold_ns.max(other.aging_threshold_ns);
        self.avg_device_latency_ns = self.avg_device_latency_ns.max(other.avg_device_latency_ns);
        self.cpu_ns += other.cpu_ns;
        self.system_cpu_ns += other.system_cpu_ns;
        self.waiting_ns += other.waiting_ns;
        for (mine, theirs) in self.decisions.iter_mut().zip(other.decisions) {
            *mine += theirs;
        }
        self.waits_with_jobs_queued += other.waits_with_jobs_queued;
        let _ = self.job_latency_ns.add(&other.job_latency_ns);
        let _ = self.ready_wait_ns.add(&other.ready_wait_ns);
        let _ = self.runnable_wait_ns.add(&other.runnable_wait_ns);
    }

    /// What happened between `earlier` and `self` (two snapshots of one core, or two merged
    /// snapshots of the same cores): counters subtracted, histograms subtracted. The maximum
    /// of the pending set is `self`'s (a maximum cannot be subtracted).
    pub fn since(&self, earlier: &CoreStats) -> CoreStats {
        let mut delta = self.clone();
        delta.jobs_started -= earlier.jobs_started.min(delta.jobs_started);
        delta.jobs_completed -= earlier.jobs_completed.min(delta.jobs_completed);
        delta.jobs_panicked -= earlier.jobs_panicked.min(delta.jobs_panicked);
        delta.switches -= earlier.switches.min(delta.switches);
        delta.parks -= earlier.parks.min(delta.parks);
        delta.yields -= earlier.yields.min(delta.yields);
        delta.forced_progress -= earlier.forced_progress.min(delta.forced_progress);
        delta.in_flight_stalls -= earlier.in_flight_stalls.min(delta.in_flight_stalls);
        delta.spin_polls -= earlier.spin_polls.min(delta.spin_polls);
        delta.device_waits -= earlier.device_waits.min(delta.device_waits);
        delta.timer_sleeps -= earlier.timer_sleeps.min(delta.timer_sleeps);
        delta.waiting_ns -= earlier.waiting_ns.min(delta.waiting_ns);
        delta.cpu_ns -= earlier.cpu_ns.min(delta.cpu_ns);
        delta.system_cpu_ns -= earlier.system_cpu_ns.min(delta.system_cpu_ns);
        for (mine, theirs) in delta.decisions.iter_mut().zip(earlier.decisions) {
            *mine -= theirs.min(*mine);
        }
        delta.waits_with_jobs_queued -= earlier
            .waits_with_jobs_queued
            .min(delta.waits_with_jobs_queued);
        // A histogram that is not a superset (another core's, a reset) is left whole.
        let _ = delta.job_latency_ns.subtract(&earlier.job_latency_ns);
        let _ = delta.ready_wait_ns.subtract(&earlier.ready_wait_ns);
        let _ = delta.runnable_wait_ns.subtract(&earlier.runnable_wait_ns);
        delta
    }
}

/// A device access in flight or completed, owned by the user thread that submitted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    index: u32,
    generation: u32,
}

impl Ticket {
    fn tag(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    fn from_tag(tag: u64) -> Self {
        Self {
            index: tag as u32,
            generation: (tag >> 32) as u32,
        }
    }
}

#[derive(Debug)]
enum TicketState {
    Free,
    InFlight,
    Done(Result<(), DeviceError>),
}

#[derive(Debug)]
struct TicketSlot {
    generation: u32,
    owner: WorkerId,
    state: TicketState,
    /// Its owner is parked waiting for it: its completion counts towards the owner's
    /// `awaiting`. A thread may hold accesses it does not wait for yet; their completions must
    /// not wake it (or underflow its count).
    awaited: bool,
}

/// The scheduling queues of one core. Queue entries carry the worker's epoch; an entry whose
/// epoch is stale is skipped and dropped (lazy deletion), and queues are compacted when they
/// exceed twice the thread count, so each stays within `2 * threads + 1` entries.
pub(crate) struct Sched {
    pub workers: Vec<WorkerState>,
    pub idle: Vec<WorkerId>,
    /// New jobs taken from the shared queue or the inbox; bounded by `config.local_queue`.
    pub local: VecDeque<Job>,
    /// Parked workers in park order: (worker, epoch, parked_at_ns).
    pub pending: VecDeque<(WorkerId, u32, u64)>,
    /// Live entries of `pending`.
    pub pending_live: usize,
    /// Parked workers whose accesses all completed (the live entries of `ready`).
    pub ready_live: usize,
    /// Parked workers whose accesses all completed, in completion order: (worker, epoch, at).
    pub ready: VecDeque<(WorkerId, u32, u64)>,
    /// The same workers, the oldest job first: (job enqueued at, ready at, worker, epoch).
    /// Stale entries (the worker ran since) are dropped lazily, as in `ready`.
    pub ready_by_age: BinaryHeap<Reverse<(u64, u64, WorkerId, u32)>>,
    /// Yielded and timer-woken workers: (worker, runnable_at_ns).
    pub runnable: VecDeque<(WorkerId, u64)>,
    /// Sleeping workers by deadline.
    pub timers: BinaryHeap<Reverse<(u64, WorkerId)>>,
    /// Workers waiting for a word to change (at most one entry each).
    pub watches: Vec<Watch>,
    /// Most parked workers at once.
    pub max_pending_seen: usize,
}

impl Sched {
    fn new(threads: usize, local_queue: usize) -> Self {
        let state = WorkerState {
            status: Status::Idle,
            epoch: 0,
            awaiting: 0,
            outstanding: 0,
            force_progress: false,
            job_enqueued_ns: 0,
            parked_at_ns: 0,
            waits: crate::waits::Waits::default(),
            urgent: false,
        };
        Self {
            workers: vec![state; threads],
            idle: (0..threads as WorkerId).rev().collect(),
            local: VecDeque::with_capacity(local_queue),
            pending: VecDeque::with_capacity(2 * threads + 1),
            pending_live: 0,
            ready_live: 0,
            ready: VecDeque::with_capacity(2 * threads + 1),
            ready_by_age: BinaryHeap::with_capacity(2 * threads + 1),
            runnable: VecDeque::with_capacity(threads),
            timers: BinaryHeap::with_capacity(threads),
            watches: Vec::with_capacity(threads),
            max_pending_seen: 0,
        }
    }

    fn is_live(&self, entry: (WorkerId, u32, u64)) -> bool {
        let state = &self.workers[entry.0 as usize];
        state.status == Status::Parked && state.epoch == entry.1
    }

    fn is_live_ready(&self, entry: (WorkerId, u32, u64)) -> bool {
        self.is_live(entry) && self.workers[entry.0 as usize].awaiting == 0
    }

    /// Drops stale entries at the fronts so that the fronts are live.
    pub fn clean_fronts(&mut self) {
        while let Some(&front) = self.pending.front() {
            if self.is_live(front) {
                break;
            }
            self.pending.pop_front();
        }
        while let Some(&front) = self.ready.front() {
            if self.is_live_ready(front) {
                break;
            }
            self.ready.pop_front();
        }
        while let Some(&Reverse((_, at, worker, epoch))) = self.ready_by_age.peek() {
            if self.is_live_ready((worker, epoch, at)) {
                break;
            }
            self.ready_by_age.pop();
        }
    }

    /// The ready worker to resume next: the oldest job's when `oldest_first` (AstriFlash's
    /// policy: the job that has waited longest is closest to its latency bound), else the
    /// first to become ready (FIFO). As (worker, epoch, ready at).
    pub fn ready_front(&mut self, oldest_first: bool) -> Option<(WorkerId, u32, u64)> {
        self.clean_fronts();
        if oldest_first {
            self.ready_by_age
                .peek()
                .map(|&Reverse((_, at, worker, epoch))| (worker, epoch, at))
        } else {
            self.ready.front().copied()
        }
    }

    /// Takes [`Self::ready_front`] off the ready set and unparks it: (worker, ready at).
    pub fn take_ready(&mut self, oldest_first: bool) -> Option<(WorkerId, u64)> {
        let (worker, _, at) = self.ready_front(oldest_first)?;
        if oldest_first {
            self.ready_by_age.pop();
        } else {
            self.ready.pop_front();
        }
        self.unpark(worker);
        Some((worker, at))
    }

    fn compact(&mut self) {
        let threads = self.workers.len();
        if self.pending.len() > 2 * threads {
            let workers = &self.workers;
            self.pending.retain(|&(w, epoch, _)| {
                let s = &workers[w as usize];
                s.status == Status::Parked && s.epoch == epoch
            });
        }
        let live = |workers: &[WorkerState], w: WorkerId, epoch: u32| {
            let s = &workers[w as usize];
            s.status == Status::Parked && s.epoch == epoch && s.awaiting == 0
        };
        if self.ready.len() > 2 * threads {
            let workers = &self.workers;
            self.ready.retain(|&(w, epoch, _)| live(workers, w, epoch));
        }
        if self.ready_by_age.len() > 2 * threads {
            let workers = &self.workers;
            self.ready_by_age
                .retain(|&Reverse((_, _, w, epoch))| live(workers, w, epoch));
        }
    }

    pub fn park(&mut self, worker: WorkerId, awaiting: u32, now: u64) {
        let state = &mut self.workers[worker as usize];
        debug_assert_eq!(state.status, Status::Running);
        debug_assert!(awaiting > 0);
        state.status = Status::Parked;
        state.epoch = state.epoch.wrapping_add(1);
        state.awaiting = awaiting;
        state.parked_at_ns = now;
        let epoch = state.epoch;
        self.pending.push_back((worker, epoch, now));
        self.pending_live += 1;
        self.max_pending_seen = self.max_pending_seen.max(self.pending_live);
        self.compact();
    }

    /// Takes a parked worker off the pending set (it is about to run).
    pub fn unpark(&mut self, worker: WorkerId) {
        let state = &mut self.workers[worker as usize];
        assert_eq!(
            state.status,
            Status::Parked,
            "unpark of a worker that is not parked"
        );
        state.status = Status::Running;
        if state.awaiting == 0 {
            self.ready_live -= 1;
        }
        self.pending_live -= 1;
        debug_assert!(self.ready_live <= self.pending_live);
    }

    /// One awaited access of `worker` completed.
    pub fn access_completed(&mut self, worker: WorkerId, now: u64) {
        let state = &mut self.workers[worker as usize];
        if state.status != Status::Parked {
            return; // Running (spinning for it) or not waiting on it yet.
        }
        assert!(
            state.awaiting > 0,
            "completion for a parked worker awaiting nothing"
        );
        state.awaiting -= 1;
        if state.awaiting == 0 {
            self.ready_live += 1;
            let (epoch, enqueued_ns) = (state.epoch, state.job_enqueued_ns);
            if state.urgent {
                // First in either order: as if its job had arrived before every other.
                self.ready.push_front((worker, epoch, now));
                self.ready_by_age.push(Reverse((0, now, worker, epoch)));
            } else {
                self.ready.push_back((worker, epoch, now));
                self.ready_by_age
                    .push(Reverse((enqueued_ns, now, worker, epoch)));
            }
            self.compact();
        }
    }

    /// (parked with accesses in flight, ready, runnable, idle, queued new jobs): counts for
    /// observers, exact and O(1).
    pub fn state_counts(&self) -> [usize; 5] {
        [
            self.pending_live - self.ready_live,
            self.ready_live,
            self.runnable.len(),
            self.idle.len(),
            self.local.len(),
        ]
    }

    /// The snapshot [`decide`](crate::sched::decide) takes; its first ready job is
    /// [`Self::ready_front`]'s.
    pub fn view(
        &mut self,
        now_ns: u64,
        aging_ns: u64,
        max_pending: usize,
        oldest_first: bool,
    ) -> View {
        let first_ready = self.ready_front(oldest_first);
        let head = self
            .pending
            .front()
            .map(|&(w, _, parked_at_ns)| PendingHead {
                parked_at_ns,
                ready: self.workers[w as usize].awaiting == 0,
            });
        View {
            now_ns,
            aging_ns,
            pending: self.pending_live,
            max_pending,
            head,
            first_ready_at_ns: first_ready.map(|(_, _, at)| at),
            first_ready_parked_at_ns: first_ready
                .map(|(w, _, _)| self.workers[w as usize].parked_at_ns),
            first_ready_urgent: first_ready
                .is_some_and(|(w, _, _)| self.workers[w as usize].urgent),
            runnable_at_ns: self.runnable.front().map(|&(_, at)| at),
            new_job_at_ns: if self.idle.is_empty() {
                None
            } else {
                self.local.front().map(|job| job.enqueued_ns)
            },
        }
    }
}

/// The state one core's executor shares with the user-level threads it runs.
pub struct Core {
    pub(crate) id: usize,
    pub(crate) config: RuntimeConfig,
    pub(crate) arena: Arc<Arena>,
    pub(crate) device: RefCell<Box<dyn Device>>,
    tickets: RefCell<Vec<TicketSlot>>,
    free_tickets: RefCell<Vec<u32>>,
    pub(crate) sched: RefCell<Sched>,
    pub(crate) current: Cell<Option<WorkerId>>,
    avg_latency_ns: Cell<u64>,
    /// The device's service time, aging's threshold (see [`ServiceTime`]).
    service: Cell<ServiceTime>,
    /// The scheduling policy in force (the config's, or the runtime's latest `set_policy`).
    pub(crate) policy: Cell<crate::Policy>,
    /// The clock as last read by this core (see [`Core::clock`]).
    clock_ns: Cell<u64>,
    completions: RefCell<Vec<Completion>>,
    pub(crate) stats: RefCell<CoreStats>,
    doorbell_is_cheap: bool,
}

impl Core {
    pub(crate) fn new(
        id: usize,
        config: RuntimeConfig,
        device: Box<dyn Device>,
        arena: Arc<Arena>,
    ) -> Self {
        let threads = config.threads_per_core;
        let ticket_count = threads * MAX_OUTSTANDING_PER_THREAD;
        let tickets = (0..ticket_count)
            .map(|_| TicketSlot {
                generation: 0,
                owner: 0,
                state: TicketState::Free,
                awaited: false,
            })
            .collect();
        let doorbell_is_cheap = device.doorbell_is_cheap();
        let queue_depth = device.queue_depth();
        Self {
            id,
            avg_latency_ns: Cell::new(config.initial_latency_ns),
            service: Cell::new(ServiceTime::new(config.initial_latency_ns)),
            policy: Cell::new(config.policy),
            clock_ns: Cell::new(now_ns()),
            sched: RefCell::new(Sched::new(threads, config.local_queue)),
            config,
            arena,
            device: RefCell::new(device),
            tickets: RefCell::new(tickets),
            free_tickets: RefCell::new((0..ticket_count as u32).rev().collect()),
            current: Cell::new(None),
            completions: RefCell::new(Vec::with_capacity(queue_depth)),
            stats: RefCell::new(CoreStats::default()),
            doorbell_is_cheap,
        }
    }

    /// Reads the clock and remembers the reading.
    pub(crate) fn read_clock(&self) -> u64 {
        let now = now_ns();
        self.clock_ns.set(now);
        now
    }

    /// The last reading, taken by the last reap with accesses in flight (after every run),
    /// cheap doorbell, device wait or pass start: at most one run old when the executor
    /// decides while accesses are in flight, at most one pass (≤ 16 runs) otherwise, so that
    /// neither a decision nor a park pays for a clock read of its own.
    pub(crate) fn clock(&self) -> u64 {
        self.clock_ns.get()
    }

    /// True when the device's doorbell costs no syscall (it is rung at every submit).
    pub(crate) fn doorbell_is_cheap(&self) -> bool {
        self.doorbell_is_cheap
    }

    pub(crate) fn avg_latency_ns(&self) -> u64 {
        self.avg_latency_ns.get()
    }

    /// Aging's threshold: the device's service time.
    pub(crate) fn aging_ns(&self) -> u64 {
        self.service.get().estimate_ns()
    }

    /// Pushes one access for the running worker. Stalls the core (spins reaping completions)
    /// while the per-core in-flight cap or the device queue is full.
    pub(crate) fn submit(
        &self,
        worker: WorkerId,
        mut request: IoRequest,
    ) -> Result<Ticket, DeviceError> {
        {
            let sched = self.sched.borrow();
            let outstanding = sched.workers[worker as usize].outstanding as usize;
            assert!(
                outstanding < MAX_OUTSTANDING_PER_THREAD,
                "a user thread may hold at most {MAX_OUTSTANDING_PER_THREAD} accesses; wait for some first"
            );
        }
        if let Some(cap) = self.config.max_in_flight {
            while self.device.borrow().in_flight() >= cap {
                self.stall_once();
            }
        }
        let index = self
            .free_tickets
            .borrow_mut()
            .pop()
            .expect("ticket table sized for every thread");
        let ticket = {
            let mut tickets = self.tickets.borrow_mut();
            let slot = &mut tickets[index as usize];
            debug_assert!(matches!(slot.state, TicketState::Free));
            slot.generation = slot.generation.wrapping_add(1);
            slot.owner = worker;
            slot.state = TicketState::InFlight;
            slot.awaited = false;
            Ticket {
                index,
                generation: slot.generation,
            }
        };
        request.tag = ticket.tag();
        loop {
            let pushed = self.device.borrow_mut().push(request);
            match pushed {
                Ok(()) => break,
                Err(DeviceError::QueueFull { .. }) => self.stall_once(),
                Err(err) => {
                    self.release_ticket(ticket);
                    return Err(err);
                }
            }
        }
        self.sched.borrow_mut().workers[worker as usize].outstanding += 1;
        if self.doorbell_is_cheap {
            // One clock reading serves the doorbell's timestamp and the thread's pending time
            // (`io::wait_all_with` parks with `clock()`).
            let now = self.read_clock();
            if let Err(err) = self.device.borrow_mut().submit_at(now) {
                tracing::warn!(core = self.id, "doorbell failed: {err}");
            }
        }
        Ok(ticket)
    }

    fn release_ticket(&self, ticket: Ticket) {
        let mut tickets = self.tickets.borrow_mut();
        let slot = &mut tickets[ticket.index as usize];
        assert_eq!(slot.generation, ticket.generation, "stale ticket");
        slot.state = TicketState::Free;
        self.free_tickets.borrow_mut().push(ticket.index);
    }

    /// True when the access behind `ticket` completed.
    pub(crate) fn is_done(&self, ticket: Ticket) -> bool {
        let tickets = self.tickets.borrow();
        let slot = &tickets[ticket.index as usize];
        assert_eq!(
            slot.generation, ticket.generation,
            "ticket used after it was claimed"
        );
        matches!(slot.state, TicketState::Done(_))
    }

    /// Marks the accesses in `tickets` that are still in flight as awaited by their owner, which
    /// is about to park on them; returns how many (the owner's `awaiting`).
    pub(crate) fn await_in_flight(&self, tickets: &[Ticket]) -> u32 {
        let mut slots = self.tickets.borrow_mut();
        let mut count = 0;
        for ticket in tickets {
            let slot = &mut slots[ticket.index as usize];
            assert_eq!(
                slot.generation, ticket.generation,
                "ticket used after it was claimed"
            );
            if matches!(slot.state, TicketState::InFlight) && !slot.awaited {
                slot.awaited = true;
                count += 1;
            }
        }
        count
    }

    /// Takes the result of a completed access and frees its ticket.
    pub(crate) fn claim(&self, worker: WorkerId, ticket: Ticket) -> Result<(), DeviceError> {
        let result = {
            let mut tickets = self.tickets.borrow_mut();
            let slot = &mut tickets[ticket.index as usize];
            assert_eq!(slot.generation, ticket.generation, "ticket claimed twice");
            assert_eq!(
                slot.owner, worker,
                "ticket claimed by a thread that does not own it"
            );
            match std::mem::replace(&mut slot.state, TicketState::Free) {
                TicketState::Done(result) => result,
                other => panic!("claim of an access that is not done: {other:?}"),
            }
        };
        self.free_tickets.borrow_mut().push(ticket.index);
        let mut sched = self.sched.borrow_mut();
        let state = &mut sched.workers[worker as usize];
        state.outstanding -= 1;
        result
    }

    /// Rings the doorbell for everything pushed (at most one syscall).
    pub(crate) fn ring_doorbell(&self) {
        if let Err(err) = self.device.borrow_mut().submit() {
            // The requests stay queued and the next doorbell retries them.
            tracing::warn!(core = self.id, "doorbell failed: {err}");
        }
    }

    /// Device requests reaped so far.
    pub(crate) fn device_completed(&self) -> u64 {
        self.device.borrow().stats().completed
    }

    /// Accesses submitted to (or queued for) this core's device and not yet reaped.
    pub(crate) fn device_in_flight(&self) -> usize {
        self.device.borrow().in_flight()
    }

    /// Reaps completions without a syscall and wakes the threads waiting for them.
    pub(crate) fn reap(&self) -> usize {
        if self.device.borrow().in_flight() == 0 {
            // Nothing to reap: no clock read (a core that only yields pays none per switch).
            return 0;
        }
        let mut completions = self.completions.borrow_mut();
        completions.clear();
        // This reading is also the next scheduling decision's present (see `clock`).
        let now = self.read_clock();
        let count = self.device.borrow_mut().poll_at(now, &mut completions);
        if count > 0 {
            self.dispatch(&mut completions);
        }
        count
    }

    fn dispatch(&self, completions: &mut Vec<Completion>) {
        // The reading the completions were reaped with.
        let now = self.clock();
        let mut tickets = self.tickets.borrow_mut();
        let mut sched = self.sched.borrow_mut();
        let mut avg = self.avg_latency_ns.get();
        let mut service = self.service.get();
        for completion in completions.drain(..) {
            let ticket = Ticket::from_tag(completion.tag);
            let slot = &mut tickets[ticket.index as usize];
            assert_eq!(
                slot.generation, ticket.generation,
                "completion for a stale ticket"
            );
            assert!(
                matches!(slot.state, TicketState::InFlight),
                "second completion of one access"
            );
            slot.state = TicketState::Done(completion.result);
            // Exponentially weighted moving average, weight 1/8.
            avg = avg - avg / 8 + completion.latency_ns / 8;
            service.record(completion.latency_ns);
            if std::mem::take(&mut slot.awaited) {
                sched.access_completed(slot.owner, now);
            }
        }
        self.avg_latency_ns.set(avg.max(1));
        self.service.set(service);
    }

    /// The core waits for the running thread's own access: ring the doorbell and reap once.
    pub(crate) fn spin_once(&self) {
        self.stats.borrow_mut().spin_polls += 1;
        self.ring_doorbell();
        if self.reap() == 0 {
            std::hint::spin_loop();
        }
    }

    /// The core stalls on a full queue: ring the doorbell and reap once (no switch).
    pub(crate) fn stall_once(&self) {
        self.stats.borrow_mut().in_flight_stalls += 1;
        self.ring_doorbell();
        if self.reap() == 0 {
            std::hint::spin_loop();
        }
    }

    /// Blocks (or spins, in poll mode) until a completion or `timeout_ns` passes.
    pub(crate) fn wait_device(&self, timeout_ns: u64) {
        self.stats.borrow_mut().device_waits += 1;
        let mut completions = self.completions.borrow_mut();
        completions.clear();
        let result = match self.config.idle {
            crate::IdleMode::Block => self.device.borrow_mut().wait(
                std::time::Duration::from_nanos(timeout_ns),
                &mut completions,
            ),
            crate::IdleMode::Poll => {
                let mut device = self.device.borrow_mut();
                let _ = device.submit();
                Ok(device.poll(&mut completions))
            }
        };
        if let Err(err) = result {
            tracing::warn!(core = self.id, "device wait failed: {err}");
        }
        if !completions.is_empty() {
            // The wait may have been long: completions are stamped with the present.
            self.read_clock();
            self.dispatch(&mut completions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutation caught: an urgent worker queued by its job's arrival like the others (it waits
    /// behind older jobs) or at the back in completion order.
    #[test]
    fn an_urgent_worker_is_the_first_ready_in_both_orders() {
        let mut sched = parked_three();
        sched.workers[0].urgent = true; // its job arrived last (30)
        sched.access_completed(1, 200);
        sched.access_completed(0, 201);
        for oldest_first in [true, false] {
            assert_eq!(sched.ready_front(oldest_first).map(|(w, _, _)| w), Some(0));
            let view = sched.view(300, 50, 8, oldest_first);
            assert!(view.first_ready_urgent);
        }
    }

    /// Three workers running jobs that arrived at 30, 10 and 20, parked on one access each.
    fn parked_three() -> Sched {
        let mut sched = Sched::new(4, 8);
        for (worker, arrived) in [(0u16, 30u64), (1, 10), (2, 20)] {
            let state = &mut sched.workers[worker as usize];
            state.status = Status::Running;
            state.job_enqueued_ns = arrived;
            sched.park(worker as WorkerId, 1, 100 + u64::from(worker));
        }
        sched
    }

    /// Mutations caught: the age order keyed by readiness instead of the job's arrival, the
    /// FIFO order broken by the second queue, a taken worker left in the other order (it
    /// would be resumed twice).
    #[test]
    fn ready_jobs_go_oldest_first_under_priority_and_by_completion_under_fifo() {
        let mut sched = parked_three();
        sched.access_completed(0, 200); // arrived at 30
        sched.access_completed(2, 210); // arrived at 20
        sched.access_completed(1, 220); // arrived at 10
        assert_eq!(sched.state_counts()[..2], [0, 3]);
        assert_eq!(sched.ready_front(true), Some((1, 1, 220)));
        assert_eq!(sched.ready_front(false), Some((0, 1, 200)));
        assert_eq!(sched.take_ready(true), Some((1, 220)));
        // Worker 1 is running now: stale in the completion order, skipped there.
        assert_eq!(sched.take_ready(false), Some((0, 200)));
        assert_eq!(
            sched.state_counts()[..2],
            [0, 1],
            "exact despite stale entries"
        );
        assert_eq!(sched.ready_front(true), Some((2, 1, 210)));
        assert_eq!(sched.ready_front(false), Some((2, 1, 210)));
        assert_eq!(sched.take_ready(true), Some((2, 210)));
        assert_eq!(sched.ready_front(true), None);
        assert_eq!(sched.ready_front(false), None);
        assert_eq!(sched.pending_live, 0);
        assert_eq!(sched.ready_live, 0);
    }

    /// Mutation caught: a ready job not yet complete (one of two accesses back) offered.
    #[test]
    fn a_job_is_ready_only_when_every_access_is_back() {
        let mut sched = Sched::new(2, 4);
        sched.workers[0].status = Status::Running;
        sched.park(0, 2, 5);
        sched.access_completed(0, 6);
        assert_eq!(sched.ready_front(true), None);
        sched.access_completed(0, 7);
        assert_eq!(sched.ready_front(true), Some((0, 1, 7)));
    }
}
