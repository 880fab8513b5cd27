//! Partials among a job's inputs (contract §10): a store prefix holding `partial.json`
//! is one input, not its objects; and a partial of the job's shard count is read by
//! the merge tasks directly, each its own shard, with no split task.

use covmerge_partial::desc::DESCRIPTION;
use covmerge_partial::Description;
use covmerge_proto::date::Date;
use covmerge_proto::direct::{DirectPartial, PlannedSha};
use covmerge_proto::input::InputFormat;
use covmerge_proto::job::RollupSpec;
use covmerge_proto::manifest::NamespaceTally;
use covmerge_storage::is_store_url;
use sha2::{Digest, Sha256};

use crate::JobError;

/// A partial input as planned: its description (`None` when it does not parse: the
/// split that reads it names the problem) and the SHA-256 of its `partial.json`.
#[derive(Debug, Clone)]
pub(super) struct PlannedPartial {
    pub(super) description: Option<Description>,
    pub(super) sha256: String,
}

impl PlannedPartial {
    /// From the bytes of a `partial.json`.
    pub(super) fn of(text: &[u8]) -> PlannedPartial {
        let description = serde_json::from_slice::<Description>(text)
            .ok()
            .filter(|d| {
                d.format == covmerge_partial::desc::FORMAT
                    && d.format_version == covmerge_partial::FORMAT_VERSION
                    && d.validate().is_ok()
            });
        PlannedPartial {
            description,
            sha256: hex::encode(Sha256::digest(text)),
        }
    }

    /// The bytes of its shard files (the input's size), if it parsed.
    pub(super) fn bytes(&self) -> Option<u64> {
        self.description.as_ref().map(|d| {
            d.shards
                .iter()
                .flat_map(|s| [&s.lines, &s.funcs, &s.versions, &s.paths])
                .map(|e| e.bytes)
                .fold(0u64, u64::saturating_add)
        })
    }
}

/// The store inputs as listed, each prefix holding `partial.json` one input (the
/// prefix, with a trailing `/`, where its `partial.json` was listed) and its other
/// objects none. With `--input-format partial`, a store URL given without a trailing
/// `/` names the prefix too (`gs://b/day` is `gs://b/day/`).
pub fn store_partial_inputs(inputs: Vec<String>) -> Vec<String> {
    let marker = format!("/{DESCRIPTION}");
    let mut prefixes: Vec<String> = inputs
        .iter()
        .filter(|i| is_store_url(i) && i.ends_with(&marker))
        .map(|i| i[..i.len() - DESCRIPTION.len()].to_string())
        .collect();
    // A partial's objects are its own, a partial (a copy kept inside it) among them:
    // read once, as the outer partial, whose files are only those it names.
    prefixes = outermost(prefixes);
    if prefixes.is_empty() {
        return inputs;
    }
    inputs
        .into_iter()
        .filter_map(|i| {
            if i.ends_with(&marker)
                && prefixes
                    .iter()
                    .any(|p| i.len() == p.len() + DESCRIPTION.len() && i.starts_with(p.as_str()))
            {
                return Some(i[..i.len() - DESCRIPTION.len()].to_string());
            }
            (!prefixes.iter().any(|p| i.starts_with(p.as_str()))).then_some(i)
        })
        .collect()
}

/// The job's inputs from each `--input`'s expansion (`listed`, one list per spec):
/// each spec's listing gives its partials as one input each
/// ([`store_partial_inputs`]), on its own. An input named apart stays an input
/// even under a partial's prefix (taken with the listings together, a CSV named
/// beside a partial's prefix was dropped unread, as if it were one of the
/// partial's objects); a partial's own table file named apart is refused: its rows
/// are the partial's.
pub(super) fn partial_inputs_of_each(listed: Vec<Vec<String>>) -> Result<Vec<String>, JobError> {
    let inputs: Vec<String> = listed.into_iter().flat_map(store_partial_inputs).collect();
    let prefixes: Vec<&String> = inputs
        .iter()
        .filter(|i| is_store_url(i) && i.ends_with('/'))
        .collect();
    for i in &inputs {
        let inside = prefixes.iter().find(|p| {
            i.len() > p.len()
                && i.starts_with(p.as_str())
                && covmerge_partial::is_table_file_name(&i[p.len()..])
        });
        if let Some(p) = inside {
            return Err(JobError::Plan(format!(
                "input {} is a file of the partial input {p}: its rows are the partial's (name the partial alone)",
                covmerge_storage::shown_url(i)
            )));
        }
    }
    Ok(inputs)
}

