//! A timerfd in the worker's epoll set: the open loop sleeps until its next arrival with
//! nanosecond resolution instead of epoll's milliseconds, and without spinning (a spinning
//! generator on a shared CPU is descheduled for whole timeslices, which shows up as
//! milliseconds of latency it then attributes to the server). The thread's timer slack is
//! set to 1 ns, so the kernel does not defer the wake-up by its default 50 µs.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    pub fn new(registry: &Registry, token: Token) -> Result<Self, String> {
        // SAFETY: plain syscalls; the fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(format!(
                "timerfd_create: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sets this thread's timer slack; no memory involved.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        registry
            .register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)
            .map_err(|e| format!("epoll register timerfd: {e}"))?;
        Ok(Self { fd })
    }

    /// Fires once, `after_ns` from now (at least 1 ns).
    pub fn arm(&self, after_ns: u64) {
        let after_ns = after_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (after_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (after_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: spec is a valid itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Clears the expiry count (so the edge-triggered fd fires again).
    pub fn clear(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a local buffer.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
}
