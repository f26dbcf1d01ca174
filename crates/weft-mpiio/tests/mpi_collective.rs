//! Collective I/O through libweft_mpiio, for both MPI flavours (OpenMPI 4
//! ranks, MPICH 2): `tests/c/collective.c` writes and reads back eleven
//! files through views (interleaved ior-hard records, holes, resized file
//! types, 2-D and 3-D subarrays, a darray, a noncontiguous memory type,
//! 8-byte strided regions, ranks contributing 0 bytes, count 0 everywhere,
//! disjoint blocks, overlapping writes) under each collective method:
//! two-phase with an 8 KiB `cb_buffer_size` (several rounds), two-phase
//! with `cb_nodes` 1 and 2, `datatype`, and `automatic`. Every weft: file
//! must equal, byte for byte, the file ROMIO writes on a local path; the
//! program checks every read itself; and the library's debug counters
//! show which path ran and who talked to the servers (with `cb_nodes=1`
//! only rank 0 sends data requests).

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

/// Suffixes of the files compared with ROMIO's.
const FILES: [&str; 10] = ["ior", "holes", "resized", "sub2", "darray", "sub3", "mem", "strided8", "zero", "blocks"];
/// Collective calls per rank that move bytes somewhere (see collective.c).
const COLLECTIVE_CALLS: u64 = 21;
/// Of those, the calls whose ranks' file ranges do not overlap (`automatic`
/// uses datatype I/O for them): the disjoint blocks always; with 2 ranks
/// also the 2-D subarray (rank 1 contributes nothing) and the darray (a
/// 2x1 process grid splits the rows in two halves).
fn disjoint_calls(ranks: usize) -> u64 {
    if ranks == 2 {
        6
    } else {
        2
    }
}

#[derive(Debug, Default)]
struct Stats {
    rank: usize,
    two_phase: u64,
    datatype: u64,
    rounds: u64,
    data_requests: u64,
}

fn parse_stats(stdout: &str) -> Vec<Stats> {
    let mut out: Vec<Stats> = stdout
        .lines()
        .filter(|line| line.starts_with("STATS "))
        .map(|line| {
            let mut stats = Stats::default();
            for field in line.split_whitespace().skip(1) {
                let (key, value) = field.split_once('=').expect("key=value");
                let value: u64 = value.parse().expect("number");
                match key {
                    "rank" => stats.rank = value as usize,
                    "two_phase" => stats.two_phase = value,
                    "datatype" => stats.datatype = value,
                    "rounds" => stats.rounds = value,
                    "data_requests" => stats.data_requests = value,
                    _ => {}
                }
            }
            stats
        })
        .collect();
    out.sort_by_key(|s| s.rank);
    out
}

fn check_stats(flavour: Flavour, mode: &str, stats: &[Stats]) {
    let ranks = flavour.ranks() as usize;
    assert_eq!(stats.len(), ranks, "{mode}: one STATS line per rank");
    for s in stats {
        match mode {
            "datatype" => {
                assert_eq!((s.two_phase, s.datatype), (0, COLLECTIVE_CALLS), "{mode}: {s:?}");
                assert!(s.data_requests > 0, "{mode}: every rank does its own I/O: {s:?}");
            }
            "automatic" => {
                let disjoint = disjoint_calls(ranks);
                assert_eq!((s.two_phase, s.datatype), (COLLECTIVE_CALLS - disjoint, disjoint), "{mode}: {s:?}")
            }
            _ => assert_eq!((s.two_phase, s.datatype), (COLLECTIVE_CALLS, 0), "{mode}: {s:?}"),
        }
    }
    match mode {
        "two_phase_small" => {
            for s in stats {
                assert!(s.rounds > 2 * s.two_phase, "{mode}: 8 KiB rounds should be many: {s:?}");
            }
        }
        "cb1" => {
            assert!(stats[0].data_requests > 0, "{mode}: the aggregator wrote nothing: {:?}", stats[0]);
            for s in &stats[1..] {
                assert_eq!(s.data_requests, 0, "{mode}: only the aggregator (rank 0) talks to the data servers: {s:?}");
            }
        }
        "cb2" => {
            let aggregators = [0, ranks / 2];
            for s in stats {
                if aggregators.contains(&s.rank) {
                    assert!(s.data_requests > 0, "{mode}: aggregator idle: {s:?}");
                } else {
                    assert_eq!(s.data_requests, 0, "{mode}: a non-aggregator sent data requests: {s:?}");
                }
            }
        }
        _ => {}
    }
}

