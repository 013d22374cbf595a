//! Active expiry: keys whose TTL has passed are removed without being accessed, as Redis's
//! active expire cycle does, from the time-ordered [`expiry_index`] (no keyspace scan).
//!
//! [`Expirer::start`] runs one job on the store's runtime: every [`PASS_INTERVAL_MS`] (Redis's
//! `hz 10`) a *pass* walks the index from its cursor while the cursor's slot has ended
//! ([`slot_due`]), one store transaction per *step*: a step processes chunks in cursor order
//! (each key deleted when its current header says it has expired, a stale entry skipped, the
//! chunk deleted, a finished (slot, shard)'s head too) until [`STEP_ENTRIES`] entries or
//! [`MAX_PROBES_PER_STEP`] heads, then saves the cursor, so a crash loses nothing and leaves
//! no entry behind the cursor. One transaction for ≈ 256 keys also means one durable commit
//! (one group-commit wait in `commit` mode) for them. A pass stops at its [`Effort`] (entries
//! examined and time) and yields its core between steps, so a request waits for at most one
//! step's locks (≤ 256 keys plus a chunk: ≈ 2 ms on this loaded 2-vCPU VM, where removal ran at
//! 33 k keys/s within 25 ms of each 100 ms, ≈ 7.6 µs of a step's time a key).
//! The effort adapts as Redis's does when many keys are due ([`next_effort`]): a pass that
//! stopped on its cap with due entries left doubles the next pass's budget, up to
//! [`EffortPolicy::max`] (25 ms a pass: a quarter of one core, Redis's
//! `ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC`); a pass that caught up returns to the base.
//!
//! Costs: per key expired, one lookup and one delete of the key, and 1/16 of a chunk read
//! and delete (16-byte keys); a durable commit per step. A second with no TTLs due costs
//! `SHARDS` lookups of absent heads; a store left stopped for `d` seconds catches up with
//! `SHARDS × d` such lookups (≈ 1.4 M a day), spread over passes within their budgets.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tamer_store::{Db, DbError, DbHandle, Tx};

use crate::keyspace::events::{Class, KeyEvents};
use crate::keyspace::expiry_index::{self, chunk_key, head_key, Cursor, SLOT_MS};
use crate::keyspace::pause::Pause;
use crate::keyspace::watches::Watches;
use crate::keyspace::{wall_ms, Entry};

/// Time between passes (Redis's default `hz 10`).
pub const PASS_INTERVAL_MS: u64 = 100;
/// Empty heads one step looks at before it saves the cursor and commits.
pub const MAX_PROBES_PER_STEP: u32 = 2048;
/// Index entries one step examines before it commits (it may finish a chunk past it).
pub const STEP_ENTRIES: u32 = 256;
/// Slots a store without a cursor looks back (one hour): entries written before the first
/// expirer ran (a keyspace made by `Databases::load` has a cursor from the start).
pub const LOOKBACK_SLOTS: u64 = 3600;
/// Least time between two messages about failing passes.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// How long [`Expirer::stop`] waits for the job to end.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// What one pass may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effort {
    /// Index entries examined (a step may go past it by [`STEP_ENTRIES`] and a chunk).
    pub max_entries: u32,
    pub max_time_us: u64,
}

/// The effort of a pass when nothing is behind, and the most a pass may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffortPolicy {
    pub base: Effort,
    pub max: Effort,
}

impl Default for EffortPolicy {
    fn default() -> Self {
        Self {
            base: Effort {
                max_entries: 1_000,
                max_time_us: 5_000,
            },
            max: Effort {
                max_entries: 20_000,
                max_time_us: 25_000,
            },
        }
    }
}

/// How long after a slot ends it waits before it is processed: a writer that read the clock
/// just before the slot's end (and so appended to it) has this long to commit its append
/// before the expirer passes the slot (an append later than that lands behind the cursor:
/// its key then expires lazily only).
pub const SLOT_GRACE_MS: u64 = 250;

/// Whether `slot` may be processed at `now_ms`: it ended (every entry in it is due) at least
/// [`SLOT_GRACE_MS`] ago.
pub fn slot_due(slot: u64, now_ms: u64) -> bool {
    slot.checked_add(1)
        .and_then(|s| s.checked_mul(SLOT_MS))
        .and_then(|end_ms| end_ms.checked_add(SLOT_GRACE_MS))
        .is_some_and(|due_ms| due_ms <= now_ms)
}

