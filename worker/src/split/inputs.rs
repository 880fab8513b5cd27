//! A split task's inputs, each opened and read through its format
//! ([`crate::input::formats`]): CSV text by the parse threads of [`super`], the rows a
//! format decodes itself by [`super::rows`].

use std::io::Read;

use covmerge_proto::input::InputSpec;
use covmerge_proto::wire::{SplitOutcome, SplitTask};

use super::{
    rows::split_rows, split_input_of_namespace, Emit, Namespaces, SplitError, SplitSettings,
};
use crate::input::formats::{self, Reading};

/// How a split task's inputs are opened.
pub(crate) struct ReadInput<'a> {
    /// The job's `--namespace`.
    pub(crate) namespace: Option<&'a str>,
    pub(crate) rt: &'a tokio::runtime::Handle,
    pub(crate) inflate: crate::input::Inflate,
    /// Applied to each input's stream (a task's: one that fails once the task is
    /// abandoned).
    pub(crate) wrap: &'a dyn Fn(Box<dyn Read + Send>) -> Box<dyn Read + Send>,
}

impl ReadInput<'_> {
    /// Splits one input, read as `spec` says.
    pub(crate) fn split(
        &self,
        input: &str,
        spec: &InputSpec,
        settings: SplitSettings,
        emit: &Emit<'_>,
    ) -> Result<SplitOutcome, SplitError> {
        let opened =
            formats::open(input, spec.format, self.rt, self.inflate)?.map_stream(self.wrap);
        match opened.read(&spec.options)? {
            Reading::Csv(r) => {
                let ns = Namespaces::Job(self.namespace);
                split_input_of_namespace(input, r, settings, ns, emit)
            }
            Reading::Rows(rows) => split_rows(input, rows, spec, self.namespace, settings, emit),
        }
    }
}

/// Splits one input outside a task (a roll-up's raw rows): opened and read through
/// its format as a split task reads it, as `spec` says; which rows of the shared
/// table are read, as `namespaces` says. Rows routed by namespace must name theirs: an
/// input whose format decodes its own rows (Go coverage, partials) is refused then.
pub fn split_one_input(
    input: &str,
    spec: &InputSpec,
    namespaces: Namespaces<'_>,
    settings: SplitSettings,
    rt: &tokio::runtime::Handle,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let opened = formats::open(input, spec.format, rt, crate::input::Inflate::Pipelined)?;
    match (opened.read(&spec.options)?, namespaces) {
        (Reading::Csv(r), ns) => split_input_of_namespace(input, r, settings, ns, emit),
        (Reading::Rows(rows), Namespaces::Job(ns)) => {
            split_rows(input, rows, spec, ns, settings, emit)
        }
        (Reading::Rows(_), Namespaces::Route(_)) => Err(SplitError::Read(
            formats::ReadError::Input {
                input: input.to_string(),
                problem: "its rows name no namespace (no namespace column): rows routed by namespace must name theirs; give --namespace NS".into(),
            },
        )),
    }
}

/// A split task's inputs in order, each with how it is read: the first's spec, and
/// the further ones' manager and commit with its format and options.
pub(crate) fn split_inputs(t: &SplitTask) -> Vec<(&str, InputSpec)> {
    std::iter::once((t.input.as_str(), t.read.clone()))
        .chain(t.more.iter().map(|m| {
            (
                m.input.as_str(),
                InputSpec {
                    manager: m.manager.clone(),
                    commit: m.commit.clone(),
                    ..t.read.clone()
                },
            )
        }))
        .collect()
}
