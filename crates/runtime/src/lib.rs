//! tamer's runtime: per-core executors of user-level threads that switch in nanoseconds while
//! they wait on a microsecond device.
//!
//! Each core runs one [`Executor`]: a fixed pool of stackful coroutines (user-level threads,
//! stacks allocated at start) and a scheduling loop. A thread that makes a device access pushes
//! it ([`io::submit`]) and parks ([`io::wait`]); the loop runs other threads, rings the device's
//! doorbell once per iteration (at most one syscall), reaps completions from the completion
//! queue without a syscall, and resumes parked threads by the policy of AstriFlash
//! ([`Policy::PriorityAging`]: new jobs first, aging by the average device latency, a bounded
//! pending set, forced progress) or in plain arrival order ([`Policy::Fifo`]).
//!
//! A [`Runtime`] starts one pinned executor per core, fed by one shared bounded job queue
//! (single-queue load balancing) and per-core inboxes.
//!
//! Bounds: threads per core ≤ 16384, accesses per thread ≤ 16, every queue sized by
//! [`RuntimeConfig`]; nothing on the switch path allocates.

mod config;
mod core;
mod executor;
mod gauge;
pub mod io;
mod job;
mod poller;
mod runtime;
pub mod sched;
pub mod thread;
mod waits;

pub use crate::config::{
    IdleMode, RuntimeConfig, MAX_OUTSTANDING_PER_THREAD, MAX_THREADS_PER_CORE,
};
pub use crate::core::{CoreStats, Ticket, WorkerId};
pub use crate::executor::Executor;
pub use crate::job::Job;
pub use crate::poller::Poller;
pub use crate::runtime::{online_cpus, pin_to_cpu, CoreReport, Runtime, SpawnError, ThreadStates};
pub use crate::sched::Policy;