/// Where a store without a cursor starts: [`LOOKBACK_SLOTS`] before `now_ms`'s slot.
pub fn initial_cursor(now_ms: u64) -> Cursor {
    Cursor::at_slot(expiry_index::slot_of(now_ms).saturating_sub(LOOKBACK_SLOTS))
}

/// Why a pass stopped before its next step, if it must.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    Entries,
    Time,
}

/// Whether a pass that has examined `entries` in `elapsed_us` stops before its next step.
pub fn cap_reached(effort: Effort, entries: u64, elapsed_us: u64) -> Option<Cap> {
    if elapsed_us >= effort.max_time_us {
        Some(Cap::Time)
    } else if entries >= u64::from(effort.max_entries) {
        Some(Cap::Entries)
    } else {
        None
    }
}

/// The next pass's effort: the base after a pass that caught up (`capped` false), else twice
/// `current`, at most the policy's maximum.
pub fn next_effort(policy: &EffortPolicy, current: Effort, capped: bool) -> Effort {
    if !capped {
        return policy.base;
    }
    Effort {
        max_entries: current
            .max_entries
            .saturating_mul(2)
            .min(policy.max.max_entries),
        max_time_us: current
            .max_time_us
            .saturating_mul(2)
            .min(policy.max.max_time_us),
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Index entries looked at.
    pub examined: u32,
    /// Keys deleted.
    pub expired: u32,
    /// Entries whose key was absent, not expired or not the keyspace's.
    pub stale: u32,
    /// The cursor moved (false: nothing was due).
    pub moved: bool,
}

/// A key the expirer deleted: its database (`None`: a flushed one's) and store key.
pub type Deleted = (Option<usize>, Vec<u8>);

/// One step in `tx` at `now_ms` (see the module docs): chunks processed in cursor order
/// until [`STEP_ENTRIES`] entries or [`MAX_PROBES_PER_STEP`] heads, or nothing is due; the
/// cursor saved once. The store keys it deleted go to `deleted`, each with its database
/// (`None`: a flushed database's).
pub fn step(
    tx: &mut Tx<'_>,
    now_ms: u64,
    deleted: &mut Vec<Deleted>,
) -> Result<StepReport, DbError> {
    deleted.clear();
    let start = Cursor::load(tx)?.unwrap_or_else(|| initial_cursor(now_ms));
    let mut c = start;
    let (mut probes, mut report) = (0, StepReport::default());
    let mut head: Option<u32> = None; // (c.slot, c.shard)'s chunk count, once read
    let mut live = None; // the databases' namespaces, read at the first expired key
    while slot_due(c.slot, now_ms) && probes < MAX_PROBES_PER_STEP && report.examined < STEP_ENTRIES
    {
        let n = match head {
            Some(n) => n,
            None => {
                probes += 1;
                expiry_index::chunks(tx, c.slot, c.shard)?
            }
        };
        if c.chunk < n {
            let r = expire_chunk(tx, c, now_ms, &mut live, deleted)?;
            report.examined += r.examined;
            report.expired += r.expired;
            report.stale += r.stale;
            c.chunk += 1;
        }
        if c.chunk >= n {
            if n > 0 {
                tx.delete(&head_key(c.slot, c.shard))?;
            }
            c = c.next_shard();
            head = None;
        } else {
            head = Some(n);
        }
    }
    report.moved = c != start;
    if report.moved {
        c.save(tx)?;
    }
    Ok(report)
}

/// Deletes the keys of chunk `c` that have expired at `now_ms`, then the chunk.
fn expire_chunk(
    tx: &mut Tx<'_>,
    c: Cursor,
    now_ms: u64,
    live: &mut Option<[u32; crate::keyspace::DATABASES]>,
    deleted: &mut Vec<Deleted>,
) -> Result<StepReport, DbError> {
    let key = chunk_key(c.slot, c.shard, c.chunk);
    let Some(bytes) = tx.get(&key)? else {
        return Err(DbError::Runtime(
            "the expiry index is corrupt: a head naming a missing chunk".into(),
        ));
    };
    let mut report = StepReport::default();
    for entry in expiry_index::decode_chunk(&bytes)? {
        report.examined += 1;
        let expired = match tx.get(&entry.store_key)? {
            Some(value) => Entry::decode(&value).is_ok_and(|e| e.expired(now_ms)),
            None => false,
        };
        if expired {
            let to_db = |e: crate::keyspace::KeyspaceError| match e {
                crate::keyspace::KeyspaceError::Store(e) => e,
                other => DbError::Runtime(other.to_string()),
            };
            if live.is_none() {
                *live = Some(
                    crate::keyspace::Databases::load(tx)
                        .map_err(to_db)?
                        .namespaces,
                );
            }
            let ns = entry
                .store_key
                .first_chunk::<4>()
                .map(|b| u32::from_be_bytes(*b));
            let db = ns.and_then(|ns| live.and_then(|l| l.iter().position(|n| *n == ns)));
            if db.is_some() {
                // Through the keyspace, so the database's key count follows.
                crate::keyspace::remove_store_key(tx, &entry.store_key).map_err(to_db)?;
            } else {
                // A flushed database's key: its counts went with the flush (the reclaimer
                // would delete it too).
                crate::keyspace::remove_dead(tx, &entry.store_key).map_err(to_db)?;
            }
            deleted.push((db, entry.store_key));
            report.expired += 1;
        } else {
            report.stale += 1;
        }
    }
    tx.delete(&key)?;
    Ok(report)
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    pub steps: u32,
    pub examined: u64,
    pub expired: u64,
    pub stale: u64,
    /// The pass stopped on its effort's cap with due entries left.
    pub capped: bool,
}

/// What a pass works with besides the store.
#[derive(Clone, Copy, Default)]
pub struct PassEnv<'a> {
    /// Told of every key deleted (`WATCH`ers' `EXEC` then aborts, as Redis's).
    pub watches: Option<&'a Watches>,
    /// Ends the pass between steps once set.
    pub stop: Option<&'a AtomicBool>,
    /// Told of every key of a database deleted (`expired`), once its step committed.
    pub events: Option<&'a dyn KeyEvents>,
}

