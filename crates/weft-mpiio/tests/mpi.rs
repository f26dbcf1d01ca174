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
    files_match_romio_args(flavour, name, suffixes, &[]);
}

/// [`files_match_romio`] with more arguments after the prefix; prints the
/// program's lines starting with `TIMING` (informational, never asserted).
fn files_match_romio_args(flavour: Flavour, name: &str, suffixes: &[&str], extra: &[&str]) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = program(flavour, name);
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join(name);
    let ok = format!("{name} OK");
    let weft_prefix = format!("weft:/{name}");
    let weft_args: Vec<&str> = [weft_prefix.as_str()].into_iter().chain(extra.iter().copied()).collect();
    let weft_run = run_job(flavour, &binary, &weft_args, Some(&cluster.config_path), true);
    assert!(weft_run.stdout.contains(&ok), "{}{}", weft_run.stdout, weft_run.stderr);
    let local_args: Vec<&str> =
        [local_prefix.to_str().expect("utf-8")].into_iter().chain(extra.iter().copied()).collect();
    let local_run = run_job(flavour, &binary, &local_args, Some(&cluster.config_path), true);
    assert!(local_run.stdout.contains(&ok), "{}{}", local_run.stdout, local_run.stderr);
    for (label, run) in [("weft", &weft_run), ("local", &local_run)] {
        for line in run.stdout.lines().filter(|l| l.starts_with("TIMING")) {
            eprintln!("{} {name} {label}: {line}", flavour.name());
        }
    }
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

/// File types of 1,000,000 blocks per rank (issue 24 item 2), hindexed and
/// struct: beyond the dataloop's 2^18 displacement entries, so built as
/// compact loops (`src/compact.rs`: the entries repeat with a period of 3
/// and 2), written with `write_all`, read back with `read_at_all` and
/// `read_at`, every int checked, files byte-identical to ROMIO's. The
/// program prints its write and read times (slowest rank) on `TIMING`
/// lines, shown with `--nocapture`.
#[test]
fn openmpi_million_block_types_match_romio() {
    files_match_romio_args(Flavour::OpenMpi, "bigtypes", &BIGTYPE_FILES, &["1000000"]);
}

#[test]
fn mpich_million_block_types_match_romio() {
    files_match_romio_args(Flavour::Mpich, "bigtypes", &BIGTYPE_FILES, &["1000000"]);
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

/// Erroneous views (file types and etypes with negative, decreasing or
/// overlapping displacements) get `MPI_ERR_IO` from `MPI_File_set_view`,
/// legal unusual ones work (`tests/c/bad_views.c`). Under MPICH the same
/// program first passes on a local file through MPICH's own ROMIO, the
/// oracle (OpenMPI's own MPI-IO answers `MPI_ERR_TYPE` instead).
fn erroneous_views_are_refused(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let bad_views = program(flavour, "bad_views");
    if let Flavour::Mpich = flavour {
        let local = tempfile::tempdir().expect("local dir");
        let path = local.path().join("bad_views");
        let run = run_job(flavour, &bad_views, &[path.to_str().expect("utf-8")], None, true);
        assert!(run.stdout.contains("bad_views OK"), "ROMIO run:\n{}{}", run.stdout, run.stderr);
    }
    let run = run_job(flavour, &bad_views, &["weft:/bad_views"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("bad_views OK"), "{}{}", run.stdout, run.stderr);
}

#[test]
fn openmpi_erroneous_views_are_refused() {
    erroneous_views_are_refused(Flavour::OpenMpi);
}

#[test]
fn mpich_erroneous_views_are_refused() {
    erroneous_views_are_refused(Flavour::Mpich);
}

/// `MPI_MODE_SEQUENTIAL` (issue 23 item 1): shared and ordered access,
/// views at `MPI_DISPLACEMENT_CURRENT`, and the errors for what a
/// sequential file does not allow (`tests/c/sequential.c`). The program
/// passes on a local file through ROMIO first (the oracle), then on Weft;
/// the two files must be equal byte for byte.
fn sequential_mode(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let sequential = program(flavour, "sequential");
    let local = tempfile::tempdir().expect("local dir");
    let path = local.path().join("sequential");
    let run = run_job(flavour, &sequential, &[path.to_str().expect("utf-8")], None, true);
    assert!(run.stdout.contains("sequential OK"), "ROMIO run:\n{}{}", run.stdout, run.stderr);
    let run = run_job(flavour, &sequential, &["weft:/sequential"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("sequential OK"), "{}{}", run.stdout, run.stderr);
    let local_bytes = std::fs::read(&path).expect("local file");
    assert_eq!(weft_file_bytes(&cluster, "/sequential"), local_bytes, "the Weft file differs from ROMIO's");
}

#[test]
fn openmpi_sequential_mode() {
    sequential_mode(Flavour::OpenMpi);
}

#[test]
fn mpich_sequential_mode() {
    sequential_mode(Flavour::Mpich);
}

/// Data representations (issue 23 item 2): a file written through
/// `external32` views (ints through an interleaved view, records of a
/// struct of every common predefined type from a struct memory type), an
/// `internal` view, and a representation registered with
/// `MPI_Register_datarep` (`tests/c/external32.c`) under `writer` is read
/// back under the same MPI and under the other one; the program checks the
/// values, the big-endian bytes on the servers, and
/// `MPI_File_get_type_extent`.
fn external32_across_mpis(writer: Flavour, reader: Flavour) {
    require(writer);
    require(reader);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let path = format!("weft:/external32_{}", writer.name());
    let written = run_job(writer, &program(writer, "external32"), &[&path, "write"], Some(&cluster.config_path), false);
    assert!(written.stdout.contains("external32 OK"), "write:\n{}{}", written.stdout, written.stderr);
    assert!(written.stdout.contains("EXTENT int=4 double=8"), "extents:\n{}", written.stdout);
    for flavour in [writer, reader] {
        let writers = writer.ranks().to_string();
        let args = [path.as_str(), "read", writers.as_str()];
        let read = run_job(flavour, &program(flavour, "external32"), &args, Some(&cluster.config_path), false);
        assert!(
            read.stdout.contains("external32 OK"),
            "read under {}:\n{}{}",
            flavour.name(),
            read.stdout,
            read.stderr
        );
    }
}

#[test]
fn openmpi_external32_read_under_mpich() {
    external32_across_mpis(Flavour::OpenMpi, Flavour::Mpich);
}

#[test]
fn mpich_external32_read_under_openmpi() {
    external32_across_mpis(Flavour::Mpich, Flavour::OpenMpi);
}
