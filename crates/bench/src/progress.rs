//! Progress lines on stderr while a long load or measurement phase runs (indicatif). Hidden
//! when stderr is not a terminal (CI logs stay clean); always cleared before the phase's result
//! is printed, so they never interleave with the table.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often a spinner redraws (a thread of indicatif's own; negligible CPU).
const TICK: Duration = Duration::from_millis(200);

/// One phase's progress line.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar counting `total` items (`what`: "keys loaded").
    pub fn count(total: u64, what: &str) -> Self {
        let bar = ProgressBar::new(total);
        let style = ProgressStyle::with_template(
            "  {msg} [{bar:30}] {human_pos}/{human_len} ({per_sec}, {eta} left)",
        )
        .expect("static template")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        bar.enable_steady_tick(TICK);
        Self(bar)
    }

    /// A spinner naming the phase, with its elapsed time.
    pub fn phase(what: &str) -> Self {
        let bar = ProgressBar::new_spinner();
        let style =
            ProgressStyle::with_template("  {spinner} {msg} ({elapsed})").expect("static template");
        bar.set_style(style);
        bar.set_message(what.to_string());
        bar.enable_steady_tick(TICK);
        Self(bar)
    }

    /// Replaces the line's message (a live figure).
    pub fn message(&self, message: String) {
        self.0.set_message(message);
    }

    /// Items done so far.
    pub fn set(&self, done: u64) {
        self.0.set_position(done);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// How long recovery runs before [`RecoveryBar`] shows a bar: past a second.
pub const RECOVERY_BAR_AFTER: Duration = Duration::from_secs(1);

/// A progress bar for a store's recovery at open (`DbOptions::on_recovery_progress`), shown
/// once recovery has taken [`RECOVERY_BAR_AFTER`], one bar per phase; cleared when dropped.
#[derive(Default)]
pub struct RecoveryBar {
    shown: std::sync::Mutex<Option<(tamer_store::RecoveryPhase, Progress)>>,
}

impl RecoveryBar {
    /// Reports `p`.
    pub fn on_progress(&self, p: &tamer_store::RecoveryProgress) {
        if p.elapsed < RECOVERY_BAR_AFTER {
            return;
        }
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        if shown.as_ref().is_none_or(|(phase, _)| *phase != p.phase) {
            let what = match p.phase {
                tamer_store::RecoveryPhase::ReadingQueues => "recovery: staging queue pages read",
                tamer_store::RecoveryPhase::CheckingRecords => "recovery: commit records checked",
                tamer_store::RecoveryPhase::Redoing => "recovery: commit records redone",
            };
            *shown = Some((p.phase, Progress::count(p.total, what)));
        }
        if let Some((_, bar)) = shown.as_ref() {
            bar.set(p.done);
        }
    }

    /// Removes the bar (recovery is over).
    pub fn finish(&self) {
        self.shown.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
