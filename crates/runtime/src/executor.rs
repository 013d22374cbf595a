//! The per-core executor: a pool of user-level threads (stackful coroutines) and the scheduling
//! loop that runs them, rings the device doorbell once per iteration and reaps completions.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use crossbeam_queue::ArrayQueue;
use tamer_device::{now_ns, Arena, Device};

use crate::core::{Core, CoreStats, Status, WorkerId};
use crate::gauge::CoreGauge;
use crate::poller::PollerSlot;
use crate::sched::{decide, Decision, Policy};
use crate::{Job, Poller, RuntimeConfig};

/// Why a user-level thread gave the core back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Its job finished; the thread is free for another.
    Done,
    /// It parked itself on device accesses (already in the pending queue).
    Park,
    /// It yielded (already in the runnable queue).
    Yield,
    /// It sleeps (already in the timer heap).
    Sleep,
    /// It waits for a word to change (already in the watch list).
    Watch,
}

pub(crate) type WorkerYielder = Yielder<Option<Job>, Suspend>;
type Worker = Coroutine<Option<Job>, Suspend, (), DefaultStack>;

thread_local! {
    /// The core whose executor runs on this OS thread (null outside `Executor::run*`).
    static CORE: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
    /// The yielder of the user-level thread running now (null on the executor's own stack).
    static YIELDER: Cell<*const WorkerYielder> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with the current core, or returns `None` outside a user-level thread.
pub(crate) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    let ptr = CORE.with(Cell::get);
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the pointer is set by `Executor::run_loop` from an `Rc<Core>` the executor keeps
    // alive for as long as the pointer is set, and `Core` is only ever used through `&Core`.
    Some(f(unsafe { &*ptr }))
}

/// Switches from the running user-level thread back to its executor.
pub(crate) fn suspend(reason: Suspend) {
    let yielder = YIELDER.with(Cell::get);
    assert!(
        !yielder.is_null(),
        "suspend called outside a user-level thread"
    );
    // SAFETY: the yielder belongs to the coroutine running on this stack; it lives as long as
    // the coroutine, which is running (we are on its stack).
    let next = unsafe { &*yielder }.suspend(reason);
    // Other threads ran in between and replaced the pointer: restore ours.
    YIELDER.with(|y| y.set(yielder));
    debug_assert!(
        next.is_none(),
        "a suspended thread was resumed with a new job"
    );
}

/// Puts back the core pointer a run loop replaced, when the loop ends or unwinds.
struct RestoreCore(*const Core);

impl Drop for RestoreCore {
    fn drop(&mut self) {
        CORE.with(|c| c.set(self.0));
    }
}

/// Most runs per pass of the loop (between refills of the local queue and timer checks).
const BATCH_RUNS: usize = 16;

/// Longest idle wait for the device when only this core's queues feed it.
const IDLE_WAIT_NS: u64 = 1_000_000;
/// How long an idle core parks (or waits in the poller) before it looks again: only bounds a
/// missed wake-up (spawns and shutdown wake it).
const IDLE_PARK_NS: u64 = 10_000_000;
/// Longest idle wait when a shared queue feeds the core: bounds how long a new job can sit
/// there while this core waits for the device.
const IDLE_WAIT_SHARED_NS: u64 = 20_000;
/// Longest idle wait for the device while a thread watches a word (another core may change
/// it at any time).
const IDLE_WAIT_WATCH_NS: u64 = 5_000;

/// How much earlier than its next timer a core sleeping in the OS asks to be woken: a parked
/// OS thread can resume tens of µs late (more so when virtualized), and the rest of the wait
/// is spun.
const TIMER_SLEEP_MARGIN_NS: u64 = 50_000;
/// Longest OS sleep for a timer (bounds how late a missed unpark is noticed).
const TIMER_SLEEP_MAX_NS: u64 = 10_000_000;

/// What a run loop stops on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Until {
    /// No work left on this core and nothing in the shared queues.
    Idle,
    /// The shutdown flag is set and no work is left.
    Shutdown,
}

