//! The C API's error handling, called directly from Rust: NULL pointers,
//! invalid UTF-8, bad and wrong-kind handles, bad flags and offsets, and
//! the conventions of `weft.h` (return values, `*out` on failure,
//! `weft:` prefixes, snprintf-style readlink, paged readdir).

use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};

use weft::*;
use weft_testkit::{Cluster, ClusterOptions};

const EINVAL: i32 = -libc::EINVAL;
const EBADF: i32 = -libc::EBADF;

/// A path that is not UTF-8.
const NOT_UTF8: &CStr = c"/bad-\xff-name";

fn forged<T>() -> *mut T {
    0xdead_0000usize as *mut T
}

fn connect(cluster: &Cluster) -> *mut weft_fs_t {
    let path = std::ffi::CString::new(cluster.config_path.to_str().unwrap()).unwrap();
    let mut fs = null_mut();
    // SAFETY: valid string and out pointer.
    assert_eq!(unsafe { weft_connect(path.as_ptr(), &mut fs) }, 0);
    assert!(!fs.is_null());
    fs
}

fn open(fs: *mut weft_fs_t, path: &CStr, flags: i32) -> Result<*mut weft_file_t, i32> {
    let mut file = null_mut();
    // SAFETY: valid string and out pointer.
    match unsafe { weft_open(fs, path.as_ptr(), flags, 0o644, &mut file) } {
        0 => Ok(file),
        err => {
            assert!(file.is_null(), "failed open must leave *out NULL");
            Err(err)
        }
    }
}

#[test]
fn handles_are_checked_without_a_cluster() {
    let mut stat = weft_stat::default();
    let mut byte = 0u8;
    // SAFETY: every pointer is NULL, forged (never dereferenced by the
    // library) or valid.
    unsafe {
        assert_eq!(weft_close(null_mut()), EINVAL);
        assert_eq!(weft_close(forged()), EBADF);
        assert_eq!(weft_closedir(forged()), EBADF);
        assert_eq!(weft_disconnect(forged()), EBADF);
        assert_eq!(weft_fsync(forged()), EBADF);
        assert_eq!(weft_fstat(forged(), &mut stat), EBADF);
        assert_eq!(weft_pread(forged(), (&mut byte as *mut u8).cast(), 1, 0), EBADF as isize);
        assert_eq!(weft_pwrite(null_mut(), (&byte as *const u8).cast(), 1, 0), EINVAL as isize);
        assert_eq!(weft_mkdir(forged(), c"/x".as_ptr(), 0o755), EBADF);
        assert_eq!(weft_statfs(null_mut(), null_mut()), EINVAL);
        assert_eq!(weft_readdir(forged(), null_mut()), EBADF);
    }
}

