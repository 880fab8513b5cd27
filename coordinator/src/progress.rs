//! A live progress line on a terminal: phase, tasks done, rows read, rows/s, ETA.
//! Nothing is drawn when stderr is not a terminal or with `--quiet`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use covmerge_proto::TaskRef;
use covmerge_telemetry::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of one job, shown or not.
pub struct ProgressView {
    bar: Option<ProgressBar>,
    rows: Option<Arc<Progress>>,
    /// The rows counter is this view's own, filled from settled splits (fleet mode),
    /// not counted live by workers in this process (embedded mode).
    rows_from_reports: bool,
    start: Instant,
}

impl ProgressView {
    /// A view that draws nothing (`--quiet`, or stderr not a terminal).
    pub fn hidden() -> Self {
        ProgressView {
            bar: None,
            rows: None,
            rows_from_reports: false,
            start: Instant::now(),
        }
    }

    /// The coordinator's view: the same line as `merge`, its rows read counted from the
    /// splits that settled (the workers run elsewhere).
    pub fn fleet_terminal() -> Self {
        let mut v = ProgressView::terminal(Some(Arc::default()));
        v.rows_from_reports = true;
        v
    }

    /// Rows read by the settled splits (fleet mode only; embedded workers count live).
    pub fn settled_rows_read(&self, n: u64) {
        if let (true, Some(rows)) = (self.rows_from_reports, &self.rows) {
            rows.rows_read.store(n, Ordering::Relaxed);
            self.tick();
        }
    }

    /// Draws on stderr if it is a terminal; `rows` are the live counters of in-process workers.
    pub fn terminal(rows: Option<Arc<Progress>>) -> Self {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return ProgressView {
                bar: None,
                rows,
                rows_from_reports: false,
                start: Instant::now(),
            };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(5));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>6} [{bar:30}] {pos}/{len} tasks  {msg}  eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        let view = ProgressView {
            bar: Some(bar),
            rows,
            rows_from_reports: false,
            start: Instant::now(),
        };
        view.tick();
        view
    }

    fn tick(&self) {
        if let (Some(bar), Some(rows)) = (&self.bar, &self.rows) {
            let n = rows.rows_read.load(Ordering::Relaxed);
            let secs = self.start.elapsed().as_secs_f64().max(0.001);
            bar.set_message(format!("{n} rows read, {:.0} rows/s", n as f64 / secs));
        }
    }

    /// Starts phase `name` of `tasks` tasks: the bar restarts from 0.
    pub fn phase(&self, name: &str, tasks: u64) {
        if let Some(bar) = &self.bar {
            bar.set_prefix(name.to_string());
            bar.set_length(tasks);
            bar.set_position(0);
            bar.reset_eta();
        }
    }

    /// One more task of the phase finished.
    pub fn task_finished(&self, _t: &TaskRef) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            self.tick();
        }
    }

    /// The job ended: the line is cleared.
    pub fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
