//! What every phase of one device's run shares ([`DeviceCtx`]): the device (the emulated
//! model, built here, or the disk), the store's file, its estimated pages, the plan and the
//! bench options, the calibrated work and the seeded payloads; and the options and job
//! contexts derived from them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tamer_cache::PAGE_SIZE;
use tamer_device::{EmulatorConfig, EmulatorModel};
use tamer_store::{Db, DbOptions, DeviceKind};

use super::jobs::{JobContext, Meter, Payloads};
use super::plan::{options_for, Config, Plan, Target};
use crate::blockdev::BlockDevice;
use crate::work::Work;
use crate::BenchOptions;

/// One device's run: the target and everything its phases open stores and jobs with.
pub(super) struct DeviceCtx<'a> {
    pub(super) target: Target,
    pub(super) plan: &'a Plan,
    pub(super) options: &'a BenchOptions,
    pub(super) work: Work,
    /// Work loop iterations per job (`plan.work_ns` of calibrated work).
    pub(super) iterations: u64,
    /// fio, when installed: the disk's points are compared with it.
    pub(super) fio: Option<&'a Path>,
    /// The loaded store's estimated pages ([`Plan::estimated_pages`]).
    pub(super) pages: u64,
    /// `<data-dir>/tier.store`: the store's file on the disk (the emulated device keeps its
    /// data in the model; the path still names the store).
    pub(super) path: PathBuf,
    pub(super) payloads: Payloads,
    /// The emulated device (`None` on the disk): one model, reopened by every configuration.
    pub(super) model: Option<Arc<EmulatorModel>>,
    /// The disk's block device counters (`None` on the emulated device, or where the kernel
    /// shows no block device under the data directory).
    pub(super) block: Option<BlockDevice>,
}

impl<'a> DeviceCtx<'a> {
    /// The context of `target`'s run; on the emulated device, builds its model (1.5 × the
    /// store's pages + 256 MiB).
    pub(super) fn new(
        target: Target,
        plan: &'a Plan,
        options: &'a BenchOptions,
        work: Work,
        fio: Option<&'a Path>,
    ) -> Result<Self, String> {
        let pages = plan.estimated_pages();
        let path: PathBuf = options.data_dir.join("tier.store");
        let payloads = Payloads::new(plan, options.seed);
        let mut model: Option<Arc<EmulatorModel>> = None;
        if target == Target::Emulated {
            let built = EmulatorConfig::with_latency_ns(plan.emulated_latency_ns)
                .capacity_bytes(
                    (pages * PAGE_SIZE as u64 * 3 / 2 + (256 << 20)).next_multiple_of(1 << 20),
                )
                .seed(options.seed)
                .dma_offload(plan.dma_offload)
                .completion_accounting(true)
                .build()
                .map_err(|e| format!("emulated device: {e}"))?;
            model = Some(built);
        }
        Ok(Self {
            target,
            plan,
            options,
            work,
            iterations: work.iterations_for(plan.work_ns),
            fio,
            pages,
            path,
            payloads,
            model,
            block: (target == Target::Disk)
                .then(|| BlockDevice::of(&options.data_dir))
                .flatten(),
        })
    }

    /// The store's device: the emulated model, or io_uring on the disk.
    pub(super) fn device(&self) -> DeviceKind {
        match (self.target, &self.model) {
            (Target::Emulated, Some(model)) => DeviceKind::Model(model.clone()),
            _ => DeviceKind::Uring,
        }
    }

    /// `config`'s options on this device.
    pub(super) fn db_options(&self, config: Config) -> DbOptions {
        options_for(
            config,
            self.plan,
            self.device(),
            self.options.poll,
            self.pages,
        )
    }

    /// What `db`'s jobs share: `meter`, the bytes they write, the work per job.
    pub(super) fn job_context(
        &self,
        db: &Db,
        meter: Arc<Meter>,
        value: Arc<Vec<u8>>,
    ) -> JobContext {
        JobContext::new(db, meter, value, self.work, self.iterations)
    }
}
