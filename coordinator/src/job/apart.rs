//! Before any work: the places a job writes are named, apart from each other and
//! apart from the source it reads ([`check_outputs_apart`]).

use super::partial::location_key;
use super::JobError;

/// Refuses, before any work, an output flag given an empty value, two outputs of
/// which one is, holds or lies within the other (`--out X --partial-out X`: the
/// partial's directory would be made where the result goes, or the result written
/// into the partial), and an output that lies within a local source root or holds it
/// (`dir:`, `git:`, `store:file://`: the merge would write over the texts it reads).
/// `outputs` are (flag, value) pairs, `{namespace}` filled; standard output (`-`,
/// `/dev/stdout`) and devices are streams, not places. `stores` (a fleet's `--store`)
/// are checked against the source only (a result may go under the store). Locations
/// are compared by their real paths (links resolved, dangling ones too).
pub fn check_outputs_apart(
    sources: &[&str],
    outputs: &[(&str, &str)],
    stores: &[(&str, &str)],
) -> Result<(), JobError> {
    let fail = |m: String| Err(JobError::Preflight(m));
    for (flag, dest) in outputs {
        if dest.trim().is_empty() {
            let stream = if *flag == "--partial-out" {
                ""
            } else {
                " or - for standard output"
            };
            return fail(format!("{flag} is empty: give a path, a store URL{stream}"));
        }
        if *flag == "--partial-out" && is_stream(dest) {
            return fail(format!(
                "--partial-out {dest}: a partial is a directory or a store prefix of files, not a stream"
            ));
        }
    }
    let places: Vec<(&str, &str, String)> = outputs
        .iter()
        .filter(|(_, d)| !is_stream(d))
        .map(|(f, d)| (*f, *d, location_key(d)))
        .collect();
    for (i, (fa, a, ka)) in places.iter().enumerate() {
        for (fb, b, kb) in &places[i + 1..] {
            if ka.starts_with(kb.as_str()) || kb.starts_with(ka.as_str()) {
                let how = if ka == kb { "is" } else { "overlaps" };
                return fail(format!(
                    "{fa} {} {how} {fb} {}: one would be written over or into the other; give each output its own place",
                    covmerge_storage::shown_url(a),
                    covmerge_storage::shown_url(b)
                ));
            }
        }
    }
    let stores: Vec<(&str, &str, String)> = stores
        .iter()
        .map(|(f, d)| (*f, *d, location_key(d)))
        .collect();
    // The store's job objects (specs, markers, parts) are the fleet's own: a result
    // written over another job's `job.json` left that job unreadable.
    for (flag, dest, key) in &places {
        for (store_flag, jobs, kj) in &stores {
            if key.starts_with(kj.as_str()) || kj.starts_with(key.as_str()) {
                return fail(format!(
                    "{flag} {} overlaps {} under {store_flag}, where the fleet keeps its jobs' objects; give an output outside it",
                    covmerge_storage::shown_url(dest),
                    covmerge_storage::shown_url(jobs)
                ));
            }
        }
    }
    let everything: Vec<(&str, &str, String)> = places.into_iter().chain(stores).collect();
    for spec in sources {
        for root in local_roots(spec) {
            let kr = location_key(&root);
            for (flag, dest, key) in &everything {
                if key.starts_with(&kr) || kr.starts_with(key.as_str()) {
                    return fail(format!(
                    "{flag} {} and the source {} overlap: the merge would write over or into the texts it reads; give an output outside the source",
                    covmerge_storage::shown_url(dest),
                    covmerge_storage::shown_url(spec)
                ));
                }
            }
        }
    }
    Ok(())
}

/// A descriptor (`-`, `/dev/stdout`, `/dev/fd/N`), or a local device or FIFO
/// (`/dev/null`): written to as a stream, not a place where files are made.
pub fn is_stream(dest: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    if covmerge_storage::local::stream_fd(std::path::Path::new(dest)).is_some() {
        return true;
    }
    let path = dest.strip_prefix("file://").unwrap_or(dest);
    !covmerge_storage::is_store_url(path)
        && std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_char_device() || t.is_fifo() || t.is_block_device() || t.is_socket()
        })
}

/// The local directories a source spec reads, `NS=SPEC` included; none for a store
/// elsewhere. `dir:ROOT`: the root and, where a commit's directory is a link, where
/// it leads (a layout of links to checkouts). `git:PATH`: its git directory, followed
/// from a linked worktree's `.git` file, and the common directory it names (the work
/// tree is never read), or PATH when bare. `store:file://…`: its directory.
fn local_roots(spec: &str) -> Vec<String> {
    let spec = match spec.split_once('=') {
        Some((ns, s)) if !ns.contains(':') => s,
        _ => spec,
    };
    if let Some(r) = spec.strip_prefix("dir:") {
        let mut roots = vec![r.to_owned()];
        if let Ok(entries) = std::fs::read_dir(r) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_symlink()) {
                    if let Ok(real) = std::fs::canonicalize(e.path()) {
                        roots.push(real.display().to_string());
                    }
                }
            }
        }
        return roots;
    }
    if let Some(r) = spec.strip_prefix("git:") {
        return git_dirs(std::path::Path::new(r));
    }
    spec.strip_prefix("store:")
        .filter(|u| u.starts_with("file://"))
        .map(str::to_owned)
        .into_iter()
        .collect()
}

