//! Opaque C handles (`weft_fs_t *`, `weft_file_t *`, `weft_dir_t *`,
//! `weft_type_t *`).
//!
//! A handle given to C is a token, never the address of Rust memory: the
//! state lives in a process-wide table, keyed by a number that is never
//! reused. So a stale, double-closed, forged or wrong-kind handle is found
//! missing in the table and answered with `-EBADF` instead of being
//! dereferenced. Each call clones the state's `Arc` out of the table, so a
//! close racing with I/O on another thread only removes the table entry;
//! the in-flight call finishes on its own reference.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::datatype::TypeState;
use crate::dir::DirState;
use crate::error::{CapiError, CapiResult};
use crate::file::FileState;
use crate::fs::FsState;

/// Distance between consecutive tokens, so tokens look like aligned
/// addresses and never collide with small integers C code may pass by
/// mistake (0, 1, -1 cast to a pointer).
const TOKEN_STRIDE: u64 = 16;

/// A live object behind a C handle.
pub(crate) enum Object {
    /// A connection (`weft_fs_t`).
    Fs(Arc<FsState>),
    /// An open file (`weft_file_t`).
    File(Arc<FileState>),
    /// An open directory stream (`weft_dir_t`).
    Dir(Arc<DirState>),
    /// A datatype (`weft_type_t`).
    Type(Arc<TypeState>),
}

struct Table {
    objects: BTreeMap<u64, Object>,
    next_id: u64,
}

static TABLE: Mutex<Table> = Mutex::new(Table { objects: BTreeMap::new(), next_id: 1 });

/// The table, also after a panic elsewhere poisoned the lock: every
/// operation on it is a single map insert, lookup or removal, so it is
/// never left half-updated.
fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A state type that can sit behind an opaque C handle.
pub(crate) trait Registered: Sized {
    /// The opaque C type the handle points to.
    type Opaque;
    /// Wraps the state into a table entry.
    fn wrap(state: Arc<Self>) -> Object;
    /// The state of a table entry, if it has this kind.
    fn unwrap(object: &Object) -> Option<&Arc<Self>>;
}

fn token_of(ptr: *const ()) -> CapiResult<u64> {
    if ptr.is_null() {
        return Err(CapiError::NullPointer);
    }
    Ok(ptr as usize as u64)
}

/// Puts `state` in the table and returns its handle.
pub(crate) fn register<T: Registered>(state: T) -> *mut T::Opaque {
    let mut table = table();
    let id = table.next_id;
    table.next_id += 1;
    let token = id * TOKEN_STRIDE;
    table.objects.insert(token, T::wrap(Arc::new(state)));
    token as usize as *mut T::Opaque
}

/// The state behind a live handle of kind `T`.
pub(crate) fn lookup<T: Registered>(handle: *const T::Opaque) -> CapiResult<Arc<T>> {
    let token = token_of(handle.cast())?;
    let table = table();
    let object = table.objects.get(&token).ok_or(CapiError::BadHandle)?;
    T::unwrap(object).cloned().ok_or(CapiError::BadHandle)
}

/// Removes a live handle of kind `T`; the state is freed when the last
/// in-flight call using it returns.
pub(crate) fn unregister<T: Registered>(handle: *const T::Opaque) -> CapiResult<Arc<T>> {
    let token = token_of(handle.cast())?;
    let mut table = table();
    let state =
        T::unwrap(table.objects.get(&token).ok_or(CapiError::BadHandle)?).cloned().ok_or(CapiError::BadHandle)?;
    table.objects.remove(&token);
    Ok(state)
}
