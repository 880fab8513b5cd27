use super::dir::hex;
use super::encode::Entry;
use super::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/go/testdata")
}

#[test]
fn gocoverdir_symlinks_fifos_and_hard_links_were_read() {
    let copy = || {
        let d = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(testdata()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
        }
        d
    };
    let counters = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("covcounters.")
            })
            .unwrap()
    };
    let (_, base) = read_dir(copy().path()).unwrap();
    assert!(base.counter_files > 0);
    // A symlink to another counters file, to /dev/zero; a hard link; a FIFO.
    let d = copy();
    std::os::unix::fs::symlink(counters(d.path()), d.path().join("covcounters.x.1.1")).unwrap();
    let e = read_dir(d.path()).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let d = copy();
    std::os::unix::fs::symlink("/dev/zero", d.path().join("covcounters.x.1.1")).unwrap();
    assert!(read_dir(d.path()).is_err());
    let d = copy();
    std::fs::hard_link(counters(d.path()), d.path().join("covcounters.x.1.1")).unwrap();
    let e = read_dir(d.path()).unwrap_err().to_string();
    assert!(e.contains("same file"), "{e}");
    let d = copy();
    let fifo = std::ffi::CString::new(
        d.path()
            .join("covcounters.x.1.1")
            .as_os_str()
            .as_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let e = read_dir(d.path()).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

/// Real files written by a `go build -cover -covermode=count` program (Go 1.27, the
/// fixture integration-tests/fixtures/goprog run 3 times) and what `go tool covdata
/// textfmt` printed for them.
#[test]
fn real_go_directory_decodes_to_what_go_tool_covdata_textfmt_printed() {
    let (blocks, stats) = read_dir(&testdata()).unwrap();
    assert_eq!((stats.meta_files, stats.counter_files), (1, 3));
    let text = std::fs::read(testdata().join("textfmt.txt")).unwrap();
    let want = super::super::text::read_profile("textfmt.txt", &text[..], 0).unwrap();
    assert_eq!(blocks.mode(), Some(Mode::Count));
    let got = blocks.entries();
    let want = want.blocks.entries();
    assert_eq!(got.len(), 25);
    let strip =
        |m: &BTreeMap<(String, Pos), (u32, u64, String)>| -> Vec<((String, Pos), (u32, u64))> {
            m.iter().map(|(k, v)| (k.clone(), (v.0, v.1))).collect()
        };
    assert_eq!(strip(&got), strip(&want));
    let funcs: std::collections::BTreeSet<&str> = got.values().map(|v| v.2.as_str()).collect();
    assert_eq!(
        funcs.into_iter().collect::<Vec<_>>(),
        vec![
            "*Acc.Push",
            "Acc.Sum",
            "Add",
            "Parse",
            "Shout",
            "Unused",
            "main"
        ]
    );
}

fn sample_meta(mode: Mode, per_func: bool) -> Meta {
    let unit = |sl, el, stmts| Unit {
        pos: [sl, 2, el, 9],
        stmts,
    };
    Meta {
        hash: [0x5a; 16],
        mode,
        per_func,
        pkgs: vec![
            MetaPkg {
                path: "example.com/m/a".into(),
                funcs: vec![
                    MetaFunc {
                        name: "F".into(),
                        file: "example.com/m/a/a.go".into(),
                        units: vec![unit(3, 4, 2), unit(5, 5, 1), unit(300, 300, 1)],
                        lit: false,
                    },
                    MetaFunc {
                        name: "G".into(),
                        file: "example.com/m/a/a.go".into(),
                        units: vec![unit(10, 12, 3)],
                        lit: false,
                    },
                ],
            },
            MetaPkg {
                path: "example.com/m/b".into(),
                funcs: vec![MetaFunc {
                    name: "*T.M".into(),
                    file: "example.com/m/b/b.go".into(),
                    units: vec![unit(1, 1, 1), unit(2, 3, 1)],
                    lit: false,
                }],
            },
        ],
    }
}

fn visits(data: &[u8]) -> Result<Vec<Entry>, GoError> {
    let mut v = Vec::new();
    decode_counters("c", data, |p, f, c| {
        v.push((p, f, c.to_vec()));
        Ok(())
    })?;
    Ok(v)
}

#[test]
fn raw_le_raw_be_and_uleb128_flavours_and_segments_decode_alike() {
    let m = sample_meta(Mode::Count, false);
    assert_eq!(decode_meta("m", &encode::meta(&m)).unwrap(), m);
    let segs: Vec<Vec<Entry>> = vec![
        vec![(0, 0, vec![1, 0, 70_000]), (1, 0, vec![u32::MAX, 3])],
        vec![(0, 1, vec![128])],
    ];
    let want: Vec<Entry> = segs.concat();
    for (flavor, big) in [
        (Flavor::Raw, false),
        (Flavor::Raw, true),
        (Flavor::Uleb128, false),
    ] {
        let data = encode::counters(m.hash, flavor, big, &segs);
        assert_eq!(visits(&data).unwrap(), want, "{flavor:?} big={big}");
        let mut h = None;
        let hdr = decode_counters("c", &data, |_, _, _| Ok(())).unwrap();
        h.get_or_insert(hdr);
        assert_eq!(hdr.segments, 2);
        assert_eq!((hdr.flavor, hdr.big_endian), (flavor, big));
    }
}

fn dir_with(meta: &Meta, counters: &[Vec<u8>]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(format!("covmeta.{}", hex(&meta.hash))),
        encode::meta(meta),
    )
    .unwrap();
    for (i, c) in counters.iter().enumerate() {
        std::fs::write(
            d.path()
                .join(format!("covcounters.{}.{i}.{i}", hex(&meta.hash))),
            c,
        )
        .unwrap();
    }
    d
}

