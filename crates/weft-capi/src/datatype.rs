//! Datatype handles (`weft_type_t *`): immutable access patterns built
//! with MPI-style constructors, used by `weft_read_dtype` and
//! `weft_write_dtype` as memory and file types.
//!
//! A handle owns one validated [`Dataloop`]. Constructors copy what they
//! need from their children, so a child may be freed right after a
//! constructor returns; a type stays valid until `weft_type_free`. The
//! arithmetic and the limits (depth, node count, displacement entries)
//! live in `weft-dataloop`; this module only checks C arguments and maps
//! the builders' errors (overflow → `EOVERFLOW`, anything else →
//! `EINVAL`).
//!
//! One `extern "C"` constructor per MPI type constructor, each a few lines
//! of the same shape (argument arrays, then the builder, through
//! `construct`): a review with `duplicates` pairs them, and that is
//! accepted — the C names and signatures must exist one by one, and the
//! shared work already lives in `construct`, `array_arg` and `type_arg`.

use std::ffi::c_int;
use std::sync::Arc;

use weft_dataloop::mpi_types::{self, Distribution, DistributionArg, MpiTypeError, Order};
use weft_dataloop::{BuildError, Dataloop};

use crate::boundary::{self, array_arg, out_arg};
use crate::error::{CapiError, CapiResult};
use crate::registry::{self, Object, Registered};
use crate::types::weft_type_t;

/// `WEFT_ORDER_C`: row-major, the last index varies fastest.
pub const ORDER_C: c_int = 0;
/// `WEFT_ORDER_FORTRAN`: column-major, the first index varies fastest.
pub const ORDER_FORTRAN: c_int = 1;
/// `WEFT_DISTRIBUTE_NONE`: the dimension is not distributed.
pub const DISTRIBUTE_NONE: c_int = 0;
/// `WEFT_DISTRIBUTE_BLOCK`: block distribution.
pub const DISTRIBUTE_BLOCK: c_int = 1;
/// `WEFT_DISTRIBUTE_CYCLIC`: cyclic distribution.
pub const DISTRIBUTE_CYCLIC: c_int = 2;
/// `WEFT_DARG_DEFAULT`: the default distribution argument of a dimension.
pub const DARG_DEFAULT: i64 = -1;

/// State of one `weft_type_t`.
pub(crate) struct TypeState {
    /// The pattern; never changed after construction.
    pub(crate) dataloop: Dataloop,
}

impl Registered for TypeState {
    type Opaque = weft_type_t;
    fn wrap(state: Arc<Self>) -> Object {
        Object::Type(state)
    }
    fn unwrap(object: &Object) -> Option<&Arc<Self>> {
        match object {
            Object::Type(state) => Some(state),
            Object::Fs(_) | Object::File(_) | Object::Dir(_) => None,
        }
    }
}

/// The error a C caller sees for a builder failure.
fn build_error(error: BuildError) -> CapiError {
    match error {
        BuildError::Overflow { .. } => CapiError::TypeOverflow,
        BuildError::Empty
        | BuildError::TooManyNodes
        | BuildError::TooDeep
        | BuildError::TooManyDisplacements
        | BuildError::TooLarge
        | BuildError::ChildNotEarlier { .. }
        | BuildError::LengthMismatch { .. }
        | BuildError::Negative
        | BuildError::EmptyBlock { .. } => CapiError::InvalidType,
        // `BuildError` is `#[non_exhaustive]` in another crate, so a
        // wildcard is forced; an unknown failure is a bad argument.
        _ => CapiError::InvalidType,
    }
}

/// The error a C caller sees for a subarray or darray failure.
fn mpi_type_error(error: MpiTypeError) -> CapiError {
    match error {
        MpiTypeError::Overflow => CapiError::TypeOverflow,
        MpiTypeError::Build(inner) => build_error(inner),
        MpiTypeError::DimensionMismatch
        | MpiTypeError::ZeroSize { .. }
        | MpiTypeError::OutOfBounds { .. }
        | MpiTypeError::ProcessGrid
        | MpiTypeError::ZeroDistributionArg { .. }
        | MpiTypeError::BlockTooSmall { .. }
        | MpiTypeError::NotDistributed { .. } => CapiError::InvalidType,
        // `#[non_exhaustive]` in another crate, as above.
        _ => CapiError::InvalidType,
    }
}

