//! Rows routed by their `namespace` column (a roll-up of the shared table writing one
//! partial per namespace in one read): each namespace gets its own per-shard tables,
//! whose chunks carry the "routed shard" `namespace index × shards + shard`
//! ([`Router::unroute`] gives the two back).
//!
//! The router numbers the namespaces in the order the parse threads first meet them,
//! checks each name once (the caller's rule, e.g. a safe path segment) and counts, per
//! namespace, the rows routed to it and the bad ones among them. A bad row found
//! before its namespace was read (a wrong field count, a row over the cap) names none:
//! it is in the split's totals only, and the caller counts it as every namespace's (a
//! merge of any one namespace counts it too).

use std::sync::Mutex;

use rustc_hash::FxHashMap;

/// The check a namespace's name must pass (`Err`: why not).
pub type NamespaceCheck = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

/// The namespaces a routed split met, shared by its parse threads (and by the
/// splits of several inputs: a namespace keeps its index across them).
pub struct Router {
    max: usize,
    /// Why `max` is what it is, for the refusal of one namespace too many.
    max_why: String,
    check: Box<NamespaceCheck>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    names: Vec<Vec<u8>>,
    index: FxHashMap<Vec<u8>, u32>,
    rows: Vec<u64>,
    rows_bad: Vec<u64>,
}

/// What a routed split counted of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routed {
    /// The namespace (its bytes: the check decides whether they may be anything).
    pub name: Vec<u8>,
    /// Rows routed to it (bad ones among them included).
    pub rows: u64,
    /// Bad rows among them.
    pub rows_bad: u64,
}

impl Router {
    /// A router of at most `max` namespaces (`max_why` says why), each name passing
    /// `check`.
    pub fn new(max: usize, max_why: String, check: Box<NamespaceCheck>) -> Router {
        Router {
            max,
            max_why,
            check,
            state: Mutex::new(State::default()),
        }
    }

    /// The index of namespace `name`, numbered on first sight; `Err` names why it is
    /// refused (its check, or one namespace too many).
    pub(super) fn index(&self, name: &[u8]) -> Result<u32, String> {
        let mut s = self.state.lock().unwrap();
        if let Some(&i) = s.index.get(name) {
            return Ok(i);
        }
        (self.check)(name)?;
        if s.names.len() >= self.max {
            return Err(format!(
                "one more than the {} namespaces one read may route ({})",
                self.max, self.max_why
            ));
        }
        let i = s.names.len() as u32;
        s.names.push(name.to_vec());
        s.index.insert(name.to_vec(), i);
        s.rows.push(0);
        s.rows_bad.push(0);
        Ok(i)
    }

    /// Adds a thread's counts (by index).
    pub(super) fn add(&self, rows: &[u64], rows_bad: &[u64]) {
        let mut s = self.state.lock().unwrap();
        for (i, (&r, &b)) in rows.iter().zip(rows_bad).enumerate() {
            s.rows[i] = s.rows[i].saturating_add(r);
            s.rows_bad[i] = s.rows_bad[i].saturating_add(b);
        }
    }

    /// The namespaces met so far, by index, with their counts.
    pub fn namespaces(&self) -> Vec<Routed> {
        let s = self.state.lock().unwrap();
        (0..s.names.len())
            .map(|i| Routed {
                name: s.names[i].clone(),
                rows: s.rows[i],
                rows_bad: s.rows_bad[i],
            })
            .collect()
    }

    /// The namespace index and shard of a routed shard of a split of `shards` shards.
    pub fn unroute(routed: u32, shards: u32) -> (u32, u32) {
        let n = shards.max(1);
        (routed / n, routed % n)
    }
}

/// A parse thread's view of the router: the indexes it looked up and its counts.
pub(super) struct ThreadRoute<'r> {
    router: &'r Router,
    /// The last namespace looked up and its index: rows of one namespace come in runs.
    last: Option<(Vec<u8>, u32)>,
    pub(super) rows: Vec<u64>,
    pub(super) rows_bad: Vec<u64>,
}

impl<'r> ThreadRoute<'r> {
    pub(super) fn new(router: &'r Router) -> Self {
        ThreadRoute {
            router,
            last: None,
            rows: Vec::new(),
            rows_bad: Vec::new(),
        }
    }

    /// Routes a row of namespace `name`: its index, the row counted.
    pub(super) fn route(&mut self, name: &[u8]) -> Result<u32, String> {
        let i = match &self.last {
            Some((n, i)) if n.as_slice() == name => *i,
            _ => {
                let i = self.router.index(name)?;
                self.last = Some((name.to_vec(), i));
                i
            }
        };
        let at = i as usize;
        if self.rows.len() <= at {
            self.rows.resize(at + 1, 0);
            self.rows_bad.resize(at + 1, 0);
        }
        self.rows[at] += 1;
        Ok(i)
    }

    /// Counts a bad row among those routed to namespace `i`.
    pub(super) fn bad(&mut self, i: u32) {
        self.rows_bad[i as usize] += 1;
    }

    /// Adds the thread's counts to the router's.
    pub(super) fn finish(self) {
        self.router.add(&self.rows, &self.rows_bad);
    }
}
