//! Nonblocking accesses (`MPI_File_i*`, split collectives): the data moves
//! in the background on the client's runtime while the application runs;
//! completion is observed on the application's thread.
//!
//! This module owns the table of operations in flight. [`start`] checks and
//! plans the access on the caller's thread (errors found there are returned
//! at once), advances the individual file pointer by the amount requested
//! (as ROMIO does for nonblocking calls), and spawns the transfer; the C
//! layer (`c/nonblocking.c`) wraps the returned id in an MPI generalized
//! request and polls it with [`test`] / waits with [`wait`] from inside the
//! intercepted `MPI_Wait`/`MPI_Test` family. The runtime's threads never
//! call MPI: they only store the result of the transfer here.
//!
//! An operation's outcome (bytes moved or an error class) is kept until the
//! C layer frees the id ([`free`]).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{MpiClass, MpiResult};
use crate::ffi::guarded;
use crate::file::{self, Position};
use crate::runtime;
use crate::types;

/// One operation in flight: its outcome once the transfer has finished.
#[derive(Default)]
struct Op {
    outcome: Mutex<Option<MpiResult<u64>>>,
    finished: Condvar,
}

impl Op {
    fn finish(&self, outcome: MpiResult<u64>) {
        let mut slot = self.outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *slot = Some(outcome);
        self.finished.notify_all();
    }
}

/// The next id and the operations by id.
type Ops = (u64, HashMap<u64, Arc<Op>>);

static OPS: Mutex<Option<Ops>> = Mutex::new(None);

fn op(id: u64) -> MpiResult<Arc<Op>> {
    let guard = OPS.lock().map_err(|_| MpiClass::Intern)?;
    guard.as_ref().and_then(|(_, ops)| ops.get(&id).cloned()).ok_or(MpiClass::Arg)
}

fn register(op: Arc<Op>) -> MpiResult<u64> {
    let mut guard = OPS.lock().map_err(|_| MpiClass::Intern)?;
    let (next, ops) = guard.get_or_insert_with(|| (1, HashMap::new()));
    let id = *next;
    *next += 1;
    ops.insert(id, op);
    Ok(id)
}

/// Starts an access in the background; returns the operation's id.
///
/// # Safety
/// `buffer` with `count` instances of the memory type is valid user memory
/// (writable for reads) until the operation has finished (MPI's rule for
/// nonblocking buffers).
pub unsafe fn start(
    id: u64,
    write: bool,
    at: Position,
    buffer: *mut u8,
    count: u64,
    memory_type_id: u64,
) -> MpiResult<u64> {
    let memory_type = types::get(memory_type_id)?;
    // SAFETY: per this function's contract.
    let prepared = unsafe { file::prepare(id, write, at, buffer, count, &memory_type)? };
    if let Position::Individual = at {
        file::advance(id, (prepared.total / prepared.etype_bytes) as i64)?;
    }
    // The object cache (or atomic mode by objects) completes the access
    // here: its bytes go to memory or through the cache's own path.
    // SAFETY: per this function's contract.
    if let Some(outcome) = unsafe { crate::object_cache::intercept(id, &prepared) }.transpose() {
        let op = Arc::new(Op::default());
        op.finish(outcome);
        return register(op);
    }
    if crate::remote::is_remote(&prepared.file) {
        // Layered files (crate::remote) move the data now; ABT makes
        // writes return at once anyway.
        let op = Arc::new(Op::default());
        let op_id = register(op.clone())?;
        // SAFETY: the buffer is the caller's for the whole operation, which ends here.
        op.finish(unsafe { crate::remote::run(&prepared) });
        return Ok(op_id);
    }
    let client = runtime::client()?.client();
    let op = Arc::new(Op::default());
    let op_id = register(op.clone())?;
    let task = async move {
        // SAFETY: MPI gives the library the buffer of a nonblocking access
        // until the request completes; the application must not touch it
        // meanwhile, and the C layer completes the request only after this
        // task has stored its outcome.
        let outcome = unsafe { file::run(client, &prepared) }.await;
        op.finish(outcome);
    };
    if let Err(class) = runtime::spawn(task) {
        free(op_id);
        return Err(class);
    }
    Ok(op_id)
}

