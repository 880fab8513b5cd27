//! A roll-up's raw rows made a partial on the way (contract §10): every raw input read
//! once and split into per-shard spill chunks in a scratch directory (per namespace
//! when rows are routed by their `namespace` column), then each shard's chunks made
//! that shard's partial files exactly as a merge task of `merge --partial-out` makes
//! them from the same chunks, and the description counted as that merge counts it.
//!
//! Memory: the split's tables (half the budget, flushed as chunks past it), then per
//! shard one chunk read at a time and the builder's sums (the other half, shared by
//! the shard threads; sorted runs spill to the scratch directory past it).

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use covmerge_partial::desc::FORMAT;
use covmerge_partial::{Description, PartialCounts, ShardFiles, FORMAT_VERSION};
use covmerge_proto::input::InputSpec;
use covmerge_proto::manifest::OtherNamespaces;
use covmerge_proto::wire::SplitOutcome;
use covmerge_worker::stages::{
    partial_of_shard, split_one_input, Flush, MergeError, Namespaces, Router, SplitError,
    SplitSettings,
};

/// How the raw rows are read and their partials made.
#[derive(Debug, Clone)]
pub(crate) struct RawSettings {
    /// Shards of the partials.
    pub(crate) shards: u32,
    /// Bad rows skipped and counted before the roll-up fails (what the partial inputs'
    /// bad rows leave of --max-bad-rows).
    pub(crate) max_bad_rows: u64,
    /// The partial inputs' bad rows, taken from --max-bad-rows.
    pub(crate) partials_bad: u64,
    /// Bytes the roll-up may hold.
    pub(crate) budget: usize,
    /// Threads reading and building.
    pub(crate) threads: usize,
    /// The partials' period.
    pub(crate) date_from: String,
    pub(crate) date_to: String,
}

/// The spill chunks a read wrote: each flush one file, each chunk its routed shard
/// (namespace index × shards + shard) and byte range.
struct Spilled {
    dir: PathBuf,
    files: AtomicU32,
    chunks: Mutex<Vec<(u32, u32, Range<usize>)>>,
}

impl Spilled {
    fn file(&self, i: u32) -> PathBuf {
        self.dir.join(format!("spill-{i:05}"))
    }

    /// Stores one flush (called from the parse threads).
    fn add(&self, flush: Flush) -> Result<(), SplitError> {
        let i = self.files.fetch_add(1, Ordering::Relaxed);
        let path = self.file(i);
        std::fs::write(&path, &flush.bytes).map_err(|e| SplitError::Emit {
            // A full disk says what to do.
            message: match covmerge_storage::disk_advice(&e) {
                Some(advice) => format!("{}: {advice}", path.display()),
                None => format!("{}: {e}", path.display()),
            },
            transient: false,
        })?;
        let mut c = self.chunks.lock().unwrap();
        c.extend(flush.chunks.into_iter().map(|(s, r)| (s.0, i, r)));
        Ok(())
    }
}

/// What one read of the raw inputs gave: the rows' counts and their chunks.
pub(crate) struct Read {
    outcome: SplitOutcome,
    /// Rows routed by namespace: the router's namespaces and counts.
    router: Option<Router>,
    spilled: Spilled,
}

/// One namespace's partial to make from the read: its name, its index among the
/// routed namespaces (0 when not routed) and what its description counts.
#[derive(Debug, Clone)]
pub(crate) struct RawNamespace {
    pub(crate) name: String,
    /// Its place among the routed namespaces ([`NO_ROWS`]: a namespace of partial
    /// inputs only, none of whose rows the raw read met).
    index: u32,
    counts: PartialCounts,
    others: OtherNamespaces,
}

/// [`RawNamespace::index`] of a namespace without raw rows.
const NO_ROWS: u32 = u32::MAX;

impl RawNamespace {
    /// Whether the raw read met rows of it.
    pub(crate) fn has_rows(&self) -> bool {
        self.index != NO_ROWS
    }
}

