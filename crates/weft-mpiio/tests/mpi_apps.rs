//! The application benchmarks of `bench/mpi` (tile reader, 3-D block,
//! FLASH-IO, S3D-IO, S3aSim) as correctness tests at small sizes, for both MPI
//! flavours (OpenMPI 4 ranks, MPICH 2): each program runs once on a `weft:`
//! path (libweft_mpiio preloaded, a real 4-server cluster) and once on a
//! local directory through the MPI library's own MPI-IO (ROMIO), with
//! every method. The programs check every byte they write (a plain
//! contiguous read-back of the whole file) and read (against the pattern at
//! each byte's file offset) and abort on the first difference; the test
//! asserts that every (method, phase) result came out, and that the file
//! the last method left on Weft equals, byte for byte, the one ROMIO wrote
//! locally (read out with the native client, not through the library).
//! S3aSim runs its four strategies with and without query sync on both
//! file systems; all sixteen output files must be one fixed byte string
//! (its length and hash are constants here), whatever the strategy and the
//! process count (OpenMPI 4, MPICH 2; the constant came from a 3-process run).

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;
use weft_testkit::{Cluster, ClusterOptions};

/// The methods of `bench/mpi/apps.h`'s `APP_METHODS`.
const METHODS: [&str; 6] = ["posix", "sieving", "list", "datatype", "two-phase", "coll-datatype"];
/// The tile reader's: `APP_METHODS_ALL`, with list I/O capped at 64 regions per request.
const TILE_METHODS: [&str; 7] = ["posix", "sieving", "list", "datatype", "two-phase", "coll-datatype", "list-64"];

/// Compiles `bench/mpi/<name>.c` with the flavour's mpicc.
fn bench_program(flavour: Flavour, name: &str) -> PathBuf {
    bench_program_as(flavour, name, name, &[])
}

/// Compiles `bench/mpi/<source>.c` into `<binary>` with extra flags.
fn bench_program_as(flavour: Flavour, source: &str, binary: &str, flags: &[String]) -> PathBuf {
    let dir = profile_dir().join("mpiio").join("bench");
    std::fs::create_dir_all(&dir).expect("program dir");
    let output = dir.join(format!("{binary}.{}", flavour.name()));
    let out = Command::new(flavour.mpicc())
        .args(["-O1", "-Wall", "-Werror", "-o"])
        .arg(&output)
        .arg(crate_dir().join("../../bench/mpi").join(format!("{source}.c")))
        .args(flags)
        .arg("-lm")
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "compiling {binary}: {}", String::from_utf8_lossy(&out.stderr));
    output
}

/// The JSON results of a run: (fs, method, phase) of each line.
fn results(stdout: &str) -> Vec<(String, String, String)> {
    let field = |line: &str, key: &str| -> String {
        let start = line.find(&format!("\"{key}\":\"")).unwrap_or_else(|| panic!("no {key} in {line}")) + key.len() + 4;
        line[start..].split('"').next().expect("value").to_string()
    };
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| (field(line, "fs"), field(line, "method"), field(line, "phase")))
        .collect()
}

/// Runs `name --path P --keep args` on weft:/`name` and on a local file,
/// asserts one write and one read result per method and variant (in that
/// order) on each, and compares the kept files. `variants` is how many
/// write/read pairs each method gives (S3D-IO: without and with atomicity).
fn app_matches_romio(flavour: Flavour, name: &str, args: &[&str], variants: usize) {
    app_methods_match_romio(flavour, name, args, variants, &METHODS);
}

/// [`app_matches_romio`] for the program's own list of methods.
fn app_methods_match_romio(flavour: Flavour, name: &str, args: &[&str], variants: usize, methods: &[&str]) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = bench_program(flavour, name);
    let local = tempfile::tempdir().expect("local dir");
    let local_path = local.path().join(name);
    let weft_path = format!("weft:/{name}");
    for (fs, path) in [("weft", weft_path.as_str()), ("local", local_path.to_str().expect("utf-8"))] {
        let mut all_args = vec!["--path", path, "--keep"];
        all_args.extend_from_slice(args);
        let run = run_job(flavour, &binary, &all_args, Some(&cluster.config_path), true);
        let got = results(&run.stdout);
        let mut expected = Vec::new();
        for method in methods {
            for _ in 0..variants {
                for phase in ["write", "read"] {
                    expected.push((fs.to_string(), method.to_string(), phase.to_string()));
                }
            }
        }
        assert_eq!(got, expected, "{name} on {fs}:\n{}{}", run.stdout, run.stderr);
    }
    let local_bytes = std::fs::read(&local_path).expect("local file kept");
    let weft_bytes = weft_file_bytes(&cluster, &format!("/{name}"));
    assert!(!local_bytes.is_empty(), "{name}: empty local file");
    assert_eq!(weft_bytes.len(), local_bytes.len(), "{name}: sizes differ");
    if let Some(at) = (0..weft_bytes.len()).find(|i| weft_bytes[*i] != local_bytes[*i]) {
        panic!("{name}: the weft: file differs from ROMIO's at offset {at}");
    }
}

