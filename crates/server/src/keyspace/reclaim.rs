//! The background reclaim of flushed databases' keys: an OS thread of its own (never one of
//! the runtime's cores) that runs [`keyspace::reclaim_step`] as store transactions, one after
//! the other while a pass is under way, and checks every [`IDLE_PAUSE`] when none is. Each
//! step is bounded (`keyspace::RECLAIM_SLOTS_PER_STEP` directory slots) and commits its
//! progress with its deletes, so a crash resumes the pass where it stopped, and commands
//! interleave with it between steps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tamer_store::{Db, DbError};

use crate::keyspace::{self, Reclaim};

/// How often an idle reclaimer looks for a pass to run.
pub const IDLE_PAUSE: Duration = Duration::from_millis(20);
/// How long the reclaimer waits after a failed step before it tries again.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

/// The running reclaimer; [`Reclaimer::stop`] (or drop) ends it.
pub struct Reclaimer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// One step in a transaction of its own.
pub fn step(db: &Db) -> Result<Reclaim, DbError> {
    db.transaction(|tx| keyspace::reclaim_step(tx).map_err(crate::keyspace::store_error))
}

impl Reclaimer {
    pub fn start(db: Arc<Db>) -> Result<Reclaimer, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tamer-reclaim".into())
            .spawn(move || {
                // Bounded per pass: one step; ends when asked to stop.
                while !stop2.load(Ordering::Acquire) {
                    match step(&db) {
                        Ok(Reclaim::Working) => {}
                        Ok(Reclaim::Idle) => std::thread::sleep(IDLE_PAUSE),
                        Err(DbError::Closed) => return,
                        Err(err) => {
                            eprintln!("tamer: reclaiming flushed keys: {err}");
                            std::thread::sleep(ERROR_PAUSE);
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Reclaimer {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops after the step under way.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.halt();
    }
}
