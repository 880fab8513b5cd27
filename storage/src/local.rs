//! Local output files: written whole or not at all, through symlinks to their target,
//! and never left half-written when the process is interrupted.
//!
//! - A regular file (or a new name) is written under a temporary name beside its
//!   destination and renamed onto it when complete ([`OutputFile::commit`]).
//! - A symlink is followed to its final target, which is then written as above: the
//!   link stays a link (`--out link` does not replace the link by a regular file).
//! - A target that is not a regular file (`/dev/stdout`, a FIFO, a character device)
//!   cannot be renamed over: it is opened and streamed to, as is `-` (standard output).
//!
//! [`on_interrupt`] registers a temporary path to remove if the process is interrupted
//! (SIGINT, SIGTERM); [`remove_registered`] removes them, for the signal handler.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Symlinks followed before giving up (Linux's own limit is 40).
const MAX_LINKS: usize = 40;

/// A local output being written.
pub struct OutputFile {
    kind: Kind,
}

enum Kind {
    /// A temporary file renamed onto `dest` by [`OutputFile::commit`].
    Atomic {
        tmp: tempfile::NamedTempFile,
        dest: PathBuf,
        _guard: Registered,
    },
    /// Streamed straight to a non-regular file or standard output.
    Stream(Box<dyn Write + Send>),
}

