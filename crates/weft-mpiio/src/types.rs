//! Datatypes as dataloops.
//!
//! The C layer walks an MPI datatype with `MPI_Type_get_envelope` and
//! `MPI_Type_get_contents` and writes a postfix program of `i64` words:
//! children first, then the constructor that consumes them. [`build`]
//! runs it on an explicit stack (no recursion), checking every count
//! against the words present, so a malformed program is an error, never a
//! panic. Nothing is flattened: a constructor with n blocks (an hindexed
//! or struct type of 20,000 chunks, as HDF5 builds) stays one dataloop node
//! of n entries. The only bound here is the program's length,
//! [`limits::MPI_DATATYPE_PROGRAM_WORDS_MAX`]; every entry on the stack
//! consumed at least three words, so it bounds the stack too. The
//! dataloop's own limits (`limits::DATALOOP_*`) then apply. Built dataloops live in a registry under a numeric id,
//! which the C layer caches on the MPI datatype as an attribute and frees
//! with it.
//!
//! Program words (`op` then its operands):
//! - `1 size extent`: a named type of `size` contiguous bytes.
//! - `2 count`: contiguous (pops 1).
//! - `3 count blocklength stride` / `4 ... stride_bytes`: vector / hvector.
//! - `5 n bl[n] disp[n]` / `6 ...`: indexed / hindexed (bytes).
//! - `7 n bl disp[n]` / `8 n bl disp[n]`: indexed_block / hindexed_block.
//! - `9 n bl[n] disp[n]`: struct (pops n, first pushed is child 0).
//! - `10 lb extent`: resized.
//! - `11 ndims sizes[n] subsizes[n] starts[n] order`: subarray (order 0 = C).
//! - `12 size rank ndims gsizes[n] distribs[n] dargs[n] psizes[n] order`:
//!   darray (distrib 0 block, 1 cyclic, 2 none; darg -1 = default).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use weft_dataloop::{mpi_types, BuildError, Dataloop, Distribution, DistributionArg, Order};

use weft_proto::limits;

use crate::compact;
use crate::error::{MpiClass, MpiResult};

/// Reads operands of a program, failing on a short program.
struct Words<'a> {
    words: &'a [i64],
    next: usize,
}

impl Words<'_> {
    fn one(&mut self) -> MpiResult<i64> {
        let word = *self.words.get(self.next).ok_or(MpiClass::Type)?;
        self.next += 1;
        Ok(word)
    }

    fn unsigned(&mut self) -> MpiResult<u64> {
        u64::try_from(self.one()?).map_err(|_| MpiClass::Type)
    }

    fn many(&mut self, n: u64) -> MpiResult<&[i64]> {
        let n = usize::try_from(n).map_err(|_| MpiClass::Type)?;
        let end = self.next.checked_add(n).filter(|end| *end <= self.words.len()).ok_or(MpiClass::Type)?;
        let slice = &self.words[self.next..end];
        self.next = end;
        Ok(slice)
    }

    fn many_unsigned(&mut self, n: u64) -> MpiResult<Vec<u64>> {
        self.many(n)?.iter().map(|w| u64::try_from(*w).map_err(|_| MpiClass::Type)).collect()
    }
}

fn pop(stack: &mut Vec<Dataloop>) -> MpiResult<Dataloop> {
    stack.pop().ok_or(MpiClass::Type)
}

fn order(word: i64) -> MpiResult<Order> {
    match word {
        0 => Ok(Order::C),
        1 => Ok(Order::Fortran),
        _ => Err(MpiClass::Type),
    }
}

fn built<E>(result: Result<Dataloop, E>) -> MpiResult<Dataloop> {
    result.map_err(|_| MpiClass::Type)
}

/// Runs a postfix datatype program; exactly one dataloop must remain.
pub fn build(program: &[i64]) -> MpiResult<Dataloop> {
    if program.len() as u64 > limits::MPI_DATATYPE_PROGRAM_WORDS_MAX {
        return Err(MpiClass::Type);
    }
    let mut words = Words { words: program, next: 0 };
    let mut stack: Vec<Dataloop> = Vec::new();
    while words.next < program.len() {
        let op = words.one()?;
        let made = step(op, &mut words, &mut stack)?;
        stack.push(made);
    }
    match (stack.pop(), stack.is_empty()) {
        (Some(result), true) => Ok(result),
        _ => Err(MpiClass::Type),
    }
}

