//! A shard merged in passes over ranges of its paths gives the one-pass part, byte
//! for byte, with the same counts.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use covmerge_proto::group::Group;

/// A partial's entries against their raw rows.
mod partial;

/// The shard's partial fed by the merge's own read, in one pass or many.
mod feed;

use super::{merge_shard_with_prefix, HeldBudget, MergeError, MergedPart, ProjectionCache};
use crate::source::{FileVersion, Source, SourceError};
use crate::split::{split_input, Flush, SplitError, SplitSettings};

/// Versions in memory, by (commit, path).
struct MemSource(HashMap<(Vec<u8>, Vec<u8>), Arc<FileVersion>>);

impl Source for MemSource {
    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        Ok(self.0.get(&(commit.to_vec(), path.to_vec())).cloned())
    }

    fn has_commit(&self, _: &[u8]) -> Result<bool, SourceError> {
        Ok(true)
    }

    fn tree_id(&self, _: &[u8]) -> Result<Option<String>, SourceError> {
        Ok(Some("memory".into()))
    }
}

/// The spill chunks of one shard of `csv` (rows after the header), split within a
/// small budget so that they are many.
fn chunks_of(csv: &str) -> Vec<Bytes> {
    let text = format!("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n{csv}");
    let got = Mutex::new(Vec::new());
    let emit = |f: Flush| -> Result<(), SplitError> {
        got.lock().unwrap().push(Bytes::from(f.bytes));
        Ok(())
    };
    let settings = SplitSettings {
        shards: 1,
        max_bad_rows: 0,
        memory_budget: 32 << 10,
        threads: 1,
        ..Default::default()
    };
    let o = split_input("in.csv", text.as_bytes(), settings, &emit).unwrap();
    // A bad row would leave the merge without it, unseen.
    assert_eq!(o.counts.rows_bad, 0, "{:?}", o.bad_rows);
    got.into_inner().unwrap()
}

fn merge(
    chunks: &[Bytes],
    src: &MemSource,
    prefix: &str,
    groups: &[Group],
    tables: usize,
) -> MergedPart {
    let held = HeldBudget {
        tables,
        ..HeldBudget::default()
    };
    try_merge(chunks, src, prefix, groups, held).unwrap()
}

/// [`merge`] within `held`, its error returned.
fn try_merge(
    chunks: &[Bytes],
    src: &MemSource,
    prefix: &str,
    groups: &[Group],
    held: HeldBudget,
) -> Result<MergedPart, MergeError> {
    let cache = ProjectionCache::new(8 << 20, u64::MAX);
    let iter = || {
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| Ok::<_, MergeError>((format!("chunk {i}"), c.clone())))
    };
    merge_shard_with_prefix(iter, b"c1", src, &cache, prefix.as_bytes(), groups, held)
}

/// Asserts that merging within `small` takes passes and gives the one-pass part.
fn assert_same_in_passes(
    chunks: &[Bytes],
    src: &MemSource,
    prefix: &str,
    groups: &[Group],
    small: usize,
) -> u32 {
    let one = merge(chunks, src, prefix, groups, usize::MAX);
    assert_eq!(one.passes, 1);
    let many = merge(chunks, src, prefix, groups, small);
    assert!(many.passes > 2, "{} passes", many.passes);
    assert_eq!(many.counts, one.counts);
    assert_eq!(many.records, one.records);
    assert!(many.gz == one.gz, "the parts differ");
    assert_eq!(many.base_lines, one.base_lines);
    many.passes
}

