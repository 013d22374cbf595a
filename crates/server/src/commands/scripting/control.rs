//! Scripts that run long: past `busy-reply-threshold` a script is busy (other clients get
//! `-BUSY`, as from Redis, until it ends), and `SCRIPT KILL` stops a busy script that has
//! not written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use super::state::RunControl;
use super::state::{FunctionCall, Scripts, RUNS_MAX};
use crate::commands::gate::BusyScript;

/// What `SCRIPT KILL` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Kill {
    /// Busy scripts were told to stop.
    Killed,
    /// No script is busy.
    NotBusy,
    /// The busy script wrote already: it runs on.
    Unkillable,
    /// What is busy is the other kind (a function for `SCRIPT KILL`, a script for `FUNCTION
    /// KILL`): the reply is its `-BUSY`.
    OtherKind(BusyScript),
}

impl Scripts {
    /// Registers a run starting now (busy past `threshold_ms`; 0: never) of a script or of
    /// `function`.
    pub fn running(&self, threshold_ms: u64, function: Option<FunctionCall>) -> Arc<RunControl> {
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
            function,
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

    /// What is busy now, if anything (the gate answers `-BUSY`): a function when any busy
    /// run is one.
    pub fn busy(&self) -> Option<BusyScript> {
        if self.runs.busy.load(Ordering::Acquire) == 0 {
            return None;
        }
        let running = self.runs.running.lock().expect("runs poisoned");
        let function = running
            .iter()
            .any(|c| c.busy.load(Ordering::Relaxed) && c.function.is_some());
        Some(if function {
            BusyScript::Function
        } else {
            BusyScript::Eval
        })
    }

    /// The function running longest, with its run time in ms (`FUNCTION STATS`).
    pub fn running_function(&self) -> Option<(FunctionCall, u64)> {
        let running = self.runs.running.lock().expect("runs poisoned");
        running
            .iter()
            .filter_map(|c| c.function.as_ref().map(|f| (f, c.started)))
            .min_by_key(|(_, started)| *started)
            .map(|(f, started)| (f.clone(), started.elapsed().as_millis() as u64))
    }

    /// `SCRIPT KILL` (`kind` `Eval`) or `FUNCTION KILL` (`Function`): stops every busy run of
    /// that kind, unless one has written, in Redis's order of refusals.
    pub fn kill(&self, kind: BusyScript) -> Kill {
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
        let kind_of = |c: &Arc<RunControl>| {
            if c.function.is_some() {
                BusyScript::Function
            } else {
                BusyScript::Eval
            }
        };
        if let Some(other) = busy.iter().map(|c| kind_of(c)).find(|k| *k != kind) {
            return Kill::OtherKind(other);
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
        let quick = scripts.running(60_000, None);
        scripts.tick(&quick);
        assert!(scripts.busy().is_none());
        assert_eq!(scripts.kill(BusyScript::Eval), Kill::NotBusy);
        let slow = scripts.running(1, None);
        std::thread::sleep(Duration::from_millis(5));
        scripts.tick(&slow);
        assert_eq!(scripts.busy(), Some(BusyScript::Eval));
        slow.wrote.store(true, Ordering::Relaxed);
        assert_eq!(scripts.kill(BusyScript::Eval), Kill::Unkillable);
        slow.wrote.store(false, Ordering::Relaxed);
        assert_eq!(
            scripts.kill(BusyScript::Function),
            Kill::OtherKind(BusyScript::Eval)
        );
        assert_eq!(scripts.kill(BusyScript::Eval), Kill::Killed);
        assert!(slow.killed.load(Ordering::Relaxed) && !quick.killed.load(Ordering::Relaxed));
        scripts.finished(&slow);
        scripts.finished(&quick);
        assert!(scripts.busy().is_none());
    }
}
