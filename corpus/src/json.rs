//! `corpus.json`: what a generated corpus holds (its inputs, sources, base and the
//! spec that made it), for the benches and tests that read a corpus back.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::{Corpus, CorpusSpec, Error};

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_string(), json_str)
}

fn json_list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = items.map(json_str).collect();
    format!("[{}]", v.join(", "))
}

/// The `"days"` member of a history corpus: per day its date, commit, inputs and rows.
fn days_json(c: &Corpus, rel: &dyn Fn(&Path) -> String) -> String {
    let days: Vec<String> = c
        .days
        .iter()
        .map(|d| {
            let inputs: Vec<String> = d.inputs.iter().map(|p| rel(p)).collect();
            format!(
                "    {{\"date\": {}, \"commit\": {}, \"inputs\": {}, \"rows\": {}}}",
                json_str(&d.date),
                json_str(&d.commit),
                json_list(inputs.iter().map(String::as_str)),
                d.rows
            )
        })
        .collect();
    format!("  \"days\": [\n{}\n  ],\n", days.join(",\n"))
}

pub(crate) fn write_json(spec: &CorpusSpec, c: &Corpus) -> Result<(), Error> {
    let rel = |p: &Path| {
        p.strip_prefix(&c.root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let inputs: Vec<String> = c.inputs.iter().map(|p| rel(p)).collect();
    let git = c.git.as_deref().map(rel);
    let mut s = String::new();
    s.push_str("{\n");
    s.push_str(&format!("  \"base_repo\": {},\n", json_str(&c.base_repo)));
    s.push_str(&format!(
        "  \"base_commit\": {},\n",
        json_str(&c.base_commit)
    ));
    s.push_str(&format!(
        "  \"commits\": {},\n",
        json_list(c.commits.iter().map(String::as_str))
    ));
    s.push_str(&format!(
        "  \"inputs\": {},\n",
        json_list(inputs.iter().map(String::as_str))
    ));
    s.push_str(&format!("  \"rows\": {},\n", c.rows));
    s.push_str(&format!("  \"sources\": {},\n", json_str(&rel(&c.sources))));
    s.push_str(&format!("  \"git\": {},\n", json_opt(git.as_deref())));
    s.push_str(&format!(
        "  \"deleted_file\": {},\n",
        json_opt(c.deleted_file.as_deref())
    ));
    s.push_str(&format!(
        "  \"base_only_file\": {},\n",
        json_opt(c.base_only_file.as_deref())
    ));
    s.push_str(&format!(
        "  \"header\": {},\n",
        json_str(spec.columns.header())
    ));
    if !c.days.is_empty() {
        s.push_str(&days_json(c, &rel));
    }
    s.push_str(&format!(
        "  \"spec\": {{\"seed\": {}, \"files\": {}, \"lines\": {}, \"commits\": {}, \"managers\": {}, \
\"manager_commit_share\": {}, \"instrumented_share\": {}, \"parts\": {}, \"sorted\": {}, \"plain\": {}, \
\"no_git\": {}, \"no_edge_cases\": {}, \"columns\": \"{}\", \"gzip_level\": {}}}\n",
        spec.seed,
        spec.files,
        spec.lines,
        spec.commits,
        spec.managers,
        spec.manager_commit_share,
        spec.instrumented_share,
        spec.parts,
        spec.sorted,
        spec.plain,
        spec.no_git,
        spec.no_edge_cases,
        clap::ValueEnum::to_possible_value(&spec.columns)
            .expect("no variant is skipped")
            .get_name(),
        spec.gzip_level
    ));
    if spec.days > 0 {
        // Inside the spec object: before its closing brace and newline.
        s.truncate(s.len() - 2);
        s.push_str(&format!(
            ", \"days\": {}, \"change_share\": {}, \"lag_days\": {}, \"date_to\": \"{}\"}}\n",
            spec.days, spec.change_share, spec.lag_days, spec.date_to
        ));
    }
    s.push_str("}\n");
    let p = c.root.join("corpus.json");
    let mut f = fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
    f.write_all(s.as_bytes()).map_err(|e| Error::io(&p, e))?;
    Ok(())
}
