//! A cgroup-v1 memory cgroup, to cap a baseline process's DRAM (its page cache included) to the
//! same budget as tamer's cache: the `os-paging` configuration of the tier benchmark lets the
//! kernel's demand paging do the I/O under that cap.

use std::path::{Path, PathBuf};

/// Where the cgroup-v1 memory controller is mounted on this machine.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup that exists for the lifetime of this value.
#[derive(Debug)]
pub struct MemoryCgroup {
    path: PathBuf,
}

impl MemoryCgroup {
    /// Creates `MEMORY_ROOT/<name>` with a limit of `limit_bytes` (page cache included). Fails
    /// with a message naming the fix when the controller is missing or not writable (needs root).
    pub fn create(name: &str, limit_bytes: u64) -> Result<Self, String> {
        let root = Path::new(MEMORY_ROOT);
        if !root.join("cgroup.procs").exists() {
            return Err(format!(
                "no cgroup-v1 memory controller at {MEMORY_ROOT}: os-paging needs it to cap DRAM"
            ));
        }
        let path = root.join(name);
        if !path.exists() {
            std::fs::create_dir(&path).map_err(|e| {
                format!(
                    "creating {} (run as root to cap a baseline's memory): {e}",
                    path.display()
                )
            })?;
        }
        let cgroup = Self { path };
        cgroup.write("memory.limit_in_bytes", &limit_bytes.to_string())?;
        Ok(cgroup)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.path.join(file), value)
            .map_err(|e| format!("writing {value} to {}/{file}: {e}", self.path.display()))
    }

    fn read_u64(&self, file: &str) -> Result<u64, String> {
        let text = std::fs::read_to_string(self.path.join(file))
            .map_err(|e| format!("reading {}/{file}: {e}", self.path.display()))?;
        text.trim()
            .parse()
            .map_err(|e| format!("parsing {}/{file}: {e}", self.path.display()))
    }

    /// Moves process `pid` into the cgroup.
    pub fn add(&self, pid: u32) -> Result<(), String> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// The limit in force (the kernel rounds it to pages).
    pub fn limit_bytes(&self) -> Result<u64, String> {
        self.read_u64("memory.limit_in_bytes")
    }

    /// Highest memory use (page cache included) since creation.
    pub fn max_usage_bytes(&self) -> Result<u64, String> {
        self.read_u64("memory.max_usage_in_bytes")
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Moves the calling process into the memory cgroup at `path` (created by another process, e.g.
/// a parent holding its [`MemoryCgroup`]): memory it charges from now on counts against the
/// cgroup's limit.
pub fn join_self(path: &Path) -> Result<(), String> {
    let pid = std::process::id().to_string();
    std::fs::write(path.join("cgroup.procs"), &pid)
        .map_err(|e| format!("joining {} (needs root): {e}", path.display()))
}

/// Sets the limit of the memory cgroup at `path` (page cache included); the kernel reclaims
/// down to it, or fails when it cannot.
pub fn set_limit(path: &Path, limit_bytes: u64) -> Result<(), String> {
    std::fs::write(path.join("memory.limit_in_bytes"), limit_bytes.to_string())
        .map_err(|e| format!("limiting {} to {limit_bytes} bytes: {e}", path.display()))
}

/// Highest memory use of the cgroup at `path` since it was created.
pub fn max_usage_of(path: &Path) -> Result<u64, String> {
    let file = path.join("memory.max_usage_in_bytes");
    std::fs::read_to_string(&file)
        .map_err(|e| format!("reading {}: {e}", file.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("parsing {}: {e}", file.display()))
}

/// This process's resident set (`VmRSS` of /proc/self/status), in bytes.
pub fn vm_rss_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status: {e}"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS in /proc/self/status")?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("unreadable {line:?}"))?;
    Ok(kib * 1024)
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // A cgroup can be removed once its processes have exited; a failure leaves an empty
        // directory behind, which is harmless.
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::Command;

    #[test]
    fn caps_a_process_page_cache_included() {
        let name = format!("tamer-test-{}", std::process::id());
        let limit = 32u64 << 20;
        let cgroup = match MemoryCgroup::create(&name, limit) {
            Ok(cgroup) => cgroup,
            Err(err) => {
                eprintln!("skipped: {err}");
                return;
            }
        };
        assert!(cgroup.limit_bytes().unwrap() <= limit);
        // A 96 MiB file read through the page cache by a process in the cgroup: its usage,
        // page cache included, stays under the cap (the kernel reclaims instead).
        let dir = std::env::temp_dir().join(format!("tamer-cgroup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("big");
        let mut f = std::fs::File::create(&file).unwrap();
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..96 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
        // Drop this file's pages from the page cache so the child really reads them.
        // SAFETY: plain syscall on an open descriptor.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        drop(f);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("sleep 0.1; cat {} > /dev/null", file.display()))
            .spawn()
            .unwrap();
        cgroup.add(child.id()).unwrap();
        assert!(child.wait().unwrap().success());
        let max_usage = cgroup.max_usage_bytes().unwrap();
        assert!(
            max_usage <= limit,
            "usage {max_usage} over the {limit}-byte cap"
        );
        assert!(
            max_usage > 1 << 20,
            "the child's reads were not charged: {max_usage}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
