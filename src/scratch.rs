//! `merge`'s scratch directories, `$TMPDIR/covmerge-*` (its spills and parts): each
//! holds an owner marker, [`MARKER`], locked (`flock`) by the merge that made it for
//! as long as it runs. A merge killed with SIGKILL (or by the OOM killer, or a power
//! cut) cannot remove its directory; the lock dies with it. Each merge, before it
//! starts, sweeps its siblings whose marker is not locked: their owner is gone.
//!
//! - A directory whose marker is locked belongs to a live merge: never touched.
//! - One with an unlocked marker: removed, logged with its size and former owner.
//! - One without a marker (made by a covmerge from before markers, or by a process
//!   stopped between making the directory and writing its marker; a marker is written
//!   and locked under another name, then renamed into place): removed only when empty,
//!   untouched for [`UNMARKED_AFTER`] and named as covmerge names its temporary
//!   directories (`covmerge-` and six random letters and digits, or
//!   `covmerge-partial-…`, `covmerge-partial-shard-…`, `covmerge-rollup-…`). Anything
//!   in it may be anyone's: a user's `covmerge-backup`, an archive just unpacked with
//!   its old times.
//! - A dead one holding another file system (a bind mount) or a live merge's marker
//!   anywhere below it (a `$TMPDIR` inside it) is left alone, with a warning.
//! - A marker is opened without following a symbolic link and without waiting: one
//!   that is not a regular file (a FIFO, a device, a link to `/dev/zero` or to a
//!   secret) leaves its directory alone, and at most 512 bytes of it are read for the
//!   log, its first line without control characters.
//! - Only directories named `covmerge-*` directly in the temporary directory, never
//!   through a symbolic link; a directory that cannot be read or removed is left with
//!   a warning, and the merge goes on.
//!
//! The lock is taken with `O_CLOEXEC` (std's default): no child process inherits it.
//! `flock` locks are local to a machine: a `$TMPDIR` shared between machines over NFS
//! is not supported.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

/// The owner marker's name inside a scratch directory.
pub(crate) const MARKER: &str = ".covmerge-owner";

/// The prefix of scratch directories' names.
pub(crate) const PREFIX: &str = "covmerge-";

/// How long a scratch directory without a marker must have been left untouched to be
/// swept (older covmerge versions wrote none).
pub(crate) const UNMARKED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Sweeps `$TMPDIR` of the scratch directories of covmerge processes that are gone
/// (killed before they could remove theirs), then makes and claims a new one named
/// `prefix…` there (`prefix` starts with [`PREFIX`]); refused with a message naming
/// the directory.
pub(crate) fn sweep_and_make(prefix: &str) -> Result<(tempfile::TempDir, Owner), String> {
    debug_assert!(prefix.starts_with(PREFIX));
    let tmp_root = std::env::temp_dir();
    let swept = sweep(&tmp_root);
    tracing::debug!(live = swept.live, tmp = %tmp_root.display(), "scratch directories of live merges left alone");
    if !swept.removed.is_empty() {
        warn!(
            tmp = %tmp_root.display(),
            "removed {} scratch director{} ({} bytes) of merges that are gone",
            swept.removed.len(),
            if swept.removed.len() == 1 { "y" } else { "ies" },
            swept.removed.iter().map(|(_, b)| b).sum::<u64>(),
        );
    }
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?;
    let owner = claim(tmp.path()).map_err(|e| {
        format!(
            "temporary directory {}: its owner marker: {e}",
            tmp.path().display()
        )
    })?;
    Ok((tmp, owner))
}

/// This process's claim on its scratch directory: the marker, locked until dropped.
pub(crate) struct Owner {
    _lock: File,
}

/// Writes and locks the marker of `dir`, a scratch directory this process just made.
pub(crate) fn claim(dir: &Path) -> std::io::Result<Owner> {
    claim_with(dir, || {})
}

