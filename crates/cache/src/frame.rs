//! Per-frame metadata: tag, state + pin count, the version latch, CLOCK and dirty bits.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Tag of a frame that holds no page.
pub(crate) const NO_PAGE: u64 = u64::MAX;

/// States, in the top byte of [`Frame::control`]; the low 32 bits are the pin count.
pub(crate) const EMPTY: u64 = 0;
/// A device read into the frame is in flight (this frame is the miss-status entry of its page).
pub(crate) const LOADING: u64 = 1;
/// The page is installed: frames may be pinned (only in this state).
pub(crate) const READY: u64 = 2;
/// The dirty page is being written back before the frame is reused; it cannot be pinned.
pub(crate) const WRITEBACK: u64 = 3;

const STATE_SHIFT: u32 = 56;
const PIN_MASK: u64 = u32::MAX as u64;

#[inline]
pub(crate) fn state_of(control: u64) -> u64 {
    control >> STATE_SHIFT
}

#[inline]
pub(crate) fn pins_of(control: u64) -> u64 {
    control & PIN_MASK
}

#[inline]
pub(crate) fn control(state: u64, pins: u64) -> u64 {
    debug_assert!(pins <= PIN_MASK);
    (state << STATE_SHIFT) | pins
}

/// Metadata of one 4 KiB frame: 32 bytes (two frames per cache line).
///
/// Protocol:
/// - `tag` changes only while the frame is not `READY` and only its owner (the thread that moved
///   it out of `READY` or `EMPTY` with a compare-and-swap) writes it, under the set lock.
/// - Pinning is a compare-and-swap `READY|n → READY|n+1`, followed by a re-check of `tag`;
///   eviction is a compare-and-swap `READY|0 → LOADING|1` (or `→ WRITEBACK|0`). The two cannot
///   both succeed on the same value, so a pinned frame is never evicted and an evicted frame is
///   never pinned.
#[repr(C)]
pub(crate) struct Frame {
    /// The page held (or being loaded), [`NO_PAGE`] when none.
    pub tag: AtomicU64,
    /// State (top byte) and pin count (low 32 bits).
    pub control: AtomicU64,
    /// The version latch: even = unlocked, odd = held exclusively; +1 on acquire, +1 on release.
    pub version: AtomicU64,
    /// Threads holding the latch in shared mode.
    pub readers: AtomicU32,
    /// CLOCK reference bit.
    pub referenced: AtomicBool,
    /// Written since it was last read from or written to the device.
    pub dirty: AtomicBool,
    /// Holds an index page ([`crate::PageClass::Index`]): kept ahead of data pages by the
    /// eviction policy ([`crate::evict`]). Written under the set lock when the frame is
    /// claimed for a page (and, as a hint, when an index lookup hits a frame installed as
    /// data).
    pub index: AtomicBool,
    /// A data page installed by a miss and not asked for since: the set's probationary page
    /// (cleared by its first hit; see `PageCache::admit`).
    pub probation: AtomicBool,
}

impl Frame {
    pub(crate) fn new() -> Self {
        Self {
            tag: AtomicU64::new(NO_PAGE),
            control: AtomicU64::new(control(EMPTY, 0)),
            version: AtomicU64::new(0),
            readers: AtomicU32::new(0),
            referenced: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            index: AtomicBool::new(false),
            probation: AtomicBool::new(false),
        }
    }

