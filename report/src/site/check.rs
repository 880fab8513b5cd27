//! Where `covmerge report` may write: checked before any work ([`check_out`]).

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::Options;

/// `report --out DIR` must not overwrite or hold what it reads, nor write through a
/// symlink: the result, the `--diff` result and the manifest (local paths or `file://`
/// URLs) must not lie inside DIR (the site would overwrite its own pages' input, and a
/// second run would rewrite it), nor be a file of DIR under another name (a hard
/// link: `index.html` would truncate it); the source root (`dir:`, `git:`, a `file://`
/// `store:`) must not be DIR, inside it, or hold it; and DIR must hold no symlink (one
/// at `index.html` or at `data/` would make the site write outside DIR). A store URL
/// is another place and is not checked.
pub fn check_out(a: &Options) -> Result<()> {
    use covmerge_storage::local::local_path;
    use std::os::unix::fs::MetadataExt;
    let out = &a.out;
    let shown = out.display();
    // DIR, absolute with its symlinks followed, as far as it exists (the rest is
    // created under it).
    let out_abs = absolute(out).with_context(|| format!("--out {shown}"))?;
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    for (name, spec) in [
        ("the result", Some(&a.result)),
        ("the --diff result", a.diff.as_ref()),
        ("the --manifest", a.manifest.as_ref()),
    ] {
        if let Some(p) = spec.and_then(|s| local_path(s)) {
            inputs.push((format!("{name} {}", spec.unwrap()), p));
        }
    }
    for (name, p) in &inputs {
        let Ok(abs) = absolute(p) else { continue };
        if abs.starts_with(&out_abs) {
            anyhow::bail!(
                "--out {shown} holds {name}: the site is written there and would overwrite or delete what it reads; give another directory"
            );
        }
    }
    if let Some(spec) = &a.source {
        let root = match covmerge_source::SourceSpec::parse(spec) {
            Ok(covmerge_source::SourceSpec::Dir(r) | covmerge_source::SourceSpec::Git(r)) => {
                Some(PathBuf::from(r))
            }
            Ok(covmerge_source::SourceSpec::Store(u)) => {
                local_path(u).filter(|_| u.starts_with("file:"))
            }
            Err(_) => None,
        };
        if let Some(root) = root.and_then(|r| absolute(&r).ok()) {
            if root.starts_with(&out_abs) || out_abs.starts_with(&root) {
                anyhow::bail!(
                    "--out {shown} and the source {spec} overlap ({} and {}): the site would be written into the source texts it reads, or over them; give a directory outside the source",
                    out_abs.display(),
                    root.display()
                );
            }
        }
    }
    // What DIR already holds: no symlink, no other name of an input.
    let ids: Vec<(u64, u64, &String)> = inputs
        .iter()
        .filter_map(|(n, p)| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino(), n)))
        .collect();
    let mut stack = match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => vec![out.clone()],
        Ok(m) if m.file_type().is_symlink() => vec![out_abs.clone()],
        Ok(_) => anyhow::bail!("--out {shown}: not a directory"),
        Err(_) => Vec::new(),
    };
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .with_context(|| format!("--out {shown}: reading {}", d.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("--out {shown}: reading {}", d.display()))?;
            let p = e.path();
            let m = std::fs::symlink_metadata(&p)
                .with_context(|| format!("--out {shown}: reading {}", p.display()))?;
            if m.file_type().is_symlink() {
                anyhow::bail!(
                    "--out {shown} holds a symlink, {}: the site would be written through it, outside {shown}; remove it or give another directory",
                    p.display()
                );
            }
            if m.is_dir() {
                stack.push(p);
            } else if let Some((_, _, name)) = ids
                .iter()
                .find(|(dev, ino, _)| *dev == m.dev() && *ino == m.ino())
            {
                anyhow::bail!(
                    "--out {shown} holds {name} under the name {}: writing the site would overwrite it; give another directory",
                    p.display()
                );
            }
        }
    }
    Ok(())
}

/// `path` absolute with its symlinks followed, as far as it exists; the components
/// that do not exist yet are appended as written (`..` among them is refused).
fn absolute(path: &std::path::Path) -> Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut missing = Vec::new();
    let mut p = path.as_path();
    loop {
        if let Ok(c) = p.canonicalize() {
            let mut c = c;
            for m in missing.iter().rev() {
                c.push(m);
            }
            return Ok(c);
        }
        if p.ends_with("..") {
            anyhow::bail!(
                "{}: `..` after a directory that does not exist yet",
                path.display()
            );
        }
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            anyhow::bail!("{}: no existing directory above it", path.display());
        };
        missing.push(name.to_os_string());
        p = parent;
    }
}