/// [`claim`], running `between` once the marker is written and locked under a name of
/// its own, before it is renamed into place: a sibling's sweep sees no marker (a young
/// directory, left alone) or a locked one, never one not locked yet. (The marker was
/// made under its name, then locked: a sweep in between took the lock, found the
/// owner gone and removed the live merge's directory.)
fn claim_with(dir: &Path, between: impl FnOnce()) -> std::io::Result<Owner> {
    let path = dir.join(MARKER);
    let staged = dir.join(format!("{MARKER}.new"));
    let mut f = File::options()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&staged)?;
    if !try_lock(&f)? {
        return Err(std::io::Error::other(format!(
            "{} is locked by another process",
            staged.display()
        )));
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    writeln!(
        f,
        "pid {} host {} started {}",
        std::process::id(),
        host.trim(),
        unix_now()
    )?;
    between();
    if path.exists() {
        return Err(std::io::Error::other(format!(
            "{} exists: the directory is another merge's",
            path.display()
        )));
    }
    std::fs::rename(&staged, &path)?;
    Ok(Owner { _lock: f })
}

/// `flock(LOCK_EX | LOCK_NB)` on `f`: `Ok(true)` when this process now holds it,
/// `Ok(false)` when another open file holds it. Released when `f` is closed.
fn try_lock(f: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `f` owns for the duration of the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn unix_now() -> String {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| format!("{}s after the Unix epoch", d.as_secs()))
        .unwrap_or_default()
}

/// What one sweep did.
#[derive(Debug, Default)]
pub(crate) struct Swept {
    /// Directories removed, each with its size in bytes.
    pub(crate) removed: Vec<(PathBuf, u64)>,
    /// Directories left: their owner is alive (or their marker's age says so).
    pub(crate) live: usize,
}

/// Removes the scratch directories in `tmp` whose owner is gone (see the module).
pub(crate) fn sweep(tmp: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return swept;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let dir = entry.path();
        // `file_type` does not follow a symbolic link.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        match owner_gone(&dir) {
            Ok(Some((held, why))) => {
                let Inside { bytes, kept } = inspect(&dir);
                if let Some(kept) = kept {
                    warn!(dir = %dir.display(), "a scratch directory of a merge that is gone ({why}) holds {kept}; left alone");
                    continue;
                }
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {
                        info!(dir = %dir.display(), bytes, "removed the scratch directory of a merge that is gone ({why})");
                        swept.removed.push((dir, bytes));
                    }
                    Err(e) => {
                        warn!(dir = %dir.display(), error = %e, "cannot remove the scratch directory of a merge that is gone ({why})")
                    }
                }
                drop(held);
            }
            Ok(None) => swept.live += 1,
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "cannot tell whether this scratch directory's merge is alive; left alone")
            }
        }
    }
    swept
}

/// `Some` (holding the marker's lock while the directory is removed, and why it is
/// stale) when `dir`'s owner is gone; `None` when it is alive or too young to tell.
fn owner_gone(dir: &Path) -> std::io::Result<Option<(Option<File>, String)>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let marker = dir.join(MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(m) if !m.is_file() => {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                marker.display()
            )))
        }
        _ => {}
    }
    // Not through a symbolic link, and without waiting (a FIFO): a marker that is not
    // a regular file is not one covmerge wrote, and its directory is left alone.
    let opened = File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&marker);
    match opened {
        Ok(f) if !f.metadata()?.is_file() => Err(std::io::Error::other(format!(
            "{} is not a regular file",
            marker.display()
        ))),
        Ok(f) => match try_lock(&f) {
            Ok(true) => {
                // What the owner wrote (one short line), not what a forged one holds.
                let mut owner = String::new();
                let _ = (&f).take(MARKER_BYTES).read_to_string(&mut owner);
                let owner: String = owner
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect();
                let owner = owner.trim();
                let why = if owner.is_empty() {
                    "its marker is not locked".to_string()
                } else {
                    format!("{owner}; its marker is not locked")
                };
                Ok(Some((Some(f), why)))
            }
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Only an empty directory of a name covmerge's temporary directories take
            // (one left by a process stopped between making it and claiming it): a
            // directory with anything in it may be anyone's (a user's
            // `covmerge-backup`, an archive just unpacked with its old times).
            if !temporary_name(dir) || std::fs::read_dir(dir)?.next().is_some() {
                return Ok(None);
            }
            let modified = std::fs::symlink_metadata(dir)?.modified()?;
            let age = SystemTime::now()
                .duration_since(modified)
                .unwrap_or(Duration::ZERO);
            if age >= UNMARKED_AFTER {
                Ok(Some((
                    None,
                    format!("no owner marker, untouched for {} h", age.as_secs() / 3600),
                )))
            } else {
                Ok(None)
            }
        }
        Err(e) => Err(e),
    }
}

