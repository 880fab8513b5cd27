//! A whole `GOCOVERDIR`: every meta and counter file, counters summed per unit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::super::{Blocks, GoError, Mode};
use super::*;

/// What reading a directory took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    /// `covmeta.*` files decoded.
    pub meta_files: u64,
    /// `covcounters.*` files decoded.
    pub counter_files: u64,
    /// Bytes of all files decoded.
    pub bytes: u64,
    /// Function entries of all counter files.
    pub function_entries: u64,
}

/// The counts of one meta-data file's units, summed over its counter files.
struct Pod {
    meta: Meta,
    name: String,
    /// Index of each function's first unit in `counts`, per package.
    first: Vec<Vec<usize>>,
    counts: Vec<u64>,
}

pub(super) fn hex(h: &[u8; 16]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a `GOCOVERDIR` directory: every `covmeta.*` and `covcounters.*` file (others
/// are ignored, as Go does). Counter files of every process are summed per unit (`set`
/// mode: ORed); units no counter file mentions count 0.
pub fn read_dir(dir: &Path) -> Result<(Blocks, DirStats), GoError> {
    let (metas, counters) = list_files(dir)?;
    let mut stats = DirStats::default();
    let mut pods = read_metas(&metas, &mut stats)?;
    let by_hash: HashMap<[u8; 16], usize> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.meta.hash, i))
        .collect();
    for p in &counters {
        add_counter_file(p, &mut pods, &by_hash, &mut stats)?;
    }
    Ok((into_blocks(&pods)?, stats))
}

/// A read error of `file`.
fn io_err(file: String) -> impl FnOnce(std::io::Error) -> GoError {
    move |e: std::io::Error| GoError::Io { file, source: e }
}

