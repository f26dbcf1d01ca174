//! Reads that never block a runtime worker on the disk: `preadv2` with
//! `RWF_NOWAIT` copies only what the page cache holds and says `EAGAIN`
//! otherwise, so a request can be served inline on a hit and hand off to
//! the blocking pool only on a miss (see ARCHITECTURE.md, design decisions).
//!
//! Buffered writes have no such mode on ext4 (`pwritev2` with `RWF_NOWAIT`
//! answers `EOPNOTSUPP`), so writes are not served here.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use weft_proto::{ErrorCode, WeftResult};

/// Set once the file system answered `EOPNOTSUPP`: stop trying.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Reads until `buf` is full or end of file, from the page cache only:
/// `Some(bytes)` (short only at end of file), or `None` if any part would
/// have to wait for the disk (the caller then reads on the blocking pool).
pub fn read_full_nowait(file: &File, offset: u64, buf: &mut [u8]) -> WeftResult<Option<usize>> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mut done = 0usize;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let iov = libc::iovec { iov_base: rest.as_mut_ptr().cast(), iov_len: rest.len() };
        let at = i64::try_from(offset + done as u64).map_err(|_| ErrorCode::TooBig)?;
        // SAFETY: `iov` describes `rest`, which is valid for writes of its
        // length for the whole call; the descriptor stays open (borrowed).
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                    UNSUPPORTED.store(true, Ordering::Relaxed);
                    return Ok(None);
                }
                _ => return Err(ErrorCode::from_io(&err)),
            }
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    Ok(Some(done))
}