impl OutputFile {
    /// Opens `dest` for a new content: `-` is standard output; a symlink is followed;
    /// a non-regular target is streamed to; anything else is written atomically.
    pub fn create(dest: &Path) -> std::io::Result<Self> {
        // Standard output or another of this process's descriptors: written through
        // the descriptor itself, so a shell's `>>` keeps appending and a file behind
        // it is never renamed over.
        if let Some(fd) = stream_fd(dest) {
            return Ok(OutputFile {
                kind: Kind::Stream(match fd {
                    1 => Box::new(std::io::stdout()),
                    2 => Box::new(std::io::stderr()),
                    fd => Box::new(dup_fd(fd)?),
                }),
            });
        }
        let target = final_target(dest)?;
        match std::fs::metadata(&target) {
            Ok(m) if m.is_dir() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    format!("{} is a directory", target.display()),
                ))
            }
            Ok(m) if !m.is_file() => {
                let f = std::fs::OpenOptions::new().write(true).open(&target)?;
                return Ok(OutputFile {
                    kind: Kind::Stream(Box::new(f)),
                });
            }
            _ => {}
        }
        let mut b = tempfile::Builder::new();
        b.prefix(".covmerge-").suffix(".partial");
        // Mode 0666 less the umask, as a plain `File::create` of the final name would
        // be (tempfile's own default, 0600, would hide the result from its readers).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            b.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = b.tempfile_in(parent_dir(&target))?;
        let guard = on_interrupt(tmp.path());
        Ok(OutputFile {
            kind: Kind::Atomic {
                tmp,
                dest: target,
                _guard: guard,
            },
        })
    }

    /// Whether the output appears only when committed (a regular file) or is streamed
    /// as written (standard output, a FIFO, a device).
    pub fn is_atomic(&self) -> bool {
        matches!(self.kind, Kind::Atomic { .. })
    }

    /// Makes the content durable, then visible under the destination's name.
    pub fn commit(self) -> std::io::Result<()> {
        match self.kind {
            Kind::Atomic { tmp, dest, _guard } => {
                tmp.as_file().sync_all()?;
                tmp.persist(&dest).map_err(|e| e.error)?;
                Ok(())
            }
            Kind::Stream(mut w) => w.flush(),
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.kind {
            Kind::Atomic { tmp, .. } => tmp.write(buf),
            Kind::Stream(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.kind {
            Kind::Atomic { tmp, .. } => tmp.write_all(buf),
            Kind::Stream(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.kind {
            Kind::Atomic { tmp, .. } => tmp.flush(),
            Kind::Stream(w) => w.flush(),
        }
    }
}

/// The descriptor of this process that `path` names, if it names one: `-` (standard
/// output), `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`.
pub fn stream_fd(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "-" | "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        "/dev/stdin" => return Some(0),
        _ => {}
    }
    let n = s
        .strip_prefix("/dev/fd/")
        .or_else(|| s.strip_prefix("/proc/self/fd/"))?;
    n.parse().ok()
}

#[cfg(unix)]
fn dup_fd(fd: i32) -> std::io::Result<std::fs::File> {
    use std::os::fd::{AsFd, BorrowedFd};
    // SAFETY: only borrowed to duplicate it; a descriptor that is not open fails the
    // duplication with EBADF.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(std::fs::File::from(b.as_fd().try_clone_to_owned()?))
}

/// The local path a command-line location names: a plain path, or a `file://` URL
/// (`file:///abs`, `file://localhost/abs`), its path as written, as the store reads it
/// ([`crate::split_url`]: `%XX` is three characters of a name). `None`: another store.
pub fn local_path(location: &str) -> Option<PathBuf> {
    if location.starts_with("file:") {
        return crate::file_url_path(location).map(PathBuf::from);
    }
    if crate::is_store_url(location) {
        return None;
    }
    Some(PathBuf::from(location))
}

/// Whether two command-line locations (paths or store URLs) name the same object: the
/// same local file however spelled (see [`same_file`], `file://` URLs included), the
/// same descriptor, or the same store URL.
pub fn same_location(a: &str, b: &str) -> bool {
    match (local_path(a), local_path(b)) {
        (Some(x), Some(y)) => match (stream_fd(&x), stream_fd(&y)) {
            (Some(i), Some(j)) => i == j,
            _ => x == y || same_file(&x, &y),
        },
        (None, None) => a.trim_end_matches('/') == b.trim_end_matches('/'),
        _ => false,
    }
}

/// The directory a path's file lives in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `path` with every symlink of its last component followed (a dangling link gives
/// the name it points to, which is then created).
pub fn final_target(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = if to.is_absolute() {
                    to
                } else {
                    parent_dir(&p).join(to)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other(format!(
        "{}: more than {MAX_LINKS} symlinks",
        path.display()
    )))
}

/// Whether two local paths name the same file: the same device and inode when both
/// exist (a symlink or a hard link to the other), else the same absolute path once
/// symlinks are followed.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    match (resolve(a), resolve(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The absolute form of a local path that may not exist yet (its directory must).
pub fn resolve(path: &Path) -> Option<PathBuf> {
    let path = final_target(path).ok()?;
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let dir = parent_dir(&path).canonicalize().ok()?;
    Some(dir.join(path.file_name()?))
}

static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets where this process makes its temporary directories ([`scratch_root`]): one it
/// owns and removes, and a later covmerge sweeps if it is killed.
pub fn set_scratch_root(dir: &Path) {
    *SCRATCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
}

/// Where to make a temporary directory: the process's scratch root if set
/// ([`set_scratch_root`]), else `$TMPDIR`.
pub fn scratch_root() -> PathBuf {
    SCRATCH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_else(std::env::temp_dir)
}

/// A path removed by [`remove_registered`] until this guard is dropped.
#[must_use]
pub struct Registered(PathBuf);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = r.iter().rposition(|p| *p == self.0) {
            r.swap_remove(i);
        }
    }
}

/// Registers a temporary file or directory to remove if the process is interrupted.
pub fn on_interrupt(path: &Path) -> Registered {
    let p = path.to_path_buf();
    REGISTERED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(p.clone());
    Registered(p)
}

/// Removes every registered temporary path (the signal handler's last act before the
/// process exits). Threads may still be writing: a directory is removed again while
/// it keeps gaining entries, a few times.
pub fn remove_registered() {
    let paths = std::mem::take(&mut *REGISTERED.lock().unwrap_or_else(|e| e.into_inner()));
    for p in paths {
        for _ in 0..5 {
            let r = match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
                Ok(_) => std::fs::remove_file(&p),
                Err(_) => break,
            };
            if r.is_ok() {
                break;
            }
        }
    }
}

