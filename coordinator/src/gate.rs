//! The publish gate: before a result goes anywhere (`--out`, a store URL,
//! the job's prefix, the dashboard's object) every part is read back by the strict
//! reader that `report` and `diff` use ([`covmerge_input::result`]) and checked against
//! the contract's invariants ([`Invariant`]); then the parts' summaries, the header and
//! the manifest are checked against each other. A result that breaks one is not
//! published: the job fails with [`Refused`], naming the invariant, the part, the
//! result line and the file (and its source line where there is one).
//!
//! The checks are independent of the code that wrote the records: they read the
//! compressed bytes as stored, recount, re-hash and re-sum them. Each part is checked
//! on its own (in parallel, on blocking threads), a record at a time: of a file only its
//! `*` record and sums onto its lines are held; only a [`PartSummary`] per part is
//! kept for the final check ([`check_result`]).

use std::fmt;
use std::io::{BufReader, Read};

use covmerge_input::budget::Budget;
use covmerge_input::result::{FileCov, FileRecord, LineHits, ResultReader, StreamError};
use covmerge_proto::group::{Glob, Group};
use covmerge_proto::shard_hash::shard_of;
use covmerge_proto::{JobSpec, Manifest, ShardId};
use flate2::read::MultiGzDecoder;

mod accounted;
mod tally;
mod whole;
use rustc_hash::{FxHashMap, FxHashSet};
use sha2::{Digest, Sha256};
#[cfg(test)]
use tally::hex_of;
use tally::{tally_end, Shared, Tally};
pub use whole::check_whole;

/// An invariant of a published result (contract §4 and §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invariant {
    /// The strict reader reads every record: JSON of the contract's fields, lines
    /// ascending and from 1, `HitCounts` aligned, `Instrumented`/`Covered` as the
    /// arrays say, a file's records together, one record per manager per file.
    Readable,
    /// Exactly one `*` record per file.
    OneStar,
    /// One record per name per file (managers, groups, functions), names not empty.
    UniqueNames,
    /// Each file in exactly one part: the part of its shard.
    OnePart,
    /// The `*` record is, line by line, the sum of its managers' records.
    StarIsSum,
    /// A group's record is the sum of the managers its glob matches.
    GroupIsSum,
    /// Functions own lines of the `*` record, no line twice.
    Functions,
    /// Lines within the base file.
    WithinBase,
    /// Hit counts fit Go's int64.
    Int64,
    /// Each part is what its merge reported (records, bytes, SHA-256), as the
    /// manifest lists it.
    PartAsReported,
    /// The totals (files, instrumented, covered) agree with the manifest.
    Totals,
    /// The header's fields are in their domains and are the job's.
    Header,
    /// A result is not empty when rows were merged.
    NotEmpty,
    /// `--partial-out`: every shard's files, counts that add up to the merge's.
    Partial,
}

