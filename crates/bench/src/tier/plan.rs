//! What a run measures and how large it is: the workloads, the configurations, the devices,
//! the [`Plan`] (sizes, durations, rounds), the store's sizing and the options each
//! configuration opens it with, and the seeds every run derives from `--seed`.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_cache::{MAX_FRAMES, PAGE_SIZE};
use tamer_runtime::io::WaitMode;
use tamer_runtime::{IdleMode, Policy};
use tamer_store::{DbOptions, DeviceKind, Durability};

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// YCSB-B: 95 % reads, 5 % updates.
    YcsbB,
    /// YCSB-C: reads only.
    YcsbC,
    /// A TATP-like mix.
    Tatp,
}

impl Workload {
    /// Every workload, in order.
    pub const ALL: [Workload; 3] = [Workload::YcsbB, Workload::YcsbC, Workload::Tatp];
    /// The workload's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Workload::YcsbB => "ycsb_b",
            Workload::YcsbC => "ycsb_c",
            Workload::Tatp => "tatp",
        }
    }
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "ycsb_b" | "b" => Ok(Workload::YcsbB),
            "ycsb_c" | "c" => Ok(Workload::YcsbC),
            "tatp" => Ok(Workload::Tatp),
            other => Err(format!("unknown workload {other:?}: ycsb-b, ycsb-c, tatp")),
        }
    }
}

/// The configurations (same engine, options differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// A cache as large as the data: everything in DRAM.
    Dram,
    /// A small cache, switch-on-miss, the priority + aging scheduler.
    Tamer,
    /// The same with the FIFO scheduler.
    TamerFifo,
    /// The same cache; a miss blocks the core.
    FlashSync,
    /// Runs in a child process under a cgroup memory limit (see
    /// [`run_os_paging_worker`](super::run_os_paging_worker)); not in [`Config::ALL`], which
    /// lists the in-process configurations.
    OsPaging,
}

impl Config {
    /// The configurations a device's run opens a store for, in order. `tamer-fifo` runs on
    /// `tamer`'s store, in windows alternating with `tamer`'s (`policy_rounds`).
    pub const ALL: [Config; 3] = [Config::Dram, Config::Tamer, Config::FlashSync];
    /// The configurations of the table and the throughput plot, in order.
    pub const SHOWN: [Config; 4] = [
        Config::Dram,
        Config::Tamer,
        Config::TamerFifo,
        Config::FlashSync,
    ];
    /// The configuration's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Config::Dram => "dram",
            Config::Tamer => "tamer",
            Config::TamerFifo => "tamer-fifo",
            Config::FlashSync => "flash-sync",
            Config::OsPaging => "os-paging",
        }
    }
}

/// Which device a store lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The emulated device.
    Emulated,
    /// The real disk.
    Disk,
}

impl Target {
    /// The device's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Target::Emulated => "emu",
            Target::Disk => "disk",
        }
    }
}

/// Sizes of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Bytes of YCSB values (records = data_bytes / value_bytes).
    pub data_bytes: u64,
    /// Cache of the tiered configurations.
    pub cache_bytes: u64,
    /// Bytes of each YCSB value.
    pub value_bytes: usize,
    /// TATP subscribers.
    pub tatp_subscribers: u64,
    /// Bytes of each TATP row.
    pub tatp_row_bytes: usize,
    /// CPU work per job, ns.
    pub work_ns: u64,
    /// The emulated device's latency, ns.
    pub emulated_latency_ns: u64,
    /// Run before each measured window.
    pub warmup: Duration,
    /// Length of each closed-loop window.
    pub measure: Duration,
    /// The store's executors (cores).
    pub cores: usize,
    /// User-level threads per core.
    pub threads_per_core: usize,
    /// Workloads run.
    pub workloads: Vec<Workload>,
    /// Run on the emulated device.
    pub emulated: bool,
    /// Run on the disk.
    pub disk: bool,
    /// Offered loads of the open-loop curve, as fractions of `dram`'s closed-loop throughput.
    pub load_fractions: Vec<f64>,
    /// Length of each open-loop point.
    pub load_point: Duration,
    /// fio's run per measured queue depth.
    pub fio_duration: Duration,
    /// The store's background cleaner (`DbOptions::cleaner`).
    pub cleaner: bool,
    /// Alternating `dram` / `tamer` rounds per workload on the emulated device (0: none).
    pub interleave_rounds: usize,
    /// Alternating `tamer` / `flash-sync` open-loop windows at equal load, per device.
    pub equal_load_rounds: usize,
    /// Rounds of `tamer` / `tamer-fifo` slices per workload and device (a round is a pair
    /// of slices), and a slice's length.
    pub policy_rounds: usize,
    /// A policy slice's length.
    pub policy_slice: Duration,
    /// Rounds of a `tamer` window then fio at its disk queue depth, per workload on the disk
    /// (each `fio_duration` long; 0: none).
    pub utilization_rounds: usize,
    /// The emulated device's DMA engine runs on the load generator's CPU
    /// ([`EmulatorConfig::dma_offload`](tamer_device::EmulatorConfig::dma_offload),
    /// [`EmulatorModel::run_dma`](tamer_device::EmulatorModel::run_dma)) instead of its copies
    /// running on the polling core.
    pub dma_offload: bool,
}

