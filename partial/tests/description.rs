//! `partial.json` as read from a local directory: its size is capped before it is
//! parsed.

mod common;

use std::io::Write;

use common::{build, random_rows, Rng};
use covmerge_partial::desc::MAX_DESCRIPTION_BYTES;
use covmerge_partial::{Partial, PartialError};

/// A description padded past the cap (valid JSON all the same: spaces before its
/// end) was read whole; it is refused naming the file, and one just under is read.
#[test]
fn a_description_past_its_cap_is_refused_naming_it_before_it_is_parsed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    build(
        &random_rows(&mut Rng(8), 40),
        &dir,
        2,
        "2026-12-04",
        "2026-12-04",
        usize::MAX,
    );
    let path = dir.join("partial.json");
    let text = std::fs::read(&path).unwrap();
    let pad = |len: u64| {
        let mut f = std::fs::File::create(&path).unwrap();
        let body = &text[..text.len() - 2]; // before "}\n"
        f.write_all(body).unwrap();
        let spaces = len - text.len() as u64;
        f.write_all(&vec![b' '; spaces as usize]).unwrap();
        f.write_all(b"}\n").unwrap();
    };
    pad(MAX_DESCRIPTION_BYTES);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        MAX_DESCRIPTION_BYTES
    );
    Partial::open(&dir).unwrap();
    pad(MAX_DESCRIPTION_BYTES + 1);
    let e = Partial::open(&dir).unwrap_err();
    assert!(matches!(e, PartialError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(path.to_str().unwrap()) && msg.contains("more than"),
        "{msg}"
    );
}
