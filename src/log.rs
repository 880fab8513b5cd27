//! Logging that never blocks or kills the work.
//!
//! Every log line (tracing's events, and the binary's own lines on standard error) goes
//! into a bounded in-memory queue that one writer thread drains to standard error. A
//! line that finds the queue full is dropped and counted; a line the writer cannot
//! write (a full device, a closed pipe) is dropped and counted; nothing of it reaches
//! the work. Before it exits the process waits a bounded time ([`finish`]) for the
//! queue to drain, so that a readable stderr gets every line, and a stuck one (a pipe
//! nobody reads) costs at most that time.
//!
//! Standard output carries the summary lines; [`outln!`](crate::outln) writes them and
//! ignores a write error (a closed pipe loses the line, not the job: the result is
//! already published, and the exit status is the job's).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Lines the queue holds before new ones are dropped (a few MiB at most).
const QUEUE_LINES: usize = 4096;

/// How long [`finish`] waits for the queue to drain.
pub(crate) const FINISH_WAIT: Duration = Duration::from_secs(2);

struct Sink {
    tx: SyncSender<Vec<u8>>,
    /// Lines handed to the queue.
    queued: AtomicU64,
    /// Lines dropped: the queue was full, or the writer could not write them.
    dropped: AtomicU64,
    /// Lines the writer has taken care of (written or dropped), with its condvar.
    settled: Mutex<u64>,
    settled_cv: Condvar,
}

static SINK: OnceLock<Sink> = OnceLock::new();

fn sink() -> &'static Sink {
    SINK.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        // If the thread cannot be started, the receiver is dropped with it and every
        // line is counted as dropped: logging still never stops the work.
        let _ = std::thread::Builder::new()
            .name("covmerge-log".into())
            .spawn(move || drain(rx));
        Sink {
            tx,
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            settled: Mutex::new(0),
            settled_cv: Condvar::new(),
        }
    })
}

fn drain(rx: Receiver<Vec<u8>>) {
    let mut err = std::io::stderr();
    while let Ok(line) = rx.recv() {
        let s = sink();
        if err.write_all(&line).and_then(|()| err.flush()).is_err() {
            s.dropped.fetch_add(1, Ordering::Relaxed);
        }
        let mut n = s.settled.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        s.settled_cv.notify_all();
    }
}

/// Queues `line` (a whole line, with its newline) for standard error; never blocks.
pub(crate) fn write_line(line: Vec<u8>) {
    let s = sink();
    match s.tx.try_send(line) {
        Ok(()) => {
            s.queued.fetch_add(1, Ordering::Relaxed);
        }
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            s.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A line of the binary's own on standard error (an error, "listening on ..."), in
/// order with the log lines; never blocks.
pub(crate) fn err_line(text: &str) {
    let mut b = Vec::with_capacity(text.len() + 1);
    b.extend_from_slice(text.as_bytes());
    b.push(b'\n');
    write_line(b);
}

/// Lines dropped so far.
pub(crate) fn dropped() -> u64 {
    SINK.get().map_or(0, |s| s.dropped.load(Ordering::Relaxed))
}

/// Before exit: says how many lines were dropped (if any, and if it can), and waits up
/// to `wait` for the queue to drain. Returns whether it drained.
pub(crate) fn finish(wait: Duration) -> bool {
    let Some(s) = SINK.get() else {
        return true;
    };
    let lost = dropped();
    if lost > 0 {
        err_line(&format!(
            "covmerge: {lost} log line(s) could not be written to standard error and were dropped"
        ));
    }
    let deadline = Instant::now() + wait;
    let want = s.queued.load(Ordering::Relaxed);
    let mut n = s.settled.lock().unwrap_or_else(|e| e.into_inner());
    while *n < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        n = s
            .settled_cv
            .wait_timeout(n, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    true
}

/// tracing's writer: each event is formatted whole, then handed over in one write.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_line(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A line on standard output; a write error (a closed pipe, a full device) is ignored.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*).and_then(|()| out.flush());
    }};
}

/// Text on standard output without a newline; a write error is ignored.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = write!(out, $($arg)*).and_then(|()| out.flush());
    }};
}

/// Sets up tracing: `default_level` (the command's) unless RUST_LOG says otherwise;
/// JSON lines when `json` (`--log-json`) or COVMERGE_LOG_FORMAT=json; every line
/// through [`LogWriter`].
pub(crate) fn init_tracing(json: bool, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let json = json || std::env::var("COVMERGE_LOG_FORMAT").is_ok_and(|v| v == "json");
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        .log_internal_errors(false);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}
