//! Partials in object stores (`file://`, `s3://`, `gs://` prefixes holding
//! `partial.json`): read one shard at a time through a local copy. The description is
//! fetched first; then, for each shard read, its four files are streamed into a
//! temporary directory (refused as soon as one runs past its size in the
//! description), checked against their size and SHA-256 by the partial reader as for
//! a local partial, read, and removed. Disk holds one shard of one partial at a time;
//! memory what a local partial's reading holds.
//!
//! Errors name the store's objects (`gs://b/day/lines-00003.parquet: ...`), never the
//! temporary copy.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use covmerge_partial::desc::DESCRIPTION;
use covmerge_partial::{FileEntry, Partial, PartialError};
use sha2::{Digest, Sha256};

/// Where a partial's files are: a local directory, or a local copy of a store
/// prefix's (one shard at a time).
pub(crate) enum PartialAt {
    /// A local directory.
    Dir(Partial),
    /// A store prefix.
    Store(StoreCopy),
}

impl PartialAt {
    /// Opens the partial at `input`: a local directory, or a store URL of a prefix
    /// (a trailing `/` or `/partial.json` is the same prefix). Returns it with the
    /// SHA-256 (hex) of its `partial.json` as read.
    pub(crate) fn open(
        input: &str,
        rt: &tokio::runtime::Handle,
    ) -> Result<(PartialAt, String), String> {
        if !covmerge_storage::is_store_url(input) {
            let dir = Path::new(input);
            let text = std::fs::read(dir.join(DESCRIPTION))
                .map_err(|e| format!("{}: {e}", dir.join(DESCRIPTION).display()))?;
            let p = Partial::open(dir).map_err(|e| e.to_string())?;
            return Ok((PartialAt::Dir(p), sha256_hex(&text)));
        }
        let copy = StoreCopy::open(input, rt)?;
        let sha = copy.description_sha256.clone();
        Ok((PartialAt::Store(copy), sha))
    }

    /// Opens the partial at `input` as [`PartialAt::open`] for a merge task reading
    /// shard `shard` of a job of `shards` shards: its `partial.json` must be the one
    /// planned (`description_sha256`, hex), its shard count the job's.
    pub(crate) fn open_planned(
        input: &str,
        rt: &tokio::runtime::Handle,
        shard: u32,
        shards: u32,
        description_sha256: &str,
    ) -> Result<PartialAt, String> {
        let (at, sha) = PartialAt::open(input, rt)?;
        if sha != description_sha256 {
            return Err(format!(
                "its {DESCRIPTION} changed since the job was planned (SHA-256 {sha}, planned {description_sha256})"
            ));
        }
        let count = at.partial().description().shard_count;
        if count != shards || shard >= shards {
            return Err(format!(
                "a partial of {count} shards read as shard {shard} of {shards}"
            ));
        }
        Ok(at)
    }

    /// The partial, its description read (for a store, over the local copy).
    pub(crate) fn partial(&self) -> &Partial {
        match self {
            PartialAt::Dir(p) => p,
            PartialAt::Store(c) => &c.partial,
        }
    }

    /// Makes shard `shard`'s files readable (a store's: copied down and checked).
    pub(crate) fn fetch(&self, shard: u32) -> Result<(), String> {
        match self {
            PartialAt::Dir(_) => Ok(()),
            PartialAt::Store(c) => c.fetch(shard),
        }
    }

    /// Forgets shard `shard`'s local copy.
    pub(crate) fn done(&self, shard: u32) {
        if let PartialAt::Store(c) = self {
            c.done(shard)
        }
    }

    /// An error of the partial reader, its files named as the user named them.
    pub(crate) fn shown(&self, e: &PartialError) -> String {
        self.shown_text(&e.to_string())
    }

    /// [`PartialAt::shown`] of an error's text.
    pub(crate) fn shown_text(&self, text: &str) -> String {
        match self {
            PartialAt::Dir(_) => text.to_string(),
            PartialAt::Store(c) => c.shown(text),
        }
    }
}

/// SHA-256 of `bytes`, hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A store prefix's partial, its shards copied down one at a time.
pub(crate) struct StoreCopy {
    /// The prefix as given, with one trailing `/`.
    url: String,
    rt: tokio::runtime::Handle,
    tmp: tempfile::TempDir,
    partial: Partial,
    description_sha256: String,
    /// The shards copied down and not yet forgotten (a merge task's fetched ahead).
    fetched: std::sync::Mutex<Vec<u32>>,
}