/// The pattern behind a live type handle.
pub(crate) fn type_arg(handle: *const weft_type_t) -> CapiResult<Arc<TypeState>> {
    registry::lookup::<TypeState>(handle)
}

/// Runs a constructor: `*out` is NULL on failure, a new handle on success.
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
unsafe fn construct(out: *mut *mut weft_type_t, build: impl FnOnce() -> CapiResult<Dataloop>) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let mut out = unsafe { out_arg(out)? };
        out.set(std::ptr::null_mut());
        let dataloop = build()?;
        out.set(registry::register(TypeState { dataloop }));
        Ok(())
    })
}

fn order_arg(order: c_int) -> CapiResult<Order> {
    match order {
        ORDER_C => Ok(Order::C),
        ORDER_FORTRAN => Ok(Order::Fortran),
        _ => Err(CapiError::InvalidType),
    }
}

fn distribution_arg(distribution: c_int) -> CapiResult<Distribution> {
    match distribution {
        DISTRIBUTE_NONE => Ok(Distribution::None),
        DISTRIBUTE_BLOCK => Ok(Distribution::Block),
        DISTRIBUTE_CYCLIC => Ok(Distribution::Cyclic),
        _ => Err(CapiError::InvalidType),
    }
}

fn darg_arg(darg: i64) -> CapiResult<DistributionArg> {
    match darg {
        DARG_DEFAULT => Ok(DistributionArg::Default),
        value if value > 0 => Ok(DistributionArg::Value(value as u64)),
        _ => Err(CapiError::InvalidType),
    }
}

/// `size` contiguous bytes (a named type: 8 for a double).
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_bytes(size: u64, out: *mut *mut weft_type_t) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { construct(out, || Dataloop::bytes(size).map_err(build_error)) }
}

/// `count` consecutive instances of `child` (`MPI_Type_contiguous`).
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_contiguous(
    count: u64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { construct(out, || Dataloop::contiguous(count, &type_arg(child)?.dataloop).map_err(build_error)) }
}

