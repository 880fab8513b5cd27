//! Partials (contract §10) as a merge input: a local directory or a store prefix
//! holding `partial.json` (`partial_store`), read with `covmerge-partial` one shard at
//! a time. Each table row becomes a row of
//! its kind ([`RowKind`]), the commit of a (path, version) found by a streaming join
//! with the shard's `versions` table (both sorted by that key), so memory does not
//! grow with the partial:
//!
//! - `lines` (path, version, manager, line, hits, rows): [`RowKind::Hits`] of that
//!   manager at the version's commit;
//! - `funcs` (path, version, line, func, rows): [`RowKind::Votes`], the rows naming the
//!   function on that line (no hits, no manager);
//! - `paths` (path, rows without line, rows and hits without version): a
//!   [`RowKind::WithoutLine`] row for every path (also of 0 rows: the path is a file of
//!   the job), and a [`RowKind::WithoutVersion`] row when some rows had no version.
//!
//! The description's `rows_bad` are the input's bad lines; its namespace, whether an
//! input had a `namespace` column, and its other namespaces are the input's
//! [`InputNamespace`].

use std::path::{Path, PathBuf};

use covmerge_partial::{Partial, PartialError, Rows, VersionRow};

use super::partial_store::PartialAt;

use super::{
    BadLines, DirFormat, Format, InputFormat, InputNamespace, InputOptions, LineRow, ReadError,
    Reading, RowKind, RowSink, RowSource, Source,
};

/// A partial's directory.
pub(super) struct PartialDir;

impl Format for PartialDir {
    fn format(&self) -> InputFormat {
        InputFormat::Partial
    }

    fn directory(&self) -> Option<DirFormat> {
        Some(DirFormat {
            named: "partial",
            what: "a partial (no partial.json)",
            looks_like: "a partial (partial.json)",
        })
    }

    fn claims_dir(&self, dir: &Path) -> bool {
        dir.join(covmerge_partial::desc::DESCRIPTION).is_file()
    }

    fn read(&self, input: &str, source: Source, opts: &InputOptions) -> Result<Reading, ReadError> {
        let refuse = |problem: String| ReadError::Input {
            input: input.to_string(),
            problem,
        };
        // A split of a planned job: the description must be the one planned (a
        // partial rewritten since was read with the planned period).
        let planned = |sha: &str| -> Result<(), ReadError> {
            match &opts.partial_sha256 {
                Some(p) if p != sha => Err(refuse(format!(
                    "its {} changed since the job was planned (SHA-256 {sha}, planned {p})",
                    covmerge_partial::desc::DESCRIPTION
                ))),
                _ => Ok(()),
            }
        };
        let at = match source {
            Source::Dir(dir) => {
                if opts.partial_sha256.is_some() {
                    let desc = dir.join(covmerge_partial::desc::DESCRIPTION);
                    let text = std::fs::read(&desc)
                        .map_err(|e| refuse(format!("{}: {e}", desc.display())))?;
                    planned(&super::partial_store::sha256_hex(&text))?;
                }
                PartialAt::Dir(Partial::open(&dir).map_err(|e| refuse(e.to_string()))?)
            }
            Source::Store(rt) => {
                let (at, sha) = PartialAt::open(input, &rt).map_err(refuse)?;
                planned(&sha)?;
                at
            }
            Source::Stream(_) => return Err(refuse(
                "a partial input must be a local directory or a store prefix holding partial.json"
                    .into(),
            )),
        };
        Ok(Reading::Rows(Box::new(PartialRows::new(input, at, None))))
    }
}

/// Opens shard `shard` of the partial `input` (a local directory or a store prefix)
/// for a merge task of a job of `shards` shards, which reads its shard of a partial
/// of the same shard count directly (contract §10). The partial's `partial.json`
/// must be the one planned (`description_sha256`, hex): a partial rewritten since
/// is refused, naming it. Its rows are its shard's only, so they are not checked
/// against `rows_in` (the job's publish gate checks the sums).
pub fn open_partial_shard(
    input: &str,
    rt: &tokio::runtime::Handle,
    shard: u32,
    shards: u32,
    description_sha256: &str,
) -> Result<Box<dyn RowSource>, ReadError> {
    let refuse = |problem: String| ReadError::Input {
        input: input.to_string(),
        problem,
    };
    let at =
        PartialAt::open_planned(input, rt, shard, shards, description_sha256).map_err(refuse)?;
    Ok(Box::new(PartialRows::new(input, at, Some(shard))))
}

/// Some shards of a partial made readable where it is: a local directory as it is, a
/// store prefix's shard files copied down (each refused, naming its object, when its
/// size is not the description's; the partial reader checks each file's size and
/// SHA-256 as it opens it). Dropped: the copies are removed.
pub struct PartialShards {
    at: PartialAt,
    input: String,
}

impl PartialShards {
    /// Makes `shards` readable (a store's copied down, each file's size checked).
    pub fn fetch(&self, shards: &[u32]) -> Result<(), ReadError> {
        for &s in shards {
            self.at.fetch(s).map_err(|problem| ReadError::Input {
                input: self.input.clone(),
                problem,
            })?;
        }
        Ok(())
    }

