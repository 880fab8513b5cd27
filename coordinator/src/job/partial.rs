//! `--partial-out`: the job's partial (contract §10), made of its merge tasks' shard
//! files. Its description is made from the merges' outcomes and the splits' counts and
//! checked before anything is published ([`describe`]); before the result too, the
//! destination is checked again and the shard files are each read back against its
//! size and SHA-256 ([`check_partial`]); after the result they are copied to the
//! partial's URL (several at once), and `partial.json` is written last
//! ([`PartialToWrite::write`]): a URL without it holds no partial, and a re-run
//! overwrites one.

use covmerge_partial::desc::FORMAT;
use covmerge_partial::{Description, FileEntry, PartialCounts, ShardFiles, FORMAT_VERSION};
use covmerge_proto::date::Date;
use covmerge_proto::layout as keys;
use covmerge_proto::wire::{MergeOutcome, PartialFile};
use covmerge_proto::{JobSpec, Manifest, PartialWritten};
use covmerge_storage::Store;
use futures::{StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use tracing::info;

use super::JobError;
use crate::gate::{Invariant, Refused};

/// The description's file name.
const DESCRIPTION: &str = "partial.json";

/// Shard files checked, then copied, at once by `--partial-out`'s publish.
const FILES_AT_ONCE: usize = 8;

fn refuse(place: impl Into<String>, detail: impl Into<String>) -> Refused {
    Refused {
        invariant: Invariant::Partial,
        place: place.into(),
        detail: detail.into(),
    }
}

/// The job's period: `--date-to` and the `--duration` days before it (one day at
/// least).
fn period(spec: &JobSpec) -> Result<(Date, Date), Refused> {
    if let Some(r) = &spec.rollup {
        // A roll-up's, as planned (its partials' and its raw rows').
        let day = |v: &str| {
            v.parse::<Date>()
                .map_err(|e| refuse("the job", format!("rollup period {v:?}: {e}")))
        };
        return Ok((day(&r.date_from)?, day(&r.date_to)?));
    }
    let to: Date = spec
        .header
        .date_to
        .parse()
        .map_err(|e| refuse("the job", format!("date_to {:?}: {e}", spec.header.date_to)))?;
    let from = to
        .period_start(spec.header.duration)
        .map_err(|e| refuse("the job", e))?;
    Ok((from, to))
}

fn entry(f: &PartialFile) -> FileEntry {
    FileEntry {
        name: f.name.clone(),
        rows: f.rows,
        bytes: f.bytes,
        sha256: f.sha256.clone(),
    }
}

/// The description of the job's partial from its merges' outcomes (`parts`, in shard
/// order), refused unless every shard wrote its files and the counts add up: each
/// shard's rows are those its merge counted (a roll-up's tasks merge nothing: their
/// rows are only in the total), and `rows_in` is the job's (the rows read, outside
/// `--file-path-prefix` included) = `rows_bad` + the shards' rows.
pub(super) fn describe(
    spec: &JobSpec,
    manifest: &Manifest,
    namespace_column: bool,
    parts: &[MergeOutcome],
) -> Result<Description, Refused> {
    let (from, to) = period(spec)?;
    let t = &manifest.totals;
    let mut counts = PartialCounts {
        rows_in: t.rows_in.saturating_add(t.rows_outside_prefix),
        rows_bad: t.rows_bad,
        rows_other_namespaces: t.rows_other_namespaces,
        namespace_column,
        ..Default::default()
    };
    if parts.len() != spec.shards as usize {
        return Err(refuse(
            "the partial",
            format!("{} of {} shards merged", parts.len(), spec.shards),
        ));
    }
    let mut shards = Vec::with_capacity(parts.len());
    let mut rows = counts.rows_bad;
    for (j, o) in parts.iter().enumerate() {
        let place = format!("shard {j}");
        let p = o
            .partial
            .as_ref()
            .ok_or_else(|| refuse(&place, "its merge wrote no partial files"))?;
        let names = ["lines", "funcs", "versions", "paths"].map(|t| format!("{t}-{j:05}.parquet"));
        if p.files.len() != 4 || p.files.iter().zip(&names).any(|(f, n)| f.name != *n) {
            return Err(refuse(
                &place,
                format!("its partial files are not {}", names.join(", ")),
            ));
        }
        let c = &o.counts;
        let merged = [
            c.rows_merged,
            c.rows_lost,
            c.rows_deleted,
            c.rows_without_line,
            c.rows_outside_prefix,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add);
        if (merged != p.rows_in && spec.rollup.is_none())
            || p.rows_without_line.saturating_add(p.rows_without_version) > p.rows_in
        {
            return Err(refuse(
                &place,
                format!(
                    "its partial holds {} rows ({} without line, {} without version), its merge counted {merged}",
                    p.rows_in, p.rows_without_line, p.rows_without_version
                ),
            ));
        }
        rows = rows.saturating_add(p.rows_in);
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut counts.rows_without_line, p.rows_without_line);
        add(&mut counts.rows_without_version, p.rows_without_version);
        add(&mut counts.hits_without_version, p.hits_without_version);
        shards.push(ShardFiles {
            index: j as u32,
            lines: entry(&p.files[0]),
            funcs: entry(&p.files[1]),
            versions: entry(&p.files[2]),
            paths: entry(&p.files[3]),
        });
    }
    if rows != counts.rows_in {
        return Err(refuse(
            "the partial",
            format!(
                "rows_in {} (the rows the splits read) but rows_bad and the shards' rows make {rows}",
                counts.rows_in
            ),
        ));
    }
    let d = Description {
        format: FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        namespace: spec.partial_namespace().unwrap_or_default().to_owned(),
        date_from: from.to_string(),
        date_to: to.to_string(),
        counts,
        other_namespaces: manifest.other_namespaces.clone(),
        shard_count: spec.shards,
        shards,
    };
    d.validate()
        .map_err(|e| refuse("the partial's description", e))?;
    Ok(d)
}

