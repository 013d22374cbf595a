//! All cores: one pinned executor per core, fed by one shared job queue (single-queue load
//! balancing, NeBuLa) and small per-core inboxes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_queue::ArrayQueue;
use tamer_device::{open_device, Arena, DeviceSpec, DeviceStats};

use crate::gauge::CoreGauge;
use crate::poller::PollerSlot;
use crate::{thread, CoreStats, Executor, Job, Policy, Poller, RuntimeConfig};

/// Why a job was not accepted.
#[derive(Debug)]
pub enum SpawnError {
    /// The queue is at its bound; the job is handed back (reject it upstream: a NACK).
    Full(Job),
    /// No such core.
    NoSuchCore(usize),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Full(_) => write!(f, "job queue full: shed load or retry later"),
            SpawnError::NoSuchCore(core) => write!(f, "no core {core}"),
        }
    }
}

impl std::error::Error for SpawnError {}

/// What one core reports when the runtime shuts down.
#[derive(Clone, Debug)]
pub struct CoreReport {
    /// The core's index.
    pub core: usize,
    /// Its scheduling counters.
    pub stats: CoreStats,
    /// Its device handle's counters.
    pub device: DeviceStats,
    /// Its device's short name (`uring`, `emulated`, `sync`).
    pub device_name: &'static str,
}

/// User-level threads by state and new jobs queued, over every core ([`Runtime::thread_states`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStates {
    /// Parked on device accesses still in flight.
    pub parked: usize,
    /// Parked, every access done: waiting for the core.
    pub ready: usize,
    /// Yielded, or woken by a timer or a watched word: waiting for the core.
    pub runnable: usize,
    /// Without a job.
    pub idle: usize,
    /// New jobs in the cores' local queues (not counting the shared queue).
    pub queued: usize,
}

struct Shared {
    global: Arc<ArrayQueue<Job>>,
    inboxes: Vec<Arc<ArrayQueue<Job>>>,
    gauges: Vec<Arc<CoreGauge>>,
    stop: AtomicBool,
    threads: Mutex<Vec<std::thread::Thread>>,
    /// The event source every core polls besides its device (the server's network).
    poller: Arc<PollerSlot>,
}

impl Shared {
    /// The queues, gauges and flags of `config.cores` cores, none started.
    fn new(config: &RuntimeConfig) -> Self {
        Self {
            global: Arc::new(ArrayQueue::new(config.global_queue)),
            inboxes: (0..config.cores)
                .map(|_| Arc::new(ArrayQueue::new(config.inbox_queue)))
                .collect(),
            gauges: (0..config.cores)
                .map(|_| {
                    let gauge = CoreGauge::default();
                    gauge.policy.store(config.policy.code(), Ordering::Relaxed);
                    Arc::new(gauge)
                })
                .collect(),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            poller: Arc::default(),
        }
    }
}

/// What one core's thread starts from.
struct CoreStart {
    /// The core's index.
    core: usize,
    /// The CPU it is pinned to (when `config.pin`).
    cpu: usize,
    shared: Arc<Shared>,
    config: RuntimeConfig,
    spec: DeviceSpec,
    arena: Arc<Arena>,
    /// Where it reports whether its device and executor were set up.
    ready: std::sync::mpsc::Sender<Result<(), String>>,
}

/// One core's thread: opens its device handle and executor, reports the start-up, runs
/// until shutdown and returns the core's counters.
fn run_core(start: CoreStart) -> Result<CoreReport, String> {
    let CoreStart {
        core,
        cpu,
        shared,
        config,
        spec,
        arena,
        ready,
    } = start;
    if config.pin {
        pin_to_cpu(cpu);
    }
    let setup = open_device(&spec, arena.clone(), core)
        .map_err(|err| err.to_string())
        .and_then(|device| Executor::new(core, config, device, arena));
    let mut executor = match setup {
        Ok(executor) => {
            let _ = ready.send(Ok(()));
            executor
        }
        Err(err) => {
            let _ = ready.send(Err(err.clone()));
            return Err(err);
        }
    };
    executor.attach(
        shared.global.clone(),
        shared.inboxes[core].clone(),
        shared.gauges[core].clone(),
        shared.poller.clone(),
    );
    executor.run_until_shutdown(&shared.stop);
    Ok(CoreReport {
        core,
        stats: executor.stats(),
        device_name: executor.device_name(),
        device: executor.device_stats(),
    })
}

