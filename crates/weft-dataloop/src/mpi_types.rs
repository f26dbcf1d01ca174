//! `subarray` and `darray` constructors, following MPI-3.1 §4.1.3 and §4.1.4.
//!
//! This module owns the translation of array-shaped MPI types into plain
//! dataloops built from [`Dataloop`]'s constructors:
//!
//! - **subarray**: a `subsizes` box at `starts` inside a `sizes` array of
//!   `element`s, in C (last index fastest) or Fortran (first index fastest)
//!   order. Built fastest dimension first as `contiguous` then nested
//!   `hvector`s, displaced to the box start, then resized to `lb = 0` and
//!   `extent = prod(sizes) * extent(element)`.
//! - **darray**: the piece of a `gsizes` array that process `rank` of a
//!   `psizes` grid owns. Process coordinates are row-major in the grid
//!   (MPI's rule, whatever `order` says). Each dimension, fastest first, is
//!   `cyclic(darg)`: global index `g` belongs to coordinate
//!   `(g / darg) % psize`; `block` is `cyclic(ceil(gsize / psize))` by default
//!   and requires `darg * psize >= gsize`; `none` requires `psize == 1` and
//!   keeps the whole dimension. Each dimension type is resized to `lb = 0`,
//!   `extent = gsize * extent(previous)`, so the result spans the full array.
//!
//! All arithmetic is checked; sizes and offsets beyond `i64` are errors.

use crate::dataloop::{BuildError, Dataloop};

/// Array storage order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last index varies fastest.
    C,
    /// Column-major: the first index varies fastest.
    Fortran,
}

/// How one dimension of a darray is spread over the process grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// `MPI_DISTRIBUTE_BLOCK`.
    Block,
    /// `MPI_DISTRIBUTE_CYCLIC`.
    Cyclic,
    /// `MPI_DISTRIBUTE_NONE`.
    None,
}

/// The distribution argument of one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistributionArg {
    /// `MPI_DISTRIBUTE_DFLT_DARG`: `ceil(gsize/psize)` for block, 1 for cyclic.
    Default,
    /// An explicit block size in elements (at least 1).
    Value(u64),
}

/// Why a subarray or darray is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MpiTypeError {
    /// `ndims` is 0 or an array's length differs from `ndims`.
    #[error("ndims is zero or does not match an array length")]
    DimensionMismatch,
    /// A dimension has size 0 (or subsize 0).
    #[error("dimension {dim} has size zero")]
    ZeroSize {
        /// Offending dimension.
        dim: u32,
    },
    /// `starts[dim] + subsizes[dim] > sizes[dim]`.
    #[error("subarray exceeds the array in dimension {dim}")]
    OutOfBounds {
        /// Offending dimension.
        dim: u32,
    },
    /// The grid (`prod(psizes)`) does not have `size` processes, or `rank >= size`.
    #[error("process grid does not match size/rank")]
    ProcessGrid,
    /// An explicit distribution argument is 0.
    #[error("zero distribution argument in dimension {dim}")]
    ZeroDistributionArg {
        /// Offending dimension.
        dim: u32,
    },
    /// Block distribution with `darg * psize < gsize`.
    #[error("block size too small to cover dimension {dim}")]
    BlockTooSmall {
        /// Offending dimension.
        dim: u32,
    },
    /// `Distribution::None` with `psize != 1`.
    #[error("undistributed dimension {dim} needs a process-grid size of 1")]
    NotDistributed {
        /// Offending dimension.
        dim: u32,
    },
    /// A size or offset overflows `i64`.
    #[error("size or offset overflows i64")]
    Overflow,
    /// Building the dataloop failed.
    #[error("building the dataloop failed: {0}")]
    Build(#[from] BuildError),
}

fn to_i64(value: i128) -> Result<i64, MpiTypeError> {
    i64::try_from(value).map_err(|_| MpiTypeError::Overflow)
}

/// Dimension indices, fastest-varying first.
fn fastest_first(ndims: usize, order: Order) -> Vec<usize> {
    match order {
        Order::C => (0..ndims).rev().collect(),
        Order::Fortran => (0..ndims).collect(),
    }
}

/// `t` moved by `displacement_bytes` (bounds are reset by the caller).
fn displaced(t: Dataloop, displacement_bytes: i64) -> Result<Dataloop, MpiTypeError> {
    if displacement_bytes == 0 {
        return Ok(t);
    }
    Ok(Dataloop::hindexed_block(1, &[displacement_bytes], &t)?)
}

/// `MPI_Type_create_subarray`.
pub fn subarray(
    ndims: u32,
    sizes: &[u64],
    subsizes: &[u64],
    starts: &[u64],
    order: Order,
    element: &Dataloop,
) -> Result<Dataloop, MpiTypeError> {
    let n = ndims as usize;
    if n == 0 || sizes.len() != n || subsizes.len() != n || starts.len() != n {
        return Err(MpiTypeError::DimensionMismatch);
    }
    for dim in 0..n {
        if sizes[dim] == 0 || subsizes[dim] == 0 {
            return Err(MpiTypeError::ZeroSize { dim: dim as u32 });
        }
        if starts[dim] as u128 + subsizes[dim] as u128 > sizes[dim] as u128 {
            return Err(MpiTypeError::OutOfBounds { dim: dim as u32 });
        }
    }
    let dims = fastest_first(n, order);
    let mut t = Dataloop::contiguous(subsizes[dims[0]], element)?;
    let mut stride = element.extent() as i128;
    let mut displacement = starts[dims[0]] as i128 * stride;
    stride = stride.checked_mul(sizes[dims[0]] as i128).ok_or(MpiTypeError::Overflow)?;
    for &dim in &dims[1..] {
        t = Dataloop::hvector(subsizes[dim], 1, to_i64(stride)?, &t)?;
        displacement += starts[dim] as i128 * stride;
        stride = stride.checked_mul(sizes[dim] as i128).ok_or(MpiTypeError::Overflow)?;
    }
    let t = displaced(t, to_i64(displacement)?)?;
    Ok(Dataloop::resized(&t, 0, to_i64(stride)?)?)
}