/// Reads the raw `inputs` (each with how it is read) once into spill chunks under
/// `work`: rows of `--namespace` `namespace` (`Namespaces::Job`), or every row routed
/// by its namespace (`router` given).
pub(crate) fn read(
    inputs: &[(String, InputSpec)],
    namespace: Option<&str>,
    router: Option<Router>,
    s: &RawSettings,
    rt: &tokio::runtime::Handle,
    work: &Path,
) -> Result<Read> {
    let spilled = Spilled {
        dir: work.to_owned(),
        files: AtomicU32::new(0),
        chunks: Mutex::new(Vec::new()),
    };
    let emit = |f: Flush| spilled.add(f);
    let mut outcome = SplitOutcome::default();
    for (input, spec) in inputs {
        let settings = SplitSettings {
            shards: s.shards,
            max_bad_rows: s.max_bad_rows.saturating_sub(outcome.counts.rows_bad),
            memory_budget: s.budget / 2,
            threads: s.threads,
            groups: Default::default(),
        };
        let ns = match &router {
            Some(r) => Namespaces::Route(r),
            None => Namespaces::Job(namespace),
        };
        let one = split_one_input(input, spec, ns, settings, rt, &emit).map_err(|e| {
            let text = e.to_string();
            // The shared table's hint only where the refusal is about namespaces.
            let hint = if router.is_none() && namespace.is_none() && text.contains("namespace") {
                " (rows of a shared table: give --namespace NS for one namespace, or {namespace} in --partial-out for one partial per namespace)".to_owned()
            } else {
                String::new()
            };
            anyhow::anyhow!("{text}{hint}")
        })?;
        outcome.counts.add(&one.counts);
        outcome.namespaces.add(&one.namespaces);
        let room = 5usize.saturating_sub(outcome.bad_rows.len());
        outcome.bad_rows.extend(one.bad_rows.into_iter().take(room));
        if outcome.counts.rows_bad > s.max_bad_rows {
            let named: Vec<String> = outcome
                .bad_rows
                .iter()
                .map(|b| format!("{} line {}: {}", b.input, b.line, b.problem))
                .collect();
            let partials = match s.partials_bad {
                0 => String::new(),
                n => format!(", {n} of them counted in the partial inputs"),
            };
            bail!(
                "more than --max-bad-rows {} bad rows{partials}: {}",
                s.max_bad_rows + s.partials_bad,
                named.join("; ")
            );
        }
    }
    Ok(Read {
        outcome,
        router,
        spilled,
    })
}

impl Read {
    /// The namespaces whose partials the read makes, with their counts: with rows
    /// routed, every namespace met, each counting as a merge of its rows alone would
    /// (the bad rows that name no namespace count in every one, as they would in each
    /// such merge); else the one of `namespace` (`""` without it). With rows routed,
    /// each of `partial_only` (namespaces of partial inputs) the raw rows hold none of
    /// comes too, without rows but counting them as that merge would: every routed row
    /// of another namespace, the bad rows that name none.
    pub(crate) fn namespaces(
        &self,
        namespace: Option<&str>,
        partial_only: &[String],
    ) -> Result<Vec<RawNamespace>> {
        let o = &self.outcome;
        let Some(router) = &self.router else {
            let t = &o.namespaces;
            // A shared table whose rows are all of other namespaces (a misspelt
            // `--namespace`) is refused, unless a partial input is of the namespace:
            // then its rows are there, as a merge of the same inputs takes them.
            if t.column && t.matched == 0 && !t.others.is_empty() && partial_only.is_empty() {
                bail!(
                    "no raw row is of --namespace {:?}: the inputs hold {}",
                    namespace.unwrap_or_default(),
                    t.others.describe()
                );
            }
            return Ok(vec![RawNamespace {
                name: namespace.unwrap_or_default().to_owned(),
                index: 0,
                counts: PartialCounts {
                    rows_in: o.counts.rows_in,
                    rows_bad: o.counts.rows_bad,
                    rows_other_namespaces: t.others.total(),
                    namespace_column: t.column,
                    ..Default::default()
                },
                others: t.others.clone(),
            }]);
        };
        let routed = router.namespaces();
        let attributed = routed
            .iter()
            .fold(0u64, |a, r| a.saturating_add(r.rows_bad));
        let unrouted = o.counts.rows_bad.saturating_sub(attributed);
        if routed.is_empty() && o.counts.rows_in > 0 {
            bail!(
                "the raw inputs' {} rows are all bad rows that name no namespace: no namespace to write them to",
                o.counts.rows_in
            );
        }
        let mut out = Vec::with_capacity(routed.len());
        for (i, r) in routed.iter().enumerate() {
            let mut others = OtherNamespaces::default();
            for (j, x) in routed.iter().enumerate() {
                if j != i {
                    others.add_rows(&x.name, x.rows);
                }
            }
            out.push(RawNamespace {
                name: String::from_utf8(r.name.clone()).expect("checked as a path segment"),
                index: i as u32,
                counts: PartialCounts {
                    rows_in: r.rows.saturating_add(unrouted),
                    rows_bad: r.rows_bad.saturating_add(unrouted),
                    rows_other_namespaces: others.total(),
                    namespace_column: true,
                    ..Default::default()
                },
                others,
            });
        }
        // (Without routed rows there are no rows: nothing to count.)
        for name in partial_only.iter().filter(|_| !routed.is_empty()) {
            if routed.iter().any(|r| r.name == name.as_bytes()) {
                continue;
            }
            let mut others = OtherNamespaces::default();
            for x in &routed {
                others.add_rows(&x.name, x.rows);
            }
            out.push(RawNamespace {
                name: name.clone(),
                index: NO_ROWS,
                counts: PartialCounts {
                    rows_in: unrouted,
                    rows_bad: unrouted,
                    rows_other_namespaces: others.total(),
                    namespace_column: true,
                    ..Default::default()
                },
                others,
            });
        }
        Ok(out)
    }

