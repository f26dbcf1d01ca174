//! The FFI boundary: every exported function runs its body through one of
//! the wrappers here, which catch panics (a panic must never unwind into C)
//! and turn a [`CapiResult`] into the C convention: `0` or a non-negative
//! count on success, `-errno` on failure.
//!
//! The argument helpers check what C can get wrong before any Rust
//! reference is made: NULL pointers, misaligned output pointers, paths
//! that are not UTF-8, counts that do not fit in `ssize_t`, negative
//! offsets.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{CapiError, CapiResult};

/// Runs `body`, turning a panic into [`CapiError::Panic`].
fn guarded<T>(body: impl FnOnce() -> CapiResult<T>) -> CapiResult<T> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(CapiError::Panic))
}

/// For functions returning `0` or `-errno`.
pub(crate) fn status(body: impl FnOnce() -> CapiResult<()>) -> c_int {
    match guarded(body) {
        Ok(()) => 0,
        Err(error) => -error.errno(),
    }
}

/// For functions returning a small non-negative number (such as 1 or 0 for
/// "entry" or "end") or `-errno`.
pub(crate) fn small_count(body: impl FnOnce() -> CapiResult<c_int>) -> c_int {
    match guarded(body) {
        Ok(count) => count,
        Err(error) => -error.errno(),
    }
}

/// For functions returning a byte or item count as `ssize_t`, or `-errno`.
pub(crate) fn count(body: impl FnOnce() -> CapiResult<usize>) -> libc::ssize_t {
    let result = guarded(body).and_then(|n| libc::ssize_t::try_from(n).map_err(|_| CapiError::CountTooLarge));
    match result {
        Ok(n) => n,
        Err(error) => -(error.errno() as libc::ssize_t),
    }
}

/// A NUL-terminated UTF-8 string argument (paths, names, symlink targets).
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and
/// unmodified for `'a`.
pub(crate) unsafe fn string_arg<'a>(ptr: *const c_char) -> CapiResult<&'a str> {
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    // SAFETY: non-NULL and NUL-terminated per this function's contract.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|_| CapiError::InvalidUtf8)
}

/// An output argument: where the callee stores one value. The memory
/// behind it may be uninitialised, so it is only ever written whole,
/// never read or referenced.
pub(crate) struct Out<'a, T> {
    ptr: *mut T,
    _borrow: std::marker::PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// Stores `value` (without reading or dropping the old contents).
    pub(crate) fn set(&mut self, value: T) {
        // SAFETY: `ptr` is non-NULL, aligned and writable (checked by
        // `out_arg` and promised by its caller).
        unsafe { self.ptr.write(value) }
    }
}

/// An output argument the callee fills in.
///
/// # Safety
/// `ptr` is NULL or points to writable memory for one `T` that nothing
/// else accesses during `'a`.
pub(crate) unsafe fn out_arg<'a, T>(ptr: *mut T) -> CapiResult<Out<'a, T>> {
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    if !ptr.is_aligned() {
        return Err(CapiError::MisalignedPointer);
    }
    Ok(Out { ptr, _borrow: std::marker::PhantomData })
}

/// Checks a byte count against `ssize_t`, so every count can be returned.
fn checked_len(len: usize) -> CapiResult<usize> {
    if len > libc::ssize_t::MAX as usize {
        return Err(CapiError::CountTooLarge);
    }
    Ok(len)
}

/// A caller buffer to read from. NULL is allowed only when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or points to `len` readable bytes, valid for `'a`.
pub(crate) unsafe fn input_bytes<'a>(ptr: *const c_void, len: usize) -> CapiResult<&'a [u8]> {
    if checked_len(len)? == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    // SAFETY: non-NULL, `len` readable bytes per this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// A caller buffer to write into. NULL is allowed only when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or points to `len` writable bytes that nothing else
/// accesses during `'a`.
pub(crate) unsafe fn output_bytes<'a>(ptr: *mut c_void, len: usize) -> CapiResult<&'a mut [u8]> {
    if checked_len(len)? == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    // SAFETY: as for `input_bytes`, writable and unaliased. C callers often
    // pass uninitialised memory, so it is zeroed before a Rust slice (which
    // must only cover initialised bytes) is made over it; the cost is
    // small next to the network transfer that fills it.
    unsafe {
        std::ptr::write_bytes(ptr.cast::<u8>(), 0, len);
        Ok(std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len))
    }
}

/// A caller buffer that a noncontiguous read fills in part: bytes outside
/// the access keep their values, so the buffer is neither zeroed nor
/// copied. NULL is allowed only when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or points to `len` initialised, writable bytes that
/// nothing else accesses during `'a` (`weft.h` asks C callers to
/// initialise the buffers of noncontiguous reads).
pub(crate) unsafe fn inout_bytes<'a>(ptr: *mut c_void, len: usize) -> CapiResult<&'a mut [u8]> {
    if checked_len(len)? == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    // SAFETY: non-NULL, `len` initialised writable bytes per this
    // function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// A caller array of `len` elements. NULL is allowed only when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or points to `len` initialised elements, valid and
/// unmodified for `'a`.
pub(crate) unsafe fn array_arg<'a, T>(ptr: *const T, len: usize) -> CapiResult<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    if !ptr.is_aligned() {
        return Err(CapiError::MisalignedPointer);
    }
    if len.checked_mul(std::mem::size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(CapiError::CountTooLarge);
    }
    // SAFETY: non-NULL, aligned, `len` elements whose total size fits in
    // `isize`, per this function's contract and the checks above.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A file offset: `int64_t` in C, never negative.
pub(crate) fn offset_arg(offset: i64) -> CapiResult<u64> {
    u64::try_from(offset).map_err(|_| CapiError::NegativeOffset)
}

/// Copies `text` into a C buffer of `capacity` bytes like `snprintf`:
/// truncated to `capacity - 1` bytes, always NUL-terminated when
/// `capacity > 0`. Returns the full length of `text`.
pub(crate) fn copy_c_string(text: &str, buffer: &mut [u8]) -> usize {
    if let Some(room) = buffer.len().checked_sub(1) {
        let copied = text.len().min(room);
        buffer[..copied].copy_from_slice(&text.as_bytes()[..copied]);
        buffer[copied] = 0;
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_eio() {
        assert_eq!(status(|| panic!("boom")), -libc::EIO);
        assert_eq!(count(|| panic!("boom")), -(libc::EIO as libc::ssize_t));
    }

    #[test]
    fn strings_are_checked() {
        // SAFETY: NULL and a valid NUL-terminated literal.
        unsafe {
            assert_eq!(string_arg(std::ptr::null()), Err(CapiError::NullPointer));
            assert_eq!(string_arg(c"/a".as_ptr()), Ok("/a"));
            assert_eq!(string_arg(c"\xff\xfe".as_ptr()), Err(CapiError::InvalidUtf8));
        }
    }

    #[test]
    fn c_strings_are_truncated_and_terminated() {
        let mut small = [0xAAu8; 4];
        assert_eq!(copy_c_string("abcdef", &mut small), 6);
        assert_eq!(&small, b"abc\0");
        assert_eq!(copy_c_string("abc", &mut []), 3);
        assert_eq!(offset_arg(-1), Err(CapiError::NegativeOffset));
    }
}
