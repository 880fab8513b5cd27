use super::*;
use std::collections::BTreeMap;

const HEADER: &str = "file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n";

/// SplitMix64: small, deterministic, good enough to shape texts.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A text mixing valid rows, quoted fields, stray quotes, CR/LF variants, long
/// fields, invalid UTF-8 and random bytes.
fn text(rng: &mut Rng, max_row: usize) -> Vec<u8> {
    let mut t = HEADER.as_bytes().to_vec();
    let rows = rng.below(60);
    for _ in 0..rows {
        match rng.below(14) {
            12 => {
                // Values the per-column fast path hands to the row's own checks:
                // signs, spaces, 19+ digits, bad UTF-8 in any name, bad paths.
                const FIELDS: [&[&[u8]]; 7] = [
                    &[b"f1.c", b"../x.c", b"/abs.c", b"a\\..\\b.c", b"f\xc3.c"],
                    &[b"r", b"r\xff"],
                    &[b"c1", b" c1 ", b"c\xfe"],
                    &[b"fn1", b"", b"fn\xe2\x82"],
                    &[b"m1", b"m\x80"],
                    &[
                        b"7",
                        b"+7",
                        b" 7",
                        b"007",
                        b"-0",
                        b"-3",
                        b"1234567890123456789",
                        b"",
                    ],
                    &[
                        b"0",
                        b"+1",
                        b"99999999999999999999",
                        b"x",
                        b"9223372036854775808",
                    ],
                ];
                let pick = |rng: &mut Rng, i: usize| {
                    let f = FIELDS[i];
                    // Mostly good values, so that a bad one meets cached good ones.
                    if rng.below(3) == 0 {
                        f[rng.below(f.len() as u64) as usize]
                    } else {
                        f[0]
                    }
                };
                let fields: Vec<&[u8]> = (0..7).map(|i| pick(rng, i)).collect();
                t.extend_from_slice(&fields.join(&b","[..]));
                t.push(b'\n');
            }
            13 => t.extend_from_slice(b"f1.c,r,c1,fn1,m1,7,0\n"),
            0 => {
                // random bytes from a hostile alphabet
                const A: &[u8] = b",,\"\"\n\r\rab1\xff\x00 ";
                for _ in 0..rng.below(40) {
                    t.push(A[rng.below(A.len() as u64) as usize]);
                }
            }
            1 => t.extend_from_slice(b"f.c,r,c,foo\"x,m,3,4\n"), // stray quote
            2 => t.extend_from_slice(b"\"q,\"\"d\".c\",r,c,\"a\nb\",m,2,1\r\n"),
            3 => {
                // a long field: around the row cap, sometimes far past it
                let n = match rng.below(3) {
                    0 => max_row - 30 + rng.below(60) as usize,
                    1 => max_row * 5,
                    _ => max_row / 2,
                };
                t.extend_from_slice(b"l.c,r,c,");
                if rng.below(2) == 0 {
                    t.push(b'"');
                    t.extend(std::iter::repeat_n(b'x', n));
                    t.extend_from_slice(b"\n\"");
                } else {
                    t.extend(std::iter::repeat_n(b'y', n));
                }
                t.extend_from_slice(b",m,1,1\n");
            }
            4 => t.extend_from_slice(b"\n\r\n"),
            5 => t.extend_from_slice(HEADER.as_bytes()),
            6 => t.extend_from_slice(b"u\xff.c,r,c,f,m,1,1\n"),
            7 => t.extend_from_slice(b"\"open,r,c,f,m,1,1\n"), // an unclosed quote
            _ => {
                let line = format!(
                    "f{}.c,r,c{},fn{},m{},{},{}{}",
                    rng.below(5),
                    rng.below(3),
                    rng.below(3),
                    rng.below(2),
                    rng.below(20),
                    rng.below(100),
                    ["\n", "\r\n", "\r"][rng.below(3) as usize]
                );
                t.extend_from_slice(line.as_bytes());
            }
        }
    }
    t
}

type Key = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, u32);
/// (hits, rows) per key.
type Rows = BTreeMap<Key, (u64, u64)>;

/// Rows read, bad rows (line, problem) and the good rows summed.
type CsvRead = (u64, Vec<(u64, String)>, Rows);

