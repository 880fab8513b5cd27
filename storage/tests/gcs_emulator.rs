//! `gs://` stores against the GCS emulator that `deploy/dev/test.sh` starts: puts, gets,
//! listing, deletes, and a streamed concatenation big enough to take several resumable
//! chunks (the result path); a concatenation that fails publishes nothing.
//!
//! One test per binary: it points object_store at the emulator through the environment
//! before any thread starts.

use bytes::Bytes;
use covmerge_storage::{Store, StoreError};

fn endpoint() -> String {
    std::env::var("COVMERGE_TEST_GCS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:9329".into())
}

fn bucket() -> String {
    let name = format!("cm-storage-{}", std::process::id());
    let o = std::process::Command::new("curl")
        .args([
            "-fsS",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
        ])
        .arg(format!("{{\"name\":\"{name}\"}}"))
        .arg(format!("{}/storage/v1/b?project=test", endpoint()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    name
}

#[test]
fn gcs_store_round_trips_and_streams_multi_chunk_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("sa.json");
    std::fs::write(
        &creds,
        format!(
            r#"{{"gcs_base_url":"{}","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}}"#,
            endpoint()
        ),
    )
    .unwrap();
    // SAFETY-free in edition 2021; no other thread exists yet.
    std::env::set_var("GOOGLE_SERVICE_ACCOUNT", &creds);
    let b = bucket();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = Store::open(&format!("gs://{b}/pre/fix")).unwrap();
            store.put("p/1", Bytes::from_static(b"one")).await.unwrap();
            assert_eq!(&store.get("p/1").await.unwrap()[..], b"one");
            assert_eq!(store.size("p/1").await.unwrap(), 3);
            assert!(store.get_opt("nope").await.unwrap().is_none());
            // Parts of awkward sizes: 8 MiB upload parts re-cut into 256 KiB-aligned chunks.
            let mut parts = Vec::new();
            let mut want = b"HEAD".to_vec();
            for i in 0..3u32 {
                let data: Vec<u8> = (0..(7 << 20) + 12_345 * (i as usize + 1))
                    .map(|j| (j as u32).wrapping_mul(2_654_435_761).wrapping_add(i) as u8)
                    .collect();
                want.extend_from_slice(&data);
                let k = format!("parts/{i}");
                store.put(&k, Bytes::from(data)).await.unwrap();
                parts.push(k);
            }
            assert_eq!(store.list("parts").await.unwrap(), parts);
            let n = store
                .concat("out/all", Bytes::from_static(b"HEAD"), &store, &parts)
                .await
                .unwrap();
            assert_eq!(n, want.len() as u64);
            let got = store.get("out/all").await.unwrap();
            assert!(got[..] == want[..], "concatenation differs");
            // A missing part: the upload is abandoned and nothing appears.
            let mut bad = parts.clone();
            bad.push("parts/missing".into());
            let err = store
                .concat("out/bad", Bytes::from_static(b"H"), &store, &bad)
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
            assert!(!store.exists("out/bad").await.unwrap());
            // A large merged part, uploaded from its temporary file in chunks.
            {
                use std::io::Write;
                let mut f = tempfile::tempfile().unwrap();
                f.write_all(&want).unwrap();
                f.write_all(b"past the part").unwrap();
                store
                    .put_file("parts/big", &f, want.len() as u64)
                    .await
                    .unwrap();
                let got = store.get("parts/big").await.unwrap();
                assert!(got[..] == want[..], "the part uploaded from a file differs");
                store.delete("parts/big").await.unwrap();
            }
            for k in &parts {
                store.delete(k).await.unwrap();
            }
            store.delete("never-existed").await.unwrap();
            assert!(store.list("parts").await.unwrap().is_empty());
        });
}
