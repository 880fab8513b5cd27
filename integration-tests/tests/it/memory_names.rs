//! The best function name of each line, held across name passes (a file whose
//! distinct names outgrow the merge's share): each distinct name once, whatever the
//! lines that hold it.

use crate::bad_input::HDR;
use crate::memory::merge_with;

/// 20 distinct function names of ~1 MB, one per line over 200 lines of one file (each
/// name on 10 lines), at `--memory-budget 16MiB`: the names are counted in passes, and
/// each line's best name was kept as its own copy, ~1 MB a line (400 lines: 429 MB
/// peak RSS, 800: 829 MB). The lines now share their names (400 lines: 62 MB).
#[test]
fn best_names_across_passes_were_copied_once_per_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (names, lines) = (20, 200);
    let root = tmp.path().join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (0..lines).map(|i| format!("int x{i};\n")).collect();
    std::fs::write(root.join("a.c"), text).unwrap();
    let name = |k: usize| format!("fn{k:02}_{}", "y".repeat(1_000_000));
    let mut t = String::from(HDR);
    for l in 0..lines {
        t.push_str(&format!("r,c1,a.c,{},m,{},1\n", name(l % names), l + 1));
    }
    let input = tmp.path().join("in.csv");
    std::fs::write(&input, t).unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let src = format!("dir:{}", tmp.path().join("src").display());
    let small = ["--memory-budget", "16MiB", "--workers", "1"];
    let got = merge_with(&src, &input, &out, &small, LIMIT);
    let funcs = got["files"]["a.c"]["funcs"].as_object().unwrap();
    assert_eq!(funcs.len(), names);
    let want: Vec<u64> = (0..lines)
        .filter(|l| l % names == 3)
        .map(|l| l as u64 + 1)
        .collect();
    assert_eq!(funcs[&name(3)], serde_json::json!(want));
}

/// The data limit of the test above: 20 MB of names and the merge's own (72 MB peak
/// RSS at 100 lines, release), with room for the thread stacks of a loaded machine;
/// not 200 MB of copies (123 MB at 100 lines).
const LIMIT: u64 = 160 << 20;