/// One pass within `effort`: steps while something is due. The time cap counts the time the
/// steps' transactions run, not their wait for a durable commit (the core serves others then).
pub fn pass(handle: &DbHandle, effort: Effort, env: PassEnv<'_>) -> Result<PassReport, DbError> {
    let mut report = PassReport::default();
    let (mut deleted, mut busy_us) = (Vec::new(), 0u64);
    loop {
        if cap_reached(effort, report.examined, busy_us).is_some() {
            report.capped = true;
            return Ok(report);
        }
        if env.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            return Ok(report);
        }
        let now_ms = wall_ms();
        let step = handle.transaction(|tx| {
            let started = Instant::now();
            let result = step(tx, now_ms, &mut deleted);
            busy_us += started.elapsed().as_micros() as u64;
            result
        })?;
        report.steps += 1;
        report.examined += u64::from(step.examined);
        report.expired += u64::from(step.expired);
        report.stale += u64::from(step.stale);
        if let Some(w) = env.watches {
            deleted.iter().for_each(|(_, k)| w.touch(k));
        }
        if let Some(events) = env.events {
            for (db, skey) in &deleted {
                if let Some(db) = db {
                    events.key_written(*db, &skey[4..]);
                }
            }
        }
        if let Some(events) = env.events.filter(|e| e.classes().publishes(Class::Expired)) {
            for (db, skey) in &deleted {
                if let Some(db) = db {
                    events.key_event(Class::Expired, "expired", *db, &skey[4..]);
                }
            }
        }
        if !step.moved {
            return Ok(report);
        }
        tamer_runtime::thread::yield_now();
    }
}

/// Active expiry's counters, for `INFO` (`expired_keys`, `expired_stale_perc`,
/// `expired_time_cap_reached_count`). One writer: the expirer.
#[derive(Debug, Default)]
pub struct ExpiryStats {
    expired_keys: AtomicU64,
    examined: AtomicU64,
    stale: AtomicU64,
    /// `expired_stale_perc` as an `f64`'s bits.
    stale_perc_bits: AtomicU64,
    time_cap_reached: AtomicU64,
    passes: AtomicU64,
}

impl ExpiryStats {
    /// Keys active expiry deleted (Redis's `expired_keys` also counts lazy deletions; see
    /// `docs/commands.md`).
    pub fn expired_keys(&self) -> u64 {
        self.expired_keys.load(Ordering::Relaxed)
    }

    /// The share (in %) of index entries examined that were stale, as a running average over
    /// passes (Redis's weights: 5 % the last pass, 95 % the history).
    pub fn expired_stale_perc(&self) -> f64 {
        f64::from_bits(self.stale_perc_bits.load(Ordering::Relaxed))
    }

    /// Passes that stopped on their effort's cap (time or entries).
    pub fn expired_time_cap_reached_count(&self) -> u64 {
        self.time_cap_reached.load(Ordering::Relaxed)
    }

