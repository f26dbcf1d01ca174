//! Weft errors to errno, in one place, and the calls Weft does not support.
//!
//! Unsupported calls and what the caller sees:
//!
//! | Call | errno | Why |
//! |---|---|---|
//! | `link` (hard links) | `EPERM` | what link(2) documents for a file system without hard links |
//! | `mknod` of a FIFO, socket or device | `EPERM` | what mknod(2) documents for an unsupported node type (regular files work) |
//! | `getxattr`, `listxattr`, `setxattr`, `removexattr` | `EOPNOTSUPP` | no extended attributes; the mount answers ENOSYS once and the kernel then answers EOPNOTSUPP itself |
//! | `renameat2` with `RENAME_EXCHANGE` or `RENAME_WHITEOUT` | `EINVAL` | not supported (`RENAME_NOREPLACE` works, checked by a lookup first, so not atomic against another client) |
//! | `fallocate` other than mode 0 or `FALLOC_FL_KEEP_SIZE` | `EOPNOTSUPP` | no hole punching or range zeroing; mode 0 extends the size (sparse) |
//!
//! `fcntl` record locks work across mounts (see [`crate::locks`]);
//! `flock(2)` is not sent to the mount: the kernel keeps those locks local
//! to one machine's mount.

use fuser::Errno;
use weft_proto::ErrorCode;

/// The errno for a Weft error. `ErrorCode::errno` holds the exhaustive
/// mapping, shared with the C API; this is the only conversion in the mount.
pub fn of(code: ErrorCode) -> Errno {
    Errno::from_i32(code.errno())
}

/// Hard links.
pub const LINK: Errno = Errno::EPERM;
/// Extended attributes: ENOSYS makes the kernel answer EOPNOTSUPP itself
/// from then on, without another round trip.
pub const XATTR: Errno = Errno::ENOSYS;
/// `RENAME_EXCHANGE` and `RENAME_WHITEOUT`.
pub const RENAME_FLAGS: Errno = Errno::EINVAL;
/// `fallocate` modes other than 0 and `FALLOC_FL_KEEP_SIZE`.
pub const FALLOCATE_MODE: Errno = Errno::EOPNOTSUPP;
/// A file handle that is not open.
pub const BAD_HANDLE: Errno = Errno::EBADF;
