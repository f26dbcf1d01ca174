//! Noncontiguous I/O: `weft_pread_list`/`weft_pwrite_list` (region lists),
//! `weft_read_dtype`/`weft_write_dtype` (datatypes) and
//! `weft_set_io_method` (which wire method they use, for comparison).
//!
//! The Rust client does the work (`weft_client::noncontig`); this module
//! turns C arrays into region lists, checks everything a caller can get
//! wrong before any byte moves (pieces outside the buffer, negative file
//! offsets, list totals that differ, a file type without data), so that
//! refused arguments never mark a file as failed, and then applies the
//! write rules of [`crate::file`] (failure marking, `O_SYNC`).
//!
//! Reads fill only the bytes the memory pattern names; the rest of the
//! buffer keeps its contents, which is why read buffers must be
//! initialised (see [`boundary::inout_bytes`]).
//!
//! The read and write entry points mirror each other (a review with
//! `duplicates` pairs them): each is a C signature and a few lines that
//! differ in the buffer's mutability and the client call; the argument
//! checks are shared (`ListArgs`, `DtypeAccess`) and the transfer itself
//! is one client function per direction.

use std::ffi::{c_int, c_void};

use weft_client::{FileAccess, IoMethod, MemoryLayout};
use weft_dataloop::{Dataloop, Region};
use weft_proto::{limits, ErrorCode};

use crate::boundary::{self, array_arg, inout_bytes, input_bytes};
use crate::datatype::type_arg;
use crate::error::{CapiError, CapiResult};
use crate::file::FileState;
use crate::registry;
use crate::types::{weft_file_t, weft_type_t};

/// `WEFT_IO_DEFAULT`: datatype I/O for `weft_*_dtype`, list I/O with the
/// default chunking for `weft_p*_list`.
pub const IO_DEFAULT: c_int = 0;
/// `WEFT_IO_DATATYPE`: one request per datafile involved.
pub const IO_DATATYPE: c_int = 1;
/// `WEFT_IO_LIST`: list I/O with a chosen number of regions per request.
pub const IO_LIST: c_int = 2;
/// `WEFT_IO_POSIX`: one blocking request per contiguous piece.
pub const IO_POSIX: c_int = 3;

/// The method `weft_set_io_method` arguments select (`None`: default).
fn io_method_arg(method: c_int, regions_per_request: u32) -> CapiResult<Option<IoMethod>> {
    let chosen = match (method, regions_per_request) {
        (IO_DEFAULT, 0) => None,
        (IO_DATATYPE, 0) => Some(IoMethod::Datatype),
        (IO_POSIX, 0) => Some(IoMethod::Posix),
        (IO_LIST, 0) => Some(IoMethod::LIST_DEFAULT),
        (IO_LIST, n) if n <= limits::LIST_REGIONS_MAX => Some(IoMethod::List { regions_per_request: n }),
        _ => return Err(CapiError::InvalidIoMethod),
    };
    Ok(chosen)
}

/// The two sides of a list access, checked and converted.
struct ListAccess {
    memory: Vec<Region>,
    file: Vec<Region>,
    total: u64,
}

/// Pairs offsets with lengths; `offset_of` checks and converts an offset.
fn regions<O: Copy>(
    offsets: &[O],
    lengths: &[u64],
    offset_of: impl Fn(O) -> CapiResult<u64>,
) -> CapiResult<Vec<Region>> {
    offsets.iter().zip(lengths).map(|(offset, length)| Ok(Region::new(offset_of(*offset)?, *length))).collect()
}

/// The total length of `regions`; it must fit in `ssize_t` (the return value).
fn total_of(regions: &[Region]) -> CapiResult<u64> {
    let total = regions.iter().try_fold(0u64, |sum, region| sum.checked_add(region.length));
    total.filter(|total| *total <= libc::ssize_t::MAX as u64).ok_or(CapiError::CountTooLarge)
}

