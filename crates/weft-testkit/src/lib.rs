//! Test harness: starts real `weft server` processes on loopback and tears
//! them down when the [`Cluster`] is dropped, also when the test panics.
//!
//! Every cluster gets its own random 127.x.y.z address, so tests run in
//! parallel without port clashes. Servers get `PR_SET_PDEATHSIG`, so a test
//! process that dies without unwinding still takes its servers with it.
//!
//! The `weft` binary is found through `WEFT_BIN`, else `target/release/weft`
//! (then `target/debug/weft`) under the workspace root; the README's test
//! command builds it before running the tests.
#![warn(missing_docs)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use weft_client::{BlockingClient, ClientOptions};
use weft_config::{Config, GenOptions, MetadataSync};

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf()
}

/// Path of the `weft` binary.
pub fn weft_bin() -> PathBuf {
    if let Ok(path) = std::env::var("WEFT_BIN") {
        return PathBuf::from(path);
    }
    for profile in ["release", "debug"] {
        let candidate = workspace_root().join("target").join(profile).join("weft");
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("weft binary not found: run `cargo build --release` first or set WEFT_BIN");
}

/// A command with `PR_SET_PDEATHSIG` set, so it dies with the test.
pub fn command_dying_with_parent(program: &Path) -> Command {
    let mut command = Command::new(program);
    // SAFETY: prctl is async-signal-safe and only affects the child.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command
}

/// Options of a test cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Number of servers.
    pub servers: u32,
    /// Metadata durability.
    pub metadata_sync: MetadataSync,
    /// Strip size of new files.
    pub strip_bytes: u64,
    /// Edits the generated configuration before the servers start (for
    /// example per-server capacity limits or `[collectives]` settings).
    pub tune: Option<fn(&mut Config)>,
    /// Where the servers' storage directories go (`DIR/server-N`), for
    /// example a size-limited mount; default: the cluster's temporary directory.
    pub storage_root: Option<PathBuf>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            servers: 4,
            metadata_sync: MetadataSync::Commit,
            strip_bytes: 64 * 1024,
            tune: None,
            storage_root: None,
        }
    }
}

/// Real servers on loopback.
pub struct Cluster {
    /// Storage, configuration and logs.
    pub dir: tempfile::TempDir,
    /// Configuration path.
    pub config_path: PathBuf,
    /// Parsed configuration.
    pub config: Config,
    children: Vec<Option<Child>>,
}

fn random_loopback() -> String {
    let mut rng = rand::rng();
    format!("127.{}.{}.{}", rng.random_range(1..255), rng.random_range(0..255), rng.random_range(1..255))
}

impl Cluster {
    /// Starts `options.servers` servers and waits until all answer.
    pub fn start(options: ClusterOptions) -> Cluster {
        let dir = tempfile::Builder::new().prefix("weft-test-").tempdir().expect("temp dir");
        let mut config = weft_config::generate(&GenOptions {
            servers: options.servers,
            host: random_loopback(),
            base_port: 7100,
            root: options.storage_root.clone().unwrap_or_else(|| dir.path().to_path_buf()),
            metadata_sync: options.metadata_sync,
        });
        config.distribution.strip_bytes = options.strip_bytes;
        config.threads.io = 4;
        if let Some(tune) = options.tune {
            tune(&mut config);
        }
        let config_path = dir.path().join("weft.toml");
        std::fs::write(&config_path, config.to_toml()).expect("write config");
        let mut cluster = Cluster { dir, config_path, config, children: Vec::new() };
        for id in 0..options.servers {
            let child = cluster.spawn(id);
            cluster.children.push(Some(child));
        }
        cluster.wait_ready();
        cluster
    }

    fn spawn(&self, id: u32) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("server-{id}.log")))
            .expect("log file");
        command_dying_with_parent(&weft_bin())
            .args(["server", "--config"])
            .arg(&self.config_path)
            .args(["--id", &id.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn weft server")
    }

    /// A client for this cluster (as root unless `options` says otherwise).
    pub fn client(&self) -> BlockingClient {
        self.client_with(ClientOptions::default())
    }

    /// A client with explicit options.
    pub fn client_with(&self, options: ClientOptions) -> BlockingClient {
        BlockingClient::new(self.config.clone(), options, 2).expect("client")
    }

    /// Waits until every running server answers a ping (30 s at most).
    pub fn wait_ready(&self) {
        let client = self.client();
        let start = Instant::now();
        loop {
            let results = client.block_on(client.client().ping_all());
            let all_up = results.iter().all(|(id, r)| r.is_ok() || self.children[*id as usize].is_none());
            if all_up {
                return;
            }
            if start.elapsed() > Duration::from_secs(30) {
                panic!("servers did not come up: {results:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills server `id` with SIGKILL.
    pub fn kill(&mut self, id: u32) {
        if let Some(mut child) = self.children[id as usize].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops server `id` with SIGTERM and waits for it to exit.
    pub fn terminate(&mut self, id: u32) {
        if let Some(mut child) = self.children[id as usize].take() {
            // SAFETY: signalling a child we started.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("server {id} ignored SIGTERM for 20 s");
        }
    }

    /// Restarts a stopped or killed server and waits until it answers.
    pub fn restart(&mut self, id: u32) {
        assert!(self.children[id as usize].is_none(), "server {id} is running");
        let child = self.spawn(id);
        self.children[id as usize] = Some(child);
        self.wait_ready();
    }

    /// Process id of a running server.
    pub fn pid(&self, id: u32) -> Option<u32> {
        self.children[id as usize].as_ref().map(|c| c.id())
    }

    /// Whether a server process is still running.
    pub fn is_running(&mut self, id: u32) -> bool {
        match self.children[id as usize].as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// All server logs, for failure messages.
    pub fn logs(&self) -> String {
        (0..self.children.len())
            .map(|id| {
                let text =
                    std::fs::read_to_string(self.dir.path().join(format!("server-{id}.log"))).unwrap_or_default();
                format!("--- server {id} ---\n{text}")
            })
            .collect()
    }

    /// Address of server `id`.
    pub fn address(&self, id: u32) -> String {
        self.config.server(id).expect("server").address.clone()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
