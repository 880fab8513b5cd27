//! `s3://` stores against the S3 server that `deploy/dev/test.sh` starts (moto): a
//! large merged part uploaded from its temporary file in chunks is the object whole,
//! through S3's multipart upload.

use std::io::Write;
use std::sync::Arc;

use covmerge_storage::Store;

fn endpoint() -> String {
    std::env::var("COVMERGE_TEST_S3_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:9327".into())
}

#[test]
fn a_part_uploaded_from_its_file_in_chunks_is_the_object_whole() {
    let name = format!("cm-storage-put-file-{}", std::process::id());
    let o = std::process::Command::new("curl")
        .args(["-fsS", "-X", "PUT", &format!("{}/{name}", endpoint())])
        .output()
        .expect("curl");
    assert!(
        o.status.success(),
        "creating bucket {name} on {}: {}",
        endpoint(),
        String::from_utf8_lossy(&o.stderr)
    );
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(&name)
        .with_access_key_id("covmerge-test")
        .with_secret_access_key("covmerge-test-secret")
        .build()
        .unwrap();
    let store = Store::from_object_store(Arc::new(s3), "pre", &name);
    // Three 8 MiB chunks, the last short (S3's parts: 5 MiB at least but the last).
    let data: Vec<u8> = (0..(17u32 << 20) + 4_321)
        .map(|j| j.wrapping_mul(2_654_435_761) as u8)
        .collect();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&data).unwrap();
    f.write_all(b"past the part").unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            store
                .put_file("parts/00001.jsonl.gz", &f, data.len() as u64)
                .await
                .unwrap();
            let got = store.get("parts/00001.jsonl.gz").await.unwrap();
            assert_eq!(got.len(), data.len());
            assert!(got[..] == data[..], "the part uploaded from a file differs");
        });
}
