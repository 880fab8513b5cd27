//! A merged part as it is written: in memory while small, in a temporary file past
//! [`IN_MEMORY`], so that a shard whose part is large (one file of 500,000 lines × 40
//! managers, 256 groups) does not hold it whole.

use std::io::{self, Seek, SeekFrom, Write};

use sha2::{Digest, Sha256};

/// Bytes a part is held in memory before it goes to a temporary file.
pub(crate) const IN_MEMORY: usize = 8 << 20;

/// Where a part's bytes are.
#[derive(Debug)]
pub enum PartBytes {
    /// Held: a small part.
    Memory(Vec<u8>),
    /// In a temporary file (deleted when dropped), `len` bytes from its start.
    File {
        /// The file.
        file: std::fs::File,
        /// Its length.
        len: u64,
    },
}

impl PartBytes {
    /// The part's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            PartBytes::Memory(v) => v.len() as u64,
            PartBytes::File { len, .. } => *len,
        }
    }

    /// Whether the part has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole part (for tests and comparisons).
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        match self {
            PartBytes::Memory(v) => Ok(v.clone()),
            PartBytes::File { file, len } => {
                use std::os::unix::fs::FileExt;
                let mut v = vec![0u8; *len as usize];
                file.read_exact_at(&mut v, 0)?;
                Ok(v)
            }
        }
    }
}

impl PartialEq for PartBytes {
    /// The same bytes, wherever they are.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && match (self.to_vec(), other.to_vec()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
    }
}

/// Writes a part: into memory up to [`IN_MEMORY`] bytes, then into a temporary file;
/// its SHA-256 as it is written (the part is not read again to hash it).
pub(crate) struct PartWriter {
    held: Vec<u8>,
    file: Option<(std::fs::File, u64)>,
    in_memory: usize,
    sha: Sha256,
}

impl Default for PartWriter {
    fn default() -> Self {
        PartWriter::with_limit(IN_MEMORY)
    }
}

impl PartWriter {
    /// A writer holding at most `in_memory` bytes before it goes to a file.
    pub(crate) fn with_limit(in_memory: usize) -> Self {
        PartWriter {
            held: Vec::new(),
            file: None,
            in_memory,
            sha: Sha256::new(),
        }
    }

    /// What was written, and its SHA-256.
    pub(crate) fn finish(self) -> io::Result<(PartBytes, [u8; 32])> {
        let sha = self.sha.finalize().into();
        let bytes = match self.file {
            None => PartBytes::Memory(self.held),
            Some((mut file, len)) => {
                file.flush()?;
                file.seek(SeekFrom::Start(0))?;
                PartBytes::File { file, len }
            }
        };
        Ok((bytes, sha))
    }
}

impl Write for PartWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sha.update(buf);
        if self.file.is_none() && self.held.len() + buf.len() > self.in_memory {
            let mut file = tempfile::tempfile()?;
            file.write_all(&self.held)?;
            self.file = Some((file, self.held.len() as u64));
            self.held = Vec::new();
        }
        match &mut self.file {
            None => {
                self.held.extend_from_slice(buf);
                Ok(buf.len())
            }
            Some((file, len)) => {
                file.write_all(buf)?;
                *len += buf.len() as u64;
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            None => Ok(()),
            Some((file, _)) => file.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_past_its_memory_share_goes_to_a_file_with_the_same_bytes() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        for limit in [usize::MAX, 1_000, 0] {
            let mut w = PartWriter::with_limit(limit);
            for piece in data.chunks(777) {
                w.write_all(piece).unwrap();
            }
            let (part, sha) = w.finish().unwrap();
            assert_eq!(
                matches!(part, PartBytes::File { .. }),
                limit != usize::MAX,
                "limit {limit}"
            );
            assert_eq!(part.len(), data.len() as u64);
            assert_eq!(part.to_vec().unwrap(), data, "limit {limit}");
            assert_eq!(sha, <[u8; 32]>::from(Sha256::digest(&data)));
        }
    }
}
