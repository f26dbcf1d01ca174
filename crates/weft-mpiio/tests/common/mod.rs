//! Shared harness of the MPI integration tests (each tests/*.rs is its own
//! binary and includes this with `mod common;`): flavours, building the
//! libraries and C programs, running one `mpirun` job with a deadline in its
//! own process group.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use weft_testkit::{command_dying_with_parent, Cluster};

/// Longest an MPI job may run before it is killed.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(180);
/// Seed of the random datatypes (printed; override with WEFT_TEST_SEED).
pub const DEFAULT_SEED: u64 = 20261122;

#[derive(Clone, Copy, Debug)]
pub enum Flavour {
    OpenMpi,
    Mpich,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "openmpi",
            Flavour::Mpich => "mpich",
        }
    }

    pub fn mpicc(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "mpicc",
            Flavour::Mpich => "mpicc.mpich",
        }
    }

    pub fn mpirun(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "mpirun",
            Flavour::Mpich => "mpirun.mpich",
        }
    }

    pub fn ranks(self) -> u32 {
        match self {
            Flavour::OpenMpi => 4,
            Flavour::Mpich => 2,
        }
    }
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `<target>/<profile>`: the test binary lives in its `deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("profile dir").to_path_buf()
}

pub fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Panics unless the flavour's programs are installed: an MPI test never
/// skips by itself. Leaving them out is explicit and visible:
/// `WEFT_SKIP_MPI=1 scripts/test.sh` skips every test named `openmpi_*` or
/// `mpich_*` (the names of all tests that need MPI) and counts them.
pub fn require(flavour: Flavour) {
    for program in [flavour.mpicc(), flavour.mpirun(), "python3"] {
        assert!(
            on_path(program),
            "{program} not found ({} tests): run scripts/deps.sh, or leave the MPI tests out with \
             WEFT_SKIP_MPI=1 scripts/test.sh",
            flavour.name()
        );
    }
}

/// One MPI job (and its cluster) at a time on a 2-core machine.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static JOBS: Mutex<()> = Mutex::new(());
    JOBS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn library(flavour: Flavour) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let out = Command::new(crate_dir().join("build-so.sh"))
            .arg(profile_dir())
            .env("WEFT_MPIIO_CORE", current_core())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "build-so.sh failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(message) = built {
        panic!("{message}");
    }
    let path = profile_dir().join("mpiio").join(format!("libweft_mpiio_{}.so", flavour.name()));
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// The static Rust core `cargo test` built for this run: the newest
/// `deps/libweft_mpiio-*.a` (`cargo test` does not refresh the
/// `libweft_mpiio.a` that `cargo build` leaves in the profile directory).
pub fn current_core() -> PathBuf {
    let deps = profile_dir().join("deps");
    let newest = std::fs::read_dir(&deps)
        .expect("deps dir")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libweft_mpiio-") && name.ends_with(".a")
        })
        .max_by_key(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok());
    newest.unwrap_or_else(|| profile_dir().join("libweft_mpiio.a"))
}

/// Compiles tests/c/<name>.c with the flavour's mpicc (plain MPI program).
pub fn program(flavour: Flavour, name: &str) -> PathBuf {
    let dir = profile_dir().join("mpiio").join("tests");
    std::fs::create_dir_all(&dir).expect("program dir");
    let binary = dir.join(format!("{name}.{}", flavour.name()));
    let source = crate_dir().join("tests").join("c").join(format!("{name}.c"));
    let out = Command::new(flavour.mpicc())
        .args(["-O1", "-Wall", "-o"])
        .arg(&binary)
        .arg(&source)
        .arg("-ldl")
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "compiling {name}: {}", String::from_utf8_lossy(&out.stderr));
    binary
}

/// Output of a finished job.
pub struct JobOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` on the flavour's ranks with the library preloaded;
/// panics on failure or timeout, after killing the job's process group.
pub fn run_job(flavour: Flavour, program: &Path, args: &[&str], config: Option<&Path>, romio: bool) -> JobOutput {
    run_job_env(flavour, program, args, config, romio, &[])
}

