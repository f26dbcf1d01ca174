//! Serial read-write access to `weft:` names through plain POSIX calls
//! (`c/posix.c`): HDF5's sec2 driver creates or reopens a file on rank 0
//! with `open(O_RDWR|O_CREAT)`, then the job opens it in parallel through
//! MPI-IO, or the other way round.
//!
//! An `open` with write intent gets a descriptor on a private, writable
//! `memfd` holding the Weft file's bytes at open (created first with
//! `O_CREAT`, emptied first with `O_TRUNC`). `read`, `write`, `pread`,
//! `pwrite`, `lseek`, `fstat`, `ftruncate`, `mmap` and `flock` then work on
//! it natively, at memory speed. `fsync`/`fdatasync` and `close` write back
//! to Weft what changed since the last write-back: the file's new size if
//! it changed, then every changed [`COMPARE_BYTES`] block (the bytes Weft
//! had are kept to compare with), so bytes other processes wrote elsewhere
//! in the file meanwhile are not overwritten with stale ones. Coherence is
//! close-to-open, as in NFS: MPI-IO sees the serial writer's bytes once it
//! has synced or closed, and a serial open sees what MPI-IO wrote before it.
//!
//! A file larger than the snapshot limit the read-only path uses
//! (`WEFT_POSIX_SNAPSHOT_MAX`, held in memory twice here) is `EFBIG`.
//! Descriptors are tracked per process by number; a `dup` of one is
//! written back only through the original.

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use weft_client::{BlockingClient, CreateOptions, File};

use crate::posix::{errno_of, guarded, path_arg, read_chunks, weft, write_fd, Errno};

/// Unit of comparison between the descriptor's bytes and Weft's at write-back.
pub const COMPARE_BYTES: usize = 4096;

/// Returned by [`weft_mpiio_posix_writable_sync`] and
/// [`weft_mpiio_posix_writable_release`] for a descriptor that is not one
/// of these (the caller passes the call on to libc).
pub const NOT_WRITABLE: c_int = -1;

/// A descriptor open for writing: its Weft file and the bytes Weft holds
/// as of the last write-back.
struct Writable {
    file: File,
    known: Vec<u8>,
}

static WRITABLE: Mutex<Option<HashMap<c_int, Writable>>> = Mutex::new(None);

fn table() -> std::sync::MutexGuard<'static, Option<HashMap<c_int, Writable>>> {
    WRITABLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Opens the Weft file `path` for writing into `fd` (a fresh, empty memfd
/// of the caller): creates it if `create` (failing with `EEXIST` if it
/// exists and `exclusive`), empties it if `truncate`, copies its bytes into
/// `fd` (at most `cap`, else `EFBIG`, storing the size) and tracks `fd`
/// until [`weft_mpiio_posix_writable_release`].
///
/// # Safety
/// `path` is a C string, `fd` an open descriptor the caller owns, `size`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_posix_writable_open(
    path: *const c_char,
    fd: c_int,
    create: c_int,
    exclusive: c_int,
    truncate: c_int,
    mode: u32,
    cap: u64,
    size: *mut u64,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let client = weft()?;
        let file = if create != 0 {
            let options = CreateOptions { mode: Some(mode & 0o7777), exclusive: exclusive != 0, ..Default::default() };
            client.create(path, options)
        } else {
            client.open(path, weft_client::access::READ | weft_client::access::WRITE)
        }
        .map_err(errno_of)?;
        if truncate != 0 {
            client.truncate_file(&file, 0).map_err(errno_of)?;
        }
        let total = client.file_size(&file).map_err(errno_of)?;
        if !size.is_null() {
            // SAFETY: non-NULL and writable per this function's contract.
            unsafe { size.write(total) };
        }
        if total > cap {
            return Err(libc::EFBIG);
        }
        let mut known = Vec::with_capacity(total as usize);
        read_chunks(client, &file, total, |bytes| {
            known.extend_from_slice(bytes);
            Ok(())
        })?;
        // SAFETY: the caller owns `fd` and keeps it open; ManuallyDrop never closes it.
        let mut out = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        write_fd(&mut out, &known)?;
        table().get_or_insert_with(HashMap::new).insert(fd, Writable { file, known });
        Ok(())
    })
}

