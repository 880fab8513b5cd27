//! History mode (`days > 0`): a quarter (or any number of days) of daily coverage
//! exports, as syzbot's fleet would leave them.
//!
//! One commit lands each day (day 0's is the initial tree; every later one edits
//! ~`change_share` of the files, at least one); the last day's commit is the base.
//! Each day every manager builds that day's commit and, as fleets lag, each of the
//! previous `lag_days` days' commits with probability `manager_commit_share`. The
//! rows of day `d` (those sessions' rows, the same row model as the single-set mode)
//! go to `day-DDD/input-NN.csv(.gz)`, `parts` files a day, and carry timestamps of
//! that day; day `d`'s date is `date_to` less `days - 1 - d` days. Edge-case rows
//! (and the repeated header line) are in the last day's parts. A day's rows name only
//! commits of that day or before (and, among the edge cases, a commit that exists
//! nowhere).
//!
//! The sources, git repository and `corpus.json` are written as in the single-set
//! mode; `corpus.json` also lists the days (date, commit, inputs, rows).

use std::fs;
use std::path::{Path, PathBuf};

use covmerge_proto::date::{civil_from_days, Date};

use crate::rng::{hex40, mix, Rng};
use crate::rows::{self, Parts, RowFile, RowsInput, Session};
use crate::{
    build_history_with, edge_rows, git, git_commits, json, render_prefix, row_files, write_sources,
    Corpus, CorpusSpec, Error, History, BASE_REPO,
};

/// The default last day of a history: the end of 2024's third quarter.
pub(crate) const DEFAULT_DATE_TO: Date = Date {
    year: 2024,
    month: 9,
    day: 30,
};

/// One day of a history corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Day {
    /// The day's date, `YYYY-MM-DD`.
    pub date: String,
    /// The commit that landed that day (also `Corpus::commits[day]`).
    pub commit: String,
    /// The day's input parts, `day-DDD/input-NN.csv(.gz)`.
    pub inputs: Vec<PathBuf>,
    /// Data rows of the day (header lines excluded).
    pub rows: u64,
}

/// Whether `name` is a day directory of a history corpus (`day-` and three digits).
pub(crate) fn is_day_dir(name: &str) -> bool {
    name.len() == 7
        && name.starts_with("day-")
        && name.as_bytes()[4..].iter().all(u8::is_ascii_digit)
}

/// The history-mode checks of a spec (none apply without `days`).
pub(crate) fn validate(spec: &CorpusSpec) -> Result<(), Error> {
    let bad = |m: String| Err(Error::Spec(m));
    if !(0.0..=1.0).contains(&spec.change_share) {
        return bad("change_share must be within 0..=1".into());
    }
    if spec.days > 1000 {
        return bad(format!("days must be at most 1000 (got {})", spec.days));
    }
    if spec.days > 0 && spec.date_to.days() < spec.days as i64 {
        return bad(format!(
            "the first of {} days before date_to {} is before 1970-01-01",
            spec.days, spec.date_to
        ));
    }
    Ok(())
}

/// Unix time of day `d`'s midnight.
fn day_start(spec: &CorpusSpec, d: usize) -> u64 {
    let first = spec.date_to.days() - (spec.days as i64 - 1);
    (first + d as i64) as u64 * 86_400
}

fn day_date(spec: &CorpusSpec, d: usize) -> String {
    let (y, m, dd) = civil_from_days((day_start(spec, d) / 86_400) as i64);
    format!("{y:04}-{m:02}-{dd:02}")
}

/// Manager `m`'s session of commit `c` on day `d`: its prefix and key. The build
/// started that day, between 00:00 and 21:00 UTC.
fn session(spec: &CorpusSpec, d: usize, m: usize, c: usize, commit: &str) -> (Vec<u8>, u64) {
    let key = mix(
        mix(spec.seed, 0x5E55_2000 + m as u64),
        ((d as u64) << 32) | c as u64,
    );
    let secs = day_start(spec, d) + (m as u64 % 20) * 3_600 + key % 3_600;
    (render_prefix(spec.columns, m, secs, key, commit), key)
}

/// The sessions of day `d`: per manager, the lagging commits it built (oldest first,
/// each with probability `manager_commit_share`), then the day's commit.
fn day_sessions(spec: &CorpusSpec, rng: &mut Rng, commits: &[String], d: usize) -> Vec<Session> {
    let mut out = Vec::new();
    for m in 0..spec.managers {
        let mut built: Vec<usize> = (1..=spec.lag_days.min(d))
            .rev()
            .filter(|_| rng.chance(spec.manager_commit_share))
            .map(|j| d - j)
            .collect();
        built.push(d);
        for c in built {
            let (prefix, key) = session(spec, d, m, c, &commits[c]);
            out.push(Session {
                commit: c,
                prefix,
                key,
            });
        }
    }
    out
}

