//! The closed set of errors a Weft server can answer with, and their errno.
//!
//! Every layer above (client, C API, FUSE, MPI-IO) converts from this enum in
//! exactly one place with an exhaustive `match`, so a new variant forces a
//! decision everywhere it matters.

use serde::{Deserialize, Serialize};

/// Result type of every Weft operation.
pub type WeftResult<T> = Result<T, ErrorCode>;

/// An error as carried on the wire.
///
/// Not `#[non_exhaustive]`: every crate that maps it (to errno here, to MPI
/// error classes in weft-mpiio) matches it exhaustively without a wildcard,
/// so a new code does not compile until each mapping decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
pub enum ErrorCode {
    /// No such file or directory.
    #[error("no such file or directory")]
    NoEntry,
    /// The name already exists.
    #[error("file exists")]
    Exists,
    /// A path component is not a directory.
    #[error("not a directory")]
    NotDir,
    /// The object is a directory.
    #[error("is a directory")]
    IsDir,
    /// The directory is not empty.
    #[error("directory not empty")]
    NotEmpty,
    /// A name or path is too long.
    #[error("file name too long")]
    NameTooLong,
    /// Too many symbolic links were followed.
    #[error("too many levels of symbolic links")]
    Loop,
    /// Permission bits deny the access.
    #[error("permission denied")]
    Access,
    /// The operation needs ownership or privilege.
    #[error("operation not permitted")]
    Perm,
    /// An argument is invalid (bad name, bad layout, bad offset).
    #[error("invalid argument")]
    Invalid,
    /// The local storage failed.
    #[error("input/output error")]
    Io,
    /// The storage is full.
    #[error("no space left on device")]
    NoSpace,
    /// The handle does not name a live object on this server.
    #[error("stale or bad handle")]
    Stale,
    /// The result would exceed the maximum file size.
    #[error("file too large")]
    TooBig,
    /// The peer sent a malformed or unexpected frame.
    #[error("protocol error")]
    Protocol,
    /// The peer speaks another protocol version, or stored data has a
    /// format version this build does not read.
    #[error("version mismatch (protocol or storage format)")]
    VersionMismatch,
    /// The operation is not supported.
    #[error("operation not supported")]
    Unsupported,
    /// Too many requests are in flight on this connection.
    #[error("server busy")]
    Busy,
    /// A deadline passed.
    #[error("timed out")]
    TimedOut,
    /// The server could not be reached or the connection broke.
    #[error("server unreachable")]
    Unreachable,
    /// Cross-server operation not possible (rename across servers).
    #[error("cross-device link")]
    CrossDevice,
    /// The server is shutting down.
    #[error("server shutting down")]
    ShuttingDown,
}

impl ErrorCode {
    /// The errno a POSIX caller should see.
    pub fn errno(self) -> i32 {
        match self {
            ErrorCode::NoEntry => 2,          // ENOENT
            ErrorCode::Exists => 17,          // EEXIST
            ErrorCode::NotDir => 20,          // ENOTDIR
            ErrorCode::IsDir => 21,           // EISDIR
            ErrorCode::NotEmpty => 39,        // ENOTEMPTY
            ErrorCode::NameTooLong => 36,     // ENAMETOOLONG
            ErrorCode::Loop => 40,            // ELOOP
            ErrorCode::Access => 13,          // EACCES
            ErrorCode::Perm => 1,             // EPERM
            ErrorCode::Invalid => 22,         // EINVAL
            ErrorCode::Io => 5,               // EIO
            ErrorCode::NoSpace => 28,         // ENOSPC
            ErrorCode::Stale => 116,          // ESTALE
            ErrorCode::TooBig => 27,          // EFBIG
            ErrorCode::Protocol => 71,        // EPROTO
            ErrorCode::VersionMismatch => 71, // EPROTO
            ErrorCode::Unsupported => 95,     // EOPNOTSUPP
            ErrorCode::Busy => 16,            // EBUSY
            ErrorCode::TimedOut => 110,       // ETIMEDOUT
            ErrorCode::Unreachable => 5,      // EIO: callers of a file system expect EIO
            ErrorCode::CrossDevice => 18,     // EXDEV
            ErrorCode::ShuttingDown => 5,     // EIO
        }
    }

    /// The error for a local I/O failure, keeping ENOSPC apart.
    pub fn from_io(err: &std::io::Error) -> ErrorCode {
        match err.raw_os_error() {
            Some(28) | Some(122) => ErrorCode::NoSpace,
            Some(27) => ErrorCode::TooBig,
            _ => match err.kind() {
                std::io::ErrorKind::NotFound => ErrorCode::NoEntry,
                std::io::ErrorKind::TimedOut => ErrorCode::TimedOut,
                _ => ErrorCode::Io,
            },
        }
    }
}