/// The store of a `--partial-out` URL (a local directory is a `file://` one).
pub fn partial_store(url: &str) -> Result<Store, JobError> {
    let url = if covmerge_storage::is_store_url(url) {
        url.to_owned()
    } else {
        let abs = std::path::absolute(url)
            .map_err(|e| JobError::Preflight(format!("--partial-out {url}: {e}")))?;
        // Where the placement checks found it ([`location_key`]): links followed,
        // `..` read as the kernel reads it (the store refuses it in a name).
        format!("file://{}", real_path(&resolve_links(abs)).display())
    };
    Ok(Store::open(&url)?)
}

/// Before any work: `--partial-out` is empty, absent, or holds a partial (replaced);
/// anything else there is refused, naming it. So is a location that is one of
/// `inputs`, holds one or lies within one ([`check_apart`]).
pub async fn preflight_partial_out(url: &str, inputs: &[String]) -> Result<(), JobError> {
    // `DIR/partial.json` as an input is the partial DIR: a partial written in a
    // directory of that name could not be named back.
    if url.trim_end_matches('/').rsplit('/').next() == Some(DESCRIPTION) {
        return Err(JobError::Preflight(format!(
            "--partial-out {}: names a partial's description ({DESCRIPTION}); give the directory the partial goes in",
            covmerge_storage::shown_url(url)
        )));
    }
    // Inside another partial, it would be read with it (a listing of the outer one
    // lists it) or make the outer one no partial (a partial holds no directory).
    if let Some(p) =
        covmerge_storage::local::local_path(url).and_then(|p| std::path::absolute(p).ok())
    {
        if let Some(outer) = p
            .ancestors()
            .skip(1)
            .find(|a| a.join(DESCRIPTION).is_file())
        {
            return Err(JobError::Preflight(format!(
                "--partial-out {}: lies inside the partial {}; give a location outside it",
                covmerge_storage::shown_url(url),
                outer.display()
            )));
        }
    }
    check_apart(url, inputs)?;
    // Opening a local location makes its directories: a refused one leaves none.
    let made = missing_dirs(url);
    let checked = match partial_store(url) {
        Ok(dest) => check_dest(&dest, url).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if checked.is_err() {
        for d in &made {
            let _ = std::fs::remove_dir(d);
        }
    }
    checked
}

/// The directories of a local `url` that do not exist yet, deepest first.
pub fn missing_dirs(url: &str) -> Vec<std::path::PathBuf> {
    let Some(p) = covmerge_storage::local::local_path(url) else {
        return Vec::new();
    };
    let Ok(mut at) = std::path::absolute(p) else {
        return Vec::new();
    };
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(&at).is_err() {
        missing.push(at.clone());
        if !at.pop() {
            break;
        }
    }
    missing
}

/// Refuses a `--partial-out` that is an input (a partial rolled up into itself was
/// replaced while it was read, or summed into itself again on every run), holds one,
/// or lies within one (a listed prefix would list the partial as an input next time).
/// Locations are compared as prefixes: a local path and a `file://` URL by their
/// real path (links resolved), `…/partial.json` as its directory, a listed prefix
/// ending in `*` by its text.
pub fn check_apart(url: &str, inputs: &[String]) -> Result<(), JobError> {
    check_apart_as("--partial-out", url, inputs)
}

/// [`check_apart`] of the output `flag` (`--out`, `--manifest`: a result written
/// under a listed prefix was read as an input by the next run of the same job).
pub fn check_apart_as(flag: &str, url: &str, inputs: &[String]) -> Result<(), JobError> {
    let out = location_key(url);
    for i in inputs {
        let glob = i.ends_with('*');
        let text = i.trim_end_matches('*');
        let key = location_key(text);
        // A listed prefix's text is a prefix of its objects' names, not a directory
        // (`dir/*` lists `dir/`, `dir/x*` names starting `dir/x`).
        let key = if glob && !text.ends_with('/') {
            key.trim_end_matches('/').to_owned()
        } else {
            key
        };
        let hit = out.starts_with(&key) || (!glob && key.starts_with(&out));
        if hit {
            let how = if out == key {
                "is --input"
            } else {
                "overlaps --input"
            };
            return Err(JobError::Preflight(format!(
                "{flag} {} {how} {}: the output would be written where an input is read (or be listed as one); give a location apart from the inputs",
                covmerge_storage::shown_url(url),
                covmerge_storage::shown_url(i)
            )));
        }
    }
    Ok(())
}

/// A location as a comparable prefix ending in `/`: `file://` and local paths by
/// their real absolute path (the existing part canonicalized), store URLs without
/// their query, and `…/partial.json` as its directory.
pub(super) fn location_key(location: &str) -> String {
    let l = location.strip_suffix("/partial.json").unwrap_or(location);
    // `file://localhost/…` and percent-escapes read as the store reads them.
    let local = covmerge_storage::local::local_path(l).and_then(|p| std::path::absolute(p).ok());
    let mut key = match local {
        Some(p) => format!("file://{}", real_path(&resolve_links(p)).display()),
        None => store_key(l),
    };
    if !key.ends_with('/') {
        key.push('/');
    }
    key
}

/// A store URL as a comparable prefix: `s3a://` as `s3://`, and no empty path
/// segments (`s3://b//p` is `s3://b/p`). A `?` is a character of a name, as the store
/// reads it (`covmerge_storage::split_url`), not the start of a query.
fn store_key(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let scheme = if scheme == "s3a" { "s3" } else { scheme };
    let rest: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    format!("{scheme}://{}", rest.join("/"))
}

/// `p` with a symlink at its end followed, even one whose target does not exist yet
/// (writing to a dangling link creates its target).
fn resolve_links(mut p: std::path::PathBuf) -> std::path::PathBuf {
    for _ in 0..40 {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            break;
        };
        if !m.file_type().is_symlink() {
            break;
        }
        let Ok(target) = std::fs::read_link(&p) else {
            break;
        };
        p = match p.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        };
    }
    p
}

