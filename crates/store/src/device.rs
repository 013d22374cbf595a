//! What a store lives on, opened: one file, one emulated device, or several of either striped
//! as one page space ([`DeviceKind::Striped`]); the pages read before the cache exists
//! (superblocks, recovery's choice of copies); the device spec the runtime opens per core and
//! the space the allocator grows.
//!
//! Invariants: every part of a stripe is of one family (files, or emulated devices), never
//! itself striped; page `p` of a striped store is where [`tamer_device::stripe_place`] says
//! for the raw reads as for the runtime's devices; a file part is sized in whole stripe units.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tamer_cache::PAGE_SIZE;
use tamer_device::{
    stripe_place, DeviceFile, DeviceSpec, EmulatorConfig, EmulatorModel, FaultState, FileMap,
    FileSet, UringConfig,
};

use crate::engine::Space;
use crate::DbError;

/// What the store lives on.
#[derive(Clone, Debug)]
pub enum DeviceKind {
    /// io_uring on the file at the path (falls back to `Sync` with a warning when io_uring is
    /// unavailable).
    Uring,
    /// Blocking pread/pwrite on the file at the path.
    Sync,
    /// The file at the path mapped into memory: the kernel's demand paging does the I/O and
    /// its page cache is the DRAM tier (the `os-paging` baseline; a page fault blocks the
    /// core). Give it a small `cache_bytes`, so the engine's own cache does not hold the data
    /// twice.
    Mmap,
    /// A new emulated device in DRAM (the path is ignored): `latency_ns` per access.
    Emulated {
        /// Time of one access.
        latency_ns: u64,
        /// The device's size, bytes.
        capacity_bytes: u64,
    },
    /// An existing emulator model, e.g. [`crate::Db::emulator_model`] of a closed Db, to reopen a
    /// store within the process.
    Model(Arc<EmulatorModel>),
    /// The emulator under fault injection ([`tamer_device::FaultState`]: power loss with torn
    /// writes, read errors, a full device), for crash tests; reopen on
    /// [`tamer_device::FaultState::crash_model`].
    Faulty(Arc<tamer_device::FaultState>),
    /// Several files (one per drive, say) or emulated devices as one store, striped in units
    /// of `unit_blocks` pages ([`tamer_device::STRIPE_UNIT_BLOCKS`] is a good default): page
    /// `p` lives on part `(p / unit) % parts` (the path given to [`crate::Db::open`] is ignored).
    /// The parts and their order are fixed when the store is created (the superblock records
    /// how many and the unit; a reopen with others is refused, parts given in another order
    /// fail their page checksums). A transaction commits with one record in its core's
    /// staging queue whatever parts its pages are on, and is acknowledged once every part it
    /// wrote is flushed (`docs/durability.md`).
    Striped {
        /// The parts, in stripe order.
        parts: Vec<StripePart>,
        /// Stripe unit, in 4 KiB pages.
        unit_blocks: u64,
    },
}

/// Most parts a store may be striped over.
pub const MAX_STRIPE_PARTS: usize = 64;

/// One part of a striped store: a file at `path` (`device` [`DeviceKind::Uring`] or
/// [`DeviceKind::Sync`]) or an emulated device (`path` ignored).
#[derive(Clone, Debug)]
pub struct StripePart {
    /// The part's file (ignored for an emulated part).
    pub path: PathBuf,
    /// What the part is.
    pub device: DeviceKind,
}

/// One part, resolved.
#[derive(Clone)]
enum Part {
    File {
        path: PathBuf,
        kind: DeviceKind,
    },
    Emulated {
        model: Arc<EmulatorModel>,
        faulty: Option<Arc<FaultState>>,
    },
}

/// The store's parts and stripe unit (one part: no striping).
#[derive(Clone)]
pub(crate) struct Layout {
    parts: Vec<Part>,
    unit_blocks: u64,
}

