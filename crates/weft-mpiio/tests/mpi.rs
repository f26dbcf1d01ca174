//! Real MPI jobs through libweft_mpiio, for both MPI flavours: OpenMPI with
//! 4 ranks, MPICH with 2 (its busy-polling progress engine crawls with more
//! ranks than the 2 cores).
//!
//! Each test builds the two libraries once (`build-so.sh`, from the static
//! Rust core this test binary was built with) and its C program with the
//! flavour's own mpicc, then runs `mpirun` with the library preloaded.
//! Every job runs in its own process group with a deadline; the group is
//! killed afterwards (stragglers too), and the Weft servers go with the
//! `Cluster` guard, also when an assertion fails. Jobs run one at a time.
//!
//! Machines without an MPI flavour skip its tests with a message, unless
//! `WEFT_REQUIRE_MPI=1` (set it in CI, which installs both through
//! scripts/deps.sh).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use weft_testkit::{command_dying_with_parent, Cluster, ClusterOptions};

/// Longest an MPI job may run before it is killed.
const JOB_TIMEOUT: Duration = Duration::from_secs(180);
/// Seed of the random datatypes (printed; override with WEFT_TEST_SEED).
const DEFAULT_SEED: u64 = 20261122;
/// Suffixes of the files the `views` program writes.
const VIEW_FILES: [&str; 7] = ["vec", "resized", "sub_c", "sub_f", "all", "darray", "sub3"];

#[derive(Clone, Copy, Debug)]
enum Flavour {
    OpenMpi,
    Mpich,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "openmpi",
            Flavour::Mpich => "mpich",
        }
    }

    fn mpicc(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "mpicc",
            Flavour::Mpich => "mpicc.mpich",
        }
    }

    fn mpirun(self) -> &'static str {
        match self {
            Flavour::OpenMpi => "mpirun",
            Flavour::Mpich => "mpirun.mpich",
        }
    }

    fn ranks(self) -> u32 {
        match self {
            Flavour::OpenMpi => 4,
            Flavour::Mpich => 2,
        }
    }
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `<target>/<profile>`: the test binary lives in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("profile dir").to_path_buf()
}

