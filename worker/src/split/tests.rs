use super::*;

#[test]
fn newlines_are_counted_across_lanes() {
    for len in [0, 1, 254, 255, 256, 10_000] {
        let buf: Vec<u8> = (0..len)
            .map(|i| if i % 3 == 0 { b'\n' } else { b'x' })
            .collect();
        let want = buf.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(count_newlines(&buf), want, "len {len}");
    }
    assert_eq!(count_newlines(&[b'\n'; 1000]), 1000);
}

fn run(text: &str, threads: usize, max_bad: u64) -> (SplitOutcome, u64) {
    let rows = AtomicU64::new(0);
    let emit = |flush: Flush| -> Result<(), SplitError> {
        crate::spill::for_each_block(&flush.bytes, |b| {
            rows.fetch_add(
                b.entries.iter().map(|(_, v)| v.rows).sum::<u64>(),
                Ordering::Relaxed,
            );
            Ok(())
        })
        .unwrap();
        Ok(())
    };
    let settings = SplitSettings {
        shards: 4,
        max_bad_rows: max_bad,
        memory_budget: 4096,
        threads,
        ..Default::default()
    };
    let o = split_input("t.csv", text.as_bytes(), settings, &emit).unwrap();
    (o, rows.load(Ordering::Relaxed))
}

#[test]
fn every_row_lands_once_and_lines_are_numbered_across_pieces() {
    let mut text =
        String::from("file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n");
    for i in 0..300_000u32 {
        if i == 250_000 {
            text.push_str("f.c,r,c,\"quoted\nfunc\",m,1,1\n"); // a record spanning lines
        }
        text.push_str(&format!(
            "f{}.c,r,c{},fn,m{},{},{}\n",
            i % 97,
            i % 5,
            i % 3,
            i % 500 + 1,
            i
        ));
    }
    text.push_str("bad.c,r,c,fn,m,NaN,1\n");
    // Blank lines count as lines.
    text.push_str("\n\nbad2.c,r,c,fn,m,1,x\n");
    for threads in [1, 3] {
        let (o, rows) = run(&text, threads, 2);
        assert_eq!(o.counts.rows_in, 300_003);
        assert_eq!(o.counts.rows_bad, 2);
        assert_eq!(rows, 300_001);
        // header + 300,000 rows + the two-line quoted record, then the bad row.
        assert_eq!(o.bad_rows[0].line, 300_004, "threads {threads}");
        assert_eq!(o.bad_rows[1].line, 300_007, "after two blank lines");
    }
}

/// `read_full` once zeroed each piece before reading into it: a 1 MiB memset per
/// input, 80 % of the CPU of a job of 10k one-row objects. It now reads into spare
/// capacity: what it must still do is fill up to `want` across short reads and
/// interruptions, and keep what was read before an error.
#[test]
fn read_full_fills_across_short_reads_and_interruptions_without_zeroing_a_piece() {
    struct Dribble {
        data: Vec<u8>,
        at: usize,
        calls: usize,
        fail_at: Option<usize>,
    }
    impl Read for Dribble {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            if Some(self.at) == self.fail_at {
                return Err(std::io::Error::other("disk gone"));
            }
            let n = out.len().min(7).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }
    let data: Vec<u8> = (0..200u8).collect();
    let mut r = Dribble {
        data: data.clone(),
        at: 0,
        calls: 0,
        fail_at: None,
    };
    let mut buf = b"head".to_vec();
    assert_eq!(read_full(&mut r, &mut buf, 150).unwrap(), 150);
    assert_eq!(&buf[..4], b"head");
    assert_eq!(&buf[4..], &data[..150]);
    assert!(buf.capacity() >= 154);
    // The rest, then the end of the input.
    assert_eq!(read_full(&mut r, &mut buf, 150).unwrap(), 50);
    assert_eq!(&buf[4..], &data[..]);
    assert_eq!(read_full(&mut r, &mut buf, 150).unwrap(), 0);
    // An error keeps what came before it.
    let mut r = Dribble {
        data: data.clone(),
        at: 0,
        calls: 0,
        fail_at: Some(14),
    };
    let mut buf = Vec::new();
    assert!(read_full(&mut r, &mut buf, 150).is_err());
    assert_eq!(buf, &data[..14]);
}

