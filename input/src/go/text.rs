//! Go text profiles: a `mode: set|count|atomic` line, then one block a line,
//! `import/path/file.go:L1.C1,L2.C2 numStmts count`. A repeated identical `mode:` line
//! (profiles concatenated) is skipped; blank lines are skipped.

use std::io::BufRead;

use super::{check_pos, Blocks, GoError, Mode, Pos};

/// The longest line read; longer is a bad line, skipped without being held.
pub const MAX_LINE: usize = 1 << 20;

/// A malformed block line: 1-based line number and the problem.
pub type BadLine = (u64, String);

/// What a profile held.
#[derive(Debug, Default)]
pub struct TextProfile {
    /// The blocks of the profile, counts summed.
    pub blocks: Blocks,
    /// Block lines read (good and bad).
    pub lines_read: u64,
    /// Malformed block lines.
    pub bad: u64,
    /// The first bad lines, in input order.
    pub bad_samples: Vec<BadLine>,
}

/// Whether `head` (the first bytes of a decompressed input) starts a Go text profile.
pub fn looks_like_profile(head: &[u8]) -> bool {
    head.starts_with(b"mode: ")
}

/// Reads a profile. Malformed block lines are counted (the first few named); once more
/// than `max_bad` were seen, reading stops with an error naming the line.
pub fn read_profile<R: BufRead>(
    input: &str,
    mut r: R,
    max_bad: u64,
) -> Result<TextProfile, GoError> {
    let mut out = TextProfile::default();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut mode: Option<Mode> = None;
    loop {
        buf.clear();
        let (got, too_long) = read_line(&mut r, &mut buf, MAX_LINE).map_err(|e| GoError::Line {
            input: input.to_string(),
            line: line_no + 1,
            problem: format!("reading: {e}"),
        })?;
        if !got {
            break;
        }
        line_no += 1;
        let problem = if too_long {
            Some(format!("line longer than {MAX_LINE} bytes"))
        } else {
            let text = trim_eol(&buf);
            if text.is_empty() {
                continue;
            }
            match std::str::from_utf8(text) {
                Err(_) => Some("not UTF-8".to_string()),
                Ok(text) => {
                    if let Some(m) = text.strip_prefix("mode: ") {
                        let m = Mode::parse(m.trim()).ok_or_else(|| GoError::Line {
                            input: input.to_string(),
                            line: line_no,
                            problem: format!("unknown counter mode {m:?}"),
                        })?;
                        match mode {
                            None => {
                                mode = Some(m);
                                out.blocks.set_mode(m).expect("first mode");
                                continue;
                            }
                            Some(old) if old == m => continue,
                            Some(old) => Some(format!(
                                "mode {} differs from the profile's mode {}",
                                m.name(),
                                old.name()
                            )),
                        }
                    } else if mode.is_none() {
                        return Err(GoError::Line {
                            input: input.to_string(),
                            line: line_no,
                            problem: "a Go text profile starts with a `mode: ` line".into(),
                        });
                    } else {
                        out.lines_read += 1;
                        match parse_block(text) {
                            Ok((file, pos, stmts, count)) => {
                                match out.blocks.add(file, "", pos, stmts, count) {
                                    Ok(()) => None,
                                    Err(e) => Some(e.to_string()),
                                }
                            }
                            Err(p) => Some(p),
                        }
                    }
                }
            }
        };
        if let Some(problem) = problem {
            if too_long {
                out.lines_read += 1;
            }
            out.bad += 1;
            if out.bad_samples.len() < 5 {
                out.bad_samples.push((line_no, problem.clone()));
            }
            if out.bad > max_bad {
                return Err(GoError::Line {
                    input: input.to_string(),
                    line: out.bad_samples[0].0,
                    problem: format!(
                        "{} ({} bad line(s) seen; --max-bad-rows {max_bad})",
                        out.bad_samples[0].1, out.bad
                    ),
                });
            }
        }
    }
    if mode.is_none() {
        return Err(GoError::Input {
            input: input.to_string(),
            problem: "empty Go text profile (no `mode: ` line)".into(),
        });
    }
    Ok(out)
}

fn trim_eol(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Reads one line (with its `\n`) into `buf`, holding at most `max` bytes: a longer
/// line is consumed to its end and reported as too long. `false` at the end.
fn read_line<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(bool, bool)> {
    let mut any = false;
    let mut too_long = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok((any, too_long));
        }
        any = true;
        let (take, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if !too_long {
            if buf.len() + take > max + 2 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&avail[..take]);
            }
        }
        r.consume(take);
        if done {
            return Ok((true, too_long));
        }
    }
}