fn step(op: i64, w: &mut Words<'_>, stack: &mut Vec<Dataloop>) -> MpiResult<Dataloop> {
    match op {
        1 => {
            let size = w.unsigned()?;
            let extent = w.one()?;
            let bytes = built(Dataloop::bytes(size))?;
            if extent == size as i64 {
                Ok(bytes)
            } else {
                built(Dataloop::resized(&bytes, 0, extent))
            }
        }
        2 => {
            let count = w.unsigned()?;
            built(Dataloop::contiguous(count, &pop(stack)?))
        }
        3 | 4 => {
            let (count, blocklength, stride) = (w.unsigned()?, w.unsigned()?, w.one()?);
            let child = pop(stack)?;
            if op == 3 {
                built(Dataloop::vector(count, blocklength, stride, &child))
            } else {
                built(Dataloop::hvector(count, blocklength, stride, &child))
            }
        }
        5 | 6 => {
            let n = w.unsigned()?;
            let blocklengths = w.many_unsigned(n)?;
            let displacements = w.many(n)?.to_vec();
            let child = pop(stack)?;
            let plain = if op == 5 {
                Dataloop::indexed(&blocklengths, &displacements, &child)
            } else {
                Dataloop::hindexed(&blocklengths, &displacements, &child)
            };
            let unit = if op == 5 { child.extent() } else { 1 };
            or_compact(plain, &blocklengths, &displacements, unit, &child)
        }
        7 | 8 => {
            let n = w.unsigned()?;
            let blocklength = w.unsigned()?;
            let displacements = w.many(n)?.to_vec();
            let child = pop(stack)?;
            let plain = if op == 7 {
                Dataloop::indexed_block(blocklength, &displacements, &child)
            } else {
                Dataloop::hindexed_block(blocklength, &displacements, &child)
            };
            let unit = if op == 7 { child.extent() } else { 1 };
            let blocklengths = vec![blocklength; displacements.len()];
            or_compact(plain, &blocklengths, &displacements, unit, &child)
        }
        9 => structure(w, stack),
        10 => {
            let (lb, extent) = (w.one()?, w.one()?);
            built(Dataloop::resized(&pop(stack)?, lb, extent))
        }
        11 => subarray(w, stack),
        12 => darray(w, stack),
        _ => Err(MpiClass::Type),
    }
}

fn structure(w: &mut Words<'_>, stack: &mut Vec<Dataloop>) -> MpiResult<Dataloop> {
    let n = w.unsigned()?;
    let blocklengths = w.many_unsigned(n)?;
    let displacements = w.many(n)?.to_vec();
    let n = usize::try_from(n).map_err(|_| MpiClass::Type)?;
    let first = stack.len().checked_sub(n).ok_or(MpiClass::Type)?;
    let children: Vec<Dataloop> = stack.drain(first..).collect();
    let (blocklengths, displacements, children) = contiguous_children_as_bytes(blocklengths, displacements, children)?;
    let refs: Vec<&Dataloop> = children.iter().collect();
    match Dataloop::create_struct(&blocklengths, &displacements, &refs) {
        Err(err) if beyond_limits(err) => {
            built(compact::periodic_struct(&blocklengths, &displacements, &refs).ok_or(MpiClass::Type)?)
        }
        plain => built(plain),
    }
}

/// Whether a build failed only for its size (see [`compact`]).
fn beyond_limits(err: BuildError) -> bool {
    matches!(err, BuildError::TooManyDisplacements | BuildError::TooLarge | BuildError::TooManyNodes)
}