impl Invariant {
    /// The invariant in words, as errors name it.
    pub fn describe(self) -> &'static str {
        match self {
            Invariant::Readable => "the strict reader reads every record",
            Invariant::OneStar => "exactly one * record per file",
            Invariant::UniqueNames => "one record per non-empty name per file",
            Invariant::OnePart => "each file in exactly one part, its shard's",
            Invariant::StarIsSum => "the * record is the sum of its managers",
            Invariant::GroupIsSum => "a group record is the sum of the managers it matches",
            Invariant::Functions => "functions own distinct lines of the * record",
            Invariant::WithinBase => "lines within the base file",
            Invariant::Int64 => "hit counts fit int64",
            Invariant::PartAsReported => "each part is what the manifest lists",
            Invariant::Totals => "totals agree with the manifest",
            Invariant::Header => "header fields in their domains and the job's",
            Invariant::NotEmpty => "a result is not empty when rows were merged",
            Invariant::Partial => "the partial is whole and adds up to the merge's rows",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A result the gate refuses to publish.
#[derive(Debug, Clone, thiserror::Error)]
#[error("publish gate: invariant \"{invariant}\" broken: {place}: {detail}; nothing was published")]
pub struct Refused {
    /// The invariant broken.
    pub invariant: Invariant,
    /// Where: the part and its line, the file.
    pub place: String,
    /// What is wrong.
    pub detail: String,
}

fn refuse(invariant: Invariant, place: impl Into<String>, detail: impl Into<String>) -> Refused {
    Refused {
        invariant,
        place: place.into(),
        detail: detail.into(),
    }
}

/// The reader's budget for a part. The gate holds one record line at a time and, of a
/// file, its `*` record with about 20 bytes and two bits per group a line; a record line
/// a worker wrote (a file of millions of lines) must not be refused here, so the cap on
/// one line is a quarter of 4 GiB.
pub const PART_BUDGET: Budget = Budget(4 << 30);

/// What the gate keeps of a checked part for the final check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartSummary {
    /// The part's shard.
    pub shard: u32,
    /// Files in it.
    pub files: u64,
    /// `*` lines in it.
    pub instrumented: u64,
    /// `*` lines with hits in it.
    pub covered: u64,
    /// JSON lines in it.
    pub records: u64,
    /// Its compressed bytes.
    pub bytes: u64,
    /// SHA-256 of its compressed bytes (hex).
    pub sha256: String,
}

/// The part being checked and what the job says of it.
#[derive(Debug, Clone, Copy)]
pub struct PartCheck<'a> {
    /// The part's store key (named in errors).
    pub key: &'a str,
    /// Its shard.
    pub shard: ShardId,
    /// The job's shard count.
    pub shards: u32,
    /// The job's groups (`--group`): their records are not managers'.
    pub groups: &'a [Group],
    /// What the part's merge reported of its files: each path and the line count of
    /// its base version ([`covmerge_proto::wire::MergeOutcome::base_lines`]). The part's files
    /// must be exactly these, and no record line past its file's count. `None`: not
    /// checked (a result read back outside a job, where no merge reported).
    pub base_lines: Option<&'a [(String, u32)]>,
    /// The groups are not known (a result read without its manifest): a record of
    /// another name may be a group's, so the managers' records may sum to more than
    /// `*`, never to less.
    pub groups_unknown: bool,
}

/// Reads the part `data` (its gzip bytes as stored) through the strict reader and
/// checks every file in it; returns what the final check needs.
pub fn check_part<R: Read + Send + 'static>(
    part: PartCheck<'_>,
    data: R,
    budget: Budget,
) -> Result<PartSummary, Refused> {
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally {
        inner: data,
        sha: Sha256::new(),
        bytes: 0,
    }));
    let gz = MultiGzDecoder::new(Shared(tally.clone()));
    let name = format!("part {} ({})", part.shard.0, part.key);
    let reader = ResultReader::part(
        &name,
        Box::new(BufReader::with_capacity(1 << 16, gz)),
        budget,
    );
    let mut sum = check_files(reader, part, &name)?;
    // The decoder is dropped with the reader: the tally is ours alone again.
    (sum.bytes, sum.sha256) = tally_end(tally, name)?;
    Ok(sum)
}

/// Checks every file `reader` reads (as the part `part` says, named `name` in
/// refusals): the part's summary but its bytes and hash.
fn check_files(
    mut reader: ResultReader,
    part: PartCheck<'_>,
    name: &str,
) -> Result<PartSummary, Refused> {
    let mut sum = PartSummary {
        shard: part.shard.0,
        ..PartSummary::default()
    };
    let seed = fingerprint_seed();
    let mut matcher = Matcher::new(part.groups);
    // Per reported file: its base line count and whether the part has it.
    let mut reported = reported_files(part.base_lines, name)?;
    loop {
        let mut state: Option<FileCheck<'_>> = None;
        let mut failed_at = 0u64;
        let r = reader.next_file_records(|f, line, rec| {
            failed_at = line;
            let with_path = |(i, d): Broken| (i, d, f.path.clone());
            let st = match &mut state {
                Some(st) => st,
                None => {
                    let base = match &mut reported {
                        None => None,
                        Some(m) => match m.get_mut(f.path.as_str()) {
                            Some((lines, seen)) if !*seen => {
                                *seen = true;
                                Some(*lines)
                            }
                            _ => {
                                return Err(with_path((
                                    Invariant::PartAsReported,
                                    "the file is in the part, but its merge did not report it"
                                        .to_string(),
                                )))
                            }
                        },
                    };
                    state.insert(FileCheck::start(f, part, seed, base).map_err(with_path)?)
                }
            };
            st.record(rec, &mut matcher).map_err(with_path)
        });
        let f = match r {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(stream_refusal(e, name, failed_at)),
        };
        let place = format!("{name}, line {}, file {}", f.line, f.path);
        let st = state.ok_or_else(|| refuse(Invariant::OneStar, place.clone(), "no record"))?;
        let (instrumented, covered, records) = st.finish().map_err(|(i, d)| refuse(i, place, d))?;
        sum.files += 1;
        sum.instrumented += instrumented;
        sum.covered += covered;
        sum.records += records;
    }
    drop(reader);
    if let Some(m) = &reported {
        if let Some(missing) = m.iter().filter(|(_, v)| !v.1).map(|(p, _)| *p).min() {
            return Err(refuse(
                Invariant::PartAsReported,
                name,
                format!("its merge reported file {missing}, the part does not have it"),
            ));
        }
    }
    Ok(sum)
}

