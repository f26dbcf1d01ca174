//! A full disk (issue 21). Two servers keep their storage on one 96 MiB
//! tmpfs. Before the metadata reserve, filling it made every later
//! namespace change fail with EIO until a restart ("metadata commit failed;
//! refusing further namespace changes"), a restart then failed in the
//! store's recovery, and removed files did not give their space back.
//!
//! Here the disk is filled through the client until a write answers
//! `NoSpace`, then: removal works and the space comes back, small creates
//! work again, every surviving file reads back byte for byte, fsck is
//! clean, statfs counts the shared disk once — over several fill/free
//! cycles, one of them with kill -9 and restart of both servers while the
//! disk is full, and a metadata fill (empty files until `NoSpace`).
//!
//! Needs root (it mounts a tmpfs); the mount is undone also on failure.
//! `WEFT_FULL_DISK_CYCLES=N` runs N fill/free cycles instead of 3 (every
//! second one with kill -9 and restart), for the reliability figures in
//! BENCHMARKS.md.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use weft_client::{BlockingClient, CreateOptions, ErrorCode, File};
use weft_testkit::{Cluster, ClusterOptions, Tmpfs};

const DISK_BYTES: u64 = 96 << 20;
const FILE_BYTES: u64 = 8 << 20;
const CHUNK_BYTES: u64 = 1 << 20;

fn content(seed: u64, offset: u64, length: usize) -> Vec<u8> {
    (0..length as u64).map(|k| ((offset + k) * 31 + seed * 17).wrapping_mul(2654435761) as u8).collect()
}

fn small_reserve(config: &mut weft_config::Config) {
    config.durability.metadata_reserve_bytes = 8 << 20;
}

fn start(disk: &Path) -> Cluster {
    Cluster::start(ClusterOptions {
        servers: 2,
        tune: Some(small_reserve),
        storage_root: Some(disk.to_path_buf()),
        ..Default::default()
    })
}

/// Writes `FILE_BYTES` of `seed`'s content in chunks; returns the bytes
/// acknowledged and the error that stopped it, if any.
fn write_file(c: &BlockingClient, file: &File, seed: u64) -> (u64, Option<ErrorCode>) {
    let mut done = 0;
    while done < FILE_BYTES {
        if let Err(code) = c.write_at(file, done, &content(seed, done, CHUNK_BYTES as usize)) {
            return (done, Some(code));
        }
        done += CHUNK_BYTES;
    }
    (done, None)
}

/// Creates and writes files `/fill/f{seed}` until one answers an error,
/// which must be `NoSpace`. Returns the seeds of the complete files; the
/// partial file (its acknowledged bytes checked) is left for the caller.
fn fill(c: &BlockingClient, first_seed: u64) -> (Vec<u64>, Option<String>) {
    let mut complete = Vec::new();
    for seed in first_seed..first_seed + 2 * DISK_BYTES / FILE_BYTES {
        let path = format!("/fill/f{seed}");
        let file = match c.create(&path, CreateOptions::default()) {
            Ok(file) => file,
            Err(code) => {
                assert_eq!(code, ErrorCode::NoSpace, "create on a full disk");
                return (complete, None);
            }
        };
        match write_file(c, &file, seed) {
            (_, None) => complete.push(seed),
            (written, Some(code)) => {
                assert_eq!(code, ErrorCode::NoSpace, "the writer of a full disk gets ENOSPC");
                // What was acknowledged reads back; the size covers it and
                // at most the refused call. The client takes back a stored
                // part's growth (a_call_refused_on_one_of_two_servers_...
                // asserts the exact size), but in these fill cycles a stat
                // can still report up to one call more now and then (seen
                // in about one run in three; not yet explained: the issue
                // 21 note says where it stands).
                check_prefix(c, &path, seed, written);
                let size = c.stat(&path).expect("stat the partial file").size;
                assert!(
                    size >= written && size <= written + CHUNK_BYTES,
                    "{path}: size {size}, acknowledged {written}"
                );
                return (complete, Some(path));
            }
        }
    }
    panic!("the disk never filled: {} files written", complete.len());
}

fn check_prefix(c: &BlockingClient, path: &str, seed: u64, length: u64) {
    let file = c.open(path, 4).expect("open");
    let mut back = vec![0u8; length as usize];
    assert_eq!(c.read_at(&file, 0, &mut back).expect("read"), length as usize, "{path}");
    assert!(back == content(seed, 0, length as usize), "{path}: bytes changed");
}

fn check_files(c: &BlockingClient, seeds: &[u64]) {
    for seed in seeds {
        check_prefix(c, &format!("/fill/f{seed}"), *seed, FILE_BYTES);
    }
}