/// Tile reader: 2x2 tiles (OpenMPI) or 2x1 (MPICH) of 64x48 3-byte pixels,
/// overlap 16x8, 3 frames; every method of `APP_METHODS_ALL` (list I/O
/// capped at 64 regions per request too). The capped list I/O must send
/// more list requests than the full-length one: checked from the servers'
/// `read_list` counters after a weft: run of each alone.
fn tile_io(flavour: Flavour) {
    let tiles = if flavour.ranks() == 4 { "2x2" } else { "2x1" };
    let args = ["--tiles", tiles, "--tile", "64x48", "--overlap", "16x8", "--frames", "3"];
    app_methods_match_romio(flavour, "tile_io", &args, 1, &TILE_METHODS);
    list_cap_sends_more_requests(flavour);
}

/// Sum of one request kind over all servers.
fn served(cluster: &Cluster, kind: &str) -> u64 {
    let client = cluster.client();
    cluster
        .config
        .servers
        .iter()
        .map(|server| {
            let counters = client.server_counters(server.id).expect("server counters");
            counters.kinds.iter().filter(|k| k.kind == kind).map(|k| k.requests).sum::<u64>()
        })
        .sum()
}

/// The tile reader's `list` and `list-64` methods on tiles of 400 rows
/// (hundreds of regions per datafile per frame): the capped one must send
/// more `write_list` and more `read_list` requests (`weft_list_regions=64`
/// reaches the client's list I/O).
fn list_cap_sends_more_requests(flavour: Flavour) {
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = bench_program(flavour, "tile_io");
    let tiles = if flavour.ranks() == 4 { "2x2" } else { "2x1" };
    let mut sent = Vec::new();
    for method in ["list", "list-64"] {
        let before = ["write_list", "read_list"].map(|kind| served(&cluster, kind));
        let args = ["--path", "weft:/tile_cap", "--methods", method, "--tiles", tiles];
        let args = [&args[..], &["--tile", "64x400", "--overlap", "16x8", "--frames", "1"]].concat();
        let run = run_job(flavour, &binary, &args, Some(&cluster.config_path), true);
        assert_eq!(results(&run.stdout).len(), 2, "{method}:\n{}{}", run.stdout, run.stderr);
        let after = ["write_list", "read_list"].map(|kind| served(&cluster, kind));
        sent.push([after[0] - before[0], after[1] - before[1]]);
    }
    let (full, capped) = (sent[0], sent[1]);
    assert!(full[0] > 0 && full[1] > 0, "list sent no list requests: {full:?}");
    assert!(capped[0] > full[0] && capped[1] > full[1], "list-64 {capped:?} not above list {full:?}");
}

#[test]
fn openmpi_tile_io() {
    tile_io(Flavour::OpenMpi);
}

#[test]
fn mpich_tile_io() {
    tile_io(Flavour::Mpich);
}

/// 3-D block: a 24^3 cube of ints over a 2x2x1 (OpenMPI) or 2x1x1 (MPICH)
/// darray.
fn block3d(flavour: Flavour) {
    app_matches_romio(flavour, "block3d", &["--size", "24"], 1);
}

#[test]
fn openmpi_block3d() {
    block3d(Flavour::OpenMpi);
}

#[test]
fn mpich_block3d() {
    block3d(Flavour::Mpich);
}

/// FLASH-IO: 2 blocks per process of 4^3 cells, 2 guard cells, 6 variables.
fn flash_io(flavour: Flavour) {
    app_matches_romio(flavour, "flash_io", &["--blocks", "2", "--cells", "4", "--guard", "2", "--vars", "6"], 1);
}

#[test]
fn openmpi_flash_io() {
    flash_io(Flavour::OpenMpi);
}

#[test]
fn mpich_flash_io() {
    flash_io(Flavour::Mpich);
}

