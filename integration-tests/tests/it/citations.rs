//! The code cites the contract by section (`contract §6`, `contract §3.5`): every such
//! citation anywhere in the tree must name a section of docs/contract.md (`## 6. …`) or
//! a numbered step of one (`5.` under `## 3. …`). Code cites nothing outside the tree:
//! no external spec's sections, no issue numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use covmerge_integration_tests::root;

/// Sections of docs/contract.md, each with the numbers of its numbered steps.
fn contract_sections(text: &str) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut sections = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            current = leading_number(heading);
            if let Some(n) = current {
                sections.insert(n, BTreeSet::new());
            }
        } else if line.starts_with('#') {
            current = None;
        } else if let (Some(section), Some(step)) = (current, leading_number(line)) {
            sections.get_mut(&section).unwrap().insert(step);
        }
    }
    sections
}

/// `6` of `6. Wrong input`: digits at the start of the line, followed by a dot.
fn leading_number(s: &str) -> Option<u32> {
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || !s[digits..].starts_with('.') {
        return None;
    }
    s[..digits].parse().ok()
}

/// Every text file of the tree but the build output and git's own.
fn tree_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        let name = entry.file_name();
        if kind.is_symlink() || name == ".git" || (dir == root() && name == "target") {
            continue;
        }
        if kind.is_dir() {
            tree_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// (file, line number, line) of every line of every UTF-8 file in the tree.
fn tree_lines() -> Vec<(String, usize, String)> {
    let root = root();
    let mut files = Vec::new();
    tree_files(&root, &mut files);
    let mut lines = Vec::new();
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else {
            continue; // not text (images, compressed fixtures)
        };
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        for (i, line) in text.lines().enumerate() {
            lines.push((name.clone(), i + 1, line.to_string()));
        }
    }
    lines
}

/// The section numbers cited on a line: `3.5` of "contract §3.5:", `6` of "§6.".
fn citations(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in line.match_indices("contract §") {
        let rest = &line[at + "contract §".len()..];
        let len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
                .len();
        let number = rest[..len].trim_end_matches('.');
        if !number.is_empty() {
            found.push(number.to_string());
        }
    }
    found
}

#[test]
fn every_contract_citation_names_a_section_of_docs_contract_md() {
    let contract = fs::read_to_string(root().join("docs/contract.md")).unwrap();
    let sections = contract_sections(&contract);
    assert!(
        sections.len() >= 7 && sections[&3].contains(&5),
        "docs/contract.md: expected numbered sections `## N. …` and steps `N.` under them, found {sections:?}"
    );
    let mut cited = 0;
    let mut broken = Vec::new();
    for (file, n, line) in tree_lines() {
        for number in citations(&line) {
            cited += 1;
            let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
            let resolves = match (parts.next(), parts.next(), parts.next()) {
                (Some(Some(s)), None, None) => sections.contains_key(&s),
                (Some(Some(s)), Some(Some(step)), None) => {
                    sections.get(&s).is_some_and(|steps| steps.contains(&step))
                }
                _ => false,
            };
            if !resolves {
                broken.push(format!(
                    "{file}:{n}: contract §{number} is not in docs/contract.md"
                ));
            }
        }
    }
    // The code cites the contract dozens of times; finding none means the walk is broken.
    assert!(
        cited >= 30,
        "only {cited} citations of the contract found in {}",
        root().display()
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn no_code_cites_an_external_spec_section_or_an_issue_number() {
    // Built from pieces, so this file does not match itself.
    let spec = ["SPEC", " §"].concat();
    let mut found = Vec::new();
    for (file, n, line) in tree_lines() {
        if file.ends_with(".md") {
            continue; // prose: the benchmark log tells its history by issue
        }
        let lower = line.to_ascii_lowercase();
        let issue = lower.match_indices("issue").any(|(at, word)| {
            let rest = lower[at + word.len()..].trim_start_matches([' ', '#']);
            rest.len() < lower.len() - at - word.len()
                && rest.starts_with(|c: char| c.is_ascii_digit())
        });
        if issue || line.contains(&spec) {
            found.push(format!("{file}:{n}: {}", line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "cite docs/contract.md (`contract §n`), not an external spec or an issue:\n{}",
        found.join("\n")
    );
}

#[test]
fn citation_parsing_finds_sections_steps_and_trailing_dots() {
    assert_eq!(
        citations("x (contract §6). y contract §3.5: z"),
        ["6", "3.5"]
    );
    assert_eq!(citations("see contract §7."), ["7"]);
    assert!(citations("every `contract §n` citation").is_empty());
    let sections = contract_sections(
        "# T\n## 2. In\n1. a\n## 3. Merge\n1. b\n5. c\n  7. nested\n### x\n9. no\n",
    );
    assert_eq!(sections.keys().copied().collect::<Vec<_>>(), [2, 3]);
    assert_eq!(sections[&3].iter().copied().collect::<Vec<_>>(), [1, 5]);
}
