//! What a measured point produced: a window's [`Measurement`] and the quantities derived from
//! it, the labelled closed-loop [`Point`] and open-loop [`LoadPoint`] a device's run collects,
//! and the ratios the figures are made of.

use super::plan::{Config, Target, Workload};
use crate::blockdev::BlockWindow;

/// What one measured point produced.
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    /// Operations completed in the window.
    pub ops: u64,
    /// Length of the window, seconds.
    pub secs: f64,
    /// Latency quantiles from the job's submission (closed loop) or its *scheduled* arrival
    /// (open loop: the client's view, the load generator's lateness included).
    pub p50_us: f64,
    /// 99th percentile of the same.
    pub p99_us: f64,
    /// Open loop: the same from the moment the load generator handed the job to the store
    /// (the store's own tail, without the generator's lateness). Closed loop: equal to the
    /// above.
    pub p50_from_submit_us: f64,
    /// 99th percentile of the same.
    pub p99_from_submit_us: f64,
    /// Cache hits.
    pub hits: u64,
    /// Misses (each is one device read).
    pub misses: u64,
    /// Of `misses`, reads of index pages (hash buckets).
    pub index_misses: u64,
    /// Pages written back.
    pub write_backs: u64,
    /// Of the write-backs, those a miss made before its read (the rest: the cleaner, flush).
    pub victim_write_backs: u64,
    /// Misses that waited for another thread's read of the same page (parked on its frame).
    pub merged_misses: u64,
    /// Mean latency of a miss, µs.
    pub mean_miss_latency_us: f64,
    /// Operations that failed.
    pub errors: u64,
    /// Open loop: arrivals offered, refused (NACK).
    pub offered: u64,
    /// Of `offered`, those refused.
    pub dropped: u64,
    /// Open loop: the latest the load generator submitted a measured arrival after its
    /// scheduled time, in µs (its own CPU was taken: host steal, softirqs). Latencies count
    /// from the schedule, so such a delay shows up as every job's queueing.
    pub feeder_max_late_us: f64,
    /// Open loop: the share of measured arrivals submitted more than 100 µs late.
    pub feeder_late_fraction: f64,
    /// Major page faults of the process in the measured window (os-paging's device reads).
    pub major_faults: u64,
    /// Emulated device: CPU seconds the cores spent completing requests in the window (the
    /// emulator's data copies, which stand in for DMA).
    pub emulator_cpu_secs: f64,
    /// Device accesses in flight, averaged over samples of every core's published count
    /// (every 20 µs of the closed loop's measured window).
    pub sampled_in_flight: f64,
    /// Emulated device with DMA offload: copies its engine made in the window, and copies the
    /// polling core made because the engine had not reached them by their deadline.
    pub dma_engine_copies: u64,
    /// Copies the polling core made (see above).
    pub dma_core_copies: u64,
    /// Sparse data pages the store compacted during the measured window (space pressure).
    pub pages_compacted: u64,
    /// The store's cores in the window (summed over cores; `None` where the runtime's
    /// counters were not read): the share of their time spent with work but nothing runnable
    /// (waiting for the device, every thread parked), how long a job whose data was back
    /// waited for its core (p99, µs), and the aging threshold at the window's end (µs).
    pub core_waiting_fraction: Option<f64>,
    /// p99 wait of a job whose data was back, µs (see above).
    pub ready_wait_p99_us: Option<f64>,
    /// The aging threshold at the window's end, µs (see above).
    pub aging_threshold_us: Option<f64>,
    /// CPU time the store's executor threads used in the window, seconds (user + system;
    /// `None` when unreadable), and the kernel's share of it.
    pub core_cpu_secs: Option<f64>,
    /// The kernel's share of `core_cpu_secs`.
    pub core_system_share: Option<f64>,
    /// The disk's block-layer counters over the window (`None` on the emulated device and
    /// where not read): the requests at the device, whoever made them.
    pub block: Option<BlockWindow>,
}

