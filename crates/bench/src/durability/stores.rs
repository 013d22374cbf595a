//! One device's stores: the data set loaded once (through a volatile store), copied to one
//! store per configuration (a copy of a cleanly closed store is that store), each opened and
//! kept open for the device's rounds; and the wal's log device between its windows.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::{EmulatorConfig, EmulatorModel};
use tamer_runtime::{Job, SpawnError};
use tamer_store::{Db, DbError, DeviceKind};

use super::drive::key;
use super::plan::{Config, Plan, Target, FLUSH_LATENCY_NS, VALUE_BYTES};
use super::wal::{EmulatedLog, FileLog, GroupLog, LogSink, LogState, Ring};
use crate::progress::Progress;
use crate::BenchOptions;

/// Jobs loading the data set.
const LOADERS: u64 = 64;
/// Bytes copied at a time between emulated devices.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// The stores of one device, open, and its wal log while no wal window runs.
pub(super) struct DeviceStores {
    pub(super) target: Target,
    pub(super) stores: Vec<(Config, Db)>,
    /// The emulated device the first store lives on (its configuration builds the probe's).
    pub(super) model: Option<Arc<EmulatorModel>>,
    log: Option<LogState>,
}

/// `len` bytes drawn from `seed`.
pub(super) fn seeded_value(seed: u64) -> Arc<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    Arc::new((0..VALUE_BYTES).map(|_| rng.gen()).collect())
}

/// The emulated device of the run: the plan's latency, a [`FLUSH_LATENCY_NS`] flush.
pub(super) fn emulator_config(plan: &Plan, seed: u64) -> EmulatorConfig {
    EmulatorConfig::with_latency_ns(plan.latency_ns)
        .flush_latency_ns(FLUSH_LATENCY_NS)
        .capacity_bytes(plan.emulated_capacity_bytes())
        .seed(seed)
}

impl DeviceStores {
    /// Loads the data set on `target` and opens one store per configuration.
    pub(super) fn prepare(
        target: Target,
        plan: &Plan,
        options: &BenchOptions,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(&options.data_dir)
            .map_err(|e| format!("creating {}: {e}", options.data_dir.display()))?;
        let value = seeded_value(options.seed);
        match target {
            Target::Emulated => Self::prepare_emulated(plan, options, &value),
            Target::Disk => Self::prepare_disk(plan, options, &value),
        }
    }

    fn prepare_emulated(
        plan: &Plan,
        options: &BenchOptions,
        value: &Arc<Vec<u8>>,
    ) -> Result<Self, String> {
        let model = emulator_config(plan, options.seed)
            .build()
            .map_err(|e| format!("emulated device: {e}"))?;
        let path = options.data_dir.join("durability-emu.store");
        load(&path, plan, DeviceKind::Model(model.clone()), value)?;
        // Every copy before any store opens (an open store is not a clean one).
        let mut devices = vec![model.clone()];
        for _ in 1..Config::STORES.len() {
            devices.push(copy_model(&model)?);
        }
        let mut stores = Vec::new();
        for (config, device) in Config::STORES.into_iter().zip(devices) {
            let options = plan.store_options(config, DeviceKind::Model(device));
            stores.push((config, open(&path, options)?));
        }
        let log: Box<dyn LogSink> = Box::new(EmulatedLog::new(&model)?);
        Ok(Self {
            target: Target::Emulated,
            stores,
            model: Some(model),
            log: Some((log, Ring::default())),
        })
    }

    fn prepare_disk(
        plan: &Plan,
        options: &BenchOptions,
        value: &Arc<Vec<u8>>,
    ) -> Result<Self, String> {
        let path_of = |config: Config| -> PathBuf {
            options
                .data_dir
                .join(format!("durability-{}.store", config.name()))
        };
        let loaded = path_of(Config::Volatile);
        for config in Config::STORES {
            remove_if_there(&path_of(config))?;
        }
        load(&loaded, plan, DeviceKind::Uring, value)?;
        // Every copy before any store opens (an open store is not a clean one).
        for config in Config::STORES
            .into_iter()
            .filter(|&c| c != Config::Volatile)
        {
            copy_file(&loaded, &path_of(config))?;
        }
        let mut stores = Vec::new();
        for config in Config::STORES {
            let path = path_of(config);
            stores.push((
                config,
                open(&path, plan.store_options(config, DeviceKind::Uring))?,
            ));
        }
        let log_path = options.data_dir.join("durability.wal");
        let log: Box<dyn LogSink> = Box::new(FileLog::create(&log_path)?);
        Ok(Self {
            target: Target::Disk,
            stores,
            model: None,
            log: Some((log, Ring::default())),
        })
    }