/// FLASH-IO through parallel HDF5 (OpenMPI only: Debian's HDF5 is built
/// against it): independent (`datatype`) and collective (`two-phase`)
/// transfers on Weft and through ROMIO (the other methods only change the
/// hints HDF5 passes on; the MPI-IO test covers them); the program checks
/// every value written (hyperslabs read back into contiguous memory) and
/// read (and the guard cells untouched). HDF5 files carry object times, so
/// the two files are not compared byte for byte.
#[test]
fn openmpi_flash_io_hdf5() {
    let flavour = Flavour::OpenMpi;
    require(flavour);
    let pkg = |arg: &str| Command::new("pkg-config").args([arg, "hdf5-openmpi"]).output();
    let flags = match (pkg("--cflags"), pkg("--libs")) {
        (Ok(c), Ok(l)) if c.status.success() && l.status.success() => {
            let text = format!("{} {}", String::from_utf8_lossy(&c.stdout), String::from_utf8_lossy(&l.stdout));
            text.split_whitespace().map(str::to_string).chain(["-DWEFT_HDF5".to_string()]).collect::<Vec<_>>()
        }
        _ => panic!(
            "libhdf5-openmpi-dev not installed: run scripts/deps.sh, or leave the MPI tests out with \
             WEFT_SKIP_MPI=1 scripts/test.sh"
        ),
    };
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = bench_program_as(flavour, "flash_io", "flash_io_hdf5", &flags);
    let local = tempfile::tempdir().expect("local dir");
    let local_path = local.path().join("flash.h5");
    for (fs, path) in [("weft", "weft:/flash.h5"), ("local", local_path.to_str().expect("utf-8"))] {
        let args = [
            "--api",
            "hdf5",
            "--methods",
            "datatype,two-phase",
            "--path",
            path,
            "--blocks",
            "2",
            "--cells",
            "4",
            "--vars",
            "6",
        ];
        let run = run_job(flavour, &binary, &args, Some(&cluster.config_path), true);
        let expected: Vec<_> = ["datatype", "two-phase"]
            .iter()
            .flat_map(|m| ["write", "read"].map(|phase| (fs.to_string(), m.to_string(), phase.to_string())))
            .collect();
        assert_eq!(results(&run.stdout), expected, "flash_io hdf5 on {fs}:\n{}{}", run.stdout, run.stderr);
        assert_eq!(run.stdout.matches("\"api\":\"hdf5\"").count(), expected.len(), "{}", run.stdout);
    }
}

/// S3D-IO: an 8^3 grid, each method without and with atomic mode.
fn s3d_io(flavour: Flavour) {
    app_matches_romio(flavour, "s3d_io", &["--grid", "8x8x8"], 2);
}

#[test]
fn openmpi_s3d_io() {
    s3d_io(Flavour::OpenMpi);
}

#[test]
fn mpich_s3d_io() {
    s3d_io(Flavour::Mpich);
}

/// S3aSim parameters of the test: 3 queries, 8 fragments, 20 to 40 results each.
const S3ASIM_ARGS: [&str; 10] =
    ["--queries", "3", "--fragments", "8", "--results-min", "20", "--results-max", "40", "--compute-us", "100"];
/// Length and FNV-1a 64 hash of the output those parameters define (the
/// same for every strategy and process count; computed once from a ROMIO run
/// with 3 processes).
const S3ASIM_OUTPUT: (usize, u64) = (1_152_488, 0x6ebf_1594_754c_e6d2);
const STRATEGIES: [&str; 4] = ["mw", "ww-coll", "ww-posix", "ww-list"];

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// S3aSim: every strategy with and without query sync, on Weft and through
/// ROMIO; each output file (16 of them) must be the same fixed bytes.
fn s3asim(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let binary = bench_program(flavour, "s3asim");
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join("s3a");
    for (fs, prefix) in [("weft", "weft:/s3a"), ("local", local_prefix.to_str().expect("utf-8"))] {
        let mut args = vec!["--path", prefix, "--keep"];
        args.extend_from_slice(&S3ASIM_ARGS);
        let run = run_job(flavour, &binary, &args, Some(&cluster.config_path), true);
        let lines: Vec<&str> = run.stdout.lines().filter(|line| line.starts_with('{')).collect();
        let mut expected = Vec::new();
        for strategy in STRATEGIES {
            for sync in 0..2 {
                expected.push(format!("\"fs\":\"{fs}\",\"strategy\":\"{strategy}\",\"query_sync\":{sync},"));
            }
        }
        assert_eq!(lines.len(), expected.len(), "s3asim on {fs}:\n{}{}", run.stdout, run.stderr);
        for (line, want) in lines.iter().zip(&expected) {
            assert!(line.contains(want.as_str()), "s3asim on {fs}: {line} lacks {want}");
        }
    }
    for strategy in STRATEGIES {
        for sync in ["nosync", "sync"] {
            let weft_bytes = weft_file_bytes(&cluster, &format!("/s3a.{strategy}-{sync}"));
            let local_bytes = std::fs::read(format!("{}.{strategy}-{sync}", local_prefix.display())).expect("kept");
            for (fs, bytes) in [("weft", &weft_bytes), ("local", &local_bytes)] {
                assert_eq!((bytes.len(), fnv1a(bytes)), S3ASIM_OUTPUT, "{strategy}-{sync} on {fs}: output differs");
            }
        }
    }
}

#[test]
fn openmpi_s3asim() {
    s3asim(Flavour::OpenMpi);
}

#[test]
fn mpich_s3asim() {
    s3asim(Flavour::Mpich);
}