/// `plain` (an indexed type of one child), or, when it is beyond the
/// dataloop's limits, the same blocks as a compact loop if they have a
/// period; displacements count `unit` bytes.
fn or_compact(
    plain: Result<Dataloop, BuildError>,
    blocklengths: &[u64],
    displacements: &[i64],
    unit: i64,
    child: &Dataloop,
) -> MpiResult<Dataloop> {
    match plain {
        Err(err) if beyond_limits(err) => {
            let bytes: Vec<i64> =
                displacements.iter().map(|d| d.checked_mul(unit).ok_or(MpiClass::Type)).collect::<MpiResult<_>>()?;
            let children = vec![child; bytes.len()];
            built(compact::periodic_struct(blocklengths, &bytes, &children).ok_or(MpiClass::Type)?)
        }
        plain => built(plain),
    }
}

/// Struct entries whose data is one run of bytes become that many bytes at
/// the run's start: HDF5's linked-chunk I/O builds one struct entry per
/// chunk, each with its own derived type (a contiguous piece at its own
/// offset), and as distinct children 80,000 chunks would pass the
/// dataloop's node limit; as byte runs they share a handful of children and
/// usually fold into one hindexed node. The typemap is unchanged (same
/// bytes, same order); the struct's bounds come from MPI (the C layer
/// resizes every constructed type to MPI's own lb and extent).
fn contiguous_children_as_bytes(
    blocklengths: Vec<u64>,
    displacements: Vec<i64>,
    children: Vec<Dataloop>,
) -> MpiResult<(Vec<u64>, Vec<i64>, Vec<Dataloop>)> {
    let mut out = (Vec::with_capacity(children.len()), Vec::with_capacity(children.len()), Vec::new());
    for ((blocklength, displacement), child) in blocklengths.into_iter().zip(displacements).zip(children) {
        let size = child.size();
        let one_run = child.root().is_contiguous() && (blocklength <= 1 || child.extent() == size as i64);
        if size == 0 || !one_run {
            out.0.push(blocklength);
            out.1.push(displacement);
            out.2.push(child);
            continue;
        }
        let bytes = size.checked_mul(blocklength).ok_or(MpiClass::Type)?;
        out.0.push(1);
        out.1.push(displacement.checked_add(child.true_lb()).ok_or(MpiClass::Type)?);
        out.2.push(built(Dataloop::bytes(bytes))?);
    }
    Ok(out)
}

fn subarray(w: &mut Words<'_>, stack: &mut Vec<Dataloop>) -> MpiResult<Dataloop> {
    let ndims = w.unsigned()?;
    let sizes = w.many_unsigned(ndims)?;
    let subsizes = w.many_unsigned(ndims)?;
    let starts = w.many_unsigned(ndims)?;
    let order = order(w.one()?)?;
    let ndims = u32::try_from(ndims).map_err(|_| MpiClass::Type)?;
    built(mpi_types::subarray(ndims, &sizes, &subsizes, &starts, order, &pop(stack)?))
}

fn darray(w: &mut Words<'_>, stack: &mut Vec<Dataloop>) -> MpiResult<Dataloop> {
    let size = u32::try_from(w.one()?).map_err(|_| MpiClass::Type)?;
    let rank = u32::try_from(w.one()?).map_err(|_| MpiClass::Type)?;
    let ndims = w.unsigned()?;
    let gsizes = w.many_unsigned(ndims)?;
    let distribs = w
        .many(ndims)?
        .iter()
        .map(|d| match d {
            0 => Ok(Distribution::Block),
            1 => Ok(Distribution::Cyclic),
            2 => Ok(Distribution::None),
            _ => Err(MpiClass::Type),
        })
        .collect::<MpiResult<Vec<_>>>()?;
    let dargs = w
        .many(ndims)?
        .iter()
        .map(|d| match *d {
            -1 => Ok(DistributionArg::Default),
            v if v > 0 => Ok(DistributionArg::Value(v as u64)),
            _ => Err(MpiClass::Type),
        })
        .collect::<MpiResult<Vec<_>>>()?;
    let psizes = w.many_unsigned(ndims)?;
    let order = order(w.one()?)?;
    let ndims = u32::try_from(ndims).map_err(|_| MpiClass::Type)?;
    built(mpi_types::darray(size, rank, ndims, &gsizes, &distribs, &dargs, &psizes, order, &pop(stack)?))
}

/// Dataloops by id; ids are never reused.
pub struct Registry {
    next_id: u64,
    types: HashMap<u64, Arc<Dataloop>>,
}

