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
//! A machine without an MPI flavour fails its tests (scripts/deps.sh installs
//! both); `WEFT_SKIP_MPI=1 scripts/test.sh` leaves every MPI test out and
//! counts them as skipped. Every test that needs MPI is named `openmpi_*` or
//! `mpich_*`: that is how scripts/test.sh finds them.

mod common;

use common::*;
use std::path::Path;
use weft_testkit::{command_dying_with_parent, Cluster, ClusterOptions};

/// Suffixes of the files the `views` program writes.
const VIEW_FILES: [&str; 7] = ["vec", "resized", "sub_c", "sub_f", "all", "darray", "sub3"];
/// Suffixes of the files the `bigtypes` program writes.
const BIGTYPE_FILES: [&str; 2] = ["hindexed", "struct"];

/// The same program `name PREFIX` writes weft: files and local files
/// through ROMIO (the local ones go to the MPI library although the library
/// is preloaded); the files `PREFIX.<suffix>` must be byte-identical.
fn files_match_romio(flavour: Flavour, name: &str, suffixes: &[&str]) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = program(flavour, name);
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join(name);
    let ok = format!("{name} OK");
    let weft_run = run_job(flavour, &binary, &[&format!("weft:/{name}")], Some(&cluster.config_path), true);
    assert!(weft_run.stdout.contains(&ok), "{}{}", weft_run.stdout, weft_run.stderr);
    let local_run =
        run_job(flavour, &binary, &[local_prefix.to_str().expect("utf-8")], Some(&cluster.config_path), true);
    assert!(local_run.stdout.contains(&ok), "{}{}", local_run.stdout, local_run.stderr);
    for suffix in suffixes {
        let local_bytes = std::fs::read(format!("{}.{suffix}", local_prefix.display()))
            .unwrap_or_else(|e| panic!("local file .{suffix} not written through the MPI library: {e}"));
        let weft_bytes = weft_file_bytes(&cluster, &format!("/{name}.{suffix}"));
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
    require(flavour);
    let seed = std::env::var("WEFT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SEED);
    eprintln!("datatype seed {seed} (WEFT_TEST_SEED replays it)");
    let _one_at_a_time = exclusive();
    let typecheck = program(flavour, "typecheck");
    let run = run_job(flavour, &typecheck, &[&seed.to_string()], None, false);
    assert!(run.stdout.contains("typecheck OK"), "seed {seed}:\n{}{}", run.stdout, run.stderr);
}

/// Error classes through MPI_ERRORS_RETURN, delete-on-close, append.
fn error_classes(flavour: Flavour) {
    require(flavour);
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

/// Every `MPI_File_*` function the flavour's MPI library exports is
/// implemented for Weft files (none falls back to the generated
/// `MPI_ERR_UNSUPPORTED_OPERATION` stub): the listing `build-so.sh` writes
/// while generating the wrappers names each one with how it is served.
fn every_file_function_is_implemented(flavour: Flavour) {
    require(flavour);
    library(flavour);
    let listing_path = profile_dir().join("mpiio").join("gen").join(flavour.name()).join("functions.txt");
    let listing = std::fs::read_to_string(&listing_path).expect("functions.txt from build-so.sh");
    let served: Vec<(&str, &str)> = listing.lines().filter_map(|line| line.split_once(' ')).collect();
    let unsupported: Vec<&str> =
        served.iter().filter(|(_, how)| *how == "unsupported").map(|(name, _)| *name).collect();
    assert!(unsupported.is_empty(), "{}: exported but not implemented: {unsupported:?}", flavour.name());
    for name in ["MPI_File_open", "MPI_File_read_at_all", "MPI_File_iwrite_shared"] {
        assert!(served.iter().any(|(served, _)| *served == name), "{}: {name} not in {listing}", flavour.name());
    }
}

#[test]
fn openmpi_every_file_function_is_implemented() {
    every_file_function_is_implemented(Flavour::OpenMpi);
}

#[test]
fn mpich_every_file_function_is_implemented() {
    every_file_function_is_implemented(Flavour::Mpich);
}

/// File types of 20,000 blocks per rank (hindexed, and a struct of two
/// alternating child types; `tests/c/bigtypes.c`) written collectively and
/// read back: far beyond the 4,096 blocks Weft once refused.
#[test]
fn openmpi_large_datatypes_match_romio() {
    files_match_romio(Flavour::OpenMpi, "bigtypes", &BIGTYPE_FILES);
}

#[test]
fn mpich_large_datatypes_match_romio() {
    files_match_romio(Flavour::Mpich, "bigtypes", &BIGTYPE_FILES);
}

#[test]
fn openmpi_views_match_romio() {
    files_match_romio(Flavour::OpenMpi, "views", &VIEW_FILES);
}

#[test]
fn mpich_views_match_romio() {
    files_match_romio(Flavour::Mpich, "views", &VIEW_FILES);
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
fn preloading_into_a_non_mpi_process_is_inert(flavour: Flavour) {
    require(flavour);
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

#[test]
fn openmpi_preloading_into_a_non_mpi_process_is_inert() {
    preloading_into_a_non_mpi_process_is_inert(Flavour::OpenMpi);
}

#[test]
fn mpich_preloading_into_a_non_mpi_process_is_inert() {
    preloading_into_a_non_mpi_process_is_inert(Flavour::Mpich);
}
