//! The device's own cost of durability: one 4 KiB write then one flush, back to back, at one
//! in flight, timed. `commit_p50_vs_flush` divides `lad`'s commit p50 at one in flight by its
//! median. On the emulated device: a handle of its own on a device built like the stores'
//! (same latencies); on the disk: `O_DIRECT` `pwrite` + `fdatasync` of a file beside the
//! stores.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tamer_device::{Arena, Device, EmulatedDevice, EmulatorModel, IoRequest, BLOCK_SIZE};

/// Blocks the disk probe cycles through.
const PROBE_BLOCKS: u64 = 256;

/// A prepared probe: time with [`Probe::sample`].
pub(super) enum Probe {
    Emulated {
        device: Box<EmulatedDevice>,
        arena: Arc<Arena>,
    },
    Disk {
        file: std::fs::File,
        arena: Arc<Arena>,
        path: PathBuf,
        next: u64,
    },
}

impl Probe {
    /// A probe device built like `model` (1 MiB).
    pub(super) fn emulated(model: &EmulatorModel) -> Result<Self, String> {
        let model = model
            .config()
            .clone()
            .capacity_bytes(PROBE_BLOCKS * BLOCK_SIZE as u64)
            .dma_offload(false)
            .build()
            .map_err(|e| format!("probe device: {e}"))?;
        let arena = Arc::new(Arena::new(1).map_err(|e| e.to_string())?);
        Ok(Probe::Emulated {
            device: Box::new(EmulatedDevice::new(model, arena.clone())),
            arena,
        })
    }

    /// A probe file under `dir`, opened with `O_DIRECT` (the stores' own access mode).
    pub(super) fn disk(dir: &Path) -> Result<Self, String> {
        let path = dir.join("durability-probe.dat");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map_err(|e| format!("opening {} with O_DIRECT: {e}", path.display()))?;
        file.set_len(PROBE_BLOCKS * BLOCK_SIZE as u64)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("sizing {}: {e}", path.display()))?;
        let arena = Arc::new(Arena::new(1).map_err(|e| e.to_string())?);
        Ok(Probe::Disk {
            file,
            arena,
            path,
            next: 0,
        })
    }

    /// One 4 KiB write + one flush, in ns.
    pub(super) fn sample(&mut self) -> Result<u64, String> {
        let started = Instant::now();
        match self {
            Probe::Emulated { device, arena } => {
                // SAFETY: the probe's own arena; no request in flight between samples.
                unsafe { arena.frame_mut(0) }.fill(0x5a);
                complete(device, IoRequest::write(0, 0, 1, 1))?;
                complete(device, IoRequest::flush(2))?;
            }
            Probe::Disk {
                file,
                arena,
                path,
                next,
            } => {
                // SAFETY: the probe's own arena frame, 4 KiB-aligned as O_DIRECT needs.
                let block = unsafe { arena.frame_mut(0) };
                block.fill(0x5a);
                let offset = (*next % PROBE_BLOCKS) * BLOCK_SIZE as u64;
                *next += 1;
                file.write_all_at(block, offset)
                    .and_then(|()| file.sync_data())
                    .map_err(|e| format!("probing {}: {e}", path.display()))?;
            }
        }
        Ok(started.elapsed().as_nanos() as u64)
    }
}

/// Pushes `request`, rings the doorbell and polls until it completes.
pub(super) fn complete(device: &mut EmulatedDevice, request: IoRequest) -> Result<(), String> {
    device.push(request).map_err(|e| e.to_string())?;
    device.submit().map_err(|e| e.to_string())?;
    let mut done = Vec::new();
    while device.poll(&mut done) == 0 {
        std::hint::spin_loop();
    }
    done[0].result.clone().map_err(|e| e.to_string())
}