/// The directory's meta and counter files, each list sorted by path.
fn list_files(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), GoError> {
    let dname = dir.display().to_string();
    let mut metas = Vec::new();
    let mut counters = Vec::new();
    // Go writes regular files here: a symlink (to another run's file, /dev/zero, a file
    // outside the input), a FIFO or a device, or a second name of a file (a hard link)
    // would count hits twice, read outside the input or hang. Refused, naming it.
    let mut seen: HashMap<(u64, u64), String> = HashMap::new();
    for e in std::fs::read_dir(dir).map_err(io_err(dname.clone()))? {
        let e = e.map_err(io_err(dname.clone()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("covmeta.") && !name.starts_with("covcounters.") {
            continue;
        }
        let ft = e.file_type().map_err(io_err(name.clone()))?;
        if !ft.is_file() {
            return Err(GoError::Input {
                input: dname,
                problem: format!(
                    "{name} is not a regular file (a symlink, FIFO, device or directory): Go writes only regular files to a GOCOVERDIR"
                ),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = e.metadata().map_err(io_err(name.clone()))?;
            if m.nlink() > 1 {
                if let Some(first) = seen.insert((m.dev(), m.ino()), name.clone()) {
                    return Err(GoError::Input {
                        input: dname,
                        problem: format!(
                            "{name} is the same file as {first} (a hard link): its counts would be added twice"
                        ),
                    });
                }
            }
        }
        if name.starts_with("covmeta.") {
            metas.push(e.path());
        } else if name.starts_with("covcounters.") {
            counters.push(e.path());
        }
    }
    metas.sort();
    counters.sort();
    if metas.is_empty() {
        return Err(GoError::Input {
            input: dname,
            problem: "no covmeta.* file in the directory".into(),
        });
    }
    Ok((metas, counters))
}

/// Decodes the meta files, each into a pod whose counts are all 0.
fn read_metas(metas: &[PathBuf], stats: &mut DirStats) -> Result<Vec<Pod>, GoError> {
    let mut pods: Vec<Pod> = Vec::new();
    for p in metas {
        let name = p.display().to_string();
        let data = std::fs::read(p).map_err(io_err(name.clone()))?;
        stats.meta_files += 1;
        stats.bytes += data.len() as u64;
        let meta = decode_meta(&name, &data)?;
        let fname = p.file_name().unwrap_or_default().to_string_lossy();
        if fname.strip_prefix("covmeta.") != Some(hex(&meta.hash).as_str()) {
            return Err(GoError::Corrupt {
                file: name,
                offset: 24,
                problem: format!("hash {} does not match the file name", hex(&meta.hash)),
            });
        }
        let mut first = Vec::with_capacity(meta.pkgs.len());
        let mut n = 0usize;
        for pkg in &meta.pkgs {
            let mut f = Vec::with_capacity(pkg.funcs.len());
            for func in &pkg.funcs {
                f.push(n);
                n += func.units.len();
            }
            first.push(f);
        }
        pods.push(Pod {
            meta,
            name,
            first,
            counts: vec![0; n],
        });
    }
    Ok(pods)
}

/// Adds one counter file's counters to its pod (found by its meta hash).
fn add_counter_file(
    p: &Path,
    pods: &mut [Pod],
    by_hash: &HashMap<[u8; 16], usize>,
    stats: &mut DirStats,
) -> Result<(), GoError> {
    let name = p.display().to_string();
    let data = std::fs::read(p).map_err(io_err(name.clone()))?;
    stats.counter_files += 1;
    stats.bytes += data.len() as u64;
    // The meta hash is at bytes 8..24: find the pod before decoding.
    let pod = data
        .get(8..24)
        .and_then(|h| by_hash.get(<&[u8; 16]>::try_from(h).expect("16")).copied());
    let Some(pod) = pod else {
        // A corrupt header is named by the decoder; a sound file lacks its meta.
        decode_counters(&name, &data, |_, _, _| Ok(()))?;
        let h: [u8; 16] = data[8..24].try_into().expect("a decoded header");
        return Err(GoError::Corrupt {
            file: name,
            offset: 8,
            problem: format!(
                "no covmeta.{} in the directory for this counter file",
                hex(&h)
            ),
        });
    };
    let pod = &mut pods[pod];
    decode_counters(&name, &data, |pkg, func, ctrs| {
        stats.function_entries += 1;
        pod.add(pkg, func, ctrs)
    })?;
    Ok(())
}

impl Pod {
    /// Adds the counters of function `func` of package `pkg`.
    fn add(&mut self, pkg: u32, func: u32, ctrs: &[u32]) -> Result<(), String> {
        let set = self.meta.mode == Mode::Set;
        let f = self
            .meta
            .pkgs
            .get(pkg as usize)
            .and_then(|p| p.funcs.get(func as usize))
            .ok_or_else(|| {
                format!(
                    "function {pkg}/{func} is not in {} ({} packages)",
                    self.name,
                    self.meta.pkgs.len()
                )
            })?;
        let first = self.first[pkg as usize][func as usize];
        let units = f.units.len();
        let slots = &mut self.counts[first..first + units];
        if self.meta.per_func {
            if ctrs.len() != 1 {
                return Err(format!(
                    "{} counters for function {}, per-function granularity has 1",
                    ctrs.len(),
                    f.name
                ));
            }
            for s in slots.iter_mut() {
                add(s, ctrs[0], set);
            }
        } else {
            if ctrs.len() != units {
                return Err(format!(
                    "{} counters for function {}, which has {units} units",
                    ctrs.len(),
                    f.name
                ));
            }
            for (s, &c) in slots.iter_mut().zip(ctrs) {
                add(s, c, set);
            }
        }
        Ok(())
    }
}

/// The blocks of every pod's units with their summed counts.
fn into_blocks(pods: &[Pod]) -> Result<Blocks, GoError> {
    let mut blocks = Blocks::default();
    for pod in pods {
        blocks.set_mode(pod.meta.mode).map_err(|e| GoError::Input {
            input: pod.name.clone(),
            problem: e.to_string(),
        })?;
        for (pi, pkg) in pod.meta.pkgs.iter().enumerate() {
            for (fi, f) in pkg.funcs.iter().enumerate() {
                let first = pod.first[pi][fi];
                let file = blocks.file_id(&f.file);
                let func = blocks.func_id(&f.name);
                for (u, &c) in f.units.iter().zip(&pod.counts[first..]) {
                    blocks
                        .add_ids(file, func, u.pos, u.stmts, c)
                        .map_err(|e| GoError::Input {
                            input: pod.name.clone(),
                            problem: format!(
                                "{}:{}.{},{}.{}: {e}",
                                f.file, u.pos[0], u.pos[1], u.pos[2], u.pos[3]
                            ),
                        })?;
                }
            }
        }
    }
    Ok(blocks)
}

fn add(slot: &mut u64, c: u32, set: bool) {
    if set {
        *slot |= u64::from(c != 0);
    } else {
        // At most 2^32 files of 2^32 each: saturates only past u64, never in practice.
        *slot = slot.saturating_add(u64::from(c));
    }
}