/// Bytes of a marker read at most (its owner writes one short line).
const MARKER_BYTES: u64 = 512;

/// Whether `dir` is named as covmerge names its temporary directories: `covmerge-`,
/// then `partial-`, `partial-shard-` or `rollup-` or nothing, then the six random
/// letters and digits of `tempfile`.
fn temporary_name(dir: &Path) -> bool {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let random = ["partial-shard-", "partial-", "rollup-"]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .unwrap_or(rest);
    random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// What removing a dead merge's directory would take.
struct Inside {
    /// The bytes of its files.
    bytes: u64,
    /// Why it must be kept, if so: another file system mounted inside it (a bind
    /// mount), or a live covmerge's marker below it (a `$TMPDIR` inside it).
    kept: Option<String>,
}

/// Walks `dir` (not following symbolic links): its files' bytes, and whether anything
/// below it forbids its removal ([`Inside::kept`]).
fn inspect(dir: &Path) -> Inside {
    use std::os::unix::fs::MetadataExt;
    let mut inside = Inside {
        bytes: 0,
        kept: None,
    };
    // A bind mount of the same file system has the same device: the mount table says.
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if let Some(m) = mount_points().into_iter().find(|m| m.starts_with(&real)) {
        inside.kept = Some(format!("a mount point at {}", m.display()));
        return inside;
    }
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return inside;
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.dev() != top.dev() {
                inside.kept = Some(format!("another file system at {}", e.path().display()));
                return inside;
            }
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                inside.bytes += m.len();
                if e.file_name() == MARKER && d != dir && live_marker(&e.path()) {
                    inside.kept = Some(format!("a live merge's marker {}", e.path().display()));
                    return inside;
                }
            }
        }
    }
    inside
}

/// This process's mount points (`/proc/self/mountinfo`'s fifth field, its octal
/// escapes undone); none where it cannot be read.
fn mount_points() -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| {
            let b = m.as_bytes();
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                let esc = b[i] == b'\\' && i + 3 < b.len();
                let digit = |c: u8| u32::from(c.wrapping_sub(b'0'));
                let v = esc.then(|| digit(b[i + 1]) * 64 + digit(b[i + 2]) * 8 + digit(b[i + 3]));
                let octal = esc && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
                if let (true, Some(v @ 0..=255)) = (octal, v) {
                    out.push(v as u8);
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            PathBuf::from(std::ffi::OsString::from_vec(out))
        })
        .collect()
}

