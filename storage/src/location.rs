//! Store URLs as covmerge reads them: split without decoding, `file:` paths, objects
//! and input prefixes opened and listed.

use object_store::path::Path;

use crate::{is_store_url, redact_url, Store, StoreError};

/// A store URL split as covmerge reads it: scheme, authority (`bucket`, `user@bucket`,
/// empty for `file:///`) and path, the path exactly as written. A store URL's path is
/// names — of a bucket's objects, a directory's files — as the store lists them, so no
/// percent-escape is decoded (`x%2Fy.csv` is the object `x%2Fy.csv`) and `?` and `#`
/// are characters of a name, not a query or a fragment (`gs://b/res ü#1.jsonl.gz` is
/// the object `res ü#1.jsonl.gz`). A URL parser would decode the one and cut at the
/// others.
pub fn split_url(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    {
        return None;
    }
    Some(match rest.find('/') {
        Some(i) => (scheme, &rest[..i], &rest[i..]),
        None => (scheme, rest, ""),
    })
}

/// The local path a `file:` URL names (`file:///abs`, `file://localhost/abs`,
/// `file:/abs`), as written: see [`split_url`]. `None`: not a `file:` URL of this host.
pub fn file_url_path(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("file:")?;
    match rest.strip_prefix("//") {
        Some(r) => {
            let i = r.find('/')?;
            let host = &r[..i];
            (host.is_empty() || host.eq_ignore_ascii_case("localhost")).then_some(&r[i..])
        }
        None => rest.starts_with('/').then_some(rest),
    }
}

/// How a store URL is shown in logs and errors: as given, names and all, when it has
/// no `@` (without user info there is no password to hide); else as [`redact_url`]
/// shows it (less, never more).
pub fn shown(url: &str) -> String {
    if url.contains('@') {
        redact_url(url)
    } else {
        url.to_string()
    }
}

/// `key` under `prefix`, `/`-joined (slashes around `key` dropped).
pub(crate) fn join_key(prefix: &Path, key: &str) -> String {
    let key = key.trim_matches('/');
    match (prefix.as_ref(), key) {
        ("", k) => k.to_string(),
        (p, "") => p.to_string(),
        (p, k) => format!("{p}/{k}"),
    }
}

/// Whether object_store's `LocalFileSystem` cannot read or write a file of this name:
/// one whose text after its first `#` is digits (`part#3`) is taken for a partial
/// upload of `part`, refused by reads and writes and left out of listings.
pub fn local_unreadable(file_name: &str) -> bool {
    file_name
        .split_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub(crate) fn local_unreadable_reason(file: &str) -> String {
    format!(
        "a file:// name whose text after its first `#` is digits ({file:?}) is what \
         object_store's local store takes for a partial upload: it cannot read or write \
         one (rename it)"
    )
}

/// Files under `dir` (a local directory listed as input) whose path below it starts
/// with `stem` and that object_store's local store leaves out of a listing
/// ([`local_unreadable`]), sorted. Directories are walked as the listing walks them,
/// through symlinks; a directory seen before (a symlink loop) is not walked again.
pub(crate) fn local_unreadable_under(dir: &std::path::Path, stem: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = todo.pop() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match std::fs::metadata(&d) {
                Ok(m) if seen.insert((m.dev(), m.ino())) => {}
                _ => continue,
            }
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let key = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            // The file type from the directory entry; a symlink's target's only if needed.
            let Ok(t) = e.file_type() else { continue };
            let is_dir = if t.is_symlink() {
                std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir())
            } else {
                t.is_dir()
            };
            // A directory can hold matches when its key and the stem agree so far.
            if is_dir {
                if key.starts_with(stem) || stem.starts_with(&format!("{key}/")) {
                    todo.push((e.path(), key));
                }
            } else if key.starts_with(stem) && local_unreadable(&name) {
                found.push(key);
            }
        }
    }
    found.sort();
    found
}

/// Checks, without opening a store, that an object URL names an object its store can
/// write: a path object_store can name (no empty, `.` or `..` segment, no control
/// character) and, for `file://`, a file name the local store can write
/// ([`local_unreadable`]).
pub fn check_object_url(url: &str) -> Result<(), StoreError> {
    let bad = |reason: String| StoreError::Url {
        url: shown(url),
        reason,
    };
    let Some((scheme, _, path)) = split_url(url) else {
        return Ok(());
    };
    let path = path.trim_matches('/');
    Path::parse(path).map_err(|e| bad(format!("object_store cannot name {path:?} ({e})")))?;
    let file = path.rsplit('/').next().unwrap_or(path);
    if scheme == "file" && local_unreadable(file) {
        return Err(bad(local_unreadable_reason(file)));
    }
    Ok(())
}

/// Splits an object URL (`s3://bucket/dir/obj.csv.gz`) into the store of its parent and the key.
pub fn open_object(url: &str) -> Result<(Store, String), StoreError> {
    let (parent, name) = match url.rfind('/') {
        Some(i) if i + 1 < url.len() && !url[..i].ends_with('/') => (&url[..i], &url[i + 1..]),
        _ => {
            return Err(StoreError::Url {
                url: shown(url),
                reason: "expected a URL naming an object".into(),
            })
        }
    };
    Ok((Store::open(parent)?, name.to_string()))
}

/// Prefixes listed at once by [`expand_inputs`].
const LISTINGS_AT_ONCE: usize = 16;

/// Expands input specs: local paths stay as they are; a store URL ending in `*` or `/`
/// lists the objects under that prefix (a trailing `*` matches any suffix). Up to
/// [`LISTINGS_AT_ONCE`] prefixes are listed at once; the inputs keep the specs' order,
/// and the error is the first spec's in that order, as one listing after the other.
pub async fn expand_inputs(specs: &[String]) -> Result<Vec<String>, StoreError> {
    Ok(expand_each_input(specs)
        .await?
        .into_iter()
        .flatten()
        .collect())
}

/// [`expand_inputs`], each spec's inputs apart (what a listing gave, or the spec).
pub async fn expand_each_input(specs: &[String]) -> Result<Vec<Vec<String>>, StoreError> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(specs.iter().map(|s| expand_input(s)))
        .buffered(LISTINGS_AT_ONCE)
        .try_collect()
        .await
}

/// One spec of [`expand_inputs`]: itself, or the objects its prefix lists.
async fn expand_input(spec: &str) -> Result<Vec<String>, StoreError> {
    if !is_store_url(spec) || !(spec.ends_with('*') || spec.ends_with('/')) {
        return Ok(vec![spec.to_string()]);
    }
    let pat = spec.trim_end_matches('*');
    let (dir, stem) = match pat.rfind('/') {
        Some(i) => (&pat[..i], &pat[i + 1..]),
        None => (pat, ""),
    };
    let store = Store::open(dir)?;
    // object_store's local store leaves some names out of its listing: refused,
    // never a merge that silently lacks them.
    if let Some(local) = file_url_path(dir) {
        if let Some(first) = local_unreadable_under(std::path::Path::new(local), stem).first() {
            return Err(StoreError::Name {
                store: shown(dir),
                key: first.clone(),
                reason: local_unreadable_reason(first.rsplit('/').next().unwrap_or(first)),
            });
        }
    }
    let mut found: Vec<String> = store
        .list("")
        .await?
        .into_iter()
        .filter(|k| k.starts_with(stem))
        .map(|k| format!("{}/{}", dir.trim_end_matches('/'), k))
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(StoreError::NotFound {
            store: shown(dir),
            key: format!("{stem}*"),
        });
    }
    Ok(found)
}
