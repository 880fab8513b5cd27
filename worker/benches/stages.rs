//! Criterion benchmarks of the pipeline's stages on synthetic data made here:
//! CSV parsing, splitting, merging one shard, line projection (Histogram vs Myers,
//! including pathological pairs) and JSONL encoding.
//!
//! `cargo bench -p covmerge-worker --bench stages`

use std::hint::black_box;
use std::sync::Arc;

use covmerge_proto::output;
use covmerge_worker::input::{for_each_unquoted, RowReader};
use covmerge_worker::source::{FileVersion, Source, SourceError};
use covmerge_worker::stages::{
    line_map_lines, merge_shard, split_input, Flush, ProjectionCache, SplitError, SplitSettings,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use imara_diff::{Algorithm, Diff, InternedInput};

const HEADER: &str = "timestamp,version,manager,kernel_repo,kernel_branch,kernel_commit,file_path,func_name,sl,sc,el,ec,hit_count,inline,pc\n";

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn csv_rows(n: usize) -> Vec<u8> {
    let mut r = Lcg(7);
    let mut s = String::from(HEADER);
    for _ in 0..n {
        let f = r.next() % 200;
        let c = r.next() % 40;
        let m = r.next() % 20;
        let l = r.next() % 1000 + 1;
        let h = if r.next() % 10 < 4 {
            0
        } else {
            r.next() % 5000
        };
        s.push_str(&format!(
            "2024-04-08 02:53:27,1,ci-upstream-kasan-gce-{m},git://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git,master,{c:040x},fs/sub{}/file{f}.c,func_{}_{f},{l},0,{l},-1,{h},false,18446744071581125965\n",
            f % 17,
            l / 40
        ));
    }
    s.into_bytes()
}

fn kernel_file(lines: usize, seed: u64) -> Vec<String> {
    let mut r = Lcg(seed);
    let mut v = Vec::with_capacity(lines);
    let mut f = 0;
    while v.len() < lines {
        v.push(format!("static int fn_{f}(struct inode *inode, int flags)"));
        v.push("{".into());
        for _ in 0..(r.next() % 30 + 5) {
            v.push(match r.next() % 6 {
                0 => "\treturn ret;".into(),
                1 => "\t}".into(),
                2 => String::new(),
                3 => "\t\tgoto out;".into(),
                _ => format!(
                    "\tret = do_step_{}(inode, {});",
                    r.next() % 1000,
                    r.next() % 64
                ),
            });
        }
        v.push("}".into());
        v.push(String::new());
        f += 1;
    }
    v.truncate(lines);
    v
}

/// A revision: a few realistic edits (insert, delete, change) of `base`.
fn edit(base: &[String], seed: u64) -> Vec<String> {
    let mut r = Lcg(seed);
    let mut v = base.to_vec();
    for _ in 0..(r.next() % 8 + 1) {
        let at = r.next() as usize % v.len();
        match r.next() % 3 {
            0 => v.insert(at, format!("\tnew_line_{}();", r.next())),
            1 => {
                v.remove(at);
            }
            _ => v[at] = format!("\tchanged_{}();", r.next()),
        }
    }
    v
}

fn bench_parse_and_split(c: &mut Criterion) {
    let data = csv_rows(200_000);
    let mut g = c.benchmark_group("input");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("csv_parse_200k_rows", |b| {
        b.iter(|| {
            let mut r = RowReader::new("bench.csv", &data[..]).unwrap();
            let mut n = 0u64;
            r.for_each(|_, row| {
                n += row.map(|r| r.sl as u64).unwrap_or(0);
                true
            })
            .unwrap();
            black_box(n)
        })
    });
    // The split's path for pieces without quotes: the same rows, memchr-split.
    let header = RowReader::new("bench.csv", HEADER.as_bytes())
        .unwrap()
        .header();
    let body = &data[HEADER.len()..];
    g.bench_function("csv_parse_200k_rows_unquoted_fast_path", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for_each_unquoted(&header, body, 2, |_, row| {
                n += row.map(|r| r.sl as u64).unwrap_or(0);
                true
            });
            black_box(n)
        })
    });
    for threads in [1, 2] {
        g.bench_function(
            BenchmarkId::new("split_200k_rows_64_shards", threads),
            |b| {
                b.iter(|| {
                    let emit = |flush: Flush| -> Result<(), SplitError> {
                        black_box(flush);
                        Ok(())
                    };
                    let s = SplitSettings {
                        shards: 64,
                        max_bad_rows: 0,
                        memory_budget: 48 << 20,
                        threads,
                        ..Default::default()
                    };
                    black_box(split_input("bench.csv", &data[..], s, &emit).unwrap())
                })
            },
        );
    }
    g.finish();
}

struct MemSource {
    files: std::collections::HashMap<(Vec<u8>, Vec<u8>), Arc<FileVersion>>,
}

impl Source for MemSource {
    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        Ok(self.files.get(&(commit.to_vec(), path.to_vec())).cloned())
    }

    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        Ok(self.files.keys().any(|(c, _)| c == commit))
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        Ok(self.has_commit(commit)?.then(|| "memory".into()))
    }
}

