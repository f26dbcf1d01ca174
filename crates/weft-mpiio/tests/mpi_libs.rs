//! Real I/O libraries on top of libweft_mpiio: parallel HDF5 (through
//! `H5Pset_fapl_mpio`) and PnetCDF, both the OpenMPI builds Debian ships
//! (`libhdf5-openmpi-dev`, `libpnetcdf-dev`), run with OpenMPI on 4 ranks.
//!
//! For each library three jobs, on one 4-server cluster:
//! 1. the program writes a `weft:` file (collective hyperslab / vara / vars
//!    writes, attributes, a chunked dataset or record variables), reopens it
//!    and verifies every value (`tests/c/{hdf5_rw,pnetcdf_rw}.c`);
//! 2. the file's bytes, copied out of Weft with the native client, are read
//!    and verified by the same program on a local path through the MPI
//!    library's own MPI-IO (ROMIO): what Weft stored is a valid file for
//!    the reference stack;
//! 3. a file the program wrote on a local path through ROMIO is copied into
//!    Weft and read back and verified through libweft_mpiio.
//!
//! PnetCDF 1.12.3 cannot open (`ncmpi_open`) a `weft:` file: rank 0 first
//! reads the file's signature with POSIX `open()` (`ncmpi_inq_file_format`,
//! which strips only ROMIO's own prefixes such as `ufs:` or `lustre:`), so a
//! name that exists only behind MPI-IO gives `NC_ENOENT` before any
//! `MPI_File_*` call; `ncmpi_create` works (its POSIX `lstat` of the name
//! may fail). The PnetCDF test therefore writes through Weft, checks the
//! bytes through ROMIO (job 2), and asserts that this failure is still the
//! one and only obstacle to job 3 (so that the test notices when it goes
//! away and job 3 must be enabled).
//!
//! Skipped with a message when OpenMPI or the library's development
//! package is missing, unless `WEFT_REQUIRE_MPI=1` (then that fails).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use weft_testkit::{Cluster, ClusterOptions};

/// Whether pkg-config knows `package` (panics if required but missing).
fn library_available(package: &str, apt: &str) -> bool {
    let present = on_path("pkg-config")
        && Command::new("pkg-config").args(["--exists", package]).status().is_ok_and(|s| s.success());
    if !present {
        assert!(std::env::var("WEFT_REQUIRE_MPI").is_err(), "{package} is required but not installed ({apt})");
        eprintln!("skipping: {package} not installed (scripts/deps.sh installs {apt})");
    }
    present
}

fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config").args(args).output().expect("run pkg-config");
    assert!(out.status.success(), "pkg-config {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect()
}

/// Compiles tests/c/<name>.c with OpenMPI's mpicc and the package's flags.
fn library_program(name: &str, package: &str) -> PathBuf {
    let dir = profile_dir().join("mpiio").join("tests");
    std::fs::create_dir_all(&dir).expect("program dir");
    let binary = dir.join(format!("{name}.openmpi"));
    let source = crate_dir().join("tests").join("c").join(format!("{name}.c"));
    let out = Command::new(Flavour::OpenMpi.mpicc())
        .args(pkg_config(&["--cflags", package]))
        .args(["-O1", "-Wall", "-o"])
        .arg(&binary)
        .arg(&source)
        .args(pkg_config(&["--libs", package]))
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "compiling {name}: {}", String::from_utf8_lossy(&out.stderr));
    binary
}

fn copy_into_weft(cluster: &Cluster, local: &Path, path: &str) {
    let bytes = std::fs::read(local).unwrap_or_else(|e| panic!("{}: {e}", local.display()));
    let client = cluster.client();
    let file = client.create(path, weft_client::CreateOptions::default()).unwrap_or_else(|e| panic!("create {path}: {e:?}"));
    client.write_at(&file, 0, &bytes).unwrap_or_else(|e| panic!("write {path}: {e:?}"));
}

