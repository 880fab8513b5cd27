//! Memory bounded in every dimension of the input, not only rows. Each test
//! runs the binary on a shape that grows a dimension other than rows, under a data
//! limit (`RLIMIT_DATA`) the test sets on the child, so a regression fails here
//! instead of taking the machine. Each is named after what broke.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use covmerge_integration_tests::shapes::store_snapshot;
use covmerge_integration_tests::{bin, canon};

use crate::bad_input::HDR;

/// Runs `covmerge merge ARGS` with its data segment (heap and private writable
/// mappings) limited to `limit` bytes.
fn merge_limited(args: &[&str], limit: u64) -> Output {
    let mut c = Command::new(bin());
    c.arg("merge")
        .arg("--quiet")
        .args(args)
        .env("RUST_LOG", "warn");
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().expect("run covmerge")
}

/// A `dir:` source with `files` files of `lines` lines at commit `c1`.
fn source(dir: &Path, files: usize, lines: usize) -> String {
    let root = dir.join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (0..lines).map(|i| format!("int x{i};\n")).collect();
    for f in 0..files {
        std::fs::write(root.join(format!("f{f}.c")), &text).unwrap();
    }
    format!("dir:{}", dir.join("src").display())
}

/// Merges `input` onto `src` into `out` under a data limit of `limit` bytes, asserts
/// it succeeded, and returns the result in canonical form.
fn merge_within(src: &str, input: &Path, out: &Path, limit: u64) -> serde_json::Value {
    let o = merge_limited(
        &merge_args(src, input.to_str().unwrap(), out.to_str().unwrap()),
        limit,
    );
    assert!(
        o.status.success(),
        "under a {} MiB data limit: {}",
        limit >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    canon(out)
}

fn merge_args<'a>(src: &'a str, input: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "--source",
        src,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--input",
        input,
        "--out",
        out,
    ]
}

const LIMIT: u64 = 400 << 20;

/// One 100,000-line file; one manager hits every line and 6,000 managers hit only the
/// last one. Each manager's sums were a vector spanning every slot up to the last it
/// hit: 6,000 × 100,000 × 8 bytes, 4.7 GB peak (44 MB now).
#[test]
fn managers_hitting_the_last_line_of_a_long_file_took_lines_times_managers() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = 100_000;
    let managers = 6_000;
    let src = source(tmp.path(), 1, lines);
    let mut t = String::from(HDR);
    for l in 1..=lines {
        t.push_str(&format!("r,c1,f0.c,f,all,{l},1\n"));
    }
    for m in 0..managers {
        t.push_str(&format!("r,c1,f0.c,f,m{m:05},{lines},2\n"));
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let got = merge_within(&src, &input, &out, LIMIT);
    let f = &got["files"]["f0.c"]["managers"];
    assert_eq!(f["*"][lines.to_string()], 1 + 2 * managers as u64);
    assert_eq!(f["*"]["1"], 1);
    assert_eq!(f["all"][lines.to_string()], 1);
    assert_eq!(f["m00000"][lines.to_string()], 2);
    assert_eq!(f["m05999"].as_object().unwrap().len(), 1);
    assert_eq!(f.as_object().unwrap().len(), managers + 2);
}

