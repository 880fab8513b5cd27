//! Streaming CSV row generation into the input parts.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::rng::{mix, unit, Rng};
use crate::source::{instrumented, Arena, Instr};
use crate::Error;

/// The CSV header of syzkaller's BigQuery coverage export.
pub const HEADER: &str = "timestamp,version,fuzzing_minutes,arch,build_id,manager,kernel_repo,kernel_branch,kernel_commit,file_path,func_name,sl,sc,el,ec,hit_count,inline,pc";

/// The CSV header of [`Columns::Required`]: only the columns contract §2
/// requires.
pub const REQUIRED_HEADER: &str =
    "kernel_repo,kernel_commit,manager,file_path,func_name,sl,hit_count";

/// Which columns the rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Columns {
    /// All 18 columns of syzkaller's BigQuery export ([`HEADER`]), with
    /// per-build ids, PCs and timestamps (compresses ~12:1).
    #[default]
    Bigquery,
    /// Only the 7 required columns ([`REQUIRED_HEADER`]): short, highly
    /// compressible rows, the hardest shape for a tool to keep up with
    /// `zcat` on.
    Required,
}

impl Columns {
    /// The header line (without newline).
    pub fn header(self) -> &'static str {
        match self {
            Columns::Bigquery => HEADER,
            Columns::Required => REQUIRED_HEADER,
        }
    }
}

const CHUNK: usize = 1 << 20;

enum Sink {
    Plain(File),
    Gz(Box<GzEncoder<BufWriter<File>>>),
}

impl Sink {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Plain(f) => f.write_all(b),
            Sink::Gz(g) => g.write_all(b),
        }
    }
    fn finish(self) -> std::io::Result<()> {
        match self {
            Sink::Plain(mut f) => f.flush(),
            Sink::Gz(g) => g.finish()?.flush(),
        }
    }
}

/// Buffered writers for the parts. Full 1 MiB chunks are handed to worker
/// threads that compress and write them (chunking is deterministic, so the
/// compressed bytes are too).
pub(crate) struct Parts {
    bufs: Vec<Vec<u8>>,
    senders: Vec<SyncSender<(usize, Vec<u8>)>>,
    workers: Vec<JoinHandle<Result<(), Error>>>,
}

