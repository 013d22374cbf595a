//! An open store with nothing to do leaves its CPUs alone: its background cleaners back off and
//! its cores sleep in the OS between their passes (alone in its test binary: the CPU time
//! measured is the whole process's).

mod common;

use std::time::Duration;

use common::*;
use tamer_store::Db;

fn process_cpu_ns() -> u64 {
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

#[test]
fn an_idle_store_uses_little_cpu() {
    // The default spin before sleeping (200 µs), and one longer than the cleaner's longest
    // pause (its wake-ups must not count as activity that keeps the core spinning).
    // Without a cleaner the cores park: a park's timeout with still nothing to do must not
    // start a new spin.
    for (idle_spin, cleaner) in [
        (None, true),
        (Some(Duration::from_millis(20)), true),
        (Some(Duration::from_millis(20)), false),
    ] {
        idle_store(idle_spin, cleaner);
    }
}

fn idle_store(idle_spin: Option<Duration>, cleaner: bool) {
    const IDLE: Duration = Duration::from_millis(600);
    // Two cores (with a cleaner each, or none), on the emulated device (waited for by
    // spinning).
    let mut options = emulated(4 << 20, 64 << 20)
        .cores(2)
        .threads_per_core(8)
        .cleaner(cleaner);
    if let Some(spin) = idle_spin {
        options = options.idle_spin(spin);
    }
    let db = Db::open("ignored", options).unwrap();
    for i in 0..2_000u32 {
        let key = format!("idle-{i}").into_bytes();
        db.put(&key, &value_for(&key, 0, 1_000)).unwrap();
    }
    // Write everything back now, so no timed checkpoint has work left for the measured window;
    // the cleaners then find nothing more and back off.
    db.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before_ns = process_cpu_ns();
    std::thread::sleep(IDLE);
    let used_ns = process_cpu_ns() - before_ns;
    eprintln!(
        "an idle store with 2 cores (idle spin {idle_spin:?}, cleaner {cleaner}) used {used_ns} ns of CPU in {IDLE:?}"
    );
    // Spinning, the two cores would use up to 2 × 600 ms.
    assert!(
        used_ns < IDLE.as_nanos() as u64 / 5,
        "an idle store (idle spin {idle_spin:?}, cleaner {cleaner}) used {used_ns} ns of CPU in {IDLE:?}"
    );
    assert_eq!(
        db.get(b"idle-7").unwrap(),
        Some(value_for(b"idle-7", 0, 1_000))
    );
    db.close().unwrap();
}