/// A running set of executors.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use tamer_device::{Arena, DeviceSpec, EmulatorConfig};
/// use tamer_runtime::{Runtime, RuntimeConfig};
///
/// let arena = Arc::new(Arena::new(1).unwrap());
/// let model = EmulatorConfig::with_latency_ns(1_000).build().unwrap();
/// let config = RuntimeConfig { cores: 2, pin: false, ..RuntimeConfig::with_threads(8) };
/// let runtime = Runtime::start(config, DeviceSpec::Emulated { model }, arena).unwrap();
/// let counter = Arc::new(AtomicU64::new(0));
/// for _ in 0..100 {
///     let counter = counter.clone();
///     runtime.spawn(move || { counter.fetch_add(1, Ordering::Relaxed); }).unwrap();
/// }
/// let reports = runtime.shutdown();
/// assert_eq!(counter.load(Ordering::Relaxed), 100);
/// assert_eq!(reports.iter().map(|r| r.stats.jobs_completed).sum::<u64>(), 100);
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<Result<CoreReport, String>>>,
}

impl Runtime {
    /// Starts `config.cores` executors, each with its own handle on the device in `spec`.
    pub fn start(
        config: RuntimeConfig,
        spec: DeviceSpec,
        arena: Arc<Arena>,
    ) -> Result<Self, String> {
        config.validate()?;
        let shared = Arc::new(Shared::new(&config));
        let cpus = online_cpus();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let mut handles = Vec::with_capacity(config.cores);
        for core in 0..config.cores {
            let start = CoreStart {
                core,
                cpu: core % cpus,
                shared: shared.clone(),
                config: config.clone(),
                spec: spec.clone(),
                arena: arena.clone(),
                ready: ready_tx.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("tamer-core-{core}"))
                .spawn(move || run_core(start))
                .map_err(|err| format!("spawning core {core}: {err}"))?;
            shared
                .threads
                .lock()
                .expect("not poisoned")
                .push(handle.thread().clone());
            handles.push(handle);
        }
        drop(ready_tx);
        Self { shared, handles }.ready(&ready_rx, config.cores)
    }

