//! The `covmerge` binary: parses the command line, sets up logging, and calls the
//! library crates. No merge logic lives here.

mod log;

mod cli;
mod cmd;
mod embedded;
mod fleet;
mod job;
mod scratch;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tune_malloc();
    let args = cli::Cli::parse();
    log::init_tracing(args.log_json, args.cmd.default_log_level());
    // Blocking threads run splits, merges and local file I/O; each new thread costs a
    // malloc arena, so keep the pool small.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(16)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log::err_line(&format!("covmerge: cannot start the runtime: {e}"));
            log::finish(log::FINISH_WAIT);
            return ExitCode::FAILURE;
        }
    };
    // The exit status is the job's: a log line or a summary line that could not be
    // written changes nothing (see `log`).
    let code = match rt.block_on(cmd::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::err_line(&format!("covmerge: error: {e:#}"));
            ExitCode::FAILURE
        }
    };
    log::finish(log::FINISH_WAIT);
    code
}

/// glibc gives each thread that allocates its own arena (up to 8 per core); merge
/// threads build and free large hash tables, and freed memory stranded in idle arenas
/// doubled the peak RSS (343 MB against 190 MB with two arenas on the 14.5M-row
/// benchmark corpus, see BENCHMARKS.md). Two arenas cost nothing measurable in speed
/// here. Respects an explicit MALLOC_ARENA_MAX.
///
/// A split's tables grow to a few MiB each and are freed at every flush; by default
/// glibc serves blocks that large with mmap, or trims them off its heaps when freed,
/// so every flush faulted the same pages in and zeroed them again (~6 % of a merge's
/// CPU in page faults). Blocks up to 32 MiB now come from the heaps, and up
/// to 64 MiB of free heap is kept for the next flush; the memory reused is memory the
/// flushes needed anyway. Respects GLIBC_TUNABLES and MALLOC_*_ settings.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const M_TRIM_THRESHOLD: libc::c_int = -1;
        const M_MMAP_THRESHOLD: libc::c_int = -3;
        const M_ARENA_MAX: libc::c_int = -8;
        let set = |var: &str| std::env::var_os(var).is_some();
        // SAFETY: mallopt only tunes the allocator; called before any thread exists.
        unsafe {
            if !set("MALLOC_ARENA_MAX") {
                libc::mallopt(M_ARENA_MAX, 2);
            }
            if !set("GLIBC_TUNABLES")
                && !set("MALLOC_MMAP_THRESHOLD_")
                && !set("MALLOC_TRIM_THRESHOLD_")
            {
                libc::mallopt(M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(M_TRIM_THRESHOLD, 64 << 20);
            }
        }
    }
}
