//! `--group` on a fleet: the groups travel in the job spec and the merge tasks, and the
//! result is the embedded one.

use super::*;

/// A coordinator and two workers with two groups (and one matching no manager) write
/// exactly what `merge` writes with the same flags, group records included; the
/// manifest lists the groups.
#[test]
fn fleet_with_groups_equals_embedded() {
    let _g = fleet::lock();
    let s = setup(47, false);
    let groups = [
        "--group",
        "kasan=*kasan*",
        "--group",
        "first=*-0",
        "--group",
        "none=no-such-manager-*",
    ];
    let embedded = s.tmp.path().join("embedded-groups.gz");
    let mut a = job_args(&s.corpus, &s.source, &s.ins);
    a.extend_from_slice(&groups);
    a.extend_from_slice(&["--out", embedded.to_str().unwrap()]);
    merge_ok(&a);
    let want = gunzip(&embedded);
    let text = String::from_utf8(want.clone()).unwrap();
    assert!(text.contains(r#""Manager":"kasan""#) && text.contains(r#""Manager":"first""#));
    assert!(!text.contains(r#""Manager":"none""#));
    assert_ne!(want, s.want, "group records were written");

    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let out = s.tmp.path().join("fleet-groups.gz");
    let man = s.tmp.path().join("manifest.json");
    let _w1 = worker(s.tmp.path(), 70, &store, &[], &[]);
    let _w2 = worker(s.tmp.path(), 71, &store, &[], &[]);
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&groups);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    run_ok(&a, &[]);
    assert_eq!(
        gunzip(&out),
        want,
        "fleet result with groups differs from embedded"
    );
    let m = manifest(&man);
    let names: Vec<&str> = m["groups"]
        .as_array()
        .expect("the manifest lists the groups")
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kasan", "first", "none"]);
    assert_eq!(m["groups"][0]["glob"], "*kasan*");
}
