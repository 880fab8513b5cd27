//! Go coverage as input: text profiles and `GOCOVERDIR` directories become
//! rows of a manager and a build commit, projected onto the base like CSV rows.

use std::io::Write;
use std::path::Path;

use covmerge_integration_tests::{canon, covmerge, manifest, merge_ok};
use serde_json::json;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn gzip(path: &Path, text: &str) {
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
}

const BASE_F: &str =
    "package pkg\n\nfunc F(x int) int {\n\tif x > 0 {\n\t\treturn x\n\t}\n\treturn -x\n}\n";
/// The older build: one line less above F, so its lines 3..7 are the base's 4..8.
const OLD_F: &str =
    "package pkg\nfunc F(x int) int {\n\tif x > 0 {\n\t\treturn x\n\t}\n\treturn -x\n}\n";

/// Lays out sources (commits `base` and `old`) and returns the merge arguments.
fn setup(d: &Path) -> Vec<String> {
    write(&d.join("src/base/go/pkg/f.go"), BASE_F);
    write(&d.join("src/old/go/pkg/f.go"), OLD_F);
    vec![
        "--source".into(),
        format!("dir:{}", d.join("src").display()),
        "--base-repo".into(),
        "git://example/m".into(),
        "--base-commit".into(),
        "base".into(),
        "--shards".into(),
        "3".into(),
        "--go-module".into(),
        "example.com/m=go".into(),
    ]
}

#[test]
fn text_profiles_of_two_builds_and_csv_merge_onto_the_base() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut args = setup(d);
    // At the base commit (the default), manager `mgr-a` from the file name; the same
    // block twice (two test binaries) sums; a line covered by two blocks takes the max.
    write(
        &d.join("runs/mgr-a.out"),
        "mode: count\n\
         example.com/m/pkg/f.go:3.20,4.12 1 5\n\
         example.com/m/pkg/f.go:4.12,6.3 1 2\n\
         example.com/m/pkg/f.go:3.20,4.12 1 1\n\
         example.com/m/pkg/f.go:7.2,7.11 1 0\n",
    );
    // Recorded on the older build, gzipped, renamed: projected onto the base.
    gzip(
        &d.join("runs/old-build.out.gz"),
        "mode: count\n\
         example.com/m/pkg/f.go:2.20,3.12 1 10\n\
         example.com/m/pkg/f.go:6.2,6.11 1 4\n",
    );
    // CSV rows in the same job.
    write(
        &d.join("runs/rows.csv"),
        "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n\
         git://example/m,base,go/pkg/f.go,F,csv-mgr,5,100\n",
    );
    let out = d.join("out.jsonl.gz");
    let man = d.join("manifest.json");
    args.extend([
        "--go-commit".into(),
        "old-build=old".into(),
        "--go-manager".into(),
        format!("{}=mgr-old", d.join("runs/old-build.out.gz").display()),
        "--out".into(),
        out.display().to_string(),
        "--manifest".into(),
        man.display().to_string(),
        "--input".into(),
        d.join("runs/mgr-a.out").display().to_string(),
        d.join("runs/old-build.out.gz").display().to_string(),
        d.join("runs/rows.csv").display().to_string(),
    ]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    merge_ok(&a);
    let got = canon(&out);
    let f = &got["files"]["go/pkg/f.go"];
    assert_eq!(
        f["managers"]["mgr-a"],
        json!({"3": 6, "4": 6, "5": 2, "6": 2, "7": 0})
    );
    assert_eq!(f["managers"]["mgr-old"], json!({"3": 10, "4": 10, "7": 4}));
    assert_eq!(f["managers"]["csv-mgr"], json!({"5": 100}));
    assert_eq!(
        f["managers"]["*"],
        json!({"3": 16, "4": 16, "5": 102, "6": 2, "7": 4})
    );
    // Text profiles name no functions; the CSV row does.
    assert_eq!(f["funcs"], json!({"F": [5]}));
    let t = &manifest(&man)["totals"];
    // 5 + 3 lines from the profiles, 1 CSV row.
    assert_eq!(t["rows_in"], json!(9));
    assert_eq!(t["rows_lost"], json!(0));
}