impl Plan {
    /// The full run's plan, or the CI-sized one (`quick`), with `work_ns` of work per job.
    pub fn new(quick: bool, work_ns: u64) -> Self {
        let base = Self {
            data_bytes: 2 << 30,
            cache_bytes: 64 << 20,
            value_bytes: 1024,
            tatp_subscribers: 200_000,
            tatp_row_bytes: 160,
            work_ns,
            emulated_latency_ns: 50_000,
            warmup: Duration::from_millis(1_000),
            measure: Duration::from_millis(3_000),
            cores: 1,
            threads_per_core: 64,
            workloads: Workload::ALL.to_vec(),
            emulated: true,
            disk: true,
            load_fractions: vec![0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.3],
            load_point: Duration::from_millis(1_500),
            fio_duration: Duration::from_millis(1_000),
            cleaner: true,
            dma_offload: true,
            interleave_rounds: 5,
            equal_load_rounds: 5,
            policy_rounds: 40,
            policy_slice: Duration::from_millis(150),
            utilization_rounds: 7,
        };
        if quick {
            Self {
                data_bytes: 1 << 30,
                cache_bytes: 32 << 20,
                tatp_subscribers: 50_000,
                warmup: Duration::from_millis(250),
                measure: Duration::from_millis(500),
                load_fractions: vec![0.2, 0.5, 0.8, 0.95, 1.1, 1.3],
                load_point: Duration::from_millis(400),
                fio_duration: Duration::from_millis(400),
                interleave_rounds: 5,
                equal_load_rounds: 5,
                policy_rounds: 30,
                policy_slice: Duration::from_millis(100),
                utilization_rounds: 7,
                ..base
            }
        } else {
            base
        }
    }

    /// YCSB records: the data bytes over the value bytes.
    pub fn records(&self) -> u64 {
        self.data_bytes / self.value_bytes as u64
    }

    /// Closed-loop population: twice the user-level threads.
    pub fn population(&self) -> usize {
        2 * self.threads_per_core * self.cores
    }

    /// Pages the loaded store occupies, estimated from the on-device layout (data pages of
    /// 4072 payload bytes holding records of 16 + key + value bytes; buckets ~70 % full).
    pub fn estimated_pages(&self) -> u64 {
        estimated_pages(
            self.records(),
            self.value_bytes,
            self.tatp_subscribers * 15 / 2,
            self.tatp_row_bytes,
        )
    }
}

/// Pages of a store with `records` of `value` bytes and `rows` of `row` bytes, 8-byte keys
/// (records of 16 + 8 + value bytes, 16-byte aligned in 4072-byte data payloads; buckets of
/// `BUCKET_CAP` entries ~70 % full).
pub fn estimated_pages(records: u64, value: usize, rows: u64, row: usize) -> u64 {
    let per_page = |v: usize| (4072 / (16 + 8 + v).next_multiple_of(16)).max(1) as u64;
    let data = records.div_ceil(per_page(value)) + rows.div_ceil(per_page(row));
    let buckets = (records + rows).div_ceil(tamer_store::BUCKET_CAP as u64 * 7 / 10);
    data + buckets + 256
}