    /// Waits for each of the `cores` core threads to report its start-up; the first failure
    /// shuts the others down and is returned.
    fn ready(
        self,
        ready: &std::sync::mpsc::Receiver<Result<(), String>>,
        cores: usize,
    ) -> Result<Self, String> {
        for _ in 0..cores {
            match ready.recv() {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    self.shutdown();
                    return Err(err);
                }
                Err(_) => {
                    self.shutdown();
                    return Err("a core exited during start-up".into());
                }
            }
        }
        Ok(self)
    }

    /// Device accesses in flight on every core, as each core last published it (once per
    /// scheduling pass: at most a few µs old on a busy core). For sampling a queue depth.
    pub fn device_in_flight(&self) -> usize {
        self.shared
            .gauges
            .iter()
            .map(|g| g.device_in_flight.load(Ordering::Relaxed))
            .sum()
    }

    /// A snapshot of every core's counters (index = core), taken by each core at its next
    /// scheduling pass. A core that does not answer within `timeout` (it is stuck in a long
    /// job) fails the call with a message naming it.
    pub fn core_stats(&self, timeout: std::time::Duration) -> Result<Vec<CoreStats>, String> {
        for gauge in &self.shared.gauges {
            *gauge.stats.lock().expect("not poisoned") = None;
            gauge.stats_wanted.store(true, Ordering::Release);
        }
        self.wake();
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::with_capacity(self.shared.gauges.len());
        for (core, gauge) in self.shared.gauges.iter().enumerate() {
            loop {
                if let Some(stats) = gauge.stats.lock().expect("not poisoned").take() {
                    out.push(stats);
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "core {core} did not publish its counters in {timeout:?}"
                    ));
                }
                // A busy core answers within one scheduling pass (µs): spin rather than sleep.
                std::thread::yield_now();
            }
        }
        Ok(out)
    }

    /// Switches every core to `policy` from its next scheduling pass on (a few µs), without
    /// stopping anything: threads parked or queued keep their places and are served by the new
    /// order. For side-by-side comparisons of policies on one warm store.
    pub fn set_policy(&self, policy: Policy) {
        for gauge in &self.shared.gauges {
            gauge.policy.store(policy.code(), Ordering::Release);
        }
    }

    /// The policy the cores were last set to.
    pub fn policy(&self) -> Policy {
        Policy::from_code(self.shared.gauges[0].policy.load(Ordering::Acquire))
    }

    /// Every core's threads by state, summed, as each core last published it (once per
    /// scheduling pass): for sampling what the scheduler holds.
    pub fn thread_states(&self) -> ThreadStates {
        let mut sum = [0usize; 5];
        for gauge in &self.shared.gauges {
            for (total, value) in sum.iter_mut().zip(&gauge.threads) {
                *total += value.load(Ordering::Relaxed);
            }
        }
        ThreadStates {
            parked: sum[0],
            ready: sum[1],
            runnable: sum[2],
            idle: sum[3],
            queued: sum[4],
        }
    }

    /// Queues `f` on the shared queue; any core may run it.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) -> Result<(), SpawnError> {
        self.spawn_job(Job::new(f))
    }

    /// As [`Runtime::spawn`] for a built job.
    pub fn spawn_job(&self, job: Job) -> Result<(), SpawnError> {
        self.shared.global.push(job).map_err(SpawnError::Full)?;
        let spawner = thread::core_id();
        let wake = cores_to_wake(spawner.is_some(), self.shared.global.len(), self.cores());
        if wake > 0 {
            self.wake_others(spawner, wake);
        }
        Ok(())
    }

    /// Unparks up to `count` cores other than `spawner` (every one's parking token is set, so
    /// one that is running skips its next park), and ends a wait in the poller.
    fn wake_others(&self, spawner: Option<usize>, count: usize) {
        let threads = self.shared.threads.lock().expect("not poisoned");
        let others = threads
            .iter()
            .enumerate()
            .filter(|&(core, _)| Some(core) != spawner);
        for (_, thread) in others.take(count) {
            thread.unpark();
        }
        drop(threads);
        self.shared.poller.wake();
    }

    /// Queues `f` on `core`'s inbox.
    pub fn spawn_on(
        &self,
        core: usize,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<(), SpawnError> {
        let inbox = self
            .shared
            .inboxes
            .get(core)
            .ok_or(SpawnError::NoSuchCore(core))?;
        inbox.push(Job::new(f)).map_err(SpawnError::Full)?;
        if let Some(thread) = self.shared.threads.lock().expect("not poisoned").get(core) {
            thread.unpark();
        }
        // The core may be the one waiting in the poller.
        self.shared.poller.wake();
        Ok(())
    }

    /// Makes every core poll `poller` at every scheduling decision (and the idle core wait in
    /// it). Fails, handing it back, when a poller is already set.
    pub fn set_poller(&self, poller: Arc<dyn Poller>) -> Result<(), Arc<dyn Poller>> {
        self.shared.poller.install(poller)
    }

    /// Removes `poller` if it is the one set (else changes nothing). A core picks the change
    /// up at its next pass (a parked core within 10 ms, or at once after a spawn), so the
    /// poller may still be called a little after this returns.
    pub fn remove_poller(&self, poller: &Arc<dyn Poller>) {
        self.shared.poller.remove(poller);
    }

    /// Executors (cores) it runs.
    pub fn cores(&self) -> usize {
        self.shared.inboxes.len()
    }

    /// Jobs waiting in the shared queue.
    pub fn queued(&self) -> usize {
        self.shared.global.len()
    }

    /// Every core unparked and the poller's wait ended (shutdown, a poller change).
    fn wake(&self) {
        for thread in self.shared.threads.lock().expect("not poisoned").iter() {
            thread.unpark();
        }
        self.shared.poller.wake();
    }

    /// Lets every queued and running job finish, stops the executors and returns their reports.
    pub fn shutdown(self) -> Vec<CoreReport> {
        self.shared.stop.store(true, Ordering::Release);
        self.wake();
        let mut reports = Vec::new();
        for handle in self.handles {
            match handle.join() {
                Ok(Ok(report)) => reports.push(report),
                Ok(Err(err)) => tracing::warn!("core failed: {err}"),
                Err(_) => tracing::warn!("a core panicked"),
            }
        }
        reports
    }
}

