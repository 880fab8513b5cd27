//! What each subcommand does, one file each: parse and call. The arguments are
//! `crate::cli`'s; the settings they make are built once, in `crate::job` (a job's),
//! `crate::embedded` (`merge`'s) and `crate::fleet` (the coordinator's and the
//! worker's).

use anyhow::Result;

use crate::cli::{Cli, Command};

pub(crate) mod coordinator;
pub(crate) mod gen;
pub(crate) mod merge;
pub(crate) mod notify;
pub(crate) mod report;
pub(crate) mod rollup;
pub(crate) mod sources;
pub(crate) mod status;
pub(crate) mod worker;

/// Runs the command `cli` names.
pub(crate) async fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Merge(m) => merge::run(m).await,
        Command::Coordinator(c) => coordinator::run(c).await,
        Command::Worker(w) => worker::run(w).await,
        Command::Notify(n) => notify::run(n).await,
        Command::Report(r) => report::report(r).await,
        Command::Diff(d) => report::diff(d).await,
        Command::Rollup(r) => rollup::run(r).await,
        Command::Status(st) => status::run(st).await,
        Command::Gen(g) => gen::run(g),
        Command::Sources(s) => sources::run(s).await,
    }
}

/// A summary line on standard output, or on standard error when the result itself
/// goes to standard output (`--out -`). A closed stdout loses the line, not the job:
/// the result is already written.
pub(crate) fn say(to_stderr: bool, line: &str) {
    if to_stderr {
        crate::log::err_line(line);
    } else {
        crate::outln!("{line}");
    }
}

/// Resolves at SIGINT, SIGTERM, SIGHUP or SIGQUIT with the signal's name and the exit status a shell
/// gives a process it killed (128 + the signal number: 130, 143).
pub(crate) async fn interrupted() -> (&'static str, i32) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut quit)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => ("SIGINT", 130),
        _ = term.recv() => ("SIGTERM", 143),
        // A dropped ssh session.
        _ = hup.recv() => ("SIGHUP", 129),
        _ = quit.recv() => ("SIGQUIT", 131),
    }
}

/// syz-covermerger's report of `save_coverage`.
pub(crate) fn print_rows(rows: Option<i64>) {
    if let Some(n) = rows {
        crate::outln!("created {n} DB rows");
    }
}

/// Whether a job's summary lines go to standard error: its result or manifest is
/// written to standard output (`-`), which must hold that alone.
pub(crate) fn summary_to_stderr(out: Option<&str>, manifest: Option<&std::path::Path>) -> bool {
    let on_stdout = |o: &str| covmerge_storage::local::same_location(o, "-");
    out.is_some_and(on_stdout) || manifest.is_some_and(|p| on_stdout(&p.to_string_lossy()))
}