fn collective_matches_romio(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let collective = program(flavour, "collective");
    let local = tempfile::tempdir().expect("local dir");
    let local_prefix = local.path().join("coll");
    let local_run = run_job(
        flavour,
        &collective,
        &[local_prefix.to_str().expect("utf-8"), "two_phase_small"],
        Some(&cluster.config_path),
        true,
    );
    assert!(local_run.stdout.contains("collective OK"), "ROMIO run:\n{}{}", local_run.stdout, local_run.stderr);
    for mode in ["two_phase_small", "cb1", "cb2", "datatype", "automatic"] {
        let prefix = format!("weft:/coll_{mode}");
        let run = run_job(flavour, &collective, &[&prefix, mode], Some(&cluster.config_path), true);
        assert!(run.stdout.contains("collective OK"), "{mode}:\n{}{}", run.stdout, run.stderr);
        check_stats(flavour, mode, &parse_stats(&run.stdout));
        for suffix in FILES {
            let local_bytes = std::fs::read(format!("{}.{suffix}", local_prefix.display()))
                .unwrap_or_else(|e| panic!("local file .{suffix} not written through the MPI library: {e}"));
            let weft_bytes = weft_file_bytes(&cluster, &format!("/coll_{mode}.{suffix}"));
            assert_eq!(local_bytes.is_empty(), suffix == "zero", ".{suffix}: unexpected size {}", local_bytes.len());
            assert_eq!(weft_bytes.len(), local_bytes.len(), "{mode} .{suffix}: sizes differ");
            if let Some(at) = (0..weft_bytes.len()).find(|i| weft_bytes[*i] != local_bytes[*i]) {
                let window = at.saturating_sub(8)..(at + 24).min(weft_bytes.len());
                panic!(
                    "{mode} .{suffix}: bytes differ from ROMIO's at offset {at}\n weft: {:?}\nromio: {:?}",
                    &weft_bytes[window.clone()],
                    &local_bytes[window]
                );
            }
        }
    }
}

#[test]
fn openmpi_collective_matches_romio() {
    collective_matches_romio(Flavour::OpenMpi);
}

#[test]
fn mpich_collective_matches_romio() {
    collective_matches_romio(Flavour::Mpich);
}

/// Measures the collective methods (not run by default; timing only, no
/// assertion on time): `cargo test --release -p weft-mpiio
/// --test mpi_collective -- --ignored --nocapture bench_collective_methods`.
/// Prints one JSON line per flavour, pattern and method.
#[test]
#[ignore]
fn bench_collective_methods() {
    let reps = std::env::var("WEFT_BENCH_REPS").unwrap_or_else(|_| "5".into());
    for flavour in [Flavour::OpenMpi, Flavour::Mpich] {
        require(flavour);
        let _one_at_a_time = exclusive();
        let cluster = Cluster::start(ClusterOptions::default());
        let bench = program(flavour, "coll_bench");
        for method in ["datatype", "two_phase", "automatic"] {
            let prefix = format!("weft:/bench_{method}");
            let run = run_job(flavour, &bench, &[&prefix, method, &reps], Some(&cluster.config_path), false);
            for line in run.stdout.lines().filter(|l| l.starts_with('{')) {
                println!("{{\"flavour\":\"{}\",{}", flavour.name(), &line[1..]);
            }
        }
    }
}