/// Per file whose base line count a part's merge reported: that count, and whether
/// the part has the file.
type Reported<'p> = FxHashMap<&'p str, (u32, bool)>;

/// The files whose base line count the part's merge reported, none seen yet
/// (`None`: it reported none). A file reported twice is refused.
fn reported_files<'p>(
    base_lines: Option<&'p [(String, u32)]>,
    name: &str,
) -> Result<Option<Reported<'p>>, Refused> {
    let Some(list) = base_lines else {
        return Ok(None);
    };
    let mut m = FxHashMap::default();
    for (path, lines) in list {
        if m.insert(path.as_str(), (*lines, false)).is_some() {
            return Err(refuse(
                Invariant::PartAsReported,
                name.to_string(),
                format!("its merge reported the base line count of {path} twice"),
            ));
        }
    }
    Ok(Some(m))
}

/// Why a part whose reading failed (`failed_at`: the line being read) is refused.
fn stream_refusal(
    e: StreamError<(Invariant, String, String)>,
    name: &str,
    failed_at: u64,
) -> Refused {
    match e {
        StreamError::Read(e) => {
            let inv = if e.to_string().contains("a second MCR of manager \"*\"") {
                Invariant::OneStar
            } else {
                Invariant::Readable
            };
            refuse(inv, name.to_string(), e.to_string())
        }
        StreamError::Visit((i, d, file)) => {
            let place = format!("{name}, line {failed_at}, file {file}");
            refuse(i, place, d)
        }
    }
}

/// The prime of the fingerprints that compare a group's hits with its managers'.
const P61: u64 = (1 << 61) - 1;

/// A seed of this process for the fingerprints: a writer cannot aim at it.
fn fingerprint_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    h.finish()
}

