//! `dir:ROOT`: the file of commit C is `ROOT/C/<path>`, read as `git:` would read the
//! same tree, and nothing outside it:
//!
//! - `ROOT` and `ROOT/C` are opened as given (symlinks to them are the operator's
//!   layout); below `ROOT/C` every component is opened with `openat` and
//!   `O_NOFOLLOW`, so no symlink is followed and no `..` exists (paths are canonical,
//!   [`covmerge_proto::path::canonical_path`]).
//! - A symlink is what git stores for it: a blob whose content is the link's target
//!   text (`readlink`), never the file it points to. A path through a symlinked
//!   directory names nothing, as in a git tree (a symlink is not a tree).
//! - Only a regular file is read (checked with `fstat` on the opened descriptor, opened
//!   `O_NONBLOCK`): a FIFO, socket, device or directory is absent, as git can hold none
//!   of them. A regular file over the source's limit ([`super::max_file_bytes`] of the
//!   memory budget) is an error naming it, before any byte is read.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{plain_commit, plain_path, FileVersion, Source, SourceError, MAX_SOURCE_FILE_BYTES};

/// `dir:ROOT`: the file of commit C is `ROOT/C/<path>`.
pub struct DirSource {
    root: PathBuf,
    /// The largest file read.
    max_file: u64,
}

/// What a path names in a commit's directory.
enum Entry {
    /// A regular file, opened, and its size when opened.
    File(std::fs::File, u64),
    /// A symlink: its target text.
    Link(Vec<u8>),
    /// Nothing readable (missing, a directory, a special file, below a non-directory).
    Absent,
}

fn cstr(b: &[u8]) -> CString {
    // Canonical paths and plain commits hold no NUL.
    CString::new(b).expect("no NUL in a checked name")
}

/// `openat(dir, name, flags)`; `dir` `None` is the current directory.
fn openat(dir: Option<&OwnedFd>, name: &[u8], flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let name = cstr(name);
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid NUL-terminated name and a directory descriptor we own (or
    // AT_FDCWD); a returned descriptor is owned by nobody else.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstatat_nofollow(dir: &OwnedFd, name: &[u8]) -> std::io::Result<libc::stat> {
    let name = cstr(name);
    // SAFETY: zeroed `stat` is a valid out-parameter; the name is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn fstat(fd: &impl AsRawFd) -> std::io::Result<libc::stat> {
    // SAFETY: zeroed `stat` is a valid out-parameter of fstat on a descriptor we hold.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn readlinkat(dir: &OwnedFd, name: &[u8]) -> std::io::Result<Vec<u8>> {
    let name = cstr(name);
    // Linux link targets are at most PATH_MAX - 1 bytes; a full buffer means more.
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is writable for its length; the name is NUL-terminated.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = n as usize;
    if n >= buf.len() {
        return Err(std::io::Error::other("link target longer than PATH_MAX"));
    }
    buf.truncate(n);
    Ok(buf)
}

fn is_type(st: &libc::stat, t: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == t
}

/// Errors that mean "nothing there": a missing name, a non-directory on the way (a
/// file, a symlink refused by `O_NOFOLLOW`: ENOTDIR or ELOOP), a name too long.
fn absent(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG)
    )
}

impl DirSource {
    /// A `dir:` source over `root`, which holds `<commit>/<path>` files.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirSource {
            root: root.into(),
            max_file: MAX_SOURCE_FILE_BYTES,
        }
    }

    /// The source refusing files over `bytes` (at most [`MAX_SOURCE_FILE_BYTES`]).
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file = bytes.min(MAX_SOURCE_FILE_BYTES);
        self
    }

    fn io(&self, what: String, e: impl std::fmt::Display) -> SourceError {
        SourceError::Io {
            source_name: format!("dir:{}", self.root.display()),
            what,
            message: e.to_string(),
        }
    }

    /// Opens what `path` names below `ROOT/commit`, following no symlink below it.
    fn entry(&self, commit: &str, path: &str) -> std::io::Result<Entry> {
        const DIR: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK;
        let root = openat(None, self.root.as_os_str().as_bytes(), DIR)?;
        let mut dir = match openat(Some(&root), commit.as_bytes(), DIR) {
            Ok(d) => d,
            Err(e) if absent(&e) => return Ok(Entry::Absent),
            Err(e) => return Err(e),
        };
        let (dirs, name) = match path.rsplit_once('/') {
            Some((d, n)) => (Some(d), n),
            None => (None, path),
        };
        for seg in dirs.into_iter().flat_map(|d| d.split('/')) {
            dir = match openat(Some(&dir), seg.as_bytes(), DIR | libc::O_NOFOLLOW) {
                Ok(d) => d,
                Err(e) if absent(&e) => return Ok(Entry::Absent),
                Err(e) => return Err(e),
            };
        }
        let name = name.as_bytes();
        let st = match fstatat_nofollow(&dir, name) {
            Ok(st) => st,
            Err(e) if absent(&e) => return Ok(Entry::Absent),
            Err(e) => return Err(e),
        };
        if is_type(&st, libc::S_IFLNK) {
            return match readlinkat(&dir, name) {
                Ok(t) => Ok(Entry::Link(t)),
                // Replaced since the fstatat (EINVAL: not a link now): changing while
                // being read, an error the merge retries.
                Err(e) if absent(&e) => Ok(Entry::Absent),
                Err(e) => Err(e),
            };
        }
        if !is_type(&st, libc::S_IFREG) {
            return Ok(Entry::Absent);
        }
        // O_NONBLOCK: should the name be a FIFO by now, opening it does not wait for a
        // writer; the fstat below then finds it is not a regular file.
        let fd = match openat(
            Some(&dir),
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        ) {
            Ok(fd) => fd,
            Err(e) if absent(&e) => return Ok(Entry::Absent),
            Err(e) => return Err(e),
        };
        let st = fstat(&fd)?;
        if !is_type(&st, libc::S_IFREG) {
            return Ok(Entry::Absent);
        }
        Ok(Entry::File(std::fs::File::from(fd), st.st_size as u64))
    }
}

