//! A shard merged in passes over ranges of its paths gives the one-pass part, byte
//! for byte, with the same counts.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use covmerge_proto::group::Group;

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
    };
    split_input("in.csv", text.as_bytes(), settings, &emit).unwrap();
    got.into_inner().unwrap()
}

fn merge(
    chunks: &[Bytes],
    src: &MemSource,
    prefix: &str,
    groups: &[Group],
    tables: usize,
) -> MergedPart {
    let cache = ProjectionCache::new(8 << 20, u64::MAX);
    let iter = || {
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| Ok::<_, MergeError>((format!("chunk {i}"), c.clone())))
    };
    let held = HeldBudget {
        tables,
        ..HeldBudget::default()
    };
    merge_shard_with_prefix(iter, b"c1", src, &cache, prefix.as_bytes(), groups, held).unwrap()
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
