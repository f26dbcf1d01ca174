//! A Weft data server killed under a running MPI job, both flavours
//! (OpenMPI 4 ranks, MPICH 2): `tests/c/server_down.c`.
//!
//! The job writes a file striped over every server (`/down.wide`) and one on
//! a single server (`/down.narrow`), then waits for `FLAGDIR/ready`'s
//! answer. The test kills (SIGKILL) a server that holds a datafile of the
//! wide file but neither file's metadata nor the narrow file's data: every
//! access of the wide file must fail with `MPI_ERR_IO` through
//! `MPI_ERRORS_RETURN` and return at once (the dead process refuses
//! connections; the job's deadline bounds it anyway), the narrow file keeps
//! working; after the restart the wide file reads and writes again. The
//! coordination goes through flag files (as `tests/mpi_shared.rs` does for
//! a metadata server restart).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

/// Polls for `flag` while the job runs (bounded: 120 s, and the job's own deadline).
fn wait_for_flag(flag: &Path, job: &std::thread::JoinHandle<JobOutput>) -> bool {
    for _ in 0..2400 {
        if flag.exists() {
            return true;
        }
        if job.is_finished() {
            return flag.exists();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    flag.exists()
}

/// The server to kill: one with a datafile of `wide` that holds neither
/// file's metadata nor a datafile of `narrow`.
fn victim(cluster: &Cluster, wide: &str, narrow: &str) -> u32 {
    let client = cluster.client();
    let servers = |path: &str| -> (u32, BTreeSet<u32>) {
        let stat = client.stat(path).unwrap_or_else(|e| panic!("stat {path}: {e:?}"));
        let metadata = client.client().server_of(stat.handle).expect("metadata server");
        let layout = stat.layout.unwrap_or_else(|| panic!("{path} has no layout"));
        let data = layout.datafiles.iter().map(|h| client.client().server_of(*h).expect("data server")).collect();
        (metadata, data)
    };
    let (wide_meta, wide_data) = servers(wide);
    let (narrow_meta, narrow_data) = servers(narrow);
    assert_eq!(narrow_data.len(), 1, "{narrow} should be on one server: {narrow_data:?}");
    assert!(wide_data.len() >= 2, "{wide} should span several servers: {wide_data:?}");
    let spared: BTreeSet<u32> = [wide_meta, narrow_meta].into_iter().chain(narrow_data).collect();
    *wide_data
        .iter()
        .find(|s| !spared.contains(s))
        .unwrap_or_else(|| panic!("no server to kill: {wide} on {wide_data:?}, spared {spared:?}"))
}

fn server_down(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let mut cluster = Cluster::start(ClusterOptions::default());
    let binary = program(flavour, "server_down");
    let flags = tempfile::tempdir().expect("flag dir");
    let flag_dir = flags.path().to_str().expect("utf-8").to_string();
    let config = cluster.config_path.clone();
    let job = std::thread::spawn(move || {
        run_job(flavour, &binary, &["weft:/down.wide", "weft:/down.narrow", &flag_dir], Some(&config), false)
    });
    let mut killed = None;
    if wait_for_flag(&flags.path().join("ready"), &job) {
        let server = victim(&cluster, "/down.wide", "/down.narrow");
        cluster.kill(server);
        killed = Some(server);
        std::fs::write(flags.path().join("killed"), b"").expect("flag");
        if wait_for_flag(&flags.path().join("checked"), &job) {
            cluster.restart(server);
            std::fs::write(flags.path().join("restarted"), b"").expect("flag");
        }
    }
    let run = job.join().unwrap_or_else(|_| panic!("{} job failed (server killed: {killed:?})", flavour.name()));
    assert!(run.stdout.contains("server_down OK"), "{}{}", run.stdout, run.stderr);
    // The restarted server serves the file to a fresh client too.
    let bytes = weft_file_bytes(&cluster, "/down.wide");
    assert_eq!(bytes.len(), 4 * 65536 * flavour.ranks() as usize, "size of /down.wide");
    let round3 = |offset: usize| ((offset * 13 + 3 * 101 + 7) & 0xff) as u8;
    assert!(bytes.iter().enumerate().all(|(i, b)| *b == round3(i)), "/down.wide is not the last round written");
}

#[test]
fn openmpi_server_down() {
    server_down(Flavour::OpenMpi);
}

#[test]
fn mpich_server_down() {
    server_down(Flavour::Mpich);
}
