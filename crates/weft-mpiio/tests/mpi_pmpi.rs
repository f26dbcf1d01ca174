//! Callers that reach MPI-IO through the PMPI layer (issue 17): a C program
//! calling only `PMPI_File_*` (like ROMIO's `psimple`), and Fortran programs
//! through `mpif.h`, `use mpi` and `use mpi_f08` (OpenMPI's Fortran bindings
//! call `PMPI_File_open`, `PMPI_File_c2f`/`f2c` and the other
//! `PMPI_File_*`). Each writes through a strided view with a collective
//! write and reads it back, once on a `weft:` name and once on a local
//! name through the MPI library's own MPI-IO; the two files must be
//! byte-identical. The C program also gets default hints from a
//! `ROMIO_HINTS` file and finds them in `PMPI_File_get_info`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

/// The flavour's Fortran compiler wrapper.
fn mpifort(flavour: Flavour) -> &'static str {
    match flavour {
        Flavour::OpenMpi => "mpifort",
        Flavour::Mpich => "mpifort.mpich",
    }
}

/// Compiles tests/c/`source` with the flavour's mpifort into `binary`.
fn fortran_program(flavour: Flavour, source: &str, binary: &str, flags: &[&str]) -> PathBuf {
    let compiler = mpifort(flavour);
    assert!(on_path(compiler), "{compiler} not found: run scripts/deps.sh (gfortran)");
    let dir = profile_dir().join("mpiio").join("tests");
    std::fs::create_dir_all(&dir).expect("program dir");
    let out_path = dir.join(format!("{binary}.{}", flavour.name()));
    let out = Command::new(compiler)
        .arg("-O1")
        .args(flags)
        .arg("-o")
        .arg(&out_path)
        .arg(crate_dir().join("tests").join("c").join(source))
        .output()
        .expect("run mpifort");
    assert!(out.status.success(), "compiling {source}: {}", String::from_utf8_lossy(&out.stderr));
    out_path
}

/// Runs `binary PATH` on `weft:/name` and on a local file; asserts `marker`
/// in each run's output and that both files hold the same bytes. Returns the
/// weft run's stdout.
fn same_as_local(flavour: Flavour, binary: &std::path::Path, name: &str, marker: &str, env: &[(&str, &str)]) -> String {
    let cluster = Cluster::start(ClusterOptions::default());
    let local = tempfile::tempdir().expect("local dir");
    let local_path = local.path().join(name);
    let weft_path = format!("weft:/{name}");
    let mut weft_stdout = String::new();
    for (fs, path) in [("weft", weft_path.as_str()), ("local", local_path.to_str().expect("utf-8"))] {
        let run = run_job_env(flavour, binary, &[path], Some(&cluster.config_path), true, env);
        assert!(run.stdout.contains(marker), "{name} on {fs}:\n{}{}", run.stdout, run.stderr);
        if fs == "weft" {
            weft_stdout = run.stdout;
        }
    }
    let local_bytes = std::fs::read(&local_path).expect("local file");
    assert!(!local_bytes.is_empty(), "{name}: empty local file");
    let weft_bytes = weft_file_bytes(&cluster, &format!("/{name}"));
    assert_eq!(weft_bytes.len(), local_bytes.len(), "{name}: sizes differ");
    assert!(weft_bytes == local_bytes, "{name}: the weft: file differs from the local one");
    weft_stdout
}

fn pmpi_direct(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let binary = program(flavour, "pmpi_direct");
    // Default hints from a ROMIO_HINTS file (a comment, a blank line, two hints).
    let hints_dir = tempfile::tempdir().expect("hints dir");
    let hints_file = hints_dir.path().join("romio-hints");
    std::fs::write(&hints_file, "# defaults\n\ncb_buffer_size 1048576\nweft_io_method list\n").expect("hints file");
    let env = [("ROMIO_HINTS", hints_file.to_str().expect("utf-8"))];
    let stdout = same_as_local(flavour, &binary, "pmpi_direct", "pmpi_direct OK", &env);
    for hint in ["hint cb_buffer_size=1048576", "hint weft_io_method=list"] {
        assert!(stdout.lines().any(|line| line == hint), "ROMIO_HINTS: no '{hint}' in get_info:\n{stdout}");
    }
    let hints: usize = stdout
        .lines()
        .find_map(|line| line.strip_prefix("hints "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no hint count:\n{stdout}"));
    assert!(hints > 0, "PMPI_File_get_info on a Weft file listed no hints");
}

#[test]
fn openmpi_pmpi_direct() {
    pmpi_direct(Flavour::OpenMpi);
}

#[test]
fn mpich_pmpi_direct() {
    pmpi_direct(Flavour::Mpich);
}

fn fortran(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let mpifh = fortran_program(flavour, "fortran_io.F90", "fortran_mpifh", &["-DMPIFH"]);
    let use_mpi = fortran_program(flavour, "fortran_io.F90", "fortran_use_mpi", &[]);
    let f08 = fortran_program(flavour, "fortran_io.F90", "fortran_f08", &["-DF08"]);
    same_as_local(flavour, &mpifh, "fortran_mpifh", "fortran_io OK", &[]);
    same_as_local(flavour, &use_mpi, "fortran_use_mpi", "fortran_io OK", &[]);
    same_as_local(flavour, &f08, "fortran_f08", "fortran_io OK", &[]);
}

#[test]
fn openmpi_fortran() {
    fortran(Flavour::OpenMpi);
}

#[test]
fn mpich_fortran() {
    fortran(Flavour::Mpich);
}