#[test]
fn processes_sum_per_unit_set_mode_ors_and_unrun_functions_count_zero() {
    for mode in [Mode::Count, Mode::Atomic, Mode::Set] {
        let m = sample_meta(mode, false);
        let c1 = encode::counters(
            m.hash,
            Flavor::Uleb128,
            false,
            &[vec![(0, 0, vec![1, 0, 7])]],
        );
        let c2 = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![2, 0, 0])]]);
        let d = dir_with(&m, &[c1, c2]);
        let (b, _) = read_dir(d.path()).unwrap();
        let e = b.entries();
        let count = |file: &str, sl: u32| {
            e.iter()
                .find(|((f, p), _)| f == file && p[0] == sl)
                .map(|(_, v)| v.1)
                .unwrap()
        };
        let f = "example.com/m/a/a.go";
        let (first, last) = if mode == Mode::Set { (1, 1) } else { (3, 7) };
        assert_eq!(count(f, 3), first, "{mode:?}");
        assert_eq!(count(f, 5), 0);
        assert_eq!(count(f, 300), last);
        assert_eq!(count(f, 10), 0, "G never ran");
        assert_eq!(count("example.com/m/b/b.go", 2), 0);
    }
    // Per-function granularity: one counter for all units.
    let m = sample_meta(Mode::Count, true);
    let c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(1, 0, vec![4])]]);
    let (b, _) = read_dir(dir_with(&m, &[c]).path()).unwrap();
    assert!(b
        .entries()
        .iter()
        .filter(|((f, _), _)| f.ends_with("b.go"))
        .all(|(_, v)| v.1 == 4));
}

fn corrupt(e: GoError) -> (String, u64, String) {
    match e {
        GoError::Corrupt {
            file,
            offset,
            problem,
        } => (file, offset, problem),
        other => panic!("expected a corrupt-file error, got {other}"),
    }
}

