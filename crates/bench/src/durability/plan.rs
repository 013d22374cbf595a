//! What a run measures and how large it is: the configurations, workloads, devices, the
//! [`Plan`] (sizes, windows, rounds, in-flight sweep) and the store options of each
//! configuration.

use std::time::Duration;

use tamer_cache::PAGE_SIZE;
use tamer_runtime::IdleMode;
use tamer_store::{DbOptions, DeviceKind, Durability};

/// Bytes of every value (the seed's hash-table workload).
pub const VALUE_BYTES: usize = 100;
/// Group-commit interval of the `periodic` configuration.
pub const PERIODIC_INTERVAL: Duration = Duration::from_millis(10);
/// The emulated device's read and write latency by default: the tier bench's 50 µs flash.
pub const DEFAULT_LATENCY_NS: u64 = 50_000;
/// The emulated device's flush: an NVMe drive with power-loss protection acknowledges a
/// flush in about this.
pub const FLUSH_LATENCY_NS: u64 = 15_000;
/// The index hash key of every store of the run: identical bucket layouts.
pub const HASH_KEY: [u64; 2] = [0x6475_7261_6269_6c69, 0x7479_2d62_656e_6368];
/// User-level threads per core beyond the in-flight jobs (cleaner, `Db::run` calls).
const SPARE_THREADS: usize = 8;

/// One way of making writes durable (or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Config {
    /// `Durability::None`: durable at the next checkpoint only.
    Volatile,
    /// `Durability::Commit`: staging queues + group commit (seed 001's design).
    Lad,
    /// `Durability::Periodic(10 ms)`.
    Periodic,
    /// The store in `None` mode + a redo log of whole records with group commit.
    Wal,
    /// redb with `Durability::Immediate` (real disk only).
    Redb,
}

impl Config {
    /// The configurations run on tamer's store, in each device's rounds.
    pub const STORES: [Config; 4] = [Config::Volatile, Config::Lad, Config::Periodic, Config::Wal];

    pub fn name(self) -> &'static str {
        match self {
            Config::Volatile => "volatile",
            Config::Lad => "lad",
            Config::Periodic => "periodic",
            Config::Wal => "wal",
            Config::Redb => "redb",
        }
    }

    /// The store's durability mode (the WAL's store is volatile; its log makes it durable).
    pub fn durability(self) -> Durability {
        match self {
            Config::Lad => Durability::Commit,
            Config::Periodic => Durability::Periodic(PERIODIC_INTERVAL),
            _ => Durability::None,
        }
    }
}

/// The transactions measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// One put of a uniformly random preloaded key (100-byte value).
    Update,
    /// A transaction reading two random keys and writing them swapped.
    Swap,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Update => "update",
            Workload::Swap => "swap",
        }
    }
}

/// Which device the stores live on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    Emulated,
    Disk,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Emulated => "emu",
            Target::Disk => "disk",
        }
    }
}

/// One measured point: a workload at a number of transactions in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub workload: Workload,
    pub in_flight: usize,
}

/// Sizes of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Keys preloaded (8-byte keys, [`VALUE_BYTES`] values).
    pub keys: u64,
    pub cache_bytes: u64,
    /// Interleaved rounds per device; each ratio is the median over them.
    pub rounds: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub points: Vec<Point>,
    pub emulated: bool,
    pub disk: bool,
    /// The emulated device's read/write latency (its flush takes [`FLUSH_LATENCY_NS`]).
    pub latency_ns: u64,
    /// OS threads running redb transactions (its writers are serialized anyway).
    pub redb_threads: usize,
    /// 4 KiB write + flush probes per round and device.
    pub probes_per_round: usize,
    /// How long the recovery run writes before the power goes.
    pub recovery_run: Duration,
    /// Idle store cores spin on the device instead of blocking (`--poll`; set by [`super::run`]).
    pub poll: bool,
}

impl Plan {
    pub fn new(quick: bool) -> Self {
        let update = |in_flight| Point {
            workload: Workload::Update,
            in_flight,
        };
        let swap = Point {
            workload: Workload::Swap,
            in_flight: 256,
        };
        if quick {
            return Self {
                keys: 200_000,
                cache_bytes: 8 << 20,
                rounds: 3,
                warmup: Duration::from_millis(100),
                measure: Duration::from_millis(300),
                points: vec![update(1), update(256), swap],
                emulated: true,
                disk: true,
                latency_ns: DEFAULT_LATENCY_NS,
                redb_threads: 16,
                probes_per_round: 40,
                recovery_run: Duration::from_millis(300),
                poll: false,
            };
        }
        Self {
            keys: 8_000_000,
            cache_bytes: 32 << 20,
            rounds: 5,
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(1_000),
            points: vec![update(1), update(16), update(256), swap],
            emulated: true,
            disk: true,
            latency_ns: DEFAULT_LATENCY_NS,
            redb_threads: 16,
            probes_per_round: 100,
            recovery_run: Duration::from_millis(700),
            poll: false,
        }
    }

    /// The most transactions any point keeps in flight.
    pub fn max_in_flight(&self) -> usize {
        self.points.iter().map(|p| p.in_flight).max().unwrap_or(1)
    }

    /// Pages of the loaded store (the tier bench's estimate for 8-byte keys).
    pub fn estimated_pages(&self) -> u64 {
        crate::tier::estimated_pages(self.keys, VALUE_BYTES, 0, 1)
    }

    /// Bytes of an emulated store device: the loaded pages twice (out-of-place updates need
    /// room until compaction catches up) + 64 MiB.
    pub fn emulated_capacity_bytes(&self) -> u64 {
        (2 * self.estimated_pages() * PAGE_SIZE as u64 + (64 << 20)).next_multiple_of(1 << 20)
    }

    /// `config`'s store options on `device`.
    pub fn store_options(&self, config: Config, device: DeviceKind) -> DbOptions {
        let idle = if self.poll {
            IdleMode::Poll
        } else {
            IdleMode::Block
        };
        DbOptions::new(self.cache_bytes)
            .idle(idle)
            .device(device)
            .cores(1)
            .threads_per_core(self.max_in_flight() + SPARE_THREADS)
            .pin(true)
            .initial_file_bytes(self.estimated_pages() * PAGE_SIZE as u64)
            .hash_key(HASH_KEY)
            .durability(config.durability())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_data_set_is_at_least_30_times_the_cache() {
        let full = Plan::new(false);
        let data = full.estimated_pages() * PAGE_SIZE as u64;
        assert!(data >= 30 * full.cache_bytes, "{data}");
        assert_eq!(full.max_in_flight(), 256);
        assert_eq!(Plan::new(true).max_in_flight(), 256);
    }
}