#[test]
fn many_paths_merged_in_passes_give_the_one_pass_part() {
    let text: String = (0..40).map(|i| format!("int x{i};\n")).collect();
    let mut files = HashMap::new();
    let mut csv = String::new();
    // Paths in an order that is not theirs: live ones (some with a name on every
    // line, several names on a line), deleted ones, and ones outside the prefix.
    for i in 0..20_000usize {
        let p = (i * 7_919) % 20_000;
        let path = match p % 5 {
            0 => format!("gone/f{p}.c"),
            1 => format!("other/f{p}.c"),
            _ => format!("src/d{}/f{p}.c", p % 13),
        };
        if p % 5 >= 2 {
            files.insert(
                (b"c1".to_vec(), path.clone().into_bytes()),
                Arc::new(FileVersion::new(text.clone().into_bytes())),
            );
        }
        for r in 0..(1 + p % 4) {
            let line = 1 + (p + r * 11) % 45;
            let func = ["", "f", "g", "h"][(p + r) % 4];
            writeln!(csv, "r,c1,{path},{func},m{},{line},{}", (p + r) % 3, r + 1).unwrap();
        }
    }
    let src = MemSource(files);
    let chunks = chunks_of(&csv);
    assert!(chunks.len() > 3, "{} chunks", chunks.len());
    let groups = [Group::parse("all=m*").unwrap()];
    let passes = assert_same_in_passes(&chunks, &src, "src/", &groups, 1 << 20);
    // Each live file of the part is reported, in the part's order, with its base's 40
    // lines (rows on lines 41..45 are lost): what the publish gate checks lines by.
    let part = merge(&chunks, &src, "src/", &groups, usize::MAX);
    assert_eq!(part.base_lines.len() as u64, part.counts.files);
    assert_eq!(part.counts.files, 12_000);
    assert!(part
        .base_lines
        .iter()
        .all(|(p, n)| p.starts_with("src/") && *n == 40));
    assert!(part.base_lines.windows(2).all(|w| w[0].0 < w[1].0));
    // 20,000 files of a few hundred bytes each: a few passes of about the limit each
    // (and a few started again), not one per chunk or per file.
    assert!(passes < 30, "{passes} passes");
    assert_same_in_passes(&chunks, &src, "", &[], 256 << 10);
}

#[test]
fn a_path_that_alone_outgrows_the_tables_is_merged_alone_between_the_others() {
    let long: String = (0..30_000).map(|i| format!("int y{i};\n")).collect();
    let short = "int a;\nint b;\n";
    let mut files = HashMap::new();
    let mut csv = String::new();
    for (path, text) in [("a/x.c", short), ("m/big.c", &long), ("z/y.c", short)] {
        files.insert(
            (b"c1".to_vec(), path.as_bytes().to_vec()),
            Arc::new(FileVersion::new(text.as_bytes().to_vec())),
        );
    }
    // The big file first, then the small ones; and again with a small one first.
    // Either way some pass finds the big file alone over the limit: it starts again
    // in three ranges, or goes on for it alone.
    for first in ["m/big.c", "a/x.c"] {
        let mut rows = String::new();
        if first != "m/big.c" {
            writeln!(rows, "r,c1,{first},f,m,1,1").unwrap();
        }
        for l in 1..=30_000 {
            writeln!(rows, "r,c1,m/big.c,fn{},m{},{l},{l}", l % 5, l % 3).unwrap();
        }
        for p in ["a/x.c", "z/y.c"] {
            writeln!(rows, "r,c1,{p},f,m,2,1").unwrap();
        }
        csv.clear();
        csv.push_str(&rows);
        let src = MemSource(files.clone());
        let chunks = chunks_of(&csv);
        let one = merge(&chunks, &src, "", &[], usize::MAX);
        let many = merge(&chunks, &src, "", &[], 64 << 10);
        assert!(many.passes >= 2, "{first}: {} passes", many.passes);
        assert_eq!(many.counts, one.counts, "{first}");
        assert!(many.gz == one.gz, "{first}: the parts differ");
        assert_eq!(one.counts.files, 3);
    }
}

/// Rows of `paths` paths of a few lines each, in path order or not.
fn paths_csv(paths: usize, sorted: bool) -> String {
    let mut csv = String::new();
    for i in 0..paths {
        // A permutation of the paths when not sorted.
        let p = if sorted { i } else { (i * 7_919) % paths };
        let path = format!("src/d{:03}/f{p:06}.c", p / 500);
        for r in 0..(1 + p % 3) {
            writeln!(csv, "r,c1,{path},f{},m{},{},1", r % 2, p % 2, 1 + r * 3).unwrap();
        }
    }
    csv
}

