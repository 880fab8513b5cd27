//! Inputs that grow one dimension other than rows, shared by the memory tests
//! (`tests/it/memory.rs`) and `covmerge-shapes-bench`.

use std::fmt::Write as _;
use std::path::Path;

use covmerge_source::BlobId;

/// The CSV header of every shape.
pub const HDR: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n";

/// A `store:` snapshot under `root` (a `file://` store) of `commits` commits
/// (`c0`, `c1`, ...; the base is `c0`) of `paths` paths each, a twentieth of whose
/// blobs change from one commit to the next; and an input with 4 rows per commit, on
/// paths that differ from commit to commit. Returns the source spec and the input.
/// Each commit's index is read by the merge: the indexes' dimension.
pub fn store_snapshot(root: &Path, commits: usize, paths: usize) -> (String, String) {
    let blobs = root.join("blobs");
    let idx = root.join("commits");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&idx).unwrap();
    let path = |p: usize| format!("drivers/sub{}/part{}/file_{p}.c", p % 50, p % 500);
    let text = |p: usize, version: usize| -> Vec<u8> {
        (0..20)
            .map(|l| format!("int f{p}_{l}_{version};\n"))
            .collect::<String>()
            .into_bytes()
    };
    let mut csv = String::from(HDR);
    for c in 0..commits {
        let mut index = String::with_capacity(paths * 90);
        let touched: Vec<usize> = (0..4).map(|k| (c * 7 + k * 131) % paths).collect();
        for p in 0..paths {
            let version = if p % 20 == c % 20 { c } else { 0 };
            let data = text(p, version);
            let id = BlobId::of(&data).hex();
            // Only the blobs a row reads (and the base's of those paths) are written.
            if touched.contains(&p) || c == 0 {
                let b = blobs.join(&id);
                if !b.exists() {
                    std::fs::write(b, &data).unwrap();
                }
            }
            writeln!(index, "{id} {}", path(p)).unwrap();
        }
        std::fs::write(idx.join(format!("c{c}.idx")), index).unwrap();
        for p in touched {
            writeln!(csv, "r,c{c},{},fn,m,{},1", path(p), 1 + c % 20).unwrap();
        }
    }
    (format!("store:file://{}", root.display()), csv)
}
