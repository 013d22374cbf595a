//! fio beside the store: its random reads on the store's file, with the disk's queue depth.

use tamer_device::DeviceFile;

use super::context::DeviceCtx;
use super::measurement::FioPoint;
use crate::blockdev::BlockDevice;
use crate::device::{measure_fio, BENCH_CPU};
use crate::output::BenchResult;

/// The queue depth of fio's peak point (the device bench's deepest).
pub(super) const FIO_PEAK_QD: usize = 128;

/// fio's random reads on the store's file at `qd` for the plan's fio duration, with the
/// disk's queue depth meanwhile; `None` (and a note) when fio fails.
pub(super) fn fio_at(
    dev: &DeviceCtx,
    qd: usize,
    result: &mut BenchResult,
) -> Result<Option<FioPoint>, String> {
    let Some(fio) = dev.fio else {
        return Ok(None);
    };
    let file = DeviceFile::open_existing(&dev.path, 0).map_err(|e| e.to_string())?;
    let block = dev.block.as_ref();
    let start = block.and_then(BlockDevice::start);
    match measure_fio(fio, &file, qd, dev.plan.fio_duration, Some(BENCH_CPU)) {
        Ok(f) => Ok(Some(FioPoint {
            qd,
            iops: f.iops,
            // Little's law over fio's reads: its IOPS × their mean latency at the block layer
            // (the window also spans fio's start-up and exit, when nothing is in flight).
            device_qd: block
                .and_then(|b| b.finish(start))
                .and_then(|w| w.read_latency_us)
                .map(|latency_us| f.iops * latency_us / 1e6),
            cpu_us_per_io: f.cpu_us_per_io,
        })),
        Err(err) => {
            result.note(format!("fio at QD {qd}: {err}"));
            Ok(None)
        }
    }
}