/// A line's weight in the fingerprints (splitmix64 of the line and the seed, mod P61).
fn weight(seed: u64, line: u32) -> u64 {
    let mut z = seed ^ (line as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % P61
}

/// `acc + h * w` mod P61.
fn fp_add(acc: u64, h: u64, w: u64) -> u64 {
    ((acc as u128 + (h % P61) as u128 * w as u128) % P61 as u128) as u64
}

fn bit(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

fn set(bits: &mut [u64], i: usize) -> bool {
    let was = bit(bits, i);
    bits[i / 64] |= 1 << (i % 64);
    was
}

/// The groups each manager of a part belongs to: each glob compiled once, each
/// (manager, group) pair matched once per part, not once per file.
struct Matcher {
    globs: Vec<Glob>,
    of: FxHashMap<String, std::rc::Rc<[usize]>>,
    /// (manager, glob) pairs matched so far.
    matched: u64,
}

impl Matcher {
    fn new(groups: &[Group]) -> Self {
        Matcher {
            globs: groups
                .iter()
                .map(|g| Glob::new(g.glob.as_bytes()))
                .collect(),
            of: FxHashMap::default(),
            matched: 0,
        }
    }

    /// The indexes of the groups whose glob matches manager `m`.
    fn groups_of(&mut self, m: &str) -> std::rc::Rc<[usize]> {
        if self.globs.is_empty() {
            return std::rc::Rc::from([]);
        }
        if let Some(g) = self.of.get(m) {
            return g.clone();
        }
        self.matched += self.globs.len() as u64;
        let g: std::rc::Rc<[usize]> = (self.globs.iter().enumerate())
            .filter(|(_, g)| g.matches(m.as_bytes()))
            .map(|(i, _)| i)
            .collect();
        self.of.insert(m.to_string(), g.clone());
        g
    }
}

/// What a group's record must be: the lines and a fingerprint of the hits of the
/// managers its glob matches, and what its record says.
struct GroupCheck {
    want_lines: Vec<u64>,
    want_fp: u64,
    got: Option<(Vec<u64>, u64)>,
}

/// The checks of one file of a part, one record at a time: the file's `*` record (its
/// first) is held, with the managers' sums onto its lines and a bit per line per
/// group, never the managers' records themselves.
struct FileCheck<'a> {
    part: PartCheck<'a>,
    /// The base file's line count, as the part's merge reported it (`None`: not
    /// checked).
    base: Option<u32>,
    seed: u64,
    star: LineHits,
    sums: Vec<u64>,
    seen: Vec<u64>,
    owned: Vec<u64>,
    groups: Vec<GroupCheck>,
    funcs: FxHashSet<String>,
    records: u64,
}

type Broken = (Invariant, String);

impl<'a> FileCheck<'a> {
    /// The file `f` of `part`: its path checked; its records follow.
    fn start(
        f: &FileCov,
        part: PartCheck<'a>,
        seed: u64,
        base: Option<u32>,
    ) -> Result<Self, Broken> {
        if let Some(p) = &f.path_problem {
            return Err((Invariant::Readable, p.clone()));
        }
        let home = shard_of(f.path.as_bytes(), part.shards);
        if home != part.shard {
            return Err((
                Invariant::OnePart,
                format!(
                    "the file belongs to shard {} of {}, not to this part's",
                    home.0, part.shards
                ),
            ));
        }
        Ok(FileCheck {
            part,
            base,
            seed,
            star: LineHits::default(),
            sums: Vec::new(),
            seen: Vec::new(),
            owned: Vec::new(),
            groups: Vec::new(),
            funcs: FxHashSet::default(),
            records: 0,
        })
    }

    /// The index of `line` among the `*` record's lines.
    fn at(&self, line: u32) -> Option<usize> {
        self.star.lines.binary_search(&line).ok()
    }

    fn record(&mut self, rec: FileRecord, matcher: &mut Matcher) -> Result<(), Broken> {
        if let Some(n) = self.base {
            // A record's lines ascend: its last is its largest.
            let (kind, who, last) = match &rec {
                FileRecord::Mcr(m, lh) => ("manager", m, lh.lines.last()),
                FileRecord::Fl(f, lines) => ("function", f, lines.last()),
            };
            if let Some(&line) = last.filter(|&&l| l > n) {
                return Err((
                    Invariant::WithinBase,
                    format!("line {line}: {kind} {who:?} has it, the base file has {n} line(s)"),
                ));
            }
        }
        self.records += 1;
        let first = self.records == 1;
        match rec {
            FileRecord::Mcr(m, lh) if m == "*" => {
                if !first {
                    return Err((
                        Invariant::OneStar,
                        "the * record is not the file's first (covmerge writes it first)".into(),
                    ));
                }
                if let Some(i) = lh.hits.iter().position(|&h| h > i64::MAX as u64) {
                    return Err((
                        Invariant::Int64,
                        format!("line {}: * has {} hits", lh.lines[i], lh.hits[i]),
                    ));
                }
                let n = lh.lines.len();
                let words = n.div_ceil(64);
                self.sums = vec![0; n];
                self.seen = vec![0; words];
                self.owned = vec![0; words];
                self.groups = (0..self.part.groups.len())
                    .map(|_| GroupCheck {
                        want_lines: vec![0; words],
                        want_fp: 0,
                        got: None,
                    })
                    .collect();
                self.star = lh;
                Ok(())
            }
            _ if first => Err((
                Invariant::OneStar,
                "no * record before the file's others".into(),
            )),
            FileRecord::Mcr(m, lh) => {
                // Contract §6: a manager is never empty (a row naming none is a bad row).
                if m.is_empty() {
                    return Err((
                        Invariant::UniqueNames,
                        "an MCR record of manager \"\" (a manager name is never empty)".into(),
                    ));
                }
                match self.part.groups.iter().position(|g| g.name == m) {
                    Some(g) => self.group_record(g, &lh),
                    None => self.manager_record(&m, &lh, matcher),
                }
            }
            FileRecord::Fl(func, lines) => {
                for &line in &lines {
                    let Some(i) = self.at(line) else {
                        return Err((
                            Invariant::Functions,
                            format!("line {line}: function {func:?} owns it, * does not have it"),
                        ));
                    };
                    if set(&mut self.owned, i) {
                        return Err((
                            Invariant::Functions,
                            format!("line {line}: owned by two functions, {func:?} the second"),
                        ));
                    }
                }
                if !self.funcs.insert(func.clone()) {
                    return Err((
                        Invariant::UniqueNames,
                        format!("a second FL record of function {func:?}"),
                    ));
                }
                Ok(())
            }
        }
    }

    fn manager_record(
        &mut self,
        m: &str,
        lh: &LineHits,
        matcher: &mut Matcher,
    ) -> Result<(), Broken> {
        let matches = matcher.groups_of(m);
        for (&line, &h) in lh.lines.iter().zip(&lh.hits) {
            let Some(i) = self.at(line) else {
                return Err((
                    Invariant::StarIsSum,
                    format!("line {line}: manager {m:?} has it, * does not"),
                ));
            };
            self.sums[i] = self.sums[i].checked_add(h).ok_or_else(|| {
                (
                    Invariant::Int64,
                    format!("line {line}: the managers' hits overflow"),
                )
            })?;
            set(&mut self.seen, i);
            let w = weight(self.seed, line);
            for &g in matches.iter() {
                let g = &mut self.groups[g];
                set(&mut g.want_lines, i);
                g.want_fp = fp_add(g.want_fp, h, w);
            }
        }
        Ok(())
    }

    fn group_record(&mut self, g: usize, lh: &LineHits) -> Result<(), Broken> {
        let name = &self.part.groups[g].name;
        let mut bits = vec![0u64; self.seen.len()];
        let mut fp = 0;
        for (&line, &h) in lh.lines.iter().zip(&lh.hits) {
            let Some(i) = self.at(line) else {
                return Err((
                    Invariant::GroupIsSum,
                    format!("line {line}: group {name:?} has it, * does not"),
                ));
            };
            set(&mut bits, i);
            fp = fp_add(fp, h, weight(self.seed, line));
        }
        self.groups[g].got = Some((bits, fp));
        Ok(())
    }

    /// The checks that need every record of the file; returns its (instrumented,
    /// covered, records).
    fn finish(self) -> Result<(u64, u64, u64), Broken> {
        let star = &self.star;
        for (i, &line) in star.lines.iter().enumerate() {
            if !bit(&self.seen, i) {
                return Err((
                    Invariant::StarIsSum,
                    format!("line {line}: * has it, no manager does"),
                ));
            }
            let off = if self.part.groups_unknown {
                self.sums[i] < star.hits[i]
            } else {
                self.sums[i] != star.hits[i]
            };
            if off {
                return Err((
                    Invariant::StarIsSum,
                    format!(
                        "line {line}: * has {} hits, its managers sum to {}",
                        star.hits[i], self.sums[i]
                    ),
                ));
            }
        }
        for (g, c) in self.part.groups.iter().zip(&self.groups) {
            let none = c.want_lines.iter().all(|&w| w == 0);
            match &c.got {
                None if none => {}
                None => {
                    return Err((
                        Invariant::GroupIsSum,
                        format!(
                            "group {:?} has no record, but managers matching {:?} have lines",
                            g.name, g.glob
                        ),
                    ))
                }
                Some((bits, fp)) => {
                    if *bits != c.want_lines || *fp != c.want_fp {
                        let at = (0..star.lines.len())
                            .find(|&i| bit(bits, i) != bit(&c.want_lines, i))
                            .map(|i| format!("line {}: ", star.lines[i]))
                            .unwrap_or_default();
                        return Err((
                            Invariant::GroupIsSum,
                            format!(
                                "{at}group {:?} is not the sum of the managers matching {:?}",
                                g.name, g.glob
                            ),
                        ));
                    }
                }
            }
        }
        Ok((star.instrumented(), star.covered(), self.records))
    }
}

/// The final check, before anything is published: the header member as the reader
/// reads it, each part's summary against the manifest's shard, the totals, and a
/// result that is not empty when rows were merged.
pub fn check_result(
    spec: &JobSpec,
    header_member: &[u8],
    manifest: &Manifest,
    parts: &[PartSummary],
) -> Result<(), Refused> {
    let name = "the header";
    let r = ResultReader::new(
        name,
        Box::new(BufReader::new(MultiGzDecoder::new(std::io::Cursor::new(
            header_member.to_vec(),
        )))),
    )
    .map_err(|e| refuse(Invariant::Header, name, e.to_string()))?;
    let h = r.header();
    let bad = |what: String| Err(refuse(Invariant::Header, "result line 1", what));
    for (field, got, want) in [
        ("Namespace", &h.namespace, &spec.header.namespace),
        ("Repo", &h.repo, &spec.base_repo),
        ("Commit", &h.commit, &spec.base_commit),
        ("DateTo", &h.date_to, &spec.header.date_to),
    ] {
        if got != want {
            return bad(format!("{field} is {got:?}, the job's is {want:?}"));
        }
    }
    whole::header_domains(h).map_err(|w| refuse(Invariant::Header, "result line 1", w))?;
    if parts.len() != manifest.shards.len() {
        return Err(refuse(
            Invariant::PartAsReported,
            "the manifest",
            format!(
                "{} part(s) checked, {} shard(s) listed",
                parts.len(),
                manifest.shards.len()
            ),
        ));
    }
    for (p, s) in parts.iter().zip(&manifest.shards) {
        let place = format!("part {}", p.shard);
        for (what, got, listed) in [
            ("shard", p.shard as u64, s.index as u64),
            ("records", p.records, s.records),
            ("bytes", p.bytes, s.bytes),
        ] {
            if got != listed {
                return Err(refuse(
                    Invariant::PartAsReported,
                    place,
                    format!("{got} {what} read back, the manifest lists {listed}"),
                ));
            }
        }
        if p.sha256 != s.sha256 {
            return Err(refuse(
                Invariant::PartAsReported,
                place,
                format!(
                    "SHA-256 {} read back, the manifest lists {}",
                    p.sha256, s.sha256
                ),
            ));
        }
    }
    let t = &manifest.totals;
    let sum = |f: fn(&PartSummary) -> u64| parts.iter().map(f).sum::<u64>();
    for (what, got, listed) in [
        ("files", sum(|p| p.files), t.files),
        ("instrumented", sum(|p| p.instrumented), t.instrumented),
        ("covered", sum(|p| p.covered), t.covered),
    ] {
        if got != listed {
            return Err(refuse(
                Invariant::Totals,
                "the manifest's totals",
                format!("{got} {what} in the parts, the manifest says {listed}"),
            ));
        }
    }
    accounted::accounted(manifest, &spec.header.namespace)?;
    if t.rows_merged > 0 && t.instrumented == 0 {
        return Err(refuse(
            Invariant::NotEmpty,
            "the result",
            format!("{} row(s) merged but no line instrumented", t.rows_merged),
        ));
    }
    Ok(())
}

/// Why a result has no instrumented line, for the job's log: every row accounted for
/// elsewhere (contract §7). `None` when some line is instrumented.
pub fn why_empty(m: &Manifest) -> Option<String> {
    let t = &m.totals;
    (t.instrumented == 0).then(|| {
        format!(
            "no row landed on a line of the base: {} row(s) read, {} bad, {} without line, {} lost (changed or missing versions), {} in {} file(s) deleted at the base, {} outside --file-path-prefix",
            t.rows_in,
            t.rows_bad,
            t.rows_without_line,
            t.rows_lost,
            t.rows_deleted,
            t.files_deleted,
            t.rows_outside_prefix
        )
    })
}

#[cfg(test)]
mod tests;
