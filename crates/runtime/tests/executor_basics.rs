//! One executor on the emulated device: jobs run, device accesses park and overlap, yields
//! interleave, sleeps keep their deadlines, panics and device errors stay inside their job, and
//! the non-parking wait modes do not park.

// A test reads as one scenario, from setup to check; splitting it would scatter the story.
#![allow(clippy::too_many_lines)]

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{emulated_executor, summary, Log};
use tamer_device::{now_ns, DeviceError, IoRequest, BLOCK_SIZE};
use tamer_runtime::io::{self, WaitMode};
use tamer_runtime::{thread, Policy, RuntimeConfig};

const BLOCK: u64 = BLOCK_SIZE as u64;

#[test]
fn jobs_run_on_user_threads() {
    let config = RuntimeConfig {
        local_queue: 100,
        ..RuntimeConfig::with_threads(8)
    };
    let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 8);
    let ran = Arc::new(AtomicUsize::new(0));
    let misplaced = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let (ran, misplaced) = (ran.clone(), misplaced.clone());
        executor
            .spawn(move || {
                if !thread::in_user_thread() || thread::core_id() != Some(0) {
                    misplaced.fetch_add(1, Ordering::SeqCst);
                }
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .expect("the local queue holds 100 jobs");
    }
    assert!(
        !thread::in_user_thread(),
        "the test thread is not a user-level thread"
    );
    executor.run_until_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    assert_eq!(
        misplaced.load(Ordering::SeqCst),
        0,
        "jobs must run on core 0's user threads"
    );
    let stats = executor.stats();
    assert_eq!(
        (
            stats.jobs_started,
            stats.jobs_completed,
            stats.jobs_panicked
        ),
        (100, 100, 0)
    );
    assert_eq!(stats.parks, 0, "no job touched the device");
    assert!(!thread::in_user_thread());
    assert_eq!(thread::core_id(), None, "no core outside run_until_idle");

    // The executor is reusable after it went idle.
    let ran2 = ran.clone();
    executor
        .spawn(move || {
            ran2.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    executor.run_until_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 101);
}

#[test]
fn a_full_local_queue_hands_the_job_back() {
    let config = RuntimeConfig {
        local_queue: 2,
        ..RuntimeConfig::with_threads(2)
    };
    let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 2);
    let ran = Arc::new(AtomicUsize::new(0));
    let job = |ran: &Arc<AtomicUsize>| {
        let ran = ran.clone();
        move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    executor.spawn(job(&ran)).unwrap();
    executor.spawn(job(&ran)).unwrap();
    let rejected = executor
        .spawn(job(&ran))
        .expect_err("a third job exceeds local_queue = 2");
    executor.run_until_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    executor
        .spawn_job(rejected)
        .expect("room again once the queue drained");
    executor.run_until_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 3);
}

#[test]
fn a_read_parks_and_other_jobs_run_meanwhile() {
    const JOBS: u32 = 4;
    // Long enough that no read completes before the last job started, even on a loaded machine
    // (whose stalls last milliseconds).
    const LATENCY_NS: u64 = 20_000_000;
    // Aging off (a 1 s threshold) and a pending bound above the thread count: this test is about
    // parking, not about forced progress.
    let config = RuntimeConfig {
        initial_latency_ns: 1_000_000_000,
        max_pending: 2 * JOBS as usize,
        ..RuntimeConfig::with_threads(JOBS as usize)
    };
    let (mut executor, _arena, tracker) = emulated_executor(config, LATENCY_NS, 64, JOBS);
    let log = Log::default();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    for job in 0..JOBS {
        let (log, in_flight, max_in_flight) =
            (log.clone(), in_flight.clone(), max_in_flight.clone());
        executor
            .spawn(move || {
                log.push(format!("start {job}"));
                let ticket =
                    io::submit(IoRequest::read(u64::from(job) * BLOCK, job, 1, 0)).unwrap();
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_in_flight.fetch_max(now, Ordering::SeqCst);
                io::wait(ticket).unwrap();
                in_flight.fetch_sub(1, Ordering::SeqCst);
                log.push(format!("end {job}"));
            })
            .unwrap();
    }
    executor.run_until_idle();
    let events = log.events();
    let starts: Vec<String> = (0..JOBS).map(|j| format!("start {j}")).collect();
    assert_eq!(
        events[..JOBS as usize],
        starts[..],
        "every job starts before any read returns: {events:?}"
    );
    assert_eq!(
        max_in_flight.load(Ordering::SeqCst),
        JOBS as usize,
        "reads overlap: {events:?}"
    );
    assert_eq!(
        tracker.max_in_flight(),
        JOBS as usize,
        "the device saw all reads at once"
    );
    let stats = executor.stats();
    assert_eq!(
        stats.parks,
        u64::from(JOBS),
        "each read parks its thread once"
    );
    assert_eq!(stats.jobs_completed, u64::from(JOBS));
    assert_eq!(
        stats.forced_progress, 0,
        "no aging, no full pending set: never forced"
    );
    assert!(
        stats.device_waits > 0,
        "with every thread parked the core waits for the device"
    );
    assert_eq!(executor.device_stats().submitted, u64::from(JOBS));
}

