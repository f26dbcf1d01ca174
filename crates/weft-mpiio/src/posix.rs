//! The Rust half of the POSIX interposition on `weft:` names (`c/posix.c`).
//!
//! Libraries built on MPI-IO also touch their files through plain POSIX
//! calls: PnetCDF's rank 0 sniffs the format with `open()` + `read()`, checks
//! existence with `access()` and clobbers with `truncate()`, all on the name
//! it was given (it strips only ROMIO's own prefixes). `c/posix.c` catches
//! these calls on names beginning with `weft:` (everything else goes to libc
//! untouched) and calls the functions here with the name after the prefix.
//! HDF5 asks `lstat()` of the name before it opens a file (to resolve
//! symbolic links); `stat()` and `lstat()` are served here too.
//!
//! Every function returns 0 or a positive `errno` value (never an MPI class:
//! POSIX callers get POSIX errors), and runs under `catch_unwind` (a panic
//! becomes `EIO`). A process without a usable `WEFT_CONFIG` gets `EIO`.

use std::ffi::{c_char, c_int, CStr};
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};

use weft_client::BlockingClient;
use weft_proto::ErrorCode;

use crate::runtime::client;

/// Bytes read from Weft per request while filling a snapshot.
const CHUNK_BYTES: u64 = 4 << 20;

pub(crate) type Errno = c_int;

pub(crate) fn errno_of(code: ErrorCode) -> Errno {
    code.errno()
}

/// Runs `body`, mapping a panic to `EIO`.
pub(crate) fn guarded(body: impl FnOnce() -> Result<(), Errno>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(errno)) => errno,
        Err(_) => libc::EIO,
    }
}

/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn path_arg<'a>(ptr: *const c_char) -> Result<&'a str, Errno> {
    if ptr.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(ptr) }.to_str().map_err(|_| libc::ENOENT)
}

pub(crate) fn weft() -> Result<&'static BlockingClient, Errno> {
    client().map_err(|_| libc::EIO)
}

/// Copies the whole file `path` into the file descriptor `fd` (a fresh
/// memfd of the caller), at most `cap` bytes: a larger file is `EFBIG`
/// without copying, unless `prefix_ok != 0`, when its first `cap` bytes are
/// copied (for format probes that read only a signature). Stores the
/// file's size (also when it is too large).
///
/// # Safety
/// `path` is a C string, `fd` an open descriptor the caller owns (it stays
/// open), `size` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_snapshot(
    path: *const c_char,
    fd: c_int,
    cap: u64,
    prefix_ok: c_int,
    size: *mut u64,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let client = weft()?;
        let file = client.open(path, weft_client::access::READ).map_err(errno_of)?;
        let total = client.file_size(&file).map_err(errno_of)?;
        if !size.is_null() {
            // SAFETY: non-NULL and writable per this function's contract.
            unsafe { size.write(total) };
        }
        if total > cap && prefix_ok == 0 {
            return Err(libc::EFBIG);
        }
        let total = total.min(cap);
        // SAFETY: the caller owns `fd` and keeps it open; ManuallyDrop never closes it.
        let mut out = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        read_chunks(client, &file, total, |bytes| write_fd(&mut out, bytes))
    })
}

/// Writes all of `bytes` to `out`, as an errno.
pub(crate) fn write_fd(out: &mut std::fs::File, bytes: &[u8]) -> Result<(), Errno> {
    out.write_all(bytes).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// Reads the first `total` bytes of `file` in chunks of [`CHUNK_BYTES`],
/// handing each to `sink`; stops early if the file is shorter (it shrank
/// meanwhile).
pub(crate) fn read_chunks(
    client: &BlockingClient,
    file: &weft_client::File,
    total: u64,
    mut sink: impl FnMut(&[u8]) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut buffer = vec![0u8; total.min(CHUNK_BYTES) as usize];
    let mut offset = 0u64;
    while offset < total {
        let want = (total - offset).min(CHUNK_BYTES) as usize;
        let got = client.read_at(file, offset, &mut buffer[..want]).map_err(errno_of)?;
        if got == 0 {
            break;
        }
        sink(&buffer[..got])?;
        offset += got as u64;
    }
    Ok(())
}

/// `access(2)` on a Weft name: `ENOENT` if it does not exist; `R_OK`/`W_OK`
/// /`X_OK` are checked against the permission bits (any of owner, group,
/// other), not the caller's identity.
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_access(path: *const c_char, mode: c_int) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let stat = weft()?.stat(path).map_err(errno_of)?;
        let wanted = [(libc::R_OK, 0o444), (libc::W_OK, 0o222), (libc::X_OK, 0o111)];
        if wanted.iter().any(|(bit, bits)| mode & bit != 0 && stat.mode & bits == 0) {
            return Err(libc::EACCES);
        }
        Ok(())
    })
}

/// Attributes of a Weft object for `stat(2)` (filled by [`weft_mpiio_posix_stat`]).
#[repr(C)]
pub struct PosixStat {
    /// File type (`S_IFREG`, `S_IFDIR`, `S_IFLNK`) and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes (files), target length (symlinks), entries (directories).
    pub size: u64,
    /// The object's handle, as an inode number.
    pub ino: u64,
    /// Access, modification and change times (ns since the epoch).
    pub atime_ns: i64,
    /// See `atime_ns`.
    pub mtime_ns: i64,
    /// See `atime_ns`.
    pub ctime_ns: i64,
}