/// `Some(outcome)` once the operation has finished.
pub fn test(id: u64) -> MpiResult<Option<MpiResult<u64>>> {
    let op = op(id)?;
    let slot = op.outcome.lock().map_err(|_| MpiClass::Intern)?;
    Ok(*slot)
}

/// Waits for the operation (on the caller's thread) and returns its outcome.
pub fn wait(id: u64) -> MpiResult<MpiResult<u64>> {
    let op = op(id)?;
    let mut slot = op.outcome.lock().map_err(|_| MpiClass::Intern)?;
    loop {
        if let Some(outcome) = *slot {
            return Ok(outcome);
        }
        slot = op.finished.wait(slot).map_err(|_| MpiClass::Intern)?;
    }
}

/// Forgets a finished operation.
pub fn free(id: u64) {
    if let Ok(mut guard) = OPS.lock() {
        if let Some((_, ops)) = guard.as_mut() {
            ops.remove(&id);
        }
    }
}

/// Starts a nonblocking access (see [`start`]); `explicit != 0` uses
/// `offset` (etypes), otherwise the individual file pointer. Stores the id.
///
/// # Safety
/// `buffer` as for [`start`]; `op_id` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_istart(
    id: u64,
    write: c_int,
    explicit: c_int,
    offset: i64,
    buffer: *mut c_void,
    count: i64,
    memory_type_id: u64,
    op_id: *mut u64,
) -> c_int {
    guarded(|| {
        if op_id.is_null() {
            return Err(MpiClass::Arg);
        }
        let count = u64::try_from(count).map_err(|_| MpiClass::Count)?;
        let at = if explicit != 0 { Position::Explicit(offset) } else { Position::Individual };
        // SAFETY: per this function's contract.
        let new_id = unsafe { start(id, write != 0, at, buffer.cast(), count, memory_type_id)? };
        // SAFETY: checked non-NULL; writable per this function's contract.
        unsafe { op_id.write(new_id) };
        Ok(())
    })
}

/// Polls (`block == 0`) or waits for an operation. Stores whether it has
/// finished and the bytes moved; returns the operation's error class once
/// finished (0 before).
///
/// # Safety
/// `finished` and `bytes` are writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_op_poll(op_id: u64, block: c_int, finished: *mut c_int, bytes: *mut i64) -> c_int {
    guarded(|| {
        if finished.is_null() || bytes.is_null() {
            return Err(MpiClass::Arg);
        }
        let outcome = if block != 0 { Some(wait(op_id)?) } else { test(op_id)? };
        // SAFETY: checked non-NULL; writable per this function's contract.
        unsafe {
            finished.write(c_int::from(outcome.is_some()));
            bytes.write(match outcome {
                Some(Ok(moved)) => moved as i64,
                _ => 0,
            });
        }
        match outcome {
            Some(Err(class)) => Err(class),
            _ => Ok(()),
        }
    })
}

/// Forgets a finished operation.
#[no_mangle]
pub extern "C" fn weft_mpiio_op_free(op_id: u64) -> c_int {
    guarded(|| {
        free(op_id);
        Ok(())
    })
}

/// Selects the independent I/O method of a file (0 datatype, 1 list,
/// 2 posix, 3 sieve; see [`file::set_io_method`]).
#[no_mangle]
pub extern "C" fn weft_mpiio_set_io_method(id: u64, method: c_int) -> c_int {
    guarded(|| file::set_io_method(id, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_is_kept_until_freed() {
        let op = Arc::new(Op::default());
        let id = register(op.clone()).unwrap();
        assert_eq!(test(id).unwrap(), None);
        let finisher = std::thread::spawn(move || op.finish(Err(MpiClass::Io)));
        assert_eq!(wait(id).unwrap(), Err(MpiClass::Io));
        finisher.join().unwrap();
        assert_eq!(test(id).unwrap(), Some(Err(MpiClass::Io)));
        free(id);
        assert_eq!(test(id), Err(MpiClass::Arg));
    }
}