/// `p` with its longest existing ancestor canonicalized (links resolved), the rest
/// appended as given.
pub(super) fn real_path(p: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut at = p.to_path_buf();
    loop {
        if let Ok(mut c) = at.canonicalize() {
            // The rest is made as `create_dir_all` makes it: a `..` after a directory
            // just made is that directory's parent.
            for r in rest.iter().rev() {
                if r == ".." {
                    c.pop();
                } else {
                    c.push(r);
                }
            }
            return c;
        }
        let last = at.components().next_back();
        match last {
            Some(c @ (Component::Normal(_) | Component::ParentDir)) => {
                rest.push(c.as_os_str().to_owned())
            }
            Some(Component::CurDir) => {}
            _ => return p.to_path_buf(),
        }
        if !at.pop() {
            return p.to_path_buf();
        }
    }
}

/// The names `dest` holds, refused unless it holds nothing, a partial or a partial's
/// table files without their description (a write that was cut).
async fn check_dest(dest: &Store, url: &str) -> Result<Vec<String>, JobError> {
    let held = dest.list("").await?;
    // A partial's files are side by side: a name with a `/` is a directory, where a
    // shard file may be due (its upload would fail only after minutes of retries).
    if let Some(k) = held.iter().find(|k| k.contains('/')) {
        return Err(JobError::Preflight(format!(
            "--partial-out {}: holds {k:?}, in a directory: a partial has none; give an empty or new location",
            covmerge_storage::shown_url(url),
        )));
    }
    // A partial's files, with or without their description (table files alone are a
    // write that was cut, a killed job: replaced like a partial, so that the same
    // command can run again). Anything else is refused, with a description or not:
    // the files a new partial does not have are deleted once it is written (a
    // `partial.json` of any content beside a README and a thesis deleted both).
    let foreign: Vec<&String> = held
        .iter()
        .filter(|k| *k != DESCRIPTION && !covmerge_partial::is_table_file_name(k))
        .collect();
    if !foreign.is_empty() {
        return Err(JobError::Preflight(format!(
            "--partial-out {}: holds {} object(s) that are not a partial's files ({}): not a partial; give an empty or new location",
            covmerge_storage::shown_url(url),
            foreign.len(),
            foreign.iter().take(3).map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(held)
}

/// The job's partial `d`, checked and ready to be copied to `url`
/// ([`PartialToWrite::write`]): its destination holds nothing else, and every shard file
/// in the job's store is its size and SHA-256. Made before the result is published, so
/// that a refused partial publishes nothing.
pub(super) struct PartialToWrite<'a> {
    d: &'a Description,
    src: &'a Store,
    dest: Store,
    url: String,
    /// What the destination held (a partial replaced).
    held: Vec<String>,
    keys: Vec<(String, &'a FileEntry)>,
}

/// Checks the job's partial `d` for `url` (see [`PartialToWrite`]).
pub(super) async fn check_partial<'a>(
    spec: &JobSpec,
    d: &'a Description,
    store: &'a Store,
    url: &str,
) -> Result<PartialToWrite<'a>, JobError> {
    check_copy(d, store, &|name| keys::partial_file(&spec.job, name), url)
        .await
        // Made after the job's work: it read its inputs, and publishes nothing.
        .map_err(|e| match e {
            JobError::Preflight(m) => JobError::NotPublished(m),
            e => e,
        })
}

/// Publishes the partial `d` written in the local directory `dir` (a roll-up's) to
/// `url` as [`PartialToWrite::write`] does.
pub async fn publish_local_partial(
    dir: &std::path::Path,
    d: &Description,
    url: &str,
) -> Result<PartialWritten, JobError> {
    let src = Store::open(&format!("file://{}", dir.display()))?;
    check_copy(d, &src, &|name| name.to_owned(), url)
        .await?
        .write()
        .await
}

/// Checks the files of `d` in `src` (`key_of` a file's name: its key there) and the
/// destination `url` before any is copied; several files at once (small objects:
/// latency, not bytes).
async fn check_copy<'a>(
    d: &'a Description,
    src: &'a Store,
    key_of: &(dyn Fn(&str) -> String + Sync),
    url: &str,
) -> Result<PartialToWrite<'a>, JobError> {
    let dest = partial_store(url)?;
    let held = check_dest(&dest, url).await?;
    let keys: Vec<(String, &FileEntry)> = d
        .shards
        .iter()
        .flat_map(|s| [&s.lines, &s.funcs, &s.versions, &s.paths])
        .map(|e| (key_of(&e.name), e))
        .collect();
    futures::stream::iter(&keys)
        .map(|(key, e)| verify(src, key, e))
        .buffered(FILES_AT_ONCE)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(PartialToWrite {
        d,
        src,
        dest,
        url: url.to_owned(),
        held,
        keys,
    })
}

