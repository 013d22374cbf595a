//! The harness's progress bar on stderr (indicatif): hidden when stderr is not a terminal,
//! cleared when dropped. The same bar as the benches' count bar, kept here so that the harness
//! needs nothing from them.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often the bar redraws (a thread of indicatif's own; negligible CPU).
const TICK: Duration = Duration::from_millis(200);

/// A bar counting `total` items.
pub(crate) struct Progress(ProgressBar);

impl Progress {
    /// A bar counting `total` items (`what`: "crashes").
    pub(crate) fn count(total: u64, what: &str) -> Self {
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

    /// Items done so far.
    pub(crate) fn set(&self, done: u64) {
        self.0.set_position(done);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