/// CPUs online on the host. Unlike `std::thread::available_parallelism`, not narrowed by
/// the calling thread's affinity: a thread pinned to one CPU still sees every CPU, so executors
/// started from it spread over all of them.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Pins the calling OS thread to `cpu`; a failure is logged, not fatal.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!(
                "could not pin to cpu {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Cores a spawn wakes besides the spawner's own (which takes the job at its next pass): a
/// core that spawns runs its job itself, so others are woken only for a backlog (`queued`
/// jobs, this one included, beyond one); a spawn from outside the runtime wakes a core for
/// each queued job. At most every other core. Waking a core that then finds nothing costs a
/// syscall and a spinning CPU (on a 2-vCPU machine, the CPU of the clients and the kernel's
/// network work): `--cores 2` served a third of `--cores 1`'s unpipelined GETs while every
/// spawn woke every core.
pub(crate) fn cores_to_wake(spawner_is_core: bool, queued: usize, cores: usize) -> usize {
    if spawner_is_core {
        queued.saturating_sub(1).min(cores.saturating_sub(1))
    } else {
        queued.max(1).min(cores)
    }
}

#[cfg(test)]
mod tests {
    use super::cores_to_wake;

    /// Mutations caught: a core that spawns waking another for its own job (the rule that
    /// cost `--cores 2` two thirds of its unpipelined rate), a backlog left to one core, an
    /// outside spawn waking nobody (its job would wait for a core's park timeout), waking
    /// more cores than exist or the spawner itself.
    #[test]
    fn a_spawn_wakes_cores_only_for_work_the_spawner_cannot_take() {
        // (spawned by a core, jobs queued, cores, cores to wake, why)
        let cases = [
            (true, 1, 2, 0, "the spawner takes its own job"),
            (true, 2, 2, 1, "a backlog wakes the other core"),
            (true, 9, 2, 1, "never more than the other cores"),
            (true, 9, 1, 0, "one core: nobody else to wake"),
            (true, 3, 8, 2, "one core per job past the spawner's"),
            (false, 1, 2, 1, "an outside spawn wakes a core"),
            (false, 0, 2, 1, "taken already: one wake is harmless"),
            (false, 5, 2, 2, "every core for a backlog"),
            (false, 5, 1, 1, "the only core"),
        ];
        for (by_core, queued, cores, want, why) in cases {
            assert_eq!(cores_to_wake(by_core, queued, cores), want, "{why}");
        }
    }

    /// Mutations caught: core 0 parking at once (a parked poller core wakes slowly, the
    /// unpipelined rate falls), another core spinning with nothing to do.
    #[test]
    fn only_core_0_spins_before_it_parks() {
        use crate::executor::idle_spin_without_work_ns;
        assert_eq!(idle_spin_without_work_ns(0, 200_000), 200_000);
        assert_eq!(idle_spin_without_work_ns(1, 200_000), 0);
        assert_eq!(idle_spin_without_work_ns(7, 200_000), 0);
    }
}