/// Walks the directory `dir` (when it exists) without following symlinks and fails
/// at the first entry a listing must not follow: a symlink to a directory (or one
/// that loops or leads nowhere readable), or an entry that cannot be read. covmerge
/// does not follow directory symlinks in a `file://` listing at all, inside the
/// prefix or out of it: one pointing outside would list another tree's files, one
/// pointing inside lists files twice, a loop never ends. A symlink to a file is
/// listed (and read through). Returns the entry and why.
pub fn check_no_dir_symlinks(dir: &Path) -> Result<(), (PathBuf, String)> {
    let mut todo = match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => vec![dir.to_path_buf()],
        Ok(m) if m.file_type().is_symlink() => {
            return Err((
                dir.to_path_buf(),
                "a symlink: a file:// prefix is listed without following directory symlinks".into(),
            ))
        }
        // A file, or nothing there: object_store's listing says so.
        _ => return Ok(()),
    };
    while let Some(d) = todo.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| (d.clone(), e.to_string()))?;
        for e in rd {
            let e = e.map_err(|e| (d.clone(), e.to_string()))?;
            let t = e.file_type().map_err(|err| (e.path(), err.to_string()))?;
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_symlink() {
                match std::fs::metadata(e.path()) {
                    Ok(m) if !m.is_dir() => {}
                    Ok(_) => {
                        return Err((
                            e.path(),
                            "a symlink to a directory: covmerge does not follow directory \
                             symlinks in a file:// listing (give the directory itself)"
                                .into(),
                        ))
                    }
                    Err(err) => {
                        return Err((
                            e.path(),
                            format!("a symlink that cannot be followed ({err})"),
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_out_is_written_through_and_stays_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.jsonl");
        std::fs::write(&target, b"old").unwrap();
        let link = d.path().join("link.jsonl");
        std::os::unix::fs::symlink("real.jsonl", &link).unwrap();
        let mut f = OutputFile::create(&link).unwrap();
        assert!(f.is_atomic());
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_dangling_symlink_creates_its_target() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("new"), &link).unwrap();
        let mut f = OutputFile::create(&link).unwrap();
        f.write_all(b"x").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("new")).unwrap(), b"x");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_fifo_out_is_streamed_not_renamed_over() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let mut f = OutputFile::create(&fifo).unwrap();
        assert!(!f.is_atomic());
        f.write_all(b"streamed").unwrap();
        f.commit().unwrap();
        assert_eq!(reader.join().unwrap(), b"streamed");
        assert!(!std::fs::symlink_metadata(&fifo).unwrap().is_file());
    }

    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }

    #[test]
    fn uncommitted_output_leaves_nothing_and_unregisters() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("out");
        let f = OutputFile::create(&dest).unwrap();
        let tmp = std::fs::read_dir(d.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert!(REGISTERED.lock().unwrap().contains(&tmp));
        drop(f);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        assert!(!REGISTERED.lock().unwrap().contains(&tmp));
    }

    #[test]
    fn same_location_sees_file_urls_and_descriptors() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, b"1").unwrap();
        let p = a.to_str().unwrap();
        assert!(same_location(p, &format!("file://{p}")));
        assert!(same_location(p, &format!("file://localhost{p}")));
        assert!(same_location(
            &format!("file://{p}"),
            &format!("file:///{p}")
        ));
        assert!(same_location("-", "/dev/stdout"));
        assert!(same_location("/proc/self/fd/1", "-"));
        assert!(!same_location("-", "/dev/stderr"));
        assert!(!same_location(p, "s3://b/a"));
        assert!(same_location("s3://b/a/", "s3://b/a"));
    }

    #[test]
    fn same_file_sees_links() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, b"1").unwrap();
        let s = d.path().join("s");
        std::os::unix::fs::symlink(&a, &s).unwrap();
        let h = d.path().join("h");
        std::fs::hard_link(&a, &h).unwrap();
        assert!(same_file(&a, &s));
        assert!(same_file(&a, &h));
        assert!(same_file(&a, &d.path().join("./a")));
        assert!(!same_file(&a, &d.path().join("b")));
    }
}
