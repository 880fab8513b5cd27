use std::path::PathBuf;
use std::sync::Arc;

use super::{plain_commit, FileVersion, Source, SourceError};

/// `dir:ROOT`: the file of commit C is `ROOT/C/<path>`.
pub struct DirSource {
    root: PathBuf,
}

impl DirSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirSource { root: root.into() }
    }
}

impl Source for DirSource {
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        Ok(plain_commit(commit).is_some_and(|c| self.root.join(c).is_dir()))
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        let Ok(path) = std::str::from_utf8(path) else {
            return Ok(None);
        };
        let full = self.root.join(commit).join(path);
        match std::fs::read(&full) {
            Ok(data) => Ok(Some(Arc::new(FileVersion::new(data)))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::NotADirectory
                        | std::io::ErrorKind::IsADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(SourceError::Io {
                source_name: format!("dir:{}", self.root.display()),
                what: full.display().to_string(),
                message: e.to_string(),
            }),
        }
    }
}
