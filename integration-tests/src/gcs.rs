//! The GCS emulator (fake-gcs-server) that `deploy/dev/start-gcs.sh` starts: buckets,
//! objects read and written with curl over GCS's JSON API (a client independent of
//! covmerge's), and the service-account file that points covmerge at the emulator.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The GCS emulator of the tests (`COVMERGE_TEST_GCS_ENDPOINT`, default the local fake-gcs-server).
pub fn endpoint() -> String {
    std::env::var("COVMERGE_TEST_GCS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:9329".into())
}

/// Writes the service-account file object_store's CI uses for an emulator: no OAuth,
/// requests to `gcs_base_url`. Give its path as `GOOGLE_SERVICE_ACCOUNT`.
pub fn credentials(dir: &Path) -> PathBuf {
    credentials_at(dir, &endpoint())
}

/// [`credentials`] naming `base_url` (e.g. a relay in front of the emulator).
pub fn credentials_at(dir: &Path, base_url: &str) -> PathBuf {
    let p = dir.join("gcs-emulator.json");
    let v = serde_json::json!({
        "gcs_base_url": base_url,
        "disable_oauth": true,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    });
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

fn curl(args: &[&str]) -> Vec<u8> {
    let o = Command::new("curl")
        .args(["-fsS", "--retry", "3"])
        .args(args)
        .output()
        .expect("curl");
    assert!(
        o.status.success(),
        "curl {args:?} against the GCS emulator at {}: {}",
        endpoint(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// An object name as one percent-encoded URL component (`/` included): every byte
/// but the unreserved ones, so that names with `#`, `?`, `%`, spaces or non-ASCII
/// reach the emulator as they are.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A fresh bucket; returns its name.
pub fn bucket(tag: &str) -> String {
    let name = format!(
        "cm-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000_000
    );
    curl(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        "-d",
        &format!("{{\"name\":\"{name}\"}}"),
        &format!("{}/storage/v1/b?project=test", endpoint()),
    ]);
    name
}

/// Uploads a local file as `gs://bucket/key`.
pub fn upload(bucket: &str, key: &str, file: &Path) {
    curl(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/octet-stream",
        "--data-binary",
        &format!("@{}", file.display()),
        &format!(
            "{}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
            endpoint(),
            enc(key)
        ),
    ]);
}

/// The bytes of `gs://bucket/key`.
pub fn download(bucket: &str, key: &str) -> Vec<u8> {
    curl(&[&format!(
        "{}/storage/v1/b/{bucket}/o/{}?alt=media",
        endpoint(),
        enc(key)
    )])
}

/// Object names in a bucket under `prefix`.
pub fn list(bucket: &str, prefix: &str) -> Vec<String> {
    let body = curl(&[&format!(
        "{}/storage/v1/b/{bucket}/o?prefix={}",
        endpoint(),
        enc(prefix)
    )]);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mut names: Vec<String> = v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| o["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
