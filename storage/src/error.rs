//! What a store operation can fail with, and which failures are an outage (retried)
//! rather than the configuration's (refused at once).

/// Storage errors with the object they concern.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A store URL that cannot be parsed or names no supported store.
    #[error("invalid store URL {url}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No object of that name.
    #[error("object {key} not found in {store}")]
    NotFound {
        /// The store, as displayed to the user (its URL without user info or query).
        store: String,
        /// The key, relative to the store's prefix.
        key: String,
    },
    /// A key the store cannot name (object_store refuses it, or a local name it cannot read).
    #[error("object name {key:?} in {store}: {reason}")]
    Name {
        /// The store, as displayed to the user.
        store: String,
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A byte range past the object's end: permanent, never retried.
    #[error("bytes {start}..{end} of {key} in {store}: the object has {size} bytes")]
    OutOfRange {
        /// The store, as displayed to the user.
        store: String,
        /// The object's key.
        key: String,
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The object's size in bytes.
        size: u64,
    },
    /// A local disk refused a write: full (`ENOSPC`), over quota (`EDQUOT`) or
    /// read-only (`EROFS`). Not an outage: retrying writes to the same full disk
    /// helps nothing, so it is never retried and names the disk's problem at once.
    #[error("{op} {key} in {store}: {problem}")]
    LocalDisk {
        /// The operation (`put`, `create`, ...).
        op: &'static str,
        /// The store, as displayed to the user.
        store: String,
        /// The object's key.
        key: String,
        /// What the disk said and what to do ([`disk_advice`]).
        problem: String,
    },
    /// The store's client failed; [`StoreError::is_transient`] tells an outage from a refusal.
    #[error("{op} {key} in {store}: {source}")]
    Io {
        /// The operation (`get`, `put`, `list`, ...).
        op: &'static str,
        /// The store, as displayed to the user.
        store: String,
        /// The object's key (or the prefix listed).
        key: String,
        /// object_store's error.
        #[source]
        source: Box<object_store::Error>,
    },
}

impl StoreError {
    /// Whether trying again may succeed (network, throttling, server errors). A
    /// refusal (403 for credentials or a policy, 400, 404 of a bucket...) is not: the
    /// same request gets the same answer, so it is the configuration's, not an outage.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => {
                !local_refusal(source.as_ref())
                    && !matches!(
                        source.as_ref(),
                        object_store::Error::NotFound { .. }
                            | object_store::Error::InvalidPath { .. }
                            | object_store::Error::NotSupported { .. }
                            | object_store::Error::PermissionDenied { .. }
                            | object_store::Error::Unauthenticated { .. }
                    )
                    && !http_status(source.as_ref())
                        .is_some_and(|(status, msg)| refused(status, &msg))
            }
            _ => false,
        }
    }
}

/// Whether a local filesystem error is in `e`'s source chain that the same call
/// would meet again: a symlink loop (`ELOOP`, or walkdir's "File system loop
/// found"), a path through a file (`ENOTDIR`), no permission (`EACCES`, `EPERM`); or
/// a file cut short under its reader, which another try would read whole, shorter.
/// Not an outage to wait out: named at once.
pub(crate) fn local_refusal(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.is::<crate::get::FileCut>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // Linux's EPERM, EACCES, ENOTDIR and ELOOP.
            if matches!(io.raw_os_error(), Some(1 | 13 | 20 | 40))
                || matches!(
                    io.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::NotADirectory
                )
            {
                return true;
            }
        }
        if e.to_string().contains("File system loop found") {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Whether an HTTP answer is a refusal that a retry cannot change: a 4xx other than
/// a timeout (408, and S3's 400 `RequestTimeout` for a connection it found idle), a
/// conflict with a concurrent writer (409) or throttling (429).
pub(crate) fn refused(status: u16, message: &str) -> bool {
    (400..500).contains(&status)
        && !matches!(status, 408 | 409 | 429)
        && !message.contains("<Code>RequestTimeout</Code>")
}

/// The HTTP status of the response an error reports, found in its source chain.
/// object_store classifies a status into its error variants only for some requests
/// (a get, a put); a refused listing or multipart upload comes back as a generic
/// error that carries the status only in its message ("Server returned non-2xx
/// status code: 403 Forbidden: ...").
pub(crate) fn http_status(e: &(dyn std::error::Error + 'static)) -> Option<(u16, String)> {
    const MARK: &str = "status code: ";
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(h) = e.downcast_ref::<crate::gcs::HttpStatus>() {
            return Some((h.status, h.to_string()));
        }
        let msg = e.to_string();
        if let Some(i) = msg.find(MARK) {
            let status = msg[i + MARK.len()..].get(..3)?.parse().ok()?;
            return Some((status, msg));
        }
        cur = e.source();
    }
    None
}

/// What a local disk's refusal means and what to do, if `e` is one: full (`ENOSPC`),
/// over quota (`EDQUOT`) or read-only (`EROFS`). `None` for any other error.
pub fn disk_advice(e: &std::io::Error) -> Option<String> {
    advice(e, true)
}

/// [`disk_advice`]; `scratch`: the disk holds temporary files (`$TMPDIR`'s advice),
/// else an output (free space, or write it elsewhere).
fn advice(e: &std::io::Error, scratch: bool) -> Option<String> {
    use std::io::ErrorKind;
    let what = match e.kind() {
        ErrorKind::StorageFull => "no space left on device",
        ErrorKind::QuotaExceeded => "disk quota exceeded",
        ErrorKind::ReadOnlyFilesystem => "read-only file system",
        _ => return None,
    };
    if !scratch {
        return Some(format!(
            "{what} ({e}): the local disk is full or not writable, a retry cannot help; \
             free space on it, or write the output to a disk with room"
        ));
    }
    Some(format!(
        "{what} ({e}): the local disk is full or not writable, a retry cannot help; \
         free space on it, or point TMPDIR (merge's spill and temporary files) or the \
         worker's scratch directory at a disk with room (they need about the input's \
         compressed size)"
    ))
}

/// [`disk_advice`] for the first I/O error in `e`'s source chain.
pub fn local_disk_problem(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    disk_problem(e, true)
}

/// [`local_disk_problem`]; `scratch` as [`advice`]'s.
pub(crate) fn disk_problem(e: &(dyn std::error::Error + 'static), scratch: bool) -> Option<String> {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(p) = advice(io, scratch) {
                return Some(p);
            }
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod advice_tests {
    use super::*;

    /// A full `--partial-out` destination told the user to point TMPDIR at a disk with
    /// room: TMPDIR was not the full disk. An output's disk now says to free it or
    /// write elsewhere; a scratch disk still names TMPDIR.
    #[test]
    fn a_full_output_disk_was_blamed_on_tmpdir() {
        let full = || std::io::Error::from(std::io::ErrorKind::StorageFull);
        let out = disk_problem(&full(), false).unwrap();
        assert!(
            !out.contains("TMPDIR") && out.contains("write the output"),
            "{out}"
        );
        let scratch = disk_problem(&full(), true).unwrap();
        assert!(scratch.contains("TMPDIR"), "{scratch}");
        assert_eq!(disk_advice(&full()), Some(scratch));
        let other = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(disk_problem(&other, false).is_none());
    }
}