/// How a program opens an existing file.
#[derive(PartialEq)]
enum Reopen {
    /// Through MPI-IO only: every job runs.
    MpiIo,
    /// With a POSIX `open()` of the name first (PnetCDF's
    /// `ncmpi_inq_file_format`): reading a `weft:` name must fail with this
    /// message on stderr.
    PosixFirst(&'static str),
}

/// Runs a job that must fail; returns its output (stdout and stderr).
fn failing_job(flavour: Flavour, program: &Path, args: &[&str], config: Option<&Path>) -> String {
    let outcome = std::panic::catch_unwind(|| run_job(flavour, program, args, config, true));
    match outcome {
        Ok(run) => panic!("expected the job to fail, it succeeded:\n{}{}", run.stdout, run.stderr),
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// The three jobs described in the module comment for one program.
fn library_round_trips(name: &str, package: &str, apt: &str, magic: &[u8], reopen: Reopen) {
    let flavour = Flavour::OpenMpi;
    if !available(flavour) || !library_available(package, apt) {
        return;
    }
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = library_program(name, package);
    let config = Some(cluster.config_path.as_path());
    let ok = format!("{name} OK");
    let local = tempfile::tempdir().expect("local dir");

    // 1. Written and verified through Weft.
    let weft_path = format!("/{name}.weft");
    let mode = if reopen == Reopen::MpiIo { "both" } else { "write" };
    let run = run_job(flavour, &binary, &[&format!("weft:{weft_path}"), mode], config, true);
    assert!(run.stdout.contains(&ok), "{}{}", run.stdout, run.stderr);
    let stored = weft_file_bytes(&cluster, &weft_path);
    assert!(stored.starts_with(magic), "{weft_path} does not start with the format's signature: {:?}", &stored[..stored.len().min(16)]);

    // 2. Weft's bytes, read by the reference stack (ROMIO on a local file).
    let copied = local.path().join(format!("{name}.from-weft"));
    std::fs::write(&copied, &stored).expect("write local copy");
    let run = run_job(flavour, &binary, &[copied.to_str().expect("utf-8"), "read"], config, true);
    assert!(run.stdout.contains(&ok), "reading Weft's file through ROMIO:\n{}{}", run.stdout, run.stderr);

    // 3. A file written by the reference stack, read through Weft.
    let reference = local.path().join(format!("{name}.romio"));
    let run = run_job(flavour, &binary, &[reference.to_str().expect("utf-8"), "write"], config, true);
    assert!(run.stdout.contains(&ok), "writing through ROMIO:\n{}{}", run.stdout, run.stderr);
    let weft_copy = format!("/{name}.from-romio");
    copy_into_weft(&cluster, &reference, &weft_copy);
    let args = [format!("weft:{weft_copy}"), "read".to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match reopen {
        Reopen::MpiIo => {
            let run = run_job(flavour, &binary, &args, config, true);
            assert!(run.stdout.contains(&ok), "reading ROMIO's file through Weft:\n{}{}", run.stdout, run.stderr);
        }
        Reopen::PosixFirst(message) => {
            eprintln!("{name}: reopening a weft: file must fail (a panic message of the harness follows)");
            let output = failing_job(flavour, &binary, &args, config);
            assert!(
                output.contains(message),
                "reopening a weft: file failed differently than by the library's POSIX open():\n{output}"
            );
            eprintln!("{name}: reopening a weft: file fails as expected (POSIX open() of the name): {message}");
        }
    }
}

#[test]
fn openmpi_parallel_hdf5() {
    library_round_trips("hdf5_rw", "hdf5-openmpi", "libhdf5-openmpi-dev", b"\x89HDF\r\n\x1a\n", Reopen::MpiIo);
}

#[test]
fn openmpi_pnetcdf() {
    // CDF-5 (NC_64BIT_DATA): "CDF" then version byte 5.
    library_round_trips(
        "pnetcdf_rw",
        "pnetcdf",
        "libpnetcdf-dev",
        b"CDF\x05",
        Reopen::PosixFirst("ncmpi_open(MPI_COMM_WORLD, path, NC_NOWRITE, MPI_INFO_NULL, &ncid) failed: Specified netCDF file does not exist"),
    );
}
