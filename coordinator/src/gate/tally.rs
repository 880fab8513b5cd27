//! The bytes of a part as read: counted and hashed as the strict reader reads them.

use std::io::Read;

use sha2::{Digest, Sha256};

use super::{refuse, Invariant, Refused};

/// Counts and hashes the bytes read through it.
pub(super) struct Tally<R> {
    pub(super) inner: R,
    pub(super) sha: Sha256,
    pub(super) bytes: u64,
}

impl<R: Read> Read for Tally<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// A reader that hands its tally back when the part is read.
pub(super) struct Shared<R>(pub(super) std::sync::Arc<std::sync::Mutex<Tally<R>>>);

impl<R: Read> Read for Shared<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.lock().expect("tally").read(buf)
    }
}

/// The bytes of the part read and their SHA-256, once its reader is dropped;
/// refuses bytes past the last gzip member (not part of the result the reader
/// saw).
pub(super) fn tally_end<R: Read>(
    tally: std::sync::Arc<std::sync::Mutex<Tally<R>>>,
    name: String,
) -> Result<(u64, String), Refused> {
    let t = std::sync::Arc::try_unwrap(tally)
        .ok()
        .expect("the reader is dropped")
        .into_inner()
        .expect("tally");
    let mut rest = Vec::new();
    let mut inner = t.inner;
    let extra = inner.read_to_end(&mut rest).unwrap_or(0);
    if extra > 0 {
        return Err(refuse(
            Invariant::Readable,
            name,
            format!("{extra} byte(s) after the last gzip member"),
        ));
    }
    Ok((t.bytes, hex_of(&t.sha.finalize())))
}

pub(super) fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
