//! The shard's partial is built from the merge's own read of its chunks
//! ([`merge_shard_feeding`]): whatever passes the merge makes (ranges of paths cut, a
//! path merged alone, its names counted in passes), the builder sees every block once,
//! and the partial's files are those of one pass, byte for byte.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::{chunks_of, MemSource};
use crate::merge::{merge_shard_feeding, BlockSink, HeldBudget, MergeError, MergedPart};
use crate::merge::{ProjectionCache, ShardJob};
use crate::partial::{PartialShardSpec, ShardFeed};
use crate::source::FileVersion;
use crate::spill::{for_each_block, Block};

/// Merges `chunks` within `tables`, feeding `sink`.
fn merge_feeding(
    chunks: &[Bytes],
    src: &MemSource,
    tables: usize,
    sink: &mut dyn BlockSink,
) -> MergedPart {
    let cache = ProjectionCache::new(8 << 20, u64::MAX);
    let iter = || {
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| Ok::<_, MergeError>((format!("chunk {i}"), c.clone())))
    };
    let job = ShardJob {
        base_commit: b"c1",
        source: src,
        cache: &cache,
        file_prefix: b"src/",
        groups: &[],
        held: HeldBudget {
            tables,
            ..HeldBudget::default()
        },
    };
    merge_shard_feeding(iter, &job, Some(sink)).unwrap()
}

/// The files of a directory, by name, with their bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// The shard's partial written by a feed of the merge within `tables` (and its
/// part), in a new directory under `tmp`.
fn partial_in_passes(
    chunks: &[Bytes],
    src: &MemSource,
    tables: usize,
    tmp: &Path,
) -> (MergedPart, Vec<(String, Vec<u8>)>) {
    let spec = PartialShardSpec {
        shard: 0,
        shards: 1,
        limit: 1 << 20,
        finish_budget: 1 << 20,
        scratch: tmp,
    };
    let mut feed = ShardFeed::new(src, &spec).unwrap();
    let part = merge_feeding(chunks, src, tables, &mut feed);
    let out = tmp.join(format!("out-{tables}"));
    feed.finish(&out).unwrap();
    (part, files(&out))
}

/// Counts the entries of the blocks it sees.
#[derive(Default)]
struct Seen {
    blocks: usize,
    entries: usize,
}

impl BlockSink for Seen {
    fn block(&mut self, _: &str, block: &Block<'_>) -> Result<(), MergeError> {
        self.blocks += 1;
        self.entries += block.entries.len();
        Ok(())
    }
}

/// Many paths (cut into ranges) and one path with more function names than the
/// tables hold (merged alone, in name passes); live, deleted and out of the prefix,
/// rows at commits the source lacks.
fn corpus() -> (MemSource, Vec<Bytes>) {
    let text: String = (0..40).map(|i| format!("int x{i};\n")).collect();
    let mut files = HashMap::new();
    let mut csv = String::new();
    for i in 0..6_000usize {
        let p = (i * 7_919) % 6_000;
        let path = match p % 5 {
            0 => format!("gone/f{p}.c"),
            1 => format!("other/f{p}.c"),
            _ => format!("src/d{}/f{p}.c", p % 13),
        };
        if p % 5 != 0 {
            files.insert(
                (b"c1".to_vec(), path.clone().into_bytes()),
                Arc::new(FileVersion::new(text.clone().into_bytes())),
            );
        }
        for r in 0..(1 + p % 4) {
            let line = (p + r * 11) % 45;
            let func = ["", "f", "g", "h"][(p + r) % 4];
            let commit = ["c1", "c1", "c9"][(p + r) % 3];
            writeln!(csv, "r,{commit},{path},{func},m{},{line},{}", r % 3, r + 1).unwrap();
        }
    }
    files.insert(
        (b"c1".to_vec(), b"src/m.c".to_vec()),
        Arc::new(FileVersion::new(text.into_bytes())),
    );
    for i in 0..20_000 {
        let l = 1 + i % 40;
        writeln!(
            csv,
            "r,c1,src/m.c,a_name_of_one_row_number_{i},m{},{l},1",
            i % 2
        )
        .unwrap();
    }
    (MemSource(files), chunks_of(&csv))
}

#[test]
fn a_merge_in_passes_feeds_its_partial_every_block_once() {
    let (src, chunks) = corpus();
    let (mut blocks, mut entries) = (0, 0);
    for c in &chunks {
        for_each_block(c, |b| {
            blocks += 1;
            entries += b.entries.len();
            Ok(())
        })
        .unwrap();
    }
    for tables in [usize::MAX, 256 << 10, 64 << 10] {
        let mut seen = Seen::default();
        let part = merge_feeding(&chunks, &src, tables, &mut seen);
        assert_eq!((seen.blocks, seen.entries), (blocks, entries), "{tables}");
        if tables < usize::MAX {
            assert!(part.passes > 2, "{tables}: {} passes", part.passes);
        }
    }
}

#[test]
fn a_partial_written_in_passes_is_the_one_pass_partial() {
    let (src, chunks) = corpus();
    let tmp = tempfile::tempdir().unwrap();
    let (one, want) = partial_in_passes(&chunks, &src, usize::MAX, tmp.path());
    assert_eq!(one.passes, 1);
    assert_eq!(want.len(), 4);
    for tables in [256 << 10, 64 << 10] {
        let (many, got) = partial_in_passes(&chunks, &src, tables, tmp.path());
        assert!(many.passes > 2, "{tables}: {} passes", many.passes);
        assert!(many.gz == one.gz, "{tables}: the parts differ");
        assert!(got == want, "{tables}: the partials differ");
    }
}
