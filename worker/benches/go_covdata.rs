//! Decoding Go's binary coverage data: a `GOCOVERDIR` directory of 1,000
//! processes of a synthetic mid-size program (150 packages, 6,000 functions, ~36,000
//! units; each process ran ~40 % of the functions), written here with the decoder's
//! own encoder in Go's default ULEB128 flavour and in the raw flavour.
//!
//! `cargo bench -p covmerge-worker --bench go_covdata`

use std::hint::black_box;
use std::path::Path;

use covmerge_worker::input::go::covdata::{
    decode_counters, encode, read_dir, Flavor, Meta, MetaFunc, MetaPkg, Unit,
};
use covmerge_worker::input::go::Mode;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

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

fn program(r: &mut Lcg) -> Meta {
    let pkgs = (0..150)
        .map(|p| MetaPkg {
            path: format!("example.com/svc/pkg{p}"),
            funcs: (0..40)
                .map(|f| {
                    let n = 1 + r.next() % 11;
                    let base = 10 + f as u32 * 30;
                    MetaFunc {
                        name: format!("Func{f}"),
                        file: format!("example.com/svc/pkg{p}/file{}.go", f % 4),
                        units: (0..n as u32)
                            .map(|u| Unit {
                                pos: [base + 2 * u, 2, base + 2 * u + 1, 20],
                                stmts: 1 + u % 3,
                            })
                            .collect(),
                        lit: false,
                    }
                })
                .collect(),
        })
        .collect();
    Meta {
        hash: [0x42; 16],
        mode: Mode::Count,
        per_func: false,
        pkgs,
    }
}

fn process(r: &mut Lcg, meta: &Meta) -> Vec<encode::Entry> {
    let mut e = Vec::new();
    for (p, pkg) in meta.pkgs.iter().enumerate() {
        for (f, func) in pkg.funcs.iter().enumerate() {
            if r.next() % 10 < 4 {
                let ctrs = func
                    .units
                    .iter()
                    .map(|_| match r.next() % 4 {
                        0 => 0,
                        1 => 1,
                        2 => (r.next() % 200) as u32,
                        _ => (r.next() % 100_000) as u32,
                    })
                    .collect();
                e.push((p as u32, f as u32, ctrs));
            }
        }
    }
    e
}

fn write_dir(dir: &Path, flavor: Flavor, processes: usize) -> u64 {
    let mut r = Lcg(11);
    let meta = program(&mut r);
    let hex: String = meta.hash.iter().map(|b| format!("{b:02x}")).collect();
    let m = encode::meta(&meta);
    let mut bytes = m.len() as u64;
    std::fs::write(dir.join(format!("covmeta.{hex}")), m).unwrap();
    for pid in 0..processes {
        let c = encode::counters(meta.hash, flavor, false, &[process(&mut r, &meta)]);
        bytes += c.len() as u64;
        std::fs::write(dir.join(format!("covcounters.{hex}.{pid}.{pid}")), c).unwrap();
    }
    bytes
}

fn bench_covdata(c: &mut Criterion) {
    let mut g = c.benchmark_group("go_covdata");
    g.sample_size(10);
    for flavor in [Flavor::Uleb128, Flavor::Raw] {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = write_dir(tmp.path(), flavor, 1000);
        g.throughput(Throughput::Bytes(bytes));
        g.bench_function(format!("read_dir_1000_processes_{flavor:?}"), |b| {
            b.iter(|| {
                let (blocks, stats) = read_dir(black_box(tmp.path())).unwrap();
                assert_eq!(stats.counter_files, 1000);
                black_box(blocks.len())
            })
        });
        // One counter file decoded from memory, without the per-unit sums.
        let one = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("covcounters."))
            .unwrap();
        let data = std::fs::read(one).unwrap();
        g.throughput(Throughput::Bytes(data.len() as u64));
        g.bench_function(format!("decode_one_counter_file_{flavor:?}"), |b| {
            b.iter(|| {
                let mut n = 0u64;
                decode_counters("c", black_box(&data), |_, _, ctrs| {
                    n += ctrs.len() as u64;
                    Ok(())
                })
                .unwrap();
                n
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_covdata);
criterion_main!(benches);