/// Removes `seeds`' files from the full disk and waits until statfs shows
/// most of what they held free (reclaim is asynchronous; bounded wait).
/// statfs measures the answering server's disk at the request, so a row
/// from before the fill cannot pass for freed space (it once did: the fill
/// and the removal fit in one status period, and the new file then got
/// `NoSpace` because the reclaim had not run yet).
fn remove_and_wait_for_space(cluster: &Cluster, c: &BlockingClient, seeds: &[u64]) {
    for seed in seeds {
        c.unlink(&format!("/fill/f{seed}")).expect("remove on a full disk");
    }
    let wanted = seeds.len() as u64 * FILE_BYTES * 3 / 4;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let free = c.statfs().expect("statfs").bytes_free;
        if free >= wanted {
            return;
        }
        if Instant::now() > deadline {
            let rows = c.statfs().expect("statfs").servers;
            panic!(
                "removed files did not give their space back: free {free}, wanted {wanted}\n{rows:?}\n{}",
                notable(cluster)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Asserts fsck is clean (and exits 0, checked by the testkit).
fn fsck_problems(cluster: &Cluster) -> u64 {
    let report = weft_testkit::fsck(cluster, false);
    assert_eq!(report.problems, 0, "fsck: {}", report.stdout);
    report.problems
}

/// Runs `weft ARGS --config CFG`; returns success and stdout + stderr.
fn weft(cluster: &Cluster, args: &[&str]) -> (bool, String) {
    let output = Command::new(weft_testkit::weft_bin())
        .args(args)
        .arg("--config")
        .arg(&cluster.config_path)
        .output()
        .expect("run weft");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Through the CLI on the full disk: `weft cp` fails with ENOSPC, `weft rm`
/// of what it left works, `weft statfs` counts the shared disk once.
fn check_cli_on_full_disk(cluster: &Cluster, c: &BlockingClient, disk: &Tmpfs) {
    // More than the disk has left after the partial file of the fill was removed.
    let local = tempfile::NamedTempFile::new().expect("local file");
    std::fs::write(local.path(), content(7, 0, 24 * CHUNK_BYTES as usize)).expect("write local file");
    let source = local.path().to_str().expect("utf-8 path");
    let (copied, text) = weft(cluster, &["cp", source, "weft:/fill/cli-copy"]);
    assert!(!copied, "cp onto a full disk succeeded: {text}");
    assert!(text.to_lowercase().contains("no space left on device"), "cp on a full disk: {text}");
    if c.stat("/fill/cli-copy").is_ok() {
        let (removed, text) = weft(cluster, &["rm", "weft:/fill/cli-copy"]);
        assert!(removed, "rm on a full disk: {text}");
    }
    let (listed, text) = weft(cluster, &["statfs"]);
    assert!(listed, "statfs: {text}");
    let total: u64 = text
        .lines()
        .find(|line| line.trim_start().starts_with("total"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|field| field.parse().ok())
        .unwrap_or_else(|| panic!("no total in statfs output: {text}"));
    let (disk_total, _) = disk.space();
    assert_eq!(total, disk_total, "one disk under two servers counts once: {text}");
}

/// After freeing space: small namespace changes and a new file work.
fn check_usable(c: &BlockingClient, cycle: u64) {
    c.mkdir(&format!("/small{cycle}"), 0o755).expect("mkdir after removal");
    let file = c.create(&format!("/small{cycle}/tiny"), CreateOptions::default()).expect("create after removal");
    c.write_at(&file, 0, b"hello!").expect("small write after removal");
    let file = c.create(&format!("/fill/new{cycle}"), CreateOptions::default()).expect("create");
    assert_eq!(write_file(c, &file, 1000 + cycle), (FILE_BYTES, None), "a new file fits after removal");
    c.unlink(&format!("/fill/new{cycle}")).expect("remove the new file");
}

#[test]
fn a_full_disk_answers_enospc_frees_space_on_remove_and_survives_kill_9() {
    let disk = Tmpfs::mount(DISK_BYTES);
    let mut cluster = start(&disk.path);
    let c = cluster.client();

    // One disk under both servers: statfs counts it once.
    let status = c.statfs().unwrap();
    assert_eq!(status.servers.len(), 2);
    assert_eq!(status.servers[0].storage_device, status.servers[1].storage_device);
    assert_eq!(status.bytes_total, status.servers[0].bytes_total);
    assert!(status.bytes_total <= DISK_BYTES, "{status:?}");

    c.mkdir("/fill", 0o755).unwrap();
    let mut kept: Vec<u64> = Vec::new();
    let mut next_seed = 0;
    let cycles: u64 = std::env::var("WEFT_FULL_DISK_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let mut restarts = 0;
    for cycle in 0..cycles {
        let (filled, partial) = fill(&c, next_seed);
        next_seed += 2 * DISK_BYTES / FILE_BYTES;
        if let Some(partial) = partial {
            c.unlink(&partial).expect("remove the partial file on a full disk");
        }
        assert!(!filled.is_empty() || !kept.is_empty(), "cycle {cycle}: nothing fitted");
        eprintln!("cycle {cycle}: {} files of {FILE_BYTES} bytes filled the disk", filled.len());
        kept.extend(&filled);
        // Full: removal, rename, setattr and truncate still commit.
        let first = kept[0];
        c.chmod(&format!("/fill/f{first}"), 0o600).expect("setattr on a full disk");
        c.rename(&format!("/fill/f{first}"), &format!("/fill/g{first}")).expect("rename on a full disk");
        c.rename(&format!("/fill/g{first}"), &format!("/fill/f{first}")).expect("rename back");
        if cycle == 0 {
            check_cli_on_full_disk(&cluster, &c, &disk);
        }
        if cycle % 2 == 1 {
            // kill -9 of both servers while the disk is full, then restart.
            cluster.kill(0);
            cluster.kill(1);
            cluster.restart(0);
            cluster.restart(1);
            restarts += 1;
        }
        check_files(&c, &kept);
        // Free two files (the oldest), plus everything but three files.
        let remove: Vec<u64> = kept.drain(..kept.len().saturating_sub(3).max(2).min(kept.len())).collect();
        remove_and_wait_for_space(&cluster, &c, &remove);
        check_usable(&c, cycle);
        check_files(&c, &kept);
        fsck_problems(&cluster);
    }
    eprintln!("{cycles} fill/free cycles, {restarts} of them with kill -9 of both servers on the full disk: no EIO");

    // A metadata fill: empty files until the disk is full.
    c.mkdir("/many", 0o755).unwrap();
    let (filled, partial) = fill(&c, next_seed);
    kept.extend(&filled);
    let mut created = 0;
    let refused = loop {
        match c.create(&format!("/many/e{created}"), CreateOptions::default()) {
            Ok(_) => created += 1,
            Err(code) => break code,
        }
        assert!(created < 200_000, "creates never ran out of space");
    };
    assert_eq!(refused, ErrorCode::NoSpace, "after {created} creates");
    eprintln!("metadata fill: {} files of data, then {created} empty files until NoSpace", filled.len());
    for i in (0..created).rev() {
        c.unlink(&format!("/many/e{i}")).expect("remove an empty file on a full disk");
    }
    c.rmdir("/many").expect("rmdir on a full disk");
    if let Some(partial) = partial {
        c.unlink(&partial).expect("remove the partial file on a full disk");
    }
    let remove: Vec<u64> = std::mem::take(&mut kept);
    remove_and_wait_for_space(&cluster, &c, &remove);
    check_usable(&c, 99);
    fsck_problems(&cluster);
    eprintln!("server log lines of note:\n{}", notable(&cluster));
}

/// The servers' warnings and errors, and their recoveries.
fn notable(cluster: &Cluster) -> String {
    let logs = cluster.logs();
    let lines = logs.lines().filter(|line| {
        line.starts_with("---") || line.contains("WARN") || line.contains("ERROR") || line.contains("recovered")
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// A write that hits ENOSPC (issue 21, item 2). A file of one stripe is
/// written in 1 MiB calls until one answers `NoSpace`: the file keeps every
/// acknowledged byte and its size is exactly what was acknowledged. Then,
/// with about 2 MiB free again, a 4 MiB call is refused whole (it used to
/// store its first chunks, growing the file past what was acknowledged)
/// and a 1 MiB call fits.
#[test]
fn a_write_that_hits_enospc_keeps_what_it_acknowledged() {
    let disk = Tmpfs::mount(48 << 20);
    let cluster = start(&disk.path);
    let c = cluster.client();
    let one_stripe = || CreateOptions { stripe_count: Some(1), ..Default::default() };
    let spare = c.create("/spare", one_stripe()).expect("create");
    c.write_at(&spare, 0, &content(9, 0, 2 * CHUNK_BYTES as usize)).expect("write the spare file");
    let file = c.create("/one", one_stripe()).expect("create");
    let mut written = 0u64;
    let refused = loop {
        match c.write_at(&file, written, &content(5, written, CHUNK_BYTES as usize)) {
            Ok(()) => written += CHUNK_BYTES,
            Err(code) => break code,
        }
        assert!(written < 48 << 20, "the disk never filled");
    };
    assert_eq!(refused, ErrorCode::NoSpace);
    assert!(written >= 8 * CHUNK_BYTES, "only {written} bytes fitted");
    assert_eq!(c.stat("/one").expect("stat").size, written, "the size is what was acknowledged");
    check_prefix(&c, "/one", 5, written);

    // Free about 2 MiB (the spare file) and wait until statfs shows it.
    c.unlink("/spare").expect("remove on a full disk");
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.statfs().expect("statfs").bytes_free < 2 * CHUNK_BYTES {
        assert!(Instant::now() < deadline, "the spare file's space never came back\n{}", notable(&cluster));
        std::thread::sleep(Duration::from_millis(50));
    }
    let big = content(5, written, 4 * CHUNK_BYTES as usize);
    assert_eq!(c.write_at(&file, written, &big), Err(ErrorCode::NoSpace), "a call larger than the free space");
    assert_eq!(c.stat("/one").expect("stat").size, written, "a refused call leaves the size alone");
    c.write_at(&file, written, &big[..CHUNK_BYTES as usize]).expect("a call that fits");
    written += CHUNK_BYTES;
    assert_eq!(c.stat("/one").expect("stat").size, written);
    check_prefix(&c, "/one", 5, written);
    fsck_problems(&cluster);
}

/// A call spread over two servers that fails on one of them (issue 21,
/// item 2). A file with 4 MiB strips over two datafiles holds 4 MiB - 64
/// KiB, all on the first. With the disk full but for 1-2 MiB, a call
/// appending 64 KiB + 3 MiB puts 64 KiB on the first datafile (admitted)
/// and 3 MiB on the second (refused whole): the call answers `NoSpace`, the
/// first server's part, stored past the old end, is taken back, so the
/// size is still 4 MiB - 64 KiB and every old byte reads back.
#[test]
fn a_call_refused_on_one_of_two_servers_leaves_the_size_acknowledged() {
    let disk = Tmpfs::mount(48 << 20);
    let cluster = start(&disk.path);
    let c = cluster.client();
    let strip = 4u64 << 20;
    let two = CreateOptions { stripe_count: Some(2), strip_bytes: Some(strip), ..Default::default() };
    let file = c.create("/two", two).expect("create");
    let old_size = strip - (64 << 10);
    c.write_at(&file, 0, &content(3, 0, old_size as usize)).expect("write the first datafile's part");
    let one_stripe = || CreateOptions { stripe_count: Some(1), ..Default::default() };
    let spare = c.create("/spare", one_stripe()).expect("create");
    c.write_at(&spare, 0, &content(9, 0, CHUNK_BYTES as usize)).expect("write the spare file");
    // Fill the rest in 1 MiB calls: less than 1 MiB stays admissible.
    let filler = c.create("/filler", one_stripe()).expect("create");
    let mut filled = 0u64;
    while c.write_at(&filler, filled, &content(4, filled, CHUNK_BYTES as usize)).is_ok() {
        filled += CHUNK_BYTES;
        assert!(filled < 48 << 20, "the disk never filled");
    }
    // Free the spare 1 MiB: between 1 and 2 MiB admissible.
    c.unlink("/spare").expect("remove on a full disk");
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.statfs().expect("statfs").bytes_free < CHUNK_BYTES {
        assert!(Instant::now() < deadline, "the spare file's space never came back\n{}", notable(&cluster));
        std::thread::sleep(Duration::from_millis(50));
    }
    let call = content(3, old_size, (64 << 10) + 3 * CHUNK_BYTES as usize);
    assert_eq!(c.write_at(&file, old_size, &call), Err(ErrorCode::NoSpace), "the second server refuses its part");
    assert_eq!(c.stat("/two").expect("stat").size, old_size, "the size is what was acknowledged");
    check_prefix(&c, "/two", 3, old_size);
    // The first server did store its part (and gave the growth back): the
    // file's first datafile ends where it did.
    let mut past = vec![0u8; 64 << 10];
    assert_eq!(c.read_at(&file, old_size, &mut past).expect("read past the end"), 0);
    // And after freeing the filler the same call succeeds whole.
    c.unlink("/filler").expect("remove the filler");
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.statfs().expect("statfs").bytes_free < 8 * CHUNK_BYTES {
        assert!(Instant::now() < deadline, "the filler's space never came back\n{}", notable(&cluster));
        std::thread::sleep(Duration::from_millis(50));
    }
    c.write_at(&file, old_size, &call).expect("the call fits now");
    assert_eq!(c.stat("/two").expect("stat").size, old_size + call.len() as u64);
    check_prefix(&c, "/two", 3, old_size + call.len() as u64);
    fsck_problems(&cluster);
}
