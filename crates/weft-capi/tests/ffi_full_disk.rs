//! A full disk through the C API (issue 21, item 6): two servers keep
//! their storage on one 64 MiB tmpfs. `weft_pwrite` answers `-ENOSPC`
//! (and `weft_strerror` says so) once the disk is full, with every byte it
//! acknowledged before readable; creating empty files until the disk is
//! full answers `-ENOSPC` too; then `weft_unlink` and `weft_rmdir` work
//! on the full disk, `weft_statfs` counts the shared disk once and shows
//! the space back, and a new file can be written and read.
//!
//! Needs root (it mounts a tmpfs); the mount is undone also on failure.

use std::ffi::{c_void, CStr, CString};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use weft::*;
use weft_testkit::{Cluster, ClusterOptions, Tmpfs};

const DISK_BYTES: u64 = 64 << 20;
const CHUNK: usize = 1 << 20;
const ENOSPC: isize = -(libc::ENOSPC as isize);

fn small_reserve(config: &mut weft_config::Config) {
    config.durability.metadata_reserve_bytes = 8 << 20;
}

fn byte_of(offset: u64) -> u8 {
    (offset.wrapping_mul(2654435761) >> 7) as u8
}

fn chunk_at(offset: u64) -> Vec<u8> {
    (offset..offset + CHUNK as u64).map(byte_of).collect()
}

fn cstring(path: &str) -> CString {
    CString::new(path).expect("no NUL")
}

fn open(fs: *mut weft_fs_t, path: &str, flags: i32) -> Result<*mut weft_file_t, i32> {
    let path = cstring(path);
    let mut file = null_mut();
    // SAFETY: valid string and out pointer.
    match unsafe { weft_open(fs, path.as_ptr(), flags, 0o644, &mut file) } {
        0 => Ok(file),
        err => Err(err),
    }
}

fn close(file: *mut weft_file_t) {
    // SAFETY: a handle from weft_open.
    assert_eq!(unsafe { weft_close(file) }, 0);
}

fn pwrite(file: *mut weft_file_t, data: &[u8], offset: u64) -> isize {
    // SAFETY: a handle from weft_open and a valid buffer.
    unsafe { weft_pwrite(file, data.as_ptr().cast::<c_void>(), data.len(), offset as i64) }
}

fn statfs(fs: *mut weft_fs_t) -> weft_statfs {
    let mut out = weft_statfs::default();
    // SAFETY: a handle from weft_connect and a valid out pointer.
    assert_eq!(unsafe { weft_statfs(fs, &mut out) }, 0);
    out
}

fn unlink(fs: *mut weft_fs_t, path: &str) -> i32 {
    let path = cstring(path);
    // SAFETY: a handle from weft_connect and a valid string.
    unsafe { weft_unlink(fs, path.as_ptr()) }
}

/// Reads `length` bytes at 0 and checks them against the pattern.
fn check_back(fs: *mut weft_fs_t, path: &str, length: u64) {
    let file = open(fs, path, libc::O_RDONLY).expect("open for reading");
    let mut back = vec![0u8; length as usize];
    // SAFETY: a handle from weft_open and a valid buffer.
    let got = unsafe { weft_pread(file, back.as_mut_ptr().cast::<c_void>(), back.len(), 0) };
    assert_eq!(got, length as isize, "{path}");
    assert!(back.iter().enumerate().all(|(i, b)| *b == byte_of(i as u64)), "{path}: bytes changed");
    close(file);
}

#[test]
fn c_api_answers_enospc_on_a_full_disk_and_frees_space_on_unlink() {
    let disk = Tmpfs::mount(DISK_BYTES);
    let cluster = Cluster::start(ClusterOptions {
        servers: 2,
        tune: Some(small_reserve),
        storage_root: Some(disk.path.clone()),
        ..Default::default()
    });
    let config = cstring(cluster.config_path.to_str().expect("utf-8"));
    let mut fs = null_mut();
    // SAFETY: valid string and out pointer.
    assert_eq!(unsafe { weft_connect(config.as_ptr(), &mut fs) }, 0);

    // One disk under two servers counts once.
    let (disk_total, _) = disk.space();
    assert_eq!(statfs(fs).bytes_total, disk_total);

    let dir = cstring("/many");
    // SAFETY: valid handle and string.
    assert_eq!(unsafe { weft_mkdir(fs, dir.as_ptr(), 0o755) }, 0);

    // A data fill: 1 MiB writes until the disk is full.
    let big = open(fs, "/big", libc::O_CREAT | libc::O_WRONLY).expect("create");
    let mut written = 0u64;
    let refused = loop {
        let rc = pwrite(big, &chunk_at(written), written);
        if rc < 0 {
            break rc;
        }
        assert_eq!(rc, CHUNK as isize, "a whole chunk or an error");
        written += CHUNK as u64;
        assert!(written < DISK_BYTES, "the disk never filled");
    };
    assert_eq!(refused, ENOSPC, "the writer of a full disk gets -ENOSPC");
    // SAFETY: weft_strerror never returns NULL.
    let text = unsafe { CStr::from_ptr(weft_strerror(refused as i32)) };
    assert_eq!(text.to_str().unwrap(), "no space left on device");
    assert!(written >= 16 * CHUNK as u64, "only {written} bytes fitted");
    let mut stat = weft_stat::default();
    // SAFETY: a handle from weft_open and a valid out pointer.
    assert_eq!(unsafe { weft_fstat(big, &mut stat) }, 0);
    assert!(stat.size >= written && stat.size <= written + CHUNK as u64, "size {} after {written}", stat.size);
    close(big);
    check_back(fs, "/big", written);

    // A metadata fill: empty files until the disk is full.
    let mut created = 0;
    let refused = loop {
        match open(fs, &format!("/many/e{created}"), libc::O_CREAT | libc::O_WRONLY) {
            Ok(file) => {
                close(file);
                created += 1;
            }
            Err(err) => break err,
        }
        assert!(created < 200_000, "creates never ran out of space");
    };
    assert_eq!(refused, -libc::ENOSPC, "create on a full disk, after {created} creates");

    // Removal works on the full disk, and the space comes back.
    for i in 0..created {
        assert_eq!(unlink(fs, &format!("/many/e{i}")), 0, "unlink on a full disk");
    }
    // SAFETY: valid handle and string.
    assert_eq!(unsafe { weft_rmdir(fs, dir.as_ptr()) }, 0, "rmdir on a full disk");
    assert_eq!(unlink(fs, "/big"), 0, "unlink on a full disk");
    let deadline = Instant::now() + Duration::from_secs(10);
    while statfs(fs).bytes_free < written * 3 / 4 {
        assert!(Instant::now() < deadline, "unlinked space never came back: {:?}", statfs(fs).bytes_free);
        std::thread::sleep(Duration::from_millis(50));
    }

    // A new file fits and reads back.
    let after = open(fs, "/after", libc::O_CREAT | libc::O_WRONLY).expect("create after unlink");
    for k in 0..8u64 {
        assert_eq!(pwrite(after, &chunk_at(k * CHUNK as u64), k * CHUNK as u64), CHUNK as isize);
    }
    close(after);
    check_back(fs, "/after", 8 * CHUNK as u64);
    // SAFETY: a handle from weft_connect.
    assert_eq!(unsafe { weft_disconnect(fs) }, 0);
}
