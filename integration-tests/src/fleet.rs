//! A fleet on this machine for the tests: worker and coordinator processes against the
//! real RabbitMQ and the S3 server that `deploy/dev/test.sh` starts.
//!
//! Every worker serves every job on the broker, so fleet tests take [`lock`] and run
//! one at a time, and purge the shared task queue first.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bin;

static LOCK: Mutex<()> = Mutex::new(());

/// Serializes fleet tests and clears tasks left by earlier runs.
pub fn lock() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _ = Command::new("rabbitmqctl")
        .args(["-q", "purge_queue", "-p", &vhost(), "covmerge.tasks"])
        .output();
    g
}

/// The vhost of [`amqp`] (`COVMERGE_TEST_AMQP` may name a private one).
pub fn vhost() -> String {
    let url = amqp();
    let v = url.rsplit('/').next().unwrap_or("");
    match v {
        "" | "%2f" | "%2F" => "/".into(),
        v => v.to_string(),
    }
}

/// [`amqp`] with its host and port replaced by `addr` (a relay's).
pub fn amqp_via(addr: &str) -> String {
    let url = amqp();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = rest.rsplit_once('@').unwrap();
    let path = rest.split_once('/').map(|(_, p)| p).unwrap_or("");
    format!("{scheme}://{user}@{addr}/{path}")
}

/// The S3 endpoint's `host:port`.
pub fn s3_addr() -> String {
    s3_endpoint()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string()
}

/// The broker's `host:port`.
pub fn amqp_addr() -> String {
    let url = amqp();
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
    rest.split('/').next().unwrap().to_string()
}