    /// The partial, over its local files.
    pub fn partial(&self) -> &Partial {
        self.at.partial()
    }

    /// `text` (an error of the partial reader) with the local copies' paths shown as
    /// the store's objects.
    pub fn shown(&self, text: &str) -> String {
        self.at.shown_text(text)
    }
}

/// Opens the partial `input` (a local directory or a store prefix) as planned (its
/// `partial.json`'s SHA-256 `description_sha256`); [`PartialShards::fetch`] then
/// makes shards of it readable.
pub fn open_partial_shards(
    input: &str,
    rt: &tokio::runtime::Handle,
    description_sha256: &str,
) -> Result<PartialShards, ReadError> {
    let refuse = |problem: String| ReadError::Input {
        input: input.to_string(),
        problem,
    };
    let (at, sha) = PartialAt::open(input, rt).map_err(refuse)?;
    if sha != description_sha256 {
        return Err(refuse(format!(
            "its {} changed since the job was planned (SHA-256 {sha}, planned {description_sha256})",
            covmerge_partial::desc::DESCRIPTION
        )));
    }
    Ok(PartialShards {
        at,
        input: input.to_string(),
    })
}

/// The namespace a partial's description gives its rows.
fn namespace_of(p: &Partial) -> InputNamespace {
    let d = p.description();
    InputNamespace {
        name: d.namespace.clone(),
        column: d.counts.namespace_column,
        others: d.other_namespaces.clone(),
    }
}

/// An opened partial: its description read and checked.
pub(super) struct PartialRows {
    input: String,
    at: PartialAt,
    namespace: InputNamespace,
    /// `Some`: only this shard (its bad rows and the `rows_in` check are the job's).
    only: Option<u32>,
}

impl PartialRows {
    pub(super) fn new(input: &str, at: PartialAt, only: Option<u32>) -> Self {
        PartialRows {
            input: input.to_string(),
            namespace: namespace_of(at.partial()),
            at,
            only,
        }
    }
}

impl RowSource for PartialRows {
    fn namespace(&self) -> Option<&InputNamespace> {
        Some(&self.namespace)
    }

    fn read_rows(
        self: Box<Self>,
        _max_bad: u64,
        sink: &mut RowSink<'_>,
    ) -> Result<BadLines, ReadError> {
        let refuse = |problem: String| ReadError::Input {
            input: self.input.clone(),
            problem,
        };
        let p = self.at.partial();
        let d = p.description();
        let shards = match self.only {
            Some(s) => s..s + 1,
            None => 0..d.shard_count,
        };
        // Rows the tables stand for, checked against `rows_in` at the end (the reader
        // checks each file, not the sums across them).
        let mut rows = d.counts.rows_bad;
        for shard in shards {
            self.at.fetch(shard).map_err(refuse)?;
            let read = read_shard(p, shard, sink);
            self.at.done(shard);
            rows = rows.saturating_add(read.map_err(|e| refuse(self.at.shown(&e)))?);
        }
        if self.only.is_some() {
            return Ok(BadLines::default());
        }
        if rows != d.counts.rows_in {
            return Err(refuse(self.at.shown(&PartialError::Corrupt {
                path: p.dir().join(covmerge_partial::desc::DESCRIPTION),
                what: format!(
                    "rows_in is {} but the shards hold {rows} rows (with rows_bad)",
                    d.counts.rows_in
                ),
            })));
        }
        let bad = d.counts.rows_bad;
        Ok(BadLines {
            count: bad,
            // A partial keeps the count of its bad rows, not the rows.
            samples: (bad > 0)
                .then(|| {
                    (
                        0,
                        format!("{bad} bad rows counted in the partial (its rows_bad)"),
                    )
                })
                .into_iter()
                .collect(),
        })
    }
}

