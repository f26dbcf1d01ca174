//! A full disk under an MPI job (issue 21, item 6), both flavours:
//! `tests/c/full_disk.c`. Two servers keep their storage on one 64 MiB
//! tmpfs; independent and collective writes on the full disk fail with
//! `MPI_ERR_NO_SPACE` through `MPI_ERRORS_RETURN`, acknowledged blocks read
//! back, `MPI_File_delete` works on the full disk and a new file then fits.
//! Afterwards fsck is clean and statfs counts the shared disk once.
//!
//! Needs root (it mounts a tmpfs); the mount is undone also on failure.

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions, Tmpfs};

fn small_reserve(config: &mut weft_config::Config) {
    config.durability.metadata_reserve_bytes = 8 << 20;
}

fn full_disk(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let disk = Tmpfs::mount(64 << 20);
    let cluster = Cluster::start(ClusterOptions {
        servers: 2,
        tune: Some(small_reserve),
        storage_root: Some(disk.path.clone()),
        ..Default::default()
    });
    let binary = program(flavour, "full_disk");
    let run = run_job(flavour, &binary, &["weft:/full", "weft:/after"], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("full_disk OK"), "{}{}", run.stdout, run.stderr);
    let blocks: u64 = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("full_disk OK blocks="))
        .and_then(|n| n.trim().parse().ok())
        .expect("blocks written");
    assert!(blocks >= 16, "only {blocks} MiB fitted on the disk");
    let client = cluster.client();
    assert!(client.stat("/full").is_err(), "/full was deleted");
    assert_eq!(client.stat("/after").expect("stat /after").size, (8 << 20) * flavour.ranks() as u64);
    let (disk_total, _) = disk.space();
    assert_eq!(client.statfs().expect("statfs").bytes_total, disk_total, "the shared disk counts once");
    let fsck = std::process::Command::new(weft_testkit::weft_bin())
        .args(["fsck", "--config"])
        .arg(&cluster.config_path)
        .output()
        .expect("run weft fsck");
    let report = String::from_utf8_lossy(&fsck.stdout);
    assert!(fsck.status.success() && report.contains("problems: 0 "), "fsck: {report}");
}

#[test]
fn openmpi_full_disk() {
    full_disk(Flavour::OpenMpi);
}

#[test]
fn mpich_full_disk() {
    full_disk(Flavour::Mpich);
}