/// Row-major coordinates of `rank` in the `psizes` grid.
fn grid_coordinates(size: u32, rank: u32, psizes: &[u64]) -> Result<Vec<u64>, MpiTypeError> {
    let product = psizes.iter().try_fold(1u128, |acc, p| acc.checked_mul(*p as u128));
    if product != Some(size as u128) || rank >= size {
        return Err(MpiTypeError::ProcessGrid);
    }
    let mut remaining_size = size as u64;
    let mut remaining_rank = rank as u64;
    let mut coordinates = Vec::with_capacity(psizes.len());
    for p in psizes {
        remaining_size /= p;
        coordinates.push(remaining_rank / remaining_size);
        remaining_rank %= remaining_size;
    }
    Ok(coordinates)
}

/// One dimension's spread: `(darg, psize)` for a `cyclic(darg)` walk.
fn block_size(
    dim: u32,
    distribution: Distribution,
    argument: DistributionArg,
    gsize: u64,
    psize: u64,
) -> Result<u64, MpiTypeError> {
    let explicit = match argument {
        DistributionArg::Default => None,
        DistributionArg::Value(0) => return Err(MpiTypeError::ZeroDistributionArg { dim }),
        DistributionArg::Value(v) => Some(v),
    };
    match distribution {
        Distribution::None if psize != 1 => Err(MpiTypeError::NotDistributed { dim }),
        Distribution::None => Ok(gsize),
        Distribution::Cyclic => Ok(explicit.unwrap_or(1)),
        Distribution::Block => {
            let darg = explicit.unwrap_or(gsize.div_ceil(psize));
            if (darg as u128) * (psize as u128) < gsize as u128 {
                return Err(MpiTypeError::BlockTooSmall { dim });
            }
            Ok(darg)
        }
    }
}

/// The elements of one dimension owned by grid coordinate `coordinate`:
/// `cyclic(darg)` over `psize` processes, resized to the whole dimension.
fn cyclic(darg: u64, gsize: u64, coordinate: u64, psize: u64, old: &Dataloop) -> Result<Dataloop, MpiTypeError> {
    let extent = old.extent() as i128;
    let blocks = gsize.div_ceil(darg);
    let mine = if coordinate < blocks { (blocks - coordinate - 1) / psize + 1 } else { 0 };
    let last_length = gsize - (blocks - 1) * darg;
    let owns_last = mine > 0 && coordinate + (mine - 1) * psize == blocks - 1;
    let partial = owns_last && last_length < darg;
    let full = if partial { mine - 1 } else { mine };
    let first_at = to_i64(coordinate as i128 * darg as i128 * extent)?;
    let last_at = to_i64((blocks - 1) as i128 * darg as i128 * extent)?;
    let stride = to_i64(psize as i128 * darg as i128 * extent)?;
    let full_type = Dataloop::hvector(full, darg, stride, old)?;
    let partial_type = Dataloop::contiguous(last_length, old)?;
    let t = match (full > 0, partial) {
        (true, true) => Dataloop::create_struct(&[1, 1], &[first_at, last_at], &[&full_type, &partial_type])?,
        (true, false) => displaced(full_type, first_at)?,
        (false, true) => displaced(partial_type, last_at)?,
        (false, false) => Dataloop::contiguous(0, old)?,
    };
    Ok(Dataloop::resized(&t, 0, to_i64(gsize as i128 * extent)?)?)
}

/// `MPI_Type_create_darray`.
#[allow(clippy::too_many_arguments)]
pub fn darray(
    size: u32,
    rank: u32,
    ndims: u32,
    gsizes: &[u64],
    distribs: &[Distribution],
    dargs: &[DistributionArg],
    psizes: &[u64],
    order: Order,
    element: &Dataloop,
) -> Result<Dataloop, MpiTypeError> {
    let n = ndims as usize;
    let lengths_ok = [gsizes.len(), distribs.len(), dargs.len(), psizes.len()].iter().all(|l| *l == n);
    if n == 0 || !lengths_ok {
        return Err(MpiTypeError::DimensionMismatch);
    }
    if let Some(dim) = (0..n).find(|d| gsizes[*d] == 0 || psizes[*d] == 0) {
        return Err(MpiTypeError::ZeroSize { dim: dim as u32 });
    }
    let coordinates = grid_coordinates(size, rank, psizes)?;
    let mut t = element.clone();
    for dim in fastest_first(n, order) {
        let darg = block_size(dim as u32, distribs[dim], dargs[dim], gsizes[dim], psizes[dim])?;
        t = cyclic(darg, gsizes[dim], coordinates[dim], psizes[dim], &t)?;
    }
    Ok(t)
}