impl PartialToWrite<'_> {
    /// Copies the checked files, then the description; returns what a manifest says
    /// of it. A partial that was there loses its description before any file is
    /// overwritten, and its files the new one lacks last.
    pub(super) async fn write(self) -> Result<PartialWritten, JobError> {
        let PartialToWrite {
            d,
            src,
            dest,
            url,
            held,
            keys,
        } = self;
        if held.iter().any(|k| k == DESCRIPTION) {
            dest.delete(DESCRIPTION).await?;
        }
        let dest = &dest;
        futures::stream::iter(&keys)
            .map(|(key, e)| async move {
                let n = dest.copy_from(&e.name, src, key).await?;
                // Checked before the copy; a file changed since is not published.
                if n != e.bytes {
                    return Err(JobError::Gate {
                        job: spec_job(key),
                        refused: Box::new(refuse(
                            key.clone(),
                            format!("{n} bytes copied, its merge wrote {}", e.bytes),
                        )),
                    });
                }
                Ok::<(), JobError>(())
            })
            .buffered(FILES_AT_ONCE)
            .try_collect::<Vec<()>>()
            .await?;
        let json = d.to_json();
        let description_sha256 = hex::encode(Sha256::digest(&json));
        dest.put(DESCRIPTION, json.clone().into()).await?;
        confirm_published(dest, &keys, &json, &url).await?;
        let written: std::collections::HashSet<&str> = keys
            .iter()
            .map(|(_, e)| e.name.as_str())
            .chain([DESCRIPTION])
            .collect();
        let stale: Vec<String> = held
            .into_iter()
            .filter(|k| !written.contains(k.as_str()))
            .collect();
        dest.delete_all(&stale).await?;
        let shown = covmerge_storage::shown_url(&url).to_string();
        info!(partial = %shown, shards = d.shard_count, rows = d.counts.rows_in, "partial written");
        Ok(PartialWritten {
            url: shown,
            description_sha256,
            shard_count: d.shard_count,
            date_from: d.date_from.clone(),
            date_to: d.date_to.clone(),
            rows_in: d.counts.rows_in,
        })
    }
}