fn on_path(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Whether the flavour's tests can run here (panics if required but missing).
fn available(flavour: Flavour) -> bool {
    let present = on_path(flavour.mpicc()) && on_path(flavour.mpirun()) && on_path("python3");
    if !present {
        assert!(std::env::var("WEFT_REQUIRE_MPI").is_err(), "{} is required but not installed", flavour.name());
        eprintln!("skipping: {} not installed (run scripts/deps.sh)", flavour.name());
    }
    present
}

/// One MPI job (and its cluster) at a time on a 2-core machine.
fn exclusive() -> MutexGuard<'static, ()> {
    static JOBS: Mutex<()> = Mutex::new(());
    JOBS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn library(flavour: Flavour) -> PathBuf {
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
            Err(format!("build-so.sh failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
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
fn current_core() -> PathBuf {
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
fn program(flavour: Flavour, name: &str) -> PathBuf {
    let dir = profile_dir().join("mpiio").join("tests");
    std::fs::create_dir_all(&dir).expect("program dir");
    let binary = dir.join(format!("{name}.{}", flavour.name()));
    let source = crate_dir().join("tests").join("c").join(format!("{name}.c"));
    // The flavour's generated headers (unsupported_calls.h) come with the library.
    library(flavour);
    let generated = profile_dir().join("mpiio").join("gen").join(flavour.name());
    let out = Command::new(flavour.mpicc())
        .arg("-I")
        .arg(&generated)
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
struct JobOutput {
    stdout: String,
    stderr: String,
}

/// Runs `program args` on the flavour's ranks with the library preloaded;
/// panics on failure or timeout, after killing the job's process group.
fn run_job(flavour: Flavour, program: &Path, args: &[&str], config: Option<&Path>, romio: bool) -> JobOutput {
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
        }
        Flavour::Mpich => {
            // Hydra forwards the environment (and is itself preloaded:
            // the library must do nothing at load time).
            command.env("LD_PRELOAD", &library);
            if let Some(config) = config {
                command.env("WEFT_CONFIG", config);
            }
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

fn weft_file_bytes(cluster: &Cluster, path: &str) -> Vec<u8> {
    let client = cluster.client();
    let file = client.open(path, weft_client::access::READ).unwrap_or_else(|e| panic!("open {path}: {e:?}"));
    let size = client.file_size(&file).expect("size");
    let mut bytes = vec![0u8; size as usize];
    let got = client.read_at(&file, 0, &mut bytes).expect("read");
    bytes.truncate(got);
    bytes
}

/// The same program writes a weft: file and a local file through ROMIO
/// (the local one goes to the MPI library although the library is
/// preloaded); the files must be byte-identical.
fn views_match_romio(flavour: Flavour) {
    if !available(flavour) {
        return;
    }
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let views = program(flavour, "views");
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join("views");
    let weft_run = run_job(flavour, &views, &["weft:/views"], Some(&cluster.config_path), true);
    assert!(weft_run.stdout.contains("views OK"), "{}{}", weft_run.stdout, weft_run.stderr);
    let local_run = run_job(flavour, &views, &[local_prefix.to_str().expect("utf-8")], Some(&cluster.config_path), true);
    assert!(local_run.stdout.contains("views OK"), "{}{}", local_run.stdout, local_run.stderr);
    for suffix in VIEW_FILES {
        let local_bytes = std::fs::read(format!("{}.{suffix}", local_prefix.display()))
            .unwrap_or_else(|e| panic!("local file .{suffix} not written through the MPI library: {e}"));
        let weft_bytes = weft_file_bytes(&cluster, &format!("/views.{suffix}"));
        assert!(!local_bytes.is_empty(), ".{suffix} is empty");
        assert_eq!(weft_bytes.len(), local_bytes.len(), ".{suffix}: sizes differ");
        if let Some(at) = (0..weft_bytes.len()).find(|i| weft_bytes[*i] != local_bytes[*i]) {
            let window = at.saturating_sub(8)..(at + 24).min(weft_bytes.len());
            panic!(
                ".{suffix}: bytes differ from ROMIO's at offset {at}\n weft: {:?}\nromio: {:?}",
                &weft_bytes[window.clone()],
                &local_bytes[window]
            );
        }
    }
}

/// Weft's flattening of fixed and random nested types equals the order in
/// which MPI_Pack takes bytes from an offset-tagged buffer.
fn datatypes_match_mpi_pack(flavour: Flavour) {
    if !available(flavour) {
        return;
    }
    let seed = std::env::var("WEFT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SEED);
    eprintln!("datatype seed {seed} (WEFT_TEST_SEED replays it)");
    let _one_at_a_time = exclusive();
    let typecheck = program(flavour, "typecheck");
    let run = run_job(flavour, &typecheck, &[&seed.to_string()], None, false);
    assert!(run.stdout.contains("typecheck OK"), "seed {seed}:\n{}{}", run.stdout, run.stderr);
}

/// Error classes through MPI_ERRORS_RETURN, delete-on-close, append.
fn error_classes(flavour: Flavour) {
    if !available(flavour) {
        return;
    }
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let errors = program(flavour, "errors");
    let run = run_job(flavour, &errors, &["weft:/errors"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("errors OK"), "{}{}", run.stdout, run.stderr);
    assert!(cluster.client().stat("/errors.doc").is_err(), "delete-on-close left the file");
    assert!(cluster.client().stat("/errors.ro").is_err(), "MPI_File_delete left the file");
    let striped = cluster.client().stat("/errors.striped").expect("striped file");
    let distribution = striped.layout.expect("layout").distribution;
    assert_eq!((distribution.stripe_count, distribution.strip_bytes), (2, 4096), "striping hints ignored");
}

/// Every exported MPI_File_* function not implemented yet returns
/// MPI_ERR_UNSUPPORTED_OPERATION on a Weft handle, which keeps working.
fn unsupported_calls_fail_cleanly(flavour: Flavour) {
    if !available(flavour) {
        return;
    }
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let unsupported = program(flavour, "unsupported");
    let run = run_job(flavour, &unsupported, &["weft:/unsupported"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("unsupported OK"), "{}{}", run.stdout, run.stderr);
    eprintln!("{}", run.stdout.trim());
    assert_eq!(weft_file_bytes(&cluster, "/unsupported").len(), 4 * flavour.ranks() as usize);
}

#[test]
fn openmpi_unsupported_calls_fail_cleanly() {
    unsupported_calls_fail_cleanly(Flavour::OpenMpi);
}

#[test]
fn mpich_unsupported_calls_fail_cleanly() {
    unsupported_calls_fail_cleanly(Flavour::Mpich);
}

#[test]
fn openmpi_views_match_romio() {
    views_match_romio(Flavour::OpenMpi);
}

#[test]
fn mpich_views_match_romio() {
    views_match_romio(Flavour::Mpich);
}

#[test]
fn openmpi_datatypes_match_mpi_pack() {
    datatypes_match_mpi_pack(Flavour::OpenMpi);
}

#[test]
fn mpich_datatypes_match_mpi_pack() {
    datatypes_match_mpi_pack(Flavour::Mpich);
}

#[test]
fn openmpi_error_classes() {
    error_classes(Flavour::OpenMpi);
}

#[test]
fn mpich_error_classes() {
    error_classes(Flavour::Mpich);
}

/// The libraries are also preloaded into shells, `mpirun` and helpers that
/// never call MPI: loading one must do nothing (no output, no MPI start).
#[test]
fn preloading_into_a_non_mpi_process_is_inert() {
    for flavour in [Flavour::OpenMpi, Flavour::Mpich] {
        if !available(flavour) {
            continue;
        }
        let out = command_dying_with_parent(Path::new("sh"))
            .args(["-c", "echo inert"])
            .env("LD_PRELOAD", library(flavour))
            .env_remove("WEFT_CONFIG")
            .output()
            .expect("run sh");
        assert!(out.status.success(), "{}: {}", flavour.name(), String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "inert\n");
        assert!(out.stderr.is_empty(), "{}: {}", flavour.name(), String::from_utf8_lossy(&out.stderr));
    }
}