static TYPES: Mutex<Option<Registry>> = Mutex::new(None);

/// Stores a dataloop and returns its id (never 0).
pub fn insert(dataloop: Dataloop) -> MpiResult<u64> {
    let mut guard = TYPES.lock().map_err(|_| MpiClass::Intern)?;
    let registry = guard.get_or_insert_with(|| Registry { next_id: 1, types: HashMap::new() });
    let id = registry.next_id;
    registry.next_id += 1;
    registry.types.insert(id, Arc::new(dataloop));
    Ok(id)
}

/// The dataloop with this id.
pub fn get(id: u64) -> MpiResult<Arc<Dataloop>> {
    let guard = TYPES.lock().map_err(|_| MpiClass::Intern)?;
    guard.as_ref().and_then(|r| r.types.get(&id).cloned()).ok_or(MpiClass::Type)
}

/// Forgets a dataloop (views holding it keep their own reference).
pub fn remove(id: u64) {
    if let Ok(mut guard) = TYPES.lock() {
        if let Some(registry) = guard.as_mut() {
            registry.types.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_of_ints() {
        let t = build(&[1, 4, 4, 3, 3, 2, 5]).unwrap();
        assert_eq!(t.size(), 24);
        assert_eq!(t.extent(), (2 * 5 + 2) * 4);
    }

    #[test]
    fn struct_of_two_named() {
        let t = build(&[1, 8, 8, 1, 4, 4, 9, 2, 1, 1, 0, 8]).unwrap();
        assert_eq!(t.size(), 12);
    }

    /// A struct of 20,000 blocks (far beyond the 4,096 children the
    /// builder once allowed on its stack), alternating two child types.
    #[test]
    fn struct_of_twenty_thousand_blocks() {
        let blocks = 20_000i64;
        let mut program = Vec::new();
        for k in 0..blocks {
            // child: 4 bytes (k even) or a contiguous pair of them (k odd)
            program.extend([1, 4, 4]);
            if k % 2 == 1 {
                program.extend([2, 2]);
            }
        }
        program.extend([9, blocks]);
        program.extend((0..blocks).map(|_| 1));
        program.extend((0..blocks).map(|k| k * 16));
        let t = build(&program).unwrap();
        assert_eq!(t.size(), (blocks as u64 / 2) * (4 + 8));
        assert_eq!(t.extent(), (blocks - 1) * 16 + 8);
    }

    /// 80,000 struct entries, each its own contiguous child (8 bytes
    /// resized to lb -k, placed 4 bytes into an hindexed), as
    /// HDF5's linked-chunk I/O builds: more distinct children than the
    /// dataloop's node limit, accepted as byte runs with the same typemap.
    #[test]
    fn struct_of_distinct_contiguous_children() {
        let blocks = 80_000i64;
        let mut program = Vec::new();
        for k in 0..blocks {
            program.extend([1, 8, 8, 10, -k, 12]);
            program.extend([6, 1, 1, 4]);
        }
        program.extend([9, blocks]);
        program.extend((0..blocks).map(|_| 1));
        program.extend((0..blocks).map(|k| k * 32));
        let t = build(&program).unwrap();
        assert_eq!(t.size(), blocks as u64 * 8);
        let pairs = crate::file::flatten(&t, 1).unwrap();
        assert_eq!(pairs.len(), blocks as usize);
        assert_eq!(pairs[0], (4, 8));
        assert_eq!(pairs[1], (36, 8));
    }

    #[test]
    fn malformed_programs_are_type_errors() {
        assert_eq!(build(&[2, 3]).err(), Some(MpiClass::Type));
        assert_eq!(build(&[1, 4]).err(), Some(MpiClass::Type));
        assert_eq!(build(&[1, 4, 4, 1, 4, 4]).err(), Some(MpiClass::Type));
        assert_eq!(build(&[1, 4, 4, 9, 5, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]).err(), Some(MpiClass::Type));
        assert_eq!(build(&[99]).err(), Some(MpiClass::Type));
        assert_eq!(build(&[]).err(), Some(MpiClass::Type));
    }
}
