//! Test harness: starts real `weft server` processes on loopback and tears
//! them down when the [`Cluster`] is dropped, also when the test panics.
//!
//! Every cluster gets its own random 127.x.y.z address, so tests run in
//! parallel without port clashes. Servers get `PR_SET_PDEATHSIG`, so a test
//! process that dies without unwinding still takes its servers with it.
//!
//! The `weft` binary is found through `WEFT_BIN`, else `target/release/weft`
//! (then `target/debug/weft`) under the workspace root; the README's test
//! command builds it before running the tests. A binary found in `target/`
//! must be newer than every source file of the crates it is built from
//! (weft-cli and the weft-* crates it depends on, read from their manifests):
//! `cargo test -p weft-testkit` does not rebuild it, and tests of a stale
//! binary would test old code, so they fail with the file that is newer.
#![warn(missing_docs)]

mod fsck;
mod helper;

pub use fsck::{fsck, FsckReport};
pub use helper::HelperProcess;

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

/// Path of the `weft` binary (`WEFT_BIN` is taken as given; a binary in
/// `target/` is checked to be current, see the crate docs).
pub fn weft_bin() -> PathBuf {
    if let Ok(path) = std::env::var("WEFT_BIN") {
        return PathBuf::from(path);
    }
    static FOUND: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match FOUND.get_or_init(find_current_weft_bin) {
        Ok(path) => path.clone(),
        Err(message) => panic!("{message}"),
    }
}

fn find_current_weft_bin() -> Result<PathBuf, String> {
    let candidate = ["release", "debug"]
        .iter()
        .map(|profile| workspace_root().join("target").join(profile).join("weft"))
        .find(|candidate| candidate.exists())
        .ok_or("weft binary not found: run `cargo build --release` first or set WEFT_BIN")?;
    let built = modified(&candidate)?;
    let crates = crate_closure("weft-cli")?;
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    for name in &crates {
        let src = workspace_root().join("crates").join(name).join("src");
        // The other binaries of a library crate (weft-fuse's) are not linked into `weft`.
        let other_binaries = src.join("bin");
        for source in
            files_under(&src)?.into_iter().filter(|path| name == "weft-cli" || !path.starts_with(&other_binaries))
        {
            let time = modified(&source)?;
            if newest.as_ref().is_none_or(|(t, _)| time > *t) {
                newest = Some((time, source));
            }
        }
    }
    match newest {
        Some((time, source)) if time > built => Err(format!(
            "{} is older than {}: run `cargo build --release` (the weft binary is built from {})",
            candidate.display(),
            source.display(),
            crates.join(", ")
        )),
        _ => Ok(candidate),
    }
}

fn modified(path: &Path) -> Result<std::time::SystemTime, String> {
    std::fs::metadata(path).and_then(|m| m.modified()).map_err(|e| format!("{}: {e}", path.display()))
}

/// `root` and the workspace crates it depends on, directly or not, read from
/// the `weft-*` lines of each manifest's `[dependencies]` table.
fn crate_closure(root: &str) -> Result<Vec<String>, String> {
    let mut crates = vec![root.to_string()];
    let mut next = 0;
    while next < crates.len() {
        let manifest = workspace_root().join("crates").join(&crates[next]).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
        for dependency in manifest_dependencies(&text) {
            if !crates.contains(&dependency) {
                crates.push(dependency);
            }
        }
        next += 1;
    }
    Ok(crates)
}

/// The `weft-*` names in the `[dependencies]` table of a manifest.
fn manifest_dependencies(manifest: &str) -> Vec<String> {
    let mut inside = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if let Some(name) = line.split('=').next().map(str::trim).filter(|n| inside && n.starts_with("weft-")) {
            names.push(name.to_string());
        }
    }
    names
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    Ok(files)
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
        // The key lives with the configuration (not under a storage root
        // that may be a size-limited mount).
        config.auth.key_file = Some(weft_config::default_key_file(dir.path()));
        if let Some(tune) = options.tune {
            tune(&mut config);
        }
        if let Some(key) = &config.auth.key_file {
            weft_config::create_key(key).expect("create key file");
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

/// A size-limited tmpfs mounted for a test's lifetime, so a test can fill
/// a disk (issue 21). Needs root. Declare it before the [`Cluster`] (and
/// any mount) whose storage it holds, so they are dropped first; it is
/// unmounted lazily on drop, also when the test fails.
pub struct Tmpfs {
    /// Where it is mounted.
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_bytes` on a new temporary directory.
    pub fn mount(size_bytes: u64) -> Tmpfs {
        let dir = tempfile::Builder::new().prefix("weft-full-disk-").tempdir().expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_bytes}")])
            .arg("tmpfs")
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t tmpfs failed (the test needs root)");
        Tmpfs { path: dir.path().to_path_buf(), _dir: dir }
    }

    /// Total and available bytes (`statvfs`).
    pub fn space(&self) -> (u64, u64) {
        let c_path = std::ffi::CString::new(self.path.to_str().expect("utf-8 path")).expect("no NUL");
        // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
        let mut out: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: c_path is NUL-terminated and out is a valid statvfs.
        assert_eq!(unsafe { libc::statvfs(c_path.as_ptr(), &mut out) }, 0, "statvfs");
        (out.f_blocks as u64 * out.f_frsize as u64, out.f_bavail as u64 * out.f_frsize as u64)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy, in case a process of a failed test still has a file open.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weft_binary_is_built_from_the_crates_its_manifests_name() {
        let crates = crate_closure("weft-cli").unwrap();
        for name in
            ["weft-cli", "weft-server", "weft-client", "weft-fuse", "weft-config", "weft-proto", "weft-dataloop"]
        {
            assert!(crates.iter().any(|c| c == name), "{name} missing from {crates:?}");
        }
        assert!(!crates.iter().any(|c| c == "weft-testkit" || c == "weft-mpiio"), "{crates:?}");
    }

    #[test]
    fn only_the_dependencies_table_counts() {
        let manifest =
            "[package]\nname = \"weft-x\"\n[dependencies]\nweft-proto = { workspace = true }\nlibc = \"1\"\n\
                        [dev-dependencies]\nweft-testkit = { workspace = true }\n";
        assert_eq!(manifest_dependencies(manifest), vec!["weft-proto".to_string()]);
    }
}