/// Reads `key` of `store` through, refusing it unless its size and SHA-256 are `e`'s.
async fn verify(store: &Store, key: &str, e: &FileEntry) -> Result<(), JobError> {
    let (size, mut stream) = store.get_stream_sized(key).await?;
    let mut sha = Sha256::new();
    let mut n = 0u64;
    while let Some(b) = stream.next().await {
        let b = b?;
        n += b.len() as u64;
        sha.update(&b);
    }
    let got = hex::encode(sha.finalize());
    if size != e.bytes || n != e.bytes || got != e.sha256 {
        return Err(JobError::Gate {
            job: spec_job(key),
            refused: Box::new(refuse(
                key.to_owned(),
                format!(
                    "{n} bytes with SHA-256 {got}, its merge wrote {} bytes with SHA-256 {}",
                    e.bytes, e.sha256
                ),
            )),
        });
    }
    Ok(())
}

/// Reads back what was published at `url`: its description must be `json` and each
/// file of `keys` its size. Two writers of one location at once (a cron retry beside a
/// slow run) each copied files over the other's, and both reported the partial
/// written; a description whose files are not its own is removed (a reader would
/// refuse it anyway) and neither is reported written.
async fn confirm_published(
    dest: &Store,
    keys: &[(String, &FileEntry)],
    json: &[u8],
    url: &str,
) -> Result<(), JobError> {
    let shown = covmerge_storage::shown_url(url);
    let again = "another writer of the same --partial-out at once; run the job again alone";
    if dest.get_opt(DESCRIPTION).await?.as_deref() != Some(json) {
        return Err(JobError::PartialOverwritten(format!(
            "--partial-out {shown}: its {DESCRIPTION} was replaced or removed as it was written ({again}); this job's partial is not there"
        )));
    }
    // A local file is read back whole (two writers' files may have one size); a
    // store's object by its size (a read of every object would double the publish).
    let local = covmerge_storage::local::local_path(url).is_some();
    let found: Vec<(&FileEntry, String, bool)> = futures::stream::iter(keys)
        .map(|(_, e)| async move {
            if !local {
                let n = dest.size(&e.name).await?;
                return Ok::<_, JobError>((*e, format!("{n} bytes"), n == e.bytes));
            }
            let (_, mut stream) = dest.get_stream_sized(&e.name).await?;
            let (mut sha, mut n) = (Sha256::new(), 0u64);
            while let Some(b) = stream.next().await {
                let b = b?;
                n += b.len() as u64;
                sha.update(&b);
            }
            let sha = hex::encode(sha.finalize());
            let same = n == e.bytes && sha == e.sha256;
            Ok((*e, format!("{n} bytes with SHA-256 {sha}"), same))
        })
        .buffered(FILES_AT_ONCE)
        .try_collect()
        .await?;
    if let Some((want, what, _)) = found.into_iter().find(|f| !f.2) {
        // Ours, with another's file: removed unless replaced since (then it is theirs).
        if dest.get_opt(DESCRIPTION).await?.as_deref() == Some(json) {
            dest.delete(DESCRIPTION).await?;
        }
        return Err(JobError::PartialOverwritten(format!(
            "--partial-out {shown}: {} is {what}, not the {} bytes with SHA-256 {} this job wrote ({again}); its {DESCRIPTION} was removed",
            want.name, want.bytes, want.sha256,
        )));
    }
    Ok(())
}

