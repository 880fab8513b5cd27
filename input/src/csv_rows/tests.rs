use super::*;

/// (line, row summary or problem) of every data row.
type Parsed = Vec<(u64, Result<String, RowProblem>)>;

fn rows(text: &str) -> Result<Parsed, InputError> {
    let mut r = RowReader::new("t.csv", text.as_bytes())?;
    let mut out = Vec::new();
    r.for_each(|pos, row| {
        out.push((
            pos.line,
            row.map(|r| {
                format!(
                    "{}|{}|{}|{}|{}",
                    String::from_utf8_lossy(r.file),
                    String::from_utf8_lossy(r.commit),
                    String::from_utf8_lossy(r.manager),
                    r.sl,
                    r.hits
                )
            }),
        ));
        true
    })?;
    Ok(out)
}

#[test]
fn delimiter_masks_agree_with_a_byte_loop_on_arbitrary_bytes() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..2000 {
        let mut block = [0u8; 64];
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Half the rounds draw from a few bytes near the delimiters.
            *b = if round % 2 == 0 {
                x as u8
            } else {
                [b',', b'\n', b'\r', b'"', 0x2c ^ 0x80, 0x0c, 0x0b, b'a'][(x % 8) as usize]
            };
        }
        let mask = |what: &dyn Fn(u8) -> bool| {
            block
                .iter()
                .enumerate()
                .filter(|(_, &b)| what(b))
                .fold(0u64, |m, (j, _)| m | 1 << j)
        };
        let want = (mask(&|b| b == b','), mask(&|b| matches!(b, b'\n' | b'\r')));
        assert_eq!(delimiter_mask(&block), want, "{block:?}");
        assert_eq!(delimiter_mask_words(&block), want, "{block:?}");
    }
    let mut seen = Vec::new();
    let text: Vec<u8> = (0..200u8)
        .map(|i| if i % 7 == 0 { b',' } else { i })
        .collect();
    for (base, (c, e)) in delimiter_masks(&text) {
        let mut m = c | e;
        while m != 0 {
            seen.push(base + m.trailing_zeros() as usize);
            m &= m - 1;
        }
    }
    let want: Vec<usize> = (0..text.len())
        .filter(|&i| matches!(text[i], b',' | b'\n' | b'\r'))
        .collect();
    assert_eq!(seen, want);
}

const H: &str = "x,manager,sl,hit_count,kernel_repo,kernel_commit,file_path,func_name\n";

#[test]
fn columns_by_name_in_any_order_with_extras() {
    let t = format!("{H}1,m,3,5,r,c1,a.c,f\n{H}2,m,0,0,r,c1,b.c,\n\n");
    let got = rows(&t).unwrap();
    assert_eq!(
        got.len(),
        2,
        "repeated header and blank line skipped: {got:?}"
    );
    assert_eq!(got[0], (2, Ok("a.c|c1|m|3|5".into())));
    assert_eq!(got[1], (4, Ok("b.c|c1|m|0|0".into())));
}

