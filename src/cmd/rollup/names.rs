//! The names a roll-up writes under: `{namespace}` in `--partial-out` (one partial per
//! namespace), the namespaces that may fill it, and `--source [NS=]SRC`.

use anyhow::{bail, Result};

/// The placeholder a `--partial-out` URL may hold.
pub(crate) const PLACEHOLDER: &str = "{namespace}";

/// Namespaces one read may route (one partial each): past it the roll-up is refused.
pub(crate) const MAX_NAMESPACES: usize = 1024;

/// Bytes of one empty shard table of a parse thread (two `Vec`s).
const TABLE_BYTES: usize = 48;

/// The namespaces one read may route, and why: [`MAX_NAMESPACES`], fewer when each
/// parse thread's tables (one per shard per namespace, kept while it reads) would take
/// more than an eighth of the `budget`.
pub(crate) fn max_namespaces(budget: usize, threads: usize, shards: u32) -> (usize, String) {
    let per_ns = TABLE_BYTES * threads.max(1) * shards.max(1) as usize;
    let fit = (budget / 8 / per_ns).max(1);
    if fit >= MAX_NAMESPACES {
        return (MAX_NAMESPACES, format!("at most {MAX_NAMESPACES}"));
    }
    (
        fit,
        format!(
            "each costs {per_ns} bytes of tables ({shards} shards × {threads} parse threads), within an eighth of --memory-budget: raise it or lower --shards"
        ),
    )
}

/// Why `ns` cannot name a directory or object prefix (`None`: it can). A namespace
/// that fills `{namespace}` is 1 to 255 bytes of ASCII letters, digits, `-`, `_` and
/// `.`, and not `.` or `..`: safe as one path segment of a local path and of an
/// `s3://` or `gs://` URL, unchanged by any escaping.
pub(crate) fn unsafe_segment(ns: &[u8]) -> Option<String> {
    if ns.is_empty() {
        return Some("an empty namespace cannot name a directory".into());
    }
    if ns == b"." || ns == b".." {
        return Some("`.` and `..` are not directory names".into());
    }
    if ns == b"partial.json" {
        return Some(
            "`partial.json` is the name of a partial's description (`DIR/partial.json` reads as the partial DIR)"
                .into(),
        );
    }
    if ns.len() > 255 {
        return Some(format!("{} bytes, more than 255", ns.len()));
    }
    if let Some(&c) = ns
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
    {
        return Some(format!(
            "{:?} is not one of the characters a namespace in a path may hold (A-Z a-z 0-9 - _ .)",
            char::from(c).escape_default().to_string()
        ));
    }
    None
}

/// The check a routed namespace must pass, for the split's router.
pub(crate) fn check_routed(ns: &[u8]) -> Result<(), String> {
    match unsafe_segment(ns) {
        None => Ok(()),
        // The empty namespace is no `--namespace` (a namespace is 1 byte at least):
        // its rows are counted as another namespace's by every job.
        Some(why) if ns.is_empty() => Err(format!(
            "cannot fill {PLACEHOLDER} in --partial-out: {why}, and no --namespace selects its rows (a namespace is 1 byte at least); drop them from the export, or give --namespace NS with a --partial-out without {PLACEHOLDER} to roll up each other namespace alone"
        )),
        Some(why) => Err(format!(
            "cannot fill {PLACEHOLDER} in --partial-out: {why}; give --namespace NS with a --partial-out without {PLACEHOLDER} to roll it up alone"
        )),
    }
}

/// `--partial-out` as given: whether it holds `{namespace}`, refused when it holds
/// another `{...}` (a misspelt placeholder would name a directory of its own).
pub(crate) fn template(url: &str) -> Result<bool> {
    let rest = url.replace(PLACEHOLDER, "");
    if rest.contains('{') || rest.contains('}') {
        bail!(
            "--partial-out {}: `{{` and `}}` may only make {PLACEHOLDER} (the one placeholder)",
            covmerge_storage::shown_url(url)
        );
    }
    Ok(rest.len() != url.len())
}

/// `url` with every `{namespace}` replaced by `ns` (checked by [`unsafe_segment`]).
pub(crate) fn fill(url: &str, ns: &str) -> Result<String> {
    if let Some(why) = unsafe_segment(ns.as_bytes()) {
        bail!(
            "namespace {ns:?} cannot fill {PLACEHOLDER} in --partial-out {}: {why}",
            covmerge_storage::shown_url(url)
        );
    }
    Ok(url.replace(PLACEHOLDER, ns))
}

