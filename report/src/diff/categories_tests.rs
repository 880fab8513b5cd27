//! The categories on a hand-made pair of bases: two lines deleted, two inserted,
//! instrumentation added and removed on unchanged lines.

use super::*;
use covmerge_source::project::line_map;
use covmerge_source::FileVersion;

fn lh(v: &[(u32, u64)]) -> LineHits {
    LineHits {
        lines: v.iter().map(|x| x.0).collect(),
        hits: v.iter().map(|x| x.1).collect(),
    }
}

/// OLD's base `a1..a10`; NEW's base deletes a2 and a3 and inserts n1, n2 after a6:
/// `a1 a4 a5 a6 n1 n2 a7 a8 a9 a10` (OLD line 4 is NEW line 2, 7 is 7).
fn bases() -> LineMap {
    let old: String = (1..=10).map(|i| format!("a{i}\n")).collect();
    let new = "a1\na4\na5\na6\nn1\nn2\na7\na8\na9\na10\n";
    line_map(
        &FileVersion::new(old.into_bytes()),
        &FileVersion::new(new.as_bytes().to_vec()),
    )
}

fn old() -> LineHits {
    lh(&[
        (1, 5),
        (2, 3),
        (3, 0),
        (4, 1),
        (5, 0),
        (6, 2),
        (7, 0),
        (10, 0),
    ])
}

fn new() -> LineHits {
    lh(&[
        (1, 7),
        (2, 0),
        (3, 2),
        (5, 1),
        (6, 0),
        (8, 3),
        (9, 0),
        (10, 0),
    ])
}

fn check_identities(c: &CatLines, old: &LineHits, new: &LineHits) {
    let n = c.counts();
    assert_eq!(n.old_counts(), (old.instrumented(), old.covered()));
    assert_eq!(n.new_counts(), (new.instrumented(), new.covered()));
}

#[test]
fn every_category_on_a_hand_made_pair_of_bases() {
    use Category::*;
    let map = bases();
    let c = classify(&old(), &new(), Relation::Map(&map));
    let want: [(Category, &[u32]); 12] = [
        (Cbc, &[1]),  // a1: covered in both
        (Lbc, &[2]),  // a4: covered in OLD only
        (Gbc, &[3]),  // a5: covered in NEW only
        (Ubc, &[10]), // a10: covered in neither
        (Ecb, &[4]),  // a6: no longer instrumented, was covered
        (Eub, &[7]),  // a7: no longer instrumented, was not covered
        (Gic, &[8]),  // a8: newly instrumented, covered
        (Uic, &[9]),  // a9: newly instrumented, not covered
        (Gnc, &[5]),  // n1: inserted, covered
        (Unc, &[6]),  // n2: inserted, not covered
        (Dcb, &[2]),  // a2: deleted, was covered (OLD's line number)
        (Dub, &[3]),  // a3: deleted, was not covered
    ];
    for (cat, lines) in want {
        assert_eq!(c.get(cat), lines, "{}", cat.name());
    }
    check_identities(&c, &old(), &new());
    assert!(!c.only_unchanged());
    assert_eq!(c.counts().lost(), 2);
}

#[test]
fn the_output_objects_omit_empty_categories_in_lcov_order() {
    let map = bases();
    let c = classify(&old(), &lh(&[(1, 7)]), Relation::Map(&map));
    assert_eq!(
        serde_json::to_string(&c).unwrap(),
        r#"{"CBC":[1],"ECB":[2,4],"EUB":[3,7,10],"DCB":[2],"DUB":[3]}"#
    );
    assert_eq!(
        serde_json::to_string(&c.counts()).unwrap(),
        r#"{"CBC":1,"ECB":2,"EUB":3,"DCB":1,"DUB":1}"#
    );
}

#[test]
fn on_the_same_text_nothing_is_new_or_deleted() {
    use Category::*;
    let (o, n) = (old(), new());
    let c = classify(&o, &n, Relation::Same);
    for cat in [Gnc, Unc, Dcb, Dub] {
        assert!(c.get(cat).is_empty(), "{}", cat.name());
    }
    let want: [(Category, &[u32]); 8] = [
        (Cbc, &[1]),
        (Lbc, &[2, 6]),
        (Gbc, &[3, 5]),
        (Ubc, &[10]),
        (Ecb, &[4]),
        (Eub, &[7]),
        (Gic, &[8]),
        (Uic, &[9]),
    ];
    for (cat, lines) in want {
        assert_eq!(c.get(cat), lines, "{}", cat.name());
    }
    check_identities(&c, &o, &n);
    let same = classify(&o, &o, Relation::Same);
    assert!(same.only_unchanged());
}

#[test]
fn a_file_with_nothing_in_common_is_deleted_and_new() {
    use Category::*;
    let (o, n) = (old(), new());
    let c = classify(&o, &n, Relation::Disjoint);
    assert_eq!(c.get(Dcb), &[1, 2, 4, 6]);
    assert_eq!(c.get(Dub), &[3, 5, 7, 10]);
    assert_eq!(c.get(Gnc), &[1, 3, 5, 8]);
    assert_eq!(c.get(Unc), &[2, 6, 9, 10]);
    check_identities(&c, &o, &n);
    // A file only OLD has, compared with nothing.
    let gone = classify(&o, &LineHits::default(), Relation::Disjoint);
    assert_eq!(gone.counts().old_counts(), (8, 4));
}

#[test]
fn fail_on_specs() {
    assert_eq!(
        FailOn::parse("LBC>=50").unwrap(),
        FailOn {
            cat: Some(Category::Lbc),
            at_least: 50
        }
    );
    assert_eq!(
        FailOn::parse(" dcb >= 3 ").unwrap().cat,
        Some(Category::Dcb)
    );
    let lost = FailOn::parse("lost>=2").unwrap();
    assert_eq!(lost.cat, None);
    let c = classify(&old(), &new(), Relation::Map(&bases())).counts();
    assert_eq!(lost.reached(&c), Some(2));
    assert_eq!(FailOn::parse("lost>=3").unwrap().reached(&c), None);
    for (bad, why) in [
        ("LBC>50", "no `>=`"),
        ("XYZ>=1", "unknown category \"XYZ\""),
        ("LBC>=-1", "\"-1\" is not a whole number"),
        ("LBC>=", "\"\" is not a whole number"),
        ("LBC>=0", "N must be at least 1"),
    ] {
        let e = FailOn::parse(bad).unwrap_err();
        assert!(e.contains(why) && e.contains("CBC, LBC"), "{bad}: {e}");
    }
}

#[test]
fn a_same_base_diff_gives_the_categories_of_the_identity() {
    let (o, n) = (old(), new());
    let d = super::super::diff_file("f.c", Some(&o), Some(&n));
    assert_eq!(
        same_base_counts(&d),
        classify(&o, &n, Relation::Same).counts()
    );
    let added = super::super::diff_file("g.c", None, Some(&n));
    assert_eq!(
        same_base_counts(&added),
        classify(&LineHits::default(), &n, Relation::Same).counts()
    );
    let deleted = super::super::diff_file("g.c", Some(&o), None);
    assert_eq!(
        same_base_counts(&deleted),
        classify(&o, &LineHits::default(), Relation::Same).counts()
    );
}