impl StoreCopy {
    fn open(input: &str, rt: &tokio::runtime::Handle) -> Result<StoreCopy, String> {
        let prefix = input
            .strip_suffix(DESCRIPTION)
            .unwrap_or(input)
            .trim_end_matches('/');
        let url = format!("{prefix}/");
        let text = description(&url, rt)?;
        let tmp = tempfile::Builder::new()
            .prefix("covmerge-partial-")
            .tempdir_in(covmerge_storage::local::scratch_root())
            .map_err(|e| format!("a temporary directory for {url}: {e}"))?;
        let local = tmp.path().join(DESCRIPTION);
        std::fs::write(&local, &text).map_err(|e| format!("{}: {e}", local.display()))?;
        let partial =
            Partial::open(tmp.path()).map_err(|e| shown_as(tmp.path(), &url, &e.to_string()))?;
        Ok(StoreCopy {
            url,
            rt: rt.clone(),
            tmp,
            partial,
            description_sha256: sha256_hex(&text),
            fetched: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Copies shard `shard`'s four files into the temporary directory, each streamed
    /// and refused (naming its object) when its size is not the description's; the
    /// reader then checks each copy's SHA-256 as it opens it. A shard copied already
    /// (and not forgotten since) is not copied again.
    fn fetch(&self, shard: u32) -> Result<(), String> {
        if self.fetched.lock().unwrap().contains(&shard) {
            return Ok(());
        }
        let d = self.partial.description();
        let s = d.shards.get(shard as usize).ok_or_else(|| {
            format!(
                "{}{DESCRIPTION}: no shard {shard} (it has {})",
                self.url, d.shard_count
            )
        })?;
        for entry in [&s.lines, &s.funcs, &s.versions, &s.paths] {
            self.copy(entry)?;
        }
        // A merge killed here leaves the copy in its scratch directory.
        covmerge_fault::pause_blocking("store-copy");
        self.fetched.lock().unwrap().push(shard);
        Ok(())
    }

    fn copy(&self, entry: &FileEntry) -> Result<(), String> {
        // A name that is not a plain file name would write outside the copy (the
        // reader refuses it too, as not its table's name).
        if entry.name.is_empty() || entry.name.contains(['/', '\\']) || entry.name.starts_with('.')
        {
            return Err(format!(
                "{}{DESCRIPTION}: a shard file named {:?}",
                self.url, entry.name
            ));
        }
        let shown = format!("{}{}", self.url, entry.name);
        let local = self.local(&entry.name);
        let mut src = open_object(&shown, &self.rt)?;
        let f = std::fs::File::create(&local).map_err(|e| format!("{}: {e}", local.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0u64;
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(match read_error(&shown, e) {
                        m if m.ends_with(NOT_FOUND) => {
                            format!("{m}, though {DESCRIPTION} lists it (a shard file missing)")
                        }
                        m => m,
                    })
                }
            };
            got += n as u64;
            if got > entry.bytes {
                return Err(format!(
                    "{shown}: more than the {} bytes the description says (another file)",
                    entry.bytes
                ));
            }
            out.write_all(&buf[..n])
                .map_err(|e| format!("{}: {e}", local.display()))?;
        }
        if got != entry.bytes {
            return Err(format!(
                "{shown}: {got} bytes, the description says {} (truncated or another file)",
                entry.bytes
            ));
        }
        out.flush().map_err(|e| format!("{}: {e}", local.display()))
    }

    fn done(&self, shard: u32) {
        self.fetched.lock().unwrap().retain(|&s| s != shard);
        if let Some(s) = self.partial.description().shards.get(shard as usize) {
            for e in [&s.lines, &s.funcs, &s.versions, &s.paths] {
                let _ = std::fs::remove_file(self.local(&e.name));
            }
        }
    }

    fn local(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `text` (an error of the reader) with the copy's paths shown as the objects'.
    fn shown(&self, text: &str) -> String {
        shown_as(self.tmp.path(), &self.url, text)
    }
}

/// The most bytes of a `partial.json` read, from a store as from a directory.
pub(crate) use covmerge_partial::desc::MAX_DESCRIPTION_BYTES;

/// The bytes of the `partial.json` of the prefix `url`, refused past
/// [`MAX_DESCRIPTION_BYTES`].
fn description(url: &str, rt: &tokio::runtime::Handle) -> Result<Vec<u8>, String> {
    let shown = format!("{url}{DESCRIPTION}");
    let src = open_object(&shown, rt)?;
    let mut text = Vec::new();
    src.take(MAX_DESCRIPTION_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| match read_error(&shown, e) {
            m if m.ends_with(NOT_FOUND) => format!("{shown}: not found: {url} holds no partial"),
            m => m,
        })?;
    if text.len() as u64 > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "{shown}: more than the {MAX_DESCRIPTION_BYTES} bytes of a partial's description"
        ));
    }
    Ok(text)
}