#[test]
fn a_go_file_under_no_module_rule_fails_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut args = setup(d);
    write(
        &d.join("p.out"),
        "mode: set\nexample.com/other/x.go:1.1,2.1 1 1\n",
    );
    let out = d.join("out.jsonl.gz");
    args.extend([
        "--out".into(),
        out.display().to_string(),
        "--input".into(),
        d.join("p.out").display().to_string(),
    ]);
    let mut full = vec!["merge".to_string(), "--quiet".into()];
    full.extend(args);
    let a: Vec<&str> = full.iter().map(String::as_str).collect();
    let o = covmerge(&a);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("p.out")
            && err.contains("example.com/other/x.go")
            && err.contains("--go-module"),
        "{err}"
    );
    assert!(!out.exists(), "no result on failure");
}

#[test]
fn a_go_manager_override_naming_no_input_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut args = setup(d);
    write(&d.join("p.out"), "mode: set\n");
    args.extend([
        "--out".into(),
        d.join("o.gz").display().to_string(),
        "--go-commit".into(),
        "typo=old".into(),
        "--input".into(),
        d.join("p.out").display().to_string(),
    ]);
    let mut full = vec!["merge".to_string(), "--quiet".into()];
    full.extend(args);
    let a: Vec<&str> = full.iter().map(String::as_str).collect();
    let o = covmerge(&a);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--go-commit typo=old"), "{err}");
}

/// Lays the fixture program's sources out as commit `base` of a `dir:` source.
fn goprog_sources(root: &Path, commit: &str) {
    let fx = covmerge_integration_tests::fixture("goprog");
    for f in ["main.go", "calc/calc.go", "text/text.go"] {
        let to = root.join(commit).join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fx.join(f), to).unwrap();
    }
}

/// The Go-written covdata directory kept with the decoder's tests (3 runs of the
/// fixture program, `-covermode=count`): one input, named after the directory, with
/// functions from the meta-data.
#[test]
fn a_covdata_directory_is_one_input_with_functions_from_the_meta_data() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    goprog_sources(&d.join("src"), "base");
    let cov = d.join("runs/fleet-1");
    std::fs::create_dir_all(&cov).unwrap();
    let testdata = covmerge_integration_tests::root().join("input/src/go/testdata");
    for e in std::fs::read_dir(&testdata).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("cov") {
            std::fs::copy(&p, cov.join(p.file_name().unwrap())).unwrap();
        }
    }
    let out = d.join("out.jsonl.gz");
    let man = d.join("m.json");
    merge_ok(&[
        "--source",
        &format!("dir:{}", d.join("src").display()),
        "--base-repo",
        "git://example/goprog",
        "--base-commit",
        "base",
        "--go-module",
        "example.com/goprog=.",
        "--out",
        out.to_str().unwrap(),
        "--manifest",
        man.to_str().unwrap(),
        "--input",
        cov.to_str().unwrap(),
    ]);
    let got = canon(&out);
    let calc = &got["files"]["calc/calc.go"];
    // Blocks calc.go:8.2,9.16 = 7, 10.3,11.1 = 3, 27.29,27.41 = 0 (textfmt.txt).
    assert_eq!(calc["managers"]["fleet-1"]["8"], json!(7));
    assert_eq!(calc["managers"]["fleet-1"]["10"], json!(3));
    assert_eq!(calc["managers"]["fleet-1"]["27"], json!(0));
    assert_eq!(calc["managers"]["*"], calc["managers"]["fleet-1"]);
    assert_eq!(calc["funcs"]["Parse"], json!([8, 9, 10, 11, 12]));
    assert_eq!(calc["funcs"]["*Acc.Push"], json!([27]));
    assert_eq!(calc["funcs"]["Acc.Sum"], json!([30]));
    // The function literal inside Shout belongs to Shout.
    assert_eq!(
        got["files"]["text/text.go"]["funcs"]["Shout"],
        json!([8, 9, 10, 11, 12, 13, 15, 16])
    );
    assert_eq!(got["files"]["main.go"]["managers"]["*"]["16"], json!(7));
    assert_eq!(manifest(&man)["totals"]["rows_lost"], json!(0));
}