impl Parts {
    /// `gzip`: the compression level, `None` for plain CSV.
    pub(crate) fn create(paths: &[PathBuf], gzip: Option<u32>) -> Result<Self, Error> {
        let nworkers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4)
            .min(paths.len());
        let mut per_worker: Vec<Vec<(usize, PathBuf, Sink)>> =
            (0..nworkers).map(|_| Vec::new()).collect();
        for (i, p) in paths.iter().enumerate() {
            let f = File::create(p).map_err(|e| Error::io(p, e))?;
            let sink = match gzip {
                Some(level) => Sink::Gz(Box::new(GzEncoder::new(
                    BufWriter::with_capacity(1 << 18, f),
                    Compression::new(level),
                ))),
                None => Sink::Plain(f),
            };
            per_worker[i % nworkers].push((i, p.clone(), sink));
        }
        let mut senders = Vec::new();
        let mut workers = Vec::new();
        for mut sinks in per_worker {
            let (tx, rx) = sync_channel::<(usize, Vec<u8>)>(4);
            senders.push(tx);
            workers.push(std::thread::spawn(move || -> Result<(), Error> {
                for (part, buf) in rx {
                    let (_, path, sink) = sinks
                        .iter_mut()
                        .find(|(i, _, _)| *i == part)
                        .expect("part of this worker");
                    sink.write_all(&buf).map_err(|e| Error::io(path, e))?;
                }
                for (_, path, sink) in sinks {
                    sink.finish().map_err(|e| Error::io(&path, e))?;
                }
                Ok(())
            }));
        }
        let bufs = (0..paths.len())
            .map(|_| Vec::with_capacity(CHUNK + 4096))
            .collect();
        Ok(Parts {
            bufs,
            senders,
            workers,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.bufs.len()
    }

    fn buf(&mut self, part: usize) -> &mut Vec<u8> {
        &mut self.bufs[part]
    }

    fn flush_if_full(&mut self, part: usize) -> Result<(), Error> {
        if self.bufs[part].len() >= CHUNK {
            let full = std::mem::replace(&mut self.bufs[part], Vec::with_capacity(CHUNK + 4096));
            self.send(part, full)?;
        }
        Ok(())
    }

    fn send(&mut self, part: usize, buf: Vec<u8>) -> Result<(), Error> {
        let w = part % self.senders.len();
        if self.senders[w].send((part, buf)).is_err() {
            // The worker died: surface its error.
            let senders = std::mem::take(&mut self.senders);
            drop(senders);
            for h in std::mem::take(&mut self.workers) {
                h.join().map_err(|_| Error::Worker)??;
            }
            return Err(Error::Worker);
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<(), Error> {
        for part in 0..self.bufs.len() {
            let buf = std::mem::take(&mut self.bufs[part]);
            if !buf.is_empty() {
                self.send(part, buf)?;
            }
        }
        drop(std::mem::take(&mut self.senders));
        for h in std::mem::take(&mut self.workers) {
            h.join().map_err(|_| Error::Worker)??;
        }
        Ok(())
    }
}

pub(crate) fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// A (manager, commit) build session: one set of rows per file.
pub(crate) struct Session {
    pub(crate) commit: usize,
    /// Rendered prefix: "timestamp,...,kernel_commit," or, with
    /// [`Columns::Required`], "kernel_repo,kernel_commit,manager,".
    pub(crate) prefix: Vec<u8>,
    pub(crate) key: u64,
}

/// A source file as seen by the row generator.
pub(crate) struct RowFile {
    pub(crate) path: String,
    pub(crate) key: u64,
    /// Per-code-line instrumentation probability.
    pub(crate) p: f64,
}

pub(crate) struct RowsInput<'a> {
    pub(crate) arena: &'a Arena,
    pub(crate) files: &'a [RowFile],
    /// versions[commit][file]
    pub(crate) versions: &'a [Vec<Option<Rc<Vec<u32>>>>],
    pub(crate) sessions: &'a [Session],
    /// Pre-rendered edge-case rows (with trailing newline) and their file.
    pub(crate) edges: &'a [(usize, Vec<u8>)],
    pub(crate) sorted: bool,
    pub(crate) columns: Columns,
    /// Write one extra header line in the middle of part 0.
    pub(crate) repeat_header: bool,
    pub(crate) seed: u64,
}

/// Hit count for one row: ~40% zeros overall, otherwise a heavy tail.
pub(crate) fn hit_count(line_key: u64, row_key: u64) -> u64 {
    let cold = line_key % 100 < 35;
    let u0 = unit(row_key);
    let zero_p = if cold { 0.9 } else { 0.15 };
    if u0 < zero_p {
        return 0;
    }
    let hot = 1 + (line_key >> 24) % 40;
    let u = unit(mix(row_key, 0xA11CE)).max(1e-12);
    let x = hot as f64 * u.powf(-1.25);
    (x as u64).clamp(1, 2_000_000_000)
}

/// Writes one data row.
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_row(
    buf: &mut Vec<u8>,
    columns: Columns,
    prefix: &[u8],
    path: &str,
    func: &str,
    ins: &Instr,
    hit: u64,
    file_key: u64,
) {
    buf.extend_from_slice(prefix);
    buf.extend_from_slice(path.as_bytes());
    buf.push(b',');
    buf.extend_from_slice(func.as_bytes());
    buf.push(b',');
    push_u64(buf, u64::from(ins.sl));
    if columns == Columns::Required {
        buf.push(b',');
        push_u64(buf, hit);
        buf.push(b'\n');
        return;
    }
    buf.push(b',');
    push_u64(buf, u64::from(ins.sc));
    buf.push(b',');
    push_u64(buf, u64::from(ins.sl));
    buf.push(b',');
    push_u64(buf, u64::from(ins.ec));
    buf.push(b',');
    push_u64(buf, hit);
    buf.extend_from_slice(if ins.key.is_multiple_of(20) {
        b",true,"
    } else {
        b",false,"
    });
    push_u64(buf, pc_of(file_key, ins.key));
    buf.push(b'\n');
}

pub(crate) fn pc_of(file_key: u64, line_key: u64) -> u64 {
    0xffff_ffff_8100_0000 + ((file_key % 0x0400_0000) & !0xfff) + (line_key % 0x1000)
}

/// The instrumented lines of one file version (shared by every session
/// that built it).
struct Instrumented {
    names: Vec<String>,
    lines: Vec<Instr>,
}

type Cache = HashMap<(usize, *const Vec<u32>), Rc<Instrumented>>;

/// Rows of one (session, file): the instrumented lines in some order.
struct Triple {
    session: usize,
    file: usize,
    ins: Rc<Instrumented>,
    /// Emission order (indices into `ins.lines`); `None` is line order.
    order: Option<Vec<u32>>,
    pos: usize,
    /// Pending duplicate of the previous row.
    dup: bool,
}

struct Writer<'a, 'b> {
    input: &'b RowsInput<'a>,
    cache: Cache,
    parts: &'b mut Parts,
    rng: Rng,
    rows: u64,
    header_at: u64,
    header_done: bool,
}

impl Writer<'_, '_> {
    fn after_row(&mut self, part: usize) -> Result<(), Error> {
        self.rows += 1;
        if !self.header_done && self.rows >= self.header_at {
            self.header_done = true;
            let header = self.input.columns.header();
            let b = self.parts.buf(0);
            b.extend_from_slice(header.as_bytes());
            b.push(b'\n');
        }
        self.parts.flush_if_full(part)
    }

    fn edge(&mut self, i: usize) -> Result<(), Error> {
        let part = self.rng.below(self.parts.len());
        let line = &self.input.edges[i].1;
        self.parts.buf(part).extend_from_slice(line);
        self.after_row(part)
    }

    /// Emits the next row of `t`; returns false when `t` is exhausted.
    fn step(&mut self, t: &mut Triple) -> Result<bool, Error> {
        if t.pos >= t.ins.lines.len() {
            return Ok(false);
        }
        let input = self.input;
        let s = &input.sessions[t.session];
        let f = &input.files[t.file];
        let idx = t.order.as_ref().map_or(t.pos, |o| o[t.pos] as usize);
        let ins = &t.ins.lines[idx];
        let dup_idx = u64::from(t.dup);
        let row_key = mix(mix(s.key, f.key), (u64::from(ins.sl) << 8) | dup_idx);
        let hit = hit_count(ins.key, row_key);
        let part = self.rng.below(self.parts.len());
        render_row(
            self.parts.buf(part),
            input.columns,
            &s.prefix,
            &f.path,
            &t.ins.names[ins.func as usize],
            ins,
            hit,
            f.key,
        );
        // ~0.5% of rows are reported twice by the same build (hits add up).
        if !t.dup && unit(mix(row_key, 0xD0B)) < 0.005 {
            t.dup = true;
        } else {
            t.dup = false;
            t.pos += 1;
        }
        self.after_row(part)?;
        Ok(true)
    }

    fn triple(&self, session: usize, file: usize, shuffle: Option<&mut Rng>) -> Option<Triple> {
        let v = self.input.versions[self.input.sessions[session].commit][file].as_ref()?;
        let ins = self.cache.get(&(file, Rc::as_ptr(v)))?.clone();
        let order = shuffle.map(|rng| {
            let mut o: Vec<u32> = (0..ins.lines.len() as u32).collect();
            rng.shuffle(&mut o);
            o
        });
        Some(Triple {
            session,
            file,
            ins,
            order,
            pos: 0,
            dup: false,
        })
    }
}

/// Computes the instrumented lines of every (file, version) some session
/// built, and the expected number of non-duplicate, non-edge rows (for
/// placing the repeated header and the edge rows).
fn instrument_all(input: &RowsInput<'_>) -> (Cache, u64) {
    let mut cache: Cache = HashMap::new();
    let mut total = 0;
    for s in input.sessions {
        for (fi, v) in input.versions[s.commit].iter().enumerate() {
            let Some(v) = v else { continue };
            let f = &input.files[fi];
            let ins = cache.entry((fi, Rc::as_ptr(v))).or_insert_with(|| {
                let mut names = Vec::new();
                let mut lines = Vec::new();
                instrumented(v, input.arena, f.key, f.p, &mut names, &mut lines);
                Rc::new(Instrumented { names, lines })
            });
            total += ins.lines.len() as u64;
        }
    }
    (cache, total)
}

/// Writes all rows; returns the number of data rows.
pub(crate) fn write_rows(input: &RowsInput<'_>, parts: &mut Parts) -> Result<u64, Error> {
    let (cache, expected) = instrument_all(input);
    let mut w = Writer {
        input,
        cache,
        parts,
        rng: Rng::new(input.seed, 0x0005_0001),
        rows: 0,
        header_at: (expected / 2).max(1),
        header_done: !input.repeat_header,
    };
    for part in 0..w.parts.len() {
        let b = w.parts.buf(part);
        b.extend_from_slice(input.columns.header().as_bytes());
        b.push(b'\n');
    }
    if input.sorted {
        let mut order: Vec<usize> = (0..input.files.len()).collect();
        order.sort_by(|&a, &b| input.files[a].path.cmp(&input.files[b].path));
        for fi in order {
            for si in 0..input.sessions.len() {
                if let Some(mut t) = w.triple(si, fi, None) {
                    while w.step(&mut t)? {}
                }
            }
            for ei in 0..input.edges.len() {
                if input.edges[ei].0 == fi {
                    w.edge(ei)?;
                }
            }
        }
    } else {
        let mut order_rng = Rng::new(input.seed, 0x0005_0002);
        let mut triples: Vec<(usize, usize)> = Vec::new();
        for (si, s) in input.sessions.iter().enumerate() {
            for (fi, v) in input.versions[s.commit].iter().enumerate() {
                if v.is_some() {
                    triples.push((si, fi));
                }
            }
        }
        order_rng.shuffle(&mut triples);
        let mut edge_pos: Vec<(u64, usize)> = (0..input.edges.len())
            .map(|i| (order_rng.next_u64() % expected.max(1), i))
            .collect();
        edge_pos.sort();
        let mut next_edge = 0;
        const WINDOW: usize = 16;
        let mut window: Vec<Triple> = Vec::with_capacity(WINDOW);
        let mut next = 0;
        loop {
            while window.len() < WINDOW && next < triples.len() {
                let (si, fi) = triples[next];
                next += 1;
                if let Some(t) = w.triple(si, fi, Some(&mut order_rng)) {
                    if !t.ins.lines.is_empty() {
                        window.push(t);
                    }
                }
            }
            if window.is_empty() {
                break;
            }
            while next_edge < edge_pos.len() && edge_pos[next_edge].0 <= w.rows {
                w.edge(edge_pos[next_edge].1)?;
                next_edge += 1;
            }
            let i = w.rng.below(window.len());
            if !w.step(&mut window[i])? {
                window.swap_remove(i);
            }
        }
        while next_edge < edge_pos.len() {
            w.edge(edge_pos[next_edge].1)?;
            next_edge += 1;
        }
    }
    if !w.header_done {
        let b = w.parts.buf(0);
        b.extend_from_slice(input.columns.header().as_bytes());
        b.push(b'\n');
    }
    Ok(w.rows)
}