/// 20,000 managers each hitting one line of each of 30 files of 200 lines: each
/// (file, manager) was a vector spanning the slots up to the one it hit, and each file
/// a vector over every manager of the shard (2.0 GB at 100,000 managers).
#[test]
fn many_managers_over_a_few_files_took_files_times_managers() {
    let tmp = tempfile::tempdir().unwrap();
    let (files, lines, managers) = (30, 200, 20_000);
    let src = source(tmp.path(), files, lines);
    let mut t = String::with_capacity(files * managers * 32);
    t.push_str(HDR);
    for m in 0..managers {
        for f in 0..files {
            let line = 1 + (m * 7 + f * 13) % lines;
            t.push_str(&format!("r,c1,f{f}.c,fn,m{m:05},{line},1\n"));
        }
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let got = merge_within(&src, &input, &out, LIMIT);
    for f in [0, files - 1] {
        let ms = &got["files"][format!("f{f}.c")]["managers"];
        assert_eq!(ms.as_object().unwrap().len(), managers + 1, "f{f}.c");
        let m = managers - 1;
        let line = 1 + (m * 7 + f * 13) % lines;
        assert_eq!(ms[format!("m{m:05}")][line.to_string()], 1);
    }
}

/// One row at the last line of each of 60 files of a million (empty) lines: each
/// file's line-to-slot table was a vector over every line up to the one hit, 4 bytes
/// per base line (240 MB here, more than the source itself). Now it spans a few lines
/// per line hit and the rest go to a map: the merge fits in 160 MiB.
#[test]
fn a_row_at_the_end_of_long_files_held_a_slot_per_base_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (files, lines) = (60, 1_000_000);
    let root = tmp.path().join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text = "\n".repeat(lines);
    let mut t = String::from(HDR);
    for f in 0..files {
        std::fs::write(root.join(format!("f{f}.c")), &text).unwrap();
        t.push_str(&format!("r,c1,f{f}.c,fn,m,{lines},3\n"));
    }
    let src = format!("dir:{}", tmp.path().join("src").display());
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let limit = 160 << 20;
    let got = merge_within(&src, &input, &out, limit);
    for f in [0, files - 1] {
        assert_eq!(
            got["files"][format!("f{f}.c")]["managers"]["m"][lines.to_string()],
            3
        );
    }
}

