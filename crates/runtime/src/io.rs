//! Device access from a user-level thread: submit, then wait by parking (switch-on-access),
//! by spinning (the core waits, "demand access"), or by yielding and polling.

use std::sync::Arc;

use tamer_device::{now_ns, Arena, DeviceError, IoRequest};

pub use crate::core::Ticket;
use crate::executor::{suspend, with_core, Suspend};

const OUTSIDE: &str = "device access outside a tamer user-level thread";

/// How a thread waits for its accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Park until the accesses complete; the scheduler runs other threads and resumes this one
    /// when its completions are reaped (the killer-microsecond study's prefetch + user-mode switch; AstriFlash's
    /// switch on a DRAM-cache miss).
    Park,
    /// The core spins on the completion queue without switching (demand access).
    Spin,
    /// Yield to the next runnable thread and check the completion again when resumed: threads
    /// poll their own completion slots round-robin (the killer-microsecond study's application-managed queue).
    PollYield,
}

/// The arena the current core's device moves data to and from.
pub fn arena() -> Arc<Arena> {
    with_core(|core| core.arena.clone()).expect(OUTSIDE)
}

/// Pushes one access (its `tag` is replaced). The doorbell is rung now when it is cheap, else
/// by the executor once per loop iteration. Stalls the core while the per-core in-flight cap or
/// the device queue is full.
pub fn submit(request: IoRequest) -> Result<Ticket, DeviceError> {
    with_core(|core| {
        let worker = core.current.get().expect(OUTSIDE);
        core.submit(worker, request)
    })
    .expect(OUTSIDE)
}

/// Waits for one access (parking) and returns its result.
pub fn wait(ticket: Ticket) -> Result<(), DeviceError> {
    wait_all_with(&[ticket], WaitMode::Park)
}

/// Waits for every access in `tickets` (parking) and returns the first error, if any. Every
/// ticket is claimed either way.
pub fn wait_all(tickets: &[Ticket]) -> Result<(), DeviceError> {
    wait_all_with(tickets, WaitMode::Park)
}

/// Waits for every access in `tickets` with `mode`; returns the first error. Every ticket is
/// claimed either way and must not be used again.
pub fn wait_all_with(tickets: &[Ticket], mode: WaitMode) -> Result<(), DeviceError> {
    with_core(|core| {
        let worker = core.current.get().expect(OUTSIDE);
        // Read only once the thread has to wait (its job's device time: `thread::waits`).
        let mut waited_since_ns = None;
        // Bounded: each round either finds everything done or waits for at least one event;
        // accesses complete within the device's bounded latency.
        loop {
            let not_done = tickets.iter().filter(|&&t| !core.is_done(t)).count() as u32;
            if not_done == 0 {
                break;
            }
            waited_since_ns.get_or_insert_with(now_ns);
            let forced = core.sched.borrow().workers[worker as usize].force_progress;
            match mode {
                WaitMode::Spin => core.spin_once(),
                WaitMode::Park if forced => core.spin_once(),
                WaitMode::Park => {
                    let awaiting = core.await_in_flight(tickets);
                    // With a cheap doorbell the thread's last submit just read the clock: its
                    // accesses have been pending since then.
                    let now = if core.doorbell_is_cheap() {
                        core.clock()
                    } else {
                        now_ns()
                    };
                    core.sched.borrow_mut().park(worker, awaiting, now);
                    suspend(Suspend::Park);
                }
                WaitMode::PollYield => {
                    {
                        let mut sched = core.sched.borrow_mut();
                        sched.workers[worker as usize].status = crate::core::Status::Runnable;
                        sched.runnable.push_back((worker, core.clock()));
                    }
                    suspend(Suspend::Yield);
                }
            }
        }
        {
            let mut sched = core.sched.borrow_mut();
            let state = &mut sched.workers[worker as usize];
            state.force_progress = false;
            if let Some(since) = waited_since_ns {
                state.waits.device_ns += now_ns().saturating_sub(since);
            }
        }
        let mut first_error = Ok(());
        for &ticket in tickets {
            let result = core.claim(worker, ticket);
            if first_error.is_ok() {
                first_error = result;
            }
        }
        first_error
    })
    .expect(OUTSIDE)
}

/// Reads `frames` blocks at `offset_bytes` into arena frames from `frame`, parking meanwhile.
pub fn read(offset_bytes: u64, frame: u32, frames: u32) -> Result<(), DeviceError> {
    let ticket = submit(IoRequest::read(offset_bytes, frame, frames, 0))?;
    wait(ticket)
}

/// Writes `frames` arena frames from `frame` to the device at `offset_bytes`, parking meanwhile.
pub fn write(offset_bytes: u64, frame: u32, frames: u32) -> Result<(), DeviceError> {
    let ticket = submit(IoRequest::write(offset_bytes, frame, frames, 0))?;
    wait(ticket)
}

/// The device's durability barrier, parking meanwhile (an asynchronous flush request, never a
/// blocking call on the core): when it returns, every write this or any thread saw complete
/// before the call is durable.
pub fn flush() -> Result<(), DeviceError> {
    let ticket = submit(IoRequest::flush(0))?;
    wait(ticket)
}
