//! Atomic mode through the data servers' byte-range locks
//! (`weft_client::dlm`): the `weft_atomic_method`, `weft_lock_method` and
//! `weft_lock_protocol` hints of a file, and the lock of one access.
//!
//! - `weft_atomic_method`: `locks` (default) takes, for each access in
//!   atomic mode, locks at the servers that store the bytes;
//!   `session` keeps the older path of [`crate::shared`] (locks in a
//!   session at the file's metadata server); `objects` locks, at the
//!   data servers, only the pieces of an access that lie in objects
//!   shared with other ranks' views ([`crate::object_cache`]).
//! - `weft_lock_method`: `datatype` (default: the view itself, each server
//!   walks its own pieces), `list` (offset–length lists of 64 ranges per
//!   request, as in Ching's thesis), `posix` (one request per contiguous
//!   region and server).
//! - `weft_lock_protocol`: `alt-try` (default), `one-try`, `two-phase`.
//!
//! Each process has one lock owner ([`Locker`]); its lease is the
//! session lease (`WEFT_SESSION_LEASE_MS`), renewed by every lock request:
//! locks are held only for the duration of one access.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::Mutex;

use weft_client::noncontig::FileAccess;
use weft_client::{LockMethod, LockProtocol, LockSet, Locker};
use weft_dataloop::Region;

use crate::error::{MpiClass, MpiResult};
use crate::ffi::guarded;
use crate::file::{self, View};
use crate::runtime::client;

/// How atomic mode is provided for one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicMethod {
    /// Locks at the data servers.
    Locks,
    /// Locks in a session at the metadata server (`crate::shared`).
    Session,
    /// Locks at the data servers on shared objects only (`crate::object_cache`).
    Objects,
}

#[derive(Clone, Copy, Debug)]
struct Settings {
    atomic: AtomicMethod,
    method: LockMethod,
    protocol: LockProtocol,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { atomic: AtomicMethod::Locks, method: LockMethod::Datatype, protocol: LockProtocol::AltTry }
    }
}

static SETTINGS: Mutex<Option<HashMap<u64, Settings>>> = Mutex::new(None);
/// The process's lock owner, with the pid it was made in (a forked child makes its own).
static LOCKER: Mutex<Option<(u32, Locker)>> = Mutex::new(None);

fn settings(id: u64) -> Settings {
    let guard = SETTINGS.lock().unwrap_or_else(|p| p.into_inner());
    guard.as_ref().and_then(|all| all.get(&id).copied()).unwrap_or_default()
}

fn locker() -> Locker {
    let pid = std::process::id();
    let mut guard = LOCKER.lock().unwrap_or_else(|p| p.into_inner());
    match *guard {
        Some((owner_pid, locker)) if owner_pid == pid => locker,
        _ => {
            let lease_ms = std::env::var("WEFT_SESSION_LEASE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            let locker = Locker::new(lease_ms);
            *guard = Some((pid, locker));
            locker
        }
    }
}

/// Sets the hints of a file (each -1: unchanged). `atomic`: 0 locks, 1
/// session, 2 objects; `method`: 0 datatype, 1 list, 2 posix; `protocol`: 0 alt-try,
/// 1 one-try, 2 two-phase.
pub fn set_hints(id: u64, atomic: i32, method: i32, protocol: i32) -> MpiResult<()> {
    let mut guard = SETTINGS.lock().map_err(|_| MpiClass::Intern)?;
    let entry = guard.get_or_insert_with(HashMap::new).entry(id).or_default();
    match atomic {
        -1 => {}
        0 => entry.atomic = AtomicMethod::Locks,
        1 => entry.atomic = AtomicMethod::Session,
        2 => entry.atomic = AtomicMethod::Objects,
        _ => return Err(MpiClass::Arg),
    }
    match method {
        -1 => {}
        0 => entry.method = LockMethod::Datatype,
        1 => entry.method = LockMethod::List { regions_per_request: 64 },
        2 => entry.method = LockMethod::Posix,
        _ => return Err(MpiClass::Arg),
    }
    match protocol {
        -1 => {}
        0 => entry.protocol = LockProtocol::AltTry,
        1 => entry.protocol = LockProtocol::OneTry,
        2 => entry.protocol = LockProtocol::TwoPhase,
        _ => return Err(MpiClass::Arg),
    }
    Ok(())
}

/// Forgets a closed file's hints.
pub fn forget(id: u64) {
    if let Ok(mut guard) = SETTINGS.lock() {
        if let Some(all) = guard.as_mut() {
            all.remove(&id);
        }
    }
}

/// Whether atomic mode of file `id` uses the data servers' locks (also by objects).
pub fn uses_locks(id: u64) -> bool {
    settings(id).atomic != AtomicMethod::Session
}

/// Whether atomic mode of file `id` locks by objects.
pub fn uses_objects(id: u64) -> bool {
    settings(id).atomic == AtomicMethod::Objects
}

/// Locks file regions `regions` (sorted, disjoint) of file `id` at the data
/// servers: shared for reads, exclusive for writes.
pub fn lock_regions(id: u64, regions: &[Region], write: bool) -> MpiResult<LockSet> {
    let open = file::snapshot(id)?;
    let settings = settings(id);
    let client = client()?;
    let total = regions.iter().map(|r| r.length).sum();
    Ok(client.block_on(client.client().lock_access(
        locker(),
        &open.file,
        FileAccess::List(regions),
        total,
        write,
        settings.method,
        settings.protocol,
    ))?)
}

/// Locks view stream bytes `[view_offset, view_offset + total)` of file
/// `id` at the data servers: shared for reads, exclusive for writes.
pub fn lock(id: u64, view: &View, write: bool, view_offset: u64, total: u64) -> MpiResult<LockSet> {
    let open = file::snapshot(id)?;
    let settings = settings(id);
    let client = client()?;
    let contiguous;
    let access = if view.is_contiguous() {
        let displacement = u64::try_from(view.displacement).map_err(|_| MpiClass::Arg)?;
        let offset = displacement.checked_add(view_offset).ok_or(MpiClass::Arg)?;
        contiguous = [Region { offset, length: total }];
        FileAccess::List(&contiguous)
    } else {
        FileAccess::Datatype { file_type: &view.file_type, displacement: view.displacement, view_offset }
    };
    let locker = locker();
    Ok(client.block_on(client.client().lock_access(
        locker,
        &open.file,
        access,
        total,
        write,
        settings.method,
        settings.protocol,
    ))?)
}

/// Releases the locks of [`lock`].
pub fn unlock(set: LockSet) -> MpiResult<()> {
    let client = client()?;
    Ok(client.block_on(client.client().unlock_access(set))?)
}

/// The hints of a file, from `c/weft_mpiio.c` (see [`set_hints`]).
#[no_mangle]
pub extern "C" fn weft_mpiio_set_lock_hints(id: u64, atomic: c_int, method: c_int, protocol: c_int) -> c_int {
    guarded(|| set_hints(id, atomic, method, protocol))
}
