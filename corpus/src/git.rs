//! Writing the synthetic history into a bare git repository with
//! `git fast-import` (fixed identities and timestamps: deterministic shas).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::Error;

/// One commit of the history to import.
pub(crate) struct GitCommit<'a> {
    pub(crate) message: String,
    pub(crate) time: u64,
    /// (path, new content) for added or modified files.
    pub(crate) modified: Vec<(&'a str, Vec<u8>)>,
    pub(crate) deleted: Vec<&'a str>,
}

fn git(dir: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    // Keep user/system configuration (default object format, hooks, ...)
    // from changing the result.
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY");
    if let Some(d) = dir {
        c.arg("--git-dir").arg(d);
    }
    c
}

fn run(mut cmd: Command, what: &str) -> Result<String, Error> {
    let out = cmd.output().map_err(|e| Error::Git {
        command: what.to_string(),
        status: "failed to start".to_string(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Git {
            command: what.to_string(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Creates the bare repository at `repo` and imports `commits` as a linear
/// history on refs/heads/master. Returns the commit shas in order.
pub(crate) fn write_repo<'a>(
    repo: &Path,
    commits: impl Iterator<Item = GitCommit<'a>>,
) -> Result<Vec<String>, Error> {
    let mut init = git(None);
    init.args([
        "-c",
        "init.defaultBranch=master",
        "init",
        "--quiet",
        "--bare",
        "--template=",
        "--object-format=sha1",
    ])
    .arg(repo);
    run(init, "git init --bare")?;

    let mut fi = git(Some(repo));
    fi.args(["fast-import", "--quiet", "--date-format=raw"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = fi.spawn().map_err(|e| Error::Git {
        command: "git fast-import".into(),
        status: "failed to start".into(),
        stderr: e.to_string(),
    })?;
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let stdin = child.stdin.take().expect("piped stdin");
    let write_result = (|| -> std::io::Result<usize> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        w.write_all(b"feature done\n")?;
        let mut n = 0usize;
        for c in commits {
            n += 1;
            let ident = format!("Syzkaller Corpus <corpus@example.invalid> {} +0000", c.time);
            write!(
                w,
                "commit refs/heads/master\nmark :{n}\nauthor {ident}\ncommitter {ident}\n"
            )?;
            write!(w, "data {}\n{}\n", c.message.len(), c.message)?;
            if n > 1 {
                writeln!(w, "from :{}", n - 1)?;
            }
            for p in &c.deleted {
                writeln!(w, "D {p}")?;
            }
            for (p, data) in &c.modified {
                write!(w, "M 100644 inline {p}\ndata {}\n", data.len())?;
                w.write_all(data)?;
                w.write_all(b"\n")?;
            }
            w.write_all(b"\n")?;
        }
        w.write_all(b"done\n")?;
        w.flush()?;
        Ok(n)
    })();
    let status = child.wait().map_err(|e| Error::Git {
        command: "git fast-import".into(),
        status: "wait failed".into(),
        stderr: e.to_string(),
    })?;
    let err_text = err_thread.join().unwrap_or_default();
    if !status.success() || write_result.is_err() {
        let mut stderr = err_text;
        if let Err(e) = &write_result {
            stderr.push_str(&format!("\n(writing the import stream: {e})"));
        }
        return Err(Error::Git {
            command: "git fast-import".into(),
            status: status.to_string(),
            stderr,
        });
    }
    let n = write_result.unwrap_or(0);

    let mut rl = git(Some(repo));
    rl.args(["rev-list", "--reverse", "refs/heads/master"]);
    let out = run(rl, "git rev-list")?;
    let shas: Vec<String> = out
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if shas.len() != n {
        return Err(Error::Git {
            command: "git rev-list".into(),
            status: "unexpected output".into(),
            stderr: format!("expected {n} commits, got {}", shas.len()),
        });
    }
    Ok(shas)
}
