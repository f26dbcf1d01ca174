//! Plain paths on a Weft FUSE mount go native (issue 23 item 4): an MPI
//! program given `/mnt/.../d/f` on a `weft mount` of the test cluster opens
//! the Weft file `/d/f` through libweft_mpiio, and what it wrote is seen
//! through the mount at once.
//!
//! Per flavour, one cluster and one mount (attributes and names cached for
//! a minute, so a stale `stat` would show):
//! 1. the file is first written and read through the mount with a few
//!    bytes, so the kernel holds its attributes and pages;
//! 2. `tests/c/mount_paths.c` writes it through a strided view with
//!    `write_all`, reads it back, `stat`s it after `MPI_File_close` (rank
//!    0, through the kernel), and removes a second file with
//!    `MPI_File_delete`; it reports the Weft data requests its process
//!    sent, which must be > 0 (native);
//! 3. right after the job, `cat`, `stat` and `md5sum` through the mount give
//!    exactly the bytes (size, digest) the same program leaves on a local
//!    file through the MPI library's own MPI-IO, as does the native client;
//! 4. the same through a symbolic link into the mount;
//! 5. with `WEFT_MPIIO_MOUNT_PATHS=0` the program runs through the MPI
//!    library's MPI-IO over FUSE (0 Weft requests), with the same bytes.
//!
//! The jobs get `WEFT_CONFIG`; a job without it uses the configuration the
//! mount records in its source (`weft:NAME@PATH`), checked in step 2b.

mod common;

use common::*;
use std::process::Command;
use weft_testkit::{Cluster, ClusterOptions};

/// Output of a shell command that must succeed.
fn sh(script: &str) -> String {
    let out = Command::new("timeout").args(["120", "sh", "-c", script]).output().expect("run sh");
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `requests=N` rank 0 of mount_paths printed.
fn requests(stdout: &str) -> u64 {
    let line = stdout.lines().find(|l| l.starts_with("mount_paths OK")).unwrap_or_else(|| panic!("no OK: {stdout}"));
    line.rsplit_once("requests=").and_then(|(_, n)| n.trim().parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

/// `cat`, `stat -c %s` and `md5sum` of `path` (through the kernel) match `expected`.
fn assert_seen(path: &str, expected: &[u8], reference: &str) {
    let quoted = format!("'{path}'");
    let cat = Command::new("cat").arg(path).output().expect("cat");
    assert!(cat.status.success(), "cat {path}: {}", String::from_utf8_lossy(&cat.stderr));
    assert_eq!(cat.stdout.len(), expected.len(), "cat {path}: length");
    assert!(cat.stdout == expected, "cat {path}: bytes differ from the local run's file");
    let size = sh(&format!("stat -c %s {quoted}"));
    assert_eq!(size.trim(), expected.len().to_string(), "stat {path}");
    let digest = |p: &str| sh(&format!("md5sum < '{p}'")).split_whitespace().next().unwrap_or("").to_string();
    assert_eq!(digest(path), digest(reference), "md5sum {path}");
}

fn mount_paths(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let mount = Mount::start(&cluster);
    let binary = program(flavour, "mount_paths");
    let config = Some(cluster.config_path.as_path());
    let ints = "20000";

    // The baseline: the same program on a local file, through ROMIO.
    let local = tempfile::tempdir().expect("local dir");
    let reference = local.path().join("reference");
    let reference = reference.to_str().expect("utf-8");
    let run = run_job(flavour, &binary, &[reference, ints], config, true);
    assert_eq!(requests(&run.stdout), 0, "a local file went to Weft:\n{}{}", run.stdout, run.stderr);
    let expected = std::fs::read(reference).expect("reference file");
    assert!(expected.len() >= 20_000 * 4, "reference is {} bytes", expected.len());

    // 1. A small old version, through the mount, stat'ed and read: cached.
    std::fs::create_dir(mount.path.join("d")).expect("mkdir through the mount");
    let file = mount.at("d/f");
    std::fs::write(&file, b"old bytes\n").expect("write through the mount");
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), 10);
    assert_eq!(std::fs::read(&file).expect("read"), b"old bytes\n");

    // 2. Native MPI-IO by mount path.
    let run = run_job(flavour, &binary, &[&file, ints], config, true);
    assert!(requests(&run.stdout) > 0, "{file} did not go native:\n{}{}", run.stdout, run.stderr);
    // 3. Seen through the mount at once, and by the native client.
    assert_seen(&file, &expected, reference);
    assert!(weft_file_bytes(&cluster, "/d/f") == expected, "/d/f in Weft differs from the local run's file");
    assert!(!mount.path.join("d/f.gone").exists(), "MPI_File_delete left d/f.gone");

    // 2b. No WEFT_CONFIG: the configuration recorded in the mount's source.
    let source = std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mount.path.to_str().expect("utf-8")))
        .map(str::to_string)
        .expect("the mount in mountinfo");
    assert!(source.contains(" - fuse weft:") || source.contains(" - fuse.weft weft:"), "{source}");
    assert!(source.contains(&format!("@{}", cluster.config_path.display())), "no config in the source: {source}");
    let bare = mount.at("d/bare");
    let run = run_job(flavour, &binary, &[&bare, ints], None, true);
    assert!(requests(&run.stdout) > 0, "{bare} without WEFT_CONFIG did not go native:\n{}{}", run.stdout, run.stderr);
    assert_seen(&bare, &expected, reference);

    // 4. Through a symbolic link into the mount.
    let link = local.path().join("link");
    std::os::unix::fs::symlink(mount.path.join("d"), &link).expect("symlink");
    let linked = link.join("h");
    let linked = linked.to_str().expect("utf-8");
    let run = run_job(flavour, &binary, &[linked, ints], config, true);
    assert!(requests(&run.stdout) > 0, "{linked} did not go native:\n{}{}", run.stdout, run.stderr);
    assert_seen(&mount.at("d/h"), &expected, reference);
    assert!(weft_file_bytes(&cluster, "/d/h") == expected, "/d/h in Weft differs from the local run's file");

    // 5. Detection off: the MPI library's own MPI-IO over FUSE.
    let off = mount.at("d/off");
    let run = run_job_env(flavour, &binary, &[&off, ints], config, true, &[("WEFT_MPIIO_MOUNT_PATHS", "0")]);
    assert_eq!(requests(&run.stdout), 0, "{off} went native with the switch off:\n{}{}", run.stdout, run.stderr);
    assert_seen(&off, &expected, reference);
    drop(mount);
}

#[test]
fn openmpi_mount_paths_go_native() {
    mount_paths(Flavour::OpenMpi);
}

#[test]
fn mpich_mount_paths_go_native() {
    mount_paths(Flavour::Mpich);
}
