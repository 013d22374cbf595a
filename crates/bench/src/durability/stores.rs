//! One device's stores: the data set (every workload's keys) loaded once (through a volatile store), copied to one
//! store per configuration (a copy of a cleanly closed store is that store), each opened and
//! kept open for the device's rounds; and the logs of the `wal` and `undo` configurations
//! between their windows.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_device::{EmulatorConfig, EmulatorModel};
use tamer_runtime::{Job, SpawnError};
use tamer_store::{Db, DbError, DeviceKind};

use super::plan::{Config, Plan, Target, FLUSH_LATENCY_NS, VALUE_BYTES};
use super::wal::{EmulatedLog, FileLog, GroupLog, LogSink, LogState, Ring};
use super::workloads::{preload_unit, preload_units};
use crate::progress::Progress;
use crate::workload::Tatp;
use crate::BenchOptions;

/// Jobs loading the data set.
const LOADERS: u64 = 64;
/// Cache of the loading store at least (64 jobs inserting into a small cache's 8-way sets
/// can keep a set pinned past the cache's timeout while the index grows).
const LOAD_CACHE_BYTES_MIN: u64 = 64 << 20;
/// Bytes copied at a time between emulated devices.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// The stores of one device, open, and its wal log while no wal window runs.
pub(super) struct DeviceStores {
    pub(super) target: Target,
    pub(super) stores: Vec<(Config, Db)>,
    /// The emulated device the first store lives on (its configuration builds the probe's).
    pub(super) model: Option<Arc<EmulatorModel>>,
    /// The logs of the `wal` (redo) and `undo` configurations, while no window uses them.
    logs: Vec<(Config, LogState)>,
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
        let configs = Config::stores_of(Target::Emulated);
        let mut devices = vec![model.clone()];
        for _ in 1..configs.len() {
            devices.push(copy_model(&model)?);
        }
        let mut stores = Vec::new();
        for (config, device) in configs.into_iter().zip(devices) {
            let options = plan.store_options(config, DeviceKind::Model(device));
            stores.push((config, open(&path, options)?));
        }
        let mut logs = Vec::new();
        for config in [Config::Wal, Config::Undo] {
            let log: Box<dyn LogSink> = Box::new(EmulatedLog::new(&model)?);
            logs.push((config, (log, Ring::default())));
        }
        Ok(Self {
            target: Target::Emulated,
            stores,
            model: Some(model),
            logs,
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
        let mut logs = Vec::new();
        for config in [Config::Wal, Config::Undo] {
            let path = options
                .data_dir
                .join(format!("durability.{}", config.name()));
            let log: Box<dyn LogSink> = Box::new(FileLog::create(&path)?);
            logs.push((config, (log, Ring::default())));
        }
        Ok(Self {
            target: Target::Disk,
            stores,
            model: None,
            logs,
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

    /// Starts the leader of `config`'s log (`wal`, `undo`) for a window.
    pub(super) fn start_log(&mut self, config: Config) -> Result<Arc<GroupLog>, String> {
        let at = self
            .logs
            .iter()
            .position(|(c, _)| *c == config)
            .ok_or_else(|| format!("no {} log, or it is already running", config.name()))?;
        let (_, (sink, ring)) = self.logs.swap_remove(at);
        Ok(GroupLog::start(sink, ring))
    }

    /// Stops the leader of `config`'s log after a window.
    pub(super) fn stop_log(&mut self, config: Config, log: &GroupLog) -> Result<(), String> {
        self.logs.push((config, log.finish()?));
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

/// Loads the preload of every workload ([`preload_unit`]) with [`LOADERS`] jobs into a
/// volatile store at `path` on `device` (a cache of at least [`LOAD_CACHE_BYTES_MIN`]), then
/// closes it.
fn load(path: &Path, plan: &Plan, device: DeviceKind, value: &Arc<Vec<u8>>) -> Result<(), String> {
    let started = Instant::now();
    let load_plan = Plan {
        cache_bytes: plan.cache_bytes.max(LOAD_CACHE_BYTES_MIN),
        ..plan.clone()
    };
    let db = open(path, load_plan.store_options(Config::Volatile, device))?;
    let units = preload_units(plan);
    let progress = Progress::count(units, "loading keys");
    let loaded = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(Mutex::new(None::<String>));
    for j in 0..LOADERS {
        let (h, value, plan) = (db.handle(), value.clone(), plan.clone());
        let (loaded, finished, failed) = (loaded.clone(), finished.clone(), failed.clone());
        let job = Job::new(move || {
            let tatp = Tatp::new(plan.tatp_subscribers.max(1));
            let mut pairs = Vec::new();
            let result = (j..units).step_by(LOADERS as usize).try_for_each(|u| {
                loaded.fetch_add(1, Ordering::Relaxed);
                preload_unit(&plan, &tatp, u, &value, &mut pairs);
                pairs
                    .iter()
                    .try_for_each(|(k, v)| h.put(k, v.as_deref().unwrap_or(&[])))
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
        "loaded ≈ {} keys ({units} units) in {:.1} s",
        plan.preloaded_keys(),
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