    /// The chunks of shard `j` of namespace `ns`, read one at a time.
    fn chunks(
        &self,
        ns: &RawNamespace,
        j: u32,
        n: u32,
    ) -> impl Iterator<Item = Result<(String, bytes::Bytes), MergeError>> + '_ {
        let routed = ns.has_rows().then(|| ns.index * n + j);
        let mine: Vec<(u32, Range<usize>)> = self
            .spilled
            .chunks
            .lock()
            .unwrap()
            .iter()
            .filter(|c| Some(c.0) == routed)
            .map(|c| (c.1, c.2.clone()))
            .collect();
        mine.into_iter().map(move |(file, r)| {
            let path = self.spilled.file(file);
            let name = format!("{}@{}+{}", path.display(), r.start, r.len());
            let mut buf = vec![0u8; r.len()];
            std::fs::File::open(&path)
                .and_then(|f| f.read_exact_at(&mut buf, r.start as u64))
                .map_err(|e| MergeError::Fetch {
                    chunk: name.clone(),
                    message: e.to_string(),
                    transient: false,
                })?;
            Ok((name, bytes::Bytes::from(buf)))
        })
    }

    /// Makes namespace `ns`'s partial in `out` (new), each row's version found in
    /// `source`.
    pub(crate) fn build(
        &self,
        ns: &RawNamespace,
        source: &dyn covmerge_source::Source,
        s: &RawSettings,
        out: &Path,
    ) -> Result<Description> {
        let n = s.shards;
        std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
        let threads = s.threads.clamp(1, n as usize);
        let limit = (s.budget / 2 / threads).max(1 << 20);
        let next = AtomicU32::new(0);
        let shards: Mutex<Vec<Option<covmerge_partial::ShardPartial>>> =
            Mutex::new(vec![None; n as usize]);
        std::thread::scope(|scope| -> Result<()> {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        loop {
                            let j = next.fetch_add(1, Ordering::Relaxed);
                            if j >= n {
                                return Ok(());
                            }
                            let p = self.build_shard(ns, source, (j, n), limit, out)?;
                            shards.lock().unwrap()[j as usize] = Some(p);
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("a shard thread panicked")?;
            }
            Ok(())
        })?;
        let shards = shards.into_inner().unwrap();
        let mut counts = ns.counts.clone();
        let mut files: Vec<ShardFiles> = Vec::with_capacity(n as usize);
        let mut rows = counts.rows_bad;
        for p in shards.into_iter().map(|p| p.expect("every shard built")) {
            let c = &p.counts;
            rows = rows.saturating_add(c.rows_in);
            counts.rows_without_line = counts.rows_without_line.saturating_add(c.rows_without_line);
            counts.rows_without_version = counts
                .rows_without_version
                .saturating_add(c.rows_without_version);
            counts.hits_without_version = counts
                .hits_without_version
                .saturating_add(c.hits_without_version);
            files.push(p.files);
        }
        if rows != counts.rows_in {
            bail!(
                "namespace {:?}: {} rows read but rows_bad and the shards' rows make {rows}",
                ns.name,
                counts.rows_in
            );
        }
        let d = Description {
            format: FORMAT.to_owned(),
            format_version: FORMAT_VERSION,
            namespace: ns.name.clone(),
            date_from: s.date_from.clone(),
            date_to: s.date_to.clone(),
            counts,
            other_namespaces: ns.others.clone(),
            shard_count: n,
            shards: files,
        };
        d.validate()
            .map_err(|e| anyhow::anyhow!("the partial of namespace {:?}: {e}", ns.name))?;
        d.write(out)?;
        Ok(d)
    }

    /// Writes shard `j` of `n` of namespace `ns` into `out`.
    fn build_shard(
        &self,
        ns: &RawNamespace,
        source: &dyn covmerge_source::Source,
        (j, n): (u32, u32),
        limit: usize,
        out: &Path,
    ) -> Result<covmerge_partial::ShardPartial> {
        let dir = self
            .spilled
            .dir
            .join(format!("ns-{:05}-shard-{j:05}", ns.index));
        let p = partial_of_shard(
            self.chunks(ns, j, n),
            source,
            (j, n),
            limit,
            &self.spilled.dir,
            &dir,
        )
        .map_err(|e| anyhow::anyhow!("shard {j} of namespace {:?}: {e}", ns.name))?;
        let f = &p.files;
        for e in [&f.lines, &f.funcs, &f.versions, &f.paths] {
            std::fs::rename(dir.join(&e.name), out.join(&e.name))
                .with_context(|| format!("{}", out.join(&e.name).display()))?;
        }
        let _ = std::fs::remove_dir(&dir);
        Ok(p)
    }
}
