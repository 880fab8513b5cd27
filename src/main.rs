//! The `covmerge` binary: parses the command line, sets up logging, and calls the
//! library crates. No merge logic lives here.

mod cli;
mod embedded;
mod report_cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    limit_malloc_arenas();
    let args = cli::Cli::parse();
    cli::init_tracing(&args);
    // Blocking threads run splits, merges and local file I/O; each new thread costs a
    // malloc arena, so keep the pool small.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(16)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("covmerge: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(cli::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("covmerge: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// glibc gives each thread that allocates its own arena (up to 8 per core); merge
/// threads build and free large hash tables, and freed memory stranded in idle arenas
/// doubled the peak RSS (343 MB against 190 MB with two arenas on the 14.5M-row
/// benchmark corpus, see BENCHMARKS.md). Two arenas cost nothing measurable in speed
/// here. Respects an explicit MALLOC_ARENA_MAX.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        const M_ARENA_MAX: libc::c_int = -8;
        // SAFETY: mallopt only tunes the allocator; called before any thread exists.
        unsafe {
            libc::mallopt(M_ARENA_MAX, 2);
        }
    }
}