/// The run loop's timestamps, kept across its passes.
struct LoopClocks {
    /// When the core found nothing at all to do (for the spin before parking).
    idle_since_ns: Option<u64>,
    /// When the core began waiting for its device with nothing runnable (for the spin before
    /// blocking in the kernel).
    device_wait_since_ns: Option<u64>,
    /// When the core last saw a job start or a device completion (checked on the idle path
    /// only): what a timer-woken background thread (a store's cleaner finding nothing to do)
    /// does in between does not count.
    last_activity_ns: u64,
    /// [`Executor::activity_count`] as of `last_activity_ns`.
    activity_seen: u64,
    /// When the core began waiting with work outstanding and nothing runnable (for
    /// `CoreStats::waiting_ns`).
    waiting_since_ns: Option<u64>,
}

/// One core's scheduler and its user-level threads.
///
/// ```
/// use std::sync::Arc;
/// use tamer_device::{Arena, EmulatedDevice, EmulatorConfig, IoRequest};
/// use tamer_runtime::{io, Executor, RuntimeConfig};
///
/// let arena = Arc::new(Arena::new(4).unwrap());
/// let model = EmulatorConfig::with_latency_ns(2_000).build().unwrap();
/// let device = Box::new(EmulatedDevice::new(model, arena.clone()));
/// let mut executor = Executor::new(0, RuntimeConfig::with_threads(4), device, arena).unwrap();
/// for frame in 0..4u32 {
///     executor.spawn(move || {
///         io::read(u64::from(frame) * 4096, frame, 1).unwrap();
///     }).unwrap();
/// }
/// executor.run_until_idle();
/// assert_eq!(executor.stats().jobs_completed, 4);
/// ```
pub struct Executor {
    core: Rc<Core>,
    workers: Vec<Worker>,
    global: Option<Arc<ArrayQueue<Job>>>,
    inbox: Option<Arc<ArrayQueue<Job>>>,
    /// Where this core publishes its gauges (when a `Runtime` runs it).
    gauge: Option<Arc<CoreGauge>>,
    /// Threads run since the doorbell was last rung by the loop.
    runs_since_doorbell: usize,
    /// The runtime's poller slot (when a `Runtime` runs it), the poller as last read from it
    /// and the slot's epoch then.
    poller_slot: Option<Arc<PollerSlot>>,
    poller: Option<Arc<dyn Poller>>,
    poller_epoch: u64,
}

