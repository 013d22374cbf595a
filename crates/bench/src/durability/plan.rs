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
    /// `Durability::Commit`: staging queues + group commit (LAD's design).
    Lad,
    /// `Durability::Periodic(10 ms)`.
    Periodic,
    /// The store in `None` mode + a redo log of whole records with group commit.
    Wal,
    /// redb with `Durability::Immediate` (real disk only).
    Redb,
    /// Software undo logging on an in-place store: the old values of every key a transaction
    /// writes go to an undo log (group-committed, flushed) before the writes are applied to a
    /// store in `Durability::Commit` mode: two ordered persist barriers per transaction.
    Undo,
    /// `lad` with 16-page staging queues (the smallest; `lad`'s are 256 on the emulated
    /// device): the queue-size sweep (emulated device, the main point).
    LadQueue16,
    /// `lad` with 64-page staging queues.
    LadQueue64,
}

impl Config {
    /// The configurations run on tamer's store, in each device's rounds.
    pub const STORES: [Config; 5] = [
        Config::Volatile,
        Config::Lad,
        Config::Periodic,
        Config::Wal,
        Config::Undo,
    ];

    /// The `lad` stores of the staging-queue-size sweep (emulated device only).
    pub const QUEUE_SWEEP: [Config; 2] = [Config::LadQueue16, Config::LadQueue64];

    /// The configuration's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Config::Volatile => "volatile",
            Config::Lad => "lad",
            Config::LadQueue16 => "lad_q16",
            Config::LadQueue64 => "lad_q64",
            Config::Periodic => "periodic",
            Config::Wal => "wal",
            Config::Redb => "redb",
            Config::Undo => "undo",
        }
    }

    /// The store's durability mode (the WAL's store is volatile; its log makes it durable).
    pub fn durability(self) -> Durability {
        match self {
            Config::Lad | Config::Undo | Config::LadQueue16 | Config::LadQueue64 => {
                Durability::Commit
            }
            Config::Periodic => Durability::Periodic(PERIODIC_INTERVAL),
            _ => Durability::None,
        }
    }
}

impl Config {
    /// The staging queue pages each core's queue is resized to at open (`None`: the store's
    /// own, which the device's size chose).
    pub fn queue_pages(self) -> Option<u64> {
        match self {
            Config::LadQueue16 => Some(16),
            Config::LadQueue64 => Some(64),
            _ => None,
        }
    }

    /// The stores of a device: [`Config::STORES`], and on the emulated device the
    /// queue-size sweep's.
    pub fn stores_of(target: Target) -> Vec<Config> {
        let mut stores = Config::STORES.to_vec();
        if target == Target::Emulated {
            stores.extend(Config::QUEUE_SWEEP);
        }
        stores
    }
}

/// The transactions measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// One put of a uniformly random preloaded key (100-byte value).
    Update,
    /// A transaction reading two random keys and writing them swapped.
    Swap,
    /// TATP's mix on preloaded subscribers: 80 % reads, the writes one transaction each.
    Tatp,
    /// TPC-C-NewOrder-like: a district counter, 5-15 items and stocks, an order and its lines.
    NewOrder,
    /// Push/pop on preloaded queues: a counter and an item per transaction.
    Queue,
}

impl Workload {
    /// The workload's name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Update => "update",
            Workload::Swap => "swap",
            Workload::Tatp => "tatp",
            Workload::NewOrder => "neworder",
            Workload::Queue => "queue",
        }
    }
}

/// Which device the stores live on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The emulated device.
    Emulated,
    /// The real disk (io_uring on a file).
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

/// One measured point: a workload at a number of transactions in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    /// The workload run.
    pub workload: Workload,
    /// Transactions in flight (jobs running them back to back).
    pub in_flight: usize,
}

/// One point of a device's rounds and the configurations it runs (redb is added to the
/// disk's [`REDB_POINT`]).
#[derive(Clone, Debug)]
pub struct PointRun {
    /// The point.
    pub point: Point,
    /// The configurations it runs, in order.
    pub configs: Vec<Config>,
}

/// Transactions in flight of the headline points.
pub const MAIN_IN_FLIGHT: usize = 256;
/// The headline point: TATP at 256 in flight.
pub const MAIN_POINT: Point = Point {
    workload: Workload::Tatp,
    in_flight: MAIN_IN_FLIGHT,
};
/// redb's point (disk): one small durable update per transaction.
pub const REDB_POINT: Point = Point {
    workload: Workload::Update,
    in_flight: MAIN_IN_FLIGHT,
};
/// The in-flight sweep of the main workload (`lad` and `volatile` only).
pub const SWEEP_IN_FLIGHT: [usize; 4] = [1, 16, 256, 1024];

/// Sizes of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Keys of the `update` and `swap` workloads (8-byte keys, [`VALUE_BYTES`] values).
    pub keys: u64,
    /// TATP subscribers preloaded (≈ 7.5 rows each).
    pub tatp_subscribers: u64,
    /// NewOrder's items (one item and one stock row each) and districts.
    pub stock_items: u64,
    /// NewOrder's districts.
    pub districts: u64,
    /// Queues of the `queue` workload (each a head, a tail and [`QUEUE_PRELOAD`] items).
    pub queues: u64,
    /// Cache of every store.
    pub cache_bytes: u64,
    /// Interleaved rounds per device; each ratio is the median over them.
    pub rounds: usize,
    /// Warm-up before each measured window.
    pub warmup: Duration,
    /// Length of each measured window.
    pub measure: Duration,
    /// The emulated device's points.
    pub emulated_points: Vec<PointRun>,
    /// The disk's points.
    pub disk_points: Vec<PointRun>,
    /// Run on the emulated device.
    pub emulated: bool,
    /// Run on the disk.
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
    /// A checkpoint ends each window's warm-up and another follows its jobs, for the settled
    /// bytes per transaction (off for the recovery run: its crash must find queue records).
    pub settle: bool,
}

