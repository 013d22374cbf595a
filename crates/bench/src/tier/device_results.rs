//! What one device's run of the tier bench measured, filled by `device_run` and read by
//! `report`.

use tamer_store::IndexStats;

use super::measurement::{FioPoint, LoadPoint, Point};
use super::plan::{Target, Workload};
use super::policy_rounds::PolicyRounds;
use super::utilization::UtilRounds;

/// What one device's run measured.
#[derive(Default)]
pub(super) struct DeviceRun {
    pub(super) points: Vec<Point>,
    pub(super) load: Vec<LoadPoint>,
    /// `tamer` ÷ `dram` throughput per interleaved round, per workload (emulated device).
    pub(super) interleaved: Vec<(Workload, Vec<f64>)>,
    /// `tamer` and `tamer-fifo`'s alternating windows, per device and workload.
    pub(super) policy: Vec<(Target, PolicyRounds)>,
    /// The DRAM budget's split and the index's size, per device, as `tamer` opened it.
    pub(super) budget: Vec<(Target, IndexStats)>,
    /// fio's peak on the disk: random reads at [`FIO_PEAK_QD`](super::fio::FIO_PEAK_QD) on the store's file.
    pub(super) fio_peak: Option<FioPoint>,
    /// The disk's utilization rounds, per workload (`tamer`'s policy).
    pub(super) utilization: Vec<UtilRounds>,
}