/// The README's Go example on the bundled data (examples/go): a covdata directory and
/// the same data as a text profile, as two managers.
#[test]
fn the_readme_go_example_on_bundled_data() {
    let ex = covmerge_integration_tests::root().join("examples/go");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("go.jsonl.gz");
    let stdout = merge_ok(&[
        "--source",
        &format!("dir:{}", ex.join("sources").display()),
        "--base-repo",
        "git://example.invalid/goprog",
        "--base-commit",
        "v1",
        "--go-module",
        "example.com/goprog=.",
        "--input",
        ex.join("runs/fleet-a").to_str().unwrap(),
        ex.join("runs/unit-tests.out").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let got = canon(&out);
    let calc = &got["files"]["calc/calc.go"]["managers"];
    assert_eq!(calc["fleet-a"], calc["unit-tests"]);
    assert_eq!(calc["*"]["8"], json!(14));
    // Lines of textfmt's blocks: main.go 11 (all run), calc.go 11 (Push and Sum not),
    // text.go 12 (Unused's 4 not).
    assert_eq!(
        stdout.trim_end().lines().last().unwrap(),
        "total instrumented(34), covered(28), 82.35%"
    );
}

/// Fleet mode: a covdata directory and a gzipped text profile read from S3 are one
/// split task each on two workers over RabbitMQ; the result equals the embedded one.
#[test]
fn go_inputs_on_the_fleet_equal_embedded() {
    use covmerge_integration_tests::{fleet, gunzip};
    let _g = fleet::lock();
    let ex = covmerge_integration_tests::root().join("examples/go");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let profile = d.join("unit-tests.out.gz");
    gzip(
        &profile,
        &std::fs::read_to_string(ex.join("runs/unit-tests.out")).unwrap(),
    );
    let b = fleet::bucket("go");
    fleet::upload(&b, "in/unit-tests.out.gz", &profile);
    let src = format!("dir:{}", ex.join("sources").display());
    let covdir = ex.join("runs/fleet-a").display().to_string();
    let common = |input2: &str| -> Vec<String> {
        [
            "--source",
            &src,
            "--base-repo",
            "git://example.invalid/goprog",
            "--base-commit",
            "v1",
            "--go-module",
            "example.com/goprog=.",
            "--date-to",
            "2026-01-01",
            "--shards",
            "3",
            "--go-commit",
            "fleet-a=v1",
            "--input",
            &covdir,
            input2,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let want_out = d.join("embedded.gz");
    let mut a = common(profile.to_str().unwrap());
    a.extend(["--out".into(), want_out.display().to_string()]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    merge_ok(&a);

    let store = format!("file://{}", d.join("store").display());
    let _w1 = fleet::worker(d, 1, &store, &[], &[]);
    let _w2 = fleet::worker(d, 2, &store, &["--split-threads", "1"], &[]);
    let amqp = fleet::amqp();
    let got_out = d.join("fleet.gz");
    let mut a = common(&format!("s3://{b}/in/unit-tests.out.gz"));
    a.extend(
        [
            "--amqp",
            &amqp,
            "--store",
            &store,
            "--out",
            got_out.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = fleet::coordinator_run(&a, &[], std::time::Duration::from_secs(120));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&got_out), gunzip(&want_out));
    let got = canon(&got_out);
    assert_eq!(
        got["files"]["calc/calc.go"]["managers"]["unit-tests"]["8"],
        json!(7)
    );
}
