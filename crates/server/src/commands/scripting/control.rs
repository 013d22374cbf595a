//! Scripts that run long: past `busy-reply-threshold` a script is busy (other clients get
//! `-BUSY`, as from Redis, until it ends), and `SCRIPT KILL` stops a busy script that has
//! not written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use super::state::RunControl;
use super::state::{Scripts, RUNS_MAX};

/// What `SCRIPT KILL` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Kill {
    /// Busy scripts were told to stop.
    Killed,
    /// No script is busy.
    NotBusy,
    /// The busy script wrote already: it runs on.
    Unkillable,
}

impl Scripts {
    /// Registers a run starting now (busy past `threshold_ms`; 0: never).
    pub fn running(&self, threshold_ms: u64) -> Arc<RunControl> {
        let threshold = if threshold_ms == 0 {
            Duration::MAX
        } else {
            Duration::from_millis(threshold_ms)
        };
        let control = Arc::new(RunControl {
            started: Instant::now(),
            threshold,
            busy: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            killed: AtomicBool::new(false),
        });
        let mut running = self.runs.running.lock().expect("runs poisoned");
        if running.len() < RUNS_MAX {
            running.push(Arc::clone(&control));
        }
        control
    }

    /// The hook's check: the run becomes busy once past its threshold.
    pub fn tick(&self, control: &RunControl) {
        if !control.busy.load(Ordering::Relaxed) && control.started.elapsed() >= control.threshold {
            control.busy.store(true, Ordering::Relaxed);
            self.runs.busy.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The run ended.
    pub fn finished(&self, control: &Arc<RunControl>) {
        if control.busy.load(Ordering::Relaxed) {
            self.runs.busy.fetch_sub(1, Ordering::AcqRel);
        }
        let mut running = self.runs.running.lock().expect("runs poisoned");
        if let Some(at) = running.iter().position(|c| Arc::ptr_eq(c, control)) {
            running.swap_remove(at);
        }
    }

    /// Whether a script is busy now (the gate answers `-BUSY`).
    pub fn busy(&self) -> bool {
        self.runs.busy.load(Ordering::Acquire) > 0
    }

    /// `SCRIPT KILL`: stops every busy script, unless one has written.
    pub fn kill(&self) -> Kill {
        let running = self.runs.running.lock().expect("runs poisoned");
        let busy: Vec<&Arc<RunControl>> = running
            .iter()
            .filter(|c| c.busy.load(Ordering::Relaxed))
            .collect();
        if busy.is_empty() {
            return Kill::NotBusy;
        }
        if busy.iter().any(|c| c.wrote.load(Ordering::Relaxed)) {
            return Kill::Unkillable;
        }
        for control in busy {
            control.killed.store(true, Ordering::Release);
        }
        Kill::Killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a run busy before its threshold, a busy count that leaks past the run's end,
    /// or a kill of a script that wrote.
    #[test]
    fn runs_become_busy_past_the_threshold_and_kill_spares_writers() {
        let scripts = Scripts::default();
        let quick = scripts.running(60_000);
        scripts.tick(&quick);
        assert!(!scripts.busy());
        assert_eq!(scripts.kill(), Kill::NotBusy);
        let slow = scripts.running(1);
        std::thread::sleep(Duration::from_millis(5));
        scripts.tick(&slow);
        assert!(scripts.busy());
        slow.wrote.store(true, Ordering::Relaxed);
        assert_eq!(scripts.kill(), Kill::Unkillable);
        slow.wrote.store(false, Ordering::Relaxed);
        assert_eq!(scripts.kill(), Kill::Killed);
        assert!(slow.killed.load(Ordering::Relaxed) && !quick.killed.load(Ordering::Relaxed));
        scripts.finished(&slow);
        scripts.finished(&quick);
        assert!(!scripts.busy());
    }
}