/// A manager that would take another record's name (`*`, a group's NAME), or is empty
/// or past the cap, was merged as a manager: now a bad row on both paths of the split,
/// the vectorized one (no `"` in the piece) and the csv crate's (a quoted field), each
/// named by line; the same name is bad however often it comes (checked once, cached).
#[test]
fn reserved_and_group_managers_are_bad_rows_on_both_parse_paths() {
    let long = "m".repeat(covmerge_proto::limits::MAX_MANAGER_BYTES + 1);
    let at_cap = "m".repeat(covmerge_proto::limits::MAX_MANAGER_BYTES);
    for quoted in [false, true] {
        let q = if quoted { "\"f\"" } else { "f" };
        let text = format!(
            "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n\
             r,c,a.c,{q},ok,1,1\nr,c,a.c,{q},*,1,1\nr,c,a.c,{q},gcc,2,1\nr,c,a.c,{q},,3,1\n\
             r,c,a.c,{q},{long},4,1\nr,c,a.c,{q},*,5,1\nr,c,a.c,{q},{at_cap},6,1\nr,c,a.c,{q},gcc2,7,1\n"
        );
        let rows = AtomicU64::new(0);
        let emit = |flush: Flush| -> Result<(), SplitError> {
            crate::spill::for_each_block(&flush.bytes, |b| {
                rows.fetch_add(
                    b.entries.iter().map(|(_, v)| v.rows).sum::<u64>(),
                    Ordering::Relaxed,
                );
                Ok(())
            })
            .unwrap();
            Ok(())
        };
        let settings = SplitSettings {
            shards: 2,
            max_bad_rows: 10,
            memory_budget: 1 << 20,
            threads: 1,
            groups: Arc::new(vec![
                covmerge_proto::group::Group::parse("gcc=gcc*").unwrap()
            ]),
        };
        let o = split_input("t.csv", text.as_bytes(), settings, &emit).unwrap();
        assert_eq!(o.counts.rows_in, 8, "quoted {quoted}");
        assert_eq!(o.counts.rows_bad, 5, "quoted {quoted}: {:?}", o.bad_rows);
        assert_eq!(rows.load(Ordering::Relaxed), 3, "quoted {quoted}");
        let said: Vec<(u64, &str)> = o
            .bad_rows
            .iter()
            .map(|b| (b.line, b.problem.as_str()))
            .collect();
        assert_eq!(
            said.iter().map(|s| s.0).collect::<Vec<_>>(),
            [3, 4, 5, 6, 7]
        );
        assert!(
            said[0].1.contains("column `manager`: \"*\" is `*`"),
            "{said:?}"
        );
        assert!(
            said[1].1.contains("is the NAME of --group gcc=gcc*"),
            "{said:?}"
        );
        assert!(said[2].1.contains("\"\" is empty"), "{said:?}");
        assert!(
            said[3]
                .1
                .contains("is 1025 bytes, longer than the 1024 byte cap"),
            "{said:?}"
        );
        assert!(said[3].1.len() < 600, "a long name is cut in its message");
        assert!(said[4].1.contains("\"*\" is `*`"), "{said:?}");
    }
}

/// A spill write that failed (a full TMPDIR) stopped every parse thread, but the
/// cutter stayed parked in `send` on the full channel to them, forever, no CPU, until
/// a signal: the receiver was still held by the thread that waited for them. Now the
/// split returns the write's error.
#[test]
fn a_failed_spill_write_left_the_cutter_parked_in_a_full_channel() {
    let mut text =
        String::from("file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n");
    for i in 0..200_000u32 {
        text.push_str(&format!("f{}.c,r,c,fn,m,{},1\n", i % 97, i % 500 + 1));
    }
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let emit = |_: Flush| -> Result<(), SplitError> {
            Err(SplitError::Emit {
                message: "no space left on device".into(),
                transient: false,
            })
        };
        let settings = SplitSettings {
            shards: 4,
            max_bad_rows: 0,
            memory_budget: 4096,
            threads: 2,
            groups: Default::default(),
        };
        let limits = Limits {
            piece: 4096,
            ..Limits::DEFAULT
        };
        let r = split_input_with(
            "t.csv",
            text.as_bytes(),
            settings,
            super::Namespaces::Job(None),
            &emit,
            limits,
        );
        let _ = done.send(r.map(|_| ()).map_err(|e| e.to_string()));
    });
    let r = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the split never returned: a thread is parked in a channel");
    let e = r.unwrap_err();
    assert!(e.contains("no space left on device"), "{e}");
}