/// Every regular file and symlink under `dir` (directories walked, symlinks not
/// followed, special files skipped, as [`DirSource::get`] reads them): its path below
/// the commit's directory (`rel`), whether it is a link, and its size.
fn list_tree(
    dir: &std::path::Path,
    rel: &mut Vec<u8>,
    out: &mut Vec<(Vec<u8>, bool, u64)>,
) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let kind = e.file_type()?;
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(e.file_name().as_bytes());
        if kind.is_dir() {
            list_tree(&e.path(), rel, out)?;
        } else if kind.is_file() || kind.is_symlink() {
            // `DirEntry::metadata` does not follow a symlink: its size is its target's
            // length, the blob git stores for it.
            out.push((rel.clone(), kind.is_symlink(), e.metadata()?.len()));
        }
        rel.truncate(len);
    }
    Ok(())
}

/// Whether a file (or symlink, or anything but a directory) is under `dir`, symlinks
/// not followed; stops at the first.
fn holds_a_file(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => return true,
                Err(_) => {}
            }
        }
    }
    false
}

impl Source for DirSource {
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        // A `ROOT/<commit>/` without a file (empty, or empty directories) holds no
        // commit: every file would look deleted.
        Ok(plain_commit(commit).is_some_and(|c| holds_a_file(&self.root.join(c))))
    }

    fn named_instead(&self, id: &[u8]) -> Option<String> {
        let c = plain_commit(id)?;
        let dir = self.root.join(c);
        // Unreadable (permissions, a file in its place): said, not taken for an unknown
        // commit with a commit id's advice.
        if let Err(e) = std::fs::read_dir(&dir) {
            return (e.kind() != std::io::ErrorKind::NotFound)
                .then(|| format!("{}/ cannot be read: {e}", dir.display()));
        }
        (!holds_a_file(&dir)).then(|| {
            format!(
                "{}/ is an empty directory (no file under it): a dir: source holds a commit's files there",
                dir.display()
            )
        })
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        use sha2::Digest;
        let Some(c) = plain_commit(commit) else {
            return Ok(None);
        };
        let dir = self.root.join(c);
        if !dir.is_dir() {
            return Ok(None);
        }
        let mut entries = Vec::new();
        list_tree(&dir, &mut Vec::new(), &mut entries).map_err(|e| self.io(format!("{c}/"), e))?;
        entries.sort_unstable();
        let mut h = sha2::Sha256::new();
        for (path, link, size) in &entries {
            h.update(path);
            h.update(if *link { b"\0l " } else { b"\0f " });
            h.update(size.to_string().as_bytes());
            h.update(b"\n");
        }
        Ok(Some(format!(
            "dir listing sha256 {} ({} files)",
            hex::encode(h.finalize()),
            entries.len()
        )))
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        let Some(path) = plain_path(path) else {
            return Ok(None);
        };
        let what = || format!("{commit}/{path}");
        let data = match self.entry(commit, path).map_err(|e| self.io(what(), e))? {
            Entry::Absent => return Ok(None),
            Entry::Link(target) => target,
            Entry::File(f, size) => {
                let max = self.max_file;
                if size > max {
                    return Err(SourceError::TooLarge {
                        source_name: format!("dir:{}", self.root.display()),
                        what: what(),
                        size,
                        limit: max,
                    });
                }
                let mut data = Vec::with_capacity(size.min(max + 1) as usize);
                f.take(max + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| self.io(what(), e))?;
                if data.len() as u64 > max {
                    return Err(SourceError::TooLarge {
                        source_name: format!("dir:{}", self.root.display()),
                        what: what(),
                        size: size.max(data.len() as u64),
                        limit: max,
                    });
                }
                data
            }
        };
        Ok(Some(Arc::new(FileVersion::new(data))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::tests::git;
    use crate::GitSource;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn get(s: &dyn Source, commit: &str, path: &str) -> Option<Vec<u8>> {
        s.get(commit.as_bytes(), path.as_bytes())
            .unwrap()
            .map(|v| v.data.clone())
    }

    fn mkfifo(p: &Path) {
        let c = cstr(p.as_os_str().as_bytes());
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    }

    /// ROOT with commit `c`: `k/a.c`, and what each test adds.
    fn root() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("c");
        std::fs::create_dir_all(c.join("k")).unwrap();
        std::fs::write(c.join("k/a.c"), "int a;\n").unwrap();
        (d, c)
    }

    #[test]
    fn a_worker_source_lacking_one_base_file_had_the_same_id() {
        let (d1, c1) = root();
        let (d2, c2) = root();
        for c in [&c1, &c2] {
            std::fs::create_dir_all(c.join("k/sub")).unwrap();
            std::fs::write(c.join("k/sub/b.c"), "int b;\n").unwrap();
            symlink("a.c", c.join("k/l.c")).unwrap();
            std::fs::create_dir(c.join("empty")).unwrap();
        }
        let (s1, s2) = (DirSource::new(d1.path()), DirSource::new(d2.path()));
        let id = |s: &DirSource| s.tree_id(b"c").unwrap().expect("the commit is there");
        let same = id(&s1);
        assert_eq!(same, id(&s2), "the same tree in two roots");
        assert!(same.contains("(3 files)"), "{same}");
        // One file lacking; then there again with another size; a FIFO is no file.
        std::fs::remove_file(c2.join("k/sub/b.c")).unwrap();
        assert_ne!(id(&s2), same, "a file lacking");
        std::fs::write(c2.join("k/sub/b.c"), "int bb;\n").unwrap();
        assert_ne!(id(&s2), same, "a file of another size");
        std::fs::write(c2.join("k/sub/b.c"), "int b;\n").unwrap();
        mkfifo(&c2.join("k/fifo.c"));
        assert_eq!(id(&s2), same, "the same files again");
        // A symlink is its target text, not the file it points to.
        std::fs::remove_file(c2.join("k/l.c")).unwrap();
        std::fs::write(c2.join("k/l.c"), "a.c").unwrap();
        assert_ne!(id(&s2), same, "a file where a symlink was");
        // No such commit, or not a plain name: no id.
        assert_eq!(s1.tree_id(b"nope").unwrap(), None);
        assert_eq!(s1.tree_id(b"..").unwrap(), None);
        assert_eq!(s1.tree_id(b"").unwrap(), None);
    }

    #[test]
    fn dir_source_fifo_does_not_hang() {
        let (d, c) = root();
        mkfifo(&c.join("fifo.c"));
        mkfifo(&c.join("k/fifo.c"));
        let s = DirSource::new(d.path());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = (get(&s, "c", "fifo.c"), get(&s, "c", "k/fifo.c"));
            tx.send(r).unwrap();
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading a FIFO must not wait for a writer");
        assert_eq!(r, (None, None), "a FIFO is no file");
    }

    /// An unreadable `ROOT/<commit>/` was refused as a commit the source lacks, with
    /// the advice to give a full commit id; the reason was lost.
    #[test]
    fn an_unreadable_commit_directory_was_named_an_unknown_commit() {
        let (d, _) = root();
        std::fs::write(d.path().join("f"), "not a directory").unwrap();
        std::fs::create_dir(d.path().join("e")).unwrap();
        let s = DirSource::new(d.path());
        let e = crate::require_commit(&s, "dir:R", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/f/ cannot be read: "), "{e}");
        let e = crate::require_commit(&s, "dir:R", "e")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/e/ is an empty directory"), "{e}");
        let e = crate::require_commit(&s, "dir:R", "missing")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a full commit id"), "{e}");
        assert!(crate::require_commit(&s, "dir:R", "c").is_ok());
    }

    #[test]
    fn dir_source_symlink_to_dev_zero_is_not_read() {
        let (d, c) = root();
        symlink("/dev/zero", c.join("zero.c")).unwrap();
        symlink("/dev", c.join("dev")).unwrap();
        symlink("/etc/passwd", c.join("passwd.c")).unwrap();
        let s = DirSource::new(d.path());
        assert_eq!(get(&s, "c", "zero.c").as_deref(), Some(&b"/dev/zero"[..]));
        assert_eq!(
            get(&s, "c", "passwd.c").as_deref(),
            Some(&b"/etc/passwd"[..])
        );
        // Not through a symlinked directory either, nor a device itself.
        assert_eq!(get(&s, "c", "dev/zero"), None);
        assert_eq!(get(&s, "c", "dev/null"), None);
        assert_eq!(get(&s, "c", "k/a.c").as_deref(), Some(&b"int a;\n"[..]));
    }

    #[test]
    fn dir_source_reads_no_other_name_of_a_file() {
        let (d, _) = root();
        let s = DirSource::new(d.path());
        for p in [
            "k//a.c",
            "k/./a.c",
            "./k/a.c",
            "k/a.c/",
            "/k/a.c",
            "k/../k/a.c",
        ] {
            assert_eq!(get(&s, "c", p), None, "{p}");
        }
        assert_eq!(get(&s, "..", "c/k/a.c"), None);
    }

    #[test]
    fn dir_source_refuses_a_file_over_the_limit_without_reading_it() {
        let (d, c) = root();
        let f = std::fs::File::create(c.join("huge.c")).unwrap();
        f.set_len(MAX_SOURCE_FILE_BYTES + 1).unwrap(); // sparse
        let s = DirSource::new(d.path());
        let e = s.get(b"c", b"huge.c").unwrap_err();
        assert!(matches!(e, SourceError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("c/huge.c"), "{e}");
    }

    /// Under a budget the limit is an eighth of it; the error names the file, its
    /// size, the limit and the flag.
    #[test]
    fn dir_source_limit_derives_from_the_memory_budget() {
        let (d, c) = root();
        let limit = crate::max_file_bytes(16 << 20);
        assert_eq!(limit, 2 << 20);
        std::fs::write(c.join("fits.c"), vec![b'x'; limit as usize]).unwrap();
        let f = std::fs::File::create(c.join("big.c")).unwrap();
        f.set_len(limit + 1).unwrap();
        let s = DirSource::new(d.path()).with_max_file_bytes(limit);
        assert_eq!(
            s.get(b"c", b"fits.c").unwrap().unwrap().data.len(),
            limit as usize
        );
        let e = s.get(b"c", b"big.c").unwrap_err().to_string();
        for want in ["c/big.c", "2097153 bytes", "2 MiB", "--memory-budget"] {
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn dir_source_symlink_gives_link_text_like_git() {
        // One tree, committed to git and checked out as ROOT/<commit>.
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("work");
        std::fs::create_dir_all(w.join("a/sub")).unwrap();
        std::fs::write(w.join("a/b.c"), "int b;\n").unwrap();
        std::fs::write(w.join("a/sub/s.c"), "int s;\n").unwrap();
        symlink("a/b.c", w.join("l.c")).unwrap();
        symlink("/etc/passwd", w.join("p.c")).unwrap();
        symlink("/dev/zero", w.join("z.c")).unwrap();
        symlink("a", w.join("d")).unwrap();
        symlink("../../etc", w.join("a/up")).unwrap();
        symlink("missing", w.join("dangling.c")).unwrap();
        git(&w, &["init", "-q"]);
        git(&w, &["add", "-A"]);
        git(&w, &["commit", "-q", "-m", "1"]);
        let commit = git(&w, &["rev-parse", "HEAD"]);
        // Special files git cannot hold.
        mkfifo(&w.join("fifo.c"));
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::rename(&w, root.join(&commit)).unwrap();
        let gs = GitSource::open(root.join(&commit).to_str().unwrap()).unwrap();
        let ds = DirSource::new(&root);
        for p in [
            "a/b.c",
            "a/sub/s.c",
            "l.c",
            "p.c",
            "z.c",
            "d",
            "d/b.c",
            "d/sub/s.c",
            "a/up",
            "a/up/passwd",
            "dangling.c",
            "a",
            "a/sub",
            "a/b.c/x",
            "l.c/x",
            "fifo.c",
            "missing.c",
        ] {
            assert_eq!(get(&ds, &commit, p), get(&gs, &commit, p), "{p}");
        }
        assert_eq!(get(&ds, &commit, "l.c").as_deref(), Some(&b"a/b.c"[..]));
        assert_eq!(
            get(&ds, &commit, "p.c").as_deref(),
            Some(&b"/etc/passwd"[..])
        );
        assert_eq!(get(&ds, &commit, "d/b.c"), None);
        // The commit directory itself may be a symlink: the operator's layout.
        symlink(root.join(&commit), root.join("alias")).unwrap();
        assert_eq!(
            get(&ds, "alias", "a/b.c").as_deref(),
            Some(&b"int b;\n"[..])
        );
    }
}