impl Layout {
    /// Resolves `device` (the store's `path` for a single file).
    pub fn of(path: &Path, device: &DeviceKind) -> Result<Self, DbError> {
        let (parts, unit_blocks) = match device {
            DeviceKind::Striped { parts, unit_blocks } => {
                if parts.is_empty() || parts.len() > MAX_STRIPE_PARTS || *unit_blocks == 0 {
                    return Err(DbError::Config(format!(
                        "a stripe of {} parts in units of {unit_blocks} pages: 1..={MAX_STRIPE_PARTS} \
                         parts, units of at least one page",
                        parts.len()
                    )));
                }
                let parts = parts
                    .iter()
                    .map(|p| Part::of(&p.path, &p.device, true))
                    .collect::<Result<Vec<_>, _>>()?;
                let files = parts
                    .iter()
                    .filter(|p| matches!(p, Part::File { .. }))
                    .count();
                if files != 0 && files != parts.len() {
                    return Err(DbError::Config(
                        "a stripe's parts are all files or all emulated devices".into(),
                    ));
                }
                (parts, *unit_blocks)
            }
            other => (vec![Part::of(path, other, false)?], 1),
        };
        Ok(Self { parts, unit_blocks })
    }

    /// Parts striped over (1: none).
    pub fn parts(&self) -> u32 {
        self.parts.len() as u32
    }

    /// The stripe unit in pages (1 for a single part).
    pub fn unit_blocks(&self) -> u64 {
        self.unit_blocks
    }

    /// The emulator model of a single emulated part.
    pub fn single_model(&self) -> Option<Arc<EmulatorModel>> {
        match &self.parts[..] {
            [Part::Emulated { model, .. }] => Some(model.clone()),
            _ => None,
        }
    }

    /// Where page `page` lives: (part, page on it).
    fn place(&self, page: u64) -> (usize, u64) {
        if self.parts.len() == 1 {
            (0, page)
        } else {
            stripe_place(page, self.unit_blocks, self.parts.len() as u64)
        }
    }

    /// The spec the runtime opens on each core and the space the allocator grows; files are
    /// created or grown to `initial_bytes` in all (none when `read_only`).
    pub fn open(
        &self,
        initial_bytes: u64,
        max_bytes: Option<u64>,
        read_only: bool,
    ) -> Result<(DeviceSpec, Space), DbError> {
        if matches!(self.parts[0], Part::Emulated { .. }) {
            let specs: Vec<DeviceSpec> = self
                .parts
                .iter()
                .map(|p| match p {
                    Part::Emulated {
                        faulty: Some(state),
                        ..
                    } => DeviceSpec::Faulty {
                        state: state.clone(),
                    },
                    Part::Emulated { model, .. } => DeviceSpec::Emulated {
                        model: model.clone(),
                    },
                    Part::File { .. } => unreachable!("one family"),
                })
                .collect();
            let spec = self.combine(specs);
            let capacity_bytes = spec.capacity_bytes();
            return Ok((spec, Space::Fixed { capacity_bytes }));
        }
        let mut files = Vec::with_capacity(self.parts.len());
        let part_bytes = if read_only {
            0
        } else {
            let unit = self.unit_blocks * PAGE_SIZE as u64;
            match self.parts.len() {
                1 => initial_bytes,
                n => initial_bytes.div_ceil(unit * n as u64) * unit,
            }
        };
        for part in &self.parts {
            let Part::File { path, .. } = part else {
                unreachable!("one family")
            };
            files.push(Arc::new(DeviceFile::open_existing(path, part_bytes)?));
        }
        let specs = self
            .parts
            .iter()
            .zip(&files)
            .map(|(part, file)| {
                let Part::File { kind, .. } = part else {
                    unreachable!("one family")
                };
                Ok(match kind {
                    DeviceKind::Uring => DeviceSpec::Uring {
                        file: file.clone(),
                        config: UringConfig::default(),
                    },
                    DeviceKind::Mmap => DeviceSpec::Mmap {
                        map: Arc::new(FileMap::new(file.clone())?),
                        queue_depth: 64,
                    },
                    _ => DeviceSpec::Sync {
                        file: file.clone(),
                        queue_depth: 64,
                    },
                })
            })
            .collect::<Result<Vec<_>, DbError>>()?;
        let spec = self.combine(specs);
        let space = Space::File {
            files: Arc::new(FileSet::new(files, self.unit_blocks)?),
            max_bytes,
        };
        Ok((spec, space))
    }