/// A format whose rows are already summed (each the sum of several input rows, under
/// a manager and commit of its own) comes in through [`rows::split_rows`]: its rows
/// keep their counts, and its own manager, commit and the input's are told apart.
#[test]
fn summed_rows_of_a_format_keep_their_counts_and_names() {
    use crate::input::formats::{BadLines, LineRow, ReadError, RowSink, RowSource};
    struct Summed(u32);
    impl RowSource for Summed {
        fn read_rows(
            self: Box<Self>,
            _: u64,
            sink: &mut RowSink<'_>,
        ) -> Result<BadLines, ReadError> {
            for line in 1..=self.0 {
                let own = line % 2 == 0;
                sink(&LineRow {
                    file: "a/b.go",
                    func: "f",
                    line,
                    hits: 10,
                    rows: 3,
                    manager: own.then_some("m-own"),
                    commit: own.then_some("c-own"),
                    kind: Default::default(),
                })?;
            }
            Ok(BadLines {
                count: 1,
                samples: vec![(7, "a bad line".into())],
            })
        }
    }
    let got = Mutex::new(Vec::new());
    let emit = |flush: Flush| -> Result<(), SplitError> {
        crate::spill::for_each_block(&flush.bytes, |b| {
            for (k, v) in &b.entries {
                let s = |i: u32| String::from_utf8(b.strings[i as usize].to_vec()).unwrap();
                got.lock()
                    .unwrap()
                    .push((k.sl, s(k.manager), s(k.commit), v.hits, v.rows));
            }
            Ok(())
        })
        .unwrap();
        Ok(())
    };
    let spec = covmerge_proto::input::InputSpec {
        manager: "m-in".into(),
        commit: "c-in".into(),
        ..Default::default()
    };
    let settings = SplitSettings {
        shards: 2,
        max_bad_rows: 5,
        memory_budget: 1 << 20,
        threads: 1,
        ..Default::default()
    };
    let o = rows::split_rows(
        "p.parquet",
        Box::new(Summed(4)),
        &spec,
        None,
        settings.clone(),
        &emit,
    )
    .unwrap();
    assert_eq!((o.counts.rows_in, o.counts.rows_bad), (4 * 3 + 1, 1));
    assert_eq!(o.bad_rows[0].to_string(), "p.parquet:7: a bad line");
    let mut got = got.into_inner().unwrap();
    got.sort();
    let row = |l: u32, own: bool| {
        let (m, c) = if own {
            ("m-own", "c-own")
        } else {
            ("m-in", "c-in")
        };
        (l, m.to_string(), c.to_string(), 10, 3)
    };
    assert_eq!(
        got,
        vec![row(1, false), row(2, true), row(3, false), row(4, true)]
    );
    // A spill write that fails stops the reading, and is the split's error.
    let failing = |_: Flush| -> Result<(), SplitError> {
        Err(SplitError::Emit {
            message: "disk full".into(),
            transient: false,
        })
    };
    let settings = SplitSettings {
        memory_budget: 0,
        ..settings
    };
    let e = rows::split_rows(
        "p.parquet",
        Box::new(Summed(5000)),
        &spec,
        None,
        settings,
        &failing,
    )
    .unwrap_err();
    assert!(matches!(e, SplitError::Emit { .. }), "{e}");
}