/// [`run_job`] with extra environment variables for the ranks.
pub fn run_job_env(
    flavour: Flavour,
    program: &Path,
    args: &[&str],
    config: Option<&Path>,
    romio: bool,
    env: &[(&str, &str)],
) -> JobOutput {
    let logs = tempfile::tempdir().expect("log dir");
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let library = library(flavour);
    let mut command = command_dying_with_parent(Path::new(flavour.mpirun()));
    command.process_group(0).stdin(Stdio::null());
    command.stdout(std::fs::File::create(&out_path).expect("stdout file"));
    command.stderr(std::fs::File::create(&err_path).expect("stderr file"));
    command.args(["-np", &flavour.ranks().to_string()]);
    match flavour {
        Flavour::OpenMpi => {
            command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            command.env("OMPI_MCA_rmaps_base_oversubscribe", "1");
            if romio {
                command.args(["--mca", "io", "romio321"]);
            }
            command.arg("-x").arg(format!("LD_PRELOAD={}", library.display()));
            if let Some(config) = config {
                command.arg("-x").arg(format!("WEFT_CONFIG={}", config.display()));
            }
            for (name, value) in env {
                command.arg("-x").arg(format!("{name}={value}"));
            }
        }
        Flavour::Mpich => {
            // Hydra forwards the environment (and is itself preloaded:
            // the library must do nothing at load time).
            command.env("LD_PRELOAD", &library);
            if let Some(config) = config {
                command.env("WEFT_CONFIG", config);
            }
            command.envs(env.iter().copied());
        }
    }
    command.arg(program).args(args);
    let mut child = command.spawn().expect("spawn mpirun");
    let group = child.id() as i32;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait mpirun") {
            break Some(status);
        }
        if start.elapsed() > JOB_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: signalling the process group this test created; ranks and
    // daemons left behind die with it.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
    let output = JobOutput {
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    match status {
        Some(status) if status.success() => output,
        Some(status) => panic!("{} job failed ({status}):\n{}\n{}", flavour.name(), output.stdout, output.stderr),
        None => panic!("{} job timed out after {JOB_TIMEOUT:?}:\n{}\n{}", flavour.name(), output.stdout, output.stderr),
    }
}

pub fn weft_file_bytes(cluster: &Cluster, path: &str) -> Vec<u8> {
    let client = cluster.client();
    let file = client.open(path, weft_client::access::READ).unwrap_or_else(|e| panic!("open {path}: {e:?}"));
    let size = client.file_size(&file).expect("size");
    let mut bytes = vec![0u8; size as usize];
    let got = client.read_at(&file, 0, &mut bytes).expect("read");
    bytes.truncate(got);
    bytes
}

/// Whether `path` is a mount point (from `/proc/self/mountinfo`; a `stat`
/// of a mount whose daemon died would hang or fail).
pub fn is_mounted(path: &Path) -> bool {
    let wanted = path.to_string_lossy().replace(' ', "\\040");
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table.lines().any(|line| line.split(' ').nth(4) == Some(wanted.as_str()))
}

/// A FUSE mount of a test cluster (`weft mount` in the foreground, a child
/// that dies with the test); unmounted and stopped on drop, also when the
/// test fails. Attributes and names are cached for a minute, so that a
/// stale `stat` would show (the mount drops a file's cache at open).
pub struct Mount {
    child: Option<std::process::Child>,
    pub path: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mount {
    pub fn start(cluster: &Cluster) -> Mount {
        let dir = tempfile::Builder::new().prefix("weft-mpiio-mnt-").tempdir().expect("temp dir");
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).expect("mount point");
        let log = dir.path().join("mount.log");
        let child = command_dying_with_parent(&weft_testkit::weft_bin())
            .arg("--config")
            .arg(&cluster.config_path)
            .args(["mount", "--attr-ttl-ms", "60000", "--entry-ttl-ms", "60000"])
            .arg(&path)
            .env("WEFT_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn weft mount");
        let mut mount = Mount { child: Some(child), path, log, _dir: dir };
        let start = Instant::now();
        while !is_mounted(&mount.path) {
            if let Some(Ok(Some(status))) = mount.child.as_mut().map(|c| c.try_wait()) {
                panic!("weft mount exited with {status}: {}", mount.log_text());
            }
            assert!(start.elapsed() < Duration::from_secs(60), "not mounted after 60 s: {}", mount.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
        mount
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `relative` under the mount point, as a string for program arguments.
    pub fn at(&self, relative: &str) -> String {
        self.path.join(relative).to_str().expect("utf-8 path").to_string()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child (it unmounts on SIGTERM).
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if is_mounted(&self.path) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.path).status();
        }
    }
}
