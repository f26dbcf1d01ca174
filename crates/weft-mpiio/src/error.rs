//! Errors of the MPI-IO layer, as flavour-neutral MPI error classes.
//!
//! Rust returns [`MpiClass`] as a small integer; the C layer maps each to
//! the `MPI_ERR_*` constant of the `mpi.h` it was compiled with (the values
//! differ between OpenMPI and MPICH), so no MPI constant is written here.

use weft_proto::ErrorCode;

/// An MPI error class, numbered for the C ABI (see `c/weft_mpiio.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum MpiClass {
    /// `MPI_SUCCESS`.
    Success = 0,
    /// `MPI_ERR_NO_SUCH_FILE`.
    NoSuchFile = 1,
    /// `MPI_ERR_FILE_EXISTS`.
    FileExists = 2,
    /// `MPI_ERR_ACCESS`.
    Access = 3,
    /// `MPI_ERR_AMODE`.
    Amode = 4,
    /// `MPI_ERR_IO`.
    Io = 5,
    /// `MPI_ERR_NO_SPACE`.
    NoSpace = 6,
    /// `MPI_ERR_BAD_FILE`.
    BadFile = 7,
    /// `MPI_ERR_ARG`.
    Arg = 8,
    /// `MPI_ERR_TYPE`.
    Type = 9,
    /// `MPI_ERR_UNSUPPORTED_OPERATION`.
    UnsupportedOperation = 10,
    /// `MPI_ERR_INTERN` (also: a Rust panic caught at the boundary).
    Intern = 11,
    /// `MPI_ERR_READ_ONLY`.
    ReadOnly = 12,
    /// `MPI_ERR_COUNT`.
    Count = 13,
}

/// The error type of this crate.
pub type MpiResult<T> = Result<T, MpiClass>;

impl From<ErrorCode> for MpiClass {
    fn from(code: ErrorCode) -> MpiClass {
        // Exhaustive, no wildcard: a new `ErrorCode` must be placed here.
        match code {
            ErrorCode::NoEntry => MpiClass::NoSuchFile,
            ErrorCode::Exists => MpiClass::FileExists,
            ErrorCode::NotDir | ErrorCode::IsDir | ErrorCode::NameTooLong | ErrorCode::Loop => MpiClass::BadFile,
            ErrorCode::Stale => MpiClass::BadFile,
            ErrorCode::Access | ErrorCode::Perm => MpiClass::Access,
            ErrorCode::Invalid => MpiClass::Arg,
            ErrorCode::NoSpace => MpiClass::NoSpace,
            ErrorCode::Unsupported => MpiClass::UnsupportedOperation,
            ErrorCode::NotEmpty | ErrorCode::Io | ErrorCode::TooBig | ErrorCode::Protocol => MpiClass::Io,
            ErrorCode::VersionMismatch | ErrorCode::Busy | ErrorCode::TimedOut => MpiClass::Io,
            ErrorCode::Unreachable | ErrorCode::CrossDevice | ErrorCode::ShuttingDown => MpiClass::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_no_such_file() {
        assert_eq!(MpiClass::from(ErrorCode::NoEntry), MpiClass::NoSuchFile);
        assert_eq!(MpiClass::from(ErrorCode::Exists), MpiClass::FileExists);
        assert_eq!(MpiClass::from(ErrorCode::Access), MpiClass::Access);
    }
}