/// Hands the rows of shard `shard` to `sink`; returns the input rows they stand for
/// (votes stand for none). `lines` and `funcs` are read together one (path, version)
/// at a time, both sorted by it first: a function row on a line the version's `lines`
/// rows do not have refuses the partial (no raw rows make it, and a merge would give
/// that line a record of its own). Memory: the distinct lines of one version.
fn read_shard(p: &Partial, shard: u32, sink: &mut RowSink<'_>) -> Result<u64, PartialError> {
    let stopped = |_| PartialError::Invalid("the reading of the rows was stopped".into());
    let mut rows = 0u64;
    let mut paths = PathCheck::new(p, shard);
    let mut commits = Commits::new(p, shard)?;
    let mut lines = p.lines(shard)?;
    let mut funcs = p.funcs(shard)?;
    let mut line = lines.next().transpose()?;
    let mut func = funcs.next().transpose()?;
    let mut seen: Vec<u32> = Vec::new();
    loop {
        let (path, version) = match (&line, &func) {
            (Some(l), Some(f)) => (&l.path, &l.version).min((&f.path, &f.version)),
            (Some(l), None) => (&l.path, &l.version),
            (None, Some(f)) => (&f.path, &f.version),
            (None, None) => break,
        };
        let (path, version) = (path.clone(), version.clone());
        let commit = commits.of(&path, &version)?.to_owned();
        seen.clear();
        while let Some(r) = line.take_if(|r| r.path == path && r.version == version) {
            paths.check(&r.path, |s| &s.lines)?;
            rows = rows.saturating_add(r.rows);
            seen.push(r.line);
            sink(&LineRow {
                file: &r.path,
                func: "",
                line: r.line,
                hits: r.hits,
                rows: r.rows,
                manager: Some(&r.manager),
                commit: Some(&commit),
                kind: RowKind::Hits,
            })
            .map_err(stopped)?;
            line = lines.next().transpose()?;
        }
        seen.sort_unstable();
        while let Some(r) = func.take_if(|r| r.path == path && r.version == version) {
            paths.check(&r.path, |s| &s.funcs)?;
            let name = &p.description().shards[shard as usize].funcs.name;
            if r.func_name.len() > crate::csv_rows::MAX_ROW {
                // No raw row holds one: a row is at most MAX_ROW bytes (contract §6).
                return Err(PartialError::Corrupt {
                    path: p.dir().join(name),
                    what: format!(
                        "a function name of {} bytes on line {} of {path:?}, longer than \
                         the {} byte cap on a row",
                        r.func_name.len(),
                        r.line,
                        crate::csv_rows::MAX_ROW
                    ),
                });
            }
            if seen.binary_search(&r.line).is_err() {
                return Err(PartialError::Corrupt {
                    path: p.dir().join(name),
                    what: format!(
                        "function {:?} on line {} of version {version} of {path:?}, \
                         a line with no lines row",
                        r.func_name, r.line
                    ),
                });
            }
            sink(&LineRow {
                file: &r.path,
                func: &r.func_name,
                line: r.line,
                hits: 0,
                rows: r.rows,
                manager: None,
                commit: Some(&commit),
                kind: RowKind::Votes,
            })
            .map_err(stopped)?;
            func = funcs.next().transpose()?;
        }
    }
    for r in p.paths(shard)? {
        let r = r?;
        paths.check(&r.path, |s| &s.paths)?;
        let row = |line, hits, rows, kind| LineRow {
            file: &r.path,
            func: "",
            line,
            hits,
            rows,
            manager: None,
            commit: None,
            kind,
        };
        rows = rows.saturating_add(r.rows_without_line);
        sink(&row(0, 0, r.rows_without_line, RowKind::WithoutLine)).map_err(stopped)?;
        if r.rows_without_version > 0 {
            rows = rows.saturating_add(r.rows_without_version);
            let (h, n) = (r.hits_without_version, r.rows_without_version);
            sink(&row(1, h, n, RowKind::WithoutVersion)).map_err(stopped)?;
        }
    }
    Ok(rows)
}

/// The `versions` table of one shard read alongside another table sorted by (path,
/// version) first: the commit of each (path, version) asked, in key order.
struct Commits {
    rows: Rows<VersionRow>,
    at: Option<VersionRow>,
    file: PathBuf,
}

impl Commits {
    fn new(p: &Partial, shard: u32) -> Result<Commits, PartialError> {
        let name = &p.description().shards[shard as usize].versions.name;
        Ok(Commits {
            rows: p.versions(shard)?,
            at: None,
            file: p.dir().join(name),
        })
    }

    /// The commit of (`path`, `version`), asked in key order.
    fn of(&mut self, path: &str, version: &str) -> Result<&str, PartialError> {
        loop {
            match &self.at {
                Some(v) if (v.path.as_str(), v.version.as_str()) >= (path, version) => break,
                _ => {}
            }
            match self.rows.next().transpose()? {
                Some(v) => self.at = Some(v),
                None => {
                    self.at = None;
                    break;
                }
            }
        }
        match &self.at {
            Some(v) if v.path == path && v.version == version => Ok(&v.commit),
            _ => Err(PartialError::Corrupt {
                path: self.file.clone(),
                what: format!("no commit for version {version} of {path:?}"),
            }),
        }
    }
}

/// Checks that the paths of one shard are paths a raw row may name (canonical,
/// relative to the source root, contract §6), once per run of rows of one path.
struct PathCheck<'p> {
    partial: &'p Partial,
    shard: u32,
    last: String,
}

impl<'p> PathCheck<'p> {
    fn new(partial: &'p Partial, shard: u32) -> Self {
        PathCheck {
            partial,
            shard,
            last: String::new(),
        }
    }

    /// Checks `path`, of the table whose file `entry` names.
    fn check(
        &mut self,
        path: &str,
        entry: impl Fn(&covmerge_partial::ShardFiles) -> &covmerge_partial::FileEntry,
    ) -> Result<(), PartialError> {
        if path == self.last {
            return Ok(());
        }
        if let Err(why) = covmerge_proto::path::canonical_path(path.as_bytes()) {
            let s = &self.partial.description().shards[self.shard as usize];
            return Err(PartialError::Corrupt {
                path: self.partial.dir().join(&entry(s).name),
                what: format!("path {path:?} is not canonical: it {why}"),
            });
        }
        path.clone_into(&mut self.last);
        Ok(())
    }
}