impl Measurement {
    /// Adds `other`'s operations, time and counters to these (latency quantiles, averages
    /// and gauges are left for the caller to recompute).
    pub fn add(&mut self, other: &Measurement) {
        let misses = (self.misses + other.misses).max(1) as f64;
        self.mean_miss_latency_us = (self.mean_miss_latency_us * self.misses as f64
            + other.mean_miss_latency_us * other.misses as f64)
            / misses;
        self.ops += other.ops;
        self.secs += other.secs;
        self.hits += other.hits;
        self.misses += other.misses;
        self.index_misses += other.index_misses;
        self.write_backs += other.write_backs;
        self.victim_write_backs += other.victim_write_backs;
        self.merged_misses += other.merged_misses;
        self.errors += other.errors;
        self.major_faults += other.major_faults;
        self.emulator_cpu_secs += other.emulator_cpu_secs;
        self.dma_engine_copies += other.dma_engine_copies;
        self.dma_core_copies += other.dma_core_copies;
        self.pages_compacted += other.pages_compacted;
        self.core_cpu_secs = self
            .core_cpu_secs
            .zip(other.core_cpu_secs)
            .map(|(a, b)| a + b);
        // Time-weighted: the shares of the two windows by their lengths.
        let weighted = |a: Option<f64>, b: Option<f64>, wa: f64, wb: f64| {
            a.zip(b)
                .map(|(a, b)| (a * wa + b * wb) / (wa + wb).max(1e-9))
        };
        let (wa, wb) = (self.secs - other.secs, other.secs);
        self.core_waiting_fraction = weighted(
            self.core_waiting_fraction,
            other.core_waiting_fraction,
            wa,
            wb,
        );
        self.core_system_share = weighted(self.core_system_share, other.core_system_share, wa, wb);
        self.sampled_in_flight =
            (self.sampled_in_flight * wa + other.sampled_in_flight * wb) / (wa + wb).max(1e-9);
        self.ready_wait_p99_us = match (self.ready_wait_p99_us, other.ready_wait_p99_us) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.aging_threshold_us = other.aging_threshold_us.or(self.aging_threshold_us);
        self.block = match (self.block, other.block) {
            (Some(a), Some(b)) => Some(a.merged(&b)),
            (a, b) => a.or(b),
        };
    }

    /// Operations per second of the window.
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
    /// Device accesses (reads of misses + write-backs) per second.
    pub fn device_iops(&self) -> f64 {
        (self.misses + self.write_backs) as f64 / self.secs.max(1e-9)
    }
    /// Average device accesses in flight (Little's law: IOPS × mean miss latency).
    pub fn avg_in_flight(&self) -> f64 {
        self.device_iops() * self.mean_miss_latency_us / 1e6
    }
    /// µs of one core's time between two misses.
    pub fn miss_interval_us(&self, cores: usize) -> Option<f64> {
        (self.misses > 0).then(|| self.secs * cores as f64 * 1e6 / self.misses as f64)
    }
    /// Device reads per operation (a job's operations: one, or a TATP transaction's).
    pub fn device_reads_per_op(&self) -> f64 {
        self.misses as f64 / self.ops.max(1) as f64
    }
    /// Of those, reads of index pages.
    pub fn index_reads_per_op(&self) -> f64 {
        self.index_misses as f64 / self.ops.max(1) as f64
    }
    /// The store's CPU µs per device access (reads and write-backs), kernel time included.
    pub fn cpu_us_per_io(&self) -> Option<f64> {
        let ios = self.misses + self.write_backs;
        self.core_cpu_secs
            .filter(|_| ios > 0)
            .map(|secs| secs * 1e6 / ios as f64)
    }
    /// Hits over hits and misses.
    pub fn hit_ratio(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }
    /// Dropped over offered arrivals.
    pub fn drop_fraction(&self) -> f64 {
        self.dropped as f64 / self.offered.max(1) as f64
    }
}

/// The queue depth fio is run at for a measured average in-flight count: rounded, 1..=128.
pub fn fio_queue_depth(avg_in_flight: f64) -> usize {
    (avg_in_flight.round() as usize).clamp(1, 128)
}

/// What fio did on the store's file beside a point (random 4 KiB reads, O_DIRECT, io_uring).
#[derive(Clone, Debug, PartialEq)]
pub struct FioPoint {
    /// fio's `iodepth`.
    pub qd: usize,
    pub iops: f64,
    /// The disk's average queue depth at the block layer while fio ran (`None`: not read).
    pub device_qd: Option<f64>,
    /// fio's CPU (user + system) per I/O, µs.
    pub cpu_us_per_io: Option<f64>,
}

/// The fio points beside a closed-loop point on the disk: at the queue depth the disk itself
/// saw (its block-layer average, the utilization's reference) and at the store's own count of
/// I/Os it held (issued and not yet reaped, sampled), when that differs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FioBeside {
    pub at_device_qd: Option<FioPoint>,
    pub at_held_qd: Option<FioPoint>,
}