/// Runs `covmerge merge` on `src` and `input` with `extra` flags under a data limit
/// of `limit` bytes; returns the result in canonical form (asserting success).
pub(crate) fn merge_with(
    src: &str,
    input: &Path,
    out: &Path,
    extra: &[&str],
    limit: u64,
) -> serde_json::Value {
    let mut args = merge_args(src, input.to_str().unwrap(), out.to_str().unwrap());
    args.extend_from_slice(extra);
    let o = merge_limited(&args, limit);
    assert!(
        o.status.success(),
        "{extra:?} under a {} MiB data limit: {}",
        limit >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    canon(out)
}

/// 60 commits of a `store:` snapshot of 20,000 paths: each commit's index was held
/// whole, as a map of strings, for as long as the source was open (101 indexes of
/// 50,000 paths: 899 MB). Now the indexes share their paths and blob ids, and are
/// held within the store source's share of the budget.
#[test]
fn store_commit_indexes_were_each_held_whole_as_strings() {
    let tmp = tempfile::tempdir().unwrap();
    let commits = 60;
    let base = tmp.path().join("store");
    let (src, csv) = store_snapshot(&base, commits, 20_000);
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, csv).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    args[5] = "c0";
    let o = merge_limited(&args, STORE_LIMIT);
    assert!(
        o.status.success(),
        "under a {} MiB data limit: {}",
        STORE_LIMIT >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    let got = canon(&out);
    let files = got["files"].as_object().unwrap();
    // 4 rows per commit on paths that mostly differ; each projected onto c0.
    assert!(files.len() > 100, "{} files", files.len());
    // The last commit's first row: a path no other commit's row touches.
    let p = (commits - 1) * 7;
    let last = format!("drivers/sub{}/part{}/file_{p}.c", p % 50, p % 500);
    assert_eq!(
        got["files"][&last]["managers"]["m"][(1 + (commits - 1) % 20).to_string()],
        1,
        "{last}: the last commit's row, looked up in its index"
    );
}

/// The data limit of the `store:` test: the old merge of its 60 indexes needed more
/// (its peak RSS was 191 MB at 50).
const STORE_LIMIT: u64 = 160 << 20;

/// Base texts, line maps and chunks fetched ahead were fixed budgets (64 + 64 + 32 MiB
/// per shard merge) whatever the memory. With `--memory-budget` they are shares of it:
/// 400 base files of 120 KB merge within a data limit near the budget, with the same
/// result as without it.
#[test]
fn a_small_memory_budget_is_honoured_with_the_same_result() {
    let tmp = tempfile::tempdir().unwrap();
    let (files, lines) = (400, 3_000);
    let root = tmp.path().join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (0..lines)
        .map(|i| format!("{:<39}\n", format!("int x{i};")))
        .collect();
    let mut t = String::from(HDR);
    for f in 0..files {
        std::fs::write(root.join(format!("f{f}.c")), &text).unwrap();
        for l in 0..10 {
            t.push_str(&format!("r,c1,f{f}.c,fn,m,{},1\n", 1 + l * 300));
        }
    }
    let src = format!("dir:{}", tmp.path().join("src").display());
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let wide = merge_with(&src, &input, &tmp.path().join("a.jsonl.gz"), &[], LIMIT);
    let small = merge_with(
        &src,
        &input,
        &tmp.path().join("b.jsonl.gz"),
        &["--memory-budget", "24MiB", "--workers", "1"],
        BUDGET_LIMIT,
    );
    assert_eq!(wide, small);
    assert_eq!(small["files"].as_object().unwrap().len(), files);
}

/// The data limit of the budget test: 24 MiB of budget, plus the process's fixed
/// costs (code, thread stacks, the runtime), which no reservation counts.
const BUDGET_LIMIT: u64 = 96 << 20;

#[test]
fn a_memory_budget_too_small_for_its_task_loops_is_refused_naming_the_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 1, 10);
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, format!("{HDR}r,c1,f0.c,f,m,1,1\n")).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    let run = |extra: &[&str]| {
        let mut a = args.clone();
        a.extend_from_slice(extra);
        merge_limited(&a, LIMIT)
    };
    let o = run(&["--memory-budget", "1MiB"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--memory-budget") && err.contains("16 MiB"),
        "{err}"
    );
    let o = run(&["--memory-budget", "lots"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a byte size"));
    let o = run(&["--memory-budget", "16MiB", "--workers", "64"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--memory-budget") && err.contains("--workers"),
        "{err}"
    );
    assert!(!out.exists(), "refused before any work");
}

/// Two versions of a 3,000,000-line file (25 MB each), one line changed in the middle:
/// the diff held both texts, 16 bytes a line of slices (past 10^12 line pairs) or
/// imara-diff's interned lines and histogram, and a 4-byte map entry a line, whatever
/// the budget. Now a pair whose estimate is over a quarter of `--memory-budget` is
/// mapped by its common prefix and suffix, in one run each, counted in
/// `diffs_capped`; the rows at the base commit map by identity, exactly.
#[test]
fn two_versions_of_a_long_file_were_diffed_whatever_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = 3_000_000;
    // Line 1,500,001 (a row's line) differs.
    let version = |changed: usize| -> String {
        (0..lines)
            .map(|i| {
                if i == changed {
                    format!("y{i}\n")
                } else {
                    format!("x{i}\n")
                }
            })
            .collect()
    };
    let (text, changed) = (version(usize::MAX), version(1_500_000));
    for (commit, t) in [("c1", text), ("c2", changed)] {
        let d = tmp.path().join("src").join(commit);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("big.c"), t).unwrap();
    }
    let src = format!("dir:{}", tmp.path().join("src").display());
    let mut t = String::from(HDR);
    for l in (1..=lines).step_by(1_000) {
        t.push_str(&format!("r,c1,big.c,f,base,{l},1\n"));
        t.push_str(&format!("r,c2,big.c,f,other,{l},2\n"));
    }
    t.push_str(&format!("r,c1,big.c,f,base,{lines},5\n"));
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let man = tmp.path().join("manifest.json");
    let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    args.extend_from_slice(&["--manifest", man.to_str().unwrap(), "--workers", "1"]);
    let o = merge_limited(&args, LONG_FILE_LIMIT);
    assert!(
        o.status.success(),
        "under a {} MiB data limit: {}",
        LONG_FILE_LIMIT >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    let totals = &covmerge_integration_tests::manifest(&man)["totals"];
    assert_eq!(totals["diffs_capped"], 1, "{totals}");
    let got = canon(&out);
    let f = &got["files"]["big.c"]["managers"];
    // At the base commit: every row, exactly.
    let base = f["base"].as_object().unwrap();
    assert_eq!(base.len(), lines / 1_000 + 1);
    assert_eq!(f["base"]["1"], 1);
    assert_eq!(f["base"][lines.to_string()], 5);
    assert_eq!(f["base"]["1500001"], 1);
    // The other version: its common prefix and suffix map, the line changed (all
    // that lies between them here) does not.
    let other = f["other"].as_object().unwrap();
    assert_eq!(other.len(), lines / 1_000 - 1);
    assert_eq!(totals["rows_lost"], 1);
    assert_eq!(f["other"]["1"], 2);
    assert_eq!(f["other"]["1499001"], 2);
    assert_eq!(f["other"].get("1500001"), None);
    assert_eq!(f["other"]["1501001"], 2);
    assert_eq!(f["other"]["2999001"], 2);
}

/// The data limit of the long-file test: the texts (25 MB each, held by the source's
/// cache and the merge) and the process's fixed costs; the exact diff of the pair
/// (about 400 MB) or the vectors of the capped one (96 MB of line slices, 12 MB of
/// map) do not fit.
const LONG_FILE_LIMIT: u64 = 192 << 20;

/// 600,000 distinct paths in one shard (one row each; one path in 1,000 exists at the
/// base). The shard's merge held every path it read, interned, with a tag or an
/// accumulator each, whatever the budget: 230 MB peak at `--shards 1`, over this
/// test's data limit. Now its tables stay within the merge's share of the budget and
/// the shard is merged in passes over ranges of its paths: the same result and the
/// same counts as sixteen shards that each fit.
#[test]
fn distinct_paths_of_one_shard_were_all_held_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (paths, every) = (600_000, 1_000);
    let src = source(tmp.path(), 0, 0);
    let root = tmp.path().join("src/c1");
    let mut t = String::with_capacity(paths * 32);
    t.push_str(HDR);
    for p in 0..paths {
        let path = format!("d{}/p{p}.c", p % 997);
        if p % every == 0 {
            std::fs::create_dir_all(root.join(format!("d{}", p % 997))).unwrap();
            std::fs::write(root.join(&path), "int a;\nint b;\n").unwrap();
        }
        t.push_str(&format!(
            "r,c1,{path},f{},m{},{},1\n",
            p % 3,
            p % 2,
            1 + p % 2
        ));
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let run = |name: &str, shards: &str, limit: u64| {
        let (out, man) = (
            tmp.path().join(name),
            tmp.path().join(format!("{name}.json")),
        );
        let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
        args.extend([
            "--shards",
            shards,
            "--memory-budget",
            "64MiB",
            "--workers",
            "1",
        ]);
        args.extend(["--manifest", man.to_str().unwrap()]);
        let o = merge_limited(&args, limit);
        assert!(
            o.status.success(),
            "--shards {shards} under a {} MiB data limit: {}",
            limit >> 20,
            String::from_utf8_lossy(&o.stderr)
        );
        (
            canon(&out),
            covmerge_integration_tests::manifest(&man)["totals"].clone(),
        )
    };
    let (one, one_totals) = run("one.jsonl.gz", "1", PATHS_LIMIT);
    let (many, many_totals) = run("many.jsonl.gz", "16", LIMIT);
    assert_eq!(one, many);
    assert_eq!(one_totals, many_totals);
    assert_eq!(one["files"].as_object().unwrap().len(), paths / every);
    assert_eq!(one_totals["files_deleted"], (paths - paths / every) as u64);
    assert_eq!(one_totals["rows_deleted"], (paths - paths / every) as u64);
    let last = (paths / every - 1) * every;
    let f = &one["files"][format!("d{}/p{last}.c", last % 997)]["managers"];
    assert_eq!(f[format!("m{}", last % 2)][(1 + last % 2).to_string()], 1);
}

/// The data limit of the distinct-paths test: main's merge of its one shard peaked at
/// 230 MB (RSS) and failed under it; within a 64 MiB budget it takes 111 MB.
const PATHS_LIMIT: u64 = 160 << 20;

/// 600,000 distinct function names on one line of one file. Every name of a line is
/// counted to pick the most frequent (contract §3.5), and one file is never cut into
/// ranges of paths: a path over the tables' share alone was merged without a limit,
/// holding every name at once (main's merge peaked at 177 MB and failed under a
/// 144 MiB data limit). Now its names are counted in passes, each over the names of one hash
/// bucket, keeping the best name of each line: the same result.
#[test]
fn function_names_of_one_line_were_all_held_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let names = 600_000;
    let src = source(tmp.path(), 1, 10);
    let mut t = String::with_capacity(names * 48);
    t.push_str(HDR);
    for i in 0..names {
        t.push_str(&format!(
            "r,c1,f0.c,function_name_number_{i},m{},5,1\n",
            i % 3
        ));
    }
    // The winner: the one name of two rows; and a tie of two rows on line 6, won by
    // the smaller name.
    for name in [
        "function_name_number_77",
        "zz_tied",
        "aa_tied",
        "zz_tied",
        "aa_tied",
    ] {
        let line = if name.ends_with("tied") { 6 } else { 5 };
        t.push_str(&format!("r,c1,f0.c,{name},m0,{line},1\n"));
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    args.extend(["--memory-budget", "64MiB", "--workers", "1"]);
    let o = merge_limited(&args, NAMES_LIMIT);
    assert!(
        o.status.success(),
        "under a {} MiB data limit: {}",
        NAMES_LIMIT >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    let got = canon(&out);
    let f = &got["files"]["f0.c"];
    assert_eq!(f["managers"]["*"]["5"], names as u64 + 1, "{f}");
    assert_eq!(
        f["funcs"]["function_name_number_77"],
        serde_json::json!([5]),
        "{f}"
    );
    assert_eq!(f["funcs"]["aa_tied"], serde_json::json!([6]), "{f}");
    assert_eq!(f["funcs"].as_object().unwrap().len(), 2, "{f}");
}

/// The data limit of the function-names test: main's merge held every name at once
/// (177 MB peak RSS, failing under 144 MiB of data); within a 64 MiB budget the names
/// take passes (86 MB, passing under 96 MiB).
const NAMES_LIMIT: u64 = 128 << 20;

/// One file of 100,000 lines, each hit by every one of 64 managers: a file whose
/// accumulator outgrew the tables' share was merged alone, without a limit, holding
/// every (manager, line) pair and its whole gzipped part in memory (500,000 lines × 40
/// managers: 368 MB). Now its per-manager sums spill in sorted runs to a temporary
/// file and its part goes to one past 8 MiB; the result is the same.
#[test]
fn lines_times_managers_of_one_file_were_all_held_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (lines, managers) = (100_000usize, 64usize);
    let src = source(tmp.path(), 1, lines);
    let input = tmp.path().join("in.csv.gz");
    {
        use std::io::Write;
        let f = std::fs::File::create(&input).unwrap();
        let mut gz =
            flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::fast());
        gz.write_all(HDR.as_bytes()).unwrap();
        // Managers interleaved line by line: no manager's rows come together.
        let mut row = String::new();
        for l in 1..=lines {
            for m in 0..managers {
                row.clear();
                row.push_str(&format!("r,c1,f0.c,fn,mgr-{m},{l},{}\n", 1 + (l + m) % 5));
                gz.write_all(row.as_bytes()).unwrap();
            }
        }
        gz.finish().unwrap();
    }
    let out = tmp.path().join("out.jsonl.gz");
    let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    args.extend(["--memory-budget", "24MiB", "--workers", "1"]);
    let o = merge_limited(&args, BUDGET_LIMIT);
    assert!(
        o.status.success(),
        "under a {} MiB data limit: {}",
        BUDGET_LIMIT >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    // Record by record: the whole result as a JSON value would take gigabytes here.
    use std::io::BufRead;
    let r = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(
        std::fs::File::open(&out).unwrap(),
    ));
    let mut seen = Vec::new();
    for line in r.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let Some(mcr) = v["MCR"].as_object() else {
            continue;
        };
        let name = mcr["Manager"].as_str().unwrap().to_string();
        let data = &mcr["FileData"];
        let (ls, hs) = (
            data["LinesInstrumented"].as_array().unwrap(),
            data["HitCounts"].as_array().unwrap(),
        );
        assert_eq!(ls.len(), lines, "{name}: every line");
        for (i, (l, h)) in ls.iter().zip(hs).enumerate() {
            let l = l.as_u64().unwrap() as usize;
            assert_eq!(l, i + 1, "{name}: lines in order");
            let want: u64 = match name.strip_prefix("mgr-") {
                Some(m) => 1 + (l + m.parse::<usize>().unwrap()) as u64 % 5,
                None => (0..managers).map(|m| 1 + (l + m) as u64 % 5).sum(),
            };
            assert_eq!(h.as_u64().unwrap(), want, "{name} line {l}");
        }
        seen.push(name);
    }
    let mut want: Vec<String> = (0..managers).map(|m| format!("mgr-{m}")).collect();
    want.sort();
    want.insert(0, "*".into());
    assert_eq!(seen, want, "`*`, then every manager by name");
}

