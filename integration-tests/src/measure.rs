//! Measuring a benchmark's child process: wall time, CPU and its own peak RSS, and
//! finding the `covmerge` binary built beside the bench.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// What one measured run used.
pub struct Usage {
    /// Wall time in seconds.
    pub wall: f64,
    /// CPU time (user + system) in seconds.
    pub cpu: f64,
    /// Peak resident set size in KB.
    pub max_rss_kb: i64,
}

/// Runs `cmd`, returning wall time, CPU (user+sys of children) and the peak RSS of the
/// child itself (with the descendants it waited for).
// The child is reaped by wait4, not by `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn measure(cmd: &mut Command) -> Usage {
    // getrusage(RUSAGE_CHILDREN)'s peak RSS is the maximum over every child ever
    // reaped, so a later, smaller run would show an earlier one's peak: wait4 gives
    // this child's own usage (with that of the descendants it waited for).
    //
    // The child is forked, not vforked: a vforked child execs from this process's
    // memory, and the kernel counts this process's peak RSS (a generated input of
    // hundreds of MB) as the child's. Any `pre_exec` makes the standard library fork;
    // a forked child starts with this process's current RSS, small once the input
    // generated is dropped.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| Ok(()));
    }
    let t0 = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
    let wall = t0.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Usage {
        wall,
        cpu: t(ru.ru_utime) + t(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss,
    }
}

/// The `covmerge` binary in the same directory as the running bench binary.
pub fn covmerge_beside_this_exe() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("covmerge")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes bench reported 253 MB for both binaries at 80 managers of one file:
    /// a vforked child execs from the parent's memory, and the kernel counts the
    /// parent's peak RSS (the input it generated, dropped since) as the child's.
    #[test]
    fn a_child_was_measured_with_the_benchs_own_peak() {
        let held: Vec<u8> = (0..256usize << 20).map(|i| i as u8).collect();
        assert_eq!(held[12345], 57);
        drop(held);
        let u = measure(&mut Command::new("true"));
        assert!(
            u.max_rss_kb < 64 << 10,
            "`true` measured at {} KB after the parent held 256 MB",
            u.max_rss_kb
        );
    }
}