/// The directories git reads for the repository at `path`.
fn git_dirs(path: &std::path::Path) -> Vec<String> {
    let dot_git = path.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else if let Ok(text) = std::fs::read_to_string(&dot_git) {
        // A linked worktree: `gitdir: DIR`.
        match text.trim().strip_prefix("gitdir:") {
            Some(d) => path.join(d.trim()),
            None => dot_git,
        }
    } else {
        return vec![path.display().to_string()];
    };
    let mut dirs = vec![git_dir.display().to_string()];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        dirs.push(git_dir.join(common.trim()).display().to_string());
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sources: &[&str], outputs: &[(&str, &str)]) -> String {
        match check_outputs_apart(sources, outputs, &[]) {
            Err(e) => e.to_string(),
            Ok(()) => String::new(),
        }
    }

    #[test]
    fn an_output_inside_a_dir_source_is_refused_also_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(src.join("c1")).unwrap();
        std::os::unix::fs::symlink(&src, t.path().join("link")).unwrap();
        let spec = format!("dir:{}", src.display());
        let inside = src.join("c1/a.c");
        let via_link = t.path().join("link/c1/a.c");
        let beside = t.path().join("out.jsonl");
        for out in [&inside, &via_link] {
            let e = refused(&[&spec], &[("--out", out.to_str().unwrap())]);
            assert!(e.contains("--out") && e.contains("source"), "{e}");
        }
        // A git: source is read from its .git: an output in the work tree is apart.
        let repo = t.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let git = format!("git:{}", repo.display());
        let in_tree = repo.join("cov.jsonl");
        assert_eq!(
            refused(&[&git], &[("--out", in_tree.to_str().unwrap())]),
            ""
        );
        let in_git = repo.join(".git/cov.jsonl");
        assert!(refused(&[&git], &[("--out", in_git.to_str().unwrap())]).contains("source"));
        let ns = format!("upstream={spec}");
        let e = refused(&[&ns], &[("--manifest", inside.to_str().unwrap())]);
        assert!(e.contains("--manifest"), "{e}");
        assert_eq!(
            refused(&[&spec], &[("--out", beside.to_str().unwrap())]),
            ""
        );
    }

    #[test]
    fn clashing_outputs_are_refused_before_any_work() {
        let t = tempfile::tempdir().unwrap();
        let x = t.path().join("x");
        let x = x.to_str().unwrap();
        let inner = format!("{x}/result.jsonl");
        for outs in [
            vec![("--out", x), ("--partial-out", x)],
            vec![("--manifest", x), ("--partial-out", x)],
            vec![("--partial-out", x), ("--out", inner.as_str())],
        ] {
            let e = refused(&[], &outs);
            assert!(e.contains(outs[0].0) && e.contains(outs[1].0), "{e}");
        }
        let e = refused(&[], &[("--out", "")]);
        assert!(e.contains("--out is empty"), "{e}");
        assert_eq!(refused(&[], &[("--out", "-"), ("--manifest", "-")]), "");
        let null = [("--out", "/dev/null"), ("--manifest", "/dev/null")];
        assert_eq!(refused(&["dir:/dev"], &null), "");
        let y = format!("{x}y");
        assert_eq!(refused(&[], &[("--out", x), ("--partial-out", &y)]), "");
    }

    /// `--out file:///store/jobs/<other job>/job.json` wrote the result over that
    /// job's spec (exit 0; the other job then could not be read), and `--out` onto the
    /// job's own parts was taken too.
    #[test]
    fn a_result_written_over_another_jobs_spec_in_the_store() {
        let t = tempfile::tempdir().unwrap();
        let store = format!("file://{}/", t.path().display());
        let jobs = format!("file://{}/jobs", t.path().display());
        let spec = format!("{jobs}/j6/job.json");
        let plain = t.path().join("jobs/j7/parts/00000.jsonl.gz");
        for (flag, out) in [
            ("--out", spec.as_str()),
            ("--manifest", plain.to_str().unwrap()),
            ("--partial-out", jobs.as_str()),
        ] {
            let e = check_outputs_apart(&[], &[(flag, out)], &[("--store", &jobs)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag) && e.contains("jobs' objects"), "{e}");
        }
        // Beside `jobs/` (a `store:` snapshot lives there) is the user's.
        let beside = format!("{store}results/r.jsonl.gz");
        check_outputs_apart(&[], &[("--out", &beside)], &[("--store", &jobs)]).unwrap();
        // A store whose name holds a `?` keeps its jobs under `pfx?x/jobs/`: an output
        // beside it was refused as the whole prefix.
        let out = [("--out", "s3://b/pfx/results/r.gz")];
        check_outputs_apart(&[], &out, &[("--store", "s3://b/pfx?region=x/jobs")]).unwrap();
        check_outputs_apart(&[], &out, &[("--store", "s3://b?region=x/jobs")]).unwrap();
    }
}
