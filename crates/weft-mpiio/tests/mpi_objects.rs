//! The object cache (`weft_cache=objects`, issue 14) and atomic mode by
//! objects (`weft_atomic_method=objects`) through real MPI jobs against
//! real servers, both flavours (OpenMPI 4 ranks, MPICH 2):
//! - `tests/c/objects.c` writes views with only private objects, with
//!   shared objects between neighbours, and with a coarse map, across
//!   `set_view` changes, sync and close, under the cache (hints from a
//!   `ROMIO_HINTS` file, once with a 256-byte budget so that write-backs
//!   happen mid-run); every file equals ROMIO's on a local path byte for
//!   byte, and the ranks report the objects they computed.
//! - `tests/c/collective.c` (ten view patterns) under the cache equals
//!   ROMIO's files too.
//! - `tests/c/atomic.c`: in atomic mode by objects, with and without the
//!   cache, no read mixes two writes.

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

/// Files of objects.c.
const OBJECT_FILES: [&str; 3] = ["private", "shared", "coarse"];
/// Files of collective.c (see tests/mpi_collective.rs).
const COLLECTIVE_FILES: [&str; 10] =
    ["ior", "holes", "resized", "sub2", "darray", "sub3", "mem", "strided8", "zero", "blocks"];

fn compare(cluster: &Cluster, local_prefix: &std::path::Path, weft_prefix: &str, suffixes: &[&str]) {
    for suffix in suffixes {
        let local_bytes = std::fs::read(format!("{}.{suffix}", local_prefix.display()))
            .unwrap_or_else(|e| panic!("local file .{suffix} not written: {e}"));
        let weft_bytes = weft_file_bytes(cluster, &format!("{weft_prefix}.{suffix}"));
        assert_eq!(weft_bytes.len(), local_bytes.len(), "{weft_prefix}.{suffix}: sizes differ");
        if let Some(at) = (0..weft_bytes.len()).find(|i| weft_bytes[*i] != local_bytes[*i]) {
            let window = at.saturating_sub(8)..(at + 24).min(weft_bytes.len());
            panic!(
                "{weft_prefix}.{suffix}: bytes differ from ROMIO's at offset {at}\n weft: {:?}\nromio: {:?}",
                &weft_bytes[window.clone()],
                &local_bytes[window]
            );
        }
    }
}

/// `(file, objects, coarse)` reported by each rank.
fn reports(stdout: &str) -> Vec<(String, i64, i64)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("OBJECTS "))
        .map(|line| {
            let mut file = String::new();
            let (mut objects, mut coarse) = (-9, -9);
            for field in line.split_whitespace().skip(1) {
                let (key, value) = field.split_once('=').expect("key=value");
                match key {
                    "file" => file = value.to_string(),
                    "objects" => objects = value.parse().expect("number"),
                    "coarse" => coarse = value.parse().expect("number"),
                    _ => {}
                }
            }
            (file, objects, coarse)
        })
        .collect()
}

fn hints_file(dir: &std::path::Path, name: &str, lines: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines).expect("hints file");
    path
}

fn objects_match_romio(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let objects = program(flavour, "objects");
    let collective = program(flavour, "collective");
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join("obj");
    let run = run_job(flavour, &objects, &[local_prefix.to_str().expect("utf-8")], Some(&cluster.config_path), true);
    assert!(run.stdout.contains("objects OK"), "ROMIO run:\n{}{}", run.stdout, run.stderr);
    let ranks = i64::from(flavour.ranks());
    for (name, hints) in [("cache", "weft_cache objects\n"), ("budget", "weft_cache objects\nweft_cache_bytes 256\n")] {
        let hints = hints_file(local.path(), name, hints);
        let env = [("ROMIO_HINTS", hints.to_str().expect("utf-8"))];
        let prefix = format!("weft:/obj_{name}");
        let run = run_job_env(flavour, &objects, &[&prefix], Some(&cluster.config_path), false, &env);
        assert!(run.stdout.contains("objects OK"), "{name}:\n{}{}", run.stdout, run.stderr);
        let got = reports(&run.stdout);
        for (file, objects, coarse) in [
            ("private", ranks, 0),
            ("private2", ranks, 0),
            ("shared", 2 * ranks - 1, 0),
            ("shared2", ranks, 0),
            ("coarse", ranks, 1),
        ] {
            let of_file: Vec<_> = got.iter().filter(|r| r.0 == file).collect();
            assert_eq!(of_file.len() as i64, ranks, "{name} {file}: one report per rank: {got:?}");
            for r in of_file {
                assert_eq!((r.1, r.2), (objects, coarse), "{name} {file}: objects, coarse: {got:?}");
            }
        }
        compare(&cluster, &local_prefix, &format!("/obj_{name}"), &OBJECT_FILES);
    }
    // collective.c's ten patterns under the cache.
    let coll_prefix = local.path().join("coll");
    let run = run_job(
        flavour,
        &collective,
        &[coll_prefix.to_str().expect("utf-8"), "two_phase_small"],
        Some(&cluster.config_path),
        true,
    );
    assert!(run.stdout.contains("collective OK"), "ROMIO collective run:\n{}{}", run.stdout, run.stderr);
    let hints = hints_file(local.path(), "coll_cache", "weft_cache objects\n");
    let env = [("ROMIO_HINTS", hints.to_str().expect("utf-8"))];
    let run =
        run_job_env(flavour, &collective, &["weft:/coll_cache", "datatype"], Some(&cluster.config_path), false, &env);
    assert!(run.stdout.contains("collective OK"), "collective under the cache:\n{}{}", run.stdout, run.stderr);
    compare(&cluster, &coll_prefix, "/coll_cache", &COLLECTIVE_FILES);
}