#[test]
fn a_thread_waits_for_its_accesses_one_at_a_time() {
    // A thread may hold several accesses and wait for them one by one; the ones it does not wait
    // for yet complete while it is parked on another.
    const JOBS: u32 = 4;
    let config = RuntimeConfig::with_threads(JOBS as usize);
    let (mut executor, _arena, _) = emulated_executor(config, 20_000, 64, 2 * JOBS);
    let results = Arc::new(Mutex::new(Vec::new()));
    for job in 0..JOBS {
        let results = results.clone();
        executor
            .spawn(move || {
                let frame = 2 * job;
                let first = io::submit(IoRequest::read(0, frame, 1, 0)).unwrap();
                let second = io::submit(IoRequest::read(BLOCK, frame + 1, 1, 0)).unwrap();
                // Both complete in the same poll (same latency, same doorbell).
                let a = io::wait(first);
                let b = io::wait(second);
                results.lock().unwrap().push((job, a, b));
            })
            .unwrap();
    }
    executor.run_until_idle();
    let results = results.lock().unwrap();
    assert_eq!(
        results.len(),
        JOBS as usize,
        "every job finished: {results:?}"
    );
    assert!(
        results.iter().all(|(_, a, b)| a.is_ok() && b.is_ok()),
        "{results:?}"
    );
    let stats = executor.stats();
    assert_eq!(stats.jobs_panicked, 0);
    assert_eq!(stats.jobs_completed, u64::from(JOBS));
}

fn yields_interleave(policy: Policy) {
    const JOBS: usize = 3;
    const ROUNDS: usize = 4;
    let config = RuntimeConfig {
        policy,
        ..RuntimeConfig::with_threads(JOBS)
    };
    let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 1);
    let log = Log::default();
    for job in 0..JOBS {
        let log = log.clone();
        executor
            .spawn(move || {
                for round in 0..ROUNDS {
                    log.push(format!("{job}.{round}"));
                    thread::yield_now();
                }
            })
            .unwrap();
    }
    executor.run_until_idle();
    let expected: Vec<String> = (0..ROUNDS)
        .flat_map(|r| (0..JOBS).map(move |j| format!("{j}.{r}")))
        .collect();
    assert_eq!(
        log.events(),
        expected,
        "{policy:?}: round-robin in arrival order"
    );
    let stats = executor.stats();
    assert_eq!(stats.yields, (JOBS * ROUNDS) as u64);
    assert_eq!(stats.parks, 0);
    assert_eq!(stats.jobs_completed, JOBS as u64);
}

#[test]
fn yield_now_interleaves_threads_in_order() {
    yields_interleave(Policy::PriorityAging);
    yields_interleave(Policy::Fifo);
}