/// Writes day `d`'s parts under `out`; returns the day.
#[allow(clippy::too_many_arguments)]
fn write_day(
    spec: &CorpusSpec,
    out: &Path,
    h: &History,
    files: &[RowFile],
    commits: &[String],
    sessions: &[Session],
    edges: &[(usize, Vec<u8>)],
    d: usize,
) -> Result<Day, Error> {
    let dir = out.join(format!("day-{d:03}"));
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let ext = if spec.plain { "csv" } else { "csv.gz" };
    let inputs: Vec<PathBuf> = (0..spec.parts)
        .map(|i| dir.join(format!("input-{i:02}.{ext}")))
        .collect();
    let mut parts = Parts::create(&inputs, (!spec.plain).then_some(spec.gzip_level))?;
    let input = RowsInput {
        arena: &h.arena,
        files,
        versions: &h.versions,
        sessions,
        edges,
        sorted: spec.sorted,
        columns: spec.columns,
        repeat_header: !edges.is_empty(),
        seed: mix(spec.seed, 0xDA70_0000 + d as u64),
    };
    let rows = match rows::write_rows(&input, &mut parts) {
        Ok(n) => n,
        Err(e) => {
            let _ = parts.finish();
            return Err(e);
        }
    };
    parts.finish()?;
    Ok(Day {
        date: day_date(spec, d),
        commit: commits[d].clone(),
        inputs,
        rows,
    })
}

/// Generates the history corpus of `spec` (`days > 0`) into `out`, which
/// [`crate::generate`] has checked and cleaned.
pub(crate) fn generate(spec: &CorpusSpec, out: &Path) -> Result<Corpus, Error> {
    let nc = spec.days;
    let h = build_history_with(spec, nc, spec.change_share);
    let git_dir = out.join("git.git");
    let commits: Vec<String> = if spec.no_git {
        (0..nc)
            .map(|c| hex40(mix(spec.seed, 0xC0FF_EE00 + c as u64)))
            .collect()
    } else {
        // Each day's commit lands at 06:00 UTC.
        git::write_repo(
            &git_dir,
            git_commits(&h, |c| day_start(spec, c) + 6 * 3_600),
        )?
    };
    let sources = out.join("sources");
    write_sources(&h, &commits, &sources)?;
    let files = row_files(spec, &h);
    let last = nc - 1;
    let edges = if spec.no_edge_cases {
        Vec::new()
    } else {
        edge_rows(spec, &h, &files, &commits, &|m, c, commit| {
            session(spec, last, m, c, commit)
        })
    };
    let mut rng = Rng::new(spec.seed, 7);
    let mut days = Vec::with_capacity(nc);
    for d in 0..nc {
        let sessions = day_sessions(spec, &mut rng, &commits, d);
        let day_edges: &[(usize, Vec<u8>)] = if d == last { &edges } else { &[] };
        days.push(write_day(
            spec, out, &h, &files, &commits, &sessions, day_edges, d,
        )?);
    }
    let corpus = Corpus {
        root: out.to_path_buf(),
        sources,
        git: if spec.no_git { None } else { Some(git_dir) },
        inputs: days.iter().flat_map(|d| d.inputs.clone()).collect(),
        base_repo: BASE_REPO.to_string(),
        base_commit: commits[last].clone(),
        rows: days.iter().map(|d| d.rows).sum(),
        deleted_file: h.deleted.map(|f| h.gens[f].path.clone()),
        base_only_file: h.base_only.map(|f| h.gens[f].path.clone()),
        commits,
        days,
    };
    json::write_json(spec, &corpus)?;
    Ok(corpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_dates_count_back_from_date_to() {
        let spec = CorpusSpec {
            days: 90,
            ..Default::default()
        };
        assert_eq!(day_date(&spec, 89), "2024-09-30");
        assert_eq!(day_date(&spec, 0), "2024-07-03");
        assert!(is_day_dir("day-042"));
        assert!(!is_day_dir("day-42"));
        assert!(!is_day_dir("day-04x"));
    }

    #[test]
    fn a_day_builds_its_commit_and_only_earlier_ones() {
        let spec = CorpusSpec {
            days: 10,
            managers: 5,
            manager_commit_share: 0.5,
            ..Default::default()
        };
        let commits: Vec<String> = (0..10).map(|c| format!("c{c}")).collect();
        let mut rng = Rng::new(1, 7);
        for d in 0..10 {
            let s = day_sessions(&spec, &mut rng, &commits, d);
            assert_eq!(s.iter().filter(|s| s.commit == d).count(), 5, "day {d}");
            assert!(s.iter().all(|s| s.commit <= d && s.commit + 3 >= d));
        }
    }
}
