//! The kernel's own counters of the block device under a file (`/sys/dev/block/M:m/stat`,
//! the numbers `iostat` reads): how many requests completed, and the sum of their latencies
//! from the block layer's start of the request to its completion. Over a window, that sum
//! divided by the window's length is the device's average queue depth (`iostat`'s `aqu-sz`,
//! Little's law), counted the same way for tamer and for fio: requests *at the device*, not
//! those a program holds before its doorbell or after the device completed them.
//!
//! The counters cover every process's I/O to the device; a benchmark window on a quiet disk
//! sees almost only its own.

use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stat file of the block device holding a file.
#[derive(Clone, Debug)]
pub struct BlockDevice {
    stat: PathBuf,
}

/// One reading of a device's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCounters {
    /// Reads completed (field 1).
    pub reads: u64,
    /// Time spent reading, ms (field 4).
    pub read_ms: u64,
    /// Writes completed (field 5).
    pub writes: u64,
    /// Time spent writing, ms (field 8).
    pub write_ms: u64,
    /// Sum of every request's time at the device (field 11, `time_in_queue`), ms.
    pub queue_ms: u64,
    /// Time the device had at least one request (field 10, `io_ticks`), ms.
    pub busy_ms: u64,
}

/// A device's counters over a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockWindow {
    /// Length of the window, seconds.
    pub secs: f64,
    /// Reads completed in the window.
    pub reads: u64,
    /// Writes completed in the window.
    pub writes: u64,
    /// Average requests at the device (Σ request latency ÷ window).
    pub queue_depth: f64,
    /// Mean latency of a read at the block layer, µs (`None` without reads).
    pub read_latency_us: Option<f64>,
    /// Share of the window the device had a request.
    pub busy: f64,
}

impl BlockWindow {
    /// Requests (reads and writes) per second.
    pub fn iops(&self) -> f64 {
        (self.reads + self.writes) as f64 / self.secs.max(1e-9)
    }

    /// Two windows as one: counts and time summed, the queue depth and busy share weighted by
    /// time, the read latency by reads.
    pub fn merged(&self, other: &BlockWindow) -> BlockWindow {
        let secs = self.secs + other.secs;
        let by_time = |a: f64, b: f64| (a * self.secs + b * other.secs) / secs.max(1e-9);
        let reads = self.reads + other.reads;
        let read_latency_us = match (self.read_latency_us, other.read_latency_us) {
            (Some(a), Some(b)) => {
                Some((a * self.reads as f64 + b * other.reads as f64) / reads.max(1) as f64)
            }
            (a, b) => a.or(b),
        };
        BlockWindow {
            secs,
            reads,
            writes: self.writes + other.writes,
            queue_depth: by_time(self.queue_depth, other.queue_depth),
            read_latency_us,
            busy: by_time(self.busy, other.busy),
        }
    }
}

impl BlockDevice {
    /// The device under `path` (a file or directory on it), or `None` where the kernel shows
    /// none (a file system without a block device, such as tmpfs or overlay).
    pub fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path).ok()?.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let stat = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        let device = Self { stat };
        device.read().is_ok().then_some(device)
    }

    /// The counters now.
    pub fn read(&self) -> Result<BlockCounters, String> {
        let text = std::fs::read_to_string(&self.stat)
            .map_err(|e| format!("{}: {e}", self.stat.display()))?;
        parse_stat(&text).ok_or_else(|| format!("{}: unexpected {text:?}", self.stat.display()))
    }

    /// Starts a window.
    pub fn start(&self) -> Option<(BlockCounters, Instant)> {
        self.read().ok().map(|c| (c, Instant::now()))
    }

    /// The window from `start` to now (`None` when either reading failed).
    pub fn finish(&self, start: Option<(BlockCounters, Instant)>) -> Option<BlockWindow> {
        let (before, at) = start?;
        let after = self.read().ok()?;
        Some(window(&before, &after, at.elapsed().as_secs_f64()))
    }
}

/// The fields of a block device's `stat` file (11 or more numbers).
pub fn parse_stat(text: &str) -> Option<BlockCounters> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 11 {
        return None;
    }
    Some(BlockCounters {
        reads: fields[0],
        read_ms: fields[3],
        writes: fields[4],
        write_ms: fields[7],
        busy_ms: fields[9],
        queue_ms: fields[10],
    })
}

/// The window between two readings `secs` apart. Counters that went backwards (a device
/// reset) count as zero.
pub fn window(before: &BlockCounters, after: &BlockCounters, secs: f64) -> BlockWindow {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let reads = d(after.reads, before.reads);
    let read_ms = d(after.read_ms, before.read_ms);
    let secs = secs.max(1e-9);
    BlockWindow {
        secs,
        reads,
        writes: d(after.writes, before.writes),
        queue_depth: d(after.queue_ms, before.queue_ms) as f64 / 1e3 / secs,
        read_latency_us: (reads > 0).then(|| read_ms as f64 * 1e3 / reads as f64),
        busy: (d(after.busy_ms, before.busy_ms) as f64 / 1e3 / secs).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations caught: fields read from the wrong columns, the queue depth not divided by
    /// the window, latencies per request wrong.
    #[test]
    fn a_window_is_littles_law_over_the_kernels_counters() {
        let before = parse_stat("  100 0 800 50 10 0 80 20 0 40 70 0 0 0 0 0 0").unwrap();
        assert_eq!(before.reads, 100);
        assert_eq!(before.read_ms, 50);
        assert_eq!(before.writes, 10);
        assert_eq!(before.write_ms, 20);
        assert_eq!(before.busy_ms, 40);
        assert_eq!(before.queue_ms, 70);
        // 2 s later: 40 000 reads of 0.5 ms each, 1 000 writes of 1 ms: 21 s of requests.
        let after = BlockCounters {
            reads: 40_100,
            read_ms: 20_050,
            writes: 1_010,
            write_ms: 1_020,
            busy_ms: 2_040,
            queue_ms: 21_070,
        };
        let w = window(&before, &after, 2.0);
        assert_eq!(w.reads, 40_000);
        assert!((w.queue_depth - 10.5).abs() < 1e-9, "{}", w.queue_depth);
        assert!((w.read_latency_us.unwrap() - 500.0).abs() < 1e-9);
        assert!((w.iops() - 20_500.0).abs() < 1e-9);
        assert!((w.busy - 1.0).abs() < 1e-9);
        let both = w.merged(&BlockWindow {
            secs: 2.0,
            reads: 0,
            writes: 0,
            queue_depth: 0.5,
            read_latency_us: None,
            busy: 0.5,
        });
        assert_eq!(both.reads, 40_000);
        assert!((both.queue_depth - 5.5).abs() < 1e-9, "time-weighted");
        assert_eq!(both.read_latency_us, w.read_latency_us, "read-weighted");
        assert!((both.busy - 0.75).abs() < 1e-9);
        assert_eq!(parse_stat("1 2 3"), None, "too few fields");
        assert_eq!(parse_stat("1 2 x 4 5 6 7 8 9 10 11"), None);
    }

    /// Mutation caught: a device found for a path on none, or none for the disk a test
    /// writes to (where `/sys` shows it).
    #[test]
    fn the_device_under_a_file_is_found_where_the_kernel_shows_one() {
        let dir = std::env::temp_dir();
        if let Some(device) = BlockDevice::of(&dir) {
            let counters = device.read().unwrap();
            let later = device.read().unwrap();
            assert!(later.reads >= counters.reads);
        }
        assert!(BlockDevice::of(Path::new("/proc/self")).is_none());
    }
}