/// What [`read_error`] says of an object that is not there.
const NOT_FOUND: &str = ": not found";

/// A store object as a stream (a task on `rt` fetches it: this thread only reads).
fn open_object(url: &str, rt: &tokio::runtime::Handle) -> Result<Box<dyn Read + Send>, String> {
    crate::open_raw(url, rt).map_err(|e| e.to_string())
}

/// An error reading the object `shown`: "not found" for a missing one.
fn read_error(shown: &str, e: std::io::Error) -> String {
    let missing = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<covmerge_storage::StoreError>())
        .is_some_and(|s| matches!(s, covmerge_storage::StoreError::NotFound { .. }));
    if missing {
        format!("{shown}{NOT_FOUND}")
    } else {
        format!("{shown}: {e}")
    }
}

/// `text` with the paths under `tmp` shown as the objects under `url`.
fn shown_as(tmp: &Path, url: &str, text: &str) -> String {
    text.replace(&format!("{}/", tmp.display()), url)
}

#[cfg(test)]
mod tests {
    use super::super::{open, open_partial_shard, InputFormat, InputOptions, Reading};
    use super::*;
    use covmerge_partial::{Builder, RawRow};

    /// A partial of 2 shards of a few rows in `dir`.
    fn build(dir: &Path) {
        let day = "2024-04-08".parse().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let mut b = Builder::new("", day, day, 2, 64 << 10, scratch.path()).unwrap();
        let v = "a".repeat(40);
        for (i, path) in ["a.c", "b.c", "c.c", "d.c", "e/f.c"].iter().enumerate() {
            b.add(&RawRow {
                path,
                commit: "c1",
                version: Some(&v),
                manager: "m",
                func_name: "f",
                line: i as u32 + 1,
                hits: 3,
                rows: 1,
            })
            .unwrap();
        }
        b.finish(dir).unwrap();
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// The rows of `input` (file, line, hits, rows) as a merge reads them, or the error.
    fn rows(
        input: &str,
        rt: &tokio::runtime::Runtime,
    ) -> Result<Vec<(String, u32, u64, u64)>, String> {
        rows_planned(input, rt, None)
    }

    /// [`rows`] as a split of a planned job reads them (`planned`: the SHA-256 of the
    /// description as planned).
    fn rows_planned(
        input: &str,
        rt: &tokio::runtime::Runtime,
        planned: Option<&str>,
    ) -> Result<Vec<(String, u32, u64, u64)>, String> {
        let opts = InputOptions {
            partial_sha256: planned.map(str::to_owned),
            ..InputOptions::default()
        };
        let opened = open(
            input,
            InputFormat::Auto,
            rt.handle(),
            crate::Inflate::Inline,
        )
        .map_err(|e| e.to_string())?;
        assert_eq!(opened.format(), InputFormat::Partial);
        let Reading::Rows(src) = opened.read(&opts).map_err(|e| e.to_string())? else {
            panic!("not rows")
        };
        let mut out = Vec::new();
        src.read_rows(0, &mut |r| {
            out.push((r.file.to_string(), r.line, r.hits, r.rows));
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn a_partial_in_a_store_reads_as_the_local_one_and_its_bad_shapes_are_refused_naming_the_object(
    ) {
        let rt = rt();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("day");
        build(&dir);
        let url = format!("file://{}/", dir.display());
        let want = rows(dir.to_str().unwrap(), &rt).unwrap();
        assert!(want.len() >= 10, "{want:?}");
        assert_eq!(rows(&url, &rt).unwrap(), want);
        // Its partial.json named: the same prefix.
        assert_eq!(rows(&format!("{url}partial.json"), &rt).unwrap(), want);

        // One shard of it, as a merge task reads it, only if partial.json is the planned one.
        let text = std::fs::read(dir.join(DESCRIPTION)).unwrap();
        let sha = sha256_hex(&text);
        let one = open_partial_shard(&url, rt.handle(), 1, 2, &sha).unwrap();
        let mut n = 0;
        one.read_rows(0, &mut |r| {
            assert_eq!(
                covmerge_proto::shard_hash::shard_of(r.file.as_bytes(), 2).0,
                1
            );
            n += 1;
            Ok(())
        })
        .unwrap();
        assert!(n > 0 && n < want.len());
        let e = open_partial_shard(&url, rt.handle(), 1, 2, &"0".repeat(64))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("changed since the job was planned"), "{e}");
        let e = open_partial_shard(&url, rt.handle(), 1, 3, &sha)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("a partial of 2 shards read as shard 1 of 3"),
            "{e}"
        );

        // A shard file swapped with another shard's.
        let (l0, l1) = (
            dir.join("lines-00000.parquet"),
            dir.join("lines-00001.parquet"),
        );
        let (b0, b1) = (std::fs::read(&l0).unwrap(), std::fs::read(&l1).unwrap());
        std::fs::write(&l0, &b1).unwrap();
        std::fs::write(&l1, &b0).unwrap();
        let e = rows(&url, &rt).unwrap_err();
        assert!(
            e.contains(&format!("{url}lines-00000.parquet: ")) && e.contains("another file"),
            "{e}"
        );
        std::fs::write(&l0, &b0).unwrap();
        std::fs::write(&l1, &b1).unwrap();
        // Same size, other bytes: refused by its SHA-256, naming the object.
        let mut bad = b1.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        std::fs::write(&l1, &bad).unwrap();
        let e = rows(&url, &rt).unwrap_err();
        assert!(
            e.contains(&format!("{url}lines-00001.parquet: SHA-256")),
            "{e}"
        );
        std::fs::write(&l1, &b1).unwrap();

        // A shard file missing.
        std::fs::remove_file(dir.join("funcs-00001.parquet")).unwrap();
        let e = rows(&url, &rt).unwrap_err();
        assert!(
            e.contains(&format!("{url}funcs-00001.parquet: not found")),
            "{e}"
        );

        // A description of 0 shards, or of more than a job may have.
        for count in ["0", "4294967295"] {
            let mut v: serde_json::Value = serde_json::from_slice(&text).unwrap();
            v["shard_count"] = serde_json::json!(count.parse::<u64>().unwrap());
            std::fs::write(dir.join(DESCRIPTION), v.to_string()).unwrap();
            let e = rows(&url, &rt).unwrap_err();
            assert!(
                e.contains(&format!("{url}partial.json")) && e.contains("shard_count"),
                "{count}: {e}"
            );
        }
        // No partial.json: not a partial.
        std::fs::remove_file(dir.join(DESCRIPTION)).unwrap();
        let e = rows(&url, &rt).unwrap_err();
        assert!(e.contains("holds no partial"), "{e}");
    }

    /// A partial rewritten between a job's planning and the split that reads it was
    /// read whole, its new rows under the planned period: a split now refuses a
    /// description other than the planned one, local or in a store.
    #[test]
    fn a_split_read_a_partial_rewritten_since_the_job_was_planned() {
        let rt = rt();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("day");
        build(&dir);
        let sha = sha256_hex(&std::fs::read(dir.join(DESCRIPTION)).unwrap());
        let url = format!("file://{}/", dir.display());
        let local = dir.to_str().unwrap();
        for input in [local, url.as_str()] {
            let want = rows(input, &rt).unwrap();
            assert_eq!(rows_planned(input, &rt, Some(&sha)).unwrap(), want);
            let e = rows_planned(input, &rt, Some(&"0".repeat(64))).unwrap_err();
            assert!(e.contains("changed since the job was planned"), "{e}");
            assert!(
                e.contains(input.trim_start_matches("file://").trim_end_matches('/')),
                "{e}"
            );
        }
    }
}
