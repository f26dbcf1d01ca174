//! libweft: the C API of the Weft client, built as `libweft.so` with the
//! hand-written header `include/weft.h`.
//!
//! # Conventions
//!
//! - Every function returns `0` (or a non-negative count) on success and
//!   `-errno` on failure; `weft_strerror(err)` describes either sign.
//! - Handles (`weft_fs_t *`, `weft_file_t *`, `weft_dir_t *`,
//!   `weft_type_t *`) are opaque
//!   tokens checked against a table on every call: NULL gives `-EINVAL`,
//!   a stale, closed, forged or wrong-kind handle gives `-EBADF`.
//! - A NULL pointer argument gives `-EINVAL`, as does a path that is not
//!   UTF-8, a negative offset or size, or unknown `open` flags.
//! - Paths are absolute inside the file system; a `weft:` prefix is
//!   accepted (`weft:/a/b` and `/a/b` name the same file).
//! - No panic crosses the boundary: each export runs under
//!   `catch_unwind` and a panic becomes `-EIO` (see [`boundary`]).
//! - Calls block the calling thread; every handle may be used from
//!   several threads at once.
//!
//! # Functions
//!
//! | Area | Functions |
//! |------|-----------|
//! | connection | `weft_connect` (NULL config → `$WEFT_CONFIG`), `weft_disconnect` |
//! | files | `weft_open`, `weft_create` (mode, strip size, stripe count), `weft_pread`, `weft_pwrite`, `weft_fsync`, `weft_ftruncate`, `weft_fstat`, `weft_close` |
//! | namespace | `weft_stat`, `weft_lstat`, `weft_truncate`, `weft_unlink`, `weft_mkdir`, `weft_rmdir`, `weft_rename`, `weft_symlink`, `weft_readlink` |
//! | directories | `weft_opendir`, `weft_readdir` (1 = entry, 0 = end), `weft_closedir` |
//! | noncontiguous I/O | `weft_pread_list`, `weft_pwrite_list`, `weft_read_dtype`, `weft_write_dtype`, `weft_set_io_method` |
//! | datatypes | `weft_type_bytes`, `_contiguous`, `_vector`, `_hvector`, `_indexed`, `_hindexed`, `_indexed_block`, `_hindexed_block`, `_struct`, `_resized`, `_subarray`, `_darray`, `weft_type_size`, `weft_type_extent`, `weft_type_free` |
//! | space | `weft_statfs`, `weft_statfs_servers` |
//! | errors | `weft_strerror` |
//!
//! # Layout
//!
//! - [`error`]: the typed errors and their errno, in one place.
//! - [`boundary`]: panic catching, return conventions, argument checks.
//! - [`registry`]: the table behind opaque handles.
//! - [`types`]: the `#[repr(C)]` structs of `weft.h`.
//! - [`flags`]: `open` flags.
//! - [`fs`]: connections, statfs, strerror.
//! - [`names`]: path-based namespace calls.
//! - [`file`]: open files and their I/O.
//! - [`datatype`]: datatype handles and their MPI-style constructors.
//! - [`noncontig`]: list I/O and datatype I/O.
//! - [`dir`]: directory streams.
#![warn(missing_docs)]

pub mod boundary;
pub mod datatype;
pub mod dir;
pub mod error;
pub mod file;
pub mod flags;
pub mod fs;
pub mod names;
pub mod noncontig;
pub mod registry;
pub mod types;

pub use datatype::{
    weft_type_bytes, weft_type_contiguous, weft_type_darray, weft_type_extent, weft_type_free, weft_type_hindexed,
    weft_type_hindexed_block, weft_type_hvector, weft_type_indexed, weft_type_indexed_block, weft_type_resized,
    weft_type_size, weft_type_struct, weft_type_subarray, weft_type_vector,
};
pub use dir::{weft_closedir, weft_opendir, weft_readdir};
pub use error::{CapiError, CapiResult};
pub use file::{weft_close, weft_create, weft_fstat, weft_fsync, weft_ftruncate, weft_open, weft_pread, weft_pwrite};
pub use fs::{weft_connect, weft_disconnect, weft_statfs, weft_statfs_servers, weft_strerror};
pub use names::{
    weft_lstat, weft_mkdir, weft_readlink, weft_rename, weft_rmdir, weft_stat, weft_symlink, weft_truncate, weft_unlink,
};
pub use noncontig::{weft_pread_list, weft_pwrite_list, weft_read_dtype, weft_set_io_method, weft_write_dtype};
pub use types::{
    weft_dir_t, weft_dirent, weft_file_t, weft_fs_t, weft_server_statfs, weft_stat, weft_statfs, weft_type_t,
};
