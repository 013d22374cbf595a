use std::fmt;
use std::io;

/// Every way a device request or a device open can fail. Messages name the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// A request with zero frames.
    EmptyRequest,
    /// The device offset is not a multiple of 4 KiB.
    MisalignedOffset {
        /// The offset asked for, bytes.
        offset_bytes: u64,
    },
    /// The request runs past the end of the device.
    OutOfRange {
        /// Where the request starts, bytes.
        offset_bytes: u64,
        /// How much it moves, bytes.
        len_bytes: u64,
        /// The device's size, bytes.
        capacity_bytes: u64,
    },
    /// The request names frames outside the arena.
    BadFrame {
        /// The request's first frame.
        frame: u32,
        /// How many frames it names.
        frames: u32,
        /// Frames in the arena.
        arena_frames: u32,
    },
    /// A frame is already part of a request in flight.
    FrameBusy {
        /// The busy frame.
        frame: u32,
    },
    /// The handle already has `queue_depth` requests in flight; reap completions first.
    QueueFull {
        /// The handle's bound on requests in flight.
        queue_depth: usize,
    },
    /// The file system refuses `O_DIRECT` (tmpfs does).
    NoDirectIo {
        /// The file that could not be opened.
        path: String,
    },
    /// io_uring cannot be set up here (kernel too old, disabled by sysctl or seccomp).
    UringUnavailable {
        /// Why, as the kernel or the environment said.
        reason: String,
    },
    /// A bad configuration value.
    Config(String),
    /// The device transferred fewer bytes than asked.
    ShortTransfer {
        /// Bytes asked for.
        expected_bytes: u64,
        /// Bytes moved.
        actual_bytes: u64,
    },
    /// An operating-system error, with what was being done.
    Os {
        /// What was being done.
        what: String,
        /// The `errno` it failed with.
        errno: i32,
    },
}

impl DeviceError {
    pub(crate) fn os(what: impl Into<String>, err: io::Error) -> Self {
        DeviceError::Os {
            what: what.into(),
            errno: err.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    /// True for a full disk or a file-size limit: the caller may free space and retry.
    pub fn is_no_space(&self) -> bool {
        matches!(self, DeviceError::Os { errno, .. } if *errno == libc::ENOSPC || *errno == libc::EFBIG)
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::EmptyRequest => write!(f, "request of zero blocks: ask for at least one"),
            DeviceError::MisalignedOffset { offset_bytes } => write!(
                f,
                "offset {offset_bytes} is not a multiple of 4096 bytes: device I/O is in whole 4 KiB blocks"
            ),
            DeviceError::OutOfRange { offset_bytes, len_bytes, capacity_bytes } => write!(
                f,
                "request of {len_bytes} bytes at offset {offset_bytes} runs past the device end \
                 ({capacity_bytes} bytes): grow the device or fix the offset"
            ),
            DeviceError::BadFrame { frame, frames, arena_frames } => write!(
                f,
                "frames {frame}..{} are outside the arena of {arena_frames} frames \
                 (or the request is over 4096 frames or crosses a 1 GiB arena chunk): \
                 split it or size the arena for it",
                u64::from(*frame) + u64::from(*frames)
            ),
            DeviceError::FrameBusy { frame } => {
                write!(f, "frame {frame} is already in an I/O: wait for its completion first")
            }
            DeviceError::QueueFull { queue_depth } => write!(
                f,
                "{queue_depth} requests already in flight: reap completions before pushing more"
            ),
            DeviceError::NoDirectIo { path } => write!(
                f,
                "the file system holding {path} does not support O_DIRECT (tmpfs does not): \
                 put the data directory on a disk-backed file system such as ext4 or xfs"
            ),
            DeviceError::UringUnavailable { reason } => write!(
                f,
                "io_uring is unavailable ({reason}): enable it (sysctl kernel.io_uring_disabled=0) \
                 or choose the sync device"
            ),
            DeviceError::Config(msg) => write!(f, "bad device configuration: {msg}"),
            DeviceError::ShortTransfer { expected_bytes, actual_bytes } => write!(
                f,
                "short transfer: {actual_bytes} of {expected_bytes} bytes (file shorter than the device?)"
            ),
            DeviceError::Os { what, errno } => {
                write!(f, "{what}: {}", io::Error::from_raw_os_error(*errno))
            }
        }
    }
}

impl std::error::Error for DeviceError {}