/// `num / den` when both are measured and `den` is positive.
pub fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

/// One measured closed-loop point.
#[derive(Clone, Debug)]
pub struct Point {
    /// The device.
    pub target: Target,
    /// The configuration.
    pub config: Config,
    /// The workload.
    pub workload: Workload,
    /// What it measured.
    pub m: Measurement,
    /// fio beside it (disk only).
    pub fio: FioBeside,
}

impl Point {
    /// The store's device IOPS ÷ fio's at the disk's queue depth during the point.
    pub fn device_iops_utilization(&self) -> Option<f64> {
        let fio = self.fio.at_device_qd.as_ref()?;
        ratio(Some(self.m.device_iops()), Some(fio.iops))
    }

    /// The same against fio at the count of I/Os the store held.
    pub fn held_iops_utilization(&self) -> Option<f64> {
        let fio = self
            .fio
            .at_held_qd
            .as_ref()
            .or(self.fio.at_device_qd.as_ref())?;
        ratio(Some(self.m.device_iops()), Some(fio.iops))
    }
}

/// One open-loop point.
#[derive(Clone, Debug)]
pub struct LoadPoint {
    /// The device.
    pub target: Target,
    /// The configuration.
    pub config: Config,
    /// The workload.
    pub workload: Workload,
    /// The offered load as a fraction of `dram`'s closed-loop throughput.
    pub fraction: f64,
    /// The offered load, operations per second.
    pub rate: f64,
    /// What it measured.
    pub m: Measurement,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurement_accounting() {
        let m = Measurement {
            ops: 1_000,
            secs: 0.5,
            misses: 400,
            write_backs: 100,
            hits: 1_600,
            mean_miss_latency_us: 50.0,
            offered: 200,
            dropped: 50,
            ..Measurement::default()
        };
        assert_eq!(m.ops_per_s(), 2_000.0);
        assert_eq!(m.device_iops(), 1_000.0);
        // Little: 1000 /s × 50 µs = 0.05 in flight.
        assert!((m.avg_in_flight() - 0.05).abs() < 1e-12);
        // 0.5 s on 2 cores = 1 s of core time over 400 misses: 2500 µs.
        assert_eq!(m.miss_interval_us(2), Some(2_500.0));
        assert_eq!(Measurement::default().miss_interval_us(1), None);
        assert_eq!(m.hit_ratio(), 0.8);
        assert_eq!(m.drop_fraction(), 0.25);
    }

    #[test]
    fn fio_depth_and_ratios() {
        assert_eq!(fio_queue_depth(0.2), 1);
        assert_eq!(fio_queue_depth(7.6), 8);
        assert_eq!(fio_queue_depth(900.0), 128);
        assert_eq!(ratio(Some(1.0), Some(2.0)), Some(0.5));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
    }

    /// Mutations caught: slices combined by averaging rates (operations or time not summed),
    /// the miss latency or the kernel's share not weighted, the disk's windows dropped.
    #[test]
    fn slices_add_up() {
        let slice = |ops, secs, misses, miss_us, share, qd| Measurement {
            ops,
            secs,
            misses,
            mean_miss_latency_us: miss_us,
            core_cpu_secs: Some(secs),
            core_system_share: Some(share),
            block: Some(BlockWindow {
                secs,
                reads: misses,
                writes: 0,
                queue_depth: qd,
                read_latency_us: Some(miss_us),
                busy: 1.0,
            }),
            ..Measurement::default()
        };
        let mut m = slice(100, 0.1, 10, 100.0, 0.2, 2.0);
        m.add(&slice(300, 0.3, 30, 500.0, 0.4, 6.0));
        assert_eq!(m.ops, 400);
        assert!((m.secs - 0.4).abs() < 1e-12);
        assert_eq!(m.ops_per_s(), 1_000.0);
        assert_eq!(m.misses, 40);
        assert!((m.mean_miss_latency_us - 400.0).abs() < 1e-9);
        assert!((m.core_cpu_secs.unwrap() - 0.4).abs() < 1e-12);
        assert!((m.core_system_share.unwrap() - 0.35).abs() < 1e-9);
        let block = m.block.unwrap();
        assert_eq!(block.reads, 40);
        assert!((block.queue_depth - 5.0).abs() < 1e-9);
    }
}
