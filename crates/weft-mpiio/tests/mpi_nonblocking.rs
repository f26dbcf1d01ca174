//! Nonblocking MPI-IO, split collectives, the MPI_Wait/Test family with
//! mixed requests, and the lifecycle hooks (finalize, fork), as real MPI
//! jobs in both flavours through the shared harness (`tests/common`).
//!
//! `tests/c/nonblocking.c` runs once on `weft:/nb` and once on a local path
//! through the MPI library's own MPI-IO (MPICH: ROMIO; OpenMPI: ompio,
//! because OpenMPI 4.1's `romio321` component crashes in
//! `MPI_File_iwrite_all`, a NULL function in its ADIO table for local
//! files); the files written through every nonblocking and
//! split-collective call must be byte-identical. The weft: run also checks, inside the job, overlap by
//! observation (another rank sees the data before the writer waits), a
//! forked child starting its own runtime, the `weft_io_method` hint and
//! concurrent creates on `MPI_COMM_SELF`; this test then checks the file
//! left open (with a pending write) at `MPI_Finalize`, the files of every
//! I/O method, and the server counters that show each method was used.

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

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

fn nonblocking_matches_mpi_io(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let nonblocking = program(flavour, "nonblocking");
    let before = ["write_list", "write"].map(|kind| served(&cluster, kind));
    let weft_run = run_job(flavour, &nonblocking, &["weft:/nb"], Some(&cluster.config_path), false);
    assert!(weft_run.stdout.contains("nonblocking OK"), "{}{}", weft_run.stdout, weft_run.stderr);
    let after = ["write_list", "write"].map(|kind| served(&cluster, kind));
    // Strided views go as datatype requests unless the hint says otherwise.
    assert!(after[0] > before[0], "weft_io_method=list sent no write_list request");
    // posix: one write per 2-int piece, 64 pieces per rank (K in nonblocking.c).
    assert!(after[1] >= before[1] + 64 * flavour.ranks() as u64, "weft_io_method=posix sent no per-piece writes");

    let local = tempfile::tempdir().expect("local dir");
    let prefix = local.path().join("nb");
    let local_run =
        run_job(flavour, &nonblocking, &[prefix.to_str().expect("utf-8")], Some(&cluster.config_path), false);
    assert!(local_run.stdout.contains("nonblocking OK"), "{}{}", local_run.stdout, local_run.stderr);
    let local_bytes =
        std::fs::read(format!("{}.nb", prefix.display())).expect("local file written through the MPI library");
    let weft_bytes = weft_file_bytes(&cluster, "/nb.nb");
    assert!(!weft_bytes.is_empty());
    assert_eq!(weft_bytes.len(), local_bytes.len(), "sizes differ");
    if let Some(at) = (0..weft_bytes.len()).find(|i| weft_bytes[*i] != local_bytes[*i]) {
        panic!("bytes differ from the MPI library's at offset {at}");
    }

    // Every I/O method wrote the same bytes (an unknown one is ignored).
    let reference = weft_file_bytes(&cluster, "/nb.m_datatype");
    assert!(!reference.is_empty());
    for method in ["list", "posix", "sieve", "bogus"] {
        let bytes = weft_file_bytes(&cluster, &format!("/nb.m_{method}"));
        assert!(bytes == reference, "weft_io_method={method}: the file differs from datatype I/O's");
    }

    // Concurrent MPI_COMM_SELF creates: one file, every rank's int in it.
    let ranks = flavour.ranks() as usize;
    let own: Vec<u8> = (0..ranks).flat_map(|r| (r as i32 + 1).to_ne_bytes()).collect();
    assert_eq!(weft_file_bytes(&cluster, "/nb.self"), own);

    // Left open at MPI_Finalize with a 1 MiB write per rank never waited
    // for: the file is the ints 0, 1, 2, ... (LEFT_INTS in nonblocking.c);
    // the delete-on-close file left open was closed, so it is gone.
    let left = weft_file_bytes(&cluster, "/nb.left");
    let left_ints = 256 * 1024;
    assert_eq!(left.len(), ranks * 2 * left_ints * 4, "file left open: size");
    if let Some(at) = left.chunks_exact(4).enumerate().position(|(i, int)| int != (i as i32).to_ne_bytes()) {
        panic!("file left open at MPI_Finalize: int {at} is not {at}");
    }
    assert!(
        cluster.client().stat("/nb.leftdoc").is_err(),
        "delete-on-close file left open was not closed at MPI_Finalize"
    );
}

/// Whether `bytes` are the ints 0, 1, 2, ... of `ranks` blocks of
/// `BLOCK_INTS` (tests/c/finalize.c).
fn assert_counting_ints(bytes: &[u8], ranks: usize, what: &str) {
    let block_ints = 64 * 1024;
    assert_eq!(bytes.len(), ranks * block_ints * 4, "{what}: size");
    if let Some(at) = bytes.chunks_exact(4).enumerate().position(|(i, int)| int != (i as i32).to_ne_bytes()) {
        panic!("{what}: int {at} is not {at}");
    }
}

fn finalize_callbacks(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let finalize = program(flavour, "finalize");
    let run = run_job(flavour, &finalize, &["weft:/fin"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("finalize OK"), "{}{}", run.stdout, run.stderr);
    let ranks = flavour.ranks() as usize;
    let closed = weft_file_bytes(&cluster, "/fin.cb");
    assert_counting_ints(&closed, ranks, "file written and closed in a finalize callback");
    assert_counting_ints(&weft_file_bytes(&cluster, "/fin.open"), ranks, "file left open after a finalize callback");

    let local = tempfile::tempdir().expect("local dir");
    let prefix = local.path().join("fin");
    let run = run_job(flavour, &finalize, &[prefix.to_str().expect("utf-8")], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("finalize OK"), "{}{}", run.stdout, run.stderr);
    let reference = std::fs::read(format!("{}.cb", prefix.display())).expect("local file");
    assert!(closed == reference, "the file closed in a finalize callback differs from the MPI library's");
}

#[test]
fn openmpi_finalize_callbacks() {
    finalize_callbacks(Flavour::OpenMpi);
}

#[test]
fn mpich_finalize_callbacks() {
    finalize_callbacks(Flavour::Mpich);
}

#[test]
fn openmpi_nonblocking_matches_mpi_io() {
    nonblocking_matches_mpi_io(Flavour::OpenMpi);
}

#[test]
fn mpich_nonblocking_matches_mpi_io() {
    nonblocking_matches_mpi_io(Flavour::Mpich);
}