/// With input sorted by path, a pass that outgrew the share had seen only the first
/// paths of its range: it cut them into ranges a fraction of a share each, and the
/// paths it had not seen into one range that outgrew the share again, cut again the
/// same way (687 passes for 200,000 paths at a 16 MiB budget, 25 times the time of
/// one pass). Now ranges that held less than estimated are joined: sorted input
/// takes about as many passes as shuffled.
#[test]
fn paths_sorted_by_path_took_a_pass_per_fraction_of_a_share() {
    let paths = 24_000;
    let text = "int a;\nint b;\nint c;\nint d;\nint e;\nint f;\nint g;\n";
    let mut files = HashMap::new();
    for p in 0..paths {
        files.insert(
            (
                b"c1".to_vec(),
                format!("src/d{:03}/f{p:06}.c", p / 500).into_bytes(),
            ),
            Arc::new(FileVersion::new(text.as_bytes().to_vec())),
        );
    }
    let src = MemSource(files);
    let shuffled = chunks_of(&paths_csv(paths, false));
    let sorted = chunks_of(&paths_csv(paths, true));
    let small = 512 << 10;
    let shuffled_passes = assert_same_in_passes(&shuffled, &src, "", &[], small);
    let sorted_passes = assert_same_in_passes(&sorted, &src, "", &[], small);
    // The same part either way.
    let (a, b) = (
        merge(&sorted, &src, "", &[], usize::MAX),
        merge(&shuffled, &src, "", &[], usize::MAX),
    );
    assert!(a.gz == b.gz, "sorted and shuffled differ");
    assert!(
        sorted_passes <= shuffled_passes * 2,
        "{sorted_passes} passes sorted, {shuffled_passes} shuffled"
    );
}