impl Executor {
    /// An executor for core `id` with `config.threads_per_core` user-level threads (stacks are
    /// allocated here, not later).
    pub fn new(
        id: usize,
        config: RuntimeConfig,
        device: Box<dyn Device>,
        arena: Arc<Arena>,
    ) -> Result<Self, String> {
        config.validate()?;
        let threads = config.threads_per_core;
        let stack_bytes = config.stack_bytes;
        let core = Rc::new(Core::new(id, config, device, arena));
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let stack = DefaultStack::new(stack_bytes)
                .map_err(|err| format!("allocating a {stack_bytes}-byte stack: {err}"))?;
            workers.push(Coroutine::with_stack(stack, worker_body));
        }
        Ok(Self {
            core,
            workers,
            global: None,
            inbox: None,
            gauge: None,
            runs_since_doorbell: 0,
            poller_slot: None,
            poller: None,
            poller_epoch: 0,
        })
    }

    /// Feeds this executor from the shared job queue and its own inbox.
    pub(crate) fn attach(
        &mut self,
        global: Arc<ArrayQueue<Job>>,
        inbox: Arc<ArrayQueue<Job>>,
        gauge: Arc<CoreGauge>,
        poller: Arc<PollerSlot>,
    ) {
        self.global = Some(global);
        self.inbox = Some(inbox);
        self.gauge = Some(gauge);
        self.poller_slot = Some(poller);
    }

    /// Polls the runtime's poller (re-read from its slot after a change): events handled.
    fn poll_external(&mut self) -> usize {
        let Some(slot) = &self.poller_slot else {
            return 0;
        };
        let epoch = slot.epoch();
        if epoch != self.poller_epoch {
            self.poller = slot.get();
            self.poller_epoch = epoch;
        }
        match &self.poller {
            Some(poller) => poller.poll(),
            None => 0,
        }
    }

    /// Blocks in the poller for at most `timeout_ns` instead of parking the OS thread, so
    /// that its events wake this core; `false` when there is none or another core waits in it.
    fn wait_external(&self, timeout_ns: u64) -> bool {
        let Some(poller) = &self.poller else {
            return false;
        };
        // Both callers wait only with nothing runnable, no access in flight and no watch: a
        // job queued since is the only thing that ends the idleness (timers end the wait).
        let still_idle = || self.shared_queues_empty() && self.core.sched.borrow().local.is_empty();
        poller.wait(timeout_ns, &still_idle)
    }

    fn publish(&self) {
        if let Some(gauge) = &self.gauge {
            let policy = crate::Policy::from_code(gauge.policy.load(Ordering::Relaxed));
            self.core.policy.set(policy);
            let in_flight = self.core.device.borrow().in_flight();
            gauge.device_in_flight.store(in_flight, Ordering::Relaxed);
            let states = self.core.sched.borrow().state_counts();
            for (slot, value) in gauge.threads.iter().zip(states) {
                slot.store(value, Ordering::Relaxed);
            }
            if gauge.stats_wanted.load(Ordering::Relaxed)
                && gauge.stats_wanted.swap(false, Ordering::AcqRel)
            {
                let snapshot = self.stats();
                *gauge.stats.lock().unwrap_or_else(|p| p.into_inner()) = Some(snapshot);
            }
        }
    }

    /// Queues a job on this core's local queue. Fails (returning the job) when the queue holds
    /// `config.local_queue` jobs.
    pub fn spawn(&mut self, f: impl FnOnce() + Send + 'static) -> Result<(), Job> {
        self.spawn_job(Job::new(f))
    }

    /// As [`Executor::spawn`], for a job already built.
    pub fn spawn_job(&mut self, job: Job) -> Result<(), Job> {
        let mut sched = self.core.sched.borrow_mut();
        if sched.local.len() >= self.core.config.local_queue {
            return Err(job);
        }
        sched.local.push_back(job);
        Ok(())
    }

    /// Runs until no job is queued, running, parked or sleeping on this core, and the shared
    /// queues (if attached) are empty.
    pub fn run_until_idle(&mut self) {
        self.run_loop(Until::Idle, None);
    }

    /// Runs jobs from `jobs` (and this core's queues) until `stop` is set and no work is left.
    pub(crate) fn run_until_shutdown(&mut self, stop: &AtomicBool) {
        self.run_loop(Until::Shutdown, Some(stop));
    }

    /// Counters so far.
    pub fn stats(&self) -> CoreStats {
        let mut stats = self.core.stats.borrow().clone();
        stats.max_pending_seen = self.core.sched.borrow().max_pending_seen;
        stats.aging_threshold_ns = self.core.aging_ns();
        stats.avg_device_latency_ns = self.core.avg_latency_ns();
        stats.cpu_ns = thread_cpu_ns();
        stats.system_cpu_ns = thread_system_cpu_ns();
        stats
    }

    /// Device counters so far.
    pub fn device_stats(&self) -> tamer_device::DeviceStats {
        self.core.device.borrow().stats().clone()
    }

    /// The device's short name (`uring`, `emulated`, `sync`).
    pub fn device_name(&self) -> &'static str {
        self.core.device.borrow().name()
    }

    /// The running average device latency (doorbell to reap, weight 1/8).
    pub fn avg_device_latency_ns(&self) -> u64 {
        self.core.avg_latency_ns()
    }

    /// The threshold aging compares against: the device's service time
    /// ([`crate::sched::ServiceTime`]).
    pub fn aging_threshold_ns(&self) -> u64 {
        self.core.aging_ns()
    }

    fn refill(&self) {
        let mut sched = self.core.sched.borrow_mut();
        let cap = self.core.config.local_queue;
        for queue in [&self.inbox, &self.global].into_iter().flatten() {
            while sched.local.len() < cap {
                match queue.pop() {
                    Some(job) => sched.local.push_back(job),
                    None => break,
                }
            }
        }
    }

    /// Jobs started plus device completions so far: it changes whenever the core does work
    /// that came from outside (a timer-woken thread that finds nothing to do leaves it).
    fn activity_count(&self) -> u64 {
        self.core.stats.borrow().jobs_started + self.core.device_completed()
    }

    fn has_work(&self) -> bool {
        let sched = self.core.sched.borrow();
        let busy = sched.idle.len() < sched.workers.len();
        busy || !sched.local.is_empty()
    }

    fn shared_queues_empty(&self) -> bool {
        [&self.inbox, &self.global]
            .into_iter()
            .flatten()
            .all(|q| q.is_empty())
    }

    fn run_loop(&mut self, until: Until, stop: Option<&AtomicBool>) {
        // Restored on every exit, unwinding included: a pointer left behind would dangle once
        // the executor is dropped.
        let _restore = RestoreCore(CORE.with(|c| c.replace(Rc::as_ptr(&self.core))));
        let mut clocks = LoopClocks {
            idle_since_ns: None,
            device_wait_since_ns: None,
            last_activity_ns: self.core.read_clock(),
            activity_seen: self.activity_count(),
            waiting_since_ns: None,
        };
        loop {
            self.core.read_clock();
            let polled = self.poll_external();
            self.refill();
            self.expire_timers();
            self.check_watches();
            let ran = self.run_batch();
            self.publish();
            if ran > 0 || polled > 0 || self.core.reap() > 0 {
                clocks.idle_since_ns = None;
                clocks.device_wait_since_ns = None;
                self.end_waiting(&mut clocks.waiting_since_ns);
                continue;
            }
            self.runs_since_doorbell = 0;
            if self.has_work() {
                clocks.idle_since_ns = None;
                self.wait_with_work(&mut clocks);
                continue;
            }
            self.end_waiting(&mut clocks.waiting_since_ns);
            self.core.ring_doorbell();
            if !self.shared_queues_empty() {
                continue;
            }
            if until == Until::Idle || stop.is_some_and(|s| s.load(Ordering::Acquire)) {
                break;
            }
            self.wait_without_work(&mut clocks.idle_since_ns);
        }
    }

    /// A pass with work outstanding (threads parked, sleeping or watching) and nothing
    /// runnable: sleep in the OS for a far timer, spin on the completion queue, or block in
    /// the device for a completion, in that order of preference.
    #[inline]
    fn wait_with_work(&mut self, clocks: &mut LoopClocks) {
        clocks.waiting_since_ns.get_or_insert(self.core.clock());
        let activity = self.activity_count();
        if activity != clocks.activity_seen {
            clocks.activity_seen = activity;
            clocks.last_activity_ns = self.core.clock();
        }
        let quiet_ns = self.core.clock().saturating_sub(clocks.last_activity_ns);
        if let Some(sleep_ns) = self.timer_sleep_ns(quiet_ns) {
            // Only timers are pending, the next is far, and no job arrived and no access
            // completed for `idle_spin_ns`: sleep in the OS instead of spinning a core away
            // (an idle store's cleaner wakes every few ms). A spawn unparks the cores it
            // needs (`cores_to_wake`: the spawner's own next pass takes a lone job), so new
            // jobs end the sleep.
            self.core.stats.borrow_mut().timer_sleeps += 1;
            if !self.wait_external(sleep_ns) {
                std::thread::park_timeout(std::time::Duration::from_nanos(sleep_ns));
            }
            return;
        }
        if self.spin_for_device(&mut clocks.device_wait_since_ns) {
            return;
        }
        self.block_for_device();
    }

    /// With [`crate::IdleMode::Block`] and accesses in flight, polls the completion queue
    /// (one spin) while the device wait that began at `since_ns` is younger than
    /// `idle_spin_ns`: a blocked thread's wake-up (an interrupt, a halted CPU when
    /// virtualized) costs more than a flash read. `true` when it spun.
    #[inline]
    fn spin_for_device(&mut self, since_ns: &mut Option<u64>) -> bool {
        if self.core.config.idle != crate::IdleMode::Block || self.core.device_in_flight() == 0 {
            return false;
        }
        let now_ns = self.core.read_clock();
        let since_ns = *since_ns.get_or_insert(now_ns);
        if now_ns.saturating_sub(since_ns) >= self.core.config.idle_spin_ns {
            return false;
        }
        self.core.stats.borrow_mut().device_waits += 1;
        self.core.ring_doorbell();
        std::hint::spin_loop();
        true
    }

    /// Nothing runnable: one wait rings the doorbell and blocks for a completion (or the next
    /// timer, or a bounded time so that new shared-queue jobs are seen).
    #[inline]
    fn block_for_device(&mut self) {
        let bound_ns = if !self.core.sched.borrow().watches.is_empty() {
            // A watched word is changed by another thread, not by this device.
            IDLE_WAIT_WATCH_NS
        } else if self.global.is_some() {
            IDLE_WAIT_SHARED_NS
        } else {
            IDLE_WAIT_NS
        };
        let timeout_ns = self.next_timer_in_ns().unwrap_or(bound_ns).min(bound_ns);
        self.core.wait_device(timeout_ns.max(1));
        self.publish();
    }

    /// A pass with no work at all, waiting for shutdown or new jobs: spin a while before
    /// parking (bounded by `idle_spin_ns`, counted from `idle_since_ns`; forever when
    /// polling), since a parked thread wakes slowly.
    #[inline]
    fn wait_without_work(&self, idle_since_ns: &mut Option<u64>) {
        let now_ns = self.core.read_clock();
        let since_ns = *idle_since_ns.get_or_insert(now_ns);
        if self.core.config.idle == crate::IdleMode::Poll
            || now_ns.saturating_sub(since_ns)
                < idle_spin_without_work_ns(self.core.id, self.core.config.idle_spin_ns)
        {
            std::hint::spin_loop();
            return;
        }
        // `Runtime::spawn` unparks the cores it needs (a lone job is left to the spawning
        // core; a backlog or a spawn from outside wakes others), and an unpark that comes
        // first makes this return at once, so the timeout only bounds a missed shutdown. The idle start is
        // kept: a timeout with still nothing to do parks again at once instead of spinning
        // `idle_spin_ns` anew (with a 10 ms spin, an idle core spun half the time).
        if !self.wait_external(IDLE_PARK_NS) {
            std::thread::park_timeout(std::time::Duration::from_nanos(IDLE_PARK_NS));
        }
    }

    /// Closes a waiting interval opened when the core found work but nothing runnable.
    fn end_waiting(&self, since_ns: &mut Option<u64>) {
        if let Some(since) = since_ns.take() {
            let waited = self.core.read_clock().saturating_sub(since);
            self.core.stats.borrow_mut().waiting_ns += waited;
        }
    }

    /// How long the core may sleep in the OS: some when polling is off, the core has seen no
    /// new job and no completion for `idle_spin_ns` (`quiet_ns`: it stays awake for the next
    /// request as an idle core does), nothing is in flight on the device, no thread watches a
    /// word (another core changes those without a message), and the next timer is more than
    /// the wake-up margin away (nearer ones are spun for, to keep them punctual). Threads
    /// parked for another reason, with no timer, keep the bounded device wait.
    fn timer_sleep_ns(&self, quiet_ns: u64) -> Option<u64> {
        if self.core.config.idle == crate::IdleMode::Poll
            || quiet_ns < self.core.config.idle_spin_ns
            || self.core.device_in_flight() > 0
            || !self.core.sched.borrow().watches.is_empty()
        {
            return None;
        }
        let next_ns = self.next_timer_in_ns()?;
        (next_ns > 2 * TIMER_SLEEP_MARGIN_NS)
            .then(|| (next_ns - TIMER_SLEEP_MARGIN_NS).min(TIMER_SLEEP_MAX_NS))
    }

    fn next_timer_in_ns(&self) -> Option<u64> {
        let sched = self.core.sched.borrow();
        let &std::cmp::Reverse((deadline, _)) = sched.timers.peek()?;
        Some(deadline.saturating_sub(self.core.read_clock()))
    }

    /// Makes runnable every watching thread whose word changed or whose deadline passed.
    /// Bounded: at most one watch per thread.
    fn check_watches(&self) {
        let mut sched = self.core.sched.borrow_mut();
        if sched.watches.is_empty() {
            return;
        }
        let now = self.core.clock();
        let mut i = 0;
        while i < sched.watches.len() {
            let watch = sched.watches[i];
            // SAFETY: the watching thread keeps the word alive until it resumes (the contract
            // of `thread::wait_while_eq`), and it resumes only after this entry is removed.
            let current = unsafe { watch.word.load() };
            if current == watch.expected && now < watch.deadline_ns {
                i += 1;
                continue;
            }
            sched.watches.swap_remove(i);
            let state = &mut sched.workers[watch.worker as usize];
            debug_assert_eq!(state.status, Status::Watching);
            state.status = Status::Runnable;
            sched.runnable.push_back((watch.worker, now));
        }
    }

    fn expire_timers(&self) {
        let mut sched = self.core.sched.borrow_mut();
        if sched.timers.is_empty() {
            return;
        }
        let now = self.core.read_clock();
        while let Some(&std::cmp::Reverse((deadline, worker))) = sched.timers.peek() {
            if deadline > now {
                break;
            }
            sched.timers.pop();
            debug_assert_eq!(sched.workers[worker as usize].status, Status::Sleeping);
            sched.workers[worker as usize].status = Status::Runnable;
            sched.runnable.push_back((worker, deadline));
        }
    }

    /// Runs up to [`BATCH_RUNS`] decisions, ringing the doorbell of a syscall device after every
    /// `runs_per_iteration` runs (a cheap device's doorbell is rung at every submit) and reaping
    /// after every run. Returns how many ran.
    fn run_batch(&mut self) -> usize {
        let limit = BATCH_RUNS;
        let mut ran = 0;
        while ran < limit {
            if ran > 0 && self.global.is_some() {
                // New jobs in the shared queues, and the poller's events, are seen at every
                // decision (a pop from an empty ArrayQueue is two atomic loads, a poll with
                // nothing new a try-lock and a few loads), not only once per pass: a pass of
                // long jobs would otherwise leave requests unread in their sockets.
                self.poll_external();
                self.refill();
            }
            let decision = {
                let mut sched = self.core.sched.borrow_mut();
                // The present as of the last reap (after every run) or the pass's start: the
                // reap read the clock to find due completions, and aging uses that reading.
                let now = self.core.clock();
                let policy = self.core.policy.get();
                let view = sched.view(
                    now,
                    self.core.aging_ns(),
                    self.core.config.max_pending,
                    policy == Policy::PriorityAging,
                );
                let decision = decide(policy, &view);
                let jobs_queued = !sched.local.is_empty();
                drop(sched);
                self.count_decision(decision, jobs_queued);
                decision
            };
            match decision {
                Decision::StartNew => self.start_new(),
                Decision::ResumeHead { forced } => self.resume_head(forced),
                Decision::ResumeReady => self.resume_ready(),
                Decision::ResumeRunnable => self.resume_runnable(),
                Decision::WaitDevice | Decision::Idle => break,
            }
            ran += 1;
            if !self.core.doorbell_is_cheap() {
                self.runs_since_doorbell += 1;
                if self.runs_since_doorbell >= self.core.config.runs_per_iteration {
                    // At most one syscall per `runs_per_iteration` runs.
                    self.core.ring_doorbell();
                    self.runs_since_doorbell = 0;
                }
            }
            // Fresh completions make the next decision right (aging needs to know which jobs
            // are ready); reaping costs no syscall.
            self.core.reap();
        }
        ran
    }

    fn count_decision(&self, decision: Decision, jobs_queued: bool) {
        let kind = match decision {
            Decision::StartNew => 0,
            Decision::ResumeHead { .. } => 1,
            Decision::ResumeReady => 2,
            Decision::ResumeRunnable => 3,
            Decision::WaitDevice => 4,
            Decision::Idle => 5,
        };
        let mut stats = self.core.stats.borrow_mut();
        stats.decisions[kind] += 1;
        if decision == Decision::WaitDevice && jobs_queued {
            stats.waits_with_jobs_queued += 1;
        }
    }

    fn start_new(&mut self) {
        let (worker, job) = {
            let mut sched = self.core.sched.borrow_mut();
            let worker = sched.idle.pop().expect("StartNew with no idle thread");
            let job = sched.local.pop_front().expect("StartNew with no job");
            let state = &mut sched.workers[worker as usize];
            state.status = Status::Running;
            state.job_enqueued_ns = job.enqueued_ns;
            state.waits = crate::waits::Waits::default();
            state.urgent = false;
            (worker, job)
        };
        self.core.stats.borrow_mut().jobs_started += 1;
        self.switch_to(worker, Some(job));
    }

    fn resume_head(&mut self, forced: bool) {
        let worker = {
            let mut sched = self.core.sched.borrow_mut();
            let (worker, _, _) = sched
                .pending
                .pop_front()
                .expect("ResumeHead with no pending job");
            sched.unpark(worker);
            sched.workers[worker as usize].force_progress = forced;
            worker
        };
        if forced {
            self.core.stats.borrow_mut().forced_progress += 1;
        }
        self.switch_to(worker, None);
    }

    fn resume_ready(&mut self) {
        let (worker, ready_at_ns) = {
            let oldest_first = self.core.policy.get() == Policy::PriorityAging;
            self.core
                .sched
                .borrow_mut()
                .take_ready(oldest_first)
                .expect("ResumeReady with no ready job")
        };
        // A fresh reading: the cached one is not refreshed while nothing is in flight.
        let waited_ns = self.core.read_clock().saturating_sub(ready_at_ns);
        self.core
            .stats
            .borrow_mut()
            .ready_wait_ns
            .saturating_record(waited_ns.max(1));
        self.switch_to(worker, None);
    }

    fn resume_runnable(&mut self) {
        let (worker, runnable_at_ns) = {
            let mut sched = self.core.sched.borrow_mut();
            let (worker, runnable_at_ns) = sched
                .runnable
                .pop_front()
                .expect("ResumeRunnable with none");
            let state = &mut sched.workers[worker as usize];
            debug_assert_eq!(state.status, Status::Runnable);
            state.status = Status::Running;
            (worker, runnable_at_ns)
        };
        let waited_ns = self.core.read_clock().saturating_sub(runnable_at_ns);
        self.core
            .stats
            .borrow_mut()
            .runnable_wait_ns
            .saturating_record(waited_ns.max(1));
        self.switch_to(worker, None);
    }

    fn switch_to(&mut self, worker: WorkerId, job: Option<Job>) {
        self.core.stats.borrow_mut().switches += 1;
        self.core.current.set(Some(worker));
        let result = self.workers[worker as usize].resume(job);
        self.core.current.set(None);
        match result {
            CoroutineResult::Yield(Suspend::Done) => {
                let enqueued_ns = {
                    let mut sched = self.core.sched.borrow_mut();
                    let state = &mut sched.workers[worker as usize];
                    assert_eq!(
                        state.outstanding, 0,
                        "a job ended with device accesses outstanding"
                    );
                    state.status = Status::Idle;
                    state.force_progress = false;
                    let enqueued_ns = state.job_enqueued_ns;
                    sched.idle.push(worker);
                    enqueued_ns
                };
                let mut stats = self.core.stats.borrow_mut();
                stats.jobs_completed += 1;
                stats
                    .job_latency_ns
                    .saturating_record(now_ns().saturating_sub(enqueued_ns).max(1));
            }
            CoroutineResult::Yield(Suspend::Park) => self.core.stats.borrow_mut().parks += 1,
            CoroutineResult::Yield(Suspend::Yield) => self.core.stats.borrow_mut().yields += 1,
            CoroutineResult::Yield(Suspend::Sleep) | CoroutineResult::Yield(Suspend::Watch) => {}
            CoroutineResult::Return(()) => unreachable!("user-level threads never return"),
        }
    }
}