/// Writes back what changed on `fd` (and with `durable`, asks the servers
/// to make it durable: `fsync`). [`NOT_WRITABLE`] if `fd` is not tracked.
#[no_mangle]
pub extern "C" fn weft_mpiio_posix_writable_sync(fd: c_int, durable: c_int) -> c_int {
    // Taken out of the table while the bytes move (no lock held over I/O).
    let Some(mut writable) = table().as_mut().and_then(|t| t.remove(&fd)) else {
        return NOT_WRITABLE;
    };
    let rc = guarded(|| {
        let client = weft()?;
        write_back(client, fd, &mut writable)?;
        if durable != 0 {
            client.fsync(&writable.file).map_err(errno_of)?;
        }
        Ok(())
    });
    table().get_or_insert_with(HashMap::new).insert(fd, writable);
    rc
}

/// Writes back what changed on `fd` and stops tracking it (before the
/// caller closes it). [`NOT_WRITABLE`] if `fd` is not tracked.
#[no_mangle]
pub extern "C" fn weft_mpiio_posix_writable_release(fd: c_int) -> c_int {
    let Some(mut writable) = table().as_mut().and_then(|t| t.remove(&fd)) else {
        return NOT_WRITABLE;
    };
    guarded(|| write_back(weft()?, fd, &mut writable))
}

/// The descriptor's bytes now.
fn current_bytes(fd: c_int) -> Result<Vec<u8>, Errno> {
    // SAFETY: the caller's descriptor stays open; ManuallyDrop never closes it.
    let file = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let os = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let len = file.metadata().map_err(os)?.len();
    let mut bytes = vec![0u8; usize::try_from(len).map_err(|_| libc::EFBIG)?];
    file.read_exact_at(&mut bytes, 0).map_err(os)?;
    Ok(bytes)
}

/// Sends Weft the size (if it changed) and the changed blocks of `fd`.
fn write_back(client: &BlockingClient, fd: c_int, writable: &mut Writable) -> Result<(), Errno> {
    let now = current_bytes(fd)?;
    if now.len() != writable.known.len() {
        client.truncate_file(&writable.file, now.len() as u64).map_err(errno_of)?;
        // Weft now holds zeros beyond the old end: compare with those.
        writable.known.resize(now.len(), 0);
    }
    for (start, end) in changed_runs(&writable.known, &now) {
        client.write_at(&writable.file, start as u64, &now[start..end]).map_err(errno_of)?;
    }
    writable.known = now;
    Ok(())
}

/// Byte ranges of maximal runs of [`COMPARE_BYTES`] blocks that differ
/// between `old` and `new` (equal lengths).
fn changed_runs(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (index, (a, b)) in old.chunks(COMPARE_BYTES).zip(new.chunks(COMPARE_BYTES)).enumerate() {
        if a == b {
            continue;
        }
        let (start, end) = (index * COMPARE_BYTES, index * COMPARE_BYTES + b.len());
        match runs.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => runs.push((start, end)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_runs_merge_adjacent_blocks() {
        let old = vec![0u8; 5 * COMPARE_BYTES + 10];
        let mut new = old.clone();
        new[1] = 1;
        new[COMPARE_BYTES + 5] = 1;
        new[3 * COMPARE_BYTES] = 1;
        new[5 * COMPARE_BYTES + 9] = 1;
        assert_eq!(
            changed_runs(&old, &new),
            vec![
                (0, 2 * COMPARE_BYTES),
                (3 * COMPARE_BYTES, 4 * COMPARE_BYTES),
                (5 * COMPARE_BYTES, 5 * COMPARE_BYTES + 10)
            ]
        );
        assert!(changed_runs(&old, &old).is_empty());
    }

    #[test]
    fn untracked_descriptors_are_passed_on() {
        assert_eq!(weft_mpiio_posix_writable_sync(-7, 0), NOT_WRITABLE);
        assert_eq!(weft_mpiio_posix_writable_release(-7), NOT_WRITABLE);
    }

    #[test]
    fn null_path_is_efault() {
        // SAFETY: NULL is allowed by the contract.
        let rc = unsafe { weft_mpiio_posix_writable_open(std::ptr::null(), -1, 0, 0, 0, 0, 0, std::ptr::null_mut()) };
        assert_eq!(rc, libc::EFAULT);
    }
}