fn bench_merge_shard(c: &mut Criterion) {
    // One shard: 20 files x 10 commits, rows from the CSV generator's shape.
    let mut files = std::collections::HashMap::new();
    let mut rows =
        String::from("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n");
    let mut r = Lcg(3);
    for f in 0..20 {
        let base = kernel_file(1000, f);
        let path = format!("f{f}.c");
        files.insert(
            (b"base".to_vec(), path.clone().into_bytes()),
            Arc::new(FileVersion::new((base.join("\n") + "\n").into_bytes())),
        );
        for c in 0..10 {
            let v = edit(&base, f * 100 + c);
            files.insert(
                (format!("c{c}").into_bytes(), path.clone().into_bytes()),
                Arc::new(FileVersion::new((v.join("\n") + "\n").into_bytes())),
            );
            for m in 0..5 {
                for l in (1..=v.len()).step_by(3) {
                    rows.push_str(&format!(
                        "r,c{c},{path},fn{},m{m},{l},{}\n",
                        l / 30,
                        r.next() % 100
                    ));
                }
            }
        }
    }
    let src = MemSource { files };
    let mut chunk = Vec::new();
    let collected = std::sync::Mutex::new(Vec::new());
    let emit = |f: Flush| -> Result<(), SplitError> {
        collected.lock().unwrap().push(f.bytes);
        Ok(())
    };
    let s = SplitSettings {
        shards: 1,
        max_bad_rows: 0,
        memory_budget: 1 << 30,
        threads: 1,
        ..Default::default()
    };
    let o = split_input("rows.csv", rows.as_bytes(), s, &emit).unwrap();
    for c in collected.into_inner().unwrap() {
        chunk.extend_from_slice(&c);
    }
    let chunk = bytes::Bytes::from(chunk);
    let mut g = c.benchmark_group("merge");
    g.throughput(Throughput::Elements(o.counts.rows_in));
    g.sample_size(20);
    g.bench_function("shard_20_files_10_commits_cold_cache", |b| {
        b.iter(|| {
            let cache = ProjectionCache::new(64 << 20, u64::MAX);
            let part = merge_shard(
                || std::iter::once(Ok(("c".to_string(), chunk.clone()))),
                b"base",
                &src,
                &cache,
            )
            .unwrap();
            black_box(part.records)
        })
    });
    let warm = ProjectionCache::new(64 << 20, u64::MAX);
    g.bench_function("shard_20_files_10_commits_warm_cache", |b| {
        b.iter(|| {
            let part = merge_shard(
                || std::iter::once(Ok(("c".to_string(), chunk.clone()))),
                b"base",
                &src,
                &warm,
            )
            .unwrap();
            black_box(part.records)
        })
    });
    g.finish();
}

fn diff_map(alg: Algorithm, a: &[&[u8]], b: &[&[u8]]) -> usize {
    let mut input: InternedInput<&[u8]> = InternedInput::default();
    input.update_before(a.iter().copied());
    input.update_after(b.iter().copied());
    let mut d = Diff::compute(alg, &input);
    d.postprocess_lines(&input);
    d.count_removals() as usize
}

fn bench_diff(c: &mut Criterion) {
    // A 10,000-line file and 100 revisions with realistic edits.
    let base = kernel_file(10_000, 1);
    let revs: Vec<Vec<String>> = (0..100).map(|i| edit(&base, 1000 + i)).collect();
    let b: Vec<&[u8]> = base.iter().map(|s| s.as_bytes()).collect();
    let revs_b: Vec<Vec<&[u8]>> = revs
        .iter()
        .map(|v| v.iter().map(|s| s.as_bytes()).collect())
        .collect();
    let mut g = c.benchmark_group("diff_10k_lines_100_revisions");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100));
    for (name, alg) in [
        ("histogram", Algorithm::Histogram),
        ("myers", Algorithm::Myers),
    ] {
        g.bench_function(name, |bch| {
            bch.iter(|| revs_b.iter().map(|a| diff_map(alg, a, &b)).sum::<usize>())
        });
    }
    g.bench_function("covmerge_line_map", |bch| {
        bch.iter(|| {
            revs_b
                .iter()
                .map(|a| line_map_lines(a, &b).project(1).unwrap_or(0))
                .sum::<u32>()
        })
    });
    g.finish();

    // Pathological: 100,000 lines, every one changed.
    let a: Vec<String> = (0..100_000).map(|i| format!("a{i}")).collect();
    let z: Vec<String> = (0..100_000).map(|i| format!("z{i}")).collect();
    let a: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
    let z: Vec<&[u8]> = z.iter().map(|s| s.as_bytes()).collect();
    let mut g = c.benchmark_group("diff_pathological_100k_all_changed");
    g.sample_size(10);
    for (name, alg) in [
        ("histogram", Algorithm::Histogram),
        ("myers", Algorithm::Myers),
    ] {
        g.bench_function(name, |bch| bch.iter(|| diff_map(alg, &a, &z)));
    }
    g.finish();
}

fn bench_encode(c: &mut Criterion) {
    let lines: Vec<u32> = (1..=2000).collect();
    let hits: Vec<u64> = (0..2000).map(|i| (i * 7919) % 10_000).collect();
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(lines.len() as u64));
    g.bench_function("mcr_2000_lines", |b| {
        let mut out = Vec::with_capacity(64 << 10);
        b.iter(|| {
            out.clear();
            output::write_mcr(
                &mut out,
                b"ci-upstream-kasan-gce",
                b"fs/ext4/inode.c",
                &lines,
                &hits,
            )
            .unwrap();
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_parse_and_split,
    bench_merge_shard,
    bench_diff,
    bench_encode
);
criterion_main!(benches);
