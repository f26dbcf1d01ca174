//! Shared file pointers and atomic mode (`c/shared.c` is the C half).
//!
//! - **Shared pointer**: at open, rank 0 opens a session on the file at the
//!   file's metadata server (`weft_client::sessions`) and keeps it alive in
//!   the background; the C layer broadcasts its id and every rank attaches
//!   it, so all processes that opened the file together share one pointer,
//!   and two opens of the same file have two. The pointer counts etypes of
//!   the current view (MPI semantics; `set_view` resets it to 0). Each
//!   `read_shared`/`write_shared` is one fetch-and-add followed by an
//!   explicit-offset access; ordered accesses do one fetch-and-add for the
//!   whole communicator (see `c/shared.c`). The session lives in the
//!   server's memory: after a server restart it is gone and shared-pointer
//!   calls fail (`MPI_ERR_BAD_FILE`, from `ESTALE`) until the file is
//!   reopened.
//! - **Atomic mode** (`set_atomicity(1)`): each rank opens its own lock
//!   session (kept alive, so a dead rank's locks end one lease after it
//!   dies) and every read and write through [`crate::file::transfer`] takes
//!   a byte-range lock on exactly the file bytes of the access (the view
//!   flattened over the access; a list longer than the server accepts is
//!   coarsened to its span) — shared for reads, exclusive for writes —
//!   before moving data, and releases it afterwards. Locks are granted
//!   first come, first served among conflicting requests; a wait longer than
//!   `LOCK_WAIT_MS_MAX` fails the access with `MPI_ERR_IO`. When a lock or
//!   unlock fails with an unknown outcome (lost connection, expired
//!   session), the rank ends its lock session — releasing whatever it may
//!   still hold — and opens a new one for the next access.
//!
//!   With `weft_atomic_method=locks` (the default) the locks are taken at
//!   the data servers instead ([`crate::atomic_locks`]); the lock session
//!   then stays unused.
//!
//! The lease of both sessions is `WEFT_SESSION_LEASE_MS` (default
//! `weft_proto::limits::LEASE_MS_DEFAULT`, 15 s, as the server's).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use weft_client::{KeepAlive, LockMode, Session};
use weft_dataloop::{BatchLimits, Cursor, Region};
use weft_proto::limits::{LOCK_RANGES_MAX, LOCK_WAIT_MS_MAX};
use weft_proto::ErrorCode;
use weft_rfs::wire::SharedOp;

use crate::error::{MpiClass, MpiResult};
use crate::file::{self, View};
use crate::runtime::client;

/// Regions walked per batch when flattening an access for its lock.
const FLATTEN_BATCH: usize = 4096;

#[derive(Default)]
struct FileShared {
    pointer: Option<Session>,
    pointer_keep: Option<KeepAlive>,
    lock_session: Option<Session>,
    lock_keep: Option<KeepAlive>,
    atomic: bool,
}

static SHARED: Mutex<Option<HashMap<u64, FileShared>>> = Mutex::new(None);

fn with_shared<T>(body: impl FnOnce(&mut HashMap<u64, FileShared>) -> MpiResult<T>) -> MpiResult<T> {
    let mut guard = SHARED.lock().map_err(|_| MpiClass::Intern)?;
    body(guard.get_or_insert_with(HashMap::new))
}

