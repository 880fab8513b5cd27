//! The one rule for a file path (`file_path` of a row, a Go file mapped into the
//! repository, a result's `FilePath`): one file has exactly one name, relative to the
//! root of the source tree, so that it is one record in a result and every source
//! (`dir:`, `git:`, `store:`) resolves it to the same file or to none.
//!
//! A canonical path is 1 to [`MAX_PATH_BYTES`] bytes of segments joined by `/`, each
//! segment 1 to [`MAX_SEGMENT_BYTES`] bytes, none `.` or `..`; so no leading or trailing
//! `/` and no `//`. It holds no NUL (no file name can), no other ASCII control
//! character (a name that would break a log line or the `store:` index's line format)
//! and no backslash (no kernel or Go path has one, and other systems read it as a
//! separator: `a\..\b` must not name another file anywhere). The limits are Linux's
//! `PATH_MAX` and `NAME_MAX`: a longer name exists in no `dir:` source, so `git:` must
//! not find it either. UTF-8 is checked apart (a row's names must all be UTF-8).

/// Longest canonical path, in bytes (Linux's `PATH_MAX`, its NUL included).
pub const MAX_PATH_BYTES: usize = 4095;
/// Longest segment of a canonical path, in bytes (Linux's `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Why a path is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is empty.
    #[error("empty")]
    Empty,
    /// The path starts with `/`.
    #[error("starts with `/` (must be relative to the source root)")]
    Absolute,
    /// The path ends with `/`.
    #[error("ends with `/`")]
    TrailingSlash,
    /// Two `/` in a row.
    #[error("has an empty segment (`//`)")]
    EmptySegment,
    /// A segment is `.`.
    #[error("has a `.` segment")]
    Dot,
    /// A segment is `..`.
    #[error("has a `..` segment")]
    DotDot,
    /// A NUL byte.
    #[error("holds a NUL byte")]
    Nul,
    /// A control character (below 0x20, or 0x7f).
    #[error("holds a control character")]
    Control,
    /// A `\`, which no canonical path of the repository holds.
    #[error("holds a backslash")]
    Backslash,
    /// Longer than [`MAX_PATH_BYTES`].
    #[error("is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// A segment longer than [`MAX_SEGMENT_BYTES`].
    #[error("has a segment longer than {MAX_SEGMENT_BYTES} bytes")]
    SegmentTooLong,
}

/// Checks that `p` is a canonical file path (see the module's rule).
pub fn canonical_path(p: &[u8]) -> Result<(), PathError> {
    if p.is_empty() {
        return Err(PathError::Empty);
    }
    if p.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if p[0] == b'/' {
        return Err(PathError::Absolute);
    }
    if p[p.len() - 1] == b'/' {
        return Err(PathError::TrailingSlash);
    }
    for &b in p {
        match b {
            0 => return Err(PathError::Nul),
            b'\\' => return Err(PathError::Backslash),
            0x01..=0x1f | 0x7f => return Err(PathError::Control),
            _ => {}
        }
    }
    for seg in p.split(|&b| b == b'/') {
        match seg {
            b"" => return Err(PathError::EmptySegment),
            b"." => return Err(PathError::Dot),
            b".." => return Err(PathError::DotDot),
            s if s.len() > MAX_SEGMENT_BYTES => return Err(PathError::SegmentTooLong),
            _ => {}
        }
    }
    Ok(())
}

/// Checks a `--file-path-prefix`: empty (every file), or the start of some canonical
/// path (`fs/`, `fs/ext`, `fs/.git`), so that it can match a file at all.
pub fn path_prefix(p: &[u8]) -> Result<(), PathError> {
    if p.is_empty() {
        return Ok(());
    }
    let mut probe = Vec::with_capacity(p.len() + 1);
    probe.extend_from_slice(p);
    probe.push(b'x');
    canonical_path(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_canonical_paths_are_refused() {
        for (p, e) in [
            ("", PathError::Empty),
            ("/etc/passwd", PathError::Absolute),
            ("/", PathError::Absolute),
            ("k/a.c/", PathError::TrailingSlash),
            ("k//a.c", PathError::EmptySegment),
            ("k/./a.c", PathError::Dot),
            ("./k/a.c", PathError::Dot),
            (".", PathError::Dot),
            ("k/..", PathError::DotDot),
            ("../../../../etc/passwd", PathError::DotDot),
            ("k/a\0.c", PathError::Nul),
            ("k/a\n.c", PathError::Control),
            ("k/a\x7f.c", PathError::Control),
            ("k\\a.c", PathError::Backslash),
            ("..\\etc", PathError::Backslash),
        ] {
            assert_eq!(canonical_path(p.as_bytes()), Err(e), "{p:?}");
        }
        let long = "a/".repeat(2048) + "b";
        assert_eq!(canonical_path(long.as_bytes()), Err(PathError::TooLong));
        let seg = "k/".to_string() + &"a".repeat(256);
        assert_eq!(
            canonical_path(seg.as_bytes()),
            Err(PathError::SegmentTooLong)
        );
    }

    #[test]
    fn canonical_paths_are_accepted() {
        for p in [
            "a.c",
            "fs/ext4/inode.c",
            ".gitignore",
            "k/..a",
            "k/...",
            "k/a b.c",
            "dir/ünï.c",
        ] {
            assert_eq!(canonical_path(p.as_bytes()), Ok(()), "{p:?}");
        }
        let seg = "k/".to_string() + &"a".repeat(255);
        assert_eq!(canonical_path(seg.as_bytes()), Ok(()));
        let long = "a/".repeat(2047) + "b";
        assert_eq!(long.len(), MAX_PATH_BYTES);
        assert_eq!(canonical_path(long.as_bytes()), Ok(()));
    }

    #[test]
    fn prefixes_must_be_able_to_match() {
        for p in ["", "fs/", "fs", "fs/ext", "fs/.", "fs/.."] {
            assert_eq!(path_prefix(p.as_bytes()), Ok(()), "{p:?}");
        }
        for p in ["/fs", "./fs", "fs//", "fs/./", "fs/../", "fs\0"] {
            assert!(path_prefix(p.as_bytes()).is_err(), "{p:?}");
        }
    }
}