/// The broker of the tests (`COVMERGE_TEST_AMQP`, default the local RabbitMQ).
pub fn amqp() -> String {
    std::env::var("COVMERGE_TEST_AMQP")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// The S3 server of the tests (`COVMERGE_TEST_S3_ENDPOINT`, default the local moto).
pub fn s3_endpoint() -> String {
    std::env::var("COVMERGE_TEST_S3_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:9327".into())
}

/// A fresh bucket on the S3 server; returns its name.
pub fn bucket(tag: &str) -> String {
    let name = format!(
        "cm-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000_000
    );
    let o = Command::new("curl")
        .args(["-fsS", "-X", "PUT", &format!("{}/{name}", s3_endpoint())])
        .output()
        .expect("curl");
    assert!(
        o.status.success(),
        "creating bucket {name} on {}: {}",
        s3_endpoint(),
        String::from_utf8_lossy(&o.stderr)
    );
    name
}

fn s3(bucket: &str) -> covmerge_storage::Store {
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(s3_endpoint())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(bucket)
        .with_access_key_id("covmerge-test")
        .with_secret_access_key("covmerge-test-secret")
        .build()
        .unwrap();
    covmerge_storage::Store::from_object_store(std::sync::Arc::new(s3), "", bucket)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Uploads a local file as `s3://bucket/key`.
pub fn upload(bucket: &str, key: &str, file: &Path) {
    let data = bytes::Bytes::from(std::fs::read(file).unwrap());
    block_on(s3(bucket).put(key, data)).unwrap_or_else(|e| panic!("upload {key}: {e}"));
}

/// Downloads `s3://bucket/key` into `file`.
pub fn download(bucket: &str, key: &str, file: &Path) {
    let data = block_on(s3(bucket).get(key)).unwrap_or_else(|e| panic!("download {key}: {e}"));
    std::fs::write(file, data).unwrap();
}

/// The environment every fleet process gets: S3 credentials and endpoint.
pub fn fleet_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .env("AWS_ACCESS_KEY_ID", "covmerge-test")
        .env("AWS_SECRET_ACCESS_KEY", "covmerge-test-secret")
        .env("AWS_ENDPOINT_URL", s3_endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "info");
    c
}

/// A running process whose stderr goes to a log file.
pub struct Proc {
    /// The process.
    pub child: Child,
    /// The file its stderr goes to.
    pub log: PathBuf,
    /// Its name in panic messages.
    pub name: String,
}

impl Proc {
    /// Starts `cmd` with stdout piped and stderr to `log`.
    pub fn spawn(mut cmd: Command, log: PathBuf, name: &str) -> Proc {
        let f = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(f)
            .spawn()
            .expect("spawn covmerge");
        Proc {
            child,
            log,
            name: name.to_string(),
        }
    }

    /// Everything logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if self.log_text().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{}: {needle:?} not logged within {timeout:?}; log:\n{}",
            self.name,
            self.log_text()
        );
    }

    /// Sends signal `sig` to the process.
    pub fn signal(&self, sig: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Waits for exit (bounded); returns the exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            if t0.elapsed() > timeout {
                panic!(
                    "{} did not exit within {timeout:?}; log:\n{}",
                    self.name,
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts a worker on `store` with extra environment (fault hooks).
pub fn worker(dir: &Path, n: usize, store: &str, extra: &[&str], env: &[(&str, &str)]) -> Proc {
    worker_on(&amqp(), dir, n, store, extra, env)
}

/// [`worker`] on the broker URL `amqp` (a relay's).
pub fn worker_on(
    amqp: &str,
    dir: &Path,
    n: usize,
    store: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Proc {
    let amqp = amqp.to_string();
    let mut args = vec!["worker", "--amqp", &amqp, "--store", store];
    args.extend_from_slice(extra);
    let mut c = fleet_cmd(&args);
    for (k, v) in env {
        c.env(k, v);
    }
    let log = dir.join(format!("worker-{n}.log"));
    let p = Proc::spawn(c, log, &format!("worker {n}"));
    p.wait_log("worker started", Duration::from_secs(30));
    p
}

/// Runs a coordinator to completion (bounded) and returns its output.
pub fn coordinator_run(args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Output {
    let mut c = fleet_cmd(&{
        let mut a = vec!["coordinator", "--quiet"];
        a.extend_from_slice(args);
        a
    });
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coordinator");
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "coordinator did not finish within {timeout:?}:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a coordinator to completion on a background thread.
pub fn coordinator_spawn(args: &[&str]) -> std::thread::JoinHandle<Output> {
    let args: Vec<String> = args.iter().map(|x| x.to_string()).collect();
    std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        coordinator_run(&a, &[], Duration::from_secs(180))
    })
}

/// Runs a coordinator to completion on a background thread, with extra environment.
pub fn coordinator_spawn_env(
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> std::thread::JoinHandle<Output> {
    let args: Vec<String> = args.iter().map(|x| x.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        coordinator_run(&a, &e, timeout)
    })
}

/// A RabbitMQ vhost of one test's own (guest given every permission), deleted on
/// drop: its workers serve only its jobs, and deleting its queues disturbs nobody.
pub struct Vhost {
    /// The vhost's name (unique per test and process).
    pub name: String,
    /// [`amqp`] with this vhost.
    pub url: String,
}

impl Vhost {
    /// Creates a vhost named after `tag`, guest given every permission.
    pub fn new(tag: &str) -> Vhost {
        let name = format!(
            "covmerge-it-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                % 1_000_000_000
        );
        rabbitmqctl(&["-q", "add_vhost", &name]);
        let base = amqp();
        let (scheme, rest) = base.split_once("://").unwrap();
        let (user, rest) = rest.rsplit_once('@').unwrap();
        let host = rest.split('/').next().unwrap();
        let username = user.split(':').next().unwrap();
        rabbitmqctl(&[
            "-q",
            "set_permissions",
            "-p",
            &name,
            username,
            ".*",
            ".*",
            ".*",
        ]);
        Vhost {
            url: format!("{scheme}://{user}@{host}/{name}"),
            name,
        }
    }

    /// The queues of this vhost, by name.
    pub fn queues(&self) -> Vec<String> {
        rabbitmqctl(&[
            "-q",
            "list_queues",
            "-p",
            &self.name,
            "--no-table-headers",
            "name",
        ])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
    }

    /// Deletes `queue` in this vhost, as an operator would under a running fleet.
    pub fn delete_queue(&self, queue: &str) {
        rabbitmqctl(&["-q", "delete_queue", "-p", &self.name, queue]);
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["-q", "delete_vhost", &self.name])
            .output();
    }
}

/// Runs `rabbitmqctl ARGS`; panics unless it succeeds.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running rabbitmqctl {args:?}: {e}"));
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