/// What the csv crate reads from the whole text in one reader, or the line where it
/// found the header again in another form (the input is refused).
fn oracle(text: &[u8], max_row: usize) -> Result<CsvRead, u64> {
    let r = RowReader::new("t.csv", text).unwrap();
    let header = r.header().with_max_row(max_row);
    let hlen = memchr::memchr(b'\n', text).unwrap() + 1;
    let body = &text[hlen..];
    let mut rows_in = 0;
    let mut bad = Vec::new();
    let mut good = BTreeMap::new();
    let mut again = None;
    RowReader::from_header(&header, body, 2)
        .for_each(|pos, row| {
            rows_in += 1;
            match row {
                Ok(r) => {
                    let e = good
                        .entry((
                            r.file.to_vec(),
                            r.commit.to_vec(),
                            r.func.to_vec(),
                            r.manager.to_vec(),
                            r.sl,
                        ))
                        .or_insert((0, 0));
                    e.0 += r.hits;
                    e.1 += 1;
                }
                Err(p) => {
                    let mut upto = pos.byte as usize;
                    while upto < body.len() && matches!(body[upto], b'\n' | b'\r') {
                        upto += 1;
                    }
                    let line = 2 + count_newlines(&body[..upto]);
                    if header.header_again(&body[upto..], line).is_some() {
                        again = Some(line);
                        return false;
                    }
                    bad.push((line, p.to_string()));
                }
            }
            true
        })
        .unwrap();
    match again {
        Some(line) => Err(line),
        None => Ok((rows_in, bad, good)),
    }
}

