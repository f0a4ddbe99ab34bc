//! Progress of long work, for people watching it: a bar (or, with no known end, a spinner)
//! when standard error is a terminal, plain lines when it is not (a log file, CI), so that
//! neither a terminal fills with lines nor a log with escape codes.
//!
//! `starling job submit --wait` and `job wait`, payload uploads and GBDT fits with
//! `verbose_eval` show their progress through it; payloads may too.
//!
//! ```
//! use starling::progress::{Progress, Unit};
//! let p = Progress::new("rounds", 100, Unit::Count);
//! for done in 1..=100 {
//!     p.set(done);
//!     if done % 50 == 0 {
//!         p.line(&format!("[{done}] half way"));   // a line above the bar, or a plain line
//!     }
//! }
//! p.finish();
//! ```

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a progress counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes: shown as KiB, MiB, ..., with a rate.
    Bytes,
    /// Things (rounds, tasks, files).
    Count,
}

/// One piece of long work's progress (see the module's docs).
#[derive(Debug)]
pub struct Progress {
    what: String,
    total: u64,
    unit: Unit,
    /// On a terminal: the bar.
    bar: Option<ProgressBar>,
    /// Off a terminal: the last quarter reported as a line.
    quarter: AtomicU64,
}

impl Progress {
    /// Work named `what` of `total` units (0: no known end, a spinner on a terminal), drawn
    /// on standard error if it is a terminal.
    pub fn new(what: &str, total: u64, unit: Unit) -> Self {
        Self::with_terminal(what, total, unit, std::io::stderr().is_terminal())
    }

    /// As [`Progress::new`], drawn as on a terminal or not as `terminal` says (a bar is drawn
    /// on standard error either way).
    pub fn with_terminal(what: &str, total: u64, unit: Unit, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = if total == 0 {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} {wide_msg} {elapsed}")
                        .expect("a valid template"),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                bar
            } else {
                let template = match unit {
                    Unit::Bytes => {
                        "{prefix} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}"
                    }
                    Unit::Count => "{prefix} [{bar:30}] {pos}/{len} {elapsed} {msg}",
                };
                let bar = ProgressBar::new(total);
                bar.set_style(
                    ProgressStyle::with_template(template)
                        .expect("a valid template")
                        .progress_chars("=> "),
                );
                bar
            };
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.set_prefix(what.to_string());
            bar
        });
        Progress {
            what: what.to_string(),
            total,
            unit,
            bar,
            quarter: AtomicU64::new(0),
        }
    }

    /// Whether it draws a bar (standard error is a terminal).
    pub fn is_drawn(&self) -> bool {
        self.bar.is_some()
    }

    /// `done` units are done. Off a terminal a line says so at each quarter of the total.
    pub fn set(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        if self.total == 0 {
            return;
        }
        let quarter = (done.min(self.total) * 4 / self.total).min(4);
        if quarter > self.quarter.fetch_max(quarter, Ordering::Relaxed) {
            eprintln!("{}: {}", self.what, self.amount(done));
        }
    }

    /// The bar's note (a state, a metric); off a terminal, nothing: say it with
    /// [`Progress::line`] if it matters.
    pub fn note(&self, note: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(note.to_string());
        }
    }

    /// A line of its own: above the bar on a terminal, plain otherwise.
    pub fn line(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Done: the bar is cleared.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// `done` of the total, as a plain line says it.
    fn amount(&self, done: u64) -> String {
        let pct = done.saturating_mul(100) / self.total.max(1);
        match self.unit {
            Unit::Bytes => format!(
                "{} of {} ({pct}%)",
                indicatif::BinaryBytes(done),
                indicatif::BinaryBytes(self.total)
            ),
            Unit::Count => format!("{done} of {} ({pct}%)", self.total),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_terminal_it_reports_each_quarter_once() {
        let p = Progress::with_terminal("upload", 1000, Unit::Bytes, false);
        assert!(!p.is_drawn());
        for (done, quarter) in [(100, 0), (250, 1), (260, 1), (999, 3), (1000, 4), (1200, 4)] {
            p.set(done);
            assert_eq!(p.quarter.load(Ordering::Relaxed), quarter, "at {done}");
        }
        assert_eq!(p.amount(512), "512 B of 1000 B (51%)");
        let rounds = Progress::with_terminal("rounds", 8, Unit::Count, false);
        assert_eq!(rounds.amount(2), "2 of 8 (25%)");
    }

    #[test]
    fn on_a_terminal_it_draws_a_bar_or_a_spinner() {
        let p = Progress::with_terminal("rounds", 10, Unit::Count, true);
        assert!(p.is_drawn());
        p.set(5);
        assert_eq!(p.bar.as_ref().map(|b| b.position()), Some(5));
        let s = Progress::with_terminal("job 3", 0, Unit::Count, true);
        s.note("RUNNING");
        assert_eq!(s.bar.as_ref().map(|b| b.message()), Some("RUNNING".into()));
    }
}