#[test]
fn missing_column_is_refused_by_name() {
    let e = rows("kernel_repo,kernel_commit,file_path,func_name,manager,sl\n").unwrap_err();
    assert!(
        matches!(
            e,
            InputError::MissingColumn {
                column: "hit_count",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("t.csv") && e.to_string().contains("hit_count"));
}

/// A header column `Namespace` was read as an extra column: every namespace's rows
/// were merged together, silently. A column that is `namespace` but for its case is
/// refused naming it; `namespace` itself is the column, and a name merely holding
/// the word (`namespace_id`) an extra one.
#[test]
fn a_namespace_column_in_another_case_merged_every_namespace() {
    for col in ["Namespace", "NAMESPACE", "nameSpace"] {
        let e = rows(&format!(
            "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count,{col}\nr,c,a.c,f,m,1,2,x\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("t.csv:1:") && e.contains(col) && e.contains("lower case"),
            "{e}"
        );
    }
    for col in ["namespace", "namespace_id"] {
        rows(&format!(
            "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count,{col}\nr,c,a.c,f,m,1,2,x\n"
        ))
        .unwrap();
    }
}

#[test]
fn duplicated_header_column_is_refused_not_first_taken() {
    let e = rows("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count,sl\nr,c,a.c,f,m,1,2,3\n")
        .unwrap_err();
    assert!(
        matches!(
            e,
            InputError::RepeatedColumn {
                column: "sl",
                first: 6,
                second: 8,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().starts_with("t.csv:1: column `sl`"), "{e}");
    // Repeated columns that are not required ones are extra columns, as before.
    rows("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count,x,x\n").unwrap();
}

#[test]
fn malformed_rows_name_their_line_and_problem() {
    let t = format!(
        "{H}1,m,x,5,r,c,a.c,f\n1,m,-3,5,r,c,a.c,f\n1,m,3,99999999999999999999,r,c,a.c,f\n\
         1,m,3,5,r,c,/abs.c,f\n1,m,3,5,r,c,a/../b.c,f\n1,m,3\n1,m,3,9223372036854775808,r,c,a.c,f\n"
    );
    let got = rows(&t).unwrap();
    let probs: Vec<_> = got
        .iter()
        .map(|(l, r)| (*l, r.clone().unwrap_err()))
        .collect();
    assert!(matches!(
        probs[0],
        (2, RowProblem::BadInteger { column: "sl", .. })
    ));
    assert!(matches!(
        probs[1],
        (3, RowProblem::Negative { column: "sl", .. })
    ));
    assert!(matches!(
        probs[2],
        (
            4,
            RowProblem::Overflow {
                column: "hit_count",
                ..
            }
        )
    ));
    assert!(matches!(probs[3], (5, RowProblem::BadPath { .. })));
    assert!(matches!(probs[4], (6, RowProblem::BadPath { .. })));
    assert_eq!(probs[5], (7, RowProblem::FieldCount { want: 8, got: 3 }));
    assert!(matches!(probs[6], (8, RowProblem::Overflow { .. })));
}

/// An `sl` past i64 failed the job ("past the largest count"): a line number is not
/// a count, and one past the end of any file is lost (contract §3.3), as one past
/// u32 was. A negative or non-integer `sl` is still a bad row.
#[test]
fn an_sl_past_i64_failed_the_job_instead_of_being_lost() {
    for sl in [
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551616",
        "99999999999999999999999999999999",
    ] {
        let got = rows(&format!("{H}1,m,{sl},5,r,c,a.c,f\n")).unwrap();
        assert_eq!(got[0].1, Ok(format!("a.c|c|m|{}|5", u32::MAX)), "sl {sl}");
    }
    let got = rows(&format!("{H}1,m,-99999999999999999999,5,r,c,a.c,f\n")).unwrap();
    assert!(matches!(
        got[0].1,
        Err(RowProblem::Negative { column: "sl", .. })
    ));
}

#[test]
fn non_canonical_paths_are_bad_rows() {
    use covmerge_proto::path::PathError;
    let paths = [
        ("k/./a.c", PathError::Dot),
        ("k//a.c", PathError::EmptySegment),
        ("./k/a.c", PathError::Dot),
        ("k/a.c/", PathError::TrailingSlash),
        ("/k/a.c", PathError::Absolute),
        ("\"\"", PathError::Empty),
        ("\"k/a\0.c\"", PathError::Nul),
        ("k\\a.c", PathError::Backslash),
    ];
    let mut t = format!("{H}1,m,3,5,r,c,k/a.c,f\n");
    for (p, _) in &paths {
        t.push_str(&format!("1,m,3,5,r,c,{p},f\n"));
    }
    let got = rows(&t).unwrap();
    assert_eq!(got[0], (2, Ok("k/a.c|c|m|3|5".to_string())));
    for (i, (p, why)) in paths.iter().enumerate() {
        let (line, r) = &got[i + 1];
        assert_eq!(*line, i as u64 + 3, "{p}");
        match r {
            Err(e @ RowProblem::BadPath { why: w, .. }) => {
                assert_eq!(w, why, "{p}");
                assert!(e.to_string().contains("not a canonical path"), "{e}");
            }
            other => panic!("{p}: {other:?}"),
        }
        assert!(!valid_file_path(p.trim_matches('"').as_bytes()), "{p}");
    }
}

#[test]
fn empty_input_is_an_error() {
    assert!(matches!(rows(""), Err(InputError::Empty { .. })));
}

/// (exact line, row summary or problem) of every data row, lines recounted from
/// the byte offset as the splitter does.
fn summarize(text: &[u8], pos: Pos, row: Result<Row<'_>, RowProblem>) -> (u64, String) {
    let mut upto = pos.byte as usize;
    while upto < text.len() && matches!(text[upto], b'\n' | b'\r') {
        upto += 1;
    }
    let line = 2 + text[..upto].iter().filter(|&&b| b == b'\n').count() as u64;
    let what = match row {
        Ok(r) => format!(
            "{}|{}|{}|{}|{}|{}|{}",
            String::from_utf8_lossy(r.repo),
            String::from_utf8_lossy(r.commit),
            String::from_utf8_lossy(r.file),
            String::from_utf8_lossy(r.func),
            String::from_utf8_lossy(r.manager),
            r.sl,
            r.hits
        ),
        Err(p) => format!("{p:?}"),
    };
    (line, what)
}

#[test]
fn the_unquoted_fast_path_reads_exactly_what_csv_reads() {
    let header = RowReader::new("t.csv", H.as_bytes()).unwrap().header();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let pieces = [
        "1", "m", "3", "5", "r", " c1 ", "a.c", "f", "", "-0", "x", "/a", "../b", "9",
    ];
    let ends = ["\n", "\r\n", "\r", "\n\n", "\r\n\r\n"];
    for case in 0..2000 {
        let mut text = String::new();
        for _ in 0..next(12) {
            if next(10) == 0 {
                text.push_str(H.trim_end());
            } else {
                let fields = match next(8) {
                    0 => next(12) as usize,
                    // Longer than a 64-byte chunk: commas carried over chunks.
                    1 => 30 + next(40) as usize,
                    _ => 8,
                };
                let f: Vec<&str> = (0..fields)
                    .map(|_| pieces[next(pieces.len() as u64) as usize])
                    .collect();
                text.push_str(&f.join(","));
            }
            text.push_str(ends[next(ends.len() as u64) as usize]);
        }
        if next(3) == 0 {
            text.push_str("1,m,3,5,r,c,a.c,f"); // no final newline
        }
        let bytes = text.as_bytes();
        let mut want = Vec::new();
        RowReader::from_header(&header, bytes, 2)
            .for_each(|pos, row| {
                want.push(summarize(bytes, pos, row));
                true
            })
            .unwrap();
        let mut got = Vec::new();
        for_each_unquoted(&header, bytes, 2, |pos, row| {
            let s = summarize(bytes, pos, row);
            assert_eq!(pos.line, s.0, "case {case}: exact line in {text:?}");
            got.push(s);
            true
        });
        assert_eq!(got, want, "case {case}: {text:?}");
        // Chunks of one and two blocks: records and their commas across chunk ends.
        for chunk in [64, 128] {
            let mut small = Vec::new();
            unquoted::walk(&header, bytes, 2, chunk, |pos, rec| {
                let row = rec.and_then(|f| f.row(&header));
                small.push(summarize(bytes, pos, row));
                true
            });
            assert_eq!(small, want, "case {case}, chunk {chunk}: {text:?}");
        }
    }
}

/// The fast path's records against csv's at chunk ends: every record length around
/// one and two 64-byte blocks, with too many, too few and the right number of
/// commas, over-long under a small cap, and `\r\n` split at a chunk end.
#[test]
fn records_across_chunk_ends_read_as_csv_reads_them() {
    let header = RowReader::new("t.csv", H.as_bytes())
        .unwrap()
        .header()
        .with_max_row(100);
    for pad in 0..140 {
        for (fields, end) in [(8, "\n"), (8, "\r\n"), (7, "\n"), (9, "\r"), (40, "\n")] {
            let mut row: Vec<String> = (0..fields).map(|i| format!("{i}")).collect();
            row[6] = format!("{}.c", "a".repeat(pad));
            let row = row.join(",");
            let text = format!("{row}{end}{row}{end}1,m,3,5,r,c,b.c,f{end}{row}");
            let bytes = text.as_bytes();
            let mut want = Vec::new();
            RowReader::from_header(&header, bytes, 2)
                .for_each(|pos, row| {
                    want.push(summarize(bytes, pos, row));
                    true
                })
                .unwrap();
            for chunk in [64, 128, 4096] {
                let mut got = Vec::new();
                unquoted::walk(&header, bytes, 2, chunk, |pos, rec| {
                    got.push(summarize(bytes, pos, rec.and_then(|f| f.row(&header))));
                    true
                });
                assert_eq!(got, want, "pad {pad}, chunk {chunk}: {text:?}");
            }
        }
    }
}

#[test]
fn an_unclosed_quote_took_the_rows_after_it_with_a_field_count_message() {
    // The `"` before `c` is never closed: the record runs to the end of the input.
    let t = format!("{H}1,m,3,5,r,\"c,a.c,f\n1,m,3,6,r,c,a.c,f\n1,m,3,7,r,c,a.c,f\n");
    let got = rows(&t).unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    let (line, problem) = (got[0].0, got[0].1.clone().unwrap_err());
    assert_eq!(line, 2);
    let msg = problem.to_string();
    assert!(
        msg.starts_with("expected 8 fields like the header, found 6")
            && msg.contains("runs over 3 lines")
            && msg.contains("unclosed"),
        "{msg}"
    );
    // A record on one line keeps its own message.
    let got = rows(&format!("{H}1,m,3\n")).unwrap();
    assert_eq!(
        got[0].1.clone().unwrap_err(),
        RowProblem::FieldCount { want: 8, got: 3 }
    );
}

/// A record of another namespace is not parsed: one that may be the header again (its
/// `sl` no count, every required column named) is told apart first, so that it is
/// refused as a header rather than counted as another namespace's row; a data row,
/// even with a space before its `sl`, is not taken for one.
#[test]
fn a_header_again_was_counted_as_another_namespaces_row() {
    let header = RowReader::new("t.csv", H.as_bytes()).unwrap().header();
    let fields = |line: &str| line.split(',').map(str::to_owned).collect::<Vec<_>>();
    let may = |line: &str| {
        let f = fields(line);
        header.may_be_header(|i| f[i].as_bytes())
    };
    assert!(may(
        "func_name,file_path,kernel_commit,kernel_repo,hit_count,sl,manager,x"
    ));
    assert!(may(
        "\u{feff}X,MANAGER, sl ,hit_count,kernel_repo,kernel_commit,file_path,func_name"
    ));
    assert!(!may("ns,m, 1,5,r,c1,a.c,f"));
    assert!(!may("ns,m,1,5,r,c1,a.c,f"));
    // A bad row that names only some columns is a row (of its namespace).
    assert!(!may("ns,manager,sl,hit_count,r,c1,a.c,f"));
}