/// `count` blocks of `blocklength` children, `stride` child extents apart
/// (`MPI_Type_vector`).
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_vector(
    count: u64,
    blocklength: u64,
    stride: i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || Dataloop::vector(count, blocklength, stride, &type_arg(child)?.dataloop).map_err(build_error);
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// As [`weft_type_vector`] with the stride in bytes
/// (`MPI_Type_create_hvector`).
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_hvector(
    count: u64,
    blocklength: u64,
    stride_bytes: i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || Dataloop::hvector(count, blocklength, stride_bytes, &type_arg(child)?.dataloop).map_err(build_error);
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// `count` blocks; block `i` is `blocklengths[i]` children at
/// `displacements[i]` child extents (`MPI_Type_indexed`).
///
/// # Safety
/// The arrays are NULL (only if `count` is 0) or hold `count` elements;
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_indexed(
    count: usize,
    blocklengths: *const u64,
    displacements: *const i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        // SAFETY: per this function's contract.
        let (lengths, displacements) = unsafe { (array_arg(blocklengths, count)?, array_arg(displacements, count)?) };
        Dataloop::indexed(lengths, displacements, &type_arg(child)?.dataloop).map_err(build_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// As [`weft_type_indexed`] with displacements in bytes
/// (`MPI_Type_create_hindexed`).
///
/// # Safety
/// As for [`weft_type_indexed`].
#[no_mangle]
pub unsafe extern "C" fn weft_type_hindexed(
    count: usize,
    blocklengths: *const u64,
    displacements_bytes: *const i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        // SAFETY: per this function's contract.
        let (lengths, displacements) =
            unsafe { (array_arg(blocklengths, count)?, array_arg(displacements_bytes, count)?) };
        Dataloop::hindexed(lengths, displacements, &type_arg(child)?.dataloop).map_err(build_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// `count` blocks of `blocklength` children at `displacements[i]` child
/// extents (`MPI_Type_create_indexed_block`).
///
/// # Safety
/// `displacements` is NULL (only if `count` is 0) or holds `count`
/// elements; `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_indexed_block(
    count: usize,
    blocklength: u64,
    displacements: *const i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        // SAFETY: per this function's contract.
        let displacements = unsafe { array_arg(displacements, count)? };
        Dataloop::indexed_block(blocklength, displacements, &type_arg(child)?.dataloop).map_err(build_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// As [`weft_type_indexed_block`] with displacements in bytes
/// (`MPI_Type_create_hindexed_block`).
///
/// # Safety
/// As for [`weft_type_indexed_block`].
#[no_mangle]
pub unsafe extern "C" fn weft_type_hindexed_block(
    count: usize,
    blocklength: u64,
    displacements_bytes: *const i64,
    child: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        // SAFETY: per this function's contract.
        let displacements = unsafe { array_arg(displacements_bytes, count)? };
        Dataloop::hindexed_block(blocklength, displacements, &type_arg(child)?.dataloop).map_err(build_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// `count` blocks; block `i` is `blocklengths[i]` instances of
/// `children[i]` at `displacements_bytes[i]` (`MPI_Type_create_struct`).
///
/// # Safety
/// The arrays are NULL (only if `count` is 0) or hold `count` elements;
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_struct(
    count: usize,
    blocklengths: *const u64,
    displacements_bytes: *const i64,
    children: *const *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        // SAFETY: per this function's contract.
        let (lengths, displacements, handles) = unsafe {
            (array_arg(blocklengths, count)?, array_arg(displacements_bytes, count)?, array_arg(children, count)?)
        };
        let states = handles.iter().map(|handle| type_arg(*handle)).collect::<CapiResult<Vec<_>>>()?;
        let children: Vec<&Dataloop> = states.iter().map(|state| &state.dataloop).collect();
        Dataloop::create_struct(lengths, displacements, &children).map_err(build_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// The data of `child` with a new lower bound and extent, both in bytes
/// (`MPI_Type_create_resized`).
///
/// # Safety
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_resized(
    child: *const weft_type_t,
    lb: i64,
    extent: i64,
    out: *mut *mut weft_type_t,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { construct(out, || Dataloop::resized(&type_arg(child)?.dataloop, lb, extent).map_err(build_error)) }
}

/// A `subsizes` box at `starts` in a `sizes` array of `element`s
/// (`MPI_Type_create_subarray`); `order` is `WEFT_ORDER_C` or
/// `WEFT_ORDER_FORTRAN`.
///
/// # Safety
/// The arrays are NULL (only if `ndims` is 0) or hold `ndims` elements;
/// `out` is NULL or points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_subarray(
    ndims: u32,
    sizes: *const u64,
    subsizes: *const u64,
    starts: *const u64,
    order: c_int,
    element: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        let n = ndims as usize;
        // SAFETY: per this function's contract.
        let (sizes, subsizes, starts) =
            unsafe { (array_arg(sizes, n)?, array_arg(subsizes, n)?, array_arg(starts, n)?) };
        let element = type_arg(element)?;
        mpi_types::subarray(ndims, sizes, subsizes, starts, order_arg(order)?, &element.dataloop)
            .map_err(mpi_type_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// The piece of a `gsizes` array of `element`s that process `rank` of a
/// `psizes` grid of `size` processes owns (`MPI_Type_create_darray`).
/// `distributions[i]` is a `WEFT_DISTRIBUTE_*` value; `dargs[i]` is a
/// block size in elements or `WEFT_DARG_DEFAULT`, and `dargs` may be NULL
/// for all defaults.
///
/// # Safety
/// `gsizes`, `distributions` and `psizes` are NULL (only if `ndims` is 0)
/// or hold `ndims` elements; so does `dargs` unless NULL; `out` is NULL or
/// points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_type_darray(
    size: u32,
    rank: u32,
    ndims: u32,
    gsizes: *const u64,
    distributions: *const c_int,
    dargs: *const i64,
    psizes: *const u64,
    order: c_int,
    element: *const weft_type_t,
    out: *mut *mut weft_type_t,
) -> c_int {
    let build = || {
        let n = ndims as usize;
        // SAFETY: per this function's contract.
        let (gsizes, distributions, psizes) =
            unsafe { (array_arg(gsizes, n)?, array_arg(distributions, n)?, array_arg(psizes, n)?) };
        let distributions = distributions.iter().map(|d| distribution_arg(*d)).collect::<CapiResult<Vec<_>>>()?;
        let dargs = if dargs.is_null() {
            vec![DistributionArg::Default; n]
        } else {
            // SAFETY: per this function's contract.
            unsafe { array_arg(dargs, n)? }.iter().map(|d| darg_arg(*d)).collect::<CapiResult<Vec<_>>>()?
        };
        let element = type_arg(element)?;
        let order = order_arg(order)?;
        mpi_types::darray(size, rank, ndims, gsizes, &distributions, &dargs, psizes, order, &element.dataloop)
            .map_err(mpi_type_error)
    };
    // SAFETY: per this function's contract.
    unsafe { construct(out, build) }
}

/// Data bytes of one instance of `type_handle`.
///
/// # Safety
/// `size` is NULL or points to writable storage for one `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn weft_type_size(type_handle: *const weft_type_t, size: *mut u64) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let mut size = unsafe { out_arg(size)? };
        size.set(type_arg(type_handle)?.dataloop.size());
        Ok(())
    })
}

/// Lower bound and extent of one instance of `type_handle`, in bytes.
///
/// # Safety
/// `lb` and `extent` are NULL or point to writable storage for one
/// `int64_t` each.
#[no_mangle]
pub unsafe extern "C" fn weft_type_extent(type_handle: *const weft_type_t, lb: *mut i64, extent: *mut i64) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let (mut lb, mut extent) = unsafe { (out_arg(lb)?, out_arg(extent)?) };
        let state = type_arg(type_handle)?;
        lb.set(state.dataloop.lb());
        extent.set(state.dataloop.extent());
        Ok(())
    })
}

/// Frees a type. Types built from it are unaffected.
///
/// # Safety
/// Any pointer value is accepted; a value that is not a live type gives
/// `-EBADF` (NULL gives `-EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn weft_type_free(type_handle: *mut weft_type_t) -> c_int {
    boundary::status(|| registry::unregister::<TypeState>(type_handle).map(drop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_errors_map_to_errnos() {
        assert_eq!(build_error(BuildError::Overflow { node: 0 }).errno(), libc::EOVERFLOW);
        assert_eq!(build_error(BuildError::Negative).errno(), libc::EINVAL);
        assert_eq!(mpi_type_error(MpiTypeError::Overflow).errno(), libc::EOVERFLOW);
        assert_eq!(mpi_type_error(MpiTypeError::Build(BuildError::Overflow { node: 3 })).errno(), libc::EOVERFLOW);
        assert_eq!(mpi_type_error(MpiTypeError::ProcessGrid).errno(), libc::EINVAL);
    }

    #[test]
    fn enumerations_are_checked() {
        assert_eq!(order_arg(2), Err(CapiError::InvalidType));
        assert_eq!(distribution_arg(-1), Err(CapiError::InvalidType));
        assert_eq!(darg_arg(0), Err(CapiError::InvalidType));
        assert_eq!(darg_arg(-2), Err(CapiError::InvalidType));
        assert_eq!(darg_arg(DARG_DEFAULT), Ok(DistributionArg::Default));
        assert_eq!(darg_arg(4), Ok(DistributionArg::Value(4)));
    }
}