/// `prefixes` without those inside another of them.
pub(super) fn outermost(prefixes: Vec<String>) -> Vec<String> {
    let nested = |p: &String| {
        prefixes
            .iter()
            .any(|q| q.len() < p.len() && p.starts_with(q.as_str()))
    };
    prefixes.iter().filter(|p| !nested(p)).cloned().collect()
}

/// `--input` as given, a store URL of a partial made a prefix (`--input-format
/// partial`: `gs://b/day` is the prefix `gs://b/day/`).
pub(super) fn as_prefixes(inputs: &[String], format: InputFormat) -> Vec<String> {
    inputs
        .iter()
        .map(|i| {
            let plain = is_store_url(i) && !i.ends_with('/') && !i.ends_with('*');
            let description = i == DESCRIPTION || i.ends_with(&format!("/{DESCRIPTION}"));
            let may_be_partial = matches!(format, InputFormat::Auto | InputFormat::Partial);
            if format == InputFormat::Partial && plain && !description {
                format!("{i}/")
            } else if description && may_be_partial && !is_store_url(i) {
                // A local partial named by its description is its directory: read
                // as a CSV it was a bad input, and beside its directory, twice.
                match std::path::Path::new(i).parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.display().to_string(),
                    _ => ".".to_owned(),
                }
            } else {
                i.clone()
            }
        })
        .collect()
}

/// The `partial.json` of the store prefix `prefix`: its bytes and identity.
pub(super) async fn store_description(
    prefix: &str,
) -> Result<(Vec<u8>, covmerge_proto::job::InputIdentity), JobError> {
    let store = covmerge_storage::Store::open(prefix.trim_end_matches('/'))
        .map_err(|e| JobError::Plan(format!("input {prefix}: {e}")))?;
    let text = store.get(DESCRIPTION).await.map_err(|e| match e {
        covmerge_storage::StoreError::NotFound { .. } => JobError::Plan(format!(
            "input {prefix}: no {DESCRIPTION} under it: not a partial (list its objects with a trailing `*` to read them as inputs)"
        )),
        e => JobError::Plan(format!("input {prefix}: {e}")),
    })?;
    let id = store
        .identity(DESCRIPTION)
        .await
        .map_err(|e| JobError::Plan(format!("input {prefix}: {e}")))?;
    Ok((text.to_vec(), id))
}

/// The partials of `planned` (by input) that the merge tasks read directly: those of
/// `shards` shards whose namespace the job takes (another is left to its split,
/// which refuses it naming both); in a roll-up (`any_count`), those of any shard
/// count, each task reading the shards of them that map to its own: no split reads
/// a partial of a roll-up, whose rows keep their partials' versions (contract §10).
pub(super) fn direct_partials(
    planned: &[Option<PlannedPartial>],
    shards: u32,
    namespace: Option<&str>,
    any_count: bool,
) -> Vec<DirectPartial> {
    planned
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let p = p.as_ref()?;
            let d = p.description.as_ref()?;
            let ns_ok = match namespace {
                Some(j) => d.namespace == j,
                None => d.namespace.is_empty() && !d.counts.namespace_column,
            };
            ((any_count || d.shard_count == shards) && ns_ok).then(|| DirectPartial {
                input: i as u32,
                description_sha256: p.sha256.clone(),
                rows_in: d.counts.rows_in,
                rows_bad: d.counts.rows_bad,
                namespaces: NamespaceTally {
                    column: d.counts.namespace_column,
                    matched: if d.counts.namespace_column {
                        d.counts.rows_in
                    } else {
                        0
                    },
                    others: d.other_namespaces.clone(),
                },
            })
        })
        .collect()
}

/// The SHA-256 of every partial input's `partial.json` as planned, in input order.
pub(super) fn planned_shas(planned: &[Option<PlannedPartial>]) -> Vec<PlannedSha> {
    planned
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let p = p.as_ref()?;
            p.description.as_ref()?;
            Some(PlannedSha {
                input: i as u32,
                description_sha256: p.sha256.clone(),
            })
        })
        .collect()
}

