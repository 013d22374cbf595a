//! The frame arena: one preallocated, 4 KiB-aligned memory region shared by every core's device
//! handle and registered with each io_uring ring as a fixed buffer.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{DeviceError, BLOCK_SIZE};

/// Largest arena: 2^20 frames (4 GiB), well inside io_uring's fixed-buffer limits per iovec
/// when split (we register one iovec per 1 GiB).
pub const MAX_ARENA_FRAMES: u32 = 1 << 20;

/// Arenas of at least this size are aligned to it and advised to use transparent huge pages.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// A contiguous array of 4 KiB frames.
///
/// Invariant: a frame is part of at most one device request at a time (`in_io`); while it is,
/// nothing else reads or writes it. The device sets the flag on push and clears it when the
/// completion is reaped; [`Arena::frame`] and [`Arena::frame_mut`] assert it is clear.
pub struct Arena {
    base: NonNull<u8>,
    frames: u32,
    in_io: Box<[AtomicBool]>,
}

// SAFETY: the arena is a plain memory region; all shared mutation of frame contents goes through
// `unsafe` accessors whose callers guarantee exclusive use of a frame, and the `in_io` flags are
// atomics.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    /// Allocates `frames` zeroed frames.
    pub fn new(frames: u32) -> Result<Self, DeviceError> {
        if frames == 0 || frames > MAX_ARENA_FRAMES {
            return Err(DeviceError::Config(format!(
                "arena of {frames} frames: must be 1..={MAX_ARENA_FRAMES}"
            )));
        }
        let layout = Self::layout(frames);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let base = NonNull::new(ptr).ok_or_else(|| {
            DeviceError::Config(format!(
                "cannot allocate an arena of {} bytes",
                layout.size()
            ))
        })?;
        if layout.align() == HUGE_PAGE_BYTES {
            // Transparent huge pages where the kernel has them: a 4 KiB-page arena of GiBs
            // misses the TLB on nearly every page it touches (a two-level walk when
            // virtualized). Advice only: failure, or few huge pages found, changes nothing else.
            // SAFETY: advice on the range just allocated, 2 MiB-aligned and sized.
            unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE) };
        }
        let in_io = (0..frames).map(|_| AtomicBool::new(false)).collect();
        Ok(Self {
            base,
            frames,
            in_io,
        })
    }

    /// 4 KiB-aligned; 2 MiB-aligned (for huge pages) from 2 MiB up.
    fn layout(frames: u32) -> Layout {
        let size = frames as usize * BLOCK_SIZE;
        let align = if size >= HUGE_PAGE_BYTES {
            HUGE_PAGE_BYTES
        } else {
            BLOCK_SIZE
        };
        Layout::from_size_align(size, align).expect("frame count is bounded by MAX_ARENA_FRAMES")
    }

    /// Number of frames.
    pub fn frame_count(&self) -> u32 {
        self.frames
    }

    /// Size of the whole arena in bytes.
    pub fn size_bytes(&self) -> usize {
        self.frames as usize * BLOCK_SIZE
    }

    /// Address of the first byte of `frame`. Panics when `frame` is out of range.
    pub fn frame_ptr(&self, frame: u32) -> *mut u8 {
        assert!(frame < self.frames, "frame {frame} out of {}", self.frames);
        // SAFETY: frame < frames, so the offset stays inside the allocation.
        unsafe { self.base.as_ptr().add(frame as usize * BLOCK_SIZE) }
    }

    /// The iovecs covering the arena, at most 1 GiB each, for io_uring buffer registration.
    pub(crate) fn iovecs(&self) -> Vec<libc::iovec> {
        const CHUNK_BYTES: usize = 1 << 30;
        let mut iovecs = Vec::new();
        let mut offset = 0;
        while offset < self.size_bytes() {
            let len = CHUNK_BYTES.min(self.size_bytes() - offset);
            iovecs.push(libc::iovec {
                // SAFETY: offset < size, inside the allocation.
                iov_base: unsafe { self.base.as_ptr().add(offset) }.cast(),
                iov_len: len,
            });
            offset += len;
        }
        iovecs
    }

    /// Index of the registered buffer (iovec) holding `frame`.
    pub(crate) fn buffer_index(&self, frame: u32) -> u16 {
        const FRAMES_PER_CHUNK: u32 = (1 << 30) / BLOCK_SIZE as u32;
        (frame / FRAMES_PER_CHUNK) as u16
    }

    /// Marks `frames` frames from `first` as in I/O; fails without marking any if one already is.
    pub(crate) fn begin_io(&self, first: u32, frames: u32) -> Result<(), DeviceError> {
        for frame in first..first + frames {
            if self.in_io[frame as usize].swap(true, Ordering::Acquire) {
                for undo in first..frame {
                    self.in_io[undo as usize].store(false, Ordering::Release);
                }
                return Err(DeviceError::FrameBusy { frame });
            }
        }
        Ok(())
    }

    /// Clears the in-I/O mark set by [`Arena::begin_io`].
    pub(crate) fn end_io(&self, first: u32, frames: u32) {
        for frame in first..first + frames {
            let was = self.in_io[frame as usize].swap(false, Ordering::Release);
            assert!(was, "frame {frame} completed an I/O it was not part of");
        }
    }

    /// True while `frame` is part of a request in flight.
    pub fn is_in_io(&self, frame: u32) -> bool {
        self.in_io[frame as usize].load(Ordering::Acquire)
    }

    /// The contents of `frame`.
    ///
    /// # Safety
    /// No one writes `frame` for the lifetime of the returned slice (no `frame_mut` of it, no
    /// read request into it).
    pub unsafe fn frame(&self, frame: u32) -> &[u8] {
        debug_assert!(!self.is_in_io(frame), "frame {frame} read while in I/O");
        // SAFETY: in range (frame_ptr asserts); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts(self.frame_ptr(frame), BLOCK_SIZE) }
    }

    /// The contents of `frame`, writable.
    ///
    /// # Safety
    /// The caller has exclusive use of `frame` for the lifetime of the returned slice: no other
    /// reference to it exists and it is not part of a request in flight.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn frame_mut(&self, frame: u32) -> &mut [u8] {
        debug_assert!(!self.is_in_io(frame), "frame {frame} written while in I/O");
        // SAFETY: in range (frame_ptr asserts); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.frame_ptr(frame), BLOCK_SIZE) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { dealloc(self.base.as_ptr(), Self::layout(self.frames)) };
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("frames", &self.frames)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_aligned_and_zeroed() {
        let arena = Arena::new(3).unwrap();
        for frame in 0..3 {
            assert_eq!(arena.frame_ptr(frame) as usize % BLOCK_SIZE, 0);
            // SAFETY: single-threaded test, no I/O.
            assert!(unsafe { arena.frame(frame) }.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn a_frame_is_in_at_most_one_io() {
        let arena = Arena::new(4).unwrap();
        arena.begin_io(1, 2).unwrap();
        assert_eq!(
            arena.begin_io(2, 2),
            Err(DeviceError::FrameBusy { frame: 2 })
        );
        // The failed attempt must not leave frame 3 marked.
        assert!(!arena.is_in_io(3));
        arena.end_io(1, 2);
        arena.begin_io(0, 4).unwrap();
    }

    #[test]
    fn rejects_empty_and_huge() {
        assert!(Arena::new(0).is_err());
        assert!(Arena::new(MAX_ARENA_FRAMES + 1).is_err());
    }
}
