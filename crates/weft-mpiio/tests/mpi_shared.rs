//! Shared file pointers and atomic mode through real MPI jobs, both
//! flavours (OpenMPI 4 ranks, MPICH 2): `tests/c/shared.c` and
//! `tests/c/atomic.c`, with the bytes checked from Rust through the client.
//! Harness (library build, deadlines, process groups): `tests/common`.

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

const RECORD_BYTES: usize = 16;
const RECORDS: usize = 150;
const MAGIC: i32 = 0x5745_4654;

fn ints(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// write_ordered lands in rank order, write_shared loses and overlaps
/// nothing; the program itself checks read_shared, read_ordered,
/// seek_shared and get_position_shared.
fn shared_pointers(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let shared = program(flavour, "shared");
    let run = run_job(flavour, &shared, &["weft:/shared"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("shared OK"), "{}{}", run.stdout, run.stderr);
    let ranks = flavour.ranks() as i32;

    // Two ordered rounds: rank r's r + 1 ints (r * 1000 + i), in rank order, then the same + 100.
    let mut expected = Vec::new();
    for round in [0, 100] {
        for r in 0..ranks {
            expected.extend((0..=r).map(|i| r * 1000 + i + round));
        }
    }
    assert_eq!(ints(&weft_file_bytes(&cluster, "/shared.ordered")), expected, "write_ordered is not in rank order");

    // Every record exactly once, none torn or overlapping.
    let bytes = weft_file_bytes(&cluster, "/shared.records");
    assert_eq!(bytes.len(), ranks as usize * RECORDS * RECORD_BYTES, "records lost or duplicated");
    let mut seen = vec![vec![false; RECORDS]; ranks as usize];
    for record in bytes.chunks_exact(RECORD_BYTES) {
        let [magic, rank, seq, check] = ints(record)[..] else { unreachable!() };
        assert_eq!(magic, MAGIC, "torn or overlapping record {record:?}");
        assert!((0..ranks).contains(&rank) && (0..RECORDS as i32).contains(&seq), "bad record {record:?}");
        assert_eq!(check, rank * 7919 + seq * 31 + 5, "torn record {record:?}");
        assert!(!seen[rank as usize][seq as usize], "record ({rank}, {seq}) written twice");
        seen[rank as usize][seq as usize] = true;
    }
    // Each rank's own records appear in its order (one pointer, fetch-and-add per write).
    for r in 0..ranks {
        let order: Vec<i32> = bytes.chunks_exact(RECORD_BYTES).map(ints).filter(|v| v[1] == r).map(|v| v[2]).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "rank {r}'s records out of order");
    }
}

/// A writer rewrites a strided view spanning every server while readers
/// read it: in atomic mode no read mixes two writes. Then the same without
/// atomic mode, reported only (a mix is likely, not certain).
fn atomic_mode(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let atomic = program(flavour, "atomic");
    let run = run_job(flavour, &atomic, &["weft:/atomic", "atomic", "150"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("atomic OK mixed=0"), "{}{}", run.stdout, run.stderr);
    let striped = cluster.client().stat("/atomic").expect("atomic file");
    assert_eq!(striped.layout.expect("layout").distribution.stripe_count, 4, "the view must span every server");
    let plain = run_job(flavour, &atomic, &["weft:/plain", "plain", "150"], Some(&cluster.config_path), false);
    assert!(plain.stdout.contains("plain mixed="), "{}{}", plain.stdout, plain.stderr);
    eprintln!("{} without atomic mode (informative): {}", flavour.name(), plain.stdout.trim());
}

/// Atomic mode with every lock method and protocol of the data servers'
/// locks (`weft_atomic_method=locks`), and the session fallback: no read
/// mixes two writes.
fn atomic_mode_lock_methods(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let atomic = program(flavour, "atomic");
    let mut cases: Vec<[&str; 3]> = vec![["session", "datatype", "alt-try"]];
    for method in ["datatype", "list", "posix"] {
        for protocol in ["alt-try", "one-try", "two-phase"] {
            cases.push(["locks", method, protocol]);
        }
    }
    for (i, [atomic_method, method, protocol]) in cases.into_iter().enumerate() {
        let path = format!("weft:/atomic{i}");
        let args = [path.as_str(), "atomic", "40", atomic_method, method, protocol];
        let run = run_job(flavour, &atomic, &args, Some(&cluster.config_path), false);
        assert!(
            run.stdout.contains("atomic OK mixed=0"),
            "{atomic_method} {method} {protocol}: {}{}",
            run.stdout,
            run.stderr
        );
    }
}

/// Sessions are in the metadata server's memory: after it restarts, the
/// shared-pointer calls of a file opened before fail with
/// `MPI_ERR_BAD_FILE`; close works and a reopen has a working pointer.
fn restart_loses_the_shared_pointer(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let mut cluster = Cluster::start(ClusterOptions::default());
    let restart = program(flavour, "restart");
    let flags = tempfile::tempdir().expect("flag dir");
    let flag_dir = flags.path().to_str().expect("utf-8").to_string();
    let config = cluster.config_path.clone();
    let job =
        std::thread::spawn(move || run_job(flavour, &restart, &["weft:/restart", &flag_dir], Some(&config), false));
    // Bounded: the job's own deadline ends it, which ends this wait too.
    let ready = flags.path().join("ready");
    let mut waited = 0;
    while !ready.exists() && !job.is_finished() && waited < 2400 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
    }
    if ready.exists() {
        let client = cluster.client();
        let handle = client.stat("/restart").expect("file").handle;
        let server = client.client().server_of(handle).expect("server");
        drop(client);
        cluster.kill(server);
        cluster.restart(server);
        std::fs::write(flags.path().join("restarted"), b"").expect("flag");
    }
    let run = job.join().unwrap_or_else(|_| panic!("{} job failed", flavour.name()));
    assert!(run.stdout.contains("restart OK"), "{}{}", run.stdout, run.stderr);
}

#[test]
fn openmpi_restart_loses_the_shared_pointer() {
    restart_loses_the_shared_pointer(Flavour::OpenMpi);
}

#[test]
fn mpich_restart_loses_the_shared_pointer() {
    restart_loses_the_shared_pointer(Flavour::Mpich);
}

#[test]
fn openmpi_shared_pointers() {
    shared_pointers(Flavour::OpenMpi);
}

#[test]
fn mpich_shared_pointers() {
    shared_pointers(Flavour::Mpich);
}

#[test]
fn openmpi_atomic_mode() {
    atomic_mode(Flavour::OpenMpi);
}

#[test]
fn mpich_atomic_mode() {
    atomic_mode(Flavour::Mpich);
}

#[test]
fn openmpi_atomic_mode_lock_methods() {
    atomic_mode_lock_methods(Flavour::OpenMpi);
}

#[test]
fn mpich_atomic_mode_lock_methods() {
    atomic_mode_lock_methods(Flavour::Mpich);
}