    /// Claims an `EMPTY` frame for loading (state `LOADING`, one pin, the claimer's).
    #[inline]
    pub(crate) fn try_claim_empty(&self) -> bool {
        self.control
            .compare_exchange(
                control(EMPTY, 0),
                control(LOADING, 1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Pins the frame if it is `READY` and holds `page`; `touch` sets the CLOCK bit.
    #[inline]
    pub(crate) fn try_pin(&self, page: u64, touch: bool) -> bool {
        let mut current = self.control.load(Ordering::Acquire);
        loop {
            if state_of(current) != READY {
                return false;
            }
            match self.control.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
        // The tag cannot change while we hold a pin; it may have changed before it.
        if self.tag.load(Ordering::Acquire) != page {
            self.unpin();
            return false;
        }
        if touch && !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
        if touch && self.probation.load(Ordering::Relaxed) {
            self.probation.store(false, Ordering::Relaxed);
        }
        true
    }

    /// Adds a pin to a frame already pinned by the caller.
    #[inline]
    pub(crate) fn add_pin(&self) {
        let before = self.control.fetch_add(1, Ordering::AcqRel);
        debug_assert!(pins_of(before) > 0 && state_of(before) == READY);
    }

    /// Drops one pin.
    #[inline]
    pub(crate) fn unpin(&self) {
        let before = self.control.fetch_sub(1, Ordering::AcqRel);
        assert!(pins_of(before) > 0, "pin count would go negative");
    }

    /// Current state.
    #[inline]
    pub(crate) fn state(&self) -> u64 {
        state_of(self.control.load(Ordering::Acquire))
    }

    /// Moves an unpinned `READY` frame to `to` (with `pins` pins); fails if it is pinned or not
    /// `READY`.
    pub(crate) fn try_claim(&self, to: u64, pins: u64) -> bool {
        self.control
            .compare_exchange(
                control(READY, 0),
                control(to, pins),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Replaces the state, keeping the pin count; returns the previous control word.
    pub(crate) fn set_state(&self, state: u64) -> u64 {
        let mut current = self.control.load(Ordering::Acquire);
        loop {
            let next = control(state, pins_of(current));
            match self.control.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(previous) => return previous,
                Err(seen) => current = seen,
            }
        }
    }

    // --- the version latch ---

    /// The version if no writer holds the latch.
    #[inline]
    pub(crate) fn optimistic_begin(&self) -> Option<u64> {
        let version = self.version.load(Ordering::Acquire);
        (version & 1 == 0).then_some(version)
    }

    /// True when no writer held the latch since `optimistic_begin` returned `version`.
    #[inline]
    pub(crate) fn optimistic_validate(&self, version: u64) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == version
    }

    /// One attempt at the shared latch.
    #[inline]
    pub(crate) fn try_lock_shared(&self) -> bool {
        self.readers.fetch_add(1, Ordering::SeqCst);
        if self.version.load(Ordering::SeqCst) & 1 == 0 {
            return true;
        }
        self.readers.fetch_sub(1, Ordering::SeqCst);
        false
    }

    #[inline]
    pub(crate) fn unlock_shared(&self) {
        let before = self.readers.fetch_sub(1, Ordering::Release);
        assert!(before > 0, "shared latch released more often than taken");
    }

    /// One attempt at the exclusive latch: turns an even version odd. The caller then waits for
    /// `readers` to drain ([`Frame::readers_drained`]).
    #[inline]
    pub(crate) fn try_lock_exclusive(&self) -> Option<u64> {
        let version = self.version.load(Ordering::Relaxed);
        if version & 1 == 1 {
            return None;
        }
        self.version
            .compare_exchange(version, version + 1, Ordering::SeqCst, Ordering::Relaxed)
            .ok()
            .map(|_| version + 1)
    }

    #[inline]
    pub(crate) fn readers_drained(&self) -> bool {
        self.readers.load(Ordering::SeqCst) == 0
    }

    /// Releases the exclusive latch taken at odd version `held`.
    #[inline]
    pub(crate) fn unlock_exclusive(&self, held: u64) {
        debug_assert_eq!(held & 1, 1);
        let before = self.version.fetch_add(1, Ordering::Release);
        assert_eq!(before, held, "exclusive latch changed while held");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Frame>(), 32);
    }

    #[test]
    fn pin_and_claim_exclude_each_other() {
        let frame = Frame::new();
        frame.tag.store(5, Ordering::Relaxed);
        assert!(!frame.try_pin(5, true), "an empty frame is not pinnable");
        frame.control.store(control(READY, 0), Ordering::Relaxed);
        assert!(frame.try_pin(5, true));
        assert!(!frame.try_pin(6, true), "tag mismatch");
        assert!(
            !frame.try_claim(LOADING, 1),
            "pinned frames are not evicted"
        );
        frame.unpin();
        assert!(frame.try_claim(LOADING, 1));
        assert!(!frame.try_pin(5, true), "a loading frame is not pinnable");
    }

    #[test]
    fn latch_versions_are_monotonic_and_detect_writers() {
        let frame = Frame::new();
        let v0 = frame.optimistic_begin().unwrap();
        assert!(frame.try_lock_shared());
        assert!(
            frame.optimistic_validate(v0),
            "readers do not change the version"
        );
        let held = frame.try_lock_exclusive().unwrap();
        assert!(!frame.readers_drained());
        assert!(
            !frame.try_lock_shared(),
            "no new reader while a writer waits"
        );
        assert!(frame.optimistic_begin().is_none());
        frame.unlock_shared();
        assert!(frame.readers_drained());
        frame.unlock_exclusive(held);
        assert!(!frame.optimistic_validate(v0));
        let v1 = frame.optimistic_begin().unwrap();
        assert_eq!(v1, v0 + 2);
    }

    #[test]
    #[should_panic(expected = "negative")]
    fn unpin_below_zero_panics() {
        let frame = Frame::new();
        frame.control.store(control(READY, 0), Ordering::Relaxed);
        frame.unpin();
    }
}