/// The `dram` cache: twice the store's pages, whole 32 KiB sets, within the arena's limit.
pub fn dram_cache_bytes(pages: u64) -> u64 {
    let set = 32 * 1024;
    let limit = (MAX_FRAMES - 1024) * PAGE_SIZE as u64;
    ((2 * pages * PAGE_SIZE as u64).div_ceil(set) * set).min(limit / set * set)
}

/// How long the stores' idle cores spin before parking (the runtime's default is 200 µs): as
/// a µs-scale service's dedicated cores, they stay awake between open-loop arrivals at low
/// load: a parked core's wake-up can take milliseconds, which would set the p99 at low load.
/// An idle store gives its CPU back after 10 ms, inside the next window's warm-up.
pub(super) const IDLE_SPIN: Duration = Duration::from_millis(10);

/// `config`'s store options on `device`: the `dram` cache or the plan's, the plan's cores and
/// threads, the cleaner (never for `dram`), [`IDLE_SPIN`], and each configuration's policy or
/// miss wait; `poll`: `--poll`; `pages`: the file's initial size.
pub(super) fn options_for(
    config: Config,
    plan: &Plan,
    device: DeviceKind,
    poll: bool,
    pages: u64,
) -> DbOptions {
    let cache = match config {
        Config::Dram => dram_cache_bytes(pages),
        _ => plan.cache_bytes,
    };
    let mut options = DbOptions::new(cache)
        .device(device)
        .cores(plan.cores)
        .threads_per_core(plan.threads_per_core)
        .pin(true)
        .max_value_bytes(64 << 10)
        .initial_file_bytes(pages * PAGE_SIZE as u64)
        // Every configuration gets the same bucket layout (the stores are compared).
        .hash_key(BENCH_HASH_KEY)
        // AstriFlash's comparison is of tiering, not durability (that is `bench durability`):
        // every configuration acknowledges before durable, as the all-in-DRAM baseline would.
        .durability(Durability::None)
        // `dram` evicts nothing, so a cleaner has nothing to prepare; on would only write the
        // load's dirty pages back during its measured window (a transient, not its steady
        // state).
        .cleaner(plan.cleaner && config != Config::Dram)
        .idle_spin(IDLE_SPIN)
        .idle(if poll {
            IdleMode::Poll
        } else {
            IdleMode::Block
        });
    match config {
        Config::TamerFifo => options = options.policy(Policy::Fifo),
        Config::FlashSync => options = options.miss_wait(WaitMode::Spin),
        _ => {}
    }
    options
}

/// The index hash key of every benchmark store: identical bucket layouts across the
/// configurations compared in one run, and across runs.
const BENCH_HASH_KEY: [u64; 2] = [0x7469_6572_2d62_656e, 0x6368_2d6b_6579_0001];

/// `len` bytes drawn from `seed` (the payloads jobs write).
pub(super) fn seeded_bytes(len: usize, seed: u64) -> Arc<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    Arc::new((0..len).map(|_| rng.gen()).collect())
}

/// `workload`'s seed derived from the run's `--seed`; each phase xors in its own constant.
pub(super) fn workload_seed(seed: u64, workload: Workload) -> u64 {
    seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(workload as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing() {
        // 1 GiB of 1 KiB values: 3 records per page, plus buckets.
        let pages = estimated_pages(1 << 20, 1024, 0, 160);
        assert!(
            pages > (1 << 20) / 3 && pages < (1 << 20) / 3 + 20_000,
            "{pages}"
        );
        let cache = dram_cache_bytes(pages);
        assert_eq!(cache % (32 * 1024), 0);
        assert!(cache >= 2 * pages * 4096);
        assert!(dram_cache_bytes(u64::MAX / 16_384) <= MAX_FRAMES * 4096);
        let quick = Plan::new(true, 2_000);
        assert!(quick.data_bytes >= 30 * quick.cache_bytes);
        let full = Plan::new(false, 2_000);
        assert!(full.data_bytes >= 30 * full.cache_bytes);
    }
}