#[test]
fn corrupt_files_are_errors_naming_file_and_offset() {
    let m = sample_meta(Mode::Count, false);
    let meta = encode::meta(&m);
    // Truncated meta: the header's length disagrees.
    let (f, off, p) = corrupt(decode_meta("covmeta.x", &meta[..meta.len() - 3]).unwrap_err());
    assert_eq!((f.as_str(), off), ("covmeta.x", 8));
    assert!(p.contains("header says"), "{p}");
    // Bad magic.
    let mut bad = meta.clone();
    bad[1] = b'X';
    assert_eq!(corrupt(decode_meta("m", &bad).unwrap_err()).1, 0);
    // A function offset pointing outside its package.
    let mut bad = meta.clone();
    let pkg0 = u64::from_le_bytes(meta[56..64].try_into().unwrap()) as usize;
    bad[pkg0 + PKG_HEADER..pkg0 + PKG_HEADER + 4].copy_from_slice(&9999u32.to_le_bytes());
    let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
    assert_eq!(off as usize, pkg0 + PKG_HEADER);
    assert!(p.contains("outside the package"), "{p}");
    // Counter files: a ULEB128 longer than 5 bytes, a wrong counter count, a
    // missing footer, trailing bytes, an unknown function.
    let mut c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(0, 1, vec![5])]]);
    let body = c.len() - FOOTER - 1; // the counter value
    c.splice(body..body + 1, [0x85, 0x80, 0x80, 0x80, 0x80, 0x01]);
    let (_, off, p) = corrupt(visits(&c).unwrap_err());
    assert_eq!(off as usize, body);
    assert!(p.contains("longer than 5 bytes"), "{p}");
    let wrong = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![1, 2])]]);
    let d = dir_with(&m, &[wrong]);
    let e = read_dir(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("covcounters.")
            && e.contains("at byte")
            && e.contains("2 counters for function F, which has 3 units"),
        "{e}"
    );
    let c = encode::counters(
        m.hash,
        Flavor::Uleb128,
        false,
        &[vec![(0, 0, vec![1, 2, 3])]],
    );
    let (_, off, p) = corrupt(visits(&c[..c.len() - 1]).unwrap_err());
    assert!(p.contains("footer"), "{p} at {off}");
    let mut extra = c.clone();
    extra.splice(c.len() - FOOTER..c.len() - FOOTER, [0]);
    let (_, _, p) = corrupt(visits(&extra).unwrap_err());
    assert!(p.contains("unexpected bytes"), "{p}");
    let c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(7, 0, vec![1])]]);
    let e = read_dir(dir_with(&m, &[c]).path()).unwrap_err().to_string();
    assert!(e.contains("function 7/0 is not in"), "{e}");
    // A counter file whose meta-data file is missing.
    let c = encode::counters([1; 16], Flavor::Uleb128, false, &[vec![]]);
    let e = read_dir(dir_with(&m, &[c]).path()).unwrap_err().to_string();
    assert!(e.contains("no covmeta.0101"), "{e}");
}

/// A function name over the cap on a row was read, merged, and written into a
/// partial, whose reader then refused it (its rows are held to that cap): it is
/// refused when read, naming the file and the offset; one at the cap is read.
#[test]
fn a_function_name_over_the_row_cap_was_written_into_a_partial_that_refused_it() {
    for (len, ok) in [
        (crate::csv_rows::MAX_ROW, true),
        (crate::csv_rows::MAX_ROW + 1, false),
    ] {
        let mut m = sample_meta(Mode::Count, false);
        m.pkgs[0].funcs[1].name = "G".repeat(len);
        match decode_meta("covmeta.x", &encode::meta(&m)) {
            Ok(d) => {
                assert!(ok, "{len} bytes read");
                assert_eq!(d.pkgs[0].funcs[1].name.len(), len);
            }
            Err(e) => {
                assert!(!ok, "{len} bytes refused: {e}");
                let (f, _, p) = corrupt(e);
                assert_eq!(f, "covmeta.x");
                assert!(p.contains("function name of 1048577 bytes"), "{p}");
            }
        }
    }
}

