//! The result reader's tests.

use super::*;

const HEAD: &str = r#"{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://r","Commit":"c1","Duration":30,"DateTo":"2024-04-08","TotalRows":9}"#;

fn mcr(m: &str, p: &str, lines: &[u32], hits: &[u64]) -> String {
    let cov = hits.iter().filter(|&&h| h > 0).count();
    format!(
        r#"{{"MCR":{{"Manager":"{m}","FilePath":"{p}","FileData":{{"Instrumented":{},"Covered":{cov},"LinesInstrumented":{lines:?},"HitCounts":{hits:?}}}}},"FL":null}}"#,
        lines.len()
    )
}

fn reader(lines: &[String]) -> ResultReader {
    let text = format!("{HEAD}\n{}\n", lines.join("\n"));
    ResultReader::new("r.jsonl", Box::new(std::io::Cursor::new(text.into_bytes()))).unwrap()
}

#[test]
fn a_manager_named_twice_is_refused_among_many() {
    let mut recs: Vec<String> = (0..20_000)
        .map(|i| mcr(&format!("m{i}"), "a.c", &[1], &[1]))
        .collect();
    recs.push(mcr("m17", "a.c", &[1], &[1]));
    let e = reader(&recs).next_file().unwrap_err().to_string();
    assert!(
        e.contains("line 20002") && e.contains("a second MCR of manager \"m17\""),
        "{e}"
    );
    // The same manager in another file is no repeat.
    let ok = reader(&[
        mcr("*", "a.c", &[1], &[1]),
        mcr("m1", "a.c", &[1], &[1]),
        mcr("*", "b.c", &[1], &[1]),
        mcr("m1", "b.c", &[1], &[1]),
    ]);
    let mut ok = ok;
    assert!(ok.next_file().unwrap().is_some() && ok.next_file().unwrap().is_some());
}

#[test]
fn a_line_without_end_was_read_whole() {
    // An endless line (as /dev/zero is) stops at the cap, naming the line.
    let endless = std::io::Read::chain(
        std::io::Cursor::new(format!("{HEAD}\n").into_bytes()),
        std::io::repeat(b'x'),
    );
    let mut r = ResultReader::new("zero", Box::new(BufReader::new(endless))).unwrap();
    let e = r.next_file().unwrap_err().to_string();
    assert!(
        e.contains("result zero, line 2")
            && e.contains("64 MiB")
            && e.contains("--memory-budget 256 MiB"),
        "{e}"
    );
    // An endless header line too.
    let e = ResultReader::new("zero", Box::new(BufReader::new(std::io::repeat(0))))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("line 1") && e.contains("64 MiB"), "{e}");
}

#[test]
fn files_one_at_a_time() {
    let mut r = reader(&[
        mcr("*", "a.c", &[1, 2], &[3, 0]),
        mcr("m2", "a.c", &[1], &[3]),
        mcr("m1", "a.c", &[2], &[0]),
        r#"{"MCR":null,"FL":{"FilePath":"a.c","FuncName":"f","Lines":[1,2]}}"#.into(),
        mcr("*", "b.c", &[], &[]),
    ]);
    assert_eq!(r.header().commit, "c1");
    let a = r.next_file().unwrap().unwrap();
    assert_eq!(a.path, "a.c");
    assert_eq!(a.star.covered(), 1);
    assert_eq!(a.managers[0].0, "m1");
    assert_eq!(a.funcs, vec![("f".to_string(), vec![1, 2])]);
    let b = r.next_file().unwrap().unwrap();
    assert_eq!((b.path.as_str(), b.star.instrumented()), ("b.c", 0));
    assert!(r.next_file().unwrap().is_none());
}

#[test]
fn spread_out_file_is_named() {
    let mut r = reader(&[
        mcr("*", "a.c", &[1], &[1]),
        mcr("*", "b.c", &[1], &[1]),
        mcr("m", "a.c", &[1], &[1]),
    ]);
    r.next_file().unwrap();
    r.next_file().unwrap();
    let e = r.next_file().unwrap_err().to_string();
    assert_eq!(
        e,
        "result r.jsonl, line 4: records of a.c are not contiguous"
    );
}

#[test]
fn wrong_counts_name_the_line() {
    let bad = mcr("*", "a.c", &[1, 2], &[1, 1]).replace("\"Covered\":2", "\"Covered\":1");
    let mut r = reader(&[mcr("*", "z.c", &[], &[]), bad]);
    r.next_file().unwrap();
    let e = r.next_file().unwrap_err().to_string();
    assert!(
        e.starts_with("result r.jsonl, line 3: MCR of manager \"*\": Instrumented 2 / Covered 1 but the arrays say 2 / 2"),
        "{e}"
    );
    let unsorted = mcr("*", "a.c", &[2, 1], &[1, 1]);
    let e = reader(&[unsorted]).next_file().unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("not ascending"), "{e}");
    let e = ResultReader::new("x", Box::new(std::io::Cursor::new(b"{}\n".to_vec())))
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("result x, line 1: not a header line"), "{e}");
}

#[test]
fn a_second_star_record_after_an_empty_one_was_read_as_one() {
    // An empty `*` record then one with lines: the second replaced the first.
    for second in [mcr("*", "a.c", &[1], &[1]), mcr("*", "a.c", &[], &[])] {
        let recs = [mcr("*", "a.c", &[], &[]), second];
        let e = reader(&recs).next_file().unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("a second MCR of manager \"*\""),
            "{e}"
        );
    }
}

#[test]
fn a_line_0_was_read_as_a_line_of_the_source() {
    let zero = mcr("*", "a.c", &[0, 1], &[1, 1]);
    let e = reader(&[zero]).next_file().unwrap_err().to_string();
    assert!(
        e.contains("line 2") && e.contains("line 0 in LinesInstrumented"),
        "{e}"
    );
}

#[test]
fn a_nil_slice_written_as_null_was_refused() {
    // Go's encoder writes a slice that was never made as `null`.
    let text = format!(
        "{HEAD}\n{}\n{}\n",
        r#"{"MCR":{"Manager":"*","FilePath":"a.c","FileData":{"Instrumented":0,"Covered":0,"LinesInstrumented":null,"HitCounts":null}},"FL":null}"#,
        r#"{"MCR":null,"FL":{"FilePath":"a.c","FuncName":"f","Lines":null}}"#
    );
    let mut r =
        ResultReader::new("r.jsonl", Box::new(std::io::Cursor::new(text.into_bytes()))).unwrap();
    let file = r.next_file().unwrap().expect("the file a.c");
    assert!(r.next_file().unwrap().is_none());
    drop(file);
}

#[test]
fn a_file_without_its_star_record_or_with_hits_past_int64_is_refused() {
    let e = reader(&[mcr("m", "a.c", &[1], &[1])])
        .next_file()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("file \"a.c\" has no MCR record of manager \"*\""),
        "{e}"
    );
    let big = i64::MAX as u64 + 1;
    let e = reader(&[mcr("*", "a.c", &[1, 2], &[1, big])])
        .next_file()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2 has 9223372036854775808 hits, past int64"),
        "{e}"
    );
    // int64's largest is a count.
    let ok = reader(&[mcr("*", "a.c", &[1], &[i64::MAX as u64])]).next_file();
    assert!(ok.unwrap().is_some());
}