/// Items preloaded in each queue.
pub const QUEUE_PRELOAD: u64 = 16;

fn run(workload: Workload, in_flight: usize, configs: &[Config]) -> PointRun {
    PointRun {
        point: Point {
            workload,
            in_flight,
        },
        configs: configs.to_vec(),
    }
}

/// The emulated device's points: every workload at 256 in flight, `update` at 1 (the commit
/// latency), the main workload's in-flight sweep, and at the main point every store (the
/// staging-queue-size sweep's included).
fn emulated_points() -> Vec<PointRun> {
    use Config::*;
    let durable = [Volatile, Lad, Wal, Undo];
    let mut points = vec![
        run(Workload::Update, 1, &[Volatile, Lad]),
        run(Workload::Update, MAIN_IN_FLIGHT, &durable),
        run(Workload::Swap, MAIN_IN_FLIGHT, &[Volatile, Lad, Wal]),
        run(Workload::NewOrder, MAIN_IN_FLIGHT, &durable),
        run(Workload::Queue, MAIN_IN_FLIGHT, &durable),
    ];
    for in_flight in SWEEP_IN_FLIGHT {
        let configs = if in_flight == MAIN_IN_FLIGHT {
            Config::stores_of(Target::Emulated)
        } else {
            vec![Volatile, Lad]
        };
        points.push(run(MAIN_POINT.workload, in_flight, &configs));
    }
    points
}

/// The disk's points: the main one, redb's, and `lad`'s commit latency at 1 in flight.
fn disk_points() -> Vec<PointRun> {
    use Config::*;
    vec![
        run(Workload::Update, 1, &[Lad]),
        run(REDB_POINT.workload, REDB_POINT.in_flight, &[Volatile, Lad]),
        run(
            MAIN_POINT.workload,
            MAIN_POINT.in_flight,
            &[Volatile, Lad, Wal, Undo],
        ),
    ]
}

impl Plan {
    /// The full run's sizes, or the CI-sized run's (`quick`).
    pub fn new(quick: bool) -> Self {
        let base = Self {
            keys: 8_000_000,
            tatp_subscribers: 1_000_000,
            stock_items: 1_000_000,
            districts: 10_000,
            queues: 4_096,
            cache_bytes: 32 << 20,
            rounds: 5,
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(1_000),
            emulated_points: emulated_points(),
            disk_points: disk_points(),
            emulated: true,
            disk: true,
            latency_ns: DEFAULT_LATENCY_NS,
            redb_threads: 16,
            probes_per_round: 100,
            recovery_run: Duration::from_millis(700),
            poll: false,
            settle: true,
        };
        if !quick {
            return base;
        }
        Self {
            keys: 200_000,
            tatp_subscribers: 25_000,
            stock_items: 50_000,
            districts: 1_000,
            queues: 1_024,
            // 8 MiB (≈ 1/8 of the data) failed: a window at 256 in flight timed out on an
            // 8-way cache set that stayed pinned for 10 s.
            cache_bytes: 32 << 20,
            rounds: 3,
            warmup: Duration::from_millis(80),
            measure: Duration::from_millis(220),
            probes_per_round: 40,
            recovery_run: Duration::from_millis(300),
            ..base
        }
    }

    /// The most transactions any point keeps in flight.
    pub fn max_in_flight(&self) -> usize {
        let points = self.emulated_points.iter().chain(&self.disk_points);
        points.map(|p| p.point.in_flight).max().unwrap_or(1)
    }

    /// Keys preloaded: `update`'s, TATP's rows (≈ 7.5 per subscriber), NewOrder's items,
    /// stocks and districts, the queues' counters and items.
    pub fn preloaded_keys(&self) -> u64 {
        self.keys
            + self.tatp_subscribers * 15 / 2
            + 2 * self.stock_items
            + self.districts
            + self.queues * (2 + QUEUE_PRELOAD)
    }

    /// Pages of the loaded store (the tier bench's estimate for 8-byte keys).
    pub fn estimated_pages(&self) -> u64 {
        crate::tier::estimated_pages(self.preloaded_keys(), VALUE_BYTES, 0, 1)
    }

    /// Bytes of an emulated store device: the loaded pages three times (out-of-place updates
    /// need room until compaction catches up, and in `volatile` freed pages are reusable only
    /// after a checkpoint) + 256 MiB. Twice + 64 MiB ran out of space in one CI run (NewOrder's
    /// inserts and stock rewrites, `volatile`).
    pub fn emulated_capacity_bytes(&self) -> u64 {
        (3 * self.estimated_pages() * PAGE_SIZE as u64 + (256 << 20)).next_multiple_of(1 << 20)
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
            .staging_queue_pages(config.queue_pages())
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
        assert_eq!(full.max_in_flight(), 1024);
        assert_eq!(Plan::new(true).max_in_flight(), 1024);
    }
}
