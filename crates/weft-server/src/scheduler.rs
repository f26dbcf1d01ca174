//! Per-datafile access ordering.
//!
//! Reads and writes of one datafile run concurrently (nonconflicting-writes
//! semantics need no exclusion between them); truncate, remove and fsync-free
//! attribute changes take the handle exclusively. Entries live only while
//! someone holds or waits for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use weft_proto::Handle;

/// The table of active handles.
#[derive(Default)]
pub struct Scheduler {
    active: Mutex<HashMap<Handle, Arc<RwLock<()>>>>,
}

/// Shared access to a handle (I/O).
pub struct SharedGuard {
    _guard: OwnedRwLockReadGuard<()>,
    _release: Release,
}

/// Exclusive access to a handle (truncate, remove).
pub struct ExclusiveGuard {
    _guard: OwnedRwLockWriteGuard<()>,
    _release: Release,
}

struct Release {
    scheduler: Arc<Scheduler>,
    handle: Handle,
}

impl Drop for Release {
    fn drop(&mut self) {
        let mut active = self.scheduler.active.lock().expect("scheduler lock");
        if let Some(lock) = active.get(&self.handle) {
            // Only the table holds it: nobody is using or waiting for this handle.
            if Arc::strong_count(lock) == 1 {
                active.remove(&self.handle);
            }
        }
    }
}

impl Scheduler {
    fn entry(self: &Arc<Self>, handle: Handle) -> Arc<RwLock<()>> {
        self.active.lock().expect("scheduler lock").entry(handle).or_default().clone()
    }

    /// Waits for shared access.
    pub async fn shared(self: &Arc<Self>, handle: Handle) -> SharedGuard {
        let lock = self.entry(handle);
        let guard = lock.read_owned().await;
        SharedGuard { _guard: guard, _release: Release { scheduler: self.clone(), handle } }
    }

    /// Waits for exclusive access.
    pub async fn exclusive(self: &Arc<Self>, handle: Handle) -> ExclusiveGuard {
        let lock = self.entry(handle);
        let guard = lock.write_owned().await;
        ExclusiveGuard { _guard: guard, _release: Release { scheduler: self.clone(), handle } }
    }

    /// Handles currently tracked (for tests).
    pub fn active_count(&self) -> usize {
        self.active.lock().expect("scheduler lock").len()
    }
}
