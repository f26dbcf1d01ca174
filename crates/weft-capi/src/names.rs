//! Path-based namespace calls: `weft_stat`, `weft_lstat`, `weft_mkdir`,
//! `weft_rmdir`, `weft_unlink`, `weft_rename`, `weft_symlink`,
//! `weft_readlink` and `weft_truncate`.
//!
//! Each is one step: check the arguments, look up the connection, call
//! the blocking client. Paths are absolute inside Weft and may carry a
//! `weft:` prefix (the client strips it).
//!
//! Pairs such as `weft_stat`/`weft_lstat` repeat their few lines on
//! purpose: one C entry point each, the shared steps already in
//! `fs_and_path`, `out_arg` and `boundary::status`.

use std::ffi::{c_char, c_int};

use crate::boundary::{self, out_arg, output_bytes, string_arg};
use crate::error::CapiResult;
use crate::fs::FsState;
use crate::registry;
use crate::types::{weft_fs_t, weft_stat};

/// The optional prefix of Weft paths.
const PATH_PREFIX: &str = "weft:";

/// Looks up the connection and one path argument.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string valid for `'a`.
unsafe fn fs_and_path<'a>(fs: *mut weft_fs_t, path: *const c_char) -> CapiResult<(std::sync::Arc<FsState>, &'a str)> {
    let state = registry::lookup::<FsState>(fs)?;
    // SAFETY: per this function's contract.
    let path = unsafe { string_arg(path)? };
    Ok((state, path))
}

/// Attributes of `path`, following a final symlink.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or points to
/// writable storage for one `weft_stat`.
#[no_mangle]
pub unsafe extern "C" fn weft_stat(fs: *mut weft_fs_t, path: *const c_char, out: *mut weft_stat) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let ((state, path), mut out) = unsafe { (fs_and_path(fs, path)?, out_arg(out)?) };
        out.set(weft_stat::from(&state.client.stat(path)?));
        Ok(())
    })
}

/// Attributes of `path`, not following a final symlink.
///
/// # Safety
/// As for [`weft_stat`].
#[no_mangle]
pub unsafe extern "C" fn weft_lstat(fs: *mut weft_fs_t, path: *const c_char, out: *mut weft_stat) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let ((state, path), mut out) = unsafe { (fs_and_path(fs, path)?, out_arg(out)?) };
        out.set(weft_stat::from(&state.client.lstat(path)?));
        Ok(())
    })
}

/// Creates a directory with permission bits `mode`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_mkdir(fs: *mut weft_fs_t, path: *const c_char, mode: u32) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let (state, path) = unsafe { fs_and_path(fs, path)? };
        state.client.mkdir(path, mode & 0o7777)?;
        Ok(())
    })
}

/// Removes an empty directory.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_rmdir(fs: *mut weft_fs_t, path: *const c_char) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let (state, path) = unsafe { fs_and_path(fs, path)? };
        Ok(state.client.rmdir(path)?)
    })
}

/// Removes a file or symlink.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_unlink(fs: *mut weft_fs_t, path: *const c_char) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let (state, path) = unsafe { fs_and_path(fs, path)? };
        Ok(state.client.unlink(path)?)
    })
}

/// Renames `source` to `target`, replacing a compatible `target`.
///
/// # Safety
/// `source` and `target` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_rename(fs: *mut weft_fs_t, source: *const c_char, target: *const c_char) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let ((state, source), target) = unsafe { (fs_and_path(fs, source)?, string_arg(target)?) };
        Ok(state.client.rename(source, target)?)
    })
}

/// Creates a symlink at `path` whose content is `target`. A `weft:`
/// prefix on `target` is dropped: the stored target is a plain path, so
/// that resolution (which restarts at the root only for targets starting
/// with `/`) treats `weft:/a` like `/a`.
///
/// # Safety
/// `target` and `path` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn weft_symlink(fs: *mut weft_fs_t, target: *const c_char, path: *const c_char) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let ((state, path), target) = unsafe { (fs_and_path(fs, path)?, string_arg(target)?) };
        let target = target.strip_prefix(PATH_PREFIX).unwrap_or(target);
        state.client.symlink(target, path)?;
        Ok(())
    })
}

/// Copies the target of the symlink at `path` into `buffer` like
/// `snprintf`: at most `capacity - 1` bytes, always NUL-terminated when
/// `capacity > 0`. Returns the full length of the target, so a result
/// `>= capacity` means it was truncated.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `buffer` is NULL (only if
/// `capacity` is 0) or points to `capacity` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_readlink(
    fs: *mut weft_fs_t,
    path: *const c_char,
    buffer: *mut c_char,
    capacity: usize,
) -> libc::ssize_t {
    boundary::count(|| {
        // SAFETY: per this function's contract.
        let ((state, path), buffer) = unsafe { (fs_and_path(fs, path)?, output_bytes(buffer.cast(), capacity)?) };
        let target = state.client.readlink(path)?;
        Ok(boundary::copy_c_string(&target, buffer))
    })
}

/// Sets the size of the file at `path` (needs write permission).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_truncate(fs: *mut weft_fs_t, path: *const c_char, size: i64) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let (state, path) = unsafe { fs_and_path(fs, path)? };
        let size = boundary::offset_arg(size)?;
        Ok(state.client.truncate(path, size)?)
    })
}