/// A routed split of `text` at 4 shards: rows per namespace index as the chunks carry
/// them, the router's counts, and the outcome.
fn run_routed(
    text: &str,
    threads: usize,
    check: Box<route::NamespaceCheck>,
) -> (
    Result<SplitOutcome, SplitError>,
    Vec<u64>,
    Vec<route::Routed>,
) {
    let rows = Mutex::new(Vec::<u64>::new());
    let emit = |flush: Flush| -> Result<(), SplitError> {
        for (shard, range) in &flush.chunks {
            let (ns, s) = route::Router::unroute(shard.0, 4);
            assert!(s < 4);
            crate::spill::for_each_block(&flush.bytes[range.clone()], |b| {
                let mut r = rows.lock().unwrap();
                if r.len() <= ns as usize {
                    r.resize(ns as usize + 1, 0);
                }
                r[ns as usize] += b.entries.iter().map(|(_, v)| v.rows).sum::<u64>();
                Ok(())
            })
            .unwrap();
        }
        Ok(())
    };
    let settings = SplitSettings {
        shards: 4,
        max_bad_rows: 10,
        memory_budget: 4096,
        threads,
        ..Default::default()
    };
    let router = route::Router::new(8, "a test's".into(), check);
    let ns = Namespaces::Route(&router);
    let o = split_input_of_namespace("t.csv", text.as_bytes(), settings, ns, &emit);
    (o, rows.into_inner().unwrap(), router.namespaces())
}

#[test]
fn routed_rows_go_to_their_namespaces_tables_on_both_parse_paths() {
    let mut text = String::from(
        "namespace,file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n",
    );
    let names = ["up", "android", "next"];
    for i in 0..30_000u32 {
        let ns = names[(i % 7 % 3) as usize];
        if i == 20_000 {
            // A quoted record: its piece is read by the csv crate.
            text.push_str("android,f.c,r,c,\"quoted\nfunc\",m,1,1\n");
        }
        text.push_str(&format!(
            "{ns},f{}.c,r,c,fn,m{},{},{i}\n",
            i % 13,
            i % 3,
            i % 50 + 1
        ));
    }
    text.push_str("next,bad.c,r,c,fn,m,NaN,1\n"); // bad, of `next`
    text.push_str("too,few\n"); // bad, of no namespace
    let mut want = [0u64; 3];
    for i in 0..30_000u32 {
        want[(i % 7 % 3) as usize] += 1;
    }
    want[1] += 1;
    for threads in [1, 3] {
        let (o, rows, routed) = run_routed(&text, threads, Box::new(|_| Ok(())));
        let o = o.unwrap();
        assert_eq!(o.counts.rows_bad, 2);
        assert_eq!(o.counts.rows_in, 30_000 + 1 + 2);
        for (i, name) in names.iter().enumerate() {
            let r = routed
                .iter()
                .position(|r| r.name == name.as_bytes())
                .unwrap();
            let bad = u64::from(*name == "next");
            assert_eq!(routed[r].rows, want[i] + bad, "{name}, {threads} threads");
            assert_eq!(routed[r].rows_bad, bad, "{name}");
            assert_eq!(rows[r], want[i], "{name}: rows in its chunks");
        }
        assert!(o.namespaces.column && o.namespaces.others.is_empty());
    }
}

#[test]
fn a_namespace_the_router_refuses_fails_the_split_naming_its_line() {
    let check = |ns: &[u8]| {
        if ns.contains(&b'/') {
            Err("no slash".to_owned())
        } else {
            Ok(())
        }
    };
    let head = "namespace,file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n";
    for quoted in [false, true] {
        let f = if quoted { "\"fn\"" } else { "fn" };
        let text =
            format!("{head}up,a.c,r,c,{f},m,1,1\nup,a.c,r,c,fn,m,2,1\na/b,a.c,r,c,fn,m,1,1\n");
        let (o, _, _) = run_routed(&text, 1, Box::new(check));
        let e = o.unwrap_err().to_string();
        assert!(
            e.contains("t.csv") && e.contains("\"a/b\"") && e.contains("no slash"),
            "{e}"
        );
        assert!(e.contains(":4") || e.contains("line 4"), "{e}");
    }
    // An input without the column cannot be routed.
    let (o, _, _) = run_routed(
        "file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\na.c,r,c,f,m,1,1\n",
        1,
        Box::new(check),
    );
    assert!(o.unwrap_err().to_string().contains("no namespace column"));
}