/// Two local partial inputs sharing a file (`partial.json` or a shard file: a
/// directory of links to another's files) are one partial, whose rows would be counted
/// twice: refused, naming both. A copy has files of its own, as a copied CSV file
/// does, and is read as an input of its own.
pub(super) fn refuse_shared_files(
    planned: &[Option<PlannedPartial>],
    inputs: &[String],
) -> Result<(), JobError> {
    let mut seen: std::collections::HashMap<(u64, u64), usize> = std::collections::HashMap::new();
    for (i, p) in planned.iter().enumerate() {
        let Some(d) = p.as_ref().and_then(|p| p.description.as_ref()) else {
            continue;
        };
        let Some(path) = covmerge_storage::local::local_path(&inputs[i]) else {
            continue;
        };
        let dir = match path.file_name() {
            Some(n) if n == covmerge_partial::desc::DESCRIPTION => path
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
            _ => path,
        };
        for (id, file) in covmerge_partial::Partial::file_identities(&dir, d) {
            if let Some(&first) = seen.get(&id) {
                if first != i {
                    return Err(JobError::Plan(format!(
                        "input {} is the same partial as input {}: {} is a link to one of its files, so its rows would be counted twice",
                        inputs[i],
                        inputs[first],
                        file.display()
                    )));
                }
            }
            seen.insert(id, i);
        }
    }
    Ok(())
}

/// A roll-up job without `--source` (`source` empty): refused before any work
/// unless every input is a partial, naming the first that is not.
pub(super) fn refuse_raw_without_source(
    planned: &[Option<PlannedPartial>],
    inputs: &[String],
) -> Result<(), JobError> {
    let not_partial =
        |p: &Option<PlannedPartial>| p.as_ref().is_none_or(|p| p.description.is_none());
    match planned.iter().zip(inputs).find(|(p, _)| not_partial(p)) {
        None => Ok(()),
        Some((p, i)) => Err(JobError::Plan(format!(
            "input {i}: {}: a roll-up of raw rows needs --source (each row's version is found in it); one of partials alone needs none",
            match p {
                None => "raw rows, not a partial",
                Some(_) => "a partial whose partial.json does not parse",
            }
        ))),
    }
}

/// A roll-up job's namespace (`--namespace`, else its partials' when they name one)
/// and period: from the first day to the last of its partials' periods and, with raw
/// rows among its inputs (`planned` `None`), of the `--duration` days ending at
/// `date_to`, as `covmerge rollup` makes them. A partial whose description does not
/// parse counts for nothing here: its split refuses it. Partials of two namespaces,
/// or one not of `--namespace`, are refused as `covmerge rollup` refuses them.
pub(super) fn rollup_of(
    planned: &[Option<PlannedPartial>],
    inputs: &[String],
    req: &crate::JobRequest,
    date_to: &str,
) -> Result<RollupSpec, JobError> {
    let descriptions = planned
        .iter()
        .flatten()
        .filter_map(|p| p.description.as_ref());
    refuse_two_namespaces(planned, inputs, req.namespace.as_deref())?;
    let namespace = req.namespace.clone().or_else(|| {
        let mut named = descriptions.clone().map(|d| &d.namespace);
        named.find(|ns| !ns.is_empty()).cloned()
    });
    let day = |what: &str, v: &str| {
        v.parse::<Date>()
            .map_err(|e| JobError::Plan(format!("{what} {v:?}: {e}")))
    };
    let mut days: Vec<(Date, Date)> = Vec::new();
    for d in descriptions {
        days.push((day("date_from", &d.date_from)?, day("date_to", &d.date_to)?));
    }
    if planned.iter().any(Option::is_none) || days.is_empty() {
        let to = day("--date-to", date_to)?;
        let from = to.period_start(req.duration).map_err(JobError::Plan)?;
        days.push((from, to));
    }
    let from = days.iter().map(|d| d.0).min().expect("a period");
    let to = days.iter().map(|d| d.1).max().expect("a period");
    Ok(RollupSpec {
        date_from: from.to_string(),
        date_to: to.to_string(),
        namespace,
    })
}

/// Refuses a partial not of `--namespace` (`namespace`), or without it partials of
/// two namespaces, naming the inputs: a partial holds one namespace.
fn refuse_two_namespaces(
    planned: &[Option<PlannedPartial>],
    inputs: &[String],
    namespace: Option<&str>,
) -> Result<(), JobError> {
    let mut first: Option<(&str, &str)> = None;
    for (p, i) in planned.iter().zip(inputs) {
        let Some(d) = p.as_ref().and_then(|p| p.description.as_ref()) else {
            continue;
        };
        let ns = d.namespace.as_str();
        match (namespace, first) {
            (Some(want), _) if ns != want => {
                return Err(JobError::Plan(format!(
                    "input {i}: a partial of namespace {ns:?}, not --namespace {want:?}"
                )))
            }
            (None, Some((a, a_input))) if ns != a => {
                return Err(JobError::Plan(format!(
                    "partials of two namespaces: {a:?} ({a_input}) and {ns:?} ({i}); a partial holds one namespace: give --namespace, or roll each namespace up apart"
                )))
            }
            (_, None) => first = Some((ns, i)),
            _ => {}
        }
    }
    Ok(())
}