impl ListAccess {
    /// Checks the lists: memory pieces inside the buffer, file regions at
    /// non-negative offsets below the file size limit, equal totals.
    fn new(memory: Vec<Region>, file: Vec<Region>, buffer_bytes: usize) -> CapiResult<ListAccess> {
        if memory.iter().any(|r| r.end().is_none_or(|end| end > buffer_bytes as u64)) {
            return Err(CapiError::OutsideBuffer);
        }
        if file.iter().any(|r| r.end().is_none_or(|end| end > limits::FILE_BYTES_MAX)) {
            return Err(ErrorCode::TooBig.into());
        }
        let total = total_of(&memory)?;
        if total != total_of(&file)? {
            return Err(CapiError::ListTotalsDiffer);
        }
        Ok(ListAccess { memory, file, total })
    }
}

/// The list arguments of `weft_pread_list` and `weft_pwrite_list`.
struct ListArgs {
    memory_count: usize,
    memory_offsets: *const u64,
    memory_lengths: *const u64,
    file_count: usize,
    file_offsets: *const i64,
    file_lengths: *const u64,
}

impl ListArgs {
    /// # Safety
    /// Each array is NULL (only if its count is 0) or holds its count of
    /// elements.
    unsafe fn access(&self, buffer_bytes: usize) -> CapiResult<ListAccess> {
        // SAFETY: per this function's contract.
        let (memory_offsets, memory_lengths, file_offsets, file_lengths) = unsafe {
            (
                array_arg(self.memory_offsets, self.memory_count)?,
                array_arg(self.memory_lengths, self.memory_count)?,
                array_arg(self.file_offsets, self.file_count)?,
                array_arg(self.file_lengths, self.file_count)?,
            )
        };
        let memory = regions(memory_offsets, memory_lengths, Ok)?;
        let file = regions(file_offsets, file_lengths, boundary::offset_arg)?;
        ListAccess::new(memory, file, buffer_bytes)
    }
}

/// A datatype access, checked: `memory_count` instances of the memory type
/// inside the buffer, a file type with data if any byte moves.
struct DtypeAccess {
    memory_type: Dataloop,
    memory_count: u64,
    file_type: Dataloop,
    displacement: i64,
    view_offset: u64,
    total: u64,
}

impl DtypeAccess {
    fn new(
        memory_type: *const weft_type_t,
        memory_count: u64,
        displacement: i64,
        view_offset: u64,
        file_type: *const weft_type_t,
        buffer_bytes: usize,
    ) -> CapiResult<DtypeAccess> {
        let memory_type = type_arg(memory_type)?.dataloop.clone();
        let file_type = type_arg(file_type)?.dataloop.clone();
        let total = memory_count.checked_mul(memory_type.size()).filter(|total| *total <= libc::ssize_t::MAX as u64);
        let total = total.ok_or(CapiError::CountTooLarge)?;
        check_type_in_buffer(&memory_type, memory_count, buffer_bytes)?;
        if total > 0 && file_type.size() == 0 {
            return Err(CapiError::InvalidType);
        }
        view_offset.checked_add(total).ok_or(CapiError::CountTooLarge)?;
        Ok(DtypeAccess { memory_type, memory_count, file_type, displacement, view_offset, total })
    }

    fn memory(&self) -> MemoryLayout<'_> {
        MemoryLayout::Datatype { memory_type: &self.memory_type, count: self.memory_count }
    }

    fn file(&self) -> FileAccess<'_> {
        FileAccess::Datatype {
            file_type: &self.file_type,
            displacement: self.displacement,
            view_offset: self.view_offset,
        }
    }
}

/// Checks that every data byte of `count` instances of `memory_type`
/// (instance `i` at `i * extent`) lies in `[0, buffer_bytes)`.
fn check_type_in_buffer(memory_type: &Dataloop, count: u64, buffer_bytes: usize) -> CapiResult<()> {
    if count == 0 || memory_type.size() == 0 {
        return Ok(());
    }
    let last = i128::from(count - 1) * i128::from(memory_type.extent());
    let first_byte = i128::from(memory_type.true_lb()) + last.min(0);
    let end_byte = i128::from(memory_type.true_lb()) + i128::from(memory_type.true_extent()) + last.max(0);
    if first_byte < 0 || end_byte > buffer_bytes as i128 {
        return Err(CapiError::OutsideBuffer);
    }
    Ok(())
}

/// The method a file uses for a call whose natural method is `natural`.
fn method_of(state: &FileState, natural: IoMethod) -> IoMethod {
    let chosen = *state.io_method.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    chosen.unwrap_or(natural)
}

