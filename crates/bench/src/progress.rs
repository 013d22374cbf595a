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