    /// Index entries examined, and how many of them were stale.
    #[cfg(test)]
    pub fn entries_examined(&self) -> (u64, u64) {
        (
            self.examined.load(Ordering::Relaxed),
            self.stale.load(Ordering::Relaxed),
        )
    }

    /// Passes run.
    #[cfg(test)]
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    fn record(&self, r: &PassReport) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.expired_keys.fetch_add(r.expired, Ordering::Relaxed);
        self.examined.fetch_add(r.examined, Ordering::Relaxed);
        self.stale.fetch_add(r.stale, Ordering::Relaxed);
        if r.capped {
            self.time_cap_reached.fetch_add(1, Ordering::Relaxed);
        }
        if r.examined > 0 {
            let pass_perc = 100.0 * r.stale as f64 / r.examined as f64;
            let avg = pass_perc * 0.05 + self.expired_stale_perc() * 0.95;
            self.stale_perc_bits.store(avg.to_bits(), Ordering::Relaxed);
        }
    }
}

/// How the expirer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpiryOptions {
    pub interval_ms: u64,
    pub policy: EffortPolicy,
}

impl Default for ExpiryOptions {
    fn default() -> Self {
        Self {
            interval_ms: PASS_INTERVAL_MS,
            policy: EffortPolicy::default(),
        }
    }
}

/// The running expirer: one job on the store's runtime. Dropping it stops the passes and
/// waits (at most [`STOP_WAIT`]) for the job to end.
pub struct Expirer {
    stop: Arc<AtomicBool>,
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl Expirer {
    /// Starts the periodic passes on `db`'s runtime; deleted keys are touched in `watches`.
    pub fn start(
        db: &Db,
        options: ExpiryOptions,
        stats: Arc<ExpiryStats>,
        watches: Option<Arc<Watches>>,
        events: Option<Arc<dyn KeyEvents + Send + Sync>>,
        pause: Option<Arc<Pause>>,
    ) -> Result<Expirer, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let (stop2, done2, handle) = (stop.clone(), done.clone(), db.handle());
        db.runtime()
            .spawn(move || {
                let told = Told {
                    watches: watches.as_deref(),
                    events: events.as_deref().map(|e| e as &dyn KeyEvents),
                    pause: pause.as_deref(),
                };
                run(&handle, options, &stats, told, &stop2);
                *done2.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
                done2.1.notify_all();
            })
            .map_err(|_| "starting active expiry: the runtime's queue is full".to_string())?;
        Ok(Expirer { stop, done })
    }
}

impl Drop for Expirer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let (lock, cvar) = &*self.done;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = cvar.wait_timeout_while(guard, STOP_WAIT, |done| !*done);
    }
}

/// Who the expirer tells of the keys it deletes.
#[derive(Clone, Copy)]
struct Told<'a> {
    watches: Option<&'a Watches>,
    events: Option<&'a dyn KeyEvents>,
    /// While a `CLIENT PAUSE` is in force no pass runs (Redis's `checkClientPauseTimeout...`).
    pause: Option<&'a Pause>,
}

/// The job: passes until `stop`, sleeping `interval_ms` between them.
fn run(
    handle: &DbHandle,
    options: ExpiryOptions,
    stats: &ExpiryStats,
    told: Told<'_>,
    stop: &AtomicBool,
) {
    let mut effort = options.policy.base;
    let mut last_error: Option<Instant> = None;
    let interval = Duration::from_millis(options.interval_ms);
    while !stop.load(Ordering::SeqCst) {
        let paused = told.pause.is_some_and(|p| p.now().is_some());
        let env = PassEnv {
            watches: told.watches,
            stop: Some(stop),
            events: told.events,
        };
        match if paused {
            Ok(None)
        } else {
            pass(handle, effort, env).map(Some)
        } {
            Ok(None) => {}
            Ok(Some(report)) => {
                stats.record(&report);
                effort = next_effort(&options.policy, effort, report.capped);
            }
            Err(DbError::Closed) => return,
            Err(err) => {
                // A pass that keeps failing (a corrupt index record) is said once a minute.
                if last_error.is_none_or(|t| t.elapsed() >= ERROR_LOG_INTERVAL) {
                    eprintln!("tamer: active expiry pass failed (keys still expire lazily): {err}");
                    last_error = Some(Instant::now());
                }
                effort = options.policy.base;
            }
        }
        // Short naps so that a stop is seen within a few ms, not a whole interval.
        let wake = Instant::now() + interval;
        while !stop.load(Ordering::SeqCst) && Instant::now() < wake {
            tamer_runtime::thread::sleep(interval.min(Duration::from_millis(10)));
        }
    }
}