    /// The store of `config`.
    pub(super) fn db(&self, config: Config) -> &Db {
        &self
            .stores
            .iter()
            .find(|(c, _)| *c == config)
            .expect("a store per configuration")
            .1
    }

    /// Starts the wal's leader for a window.
    pub(super) fn start_log(&mut self) -> Result<Arc<GroupLog>, String> {
        let (sink, ring) = self.log.take().ok_or("the wal's log is already running")?;
        Ok(GroupLog::start(sink, ring))
    }

    /// Stops the wal's leader after a window.
    pub(super) fn stop_log(&mut self, log: &GroupLog) -> Result<(), String> {
        self.log = Some(log.finish()?);
        Ok(())
    }

    /// Closes every store cleanly.
    pub(super) fn close(self) -> Result<(), String> {
        for (config, db) in self.stores {
            db.close()
                .map_err(|e| format!("closing the {} store: {e}", config.name()))?;
        }
        Ok(())
    }
}

fn open(path: &Path, options: tamer_store::DbOptions) -> Result<Db, String> {
    Db::open(path, options).map_err(|e| format!("opening {}: {e}", path.display()))
}

fn remove_if_there(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", path.display())),
    }
}

/// Copies `from` to `to` and syncs the copy (its write-back must not land in a window).
fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("syncing {}: {e}", to.display()))
}

/// A new emulated device like `model`, holding its contents (zero chunks skipped: a new
/// device reads zeros, and its untouched DRAM stays unallocated).
fn copy_model(model: &EmulatorModel) -> Result<Arc<EmulatorModel>, String> {
    let copy = model
        .config()
        .clone()
        .build()
        .map_err(|e| format!("emulated device: {e}"))?;
    let mut chunk = vec![0u8; COPY_CHUNK_BYTES];
    for at in (0..model.capacity_bytes()).step_by(COPY_CHUNK_BYTES) {
        let len = COPY_CHUNK_BYTES.min((model.capacity_bytes() - at) as usize);
        model
            .read_at(at, &mut chunk[..len])
            .map_err(|e| e.to_string())?;
        if chunk[..len].iter().any(|&b| b != 0) {
            copy.write_at(at, &chunk[..len])
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(copy)
}

/// Loads keys `0..plan.keys` with [`LOADERS`] jobs into a volatile store at `path` on
/// `device`, then closes it.
fn load(path: &Path, plan: &Plan, device: DeviceKind, value: &Arc<Vec<u8>>) -> Result<(), String> {
    let started = Instant::now();
    let db = open(path, plan.store_options(Config::Volatile, device))?;
    let progress = Progress::count(plan.keys, "loading keys");
    let loaded = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(Mutex::new(None::<String>));
    for j in 0..LOADERS {
        let (h, value, keys) = (db.handle(), value.clone(), plan.keys);
        let (loaded, finished, failed) = (loaded.clone(), finished.clone(), failed.clone());
        let job = Job::new(move || {
            let result = (j..keys).step_by(LOADERS as usize).try_for_each(|k| {
                loaded.fetch_add(1, Ordering::Relaxed);
                h.put(&key(k), &value)
            });
            if let Err(err) = result {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
            }
            finished.fetch_add(1, Ordering::AcqRel);
        });
        spawn_retrying(&db, job)?;
    }
    while finished.load(Ordering::Acquire) < LOADERS {
        progress.set(loaded.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(progress);
    if let Some(err) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(format!("loading: {err}"));
    }
    db.close()
        .map_err(|e: DbError| format!("closing after the load: {e}"))?;
    eprintln!(
        "loaded {} keys of {VALUE_BYTES} bytes in {:.1} s",
        plan.keys,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn spawn_retrying(db: &Db, mut job: Job) -> Result<(), String> {
    loop {
        match db.runtime().spawn_job(job) {
            Ok(()) => return Ok(()),
            Err(SpawnError::Full(back)) => {
                job = back;
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(err) => return Err(err.to_string()),
        }
    }
}