/// `stat(2)` (`follow != 0`) or `lstat(2)` on a Weft name.
///
/// # Safety
/// `path` is a C string, `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_stat(path: *const c_char, follow: c_int, out: *mut PosixStat) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        if out.is_null() {
            return Err(libc::EFAULT);
        }
        let client = weft()?;
        let stat = if follow != 0 { client.stat(path) } else { client.lstat(path) }.map_err(errno_of)?;
        let kind = weft_client::unix::type_bits(stat.kind);
        let posix = PosixStat {
            mode: kind | (stat.mode & 0o7777),
            uid: stat.uid,
            gid: stat.gid,
            size: stat.size,
            ino: stat.handle.0,
            atime_ns: stat.atime_ns,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
        };
        // SAFETY: non-NULL and writable per this function's contract.
        unsafe { out.write(posix) };
        Ok(())
    })
}

/// `truncate(2)` on a Weft name: sets the file's size.
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_truncate(path: *const c_char, size: i64) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let size = u64::try_from(size).map_err(|_| libc::EINVAL)?;
        weft()?.truncate(path, size).map_err(errno_of)
    })
}

/// `unlink(2)` on a Weft name: removes the file.
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_unlink(path: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        weft()?.unlink(path).map_err(errno_of)
    })
}

/// `rename(2)` between two Weft names.
///
/// # Safety
/// `from` and `to` are C strings.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_rename(from: *const c_char, to: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let (from, to) = unsafe { (path_arg(from)?, path_arg(to)?) };
        weft()?.rename(from, to).map_err(errno_of)
    })
}

/// `mkdir(2)` on a Weft name (`mode` as given, no umask).
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_mkdir(path: *const c_char, mode: u32) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        weft()?.mkdir(path, mode & 0o7777).map(|_| ()).map_err(errno_of)
    })
}

/// `rmdir(2)` on a Weft name (for `remove(3)` of a directory).
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_rmdir(path: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        weft()?.rmdir(path).map_err(errno_of)
    })
}

/// Space of the whole file system for `statvfs(3)`/`statfs(2)` (filled by
/// [`weft_mpiio_posix_statfs`]).
#[repr(C)]
pub struct PosixStatfs {
    /// Total bytes, each storage device once.
    pub bytes_total: u64,
    /// Free bytes, each storage device once.
    pub bytes_free: u64,
    /// Stored objects.
    pub objects: u64,
}

/// `statvfs(3)`/`statfs(2)` on a Weft name: the name must exist; the
/// figures are the file system's (`weft statfs`).
///
/// # Safety
/// `path` is a C string, `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_statfs(path: *const c_char, out: *mut PosixStatfs) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        if out.is_null() {
            return Err(libc::EFAULT);
        }
        let client = weft()?;
        client.stat(path).map_err(errno_of)?;
        let status = client.statfs().map_err(errno_of)?;
        let figures =
            PosixStatfs { bytes_total: status.bytes_total, bytes_free: status.bytes_free, objects: status.objects };
        // SAFETY: non-NULL and writable per this function's contract.
        unsafe { out.write(figures) };
        Ok(())
    })
}

/// The entries of the Weft directory `path` for `opendir(3)`, packed into
/// `buf` (`cap` bytes): per entry its `d_type` byte, its handle (8 bytes,
/// native order), its name and a NUL; `.` and `..` are not included.
/// `*used` gets the packed length; `ERANGE` (with `*used` the length
/// needed) if it does not fit; `ENOTDIR` for a file.
///
/// # Safety
/// `path` is a C string, `buf` writable for `cap` bytes (or NULL with
/// `cap == 0`), `used` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_readdir(
    path: *const c_char,
    buf: *mut u8,
    cap: usize,
    used: *mut usize,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        if used.is_null() || (buf.is_null() && cap != 0) {
            return Err(libc::EFAULT);
        }
        let entries = weft()?.readdir(path).map_err(errno_of)?;
        let mut packed = Vec::new();
        for entry in &entries {
            packed.push(weft_client::unix::dirent_type(entry.kind));
            packed.extend_from_slice(&entry.handle.0.to_ne_bytes());
            packed.extend_from_slice(entry.name.as_bytes());
            packed.push(0);
        }
        // SAFETY: non-NULL and writable per this function's contract.
        unsafe { used.write(packed.len()) };
        if packed.len() > cap {
            return Err(libc::ERANGE);
        }
        // SAFETY: `buf` is writable for `cap >= packed.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(packed.as_ptr(), buf, packed.len()) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_paths_are_efault() {
        // SAFETY: NULL is allowed by the contracts.
        unsafe {
            assert_eq!(weft_mpiio_posix_access(std::ptr::null(), 0), libc::EFAULT);
            assert_eq!(weft_mpiio_posix_unlink(std::ptr::null()), libc::EFAULT);
            assert_eq!(weft_mpiio_posix_truncate(std::ptr::null(), 0), libc::EFAULT);
            assert_eq!(weft_mpiio_posix_stat(std::ptr::null(), 1, std::ptr::null_mut()), libc::EFAULT);
            assert_eq!(weft_mpiio_posix_snapshot(std::ptr::null(), -1, 0, 0, std::ptr::null_mut()), libc::EFAULT);
        }
    }

    #[test]
    fn panics_become_eio() {
        assert_eq!(guarded(|| panic!("posix guard test")), libc::EIO);
    }
}