#[test]
fn openmpi_objects_match_romio() {
    objects_match_romio(Flavour::OpenMpi);
}

#[test]
fn mpich_objects_match_romio() {
    objects_match_romio(Flavour::Mpich);
}

/// A writer rewrites a strided view while the other ranks read it (every
/// byte shared): atomic mode by objects, alone and with the cache, never
/// lets a read see two writes.
fn atomic_objects_never_mix(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let atomic = program(flavour, "atomic");
    let dir = tempfile::tempdir().expect("hints dir");
    let run = run_job(
        flavour,
        &atomic,
        &["weft:/atomic_objects", "atomic", "60", "objects", "datatype", "alt-try"],
        Some(&cluster.config_path),
        false,
    );
    assert!(run.stdout.contains("atomic OK mixed=0"), "objects: {}{}", run.stdout, run.stderr);
    let hints = hints_file(dir.path(), "cache", "weft_cache objects\n");
    let env = [("ROMIO_HINTS", hints.to_str().expect("utf-8"))];
    let run = run_job_env(
        flavour,
        &atomic,
        &["weft:/atomic_cache", "atomic", "60", "locks", "list", "two-phase"],
        Some(&cluster.config_path),
        false,
        &env,
    );
    assert!(run.stdout.contains("atomic OK mixed=0"), "cache: {}{}", run.stdout, run.stderr);
}

#[test]
fn openmpi_atomic_objects_never_mix() {
    atomic_objects_never_mix(Flavour::OpenMpi);
}

#[test]
fn mpich_atomic_objects_never_mix() {
    atomic_objects_never_mix(Flavour::Mpich);
}

/// MPI-Tile-IO in atomic mode (`bench/mpi/tile_io --atomic --sync`,
/// datatype method, a 2x2 wall on 4 ranks) through the byte-range lock path, atomic mode
/// by objects, and the object cache; not run by default, timing only:
/// `cargo test --release -p weft-mpiio --test mpi_objects -- --ignored
/// --nocapture bench_tile_io_atomic`. Prints one JSON line per run and
/// phase (`WEFT_BENCH_REPS` runs each, default 3, interleaved).
#[test]
#[ignore]
fn bench_tile_io_atomic() {
    let flavour = Flavour::OpenMpi;
    require(flavour);
    let _one_at_a_time = exclusive();
    let reps: usize = std::env::var("WEFT_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let frames = std::env::var("WEFT_BENCH_FRAMES").unwrap_or_else(|_| "4".into());
    let cluster = Cluster::start(ClusterOptions::default());
    let dir = tempfile::tempdir().expect("bench dir");
    let binary = dir.path().join("tile_io");
    let source = crate_dir().join("../../bench/mpi/tile_io.c");
    let out = std::process::Command::new(flavour.mpicc())
        .args(["-O2", "-Wall", "-o"])
        .arg(&binary)
        .arg(&source)
        .arg("-lm")
        .output()
        .expect("mpicc");
    assert!(out.status.success(), "tile_io: {}", String::from_utf8_lossy(&out.stderr));
    let configs = [
        ("locks", "weft_atomic_method locks\n"),
        ("objects", "weft_atomic_method objects\n"),
        ("cache", "weft_cache objects\n"),
    ];
    for rep in 0..reps {
        for (name, hints) in configs {
            let hints = hints_file(dir.path(), name, hints);
            let env = [("ROMIO_HINTS", hints.to_str().expect("utf-8"))];
            let path = format!("weft:/tile_{name}_{rep}");
            let args = [
                "--path",
                path.as_str(),
                "--methods",
                "datatype",
                "--atomic",
                "--sync",
                "--frames",
                frames.as_str(),
                "--tiles",
                "2x2",
                "--tile",
                "512x384",
                "--overlap",
                "135x64",
            ];
            let run = run_job_env(flavour, &binary, &args, Some(&cluster.config_path), false, &env);
            for line in run.stdout.lines().filter(|l| l.starts_with('{')) {
                println!("{{\"config\":\"{name}\",\"rep\":{rep},{}", &line[1..]);
            }
        }
    }
}