#[test]
fn sleep_wakes_at_or_after_its_deadline_in_deadline_order() {
    let config = RuntimeConfig::with_threads(4);
    let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 1);
    let log = Log::default();
    let early = Arc::new(AtomicU64::new(0));
    // Sleeps of 30, 10 and 20 ms: 10 ms apart, so only a stall that long between two jobs'
    // starts could reorder the deadlines.
    for tens_of_ms in [3u64, 1, 2] {
        let (log, early) = (log.clone(), early.clone());
        executor
            .spawn(move || {
                let deadline = now_ns() + tens_of_ms * 10_000_000;
                thread::sleep_until(deadline);
                let woke = now_ns();
                if woke < deadline {
                    early.fetch_add(1, Ordering::SeqCst);
                }
                log.push(format!("woke {tens_of_ms}"));
                // A zero-length sleep and a past deadline return at once, without switching.
                thread::sleep(Duration::ZERO);
                thread::sleep_until(0);
            })
            .unwrap();
    }
    let meanwhile = log.clone();
    executor
        .spawn(move || meanwhile.push("ran while others sleep"))
        .unwrap();
    let start = std::time::Instant::now();
    executor.run_until_idle();
    let elapsed = start.elapsed();
    assert_eq!(
        early.load(Ordering::SeqCst),
        0,
        "a sleeper woke before its deadline"
    );
    assert_eq!(
        log.events(),
        ["ran while others sleep", "woke 1", "woke 2", "woke 3"],
        "sleepers wake in deadline order and do not hold the core"
    );
    assert!(
        elapsed >= Duration::from_millis(30),
        "run_until_idle waited for the sleepers"
    );
    let stats = executor.stats();
    assert_eq!(stats.jobs_completed, 4);
    assert_eq!(
        stats.switches,
        4 + 3,
        "each sleeper is resumed exactly once"
    );
}