fn lease() -> Duration {
    let ms = std::env::var("WEFT_SESSION_LEASE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(weft_proto::limits::LEASE_MS_DEFAULT as u64);
    Duration::from_millis(ms)
}

/// Rank 0 at open: opens the file's shared-pointer session; returns its id
/// and lease (milliseconds) for the broadcast.
pub fn open(id: u64) -> MpiResult<(u64, u64)> {
    let open = file::snapshot(id)?;
    // Layered files (crate::remote): the pointer lives at the gateway; a
    // new open starts it at 0. Session id 0: nothing to attach elsewhere.
    if let Some(result) = crate::remote::shared(id, SharedOp::Set(0)) {
        return result.map(|_| (0, 0));
    }
    let client = client()?;
    let session = client.session_open(open.file.handle, lease())?;
    let keep = client.keep_alive(&session);
    with_shared(|all| {
        let entry = all.entry(id).or_default();
        entry.pointer = Some(session);
        entry.pointer_keep = Some(keep);
        Ok(())
    })?;
    Ok((session.id, session.lease.as_millis() as u64))
}

/// Every other rank at open: attaches the broadcast session (id 0: none).
pub fn attach(id: u64, session: u64, lease_ms: u64) -> MpiResult<()> {
    let open = file::snapshot(id)?;
    with_shared(|all| {
        let entry = all.entry(id).or_default();
        if session != 0 {
            entry.pointer = Some(Session::attach(open.file.handle, session, Duration::from_millis(lease_ms)));
        }
        Ok(())
    })
}

/// At close (after the barrier): forgets the file's sessions; `owner`
/// (rank 0) ends the shared-pointer session, each rank its lock session.
pub fn close(id: u64, owner: bool) -> MpiResult<()> {
    crate::atomic_locks::forget(id);
    let Some(state) = with_shared(|all| Ok(all.remove(&id)))? else { return Ok(()) };
    let client = client()?;
    drop(state.pointer_keep);
    drop(state.lock_keep);
    if let (true, Some(session)) = (owner, state.pointer) {
        // Already expired (server restart) is not an error at close.
        let _ = client.session_close(&session);
    }
    if let Some(session) = state.lock_session {
        let _ = client.session_close(&session);
    }
    Ok(())
}

fn pointer_session(id: u64) -> MpiResult<Session> {
    with_shared(|all| all.get(&id).and_then(|s| s.pointer).ok_or(MpiClass::Io))
}

/// Etypes of the current view in `count` items of `memory_bytes` each.
pub fn etypes(id: u64, count: u64, memory_bytes: u64) -> MpiResult<u64> {
    let open = file::snapshot(id)?;
    let total = count.checked_mul(memory_bytes).ok_or(MpiClass::Count)?;
    if total % open.view.etype_bytes != 0 {
        return Err(MpiClass::Type);
    }
    Ok(total / open.view.etype_bytes)
}

/// Adds `delta` etypes to the shared pointer; returns the old value.
pub fn fetch_add(id: u64, delta: u64) -> MpiResult<u64> {
    if let Some(result) = crate::remote::shared(id, SharedOp::FetchAdd(delta)) {
        return result;
    }
    let session = pointer_session(id)?;
    Ok(client()?.pointer_fetch_add(&session, delta)?)
}

/// The shared pointer in etypes.
pub fn get(id: u64) -> MpiResult<u64> {
    if let Some(result) = crate::remote::shared(id, SharedOp::Get) {
        return result;
    }
    let session = pointer_session(id)?;
    Ok(client()?.pointer_get(&session)?)
}

/// Sets the shared pointer (etypes).
pub fn set(id: u64, value: u64) -> MpiResult<()> {
    if let Some(result) = crate::remote::shared(id, SharedOp::Set(value)) {
        return result.map(|_| ());
    }
    let session = pointer_session(id)?;
    client()?.pointer_set(&session, value)?;
    Ok(())
}

/// `seek_shared` on one rank (`whence`: 0 set, 1 current, 2 end).
pub fn seek(id: u64, offset: i64, whence: i32) -> MpiResult<()> {
    let base = match whence {
        0 => 0,
        1 => i64::try_from(get(id)?).map_err(|_| MpiClass::Arg)?,
        2 => {
            crate::object_cache::flush(id)?;
            file::eof_etypes(&file::snapshot(id)?)?
        }
        _ => return Err(MpiClass::Arg),
    };
    let target = base.checked_add(offset).filter(|t| *t >= 0).ok_or(MpiClass::Arg)?;
    set(id, target as u64)
}

/// Switches atomic mode; turning it on opens this rank's lock session.
pub fn set_atomic(id: u64, atomic: bool) -> MpiResult<()> {
    let open = file::snapshot(id)?;
    let needs_session = atomic && with_shared(|all| Ok(all.get(&id).and_then(|s| s.lock_session).is_none()))?;
    let mut opened = None;
    if needs_session {
        let client = client()?;
        let session = client.session_open(open.file.handle, lease())?;
        opened = Some((session, client.keep_alive(&session)));
    }
    with_shared(|all| {
        let entry = all.entry(id).or_default();
        if let Some((session, keep)) = opened {
            entry.lock_session = Some(session);
            entry.lock_keep = Some(keep);
        }
        entry.atomic = atomic;
        Ok(())
    })
}

/// Whether atomic mode is on.
pub fn atomic(id: u64) -> MpiResult<bool> {
    with_shared(|all| Ok(all.get(&id).is_some_and(|s| s.atomic)))
}

/// A lock held for one access in atomic mode.
#[derive(Debug)]
pub enum AccessLock {
    /// A lock of this rank's session at the metadata server (`weft_atomic_method=session`).
    Session {
        /// The lock session.
        session: Session,
        /// The lock id.
        lock: u64,
    },
    /// Locks at the data servers (`weft_atomic_method=locks`, [`crate::atomic_locks`]).
    Servers(weft_client::LockSet),
}

/// In atomic mode, locks the file bytes of view stream
/// `[view_offset, view_offset + total)`: shared for reads, exclusive for
/// writes. Outside atomic mode, or for an empty access: nothing.
pub fn lock_access(id: u64, view: &View, write: bool, view_offset: u64, total: u64) -> MpiResult<Option<AccessLock>> {
    if total == 0 {
        return Ok(None);
    }
    let session = with_shared(|all| Ok(all.get(&id).filter(|s| s.atomic).and_then(|s| s.lock_session)))?;
    let Some(session) = session else { return Ok(None) };
    if crate::atomic_locks::uses_locks(id) {
        return crate::atomic_locks::lock(id, view, write, view_offset, total)
            .map(|set| Some(AccessLock::Servers(set)));
    }
    let ranges = file_ranges(view, view_offset, total)?;
    let mode = if write { LockMode::Exclusive } else { LockMode::Shared };
    let wait = Duration::from_millis(LOCK_WAIT_MS_MAX as u64);
    match client()?.lock(&session, &ranges, mode, wait) {
        Ok(lock) => Ok(Some(AccessLock::Session { session, lock })),
        Err(code @ (ErrorCode::Invalid | ErrorCode::TooBig)) => Err(code.into()),
        Err(code) => {
            // The outcome is unknown (a lost reply may have left a lock
            // granted) or the session is gone: start over with a new one.
            rotate_lock_session(id, &session);
            Err(code.into())
        }
    }
}

/// Releases the lock of [`lock_access`].
pub fn unlock_access(id: u64, lock: Option<AccessLock>) -> MpiResult<()> {
    let (session, lock) = match lock {
        None => return Ok(()),
        Some(AccessLock::Servers(set)) => return crate::atomic_locks::unlock(set),
        Some(AccessLock::Session { session, lock }) => (session, lock),
    };
    if let Err(code) = client()?.unlock(&session, lock) {
        // The lock may still be held: ending its session releases it.
        rotate_lock_session(id, &session);
        return Err(code.into());
    }
    Ok(())
}

/// Replaces this rank's lock session `old` (ending it, which releases any
/// lock it may still hold) with a new one; best effort.
fn rotate_lock_session(id: u64, old: &Session) {
    let Ok(client) = client() else { return };
    let _ = client.session_close(old);
    let fresh = client.session_open(old.file, lease()).ok().map(|s| (s, client.keep_alive(&s)));
    let _ = with_shared(|all| {
        if let Some(entry) = all.get_mut(&id).filter(|e| e.lock_session == Some(*old)) {
            entry.lock_session = fresh.as_ref().map(|(s, _)| *s);
            entry.lock_keep = fresh.map(|(_, keep)| keep);
        }
        Ok(())
    });
}

/// The file `(offset, length)` ranges of view stream bytes
/// `[view_offset, view_offset + total)`, coalesced; past
/// `LOCK_RANGES_MAX` ranges, their span.
pub fn file_ranges(view: &View, view_offset: u64, total: u64) -> MpiResult<Vec<(u64, u64)>> {
    let t = &view.file_type;
    let displacement = u64::try_from(view.displacement).map_err(|_| MpiClass::Arg)?;
    if t.root().is_contiguous() && t.true_lb() == 0 && t.extent() == t.size() as i64 {
        let start = displacement.checked_add(view_offset).ok_or(MpiClass::Arg)?;
        return Ok(vec![(start, total)]);
    }
    let end = view_offset.checked_add(total).ok_or(MpiClass::Arg)?;
    let tiles = end.div_ceil(t.size());
    let mut cursor = Cursor::new(t, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
    cursor.seek(view_offset).map_err(|_| MpiClass::Arg)?;
    cursor.set_end(end).map_err(|_| MpiClass::Arg)?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let (mut low, mut high) = (u64::MAX, 0u64);
    let mut batch: Vec<Region> = Vec::new();
    // Bounded by the access: each batch advances the cursor towards `end`.
    loop {
        batch.clear();
        if cursor.next_batch(BatchLimits::regions(FLATTEN_BATCH), &mut batch) == 0 {
            break;
        }
        for region in &batch {
            low = low.min(region.offset);
            high = high.max(region.offset + region.length);
            let adjacent = ranges.last().is_some_and(|last| last.0 + last.1 == region.offset);
            if adjacent {
                if let Some(last) = ranges.last_mut() {
                    last.1 += region.length;
                }
            } else if ranges.len() <= LOCK_RANGES_MAX {
                ranges.push((region.offset, region.length));
            }
        }
    }
    if ranges.len() > LOCK_RANGES_MAX {
        return Ok(vec![(low, high - low)]);
    }
    Ok(ranges)
}

/// The C ABI of this module (declared in `c/weft_shared.h`); every call
/// runs under the panic guard of [`crate::ffi`].
pub mod abi {
    use std::ffi::c_int;

    use crate::error::{MpiClass, MpiResult};
    use crate::ffi::guarded;

    /// # Safety
    /// `ptr` is NULL or valid for writing one `T`.
    unsafe fn store<T>(ptr: *mut T, value: T) -> MpiResult<()> {
        if ptr.is_null() {
            return Err(MpiClass::Arg);
        }
        // SAFETY: non-NULL, and writable per this function's contract.
        unsafe { ptr.write(value) };
        Ok(())
    }

    fn unsigned(value: i64) -> MpiResult<u64> {
        u64::try_from(value).map_err(|_| MpiClass::Arg)
    }

    /// Rank 0 at open: opens the shared-pointer session.
    ///
    /// # Safety
    /// `session` and `lease_ms` are writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_shared_open(id: u64, session: *mut u64, lease_ms: *mut u64) -> c_int {
        guarded(|| {
            let (opened, lease) = super::open(id)?;
            // SAFETY: per this function's contract.
            unsafe {
                store(session, opened)?;
                store(lease_ms, lease)
            }
        })
    }

    /// Other ranks at open: attaches the broadcast session (0: none).
    #[no_mangle]
    pub extern "C" fn weft_mpiio_shared_attach(id: u64, session: u64, lease_ms: u64) -> c_int {
        guarded(|| super::attach(id, session, lease_ms))
    }

    /// At close: forgets the sessions (`owner != 0` ends the pointer session).
    #[no_mangle]
    pub extern "C" fn weft_mpiio_shared_close(id: u64, owner: c_int) -> c_int {
        guarded(|| super::close(id, owner != 0))
    }

    /// Etypes of the view in `count` items of `memory_bytes` bytes.
    ///
    /// # Safety
    /// `etypes` is writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_shared_etypes(
        id: u64,
        count: i64,
        memory_type_id: u64,
        etypes: *mut i64,
    ) -> c_int {
        guarded(|| {
            let count = u64::try_from(count).map_err(|_| MpiClass::Count)?;
            let memory_type = crate::types::get(memory_type_id)?;
            let n = super::etypes(id, count, memory_type.size())?;
            // SAFETY: per this function's contract.
            unsafe { store(etypes, i64::try_from(n).map_err(|_| MpiClass::Count)?) }
        })
    }

    /// Adds `delta` etypes to the shared pointer; stores the old value.
    ///
    /// # Safety
    /// `old` is writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_shared_fetch_add(id: u64, delta: i64, old: *mut i64) -> c_int {
        guarded(|| {
            let value = super::fetch_add(id, unsigned(delta)?)?;
            // SAFETY: per this function's contract.
            unsafe { store(old, i64::try_from(value).map_err(|_| MpiClass::Io)?) }
        })
    }

    /// Sets the shared pointer (etypes).
    #[no_mangle]
    pub extern "C" fn weft_mpiio_shared_set(id: u64, value: i64) -> c_int {
        guarded(|| super::set(id, unsigned(value)?))
    }

    /// The shared pointer (etypes).
    ///
    /// # Safety
    /// `value` is writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_shared_get(id: u64, value: *mut i64) -> c_int {
        guarded(|| {
            let pointer = super::get(id)?;
            // SAFETY: per this function's contract.
            unsafe { store(value, i64::try_from(pointer).map_err(|_| MpiClass::Io)?) }
        })
    }

    /// `seek_shared` (`whence`: 0 set, 1 current, 2 end); one rank calls it.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_shared_seek(id: u64, offset: i64, whence: c_int) -> c_int {
        guarded(|| super::seek(id, offset, whence))
    }

    /// Atomic mode on (`atomic != 0`) or off for this rank.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_set_atomic(id: u64, atomic: c_int) -> c_int {
        guarded(|| super::set_atomic(id, atomic != 0))
    }

    /// Whether atomic mode is on.
    ///
    /// # Safety
    /// `atomic` is writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_get_atomic(id: u64, atomic: *mut c_int) -> c_int {
        guarded(|| {
            let on = super::atomic(id)?;
            // SAFETY: per this function's contract.
            unsafe { store(atomic, on as c_int) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use weft_dataloop::Dataloop;

    #[test]
    fn ranges_of_a_strided_view() {
        let int = Dataloop::bytes(4).unwrap();
        // Two ints every four: extent 16, bytes [0,8) of each tile.
        let file_type = Arc::new(Dataloop::vector(1, 2, 4, &int).unwrap());
        let file_type = Arc::new(Dataloop::resized(&file_type, 0, 16).unwrap());
        let view = View { displacement: 100, etype_bytes: 4, file_type };
        assert_eq!(file_ranges(&view, 0, 16).unwrap(), vec![(100, 8), (116, 8)]);
        assert_eq!(file_ranges(&view, 4, 8).unwrap(), vec![(104, 4), (116, 4)]);
        let contiguous = View { displacement: 10, etype_bytes: 1, file_type: Arc::new(Dataloop::bytes(1).unwrap()) };
        assert_eq!(file_ranges(&contiguous, 5, 20).unwrap(), vec![(15, 20)]);
    }
}