/// CPU time of the calling OS thread (user + system), in ns; 0 if the clock is unavailable.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Kernel CPU time of the calling OS thread (`getrusage(RUSAGE_THREAD)`), in ns; 0 if
/// unavailable.
fn thread_system_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_THREAD is valid on Linux.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_stime.tv_sec as u64 * 1_000_000_000 + usage.ru_stime.tv_usec as u64 * 1_000
}

/// The body of every user-level thread: run a job, report `Done`, wait for the next one.
fn worker_body(yielder: &WorkerYielder, first: Option<Job>) {
    let mut next = first;
    loop {
        if let Some(job) = next.take() {
            YIELDER.with(|y| y.set(yielder as *const _));
            if let Err(payload) = catch_unwind(AssertUnwindSafe(job.run)) {
                // The panic message went to stderr; the thread stays usable. A job that panics
                // while holding accesses leaks them, which the Done handler asserts against.
                let outstanding = with_core(|core| {
                    let worker = core.current.get()?;
                    core.stats.borrow_mut().jobs_panicked += 1;
                    Some(core.sched.borrow().workers[worker as usize].outstanding)
                })
                .flatten();
                let Some(outstanding) = outstanding else {
                    // No run loop is running this thread: this is not the job's panic but
                    // corosensei unwinding a suspended thread because its executor is being
                    // dropped. Let the unwind reach the coroutine's root.
                    std::panic::resume_unwind(payload);
                };
                assert_eq!(
                    outstanding, 0,
                    "a job panicked with device accesses in flight"
                );
            }
        }
        next = yielder.suspend(Suspend::Done);
    }
}

/// How long a core with no work at all spins before it parks: the whole `idle_spin_ns` on
/// core 0, which takes the network's events and most jobs; none on the others, which are
/// woken for a backlog ([`crate::runtime`]'s `cores_to_wake`) and otherwise only take CPU
/// from the clients and the kernel's network work on a machine with few CPUs.
pub(crate) fn idle_spin_without_work_ns(core: usize, idle_spin_ns: u64) -> u64 {
    if core == 0 {
        idle_spin_ns
    } else {
        0
    }
}
