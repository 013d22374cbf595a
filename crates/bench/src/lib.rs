//! tamer's benchmarks. Each measures tamer and its baseline side by side in one run and reports
//! ratios (a shared machine is noisy; lone absolute times mean little).
//!
//! - [`runtime`]: user-level switch vs OS thread switch;
//! - [`device`]: 4 KiB random reads, tamer's io_uring and sync devices vs fio;
//! - [`microsecond`]: the killer-microsecond study: normalized performance vs user threads per core, for
//!   device latencies, memory-level parallelism, access mechanisms and an in-flight cap;
//! - [`durability`]: LAD's evaluation: group-committed durability vs volatile, WAL, redb;
//! - [`tier`]: AstriFlash's Figures 9 and 10: the key-value engine with a small DRAM cache over
//!   the emulated device and the disk vs the same engine all in DRAM, FIFO and flash-sync;
//! - [`apps`]: issue 24's application figures (EVALSHA, pub/sub fan-out, GETs with tracking,
//!   ACL checks), tamer serve vs redis-server.
//!
//! Every bench prints a table, writes a JSON object whose `figures` map holds its named figures,
//! and writes its plots as SVG.

pub mod apps;
pub mod blockdev;
pub mod cgroup;
pub mod device;
pub mod durability;
pub mod load;
pub mod microsecond;
pub mod output;
pub mod plot;
pub mod progress;
pub mod rpc;
pub mod runtime;
pub mod summary;
pub mod tier;
pub mod types;
pub mod work;
pub mod workload;

use std::path::PathBuf;

/// Options every bench takes.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// CI-sized: under a minute.
    pub quick: bool,
    /// Where to write the JSON result (default `<data_dir>/bench/<name>.json`).
    pub json: Option<PathBuf>,
    /// Where to write SVG plots (default `<data_dir>/bench`).
    pub svg: Option<PathBuf>,
    /// Where benchmark data files live (default `./tamer-data`); must be on a disk-backed file
    /// system that supports O_DIRECT.
    pub data_dir: PathBuf,
    /// Seed of every random choice.
    pub seed: u64,
    /// Never sleep waiting for the device: spin on the completion queue (io_uring `--poll`).
    pub poll: bool,
}

impl BenchOptions {
    /// Where bench `name`'s JSON goes: `--json`, or `<data_dir>/bench/<name>.json`.
    pub fn json_path(&self, name: &str) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| self.data_dir.join("bench").join(format!("{name}.json")))
    }

    /// Where the SVG plots go: `--svg`, or `<data_dir>/bench`.
    pub fn svg_dir(&self) -> PathBuf {
        self.svg
            .clone()
            .unwrap_or_else(|| self.data_dir.join("bench"))
    }
}