/// Blocks of a Go text profile spanning `GO_SPAN` lines each, one per file: each block
/// was expanded to a row per line, every row of the input held at once as a line map
/// and a vector of rows (each with its own copy of the path) outside the memory
/// budget: 20 blocks of 2^20 lines (882 bytes of profile) took 3.1 GB. The lines past
/// the base files' ends are lost and counted, as before.
#[test]
fn a_go_text_block_of_a_million_lines_was_expanded_outside_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let (blocks, span) = (GO_BLOCKS, GO_SPAN);
    let root = tmp.path().join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let mut profile = String::from("mode: count\n");
    for b in 0..blocks {
        std::fs::write(
            root.join(format!("f{b:02}.go")),
            "package p\n\nfunc F() {\n}\n",
        )
        .unwrap();
        profile.push_str(&format!(
            "example.com/m/f{b:02}.go:1.1,{span}.1 1 {}\n",
            b + 1
        ));
    }
    let input = tmp.path().join("p.out");
    std::fs::write(&input, &profile).unwrap();
    let src = format!("dir:{}", tmp.path().join("src").display());
    let out = tmp.path().join("out.jsonl.gz");
    let man = tmp.path().join("manifest.json");
    let mut args = merge_args(&src, input.to_str().unwrap(), out.to_str().unwrap());
    args.extend([
        "--go-module",
        "example.com/m=.",
        "--manifest",
        man.to_str().unwrap(),
    ]);
    let o = merge_limited(&args, GO_LIMIT);
    assert!(
        o.status.success(),
        "{} bytes of profile under a {} MiB data limit: {}",
        profile.len(),
        GO_LIMIT >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    let got = canon(&out);
    for b in 0..blocks {
        let f = &got["files"][format!("f{b:02}.go")]["managers"]["*"];
        let h = b as u64 + 1;
        assert_eq!(
            f,
            &serde_json::json!({"1": h, "2": h, "3": h, "4": h}),
            "f{b:02}.go"
        );
    }
    let t = &covmerge_integration_tests::manifest(&man)["totals"];
    let rows = (blocks * span) as u64;
    assert_eq!(t["rows_in"], rows);
    assert_eq!(t["rows_merged"], 4 * blocks as u64);
    assert_eq!(t["rows_lost"], rows - 4 * blocks as u64);
}