/// Chooses how the noncontiguous calls on `file` go over the wire:
/// `WEFT_IO_DEFAULT`, `WEFT_IO_DATATYPE`, `WEFT_IO_POSIX` (with
/// `regions_per_request` 0), or `WEFT_IO_LIST` with at most
/// `regions_per_request` regions per request (0: the default, 65,536).
///
/// # Safety
/// Any pointer value is accepted (see `weft_close`).
#[no_mangle]
pub unsafe extern "C" fn weft_set_io_method(file: *mut weft_file_t, method: c_int, regions_per_request: u32) -> c_int {
    boundary::status(|| {
        let state = registry::lookup::<FileState>(file)?;
        let chosen = io_method_arg(method, regions_per_request)?;
        *state.io_method.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = chosen;
        Ok(())
    })
}

/// List I/O read: the file regions `(file_offsets[i], file_lengths[i])`,
/// in order, into the buffer pieces `(memory_offsets[j],
/// memory_lengths[j])`, in order. Both totals must be equal; the pieces
/// need not pair up one to one. Returns the total. Bytes past the end of
/// the file read as zeros; buffer bytes outside the pieces are unchanged.
///
/// # Safety
/// `buffer` is NULL (only if `buffer_bytes` is 0) or points to
/// `buffer_bytes` initialised, writable bytes; each array is NULL (only if
/// its count is 0) or holds its count of elements.
#[no_mangle]
pub unsafe extern "C" fn weft_pread_list(
    file: *mut weft_file_t,
    buffer: *mut c_void,
    buffer_bytes: usize,
    memory_count: usize,
    memory_offsets: *const u64,
    memory_lengths: *const u64,
    file_count: usize,
    file_offsets: *const i64,
    file_lengths: *const u64,
) -> libc::ssize_t {
    let args = ListArgs { memory_count, memory_offsets, memory_lengths, file_count, file_offsets, file_lengths };
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        state.check_readable()?;
        // SAFETY: per this function's contract.
        let access = unsafe { args.access(buffer_bytes)? };
        // SAFETY: per this function's contract.
        let buffer = unsafe { inout_bytes(buffer, buffer_bytes)? };
        let method = method_of(&state, IoMethod::LIST_DEFAULT);
        let (memory, file_access) = (MemoryLayout::List(&access.memory), FileAccess::List(&access.file));
        state.client.read_noncontig(&state.file, method, buffer, memory, file_access)?;
        Ok(access.total as usize)
    })
}

/// List I/O write: the buffer pieces, in order, to the file regions, in
/// order (as [`weft_pread_list`]). Returns the total: a write completes or
/// fails. `-EINVAL` on a file opened with `O_APPEND`.
///
/// # Safety
/// `buffer` is NULL (only if `buffer_bytes` is 0) or points to
/// `buffer_bytes` readable bytes; each array is NULL (only if its count is
/// 0) or holds its count of elements.
#[no_mangle]
pub unsafe extern "C" fn weft_pwrite_list(
    file: *mut weft_file_t,
    buffer: *const c_void,
    buffer_bytes: usize,
    memory_count: usize,
    memory_offsets: *const u64,
    memory_lengths: *const u64,
    file_count: usize,
    file_offsets: *const i64,
    file_lengths: *const u64,
) -> libc::ssize_t {
    let args = ListArgs { memory_count, memory_offsets, memory_lengths, file_count, file_offsets, file_lengths };
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        // SAFETY: per this function's contract.
        let access = unsafe { args.access(buffer_bytes)? };
        // SAFETY: per this function's contract.
        let buffer = unsafe { input_bytes(buffer, buffer_bytes)? };
        let method = method_of(&state, IoMethod::LIST_DEFAULT);
        let (memory, file_access) = (MemoryLayout::List(&access.memory), FileAccess::List(&access.file));
        state.write_noncontig(|client, file| client.write_noncontig(file, method, buffer, memory, file_access))?;
        Ok(access.total as usize)
    })
}

