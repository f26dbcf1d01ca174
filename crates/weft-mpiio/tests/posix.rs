//! The POSIX interposition on `weft:` names (`c/posix.c`, `src/posix.rs`),
//! with each flavour's library preloaded into a plain C program (no MPI
//! call, no `mpirun`): `tests/c/posix_probe.c` reads a Weft file through
//! `open()`/`read()`, creates, writes, syncs, truncates and appends to
//! another through write-intent opens (`src/posix_writable.rs`), gets
//! `ENOENT` from `access()` of a missing name, truncates through `truncate()`, gets
//! `EFBIG` beyond the snapshot limit, and finds local names untouched;
//! `tests/c/posix_names.c` serves `mkdir`, `stat`/`lstat`, `fopen`, `rename`,
//! `opendir`/`readdir`, `statvfs`/`statfs`, `unlink` and `remove` on `weft:`
//! names and on a local directory.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use weft_testkit::{command_dying_with_parent, Cluster, ClusterOptions};

/// Spans several strips of the default layout, and not a whole number of them.
const SIZE: usize = (3 << 20) + 12_345;

fn pattern(i: usize) -> u8 {
    ((i * 7 + 3) & 0xff) as u8
}

/// Runs `binary args` with the library preloaded; 60 s at most.
fn run_preloaded(flavour: Flavour, binary: &Path, args: &[&str], config: &Path) -> (bool, String, String) {
    let logs = tempfile::tempdir().expect("log dir");
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    let mut child = command_dying_with_parent(binary)
        .args(args)
        .env("LD_PRELOAD", library(flavour))
        .env("WEFT_CONFIG", config)
        .env_remove("WEFT_POSIX_SNAPSHOT_MAX")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn probe");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait probe") {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(60) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.is_some_and(|s| s.success()), stdout, stderr)
}

fn posix_probe(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let client = cluster.client();
    let file = client.create("/probe", weft_client::CreateOptions::default()).expect("create /probe");
    let bytes: Vec<u8> = (0..SIZE).map(pattern).collect();
    client.write_at(&file, 0, &bytes).expect("write /probe");
    let binary = program(flavour, "posix_probe");
    let local = tempfile::tempdir().expect("local dir");
    let size = SIZE.to_string();
    let args = ["weft:/probe", &size, "weft:/probe.missing", local.path().to_str().expect("utf-8"), "weft:/probe.new"];
    let (ok, stdout, stderr) = run_preloaded(flavour, &binary, &args, &cluster.config_path);
    assert!(ok && stdout.contains("posix_probe OK"), "{}: {stdout}{stderr}", flavour.name());
    assert_eq!(stderr.matches("snapshot limit").count(), 1, "the EFBIG message must be printed once:\n{stderr}");
    assert_eq!(weft_file_bytes(&cluster, "/probe"), bytes[..SIZE / 2], "truncate() through the interposer");
    assert!(client.stat("/probe.missing").is_err(), "a refused open created the file");
    assert_eq!(weft_file_bytes(&cluster, "/probe.new"), b"abcabc", "read-write opens: the file's final bytes");
    assert_eq!(client.stat("/probe.new").expect("stat /probe.new").mode & 0o777, 0o640, "O_CREAT's mode");
    assert_eq!(std::fs::read(local.path().join("local.bin")).expect("local file").len(), 600, "local truncate");
}

#[test]
fn openmpi_posix_probe() {
    posix_probe(Flavour::OpenMpi);
}

#[test]
fn mpich_posix_probe() {
    posix_probe(Flavour::Mpich);
}

/// `tests/c/posix_names.c`: `mkdir`, `stat`/`lstat`, `fopen` for reading,
/// `rename`, `opendir`/`readdir`, `statvfs`/`statfs`, `unlink` and `remove`
/// on `weft:` names (issue 23 item 3, issue 17's statfs), then the same on a
/// local directory, which must reach the local file system.
fn posix_names(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let client = cluster.client();
    let binary = program(flavour, "posix_names");
    let local = tempfile::tempdir().expect("local dir");
    let local_dir = local.path().join("names");
    let args = ["weft:/names", local_dir.to_str().expect("utf-8")];
    let (ok, stdout, stderr) = run_preloaded(flavour, &binary, &args, &cluster.config_path);
    assert!(ok && stdout.contains("posix_names OK"), "{}: {stdout}{stderr}", flavour.name());
    let dir = client.stat("/names").expect("stat /names");
    assert_eq!(dir.kind, weft_proto::message::ObjectKind::Directory, "mkdir made a directory");
    assert_eq!(dir.mode & 0o777, 0o750, "mkdir's mode");
    let names: Vec<String> = client.readdir("/names").expect("readdir /names").into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["keep"], "what is left in /names after rename, unlink and remove");
    assert_eq!(weft_file_bytes(&cluster, "/names/keep"), b"hello", "the renamed file's bytes");
    let local_names: Vec<String> = std::fs::read_dir(&local_dir)
        .expect("the local directory was made locally")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    assert_eq!(local_names, ["keep"], "local names stay local");
    assert!(client.stat(&format!("{}", local_dir.display())).is_err(), "a local name reached Weft");
}

#[test]
fn openmpi_posix_names() {
    posix_names(Flavour::OpenMpi);
}

#[test]
fn mpich_posix_names() {
    posix_names(Flavour::Mpich);
}