/// The job of a key under `jobs/<job>/`.
fn spec_job(key: &str) -> String {
    key.split('/').nth(1).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn entry(name: &str, content: &[u8]) -> FileEntry {
        FileEntry {
            name: name.to_owned(),
            rows: 1,
            bytes: content.len() as u64,
            sha256: hex::encode(Sha256::digest(content)),
        }
    }

    /// Two writers of one `--partial-out` at once both reported the partial written,
    /// the last description naming files the other had written over.
    #[tokio::test]
    async fn two_writers_at_once_both_reported_a_partial_whose_files_were_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let dest = Store::open(&url).unwrap();
        dest.put("lines-00000.parquet", Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        let ours = entry("lines-00000.parquet", b"0123456789");
        let keys = vec![("k".to_owned(), &ours)];
        let json = b"{\"ours\":1}\n".to_vec();

        // Ours whole: confirmed, kept.
        dest.put(DESCRIPTION, json.clone().into()).await.unwrap();
        confirm_published(&dest, &keys, &json, &url).await.unwrap();

        // Another writer's file over ours, of the same size: refused, our
        // description removed (its size alone passed).
        dest.put("lines-00000.parquet", Bytes::from_static(b"0123456788"))
            .await
            .unwrap();
        let e = confirm_published(&dest, &keys, &json, &url)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lines-00000.parquet is 10 bytes with SHA-256 ")
                && e.contains(&format!("not the 10 bytes with SHA-256 {}", ours.sha256)),
            "{e}"
        );
        assert!(!dest.exists(DESCRIPTION).await.unwrap());

        // Another writer's description over ours: refused, theirs kept.
        dest.put(DESCRIPTION, Bytes::from_static(b"{\"theirs\":1}\n"))
            .await
            .unwrap();
        let e = confirm_published(&dest, &keys, &json, &url)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("was replaced or removed as it was written"),
            "{e}"
        );
        assert_eq!(
            dest.get(DESCRIPTION).await.unwrap().as_ref(),
            b"{\"theirs\":1}\n"
        );
    }
}