/// A roll-up's default shard count, as `covmerge rollup`'s: the largest of its
/// partials' counts and, with raw rows among its inputs (`planned` `None`), of the
/// count a merge of the raw rows (of these `sizes`) would take.
pub(super) fn rollup_shards(planned: &[Option<PlannedPartial>], sizes: &[(u64, bool)]) -> u32 {
    let raw: Vec<(u64, bool)> = planned
        .iter()
        .zip(sizes)
        .filter(|(p, _)| p.is_none())
        .map(|(_, s)| *s)
        .collect();
    let partials = planned.iter().flatten();
    let counts = partials.filter_map(|p| p.description.as_ref().map(|d| d.shard_count));
    let raw = (!raw.is_empty()).then(|| super::default_shards(&raw));
    counts.chain(raw).max().unwrap_or(1)
}

/// The split groups' first inputs (`firsts`, empty: one split per input) with each
/// direct partial alone in its group, so that no split task reads it.
pub(super) fn alone(firsts: Vec<u32>, direct: &[DirectPartial], inputs: usize) -> Vec<u32> {
    if firsts.is_empty() || direct.is_empty() {
        return firsts;
    }
    let mut set: std::collections::BTreeSet<u32> = firsts.into_iter().collect();
    for d in direct {
        set.insert(d.input);
        if (d.input as usize + 1) < inputs {
            set.insert(d.input + 1);
        }
    }
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_prefix_holding_a_partial_is_one_input() {
        let listed = [
            "s3://b/day/funcs-00000.parquet",
            "s3://b/day/lines-00000.parquet",
            "s3://b/day/partial.json",
            "s3://b/rows-0.csv.gz",
            "/data/local/",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            store_partial_inputs(listed),
            ["s3://b/day/", "s3://b/rows-0.csv.gz", "/data/local/"].map(String::from)
        );
        let given = ["gs://b/day".to_string(), "gs://b/x/*".to_string()];
        assert_eq!(
            as_prefixes(&given, InputFormat::Partial),
            ["gs://b/day/", "gs://b/x/*"].map(String::from)
        );
        assert_eq!(as_prefixes(&given, InputFormat::Auto), given);
    }

    #[test]
    fn a_rollup_refuses_partials_of_two_namespaces_naming_them() {
        let of = |ns: &str| {
            let d = Description {
                format: covmerge_partial::desc::FORMAT.into(),
                format_version: covmerge_partial::FORMAT_VERSION,
                namespace: ns.into(),
                date_from: "2024-04-01".into(),
                date_to: "2024-04-01".into(),
                counts: Default::default(),
                other_namespaces: Default::default(),
                shard_count: 0,
                shards: Vec::new(),
            };
            Some(PlannedPartial {
                description: Some(d),
                sha256: "0".repeat(64),
            })
        };
        let inputs = ["a/", "raw.csv", "b/"].map(String::from);
        let planned = [of("upstream"), None, of("android")];
        let err = refuse_two_namespaces(&planned, &inputs, None).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("two namespaces") && err.contains("b/"),
            "{err}"
        );
        let err = refuse_two_namespaces(&planned, &inputs, Some("upstream")).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("b/") && err.contains("--namespace"), "{err}");
        let one = [of("upstream"), None, of("upstream")];
        assert!(refuse_two_namespaces(&one, &inputs, None).is_ok());
        assert!(refuse_two_namespaces(&one, &inputs, Some("upstream")).is_ok());
    }

    #[test]
    fn a_direct_partial_is_alone_in_its_split_group() {
        let d = |input| DirectPartial {
            input,
            description_sha256: "0".repeat(64),
            rows_in: 0,
            rows_bad: 0,
            namespaces: NamespaceTally::default(),
        };
        assert_eq!(alone(vec![0, 4], &[d(2)], 6), vec![0, 2, 3, 4]);
        assert_eq!(alone(vec![0, 4], &[d(5)], 6), vec![0, 4, 5]);
        assert!(alone(Vec::new(), &[d(1)], 6).is_empty());
    }
}