/// Counts read from the file are checked against the bytes left before anything is
/// allocated for them: a header claiming 2^64-1 packages, 2^32-1 functions or
/// strings, or 2^64-1 function entries is an error, not an allocation.
#[test]
fn huge_counts_in_headers_are_refused_before_allocating() {
    let m = sample_meta(Mode::Count, false);
    let meta = encode::meta(&m);
    let mut bad = meta.clone();
    bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
    assert_eq!(off, 16);
    assert!(p.contains("packages do not fit"), "{p}");
    let pkg0 = u64::from_le_bytes(meta[56..64].try_into().unwrap()) as usize;
    let mut bad = meta.clone();
    bad[pkg0 + 40..pkg0 + 44].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
    assert_eq!(off as usize, pkg0 + 40);
    assert!(p.contains("functions do not fit"), "{p}");
    // The package string table's count (right after 2 function offsets) as a
    // 5-byte ULEB128 of 2^32-1, in place of its 1-byte count and 4 more bytes.
    let mut bad = meta.clone();
    let tab = pkg0 + PKG_HEADER + 4 * 2;
    bad[tab..tab + 5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
    assert_eq!(off as usize, tab + 5);
    assert!(p.contains("claims 4294967295 strings"), "{p}");
    let mut c = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![1, 2, 3])]]);
    c[COUNTER_HEADER..COUNTER_HEADER + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_, off, p) = corrupt(visits(&c).unwrap_err());
    assert_eq!(off as usize, COUNTER_HEADER);
    assert!(p.contains("function entries do not fit"), "{p}");
}

/// xorshift64*: a fixed-seed generator, so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = [0, 0xff, 0x7f, 0x80][rng.below(4)];
            }
            2 => d.truncate(rng.below(d.len() + 1)),
            3 => {
                let i = rng.below(d.len() + 1);
                d.insert(i, rng.next() as u8);
            }
            4 if d.len() >= 4 => {
                // A large little-endian number where a length or count may be.
                let i = rng.below(d.len() - 3);
                d[i..i + 4].copy_from_slice(&(rng.next() as u32 | 0x8000_0000).to_le_bytes());
            }
            _ if !d.is_empty() => {
                let i = rng.below(d.len());
                d.remove(i);
            }
            _ => {}
        }
    }
    d
}

/// Arbitrary and mutated bytes (real Go files and encoded ones of every flavour):
/// the decoders return `Ok` or an error naming an offset inside the file, and never
/// panic. Allocation is bounded by construction: every count is checked against the
/// bytes left before anything is reserved for it.
#[test]
fn decoders_survive_arbitrary_and_mutated_bytes() {
    let m = sample_meta(Mode::Count, false);
    let mut seeds: Vec<(bool, Vec<u8>)> = vec![(true, encode::meta(&m))];
    for (flavor, big) in [
        (Flavor::Raw, false),
        (Flavor::Raw, true),
        (Flavor::Uleb128, false),
    ] {
        seeds.push((
            false,
            encode::counters(
                m.hash,
                flavor,
                big,
                &[vec![(0, 0, vec![1, 2, 3])], vec![(1, 0, vec![9, 9])]],
            ),
        ));
    }
    for e in std::fs::read_dir(testdata()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("cov") {
            seeds.push((name.starts_with("covmeta"), std::fs::read(&p).unwrap()));
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let check = |is_meta: bool, d: &[u8]| {
        let r = if is_meta {
            decode_meta("f", d).map(|_| ())
        } else {
            decode_counters("f", d, |_, _, _| Ok(())).map(|_| ())
        };
        if let Err(GoError::Corrupt { offset, .. }) = r {
            assert!(
                offset <= d.len() as u64,
                "offset {offset} past {} bytes",
                d.len()
            );
        }
    };
    let mut ok = 0;
    for i in 0..40_000 {
        let (is_meta, seed) = &seeds[i % seeds.len()];
        let d = mutate(&mut rng, seed);
        check(*is_meta, &d);
        if is_meta
            .then(|| decode_meta("f", &d).is_ok())
            .unwrap_or(false)
        {
            ok += 1;
        }
    }
    // Pure noise, with and without a valid magic in front.
    for i in 0..20_000 {
        let n = rng.below(300);
        let mut d: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if i % 2 == 0 && d.len() >= 4 {
            d[..4].copy_from_slice(if i % 4 == 0 {
                &META_MAGIC
            } else {
                &COUNTER_MAGIC
            });
        }
        check(true, &d);
        check(false, &d);
    }
    // Some mutations (e.g. of a padding byte) leave a decodable file.
    assert!(ok > 0);
}
