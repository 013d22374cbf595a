//! What a user-level thread can do with its core: yield, sleep, wait for a word to change, ask
//! where it runs.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tamer_device::now_ns;

use crate::core::{Status, Watch, WatchWord};
use crate::executor::{suspend, with_core, Suspend};

const OUTSIDE: &str = "called outside a tamer user-level thread";

/// True on a user-level thread run by an executor.
pub fn in_user_thread() -> bool {
    with_core(|core| core.current.get().is_some()).unwrap_or(false)
}

/// The index of the core (executor) running the calling thread.
pub fn core_id() -> Option<usize> {
    with_core(|core| core.id)
}

/// Marks the calling thread urgent until dropped: others wait for it (a group commit's leader,
/// whose writes and flush every committing thread waits for), so once its device accesses
/// complete it runs before new jobs and other parked threads. Keep urgent sections short and
/// few: urgency overrides AstriFlash's new-job priority and its aging.
pub struct Urgent {
    was: bool,
}

impl Urgent {
    /// Marks the calling thread urgent (no-op outside a user-level thread).
    pub fn new() -> Self {
        Self {
            was: set_urgent(true),
        }
    }
}

impl Default for Urgent {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Urgent {
    fn drop(&mut self) {
        set_urgent(self.was);
    }
}

/// Sets the calling thread's urgency; returns the previous one.
fn set_urgent(urgent: bool) -> bool {
    with_core(|core| {
        let Some(worker) = core.current.get() else {
            return false;
        };
        let state = &mut core.sched.borrow_mut().workers[worker as usize];
        std::mem::replace(&mut state.urgent, urgent)
    })
    .unwrap_or(false)
}

/// Threads of the calling thread's core that could run now besides it (runnable, or parked
/// with every access done) and new jobs in its local queue that a free thread could start; 0
/// outside a user-level thread.
pub fn others_ready() -> usize {
    with_core(|core| {
        let [_, ready, runnable, idle, queued] = core.sched.borrow().state_counts();
        ready + runnable + queued.min(idle)
    })
    .unwrap_or(0)
}

/// Gives the core to other runnable work; the caller runs again after the work that was
/// runnable before it (it goes to the back of the runnable queue).
pub fn yield_now() {
    with_core(|core| {
        let worker = core.current.get().expect(OUTSIDE);
        let mut sched = core.sched.borrow_mut();
        sched.workers[worker as usize].status = Status::Runnable;
        sched.runnable.push_back((worker, core.clock()));
    })
    .expect(OUTSIDE);
    suspend(Suspend::Yield);
}

/// Parks the calling thread until `deadline_ns` (on the [`tamer_device::now_ns`] clock) has
/// passed; other threads run meanwhile. Returns at once when the deadline has passed.
pub fn sleep_until(deadline_ns: u64) {
    if deadline_ns <= now_ns() {
        return;
    }
    with_core(|core| {
        let worker = core.current.get().expect(OUTSIDE);
        let mut sched = core.sched.borrow_mut();
        sched.workers[worker as usize].status = Status::Sleeping;
        sched.timers.push(std::cmp::Reverse((deadline_ns, worker)));
    })
    .expect(OUTSIDE);
    suspend(Suspend::Sleep);
    debug_assert!(now_ns() >= deadline_ns, "woke before the deadline");
}

/// Parks the calling thread while `word` holds `expected`, until `deadline_ns` at the latest
/// (on the [`tamer_device::now_ns`] clock); other threads run meanwhile. A user-level futex:
/// the executor checks the word once per scheduling pass (≤ 16 runs, and every ≤ 5 µs while it
/// waits for the device), so a change made by any thread on any core wakes the waiter without
/// a message. Returns true when the word changed, false at the deadline. Spurious returns are
/// not possible, but the word may have changed back: callers re-check their condition.
///
/// `word` must stay alive until this returns (a reference guarantees it).
pub fn wait_while_eq(word: &AtomicU64, expected: u64, deadline_ns: u64) -> bool {
    if word.load(Ordering::Acquire) != expected {
        return true;
    }
    watch(WatchWord::U64(word), expected, deadline_ns);
    word.load(Ordering::Acquire) != expected
}

/// As [`wait_while_eq`], for a 32-bit word.
pub fn wait_while_eq_u32(word: &AtomicU32, expected: u32, deadline_ns: u64) -> bool {
    if word.load(Ordering::Acquire) != expected {
        return true;
    }
    watch(WatchWord::U32(word), u64::from(expected), deadline_ns);
    word.load(Ordering::Acquire) != expected
}

/// Parks the calling thread on `word` until it differs from `expected` or `deadline_ns`
/// passes (the caller has checked both once).
fn watch(word: WatchWord, expected: u64, deadline_ns: u64) {
    if deadline_ns <= now_ns() {
        return;
    }
    with_core(|core| {
        let worker = core.current.get().expect(OUTSIDE);
        let mut sched = core.sched.borrow_mut();
        sched.workers[worker as usize].status = Status::Watching;
        debug_assert!(sched.watches.len() < sched.workers.len());
        sched.watches.push(Watch {
            worker,
            word,
            expected,
            deadline_ns,
        });
    })
    .expect(OUTSIDE);
    suspend(Suspend::Watch);
}

/// Parks the calling thread for at least `duration`.
pub fn sleep(duration: Duration) {
    sleep_until(now_ns() + duration.as_nanos() as u64);
}

pub use crate::waits::{WaitKind, Waits};

/// The calling thread's job's waits so far.
pub fn waits() -> Waits {
    with_core(|core| {
        let worker = core.current.get()?;
        Some(core.sched.borrow().workers[worker as usize].waits)
    })
    .flatten()
    .unwrap_or_default()
}

/// Runs `f`, counting its whole time as `kind`: waits inside it (device accesses, a nested
/// span) are not counted again. Outside a user-level thread, only runs `f`.
pub fn account_as<R>(kind: WaitKind, f: impl FnOnce() -> R) -> R {
    if !in_user_thread() {
        return f();
    }
    let before = waits();
    let start = now_ns();
    let out = f();
    let took = now_ns().saturating_sub(start);
    let mut after = before;
    match kind {
        WaitKind::Commit => after.commit_ns += took,
        WaitKind::Checkpoint => after.checkpoint_ns += took,
    }
    with_core(|core| {
        if let Some(worker) = core.current.get() {
            core.sched.borrow_mut().workers[worker as usize].waits = after;
        }
    });
    out
}