/// `file:L1.C1,L2.C2 stmts count`.
pub fn parse_block(line: &str) -> Result<(&str, Pos, u32, u64), String> {
    let bad = || format!("expected `file:L1.C1,L2.C2 statements count`, found {line:?}");
    let mut it = line.rsplitn(3, ' ');
    let count = it.next().ok_or_else(bad)?;
    let stmts = it.next().ok_or_else(bad)?;
    let rest = it.next().ok_or_else(bad)?;
    let (file, span) = rest.rsplit_once(':').ok_or_else(bad)?;
    if file.is_empty() {
        return Err(bad());
    }
    let (a, b) = span.split_once(',').ok_or_else(bad)?;
    let (sl, sc) = a.split_once('.').ok_or_else(bad)?;
    let (el, ec) = b.split_once('.').ok_or_else(bad)?;
    let num = |s: &str, what: &str| -> Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(format!("{what} {s:?} is not a non-negative integer"));
        }
        s.parse::<u32>()
            .map_err(|_| format!("{what} {s:?} is too large"))
    };
    let pos = [
        num(sl, "start line")?,
        num(sc, "start column")?,
        num(el, "end line")?,
        num(ec, "end column")?,
    ];
    check_pos(pos)?;
    let stmts = num(stmts, "statement count")?;
    if count.is_empty() || !count.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("count {count:?} is not a non-negative integer"));
    }
    let count: u64 = count
        .parse()
        .ok()
        .filter(|&c| c <= i64::MAX as u64)
        .ok_or_else(|| format!("count {count:?} does not fit int64"))?;
    Ok((file, pos, stmts, count))
}

#[cfg(test)]
mod tests {
    use super::super::ModuleMap;
    use super::*;
    use covmerge_proto::input::GoModule;

    fn rules() -> ModuleMap {
        ModuleMap::new(&[GoModule {
            module: "example.com/m".into(),
            dir: ".".into(),
        }])
    }

    #[test]
    fn profile_blocks_become_lines() {
        let p = "mode: count\n\
                 example.com/m/pkg/f.go:3.14,5.2 2 4\n\
                 example.com/m/pkg/f.go:3.14,5.2 2 1\n\
                 \n\
                 mode: count\n\
                 example.com/m/pkg/f.go:7.1,7.30 1 0\n\
                 example.com/m/main.go:1.1,2.1 1 9\r\n";
        let prof = read_profile("p.out", p.as_bytes(), 0).unwrap();
        assert_eq!(prof.lines_read, 4);
        assert_eq!(prof.blocks.mode(), Some(Mode::Count));
        let lines = prof.blocks.lines("p.out", &rules()).unwrap();
        let got: Vec<(&str, u32, u64)> = lines
            .iter()
            .map(|l| (l.file.as_str(), l.line, l.hits))
            .collect();
        assert_eq!(
            got,
            vec![
                ("main.go", 1, 9),
                ("main.go", 2, 9),
                ("pkg/f.go", 3, 5),
                ("pkg/f.go", 4, 5),
                ("pkg/f.go", 5, 5),
                ("pkg/f.go", 7, 0)
            ]
        );
    }

    #[test]
    fn bad_profile_lines_are_named_and_counted() {
        let p = "mode: set\n\
                 example.com/m/f.go:1.1,1.9 1 1\n\
                 example.com/m/f.go:1.1 1 1\n\
                 example.com/m/f.go:9.1,3.9 1 1\n\
                 example.com/m/f.go:4.1,4.9 1 -3\n\
                 mode: count\n";
        let err = read_profile("p.out", p.as_bytes(), 0)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("p.out:3: expected"), "{err}");
        let prof = read_profile("p.out", p.as_bytes(), 10).unwrap();
        assert_eq!(prof.bad, 4);
        let at: Vec<u64> = prof.bad_samples.iter().map(|b| b.0).collect();
        assert_eq!(at, vec![3, 4, 5, 6]);
        assert!(prof.bad_samples[1].1.contains("does not run forward"));
        assert!(prof.bad_samples[3].1.contains("mode count differs"));
        let no_mode = read_profile("q", "example.com/m/f.go:1.1,1.9 1 1\n".as_bytes(), 9);
        assert!(no_mode
            .unwrap_err()
            .to_string()
            .contains("q:1: a Go text profile starts"));
        let huge = format!(
            "mode: set\nexample.com/m/f.go:1.1,1.9 1 {}\n",
            "9".repeat(30)
        );
        let prof = read_profile("h", huge.as_bytes(), 1).unwrap();
        assert!(prof.bad_samples[0].1.contains("does not fit int64"));
    }

    #[test]
    fn an_over_long_line_is_bad_and_not_held() {
        let mut p = b"mode: set\n".to_vec();
        p.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        p.extend(b"\nexample.com/m/f.go:1.1,1.9 1 1\n");
        let prof = read_profile("p", &p[..], 1).unwrap();
        assert_eq!(prof.bad, 1);
        assert_eq!(prof.bad_samples[0].0, 2);
        assert_eq!(prof.blocks.len(), 1);
    }
}