fn split(
    text: &[u8],
    threads: usize,
    limits: Limits,
) -> Result<(SplitOutcome, CutStats, Rows), SplitError> {
    let got = Mutex::new(BTreeMap::new());
    // Every chunk of a flush holds its own shard's files only, and the chunks
    // tile the object.
    let emit = |flush: Flush| -> Result<(), SplitError> {
        let mut at = 0;
        for (shard, range) in &flush.chunks {
            assert_eq!(range.start, at, "chunks end to end");
            at = range.end;
            crate::spill::for_each_block(&flush.bytes[range.clone()], |b| {
                let mut g = got.lock().unwrap();
                for (k, v) in &b.entries {
                    let s = |i: u32| b.strings[i as usize].to_vec();
                    assert_eq!(shard_of(&s(k.file), 3), *shard);
                    let e = g
                        .entry((s(k.file), s(k.commit), s(k.func), s(k.manager), k.sl))
                        .or_insert((0, 0));
                    e.0 += v.hits;
                    e.1 += v.rows;
                }
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(at, flush.bytes.len(), "no bytes outside a chunk");
        Ok(())
    };
    let settings = SplitSettings {
        shards: 3,
        max_bad_rows: u64::MAX,
        memory_budget: 2048,
        threads,
        ..Default::default()
    };
    let (o, stats) = split_input_with(
        "t.csv",
        text,
        settings,
        super::Namespaces::Job(None),
        &emit,
        limits,
    )?;
    Ok((o, stats, got.into_inner().unwrap()))
}

#[test]
fn the_splitter_agrees_with_the_csv_crate_on_arbitrary_bytes() {
    let iters: u64 = std::env::var("COVMERGE_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut rng = Rng(0x5eed);
    for i in 0..iters {
        // Above the header's length: a header over the cap is refused, not fuzzed.
        let max_row = HEADER.len() + 16 + rng.below(200) as usize;
        let limits = Limits {
            piece: 16 + rng.below(300) as usize,
            max_row,
            discard_at: 4 * max_row,
        };
        let text = text(&mut rng, max_row);
        let want = oracle(&text, max_row);
        for threads in [1, 3] {
            let ctx = || {
                format!(
                    "case {i} threads {threads}: {:?}",
                    text.escape_ascii().to_string()
                )
            };
            let ((rows_in, bad, good), (o, stats, got)) =
                match (&want, split(&text, threads, limits)) {
                    (Ok((r, b, g)), Ok(split)) => ((*r, b, g), split),
                    (
                        Err(line),
                        Err(SplitError::Input(InputError::Read {
                            line: l, problem, ..
                        })),
                    ) => {
                        assert!(
                            problem.starts_with("the header again"),
                            "{problem}: {}",
                            ctx()
                        );
                        assert_eq!(l, *line, "{}", ctx());
                        continue;
                    }
                    (w, s) => panic!("csv {:?}, split {:?}: {}", w.as_ref().err(), s.err(), ctx()),
                };
            assert_eq!(o.counts.rows_in, rows_in, "{}", ctx());
            assert_eq!(o.counts.rows_bad, bad.len() as u64, "{}", ctx());
            let want: Vec<_> = bad.iter().take(BAD_ROW_SAMPLES).cloned().collect();
            let have: Vec<_> = o
                .bad_rows
                .iter()
                .map(|b| (b.line, b.problem.clone()))
                .collect();
            assert_eq!(have, want, "{}", ctx());
            assert_eq!(&got, good, "{}", ctx());
            let hlen = memchr::memchr(b'\n', &text).unwrap() + 1;
            assert_eq!(
                stats.scanned,
                (text.len() - hlen) as u64,
                "one pass: {}",
                ctx()
            );
            assert!(
                stats.peak <= limits.discard_at + 2 * limits.piece,
                "held {} bytes: {}",
                stats.peak,
                ctx()
            );
        }
    }
}

/// Runs of rows sharing values, where the parse reuses the previous row's lookups:
/// values equal to the previous row's up to a later byte (a longer value, the last
/// byte changed), bad values within a run of good ones (the reused check must not
/// carry over), `\r\n` and `\r` line ends, and quoted rows (their pieces go to the
/// csv reader) among them. The rows and bad rows must be csv's.
#[test]
fn runs_of_equal_values_read_as_the_csv_crate_reads_them() {
    const FILES: [&[u8]; 6] = [
        b"a/b.c",
        b"a/b.h",
        b"a/b.cc",
        b"a/b.c\xff",
        b"../a/b.c",
        b"\"a/b.c\"",
    ];
    const COMMITS: [&[u8]; 5] = [
        b"0123456789abcdef0123456789abcdef01234567",
        b"0123456789abcdef0123456789abcdef01234568",
        b" 0123456789abcdef0123456789abcdef01234567",
        b"0123456789abcdef0123456789abcdef0123456\xfe",
        b"0123456789abcdef0123456789abcdef0123456",
    ];
    const FUNCS: [&[u8]; 5] = [
        b"fn_long_name_1",
        b"fn_long_name_2",
        b"",
        b"fn\xe2\x82",
        b"\"fn_long_name_1\"",
    ];
    const MANAGERS: [&[u8]; 4] = [b"ci-mgr-10", b"ci-mgr-1", b"ci-mgr-100", b"ci-mgr-1\x80"];
    let mut rng = Rng(0xfeed);
    for case in 0..300 {
        let mut t = HEADER.as_bytes().to_vec();
        let mut cur = [0usize; 4];
        for _ in 0..rng.below(400) {
            // Mostly the previous row's values; now and then one column moves,
            // mostly to a good value.
            if rng.below(4) == 0 {
                let col = rng.below(4) as usize;
                let len = [FILES.len(), COMMITS.len(), FUNCS.len(), MANAGERS.len()][col];
                cur[col] = if rng.below(3) == 0 {
                    rng.below(len as u64) as usize
                } else {
                    rng.below(2) as usize
                };
            }
            // Quoted values only in some cases: the others stay on the fast path.
            if case % 3 != 0 {
                cur[0] = cur[0].min(4);
                cur[2] = cur[2].min(3);
            }
            let fields: [&[u8]; 7] = [
                FILES[cur[0]],
                b"git://r",
                COMMITS[cur[1]],
                FUNCS[cur[2]],
                MANAGERS[cur[3]],
                [&b"7"[..], b"8", b"x"][rng.below(3) as usize],
                [&b"1"[..], b"20"][rng.below(2) as usize],
            ];
            t.extend_from_slice(&fields.join(&b","[..]));
            t.extend_from_slice([&b"\n"[..], b"\r\n", b"\r"][rng.below(3) as usize]);
        }
        let max_row = 1 << 10;
        let (rows_in, bad, good) = oracle(&t, max_row).unwrap();
        let limits = Limits {
            piece: 64 + rng.below(8192) as usize,
            max_row,
            discard_at: 4 * max_row,
        };
        for threads in [1, 2] {
            let (o, _, got) = split(&t, threads, limits).unwrap();
            let ctx = || {
                format!(
                    "case {case} threads {threads}: {:?}",
                    t.escape_ascii().to_string()
                )
            };
            assert_eq!(o.counts.rows_in, rows_in, "{}", ctx());
            assert_eq!(o.counts.rows_bad, bad.len() as u64, "{}", ctx());
            let want: Vec<_> = bad.iter().take(BAD_ROW_SAMPLES).cloned().collect();
            let have: Vec<_> = o
                .bad_rows
                .iter()
                .map(|b| (b.line, b.problem.clone()))
                .collect();
            assert_eq!(have, want, "{}", ctx());
            assert_eq!(got, good, "{}", ctx());
        }
    }
}
