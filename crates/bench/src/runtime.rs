//! `tamer bench runtime`: the cost of a user-level switch vs an OS thread switch, side by side.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use corosensei::Coroutine;
use serde_json::json;
use tamer_device::{Arena, EmulatedDevice, EmulatorConfig};
use tamer_runtime::{thread, Executor, RuntimeConfig};

use crate::output::BenchResult;
use crate::BenchOptions;

/// Round trips of a bare coroutine: resume, then suspend back. Median of `repeats` runs.
pub fn coroutine_round_trip_ns(round_trips: u64, repeats: usize) -> f64 {
    let mut co = Coroutine::new(|yielder, ()| loop {
        yielder.suspend(());
    });
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        for _ in 0..round_trips {
            black_box(co.resume(()));
        }
        samples.push(start.elapsed().as_nanos() as f64 / round_trips as f64);
    }
    median(&mut samples)
}

/// Switches through the executor's scheduler: `threads` user threads each yield `yields` times;
/// returns ns per switch (one thread out, the next in). Median of `repeats` runs.
pub fn executor_switch_ns(threads: usize, yields: u64, repeats: usize) -> f64 {
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let arena = Arc::new(Arena::new(1).expect("one frame"));
        let model = EmulatorConfig::with_latency_ns(1_000)
            .capacity_bytes(4096)
            .build()
            .expect("model");
        let device = Box::new(EmulatedDevice::new(model, arena.clone()));
        let config = RuntimeConfig {
            local_queue: threads,
            ..RuntimeConfig::with_threads(threads)
        };
        let mut executor = Executor::new(0, config, device, arena).expect("executor");
        for _ in 0..threads {
            executor
                .spawn(move || {
                    for _ in 0..yields {
                        thread::yield_now();
                    }
                })
                .expect("local queue sized for every thread");
        }
        let start = Instant::now();
        executor.run_until_idle();
        let switches = executor.stats().switches;
        samples.push(start.elapsed().as_nanos() as f64 / switches.max(1) as f64);
    }
    median(&mut samples)
}

/// Two OS threads pinned to one CPU ping-pong through a futex; ns per round trip (two OS
/// switches). Median of `repeats` runs.
pub fn os_round_trip_ns(round_trips: u32, repeats: usize) -> f64 {
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let turn = Arc::new(AtomicU32::new(0));
        let other = turn.clone();
        let peer = std::thread::spawn(move || {
            tamer_runtime::pin_to_cpu(0);
            for i in 0..round_trips {
                futex_wait_until(&other, 2 * i + 1);
                other.store(2 * i + 2, Ordering::Release);
                futex_wake(&other);
            }
        });
        tamer_runtime::pin_to_cpu(0);
        // Let the peer reach its first wait.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let start = Instant::now();
        for i in 0..round_trips {
            turn.store(2 * i + 1, Ordering::Release);
            futex_wake(&turn);
            futex_wait_until(&turn, 2 * i + 2);
        }
        samples.push(start.elapsed().as_nanos() as f64 / f64::from(round_trips));
        peer.join().expect("peer thread");
    }
    unpin();
    median(&mut samples)
}

fn unpin() {
    // SAFETY: plain data in, syscall reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let cpus = tamer_runtime::online_cpus();
        for cpu in 0..cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn futex_wait_until(word: &AtomicU32, value: u32) {
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == value {
            return;
        }
        // SAFETY: FUTEX_WAIT on a live AtomicU32; returns at once if the word changed.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live AtomicU32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    samples[samples.len() / 2]
}

/// Runs the bench and returns its result.
pub fn run(options: &BenchOptions) -> BenchResult {
    let mut result = BenchResult::new("runtime", options.quick, options.seed);
    let (round_trips, yields, os_round_trips, repeats) = if options.quick {
        (2_000_000, 100_000, 20_000, 5)
    } else {
        (20_000_000, 1_000_000, 200_000, 7)
    };
    let switch_ns = coroutine_round_trip_ns(round_trips, repeats);
    let executor_2_ns = executor_switch_ns(2, yields, repeats);
    let executor_64_ns = executor_switch_ns(64, yields / 16, repeats);
    let os_ns = os_round_trip_ns(os_round_trips, repeats);
    println!("{:<44} {:>12}", "switch", "ns");
    println!(
        "{:<44} {:>12.1}",
        "user-level coroutine round trip (switch_ns)", switch_ns
    );
    println!(
        "{:<44} {:>12.1}",
        "executor yield, 2 threads (per switch)", executor_2_ns
    );
    println!(
        "{:<44} {:>12.1}",
        "executor yield, 64 threads (per switch)", executor_64_ns
    );
    println!(
        "{:<44} {:>12.1}",
        "OS threads on one core, futex round trip", os_ns
    );
    result
        .rows
        .push(json!({"what": "coroutine_round_trip", "ns": switch_ns, "round_trips": round_trips}));
    result
        .rows
        .push(json!({"what": "executor_yield", "threads": 2, "ns": executor_2_ns}));
    result
        .rows
        .push(json!({"what": "executor_yield", "threads": 64, "ns": executor_64_ns}));
    result
        .rows
        .push(json!({"what": "os_futex_round_trip", "ns": os_ns, "round_trips": os_round_trips}));
    result.figure("switch_ns", Some(switch_ns));
    result.figure("executor_switch_ns", Some(executor_2_ns));
    result.figure("executor_switch_64_threads_ns", Some(executor_64_ns));
    result.figure("os_switch_ns", Some(os_ns));
    result.figure("os_switch_ratio", Some(os_ns / switch_ns));
    result.figure("os_vs_executor_switch_ratio", Some(os_ns / executor_2_ns));
    result
}
