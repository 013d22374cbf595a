//! Choosing and opening a device, with the io_uring-to-sync fallback.

use std::sync::Arc;

use crate::{
    Arena, Device, DeviceError, DeviceFile, EmulatedDevice, EmulatorModel, FaultState,
    FaultyDevice, FileMap, MmapDevice, StripedDevice, SyncDevice, UringConfig, UringDevice,
};

/// What to open on each core.
#[derive(Clone, Debug)]
pub enum DeviceSpec {
    /// io_uring on a file; falls back to [`DeviceSpec::Sync`] with a warning when io_uring is
    /// unavailable.
    Uring {
        /// The `O_DIRECT` file.
        file: Arc<DeviceFile>,
        /// The ring each core sets up.
        config: UringConfig,
    },
    /// The microsecond-latency emulator.
    Emulated {
        /// The device-wide model every core's handle shares.
        model: Arc<EmulatorModel>,
    },
    /// The emulator under fault injection (power loss, read errors, a full device).
    Faulty {
        /// The device-wide fault state every core's handle shares.
        state: Arc<FaultState>,
    },
    /// Blocking pread/pwrite on a file.
    Sync {
        /// The file.
        file: Arc<DeviceFile>,
        /// Requests a handle accepts before they are reaped.
        queue_depth: usize,
    },
    /// The file mapped into memory: the kernel's demand paging does the I/O (the os-paging
    /// baseline; a fault blocks the core).
    Mmap {
        /// The mapped file.
        map: Arc<FileMap>,
        /// Requests a handle accepts before they are reaped.
        queue_depth: usize,
    },
    /// Several devices as one ([`StripedDevice`]), striped in units of `unit_blocks` blocks.
    Striped {
        /// The parts, in stripe order (none of them striped).
        parts: Vec<DeviceSpec>,
        /// Stripe unit, in 4 KiB blocks.
        unit_blocks: u64,
    },
}

impl DeviceSpec {
    /// The capacity a device opened on this spec has now.
    pub fn capacity_bytes(&self) -> u64 {
        match self {
            DeviceSpec::Emulated { model } => model.capacity_bytes(),
            DeviceSpec::Faulty { state } => state.model().capacity_bytes(),
            DeviceSpec::Uring { file, .. } | DeviceSpec::Sync { file, .. } => file.capacity_bytes(),
            DeviceSpec::Mmap { map, .. } => map.capacity_bytes(),
            DeviceSpec::Striped { parts, unit_blocks } => {
                let smallest = parts.iter().map(|p| p.capacity_bytes()).min().unwrap_or(0);
                crate::striped::striped_capacity(smallest, *unit_blocks, parts.len())
            }
        }
    }
}

/// Opens one per-core handle. `handle_index` distinguishes handles (jitter seeds).
pub fn open_device(
    spec: &DeviceSpec,
    arena: Arc<Arena>,
    handle_index: usize,
) -> Result<Box<dyn Device>, DeviceError> {
    match spec {
        DeviceSpec::Uring { file, config } => {
            match UringDevice::open(file.clone(), arena.clone(), *config) {
                Ok(device) => Ok(Box::new(device)),
                Err(DeviceError::UringUnavailable { reason }) => {
                    let message = format!(
                        "io_uring is unavailable ({reason}); using the synchronous pread/pwrite \
                         device instead: every I/O now blocks its core"
                    );
                    tracing::warn!("{message}");
                    eprintln!("warning: {message}");
                    let depth = config.entries as usize;
                    Ok(Box::new(SyncDevice::new(file.clone(), arena, depth)))
                }
                Err(other) => Err(other),
            }
        }
        DeviceSpec::Emulated { model } => {
            let seed = model.config().seed ^ (handle_index as u64).wrapping_mul(0x9e37_79b9);
            Ok(Box::new(EmulatedDevice::with_seed(
                model.clone(),
                arena,
                seed,
            )))
        }
        DeviceSpec::Faulty { state } => {
            let seed =
                state.model().config().seed ^ (handle_index as u64).wrapping_mul(0x9e37_79b9);
            Ok(Box::new(FaultyDevice::new(state.clone(), arena, seed)))
        }
        DeviceSpec::Sync { file, queue_depth } => {
            if *queue_depth == 0 {
                return Err(DeviceError::Config(
                    "sync device queue depth must be positive".into(),
                ));
            }
            Ok(Box::new(SyncDevice::new(file.clone(), arena, *queue_depth)))
        }
        DeviceSpec::Striped { parts, unit_blocks } => {
            let handles = parts
                .iter()
                .map(|part| match part {
                    DeviceSpec::Striped { .. } => Err(DeviceError::Config(
                        "a striped device's parts are not striped".into(),
                    )),
                    _ => open_device(part, arena.clone(), handle_index),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Box::new(StripedDevice::new(handles, *unit_blocks)?))
        }
        DeviceSpec::Mmap { map, queue_depth } => {
            if *queue_depth == 0 {
                return Err(DeviceError::Config(
                    "mmap device queue depth must be positive".into(),
                ));
            }
            Ok(Box::new(MmapDevice::new(map.clone(), arena, *queue_depth)))
        }
    }
}