/// Datatype I/O read: `memory_count` instances of `memory_type` in the
/// buffer are filled from the view that tiles `file_type` from byte
/// `displacement` of the file, starting `view_offset` bytes into the
/// view's data. Returns the bytes read (`memory_count` × size of
/// `memory_type`). Bytes past the end of the file read as zeros; buffer
/// bytes outside the memory type are unchanged.
///
/// # Safety
/// `buffer` is NULL (only if `buffer_bytes` is 0) or points to
/// `buffer_bytes` initialised, writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_read_dtype(
    file: *mut weft_file_t,
    buffer: *mut c_void,
    buffer_bytes: usize,
    memory_type: *const weft_type_t,
    memory_count: u64,
    displacement: i64,
    view_offset: u64,
    file_type: *const weft_type_t,
) -> libc::ssize_t {
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        state.check_readable()?;
        let access = DtypeAccess::new(memory_type, memory_count, displacement, view_offset, file_type, buffer_bytes)?;
        // SAFETY: per this function's contract.
        let buffer = unsafe { inout_bytes(buffer, buffer_bytes)? };
        let method = method_of(&state, IoMethod::Datatype);
        state.client.read_noncontig(&state.file, method, buffer, access.memory(), access.file())?;
        Ok(access.total as usize)
    })
}

/// Datatype I/O write: the data of `memory_count` instances of
/// `memory_type` in the buffer to the view (as [`weft_read_dtype`]).
/// Returns the bytes written. `-EINVAL` on a file opened with `O_APPEND`.
///
/// # Safety
/// `buffer` is NULL (only if `buffer_bytes` is 0) or points to
/// `buffer_bytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_write_dtype(
    file: *mut weft_file_t,
    buffer: *const c_void,
    buffer_bytes: usize,
    memory_type: *const weft_type_t,
    memory_count: u64,
    displacement: i64,
    view_offset: u64,
    file_type: *const weft_type_t,
) -> libc::ssize_t {
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        let access = DtypeAccess::new(memory_type, memory_count, displacement, view_offset, file_type, buffer_bytes)?;
        // SAFETY: per this function's contract.
        let buffer = unsafe { input_bytes(buffer, buffer_bytes)? };
        let method = method_of(&state, IoMethod::Datatype);
        let (memory, file_access) = (access.memory(), access.file());
        state.write_noncontig(|client, file| client.write_noncontig(file, method, buffer, memory, file_access))?;
        Ok(access.total as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_methods_are_checked() {
        assert_eq!(io_method_arg(IO_DEFAULT, 0), Ok(None));
        assert_eq!(io_method_arg(IO_LIST, 64), Ok(Some(IoMethod::List { regions_per_request: 64 })));
        assert_eq!(io_method_arg(IO_LIST, 0), Ok(Some(IoMethod::LIST_DEFAULT)));
        assert_eq!(io_method_arg(IO_LIST, limits::LIST_REGIONS_MAX + 1), Err(CapiError::InvalidIoMethod));
        assert_eq!(io_method_arg(IO_POSIX, 5), Err(CapiError::InvalidIoMethod));
        assert_eq!(io_method_arg(7, 0), Err(CapiError::InvalidIoMethod));
    }

    #[test]
    fn lists_are_checked() {
        let memory = vec![Region::new(0, 4), Region::new(8, 4)];
        assert!(ListAccess::new(memory.clone(), vec![Region::new(100, 8)], 12).is_ok());
        assert_eq!(
            ListAccess::new(memory.clone(), vec![Region::new(100, 8)], 11).err(),
            Some(CapiError::OutsideBuffer)
        );
        assert_eq!(ListAccess::new(memory, vec![Region::new(100, 9)], 12).err(), Some(CapiError::ListTotalsDiffer));
    }

    #[test]
    fn memory_types_must_fit_the_buffer() {
        let column = Dataloop::vector(4, 1, 4, &Dataloop::bytes(2).unwrap()).unwrap(); // 4 × 2 bytes, 8 apart
        assert_eq!(check_type_in_buffer(&column, 1, 26), Ok(()));
        assert_eq!(check_type_in_buffer(&column, 1, 25), Err(CapiError::OutsideBuffer));
        let shifted = Dataloop::resized(&column, -4, 32).unwrap();
        assert_eq!(check_type_in_buffer(&shifted, 2, 58), Ok(()));
        let negative = Dataloop::hindexed_block(1, &[-2], &Dataloop::bytes(2).unwrap()).unwrap();
        assert_eq!(check_type_in_buffer(&negative, 1, 100), Err(CapiError::OutsideBuffer));
    }
}