/// Every distinct function name of a line was held at once, to count them (contract
/// §3.5): one file is never cut into ranges, and a path over the share alone was
/// merged without a limit. Now its names are counted in passes, each over the names
/// of one hash bucket, and each line gets the best of the passes' bests: the same
/// part, ties across buckets included.
#[test]
fn function_names_of_one_line_were_all_held_at_once() {
    let text: String = (0..60).map(|i| format!("int x{i};\n")).collect();
    let mut files = HashMap::new();
    for path in ["a.c", "m.c", "z.c"] {
        files.insert(
            (b"c1".to_vec(), path.as_bytes().to_vec()),
            Arc::new(FileVersion::new(text.clone().into_bytes())),
        );
    }
    let src = MemSource(files);
    let mut csv = String::new();
    writeln!(csv, "r,c1,a.c,f,m,1,1").unwrap();
    // Per line of m.c: two names tied at 3 rows (in buckets that differ for some
    // lines whatever the number of buckets), and 400 distinct names of one row each;
    // on every 7th line only these (a tie of 400), on every 11th also rows without a
    // name.
    let ties: Vec<(String, String)> = (1..=50)
        .map(|l| (format!("tie_b_{l}"), format!("tie_a_{l}_x")))
        .collect();
    for round in 0..3 {
        for (l, (a, b)) in ties.iter().enumerate() {
            let l = l + 1;
            if l % 11 == 0 {
                writeln!(csv, "r,c1,m.c,,m{round},{l},1").unwrap();
                continue;
            }
            if l % 7 == 0 {
                continue;
            }
            writeln!(csv, "r,c1,m.c,{a},m{round},{l},1").unwrap();
            writeln!(csv, "r,c1,m.c,{b},m{round},{l},2").unwrap();
        }
    }
    for i in 0..20_000 {
        let l = 1 + i % 50;
        writeln!(csv, "r,c1,m.c,a_name_of_one_row_number_{i},m,{l},1").unwrap();
    }
    writeln!(csv, "r,c1,z.c,g,m,2,1").unwrap();
    for k in 2..=64 {
        let split = ties.iter().filter(|(a, b)| {
            super::pass::name_bucket(a.as_bytes(), k) != super::pass::name_bucket(b.as_bytes(), k)
        });
        assert!(split.count() > 0, "no tie across buckets of {k}");
    }
    let chunks = chunks_of(&csv);
    let one = merge(&chunks, &src, "", &[], usize::MAX);
    // A share too small for m.c's names: m.c is merged alone, in name passes.
    let many = merge(&chunks, &src, "", &[], 256 << 10);
    assert!(many.passes > 4, "{} passes", many.passes);
    assert_eq!(many.counts, one.counts);
    assert_eq!(many.records, one.records);
    assert!(many.gz == one.gz, "the parts differ");
    let text = {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::GzDecoder::new(&one.gz.to_vec().unwrap()[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    // The smaller of two names tied on a line.
    assert!(
        text.contains("tie_a_1_x"),
        "{}",
        &text[..text.len().min(2_000)]
    );
}

/// A file of many lines × many managers merged alone held every (manager, line) pair
/// at once; now its sums spill in runs past half the tables' share, and the part is
/// the same byte for byte, groups included (their sums read the spilled runs again).
#[test]
fn lines_times_managers_of_one_file_were_all_held_at_once() {
    let lines = 6_000usize;
    let text: String = (0..lines).map(|i| format!("int y{i};\n")).collect();
    let mut files = HashMap::new();
    for path in ["a/x.c", "m/big.c"] {
        files.insert(
            (b"c1".to_vec(), path.as_bytes().to_vec()),
            Arc::new(FileVersion::new(text.as_bytes().to_vec())),
        );
    }
    let mut csv = String::new();
    writeln!(csv, "r,c1,a/x.c,f,m0,1,1").unwrap();
    // Every manager on every line, interleaved, some lines twice and some not at all
    // for some managers.
    for round in 0..2 {
        for l in 1..=lines {
            for m in 0..24 {
                if (l + m) % 7 == 0 || (round == 1 && l % 3 != 0) {
                    continue;
                }
                writeln!(csv, "r,c1,m/big.c,fn{},mgr{m},{l},{}", l % 3, (l * m) % 4).unwrap();
            }
        }
    }
    let src = MemSource(files);
    let chunks = chunks_of(&csv);
    let groups = [
        Group::parse("one=mgr?").unwrap(),
        Group::parse("all=mgr*").unwrap(),
    ];
    let one = merge(&chunks, &src, "", &groups, usize::MAX);
    let many = merge(&chunks, &src, "", &groups, 64 << 10);
    assert!(many.passes >= 2, "{} passes", many.passes);
    assert_eq!(one.sums_spilled, 0);
    assert!(many.sums_spilled >= 4, "{} runs spilled", many.sums_spilled);
    assert_eq!(many.counts, one.counts);
    assert_eq!(many.records, one.records);
    assert!(many.gz == one.gz, "the parts differ");
    assert_eq!(one.counts.files, 2);
}

/// 800 distinct 900 KB manager names on one file took 847 MB: a file merged alone
/// holds its managers' names at once. Past `manager_names` the merge fails naming the
/// file and the flag, before memory runs out; under it the same shard merges.
#[test]
fn long_distinct_manager_names_of_one_file_were_held_without_a_bound() {
    let text: String = (0..20).map(|i| format!("int y{i};\n")).collect();
    let mut files = HashMap::new();
    files.insert(
        (b"c1".to_vec(), b"big.c".to_vec()),
        Arc::new(FileVersion::new(text.into_bytes())),
    );
    let mut csv = String::new();
    for m in 0..40 {
        // Names near the 1 KiB cap on a manager name (longer ones are bad rows).
        let name = format!("m{m}-{}", "x".repeat(1_000));
        writeln!(csv, "r,c1,big.c,f,{name},{},1", 1 + m % 20).unwrap();
    }
    let src = MemSource(files);
    let chunks = chunks_of(&csv);
    let run = |manager_names: usize| {
        let held = HeldBudget {
            tables: 64 << 10,
            manager_names,
            ..HeldBudget::default()
        };
        try_merge(&chunks, &src, "", &[], held)
    };
    let err = run(16 << 10).expect_err("over the cap");
    let msg = err.to_string();
    assert!(
        msg.contains("big.c")
            && msg.contains("--memory-budget")
            && msg.contains("distinct managers"),
        "{msg}"
    );
    let part = run(1 << 20).expect("under the cap");
    assert_eq!(part.counts.files, 1);
    assert_eq!(part.records, 1 + 40 + 1);
}
