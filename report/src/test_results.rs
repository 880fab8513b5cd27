//! Results written by hand for the crate's tests.

/// A result on `commit` holding a `*` record per file of `files` (path, then
/// (line, hits) pairs), as JSON lines.
pub(crate) fn star_result(commit: &str, files: &[(&str, &[(u32, u64)])]) -> String {
    let mut s = format!(
        r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://r","Commit":"{commit}","Duration":30,"DateTo":"2024-04-08","TotalRows":1}}"#
    );
    s.push('\n');
    for (path, lines) in files {
        let (l, h): (Vec<u32>, Vec<u64>) = lines.iter().copied().unzip();
        let cov = h.iter().filter(|&&x| x > 0).count();
        s += &format!(
            r#"{{"MCR":{{"Manager":"*","FilePath":"{path}","FileData":{{"Instrumented":{},"Covered":{cov},"LinesInstrumented":{l:?},"HitCounts":{h:?}}}}},"FL":null}}"#,
            l.len()
        );
        s.push('\n');
    }
    s
}