    fn combine(&self, mut specs: Vec<DeviceSpec>) -> DeviceSpec {
        if specs.len() == 1 {
            specs.pop().expect("one spec")
        } else {
            DeviceSpec::Striped {
                parts: specs,
                unit_blocks: self.unit_blocks,
            }
        }
    }
}

impl Part {
    fn of(path: &Path, device: &DeviceKind, in_stripe: bool) -> Result<Self, DbError> {
        Ok(match device {
            DeviceKind::Uring | DeviceKind::Sync => Part::File {
                path: path.to_path_buf(),
                kind: device.clone(),
            },
            DeviceKind::Mmap if !in_stripe => Part::File {
                path: path.to_path_buf(),
                kind: device.clone(),
            },
            DeviceKind::Emulated {
                latency_ns,
                capacity_bytes,
            } => Part::Emulated {
                model: EmulatorConfig::with_latency_ns(*latency_ns)
                    .capacity_bytes(*capacity_bytes)
                    .build()?,
                faulty: None,
            },
            DeviceKind::Model(model) => Part::Emulated {
                model: model.clone(),
                faulty: None,
            },
            DeviceKind::Faulty(state) => Part::Emulated {
                model: state.model().clone(),
                faulty: Some(state.clone()),
            },
            DeviceKind::Mmap | DeviceKind::Striped { .. } => {
                return Err(DbError::Config(
                    "a stripe's parts are files (uring or sync) or emulated devices".into(),
                ))
            }
        })
    }
}

/// The device's pages read outside the cache (zeros past a part's end, or for a file not
/// there yet), for the superblocks and recovery's choice of copies before the cache exists:
/// each file is opened once.
pub(crate) struct RawPages {
    layout: Layout,
    files: Vec<Option<(std::fs::File, u64)>>,
}

impl RawPages {
    pub fn open(layout: &Layout) -> Result<Self, DbError> {
        let files = layout
            .parts
            .iter()
            .map(|part| match part {
                Part::File { path, .. } => match std::fs::File::open(path) {
                    Ok(file) => {
                        let len = file.metadata().map_or(0, |m| m.len());
                        Ok(Some((file, len)))
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(err) => Err(DbError::Config(format!(
                        "opening {}: {err}",
                        path.display()
                    ))),
                },
                Part::Emulated { .. } => Ok(None),
            })
            .collect::<Result<_, DbError>>()?;
        Ok(Self {
            layout: layout.clone(),
            files,
        })
    }

    /// Page `page` of the store (zeros where nothing is stored).
    pub fn read(&self, page: u64) -> Result<Vec<u8>, DbError> {
        let mut bytes = vec![0u8; PAGE_SIZE];
        let (part, at) = self.layout.place(page);
        let offset = at * PAGE_SIZE as u64;
        match (&self.layout.parts[part], &self.files[part]) {
            (Part::Emulated { model, .. }, _) => {
                if offset + PAGE_SIZE as u64 <= model.capacity_bytes() {
                    model.read_block(at, &mut bytes)?;
                }
            }
            (Part::File { path, .. }, Some((file, len))) => {
                use std::os::unix::fs::FileExt;
                if offset + PAGE_SIZE as u64 <= *len {
                    file.read_exact_at(&mut bytes, offset).map_err(|err| {
                        DbError::Config(format!("reading {}: {err}", path.display()))
                    })?;
                }
            }
            (Part::File { .. }, None) => {}
        }
        Ok(bytes)
    }
}
