//! The runtime's poller (`Runtime::set_poller`): every core polls it, an idle core waits in it
//! and a spawn wakes that wait, and removing it stops the polls.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::spin_until;
use tamer_device::{Arena, DeviceSpec, EmulatorConfig};
use tamer_runtime::{Poller, Runtime, RuntimeConfig};

fn runtime(cores: usize) -> Runtime {
    let arena = Arc::new(Arena::new(16).unwrap());
    let model = EmulatorConfig::with_latency_ns(2_000)
        .capacity_bytes(1 << 20)
        .build()
        .unwrap();
    let config = RuntimeConfig {
        cores,
        pin: false,
        idle_spin_ns: 1_000,
        ..RuntimeConfig::with_threads(4)
    };
    Runtime::start(config, DeviceSpec::Emulated { model }, arena).unwrap()
}

/// A runtime of `cores` polling a new [`TestPoller`] (also returned as the runtime holds it).
fn runtime_polling(cores: usize) -> (Runtime, Arc<TestPoller>, Arc<dyn Poller>) {
    let rt = runtime(cores);
    let poller = Arc::new(TestPoller::default());
    let dynamic: Arc<dyn Poller> = poller.clone();
    assert!(rt.set_poller(dynamic.clone()).is_ok(), "no poller was set");
    (rt, poller, dynamic)
}

/// A poller that hands out `events` one per poll, and whose wait blocks until `wake`, with no
/// timeout of its own: a core that waits in it runs again only if something wakes it.
#[derive(Default)]
struct TestPoller {
    polls: AtomicU64,
    events: AtomicUsize,
    handled: AtomicU64,
    waits: AtomicU64,
    waiting: AtomicBool,
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Poller for TestPoller {
    fn poll(&self) -> usize {
        self.polls.fetch_add(1, Ordering::Relaxed);
        let taken = self
            .events
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if taken {
            self.handled.fetch_add(1, Ordering::Relaxed);
        }
        usize::from(taken)
    }

    fn wait(&self, _timeout_ns: u64, still_idle: &dyn Fn() -> bool) -> bool {
        if self.waiting.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let mut woken = self.woken.lock().unwrap();
        if still_idle() && self.events.load(Ordering::Acquire) == 0 {
            // Bounded only so that a failing test ends: 30 s.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !*woken && std::time::Instant::now() < deadline {
                woken = self
                    .signal
                    .wait_timeout(woken, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
        }
        *woken = false;
        self.waiting.store(false, Ordering::SeqCst);
        true
    }

    fn wake(&self) {
        *self.woken.lock().unwrap() = true;
        self.signal.notify_all();
    }
}

/// Mutation caught: the executor loop not calling `poll` (no poll is seen, no event handled).
#[test]
fn every_core_polls_and_handles_events() {
    let (rt, poller, dynamic) = runtime_polling(2);
    poller.events.store(100, Ordering::Release);
    poller.wake();
    assert!(spin_until(Duration::from_secs(10), || poller
        .handled
        .load(Ordering::Relaxed)
        == 100));
    rt.remove_poller(&dynamic);
    rt.shutdown();
}

/// Mutations caught: an idle core that parks instead of waiting in the poller (no wait is
/// counted), and a spawn that does not wake the poller (the waiting core never runs the job:
/// the test poller's wait has no timeout).
#[test]
fn an_idle_core_waits_in_the_poller_and_a_spawn_wakes_it() {
    let (rt, poller, dynamic) = runtime_polling(1);
    assert!(spin_until(Duration::from_secs(10), || poller
        .waiting
        .load(Ordering::SeqCst)));
    for round in 0..20u64 {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        rt.spawn(move || flag.store(true, Ordering::Release))
            .unwrap();
        assert!(
            spin_until(Duration::from_secs(10), || ran.load(Ordering::Acquire)),
            "round {round}: the job never ran"
        );
        // Back to waiting before the next spawn.
        assert!(spin_until(Duration::from_secs(10), || poller
            .waiting
            .load(Ordering::SeqCst)));
    }
    assert!(poller.waits.load(Ordering::Relaxed) >= 20);
    rt.remove_poller(&dynamic);
    rt.shutdown();
}

/// Mutations caught: `remove_poller` that leaves the cores polling the old poller (the
/// epoch not bumped), a second poller replacing the first, a stranger's removal taking it.
#[test]
fn removing_the_poller_stops_the_polls() {
    let (rt, poller, dynamic) = runtime_polling(2);
    assert!(spin_until(Duration::from_secs(10), || poller
        .polls
        .load(Ordering::Relaxed)
        > 0));
    // One poller at a time; only the one set is removed.
    let other: Arc<dyn Poller> = Arc::new(TestPoller::default());
    assert!(rt.set_poller(other.clone()).is_err());
    rt.remove_poller(&other);
    let polls = poller.polls.load(Ordering::Relaxed);
    assert!(spin_until(Duration::from_secs(10), || poller
        .polls
        .load(Ordering::Relaxed)
        > polls));
    rt.remove_poller(&dynamic);
    // Every core passes again: jobs on both, then the parked ones' bounded park (10 ms).
    for _ in 0..8 {
        rt.spawn(|| {}).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let polls = poller.polls.load(Ordering::Relaxed);
    for _ in 0..8 {
        rt.spawn(|| {}).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(poller.polls.load(Ordering::Relaxed), polls);
    rt.shutdown();
}