/// Whether the marker at `path` (a regular file) is locked by a live process.
fn live_marker(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return true;
    };
    !matches!(try_lock(&f), Ok(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_merge_s_directory_is_swept_and_a_live_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let live = tmp.path().join("covmerge-live");
        let dead = tmp.path().join("covmerge-dead");
        let young = tmp.path().join("covmerge-young");
        let other = tmp.path().join("other-dead");
        for d in [&live, &dead, &young, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("spill"), [0u8; 1000]).unwrap();
        }
        let _owner = claim(&live).unwrap();
        // A dead owner: its marker written, its lock gone with it.
        drop(claim(&dead).unwrap());
        std::fs::write(other.join(MARKER), "pid 1").unwrap();
        let swept = sweep(tmp.path());
        assert_eq!(swept.removed.len(), 1, "{swept:?}");
        assert_eq!(swept.removed[0].0, dead);
        assert!(swept.removed[0].1 >= 1000, "{swept:?}");
        assert_eq!(swept.live, 2, "the live one and the young unmarked one");
        assert!(!dead.exists());
        assert!(live.join("spill").exists() && young.exists() && other.exists());
        // A second claim on a live directory is refused.
        assert!(claim(&live).is_err());
    }

    /// A sibling's sweep between a marker's creation and its lock found it unlocked,
    /// took the owner for gone and removed the live merge's directory (10 merges
    /// started at once: one failed "locked by another process", others lost their
    /// scratch directory).
    /// Sets `dir`'s modification time `hours` back.
    fn age(dir: &Path, hours: u64) {
        let t = SystemTime::now() - Duration::from_secs(hours * 3600);
        File::open(dir).unwrap().set_modified(t).unwrap();
    }

    /// A FIFO marker hung every later merge at start (the sweep opened it and read
    /// from a pipe it alone wrote); a link to `/dev/zero` was read whole (2.1 GB); a
    /// link to any file was opened for writing and its text logged.
    #[test]
    fn a_marker_that_is_a_fifo_or_a_link_hung_or_was_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("covmerge-fifo01");
        let zero = tmp.path().join("covmerge-zero01");
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "a secret\n").unwrap();
        for d in [&fifo, &zero] {
            std::fs::create_dir(d).unwrap();
        }
        let c = std::ffi::CString::new(fifo.join(MARKER).to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path of this test's own directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", zero.join(MARKER)).unwrap();
        let linked = tmp.path().join("covmerge-link01");
        std::fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(&secret, linked.join(MARKER)).unwrap();
        let swept = sweep(tmp.path());
        assert!(swept.removed.is_empty(), "{:?}", swept.removed);
        assert!(fifo.exists() && zero.exists() && linked.exists());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "a secret\n");
    }

    /// A user's own `covmerge-partials` (an input partial in it) untouched for a day
    /// was removed by the next merge's sweep, and so were `covmerge-backup` and an
    /// archive just unpacked (its old times restored): an unmarked directory is now
    /// removed only when empty and named as covmerge names its own.
    #[test]
    fn an_unmarked_directory_with_anything_in_it_was_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("covmerge-partials");
        let backup = tmp.path().join("covmerge-backup");
        let empty = tmp.path().join("covmerge-partial-shard-Zz9Yy8");
        let empty_user = tmp.path().join("covmerge-my-empty-one");
        for d in [&user, &backup, &empty, &empty_user] {
            std::fs::create_dir(d).unwrap();
        }
        for d in [&user, &backup] {
            std::fs::write(d.join("partial.json"), "{}").unwrap();
        }
        for d in [&user, &backup, &empty, &empty_user] {
            age(d, 25);
        }
        let swept = sweep(tmp.path());
        assert_eq!(swept.removed.len(), 1, "{:?}", swept.removed);
        assert!(!empty.exists());
        assert!(user.join("partial.json").exists() && backup.join("partial.json").exists());
        assert!(empty_user.exists());
    }

    /// A `$TMPDIR` three levels inside a dead merge's directory lost a live merge's
    /// directory to the sweep of its parent, and a file system mounted inside a dead
    /// one would have been emptied: such a directory is now left alone.
    #[test]
    fn a_live_merge_three_levels_inside_a_dead_one_was_removed_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = tmp.path().join("covmerge-dead01");
        std::fs::create_dir(&dead).unwrap();
        drop(claim(&dead).unwrap());
        let live = dead.join("a/b/covmerge-live01");
        std::fs::create_dir_all(&live).unwrap();
        let _owner = claim(&live).unwrap();
        let swept = sweep(tmp.path());
        assert!(swept.removed.is_empty(), "{:?}", swept.removed);
        assert!(live.join(MARKER).exists());
        drop(_owner);
        let swept = sweep(tmp.path());
        assert_eq!(
            swept.removed.len(),
            1,
            "the owner gone: {:?}",
            swept.removed
        );
    }

    #[test]
    fn a_sweep_between_a_markers_creation_and_its_lock_removed_a_live_merge() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("covmerge-starting");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("spill"), [0u8; 10]).unwrap();
        let mut swept = None;
        let _owner = claim_with(&dir, || swept = Some(sweep(tmp.path()))).unwrap();
        let swept = swept.unwrap();
        assert!(swept.removed.is_empty(), "{swept:?}");
        assert!(dir.join("spill").exists() && dir.join(MARKER).exists());
        assert!(!dir.join(format!("{MARKER}.new")).exists());
        // Claimed: a sweep now sees it locked.
        assert_eq!(sweep(tmp.path()).live, 1);
        let text = std::fs::read_to_string(dir.join(MARKER)).unwrap();
        assert!(
            text.starts_with(&format!("pid {}", std::process::id())),
            "{text}"
        );
    }
}
