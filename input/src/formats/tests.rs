//! Detection and opening through the registry.

mod detection {
    use super::super::detect::*;
    use super::super::InputFormat;
    use std::io::Read;
    use std::io::Write;
    use std::path::Path;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn files_directories_gzip_and_go_text_are_told_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |n: &str| tmp.path().join(n);
        let csv = b"kernel_repo,kernel_commit\n".to_vec();
        let text = b"mode: set\nx.go:1.1,2.2 1 1\n".to_vec();
        std::fs::write(p("a.csv"), &csv).unwrap();
        std::fs::write(p("a.csv.gz"), gz(&csv)).unwrap();
        std::fs::write(p("t.out"), &text).unwrap();
        std::fs::write(p("t.out.gz"), gz(&text)).unwrap();
        std::fs::write(p("empty"), b"").unwrap();
        std::fs::write(p("broken.gz"), [0x1f, 0x8b, 0, 1, 2]).unwrap();
        std::fs::create_dir(p("cov")).unwrap();
        std::fs::write(p("cov/covmeta.abc"), b"xyz").unwrap();
        std::fs::create_dir(p("plain")).unwrap();
        let d = |n: &str| detect(&p(n)).map(|d| (d.kind, d.gzip, d.bytes));
        assert_eq!(
            d("a.csv").unwrap(),
            (InputFormat::Csv, false, csv.len() as u64)
        );
        assert_eq!(d("a.csv.gz").unwrap().0, InputFormat::Csv);
        assert!(d("a.csv.gz").unwrap().1);
        assert_eq!(d("t.out").unwrap().0, InputFormat::GoText);
        assert_eq!(d("t.out.gz").unwrap().0, InputFormat::GoText);
        assert_eq!(d("empty").unwrap(), (InputFormat::Csv, false, 0));
        assert_eq!(d("broken.gz").unwrap(), (InputFormat::Csv, true, 5));
        assert_eq!(d("cov").unwrap(), (InputFormat::GoCovdata, false, 3));
        assert!(matches!(
            detect(&p("plain")),
            Err(DetectError::NotADirInput)
        ));
        assert!(matches!(detect(&p("missing")), Err(DetectError::Io(_))));
        assert!(matches!(
            detect(Path::new("/dev/null")),
            Err(DetectError::NotAFile)
        ));
    }

    #[test]
    fn a_detected_stream_reads_from_its_first_byte() {
        for data in [&b"mode: count\nrest"[..], b"a,b\n1,2\n", b"mo", b""] {
            let (_, mut r) = detect_stream(data).unwrap();
            let mut all = Vec::new();
            r.read_to_end(&mut all).unwrap();
            assert_eq!(all, data);
        }
    }
}

mod registry {
    use super::super::*;
    use std::io::Read;

    #[test]
    fn every_format_but_auto_is_registered_once() {
        for f in InputFormat::ALL {
            let n = REGISTRY.iter().filter(|r| r.format() == f).count();
            assert_eq!(n, usize::from(f != InputFormat::Auto), "{f}");
            assert_eq!(format_of(f).map(|r| r.format()), (n == 1).then_some(f));
        }
        // `auto`'s fallback: the last stream format claims every stream.
        let last = REGISTRY.iter().rfind(|f| f.directory().is_none()).unwrap();
        assert_eq!(last.format(), InputFormat::Csv);
        assert!(last.claims_head(b"") && last.claims_head(b"mode: "));
    }

    fn rows_of(opened: Opened) -> Vec<(String, String, u32, u64, u64)> {
        let options = InputOptions {
            partial_sha256: None,
            go_modules: vec![covmerge_proto::input::GoModule {
                module: "example.com/m".into(),
                dir: ".".into(),
            }],
        };
        let Reading::Rows(src) = opened.read(&options).unwrap() else {
            panic!("not rows")
        };
        let mut rows = Vec::new();
        let bad = src
            .read_rows(0, &mut |r: &LineRow<'_>| {
                assert_eq!((r.manager, r.commit), (None, None));
                rows.push((r.file.into(), r.func.into(), r.line, r.hits, r.rows));
                Ok(())
            })
            .unwrap();
        assert_eq!(bad, BadLines::default());
        rows
    }

    #[test]
    fn inputs_open_and_read_through_their_format() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let p = |n: &str| tmp.path().join(n).to_string_lossy().into_owned();
        std::fs::write(p("a.csv"), b"kernel_repo,kernel_commit\n").unwrap();
        std::fs::write(p("t.out"), b"mode: set\nexample.com/m/x.go:1.1,2.2 1 1\n").unwrap();
        std::fs::create_dir(p("plain")).unwrap();
        let open = |n: &str, f| open(&p(n), f, rt.handle(), crate::Inflate::Inline);
        let csv = open("a.csv", InputFormat::Auto).unwrap();
        assert_eq!(csv.format(), InputFormat::Csv);
        let Reading::Csv(mut r) = csv.read(&InputOptions::default()).unwrap() else {
            panic!("not CSV text")
        };
        let mut text = String::new();
        r.read_to_string(&mut text).unwrap();
        assert_eq!(text, "kernel_repo,kernel_commit\n");
        let go = open("t.out", InputFormat::Auto).unwrap();
        assert_eq!(go.format(), InputFormat::GoText);
        assert_eq!(
            rows_of(go),
            vec![
                ("x.go".into(), String::new(), 1, 1, 1),
                ("x.go".into(), String::new(), 2, 1, 1)
            ]
        );
        // Forced: read as said, whatever the first bytes.
        assert_eq!(
            open("t.out", InputFormat::Csv).unwrap().format(),
            InputFormat::Csv
        );
        let err = |n: &str, f| open(n, f).err().unwrap().to_string();
        assert!(err("a.csv", InputFormat::GoCovdata)
            .ends_with("a.csv: a Go covdata input must be a local directory"));
        assert!(err("plain", InputFormat::Auto)
            .ends_with("plain: a directory, and not Go coverage data (no covmeta.* file) or a partial (no partial.json)"));
        assert!(err("missing.csv", InputFormat::Auto).contains("missing.csv"));
    }
}