/// A job of thousands of shards grew ~55 KB a shard task (4,096 shards of one row:
/// 274 MB, 65,536: 3.6 GB, past the default budget): glibc kept each task's freed
/// deflate state and output buffer in its heap. Freed memory past an eighth of the
/// budget is given back as a task's thread ends; the peak no longer grows with the
/// shards.
#[test]
fn a_job_of_thousands_of_shards_grew_a_heap_of_freed_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path(), 1, 3);
    let input = dir.path().join("in.csv");
    std::fs::write(&input, format!("{HDR}r,c1,f0.c,f,m,1,5\n")).unwrap();
    // The process's own high-water mark (`VmHWM`, of its image since exec: a forked
    // child's peak RSS would count this test process's pages), read until it exits.
    let peak = |shards: &str| {
        let out = dir.path().join(format!("out-{shards}.jsonl.gz"));
        let mut child = Command::new(bin())
            .arg("merge")
            .arg("--quiet")
            .args(merge_args(
                &src,
                input.to_str().unwrap(),
                out.to_str().unwrap(),
            ))
            .args(["--shards", shards])
            // Freed memory is kept up to an eighth of the budget (8 MiB) between
            // tasks, trimmed past it.
            .args(["--memory-budget", "64MiB"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let status = format!("/proc/{}/status", child.id());
        let mut hwm_kb = 0u64;
        while child.try_wait().unwrap().is_none() {
            let text = std::fs::read_to_string(&status).unwrap_or_default();
            if let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                hwm_kb = hwm_kb.max(kb);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(out.exists(), "--shards {shards}: no result");
        hwm_kb
    };
    let (small, large) = (peak("64"), peak("1536"));
    // Before: ~+80 MB from 64 to 1,536 shards (release); now a few MB.
    assert!(
        large < small + 24 * 1024,
        "peak RSS {small} KB at 64 shards, {large} KB at 1,536"
    );
}

/// The Go profile test's blocks, lines a block and data limit.
const GO_BLOCKS: usize = 20;
const GO_SPAN: usize = 1 << 20;
const GO_LIMIT: u64 = 400 << 20;

/// 96 function names of ~1 MB each (under the 1 MiB row cap), one a line of one file, with `--partial-out` at
/// `--memory-budget 16MiB`: the partial's builder wrote a run per row (each name past
/// its limit) and rolled the 96 runs up at once, a row group of a name held per run
/// (218 MB peak RSS); a merge of that partial interned every name before its split
/// looked at its budget, every 4,096 rows (269 MB). A plain merge holds the names once
/// (122 MB). Now the runs are rolled up in levels within the task's share and the
/// split checks its budget when its strings grow: 134 and 117 MB, passing under 192
/// MiB of data. The merge's result is the rows' (the partial is written beside it).
#[test]
fn function_names_of_megabytes_were_held_outside_the_partials_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let names = 96;
    let src = source(tmp.path(), 1, names + 4);
    let mut t = String::from(HDR);
    for i in 0..names {
        let name = format!("fn{i}_{}", "x".repeat(1_000_000));
        t.push_str(&format!("r,c1,f0.c,{name},m,{},1\n", i + 1));
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let small = ["--memory-budget", "16MiB", "--workers", "1"];
    let partial = tmp.path().join("partial");
    let written = tmp.path().join("written.jsonl.gz");
    let mut extra = small.to_vec();
    extra.extend(["--partial-out", partial.to_str().unwrap()]);
    let want = merge_with(&src, &input, &written, &extra, PARTIAL_NAMES_LIMIT);
    let f = &want["files"]["f0.c"];
    assert_eq!(
        f["funcs"].as_object().unwrap().len(),
        names,
        "{}",
        f["managers"]
    );
    assert_eq!(
        f["funcs"][format!("fn7_{}", "x".repeat(1_000_000))],
        serde_json::json!([8])
    );
    let read = tmp.path().join("read.jsonl.gz");
    let got = merge_with(&src, &partial, &read, &small, PARTIAL_NAMES_LIMIT);
    assert!(
        got == want,
        "the merge of the partial differs from the rows'"
    );
}

/// The data limit of the test above: ~100 MB of names and the merge's own, and the
/// stacks of the blocking threads a loaded machine starts (2 MiB each; under 160 MiB
/// the test failed on CI's loaded machine, not alone); main's 218 / 269 MB do not fit.
const PARTIAL_NAMES_LIMIT: u64 = 192 << 20;
