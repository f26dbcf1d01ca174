//! The C ABI the per-flavour C layer calls (`c/weft_mpiio.h` declares it).
//!
//! Every function returns an [`MpiClass`] as `int` (0 = success) and runs
//! its body under `catch_unwind`: a Rust panic never unwinds into C, it
//! becomes `MpiClass::Intern` (`MPI_ERR_INTERN`). Pointer arguments are
//! checked for NULL before any reference is made.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{MpiClass, MpiResult};
use crate::file::{self, Position};
use crate::types;

pub(crate) fn guarded(body: impl FnOnce() -> MpiResult<()>) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(MpiClass::Intern));
    match result {
        Ok(()) => MpiClass::Success as c_int,
        Err(class) => class as c_int,
    }
}

/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for the call.
unsafe fn path_arg<'a>(ptr: *const c_char) -> MpiResult<&'a str> {
    if ptr.is_null() {
        return Err(MpiClass::Arg);
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(ptr) }.to_str().map_err(|_| MpiClass::BadFile)
}

/// # Safety
/// `ptr` is NULL or valid for writing one `T`.
pub(crate) unsafe fn store<T>(ptr: *mut T, value: T) -> MpiResult<()> {
    if ptr.is_null() {
        return Err(MpiClass::Arg);
    }
    // SAFETY: non-NULL, and writable per this function's contract.
    unsafe { ptr.write(value) };
    Ok(())
}

fn positive<T: TryFrom<i64>>(value: i64) -> Option<T> {
    if value > 0 {
        T::try_from(value).ok()
    } else {
        None
    }
}

/// Creates or opens `path` (opening rank); writes the blob to broadcast.
///
/// # Safety
/// `path` is a C string; `blob` has `blob_cap` writable bytes; `blob_len` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_lookup(
    path: *const c_char,
    amode: u32,
    strip_bytes: i64,
    stripe_count: i64,
    blob: *mut u8,
    blob_cap: usize,
    blob_len: *mut usize,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let bytes = file::lookup(path, amode, positive(strip_bytes), positive(stripe_count))?;
        if blob.is_null() || bytes.len() > blob_cap {
            return Err(MpiClass::Intern);
        }
        // SAFETY: `blob` has room for `blob_cap >= bytes.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), blob, bytes.len()) };
        // SAFETY: per this function's contract.
        unsafe { store(blob_len, bytes.len()) }
    })
}

/// Registers an opened file on this rank.
///
/// # Safety
/// `path` is a C string, `blob` has `blob_len` readable bytes, `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_attach(
    path: *const c_char,
    blob: *const u8,
    blob_len: usize,
    amode: u32,
    id: *mut u64,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        if blob.is_null() {
            return Err(MpiClass::Intern);
        }
        // SAFETY: per this function's contract.
        let blob = unsafe { std::slice::from_raw_parts(blob, blob_len) };
        let new_id = file::attach(path, blob, amode)?;
        // SAFETY: per this function's contract.
        unsafe { store(id, new_id) }
    })
}

/// Regions per list-I/O request (hint `weft_list_regions`).
#[no_mangle]
pub extern "C" fn weft_mpiio_set_list_regions(id: u64, regions: i64) -> c_int {
    guarded(|| file::set_list_regions(id, regions))
}

/// Forgets a file; `remove != 0` applies delete-on-close.
#[no_mangle]
pub extern "C" fn weft_mpiio_detach(id: u64, remove: c_int) -> c_int {
    guarded(|| file::detach(id, remove != 0))
}

/// `MPI_File_delete` on a Weft path.
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_unlink(path: *const c_char) -> c_int {
    // SAFETY: per this function's contract.
    guarded(|| file::unlink(unsafe { path_arg(path)? }))
}

/// File size in bytes.
///
/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_get_size(id: u64, size: *mut i64) -> c_int {
    guarded(|| {
        let bytes = i64::try_from(file::size(id)?).map_err(|_| MpiClass::Io)?;
        // SAFETY: per this function's contract.
        unsafe { store(size, bytes) }
    })
}

/// Sets the file size.
#[no_mangle]
pub extern "C" fn weft_mpiio_set_size(id: u64, size: i64) -> c_int {
    guarded(|| file::set_size(id, u64::try_from(size).map_err(|_| MpiClass::Arg)?))
}

/// Flushes to stable storage.
#[no_mangle]
pub extern "C" fn weft_mpiio_sync(id: u64) -> c_int {
    guarded(|| file::sync(id))
}

/// Builds a dataloop from a datatype program (see [`types`]).
///
/// # Safety
/// `words` has `count` readable words; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_type_build(words: *const i64, count: usize, id: *mut u64) -> c_int {
    guarded(|| {
        if words.is_null() {
            return Err(MpiClass::Type);
        }
        // SAFETY: per this function's contract.
        let program = unsafe { std::slice::from_raw_parts(words, count) };
        let new_id = types::insert(types::build(program)?)?;
        // SAFETY: per this function's contract.
        unsafe { store(id, new_id) }
    })
}

