//! `CLIENT PAUSE`: while a pause is in force, the gate postpones the commands it covers
//! (`crate::commands::gate`; the client waits in the table of blocked clients, holding no
//! thread, `super::blocked`) and active expiry makes no pass, so that the data set stays as
//! it was (Redis's `pauseClients`).
//!
//! Rules (Redis 7.0's, checked against redis-server in `tests/pause.rs`): a pause given while
//! another is in force keeps the later end and the stronger mode (`ALL` over `WRITE`); one
//! given after the last ended starts afresh; `CLIENT UNPAUSE` ends it at once. The rule is a
//! pure function ([`combine`]), tested below.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What a pause holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseMode {
    /// Commands that write or may replicate (`PUBLISH`, scripts, `EXEC` of such commands).
    Write,
    /// Every command.
    All,
}

/// A pause: its mode and its end (`tamer_device::now_ns`).
pub type PauseState = (PauseMode, u64);

/// The pause in force after `new` is given at `now_ns`, when `old` was the last one.
pub fn combine(old: Option<PauseState>, new: PauseState, now_ns: u64) -> PauseState {
    match old {
        Some((mode, end_ns)) if end_ns > now_ns => (mode.max(new.0), end_ns.max(new.1)),
        _ => new,
    }
}

/// The server's pause (see the module docs).
#[derive(Debug, Default)]
pub struct Pause {
    state: Mutex<Option<PauseState>>,
    /// Some pause was given and not yet seen to end: the fast path reads only this.
    set: AtomicBool,
}

impl Pause {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<PauseState>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `CLIENT PAUSE`: `mode` until `end_ns`, combined with a pause in force.
    pub fn pause(&self, mode: PauseMode, end_ns: u64) {
        let mut state = self.lock();
        let now_ns = tamer_device::now_ns();
        *state = Some(combine(*state, (mode, end_ns), now_ns));
        self.set.store(true, Ordering::Release);
    }

    /// `CLIENT UNPAUSE`: no pause from now on.
    pub fn unpause(&self) {
        *self.lock() = None;
        self.set.store(false, Ordering::Release);
    }

    /// The pause in force now, if any: one atomic load, and no clock read, while none was
    /// given (the gate asks at every request).
    pub fn now(&self) -> Option<PauseState> {
        if !self.set.load(Ordering::Acquire) {
            return None;
        }
        self.current(tamer_device::now_ns())
    }

    /// The pause in force at `now_ns`, if any (one atomic load while none was given).
    pub fn current(&self, now_ns: u64) -> Option<PauseState> {
        if !self.set.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.lock();
        match *state {
            Some((mode, end_ns)) if end_ns > now_ns => Some((mode, end_ns)),
            _ => {
                *state = None;
                self.set.store(false, Ordering::Release);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutation caught: a later pause that shortens the one in force or weakens its mode.
    #[test]
    fn a_pause_in_force_keeps_the_later_end_and_the_stronger_mode() {
        let all_late = (PauseMode::All, 2_000);
        assert_eq!(
            combine(Some(all_late), (PauseMode::Write, 100), 50),
            all_late
        );
        let write_late = (PauseMode::Write, 2_000);
        assert_eq!(
            combine(Some(write_late), (PauseMode::All, 100), 50),
            (PauseMode::All, 2_000)
        );
        assert_eq!(
            combine(Some((PauseMode::All, 100)), (PauseMode::Write, 2_000), 50),
            (PauseMode::All, 2_000)
        );
    }

    /// Mutation caught: an ended pause whose mode or end still weighs on the next one.
    #[test]
    fn a_pause_after_the_last_ended_starts_afresh() {
        let ended = (PauseMode::All, 100);
        let new = (PauseMode::Write, 500);
        assert_eq!(combine(Some(ended), new, 100), new);
        assert_eq!(combine(None, new, 0), new);
    }

    /// Mutation caught: a pause that never ends, or an unpause that leaves it in force.
    #[test]
    fn a_pause_ends_at_its_time_or_at_unpause() {
        let p = Pause::default();
        assert_eq!(p.current(0), None);
        p.pause(PauseMode::Write, u64::MAX);
        assert_eq!(p.current(1), Some((PauseMode::Write, u64::MAX)));
        p.unpause();
        assert_eq!(p.current(1), None);
        p.pause(PauseMode::All, 10);
        assert_eq!(p.current(10), None);
        assert_eq!(p.current(5), None, "seen ended: forgotten");
    }
}
