//! A handed-back (abandoned) task stops: its input fails the next read, its source the
//! next lookup, and a store call it waits on returns.

use std::sync::Arc;
use std::time::Duration;

use covmerge_telemetry::metrics;

use crate::source::{Source, SourceError};
use crate::thread::Cancel;

/// Why an abandoned task's thread stopped.
pub(super) const ABANDONED: &str = "task abandoned (handed back)";

/// Runs `fut` on `rt` from a task thread unless the task is abandoned meanwhile
/// (`None`): a store call retrying through an outage must not keep a handed-back
/// task's thread alive for minutes.
pub(super) fn until_cancelled<T>(
    rt: &tokio::runtime::Handle,
    cancel: &Cancel,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    rt.block_on(async {
        tokio::select! {
            v = fut => Some(v),
            _ = async {
                while !cancel.is_cancelled() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            } => None,
        }
    })
}

/// An input that fails its next read once the task is abandoned.
pub(super) struct CancelRead<R> {
    pub(super) inner: R,
    pub(super) cancel: Cancel,
}

impl<R: std::io::Read> std::io::Read for CancelRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(std::io::Error::other(ABANDONED));
        }
        let n = self.inner.read(buf)?;
        metrics().bytes_read("input", n as u64);
        Ok(n)
    }
}

/// A source that fails once the task is abandoned.
pub(super) struct CancelSource {
    pub(super) inner: Arc<dyn Source>,
    pub(super) cancel: Cancel,
}

impl Source for CancelSource {
    fn get(
        &self,
        commit: &[u8],
        path: &[u8],
    ) -> Result<Option<Arc<crate::source::FileVersion>>, SourceError> {
        if self.cancel.is_cancelled() {
            return Err(SourceError::Io {
                source_name: "task".into(),
                what: String::from_utf8_lossy(path).into_owned(),
                message: ABANDONED.into(),
            });
        }
        self.inner.get(commit, path)
    }

    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        self.inner.has_commit(commit)
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        self.inner.tree_id(commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn abandoned_input_stops_reading() {
        let cancel = Cancel::default();
        let mut r = CancelRead {
            inner: &b"abc"[..],
            cancel: cancel.clone(),
        };
        let mut buf = [0u8; 2];
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        cancel.cancel();
        assert!(r.read(&mut buf).is_err(), "no read after the cancel");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_store_call_of_an_abandoned_task_ends() {
        let rt = tokio::runtime::Handle::current();
        let cancel = Cancel::default();
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || {
            until_cancelled(&rt, &c2, std::future::pending::<()>()).is_none()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
        let ended = tokio::task::spawn_blocking(move || t.join().unwrap());
        assert!(ended.await.unwrap());
    }
}