/// Forgets a dataloop.
#[no_mangle]
pub extern "C" fn weft_mpiio_type_free(id: u64) -> c_int {
    guarded(|| {
        types::remove(id);
        Ok(())
    })
}

/// Sets the view of a file.
#[no_mangle]
pub extern "C" fn weft_mpiio_set_view(id: u64, displacement: i64, etype_id: u64, file_type_id: u64) -> c_int {
    guarded(|| {
        let etype = types::get(etype_id)?;
        let file_type = types::get(file_type_id)?;
        file::set_view(id, displacement, &etype, file_type)
    })
}

/// Sets the bounce and collective window of a file (`cb_buffer_size` hint).
#[no_mangle]
pub extern "C" fn weft_mpiio_set_window(id: u64, bytes: i64) -> c_int {
    guarded(|| file::set_window(id, u64::try_from(bytes).map_err(|_| MpiClass::Arg)?))
}

/// Reads (`write == 0`) or writes `count` instances of type `memory_type_id`
/// at `buffer`; `explicit != 0` uses `offset` (etypes), otherwise the
/// individual file pointer. Stores the bytes moved.
///
/// Its parameter list opens like those of `weft_mpiio_istart`
/// (`crate::nonblocking`) and `weft_mpiio_coll_begin` (`crate::collective`),
/// which `duplicates` pairs: three C entry points, each its own signature;
/// their checks are shared (`file::access_bytes`, `file::prepare`).
///
/// # Safety
/// `buffer` is the caller's MPI buffer for this access; `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_io(
    id: u64,
    write: c_int,
    explicit: c_int,
    offset: i64,
    buffer: *mut c_void,
    count: i64,
    memory_type_id: u64,
    bytes: *mut i64,
) -> c_int {
    guarded(|| {
        let count = u64::try_from(count).map_err(|_| MpiClass::Count)?;
        let memory_type = types::get(memory_type_id)?;
        let at = if explicit != 0 { Position::Explicit(offset) } else { Position::Individual };
        // SAFETY: per this function's contract.
        let moved = unsafe { file::transfer(id, write != 0, at, buffer.cast(), count, &memory_type)? };
        // SAFETY: per this function's contract.
        unsafe { store(bytes, moved as i64) }
    })
}

/// Moves the individual file pointer (`whence`: 0 set, 1 current, 2 end).
#[no_mangle]
pub extern "C" fn weft_mpiio_seek(id: u64, offset: i64, whence: c_int) -> c_int {
    guarded(|| file::seek(id, offset, whence))
}

/// The individual file pointer in etypes.
///
/// # Safety
/// `offset` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_get_position(id: u64, offset: *mut i64) -> c_int {
    // SAFETY: per this function's contract.
    guarded(|| unsafe { store(offset, file::position(id)?) })
}

/// The absolute byte offset of a view position.
///
/// # Safety
/// `displacement` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_byte_offset(id: u64, offset: i64, displacement: *mut i64) -> c_int {
    // SAFETY: per this function's contract.
    guarded(|| unsafe { store(displacement, file::byte_offset(id, offset)?) })
}

/// Flattens `count` instances of a dataloop into `(offset, length)` pairs
/// (`2 * pairs_cap` words); stores the number of pairs, which may exceed
/// the capacity (then only the first `pairs_cap` are written).
///
/// # Safety
/// `pairs` has `2 * pairs_cap` writable words; `pairs_len` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_flatten(
    type_id: u64,
    count: i64,
    pairs: *mut i64,
    pairs_cap: usize,
    pairs_len: *mut usize,
) -> c_int {
    guarded(|| {
        let dataloop = types::get(type_id)?;
        let count = u64::try_from(count).map_err(|_| MpiClass::Count)?;
        let regions = file::flatten(&dataloop, count)?;
        for (index, (offset, length)) in regions.iter().take(pairs_cap).enumerate() {
            // SAFETY: index < pairs_cap, within the caller's array.
            unsafe {
                pairs.add(2 * index).write(*offset);
                pairs.add(2 * index + 1).write(*length as i64);
            }
        }
        // SAFETY: per this function's contract.
        unsafe { store(pairs_len, regions.len()) }
    })
}

/// Test hook: panics inside the guard, to check the boundary.
#[no_mangle]
pub extern "C" fn weft_mpiio_panic_for_test() -> c_int {
    guarded(|| panic!("weft_mpiio_panic_for_test"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_intern() {
        assert_eq!(weft_mpiio_panic_for_test(), MpiClass::Intern as c_int);
    }
}
