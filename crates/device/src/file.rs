//! The preallocated data file under the uring and sync devices. The file system is "recycled"
//! (the Moneta study) for naming, allocation and permissions, and stays out of the data path: every
//! access is `O_DIRECT`.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand::{RngCore, SeedableRng};

use crate::{DeviceError, BLOCK_SIZE};

/// An open `O_DIRECT` file of a fixed capacity.
#[derive(Debug)]
pub struct DeviceFile {
    file: File,
    path: PathBuf,
    /// Grows only ([`DeviceFile::grow_to`]); devices read it on every request.
    capacity_bytes: AtomicU64,
    grow_lock: Mutex<()>,
}

impl DeviceFile {
    /// Opens (creating if needed) `path` with `O_DIRECT` and preallocates `capacity_bytes`
    /// (rounded down to whole blocks). An existing larger file keeps its size.
    pub fn open(path: &Path, capacity_bytes: u64) -> Result<Self, DeviceError> {
        let capacity_bytes = capacity_bytes / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;
        if capacity_bytes == 0 {
            return Err(DeviceError::Config(format!(
                "capacity of {capacity_bytes} bytes for {}: must be at least one 4 KiB block",
                path.display()
            )));
        }
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|err| {
                if err.raw_os_error() == Some(libc::EINVAL) {
                    DeviceError::NoDirectIo {
                        path: path.display().to_string(),
                    }
                } else {
                    DeviceError::os(format!("opening {}", path.display()), err)
                }
            })?;
        // Since Linux 6.6 tmpfs accepts O_DIRECT at open but still serves every access from the
        // page cache (DRAM): refuse it as older kernels do, rather than measure memory copies.
        // SAFETY: plain syscall on a valid descriptor into a zeroed, owned statfs.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0
            && fs.f_type as u64 == libc::TMPFS_MAGIC as u64
        {
            if !existed {
                // Refused: leave nothing behind that this call created.
                let _ = std::fs::remove_file(path);
            }
            return Err(DeviceError::NoDirectIo {
                path: path.display().to_string(),
            });
        }
        let current = file
            .metadata()
            .map_err(|err| DeviceError::os(format!("stat {}", path.display()), err))?
            .len();
        if current < capacity_bytes {
            // SAFETY: plain syscall on a valid descriptor.
            let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, capacity_bytes as i64) };
            if rc != 0 {
                return Err(DeviceError::Os {
                    what: format!(
                        "preallocating {capacity_bytes} bytes for {} (free space or a file-size limit)",
                        path.display()
                    ),
                    errno: rc,
                });
            }
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            capacity_bytes: AtomicU64::new(capacity_bytes),
            grow_lock: Mutex::new(()),
        })
    }

    /// As [`DeviceFile::open`], but the capacity is the larger of `initial_bytes` and the
    /// existing file's size (whole blocks): for a file that grows with [`DeviceFile::grow_to`]
    /// and is reopened later.
    pub fn open_existing(path: &Path, initial_bytes: u64) -> Result<Self, DeviceError> {
        let current = std::fs::metadata(path).map_or(0, |m| m.len());
        Self::open(path, initial_bytes.max(current))
    }

    /// The usable size now (whole blocks).
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes.load(Ordering::Acquire)
    }

    /// Grows the file to at least `bytes` (rounded up to whole blocks) with `posix_fallocate`;
    /// devices on this file accept the new range at once. A full disk or a file-size limit
    /// fails with an error for which [`DeviceError::is_no_space`] is true, leaving the
    /// capacity (and the data) as it was. Blocks the calling OS thread for the syscall.
    pub fn grow_to(&self, bytes: u64) -> Result<u64, DeviceError> {
        let block = BLOCK_SIZE as u64;
        let bytes = bytes.div_ceil(block) * block;
        let _guard = self.grow_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.capacity_bytes();
        if bytes <= current {
            return Ok(current);
        }
        // SAFETY: plain syscall on a valid descriptor.
        let rc = unsafe {
            libc::posix_fallocate(
                self.file.as_raw_fd(),
                current as i64,
                (bytes - current) as i64,
            )
        };
        if rc != 0 {
            return Err(DeviceError::Os {
                what: format!(
                    "growing {} from {current} to {bytes} bytes (free space or a file-size limit)",
                    self.path.display()
                ),
                errno: rc,
            });
        }
        self.capacity_bytes.store(bytes, Ordering::Release);
        Ok(bytes)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file's descriptor (owned by this `DeviceFile`; do not close it).
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// `fdatasync`: the durability barrier of the file-backed devices.
    pub fn sync_data(&self) -> Result<(), DeviceError> {
        self.file
            .sync_data()
            .map_err(|err| DeviceError::os(format!("fdatasync {}", self.path.display()), err))
    }
}

/// Writes seeded pseudo-random data over the whole file with large `O_DIRECT` writes, so that
/// later reads touch the device (reads of never-written extents return zeros without I/O), then
/// syncs. Block `i` starts with its own index so a test can check where a read came from.
pub fn fill_with_data(file: &DeviceFile, seed: u64) -> Result<(), DeviceError> {
    const CHUNK_BYTES: usize = 1 << 20;
    let layout = std::alloc::Layout::from_size_align(CHUNK_BYTES, BLOCK_SIZE).expect("valid");
    // SAFETY: non-zero size; freed below.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        return Err(DeviceError::Config(
            "cannot allocate the fill buffer".into(),
        ));
    }
    // SAFETY: ptr is a live allocation of CHUNK_BYTES bytes owned here.
    let chunk = unsafe { std::slice::from_raw_parts_mut(ptr, CHUNK_BYTES) };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut offset = 0u64;
    let mut result = Ok(());
    while offset < file.capacity_bytes() {
        let len = (file.capacity_bytes() - offset).min(CHUNK_BYTES as u64) as usize;
        rng.fill_bytes(&mut chunk[..len]);
        for (i, block) in chunk[..len].chunks_mut(BLOCK_SIZE).enumerate() {
            let index = offset / BLOCK_SIZE as u64 + i as u64;
            block[..8].copy_from_slice(&index.to_le_bytes());
        }
        // SAFETY: chunk is valid for len bytes; the fd is open.
        let written =
            unsafe { libc::pwrite(file.raw_fd(), chunk.as_ptr().cast(), len, offset as i64) };
        if written != len as isize {
            let err = std::io::Error::last_os_error();
            result = Err(DeviceError::os(
                format!("filling {}", file.path().display()),
                err,
            ));
            break;
        }
        offset += len as u64;
    }
    // SAFETY: allocated above with the same layout.
    unsafe { std::alloc::dealloc(ptr, layout) };
    result?;
    file.sync_data()
}