#[test]
fn connect_reports_config_errors() {
    let dir = std::env::temp_dir().join(format!("weft-capi-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.toml");
    std::fs::write(&garbage, "this is [not a weft config").unwrap();
    let garbage = std::ffi::CString::new(garbage.to_str().unwrap()).unwrap();
    let mut fs: *mut weft_fs_t = forged();
    // SAFETY: valid strings and out pointers (or NULL).
    unsafe {
        assert_eq!(weft_connect(c"/nonexistent/weft.toml".as_ptr(), &mut fs), -libc::ENOENT);
        assert!(fs.is_null(), "failed connect must leave *out NULL");
        assert_eq!(weft_connect(garbage.as_ptr(), &mut fs), EINVAL);
        assert_eq!(weft_connect(NOT_UTF8.as_ptr(), &mut fs), EINVAL);
        assert_eq!(weft_connect(c"/nonexistent".as_ptr(), null_mut()), EINVAL);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn strerror_accepts_either_sign() {
    // SAFETY: weft_strerror returns a static NUL-terminated string for any value.
    let text = |err| unsafe { CStr::from_ptr(weft_strerror(err)) }.to_str().unwrap().to_string();
    assert_eq!(text(-libc::ENOENT), "no such file or directory");
    assert_eq!(text(libc::ENOTEMPTY), "directory not empty");
    assert_eq!(text(i32::MIN), "unknown error");
    assert_eq!(text(12345), "unknown error");
}

/// Argument checks that need a live connection.
fn check_arguments(fs: *mut weft_fs_t) {
    let mut stat = weft_stat::default();
    // SAFETY: NULL, forged or valid pointers; strings are NUL-terminated.
    unsafe {
        assert_eq!(weft_mkdir(fs, null(), 0o755), EINVAL);
        assert_eq!(weft_mkdir(fs, NOT_UTF8.as_ptr(), 0o755), EINVAL);
        assert_eq!(weft_stat(fs, c"/".as_ptr(), null_mut()), EINVAL);
        let misaligned = (&mut stat as *mut weft_stat).cast::<u8>().add(1).cast::<weft_stat>();
        assert_eq!(weft_stat(fs, c"/".as_ptr(), misaligned), EINVAL);
        assert_eq!(weft_stat(fs, c"/".as_ptr(), &mut stat), 0);
        assert_eq!(stat.mode & libc::S_IFMT, libc::S_IFDIR);
        assert_eq!(weft_rename(fs, c"/a".as_ptr(), null()), EINVAL);
        assert_eq!(weft_symlink(fs, NOT_UTF8.as_ptr(), c"/l".as_ptr()), EINVAL);
        assert_eq!(weft_truncate(fs, c"/f".as_ptr(), -1), EINVAL);
        assert_eq!(weft_close(fs.cast()), EBADF, "a connection is not a file");
    }
    assert_eq!(open(fs, c"/f", libc::O_RDWR | libc::O_DIRECTORY), Err(EINVAL));
    assert_eq!(open(fs, c"/f", libc::O_RDONLY | libc::O_TRUNC | libc::O_CREAT), Err(EINVAL));
    assert_eq!(open(fs, c"/f", libc::O_ACCMODE), Err(EINVAL));
    assert_eq!(open(fs, c"/missing", libc::O_RDONLY), Err(-libc::ENOENT));
    assert_eq!(open(fs, c"/", libc::O_RDONLY), Err(-libc::EISDIR));
}

/// Reads and writes through files opened with different access modes.
fn check_file_io(fs: *mut weft_fs_t) {
    let file = open(fs, c"weft:/io.bin", libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL).unwrap();
    assert_eq!(open(fs, c"/io.bin", libc::O_RDWR | libc::O_CREAT | libc::O_EXCL), Err(-libc::EEXIST));
    let mut buffer = [0u8; 16];
    let data = b"hello";
    // SAFETY: valid buffers of the given lengths, or NULL with length 0 or 1.
    unsafe {
        let read = |file, buffer: &mut [u8], offset| weft_pread(file, buffer.as_mut_ptr().cast(), buffer.len(), offset);
        assert_eq!(weft_pwrite(file, data.as_ptr().cast(), data.len(), 0), 5);
        assert_eq!(weft_pwrite(file, null(), 0, 0), 0, "NULL is fine for an empty write");
        assert_eq!(weft_pwrite(file, null(), 1, 0), EINVAL as isize);
        assert_eq!(weft_pwrite(file, data.as_ptr().cast(), 1, -5), EINVAL as isize);
        assert_eq!(weft_pwrite(file, data.as_ptr().cast(), 1, i64::MAX), -(libc::EFBIG as isize));
        assert_eq!(read(file, &mut buffer, 0), EBADF as isize, "write-only file");
        assert_eq!(weft_close(file), 0);
        assert_eq!(weft_close(file), EBADF);

        let appender = open(fs, c"/io.bin", libc::O_WRONLY | libc::O_APPEND).unwrap();
        assert_eq!(weft_pwrite(appender, b"!!".as_ptr().cast(), 2, 0), 2, "O_APPEND ignores the offset");
        assert_eq!(weft_close(appender), 0);

        let reader = open(fs, c"/io.bin", libc::O_RDONLY).unwrap();
        assert_eq!(read(reader, &mut buffer, 0), 7);
        assert_eq!(&buffer[..7], b"hello!!");
        assert_eq!(weft_pread(reader, null_mut::<c_void>(), 0, 0), 0);
        assert_eq!(weft_pwrite(reader, data.as_ptr().cast(), 1, 0), EBADF as isize, "read-only file");
        assert_eq!(weft_ftruncate(reader, 0), EBADF);
        assert_eq!(weft_closedir(reader.cast()), EBADF, "a file is not a directory stream");
        assert_eq!(weft_close(reader), 0);

        let truncating = open(fs, c"/io.bin", libc::O_RDWR | libc::O_TRUNC).unwrap();
        let mut stat = weft_stat::default();
        assert_eq!(weft_fstat(truncating, &mut stat), 0);
        assert_eq!(stat.size, 0, "O_TRUNC empties the file");
        assert_eq!(weft_close(truncating), 0);
    }
}

/// snprintf-style readlink and a symlink target given with `weft:`.
fn check_readlink(fs: *mut weft_fs_t) {
    let mut small = [0x55 as c_char; 4];
    let mut stat = weft_stat::default();
    // SAFETY: valid strings and buffers of the given sizes.
    unsafe {
        assert_eq!(weft_symlink(fs, c"weft:/io.bin".as_ptr(), c"/link".as_ptr()), 0);
        assert_eq!(weft_readlink(fs, c"/link".as_ptr(), small.as_mut_ptr(), small.len()), 7);
        assert_eq!(CStr::from_ptr(small.as_ptr()), c"/io");
        assert_eq!(weft_readlink(fs, c"/link".as_ptr(), null_mut(), 0), 7);
        assert_eq!(weft_readlink(fs, c"/io.bin".as_ptr(), small.as_mut_ptr(), small.len()), EINVAL as isize);
        assert_eq!(weft_stat(fs, c"/link".as_ptr(), &mut stat), 0);
        assert_eq!(stat.mode & libc::S_IFMT, libc::S_IFREG);
        assert_eq!(weft_lstat(fs, c"/link".as_ptr(), &mut stat), 0);
        assert_eq!(stat.mode & libc::S_IFMT, libc::S_IFLNK);
    }
}

/// A directory larger than one readdir page lists every entry once.
fn check_readdir_pages(fs: *mut weft_fs_t) {
    const ENTRIES: usize = 300;
    // SAFETY: valid strings, out pointers and handles.
    unsafe {
        assert_eq!(weft_mkdir(fs, c"/many".as_ptr(), 0o755), 0);
        for index in 0..ENTRIES {
            let path = std::ffi::CString::new(format!("/many/l{index:03}")).unwrap();
            assert_eq!(weft_symlink(fs, c"/io.bin".as_ptr(), path.as_ptr()), 0);
        }
        let mut dir = null_mut();
        assert_eq!(weft_opendir(fs, c"/io.bin".as_ptr(), &mut dir), -libc::ENOTDIR);
        assert_eq!(weft_opendir(fs, c"weft:/many".as_ptr(), &mut dir), 0);
        let mut names = Vec::new();
        let mut entry = std::mem::zeroed::<weft_dirent>();
        while weft_readdir(dir, &mut entry) == 1 {
            assert_eq!(entry.kind, libc::DT_LNK as u32);
            names.push(CStr::from_ptr(entry.name.as_ptr().cast()).to_str().unwrap().to_string());
        }
        assert_eq!(weft_readdir(dir, &mut entry), 0, "the end stays the end");
        assert_eq!(weft_readdir(dir, null_mut()), EINVAL);
        assert_eq!(weft_closedir(dir), 0);
        assert_eq!(weft_readdir(dir, &mut entry), EBADF);
        names.sort();
        let expected: Vec<String> = (0..ENTRIES).map(|i| format!("l{i:03}")).collect();
        assert_eq!(names, expected);
    }
}

fn check_statfs(fs: *mut weft_fs_t, servers: u32) {
    let mut space = weft_statfs::default();
    let mut each = [weft_server_statfs::default(); 2];
    // SAFETY: valid out pointers of the given capacities, or NULL with 0.
    unsafe {
        assert_eq!(weft_statfs(fs, &mut space), 0);
        assert_eq!(space.server_count, servers);
        assert!(space.bytes_free <= space.bytes_total);
        assert_eq!(weft_statfs_servers(fs, null_mut(), 0), servers as isize);
        assert_eq!(weft_statfs_servers(fs, null_mut(), 1), EINVAL as isize);
        assert_eq!(weft_statfs_servers(fs, each.as_mut_ptr(), each.len()), servers as isize);
        assert_eq!((each[0].server_id, each[1].server_id), (0, 1));
    }
}

#[test]
fn calls_on_a_live_connection() {
    let options = ClusterOptions { servers: 3, ..ClusterOptions::default() };
    let cluster = Cluster::start(options);
    let fs = connect(&cluster);
    check_arguments(fs);
    check_file_io(fs);
    check_readlink(fs);
    check_readdir_pages(fs);
    check_statfs(fs, 3);

    // Files outlive the connection they were opened through.
    let file = open(fs, c"/io.bin", libc::O_RDONLY).unwrap();
    // SAFETY: valid handles; stale ones are answered, not dereferenced.
    unsafe {
        assert_eq!(weft_disconnect(fs), 0);
        assert_eq!(weft_disconnect(fs), EBADF);
        assert_eq!(weft_mkdir(fs, c"/after".as_ptr(), 0o755), EBADF);
        let mut stat = weft_stat::default();
        assert_eq!(weft_fstat(file, &mut stat), 0);
        assert_eq!(weft_close(file), 0);
    }
}