/// The `--source` flags: one for every namespace, and one per namespace (`NS=SRC`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Sources {
    pub(crate) all: Option<String>,
    pub(crate) per: Vec<(String, String)>,
}

impl Sources {
    /// Parses `--source` values: `NS=SRC` when what precedes the first `=` holds no
    /// `:` (a source spec starts with its kind, `dir:`, `git:` or `store:`), else a
    /// source for every namespace. Two for one namespace, or two for all, are refused.
    pub(crate) fn parse(flags: &[String]) -> Result<Sources> {
        let mut s = Sources::default();
        for f in flags {
            match f.split_once('=').filter(|(ns, _)| !ns.contains(':')) {
                Some((ns, src)) => {
                    if src.is_empty() {
                        bail!("--source {f}: NS=SRC needs a source after `=`");
                    }
                    if let Some((_, o)) = s.per.iter().find(|(n, _)| n == ns) {
                        bail!(
                            "--source {ns}={} and --source {f}: namespace {ns:?} is given two sources",
                            covmerge_storage::shown_url(o)
                        );
                    }
                    crate::job::check_source(src)?;
                    s.per.push((ns.to_owned(), src.to_owned()));
                }
                None => {
                    if let Some(o) = &s.all {
                        bail!(
                            "--source {} and --source {}: one source serves every namespace; give the others as NS=SRC",
                            covmerge_storage::shown_url(o),
                            covmerge_storage::shown_url(f)
                        );
                    }
                    crate::job::check_source(f)?;
                    s.all = Some(f.clone());
                }
            }
        }
        Ok(s)
    }

    /// The source of namespace `ns`'s raw rows.
    pub(crate) fn of(&self, ns: &str) -> Option<&str> {
        self.per
            .iter()
            .find(|(n, _)| n == ns)
            .map(|(_, s)| s.as_str())
            .or(self.all.as_deref())
    }

    /// Refuses a `--source NS=SRC` whose namespace is not among `known` (the
    /// namespaces the roll-up writes).
    pub(crate) fn check_known(&self, known: &[String]) -> Result<()> {
        for (ns, src) in &self.per {
            if !known.iter().any(|k| k == ns) {
                bail!(
                    "--source {ns}={}: no row or partial of the inputs is of namespace {ns:?} (they hold {})",
                    covmerge_storage::shown_url(src),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known
                            .iter()
                            .map(|k| format!("{k:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_that_cannot_be_a_path_segment_are_refused() {
        for ok in ["upstream", "android-6.1", "lts_5.15", ".x", "ChromeOS"] {
            assert_eq!(unsafe_segment(ok.as_bytes()), None, "{ok}");
        }
        for bad in [
            "", ".", "..", "a/b", "a\\b", "a b", "a?b", "a#b", "a%2f", "ü", "a\nb",
        ] {
            assert!(unsafe_segment(bad.as_bytes()).is_some(), "{bad:?}");
        }
        assert!(unsafe_segment(&[b'a'; 256]).is_some());
        assert_eq!(unsafe_segment(&[b'a'; 255]), None);
    }

    #[test]
    fn the_placeholder_fills_every_place_and_nothing_else_is_one() {
        assert!(template("out/{namespace}/2026-12-04/").unwrap());
        assert!(!template("out/2026-12-04/").unwrap());
        assert_eq!(
            fill("gs://b/{namespace}/x/{namespace}", "up").unwrap(),
            "gs://b/up/x/up"
        );
        assert!(template("out/{namesapce}/").is_err());
        assert!(template("out/{namespace}}/").is_err());
        assert!(fill("out/{namespace}/", "..").is_err());
    }

    #[test]
    fn sources_per_namespace_and_for_all() {
        let s = Sources::parse(&[
            "dir:/all".to_owned(),
            "android=git:/a".to_owned(),
            "dir:/with=sign".to_owned(),
        ]);
        // Two sources for all: refused, naming both.
        let e = s.unwrap_err().to_string();
        assert!(
            e.contains("dir:/all") && e.contains("dir:/with=sign"),
            "{e}"
        );
        let s = Sources::parse(&["dir:/all".to_owned(), "android=git:/a".to_owned()]).unwrap();
        assert_eq!(s.of("android"), Some("git:/a"));
        assert_eq!(s.of("upstream"), Some("dir:/all"));
        let e = Sources::parse(&["a=dir:/x".to_owned(), "a=dir:/y".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("two sources"), "{e}");
        let e = s.check_known(&["upstream".into()]).unwrap_err().to_string();
        assert!(e.contains("android") && e.contains("upstream"), "{e}");
    }
}
