//! Every error the C API can report, and the one place where each becomes
//! an errno and a message.
//!
//! Two exhaustive `match`es live here: [`CapiError::errno`] (a new variant
//! must choose its errno) and [`message_of_errno`] (the text behind
//! `weft_strerror`). Errors of the file system itself arrive as
//! [`ErrorCode`], whose errno mapping is owned by `weft-proto`; this module
//! only adds the failures that exist because of the C boundary.

use std::ffi::CStr;

use weft_config::ConfigError;
use weft_proto::ErrorCode;

/// Result of every internal C API operation.
pub type CapiResult<T> = Result<T, CapiError>;

/// A failure of a C API call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapiError {
    /// The file system (or the client library) answered with an error.
    Weft(ErrorCode),
    /// A required pointer argument was NULL.
    NullPointer,
    /// An output pointer was not aligned for its type.
    MisalignedPointer,
    /// A path or name was not valid UTF-8.
    InvalidUtf8,
    /// A handle was not (or no longer) a live handle of the expected kind.
    BadHandle,
    /// The file was not opened for reading.
    NotOpenForReading,
    /// The file was not opened for writing.
    NotOpenForWriting,
    /// `open` flags that are unknown or contradictory.
    InvalidFlags,
    /// An offset was negative.
    NegativeOffset,
    /// A byte count does not fit in `ssize_t`.
    CountTooLarge,
    /// No configuration path was given and `WEFT_CONFIG` is unset.
    ConfigPathMissing,
    /// The configuration file could not be read (carries the OS errno).
    ConfigUnreadable(i32),
    /// The configuration file is malformed or inconsistent.
    ConfigInvalid,
    /// An earlier write, fsync or truncate through this file failed, so
    /// its contents are unknown; further writes are refused.
    PreviousWriteFailed,
    /// A datatype constructor's arguments describe no valid type (bad
    /// count, order, distribution, dimensions, or a limit exceeded).
    InvalidType,
    /// A datatype's size, bounds or displacements overflow 64 bits.
    TypeOverflow,
    /// The memory and file lists of list I/O have different total lengths.
    ListTotalsDiffer,
    /// A memory piece of a noncontiguous access lies outside the buffer.
    OutsideBuffer,
    /// Noncontiguous writes name their file offsets, so they are refused
    /// on a file opened with `O_APPEND`.
    AppendNoncontiguous,
    /// An unknown I/O method or a bad regions-per-request count.
    InvalidIoMethod,
    /// Rust code panicked; the panic was caught at the boundary.
    Panic,
}

impl From<ErrorCode> for CapiError {
    fn from(code: ErrorCode) -> Self {
        CapiError::Weft(code)
    }
}

impl From<&ConfigError> for CapiError {
    fn from(error: &ConfigError) -> Self {
        match error {
            ConfigError::Read { source, .. } => CapiError::ConfigUnreadable(source.raw_os_error().unwrap_or(libc::EIO)),
            ConfigError::Parse { .. } | ConfigError::Invalid { .. } => CapiError::ConfigInvalid,
        }
    }
}

impl CapiError {
    /// The positive errno a C caller sees (negated in return values).
    pub fn errno(self) -> i32 {
        match self {
            CapiError::Weft(code) => code.errno(),
            CapiError::NullPointer => libc::EINVAL,
            CapiError::MisalignedPointer => libc::EINVAL,
            CapiError::InvalidUtf8 => libc::EINVAL,
            CapiError::BadHandle => libc::EBADF,
            CapiError::NotOpenForReading => libc::EBADF,
            CapiError::NotOpenForWriting => libc::EBADF,
            CapiError::InvalidFlags => libc::EINVAL,
            CapiError::NegativeOffset => libc::EINVAL,
            CapiError::CountTooLarge => libc::EINVAL,
            CapiError::ConfigPathMissing => libc::EINVAL,
            CapiError::ConfigUnreadable(errno) => errno,
            CapiError::ConfigInvalid => libc::EINVAL,
            CapiError::PreviousWriteFailed => libc::EIO,
            CapiError::InvalidType => libc::EINVAL,
            CapiError::TypeOverflow => libc::EOVERFLOW,
            CapiError::ListTotalsDiffer => libc::EINVAL,
            CapiError::OutsideBuffer => libc::EINVAL,
            CapiError::AppendNoncontiguous => libc::EINVAL,
            CapiError::InvalidIoMethod => libc::EINVAL,
            CapiError::Panic => libc::EIO,
        }
    }
}

/// The text `weft_strerror` returns for a positive errno. Covers every
/// errno this library produces, plus the usual ones a configuration read
/// can fail with; anything else is "unknown error".
pub fn message_of_errno(errno: i32) -> &'static CStr {
    match errno {
        0 => c"success",
        libc::EPERM => c"operation not permitted",
        libc::ENOENT => c"no such file or directory",
        libc::EIO => c"input/output error",
        libc::EBADF => c"bad weft handle or file not open for this access",
        libc::ENOMEM => c"out of memory",
        libc::EACCES => c"permission denied",
        libc::EBUSY => c"server busy",
        libc::EEXIST => c"file exists",
        libc::EXDEV => c"cross-device link",
        libc::ENOTDIR => c"not a directory",
        libc::EISDIR => c"is a directory",
        libc::EINVAL => c"invalid argument",
        libc::EMFILE => c"too many open files",
        libc::EFBIG => c"file too large",
        libc::ENOSPC => c"no space left on device",
        libc::ENAMETOOLONG => c"file name too long",
        libc::ENOTEMPTY => c"directory not empty",
        libc::ELOOP => c"too many levels of symbolic links",
        libc::EPROTO => c"protocol error",
        libc::EOPNOTSUPP => c"operation not supported",
        libc::ETIMEDOUT => c"timed out",
        libc::ESTALE => c"stale handle",
        libc::EOVERFLOW => c"value too large (datatype overflow)",
        _ => c"unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_errors_map_to_posix_errnos() {
        assert_eq!(CapiError::NullPointer.errno(), libc::EINVAL);
        assert_eq!(CapiError::BadHandle.errno(), libc::EBADF);
        assert_eq!(CapiError::Weft(ErrorCode::NotEmpty).errno(), libc::ENOTEMPTY);
        assert_eq!(CapiError::ConfigUnreadable(libc::ENOENT).errno(), libc::ENOENT);
        assert_eq!(CapiError::Panic.errno(), libc::EIO);
        assert_eq!(CapiError::TypeOverflow.errno(), libc::EOVERFLOW);
        assert_ne!(message_of_errno(libc::EOVERFLOW), c"unknown error");
    }

    #[test]
    fn every_weft_errno_has_a_message() {
        let codes = [
            ErrorCode::NoEntry,
            ErrorCode::Exists,
            ErrorCode::NotDir,
            ErrorCode::IsDir,
            ErrorCode::NotEmpty,
            ErrorCode::NameTooLong,
            ErrorCode::Loop,
            ErrorCode::Access,
            ErrorCode::Perm,
            ErrorCode::Invalid,
            ErrorCode::Io,
            ErrorCode::NoSpace,
            ErrorCode::Stale,
            ErrorCode::TooBig,
            ErrorCode::Protocol,
            ErrorCode::VersionMismatch,
            ErrorCode::Unsupported,
            ErrorCode::Busy,
            ErrorCode::TimedOut,
            ErrorCode::Unreachable,
            ErrorCode::CrossDevice,
            ErrorCode::ShuttingDown,
        ];
        for code in codes {
            assert_ne!(message_of_errno(code.errno()), c"unknown error", "{code:?}");
        }
    }
}