#[test]
fn a_panicking_job_is_counted_and_the_executor_keeps_running() {
    let config = RuntimeConfig {
        local_queue: 32,
        ..RuntimeConfig::with_threads(2)
    };
    let (mut executor, _arena, _) = emulated_executor(config, 5_000, 64, 2);
    let done = Arc::new(AtomicUsize::new(0));
    for job in 0..10u32 {
        let done = done.clone();
        executor
            .spawn(move || {
                // Every job touches the device first, so the panic comes after a park.
                io::read(u64::from(job) * BLOCK, job % 2, 1).unwrap();
                if job == 3 || job == 6 {
                    thread::yield_now();
                    panic!("job {job} panics on purpose (expected by the test)");
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    executor.run_until_idle();
    let stats = executor.stats();
    assert_eq!(stats.jobs_panicked, 2);
    assert_eq!(
        done.load(Ordering::SeqCst),
        8,
        "the other jobs ran to their end"
    );
    assert_eq!(stats.jobs_started, 10);
    // The executor and its two threads stay usable.
    for job in 0..4u32 {
        let done = done.clone();
        executor
            .spawn(move || {
                io::read(u64::from(job) * BLOCK, job % 2, 1).unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    executor.run_until_idle();
    assert_eq!(done.load(Ordering::SeqCst), 12);
    assert_eq!(executor.stats().jobs_panicked, 2);
}

#[test]
fn spin_waits_never_park() {
    const JOBS: u32 = 4;
    let config = RuntimeConfig::with_threads(2);
    let (mut executor, _arena, tracker) = emulated_executor(config, 10_000, 64, 2 * JOBS);
    let log = Log::default();
    for job in 0..JOBS {
        let log = log.clone();
        executor
            .spawn(move || {
                log.push(format!("start {job}"));
                let tickets = [
                    io::submit(IoRequest::read(u64::from(job) * BLOCK, 2 * job, 1, 0)).unwrap(),
                    io::submit(IoRequest::read(
                        u64::from(job + 8) * BLOCK,
                        2 * job + 1,
                        1,
                        0,
                    ))
                    .unwrap(),
                ];
                io::wait_all_with(&tickets, WaitMode::Spin).unwrap();
                log.push(format!("end {job}"));
            })
            .unwrap();
    }
    executor.run_until_idle();
    let stats = executor.stats();
    assert_eq!(stats.parks, 0, "a demand access keeps the core");
    assert_eq!(stats.yields, 0);
    assert_eq!(stats.switches, u64::from(JOBS), "each job ran in one go");
    assert!(
        stats.spin_polls > 0,
        "the core spun on the completion queue"
    );
    let expected: Vec<String> = (0..JOBS)
        .flat_map(|j| [format!("start {j}"), format!("end {j}")])
        .collect();
    assert_eq!(log.events(), expected, "no other job runs while one spins");
    assert_eq!(
        tracker.max_in_flight(),
        2,
        "one job's two reads overlap, no more"
    );
}

#[test]
fn poll_yield_waits_yield_instead_of_parking() {
    const JOBS: u32 = 3;
    let config = RuntimeConfig::with_threads(JOBS as usize);
    // 20 ms: no read completes before the last job started, even across a stall.
    let (mut executor, _arena, tracker) = emulated_executor(config, 20_000_000, 64, JOBS);
    let log = Log::default();
    for job in 0..JOBS {
        let log = log.clone();
        executor
            .spawn(move || {
                log.push(format!("start {job}"));
                let ticket =
                    io::submit(IoRequest::read(u64::from(job) * BLOCK, job, 1, 0)).unwrap();
                io::wait_all_with(&[ticket], WaitMode::PollYield).unwrap();
                log.push(format!("end {job}"));
            })
            .unwrap();
    }
    executor.run_until_idle();
    let stats = executor.stats();
    assert_eq!(stats.parks, 0, "polling threads never park");
    assert!(
        stats.yields >= u64::from(JOBS),
        "each thread yields at least once: {}",
        summary(&stats)
    );
    assert_eq!(stats.jobs_completed, u64::from(JOBS));
    let events = log.events();
    let starts: Vec<String> = (0..JOBS).map(|j| format!("start {j}")).collect();
    assert_eq!(
        events[..JOBS as usize],
        starts[..],
        "a polling thread lets the others start"
    );
    assert_eq!(tracker.max_in_flight(), JOBS as usize);
}

#[test]
fn device_errors_reach_the_job_and_the_executor_goes_on() {
    const CAPACITY_BLOCKS: u64 = 16;
    const CAPACITY: u64 = CAPACITY_BLOCKS * BLOCK;
    // One thread: 16 tickets in all, so a leaked ticket per failed submit would exhaust them.
    let config = RuntimeConfig::with_threads(1);
    let (mut executor, _arena, _) = emulated_executor(config, 2_000, CAPACITY_BLOCKS, 2);
    let results = Arc::new(Mutex::new(Vec::new()));
    let results2 = results.clone();
    let leaked = Arc::new(AtomicUsize::new(0));
    let leaked2 = leaked.clone();
    executor
        .spawn(move || {
            let mut results = vec![
                ("read at the end", io::read(CAPACITY, 0, 1)),
                ("read across the end", io::read(CAPACITY - BLOCK, 0, 2)),
                ("write past the end", io::write(CAPACITY + BLOCK, 0, 1)),
                ("misaligned read", io::read(100, 0, 1)),
                ("frame outside the arena", io::read(0, 2, 1)),
                ("empty read", io::read(0, 0, 0)),
            ];
            for _ in 0..100 {
                if io::submit(IoRequest::read(CAPACITY, 0, 1, 0)).is_ok() {
                    leaked2.fetch_add(1, Ordering::SeqCst);
                }
            }
            results.push(("last block", io::read(CAPACITY - BLOCK, 0, 1)));
            // A valid and an invalid access together: the valid one completes normally.
            let ok = io::submit(IoRequest::read(0, 1, 1, 0)).unwrap();
            results.push(("bad one next to a good one", io::read(CAPACITY, 0, 1)));
            results.push(("the good one", io::wait(ok)));
            *results2.lock().unwrap() = results;
        })
        .unwrap();
    executor.run_until_idle();
    assert_eq!(
        leaked.load(Ordering::SeqCst),
        0,
        "an out-of-range submit was accepted"
    );
    let results = results.lock().unwrap().clone();
    let find = |what: &str| {
        results
            .iter()
            .find(|(w, _)| *w == what)
            .unwrap_or_else(|| panic!("{what} missing from {results:?}"))
            .1
            .clone()
    };
    assert_eq!(
        find("read at the end"),
        Err(DeviceError::OutOfRange {
            offset_bytes: CAPACITY,
            len_bytes: BLOCK,
            capacity_bytes: CAPACITY
        })
    );
    assert!(matches!(
        find("read across the end"),
        Err(DeviceError::OutOfRange { .. })
    ));
    assert!(matches!(
        find("write past the end"),
        Err(DeviceError::OutOfRange { .. })
    ));
    assert!(matches!(
        find("misaligned read"),
        Err(DeviceError::MisalignedOffset { .. })
    ));
    assert!(matches!(
        find("frame outside the arena"),
        Err(DeviceError::BadFrame { .. })
    ));
    assert_eq!(find("empty read"), Err(DeviceError::EmptyRequest));
    assert_eq!(find("last block"), Ok(()));
    assert!(matches!(
        find("bad one next to a good one"),
        Err(DeviceError::OutOfRange { .. })
    ));
    assert_eq!(find("the good one"), Ok(()));
    let stats = executor.stats();
    assert_eq!((stats.jobs_completed, stats.jobs_panicked), (1, 0));

    // Not poisoned: more jobs on the same thread run and reach the device.
    let ok = Arc::new(AtomicUsize::new(0));
    for block in 0..CAPACITY_BLOCKS {
        let ok = ok.clone();
        executor
            .spawn(move || {
                if io::read(block * BLOCK, 0, 1).is_ok() {
                    ok.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap_or_else(|_| panic!("local queue full at block {block}"));
        if block % 8 == 7 {
            executor.run_until_idle();
        }
    }
    executor.run_until_idle();
    assert_eq!(ok.load(Ordering::SeqCst), CAPACITY_BLOCKS as usize);
    assert_eq!(executor.stats().jobs_panicked, 0);
}

#[test]
fn a_fatal_job_panic_unwinds_the_executor_cleanly() {
    // A job that panics with an access in flight is a bug the executor refuses to paper over: it
    // panics. That panic must reach the caller as a panic (not an abort), even though another
    // thread is parked mid-job, and must not leave the thread-local core pointer dangling.
    let config = RuntimeConfig::with_threads(2);
    let (mut executor, _arena, _) = emulated_executor(config, 50_000, 64, 2);
    executor
        .spawn(|| {
            io::read(0, 0, 1).unwrap();
        })
        .unwrap();
    executor
        .spawn(|| {
            let _leaked = io::submit(IoRequest::read(BLOCK, 1, 1, 0)).unwrap();
            panic!("a job panics with an access in flight (expected by the test)");
        })
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        executor.run_until_idle();
    }));
    assert!(
        outcome.is_err(),
        "the executor reports the leaked access by panicking"
    );
    assert!(
        !thread::in_user_thread(),
        "no core is current after the executor unwound"
    );
    assert_eq!(thread::core_id(), None);
    // Dropping the executor unwinds the thread still parked in the first job.
    drop(executor);
    assert!(!thread::in_user_thread());
}

/// `wait_while_eq` parks the thread (it is not resumed) until another thread changes the word,
/// and returns false at its deadline when nobody does.
#[test]
fn a_thread_waits_for_a_word_to_change_without_being_resumed() {
    let config = RuntimeConfig::with_threads(4);
    let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 1);
    let word = Arc::new(std::sync::atomic::AtomicU64::new(7));
    let log = Log::default();
    let (w, l) = (word.clone(), log.clone());
    executor
        .spawn(move || {
            let changed = thread::wait_while_eq(&w, 7, now_ns() + 5_000_000_000);
            l.push(format!(
                "woke changed={changed} value={}",
                w.load(Ordering::SeqCst)
            ));
        })
        .unwrap();
    let (w, l) = (word.clone(), log.clone());
    executor
        .spawn(move || {
            // Let the waiter park, run a while, then change the word.
            for _ in 0..50 {
                thread::yield_now();
            }
            l.push("set");
            w.store(8, Ordering::SeqCst);
        })
        .unwrap();
    executor.run_until_idle();
    assert_eq!(log.events(), ["set", "woke changed=true value=8"]);
    let stats = executor.stats();
    // The waiter ran twice (start, wake); the setter 51 times (start + 50 yields).
    assert_eq!(stats.switches, 2 + 51, "{}", summary(&stats));

    // Nobody changes it: false at the deadline, not before.
    let (w, l) = (word.clone(), log.clone());
    executor
        .spawn(move || {
            let deadline = now_ns() + 2_000_000;
            let changed = thread::wait_while_eq(&w, 8, deadline);
            l.push(format!(
                "timeout changed={changed} late={}",
                now_ns() >= deadline
            ));
        })
        .unwrap();
    executor.run_until_idle();
    assert_eq!(
        log.events().last().unwrap(),
        "timeout changed=false late=true"
    );
}

/// A word changed on another core wakes a thread parked on it (no message crosses cores).
#[test]
fn a_word_changed_on_another_core_wakes_the_waiter() {
    use std::sync::atomic::AtomicU64;
    let arena = Arc::new(tamer_device::Arena::new(1).unwrap());
    let model = tamer_device::EmulatorConfig::with_latency_ns(1_000)
        .build()
        .unwrap();
    let config = RuntimeConfig {
        cores: 2,
        pin: false,
        ..RuntimeConfig::with_threads(4)
    };
    let runtime =
        tamer_runtime::Runtime::start(config, tamer_device::DeviceSpec::Emulated { model }, arena)
            .unwrap();
    let word = Arc::new(AtomicU64::new(0));
    let woke = Arc::new(AtomicU64::new(0));
    let (w, k) = (word.clone(), woke.clone());
    runtime
        .spawn_on(0, move || {
            let changed = thread::wait_while_eq(&w, 0, now_ns() + 5_000_000_000);
            assert_eq!(thread::core_id(), Some(0));
            k.store(if changed { 1 } else { 2 }, Ordering::SeqCst);
        })
        .unwrap();
    let w = word.clone();
    runtime
        .spawn_on(1, move || {
            thread::sleep(Duration::from_millis(2));
            w.store(1, Ordering::SeqCst);
        })
        .unwrap();
    let reports = runtime.shutdown();
    assert_eq!(
        woke.load(Ordering::SeqCst),
        1,
        "the waiter did not see the change"
    );
    assert!(reports.iter().all(|r| r.stats.jobs_panicked == 0));
}

/// CPU time the calling OS thread has used, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A core whose only work is a thread sleeping far ahead sleeps in the OS instead of spinning
/// (an idle store's cleaner must not hold a CPU), still wakes the thread no earlier than its
/// deadline, and spins when polling is asked for.
#[test]
fn a_core_with_only_far_timers_sleeps_in_the_os() {
    const SLEEP: Duration = Duration::from_millis(40);
    for idle in [
        tamer_runtime::IdleMode::Block,
        tamer_runtime::IdleMode::Poll,
    ] {
        let config = RuntimeConfig {
            idle,
            ..RuntimeConfig::with_threads(2)
        };
        let (mut executor, _arena, _) = emulated_executor(config, 1_000, 64, 2);
        let early = Arc::new(AtomicU64::new(0));
        let e = early.clone();
        executor
            .spawn(move || {
                let deadline = now_ns() + SLEEP.as_nanos() as u64;
                thread::sleep_until(deadline);
                if now_ns() < deadline {
                    e.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap();
        let cpu_before_ns = thread_cpu_ns();
        executor.run_until_idle();
        let cpu_ns = thread_cpu_ns() - cpu_before_ns;
        assert_eq!(early.load(Ordering::SeqCst), 0, "{idle:?}: woke early");
        let stats = executor.stats();
        if idle == tamer_runtime::IdleMode::Poll {
            assert_eq!(stats.timer_sleeps, 0, "a polling core never sleeps");
            continue;
        }
        // Sleeps come in chunks of at most 10 ms, but late OS wake-ups on a loaded machine can
        // cover the 40 ms in fewer; the CPU bound below is what catches a spinning core.
        assert!(
            stats.timer_sleeps >= 1,
            "{idle:?}: {} OS sleeps",
            stats.timer_sleeps
        );
        // A spinning core would use all 40 ms; sleeping, it spins the last ≤ 50 µs.
        assert!(
            cpu_ns < SLEEP.as_nanos() as u64 / 4,
            "{idle:?}: the core used {cpu_ns} ns of CPU over a {SLEEP:?} sleep"
        );
    }
}

/// `io::flush` is an asynchronous device request: the calling thread parks for the device's
/// flush latency while the core runs other jobs. Catches: a flush that blocks the core (the
/// other job cannot run meanwhile) and one that never reaches the device (returns at once).
#[test]
fn a_flush_parks_and_other_jobs_run_meanwhile() {
    // The emulator's flush latency defaults to its access latency.
    const LATENCY_NS: u64 = 20_000_000;
    let config = RuntimeConfig {
        initial_latency_ns: 1_000_000_000,
        ..RuntimeConfig::with_threads(2)
    };
    let (mut executor, _arena, tracker) = emulated_executor(config, LATENCY_NS, 64, 2);
    let flushed_at = Arc::new(AtomicU64::new(0));
    let other_ran_at = Arc::new(AtomicU64::new(0));
    let start = now_ns();
    let flushed = flushed_at.clone();
    executor
        .spawn(move || {
            io::flush().expect("flush");
            flushed.store(now_ns(), Ordering::SeqCst);
        })
        .unwrap();
    let other = other_ran_at.clone();
    executor
        .spawn(move || other.store(now_ns(), Ordering::SeqCst))
        .unwrap();
    executor.run_until_idle();
    let flushed = flushed_at.load(Ordering::SeqCst);
    let other = other_ran_at.load(Ordering::SeqCst);
    assert!(
        flushed >= start + LATENCY_NS,
        "the flush returned after {} ns, before the device's flush latency",
        flushed - start
    );
    assert!(other < flushed, "the other job ran only after the flush");
    assert_eq!(tracker.completions.load(Ordering::SeqCst), 1);
}

/// A job's waits: a device read counts its latency as device time; a span counted as a
/// commit counts its whole time once, the read inside it not again; a new job starts at
/// zero; outside a user-level thread there is nothing. Mutations caught: device time not
/// counted, counted twice inside a span, a span's time lost, the totals carried from one job
/// to the next.
#[test]
fn a_job_s_waits_are_counted_by_kind() {
    const LATENCY_NS: u64 = 2_000_000;
    let config = RuntimeConfig::with_threads(1);
    let (mut executor, _arena, _tracker) = emulated_executor(config, LATENCY_NS, 64, 1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for job in 0..2u32 {
        let seen = seen.clone();
        executor
            .spawn(move || {
                let start = thread::waits();
                io::read(u64::from(job) * BLOCK, 0, 1).unwrap();
                let after_read = thread::waits();
                thread::account_as(thread::WaitKind::Commit, || {
                    io::read(u64::from(job + 2) * BLOCK, 0, 1).unwrap();
                });
                let end = thread::waits();
                seen.lock().unwrap().push((start, after_read, end));
            })
            .unwrap();
    }
    executor.run_until_idle();
    assert_eq!(
        thread::waits(),
        thread::Waits::default(),
        "outside a thread"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for &(start, after_read, end) in seen.iter() {
        assert_eq!(start, thread::Waits::default(), "a job starts at zero");
        assert!(after_read.device_ns >= LATENCY_NS, "{after_read:?}");
        assert_eq!(after_read.commit_ns, 0);
        assert_eq!(
            end.device_ns, after_read.device_ns,
            "not again inside the span"
        );
        assert!(end.commit_ns >= LATENCY_NS, "{end:?}");
        assert_eq!(end.checkpoint_ns, 0);
    }
}
