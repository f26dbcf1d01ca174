//! The one owner of datafile I/O.
//!
//! Every read, write, size, truncate, sync and removal of a datafile's
//! local bytes goes through [`Datafiles`], which wraps a [`DatafileStore`]
//! (the real one is [`crate::bytestream::Bytestreams`]; tests wrap it to
//! inject faults) and adds what is policy rather than storage:
//! - **the metadata reserve**: writes that would dip into it are refused
//!   with `NoSpace` before they change anything ([`crate::reserve`]);
//! - **capacity accounting**: with `capacity_bytes` configured, the bytes
//!   the datafiles occupy are measured once per status period
//!   ([`Datafiles::measure_used`]) and writes are refused with `NoSpace`
//!   while that measure is at the limit;
//! - **known datafiles**: handles whose datafile record was found in the
//!   store, so a data request does not open a read transaction every time.
//!   A handle is remembered only under its scheduler entry (shared or
//!   exclusive) and forgotten by [`Datafiles::remove`], which every removal
//!   path calls under the exclusive entry after committing the record's
//!   deletion; so a remembered handle always has a record. A record never
//!   changes kind, so nothing else invalidates. The set is bounded
//!   ([`KNOWN_DATAFILES_MAX`]); when full it is emptied (records are
//!   re-read once).
//! - **failed syncs**: after a datafile's sync fails, whether its unsynced
//!   bytes reached the disk is unknown (the kernel may have dropped them and
//!   cleared the error), so the datafile refuses further writes, truncates
//!   and syncs with `Io` (EIO) until it is removed, as redb refuses writes
//!   after a failed commit. The set holds only datafiles whose sync failed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::reserve::Headroom;

/// Datafile handles remembered as checked (8 bytes each, plus table overhead).
pub const KNOWN_DATAFILES_MAX: usize = 65_536;

/// Storage of datafile bytes, by handle.
///
/// Laws (a fault-injecting implementation may break any of them only by
/// returning `Err`):
/// - a datafile never written (or removed) reads as empty, has size 0 and
///   mtime 0, and `sync`, `remove` and `set_len(0)` on it succeed;
/// - after `write_at(h, o, d)` returns `Ok`, `read_at(h, o, buf)` with
///   `buf.len() == d.len()` returns `d.len()` and `d` (absent later writes);
///   bytes never written below the size read as zeros;
/// - `read_at` fills `buf` unless the size ends first (a short count means
///   end of file); `try_read_at` does the same without blocking on the
///   disk, or returns `Ok(None)` when it would have to;
/// - the size is the highest byte written or the last `set_len`.
///
/// All methods but the `try_` ones may block; call them on the blocking pool.
pub trait DatafileStore: Send + Sync + 'static {
    /// Reads up to `buf.len()` bytes at `offset`; returns the bytes read.
    fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize>;
    /// As `read_at` but only from memory: `None` when it would block.
    fn try_read_at(&self, _handle: Handle, _offset: u64, _buf: &mut [u8]) -> WeftResult<Option<usize>> {
        Ok(None)
    }
    /// Writes all of `data` at `offset`, creating the datafile's bytes on first write.
    fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()>;
    /// As `write_at`, but only if that needs no open or create (which may
    /// wait for a directory lookup on disk); `None` otherwise. The write
    /// itself may still wait in the kernel (a partial page not in memory,
    /// dirty-page throttling), so callers bound its size.
    fn try_write_at(&self, _handle: Handle, _offset: u64, _data: &[u8]) -> Option<WeftResult<()>> {
        None
    }
    /// Size and mtime (ns); (0, 0) if never written.
    fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)>;
    /// As `stat`, but only if known without waiting (an open descriptor); `None` otherwise.
    fn try_stat(&self, _handle: Handle) -> Option<WeftResult<(u64, i64)>> {
        None
    }
    /// Sets the size (truncate, or extend with a hole).
    fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()>;
    /// Makes the datafile's bytes durable.
    fn sync(&self, handle: Handle) -> WeftResult<()>;
    /// Deletes the datafile's bytes.
    fn remove(&self, handle: Handle) -> WeftResult<()>;
    /// Bytes all datafiles occupy on disk (allocated blocks).
    fn used_bytes(&self) -> WeftResult<u64>;
}

/// The server's datafiles: storage plus capacity accounting and known records.
#[derive(Clone)]
pub struct Datafiles {
    store: Arc<dyn DatafileStore>,
    /// Configured capacity limit, if any.
    capacity: Option<u64>,
    /// Bytes the datafiles occupied at the last measurement.
    used: Arc<AtomicU64>,
    known: Arc<Mutex<HashSet<Handle>>>,
    /// Refuses writes that would dip into the metadata reserve.
    headroom: Option<Arc<Headroom>>,
    /// Datafiles whose sync failed: they refuse writes, truncates and syncs.
    failed: Arc<Mutex<HashSet<Handle>>>,
}

impl Datafiles {
    /// Wraps `store`; `capacity` limits the bytes its datafiles may occupy.
    pub fn new(store: Arc<dyn DatafileStore>, capacity: Option<u64>) -> WeftResult<Datafiles> {
        let datafiles = Datafiles {
            store,
            capacity,
            used: Arc::default(),
            known: Arc::default(),
            headroom: None,
            failed: Arc::default(),
        };
        if capacity.is_some() {
            datafiles.measure_used()?;
        }
        Ok(datafiles)
    }

    /// Refuses writes while `headroom` (the store's part of the metadata
    /// reserve) is short or the file system has less free space than a write.
    pub fn with_headroom(self, headroom: Arc<Headroom>) -> Datafiles {
        Datafiles { headroom: Some(headroom), ..self }
    }

    /// The configured capacity limit.
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// Measures, records and returns the bytes the datafiles occupy. Blocking.
    pub fn measure_used(&self) -> WeftResult<u64> {
        let used = self.store.used_bytes()?;
        self.used.store(used, Ordering::Relaxed);
        Ok(used)
    }

    /// `NoSpace` while the last measured usage is at the capacity limit, or
    /// when a write would dip into the metadata reserve.
    pub fn check_space(&self) -> WeftResult<()> {
        self.check_space_for(1)
    }

    /// [`Datafiles::check_space`] for a write of `bytes`. A write request
    /// asks it for its whole length before storing anything, so a refused
    /// request leaves its datafile as it was (then each chunk asks again).
    pub fn check_space_for(&self, bytes: u64) -> WeftResult<()> {
        match (self.capacity, &self.headroom) {
            (Some(limit), _) if self.used.load(Ordering::Relaxed) >= limit => Err(ErrorCode::NoSpace),
            (_, Some(headroom)) => headroom.admit_write(bytes),
            (_, None) => Ok(()),
        }
    }

    /// See [`DatafileStore::read_at`].
    pub fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
        self.store.read_at(handle, offset, buf)
    }

    /// See [`DatafileStore::try_read_at`]; never blocks.
    pub fn try_read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<Option<usize>> {
        self.store.try_read_at(handle, offset, buf)
    }

    /// `Io` if a sync of `handle` failed (see the module documentation).
    fn check_not_failed(&self, handle: Handle) -> WeftResult<()> {
        let failed = self.failed.lock().expect("failed datafiles lock");
        if failed.is_empty() || !failed.contains(&handle) {
            return Ok(());
        }
        Err(ErrorCode::Io)
    }

    /// Writes all of `data` at `offset` unless the server is at its capacity.
    pub fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()> {
        self.check_not_failed(handle)?;
        self.check_space_for(data.len() as u64)?;
        self.store.write_at(handle, offset, data)
    }

    /// See [`DatafileStore::try_write_at`] (refused with `NoSpace` at the capacity limit).
    pub fn try_write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> Option<WeftResult<()>> {
        if let Err(code) = self.check_not_failed(handle).and_then(|()| self.check_space_for(data.len() as u64)) {
            return Some(Err(code));
        }
        self.store.try_write_at(handle, offset, data)
    }

    /// See [`DatafileStore::try_stat`].
    pub fn try_stat(&self, handle: Handle) -> Option<WeftResult<(u64, i64)>> {
        self.store.try_stat(handle)
    }

    /// Size and mtime (ns) of a datafile; (0, 0) if never written.
    pub fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)> {
        self.store.stat(handle)
    }

    /// Sets the local size (truncate or extend with a hole).
    pub fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()> {
        self.check_not_failed(handle)?;
        self.store.set_len(handle, size)
    }

    /// Makes a datafile's bytes durable (no-op if never written). After a
    /// failure the datafile refuses writes, truncates and syncs with `Io`.
    pub fn sync(&self, handle: Handle) -> WeftResult<()> {
        self.check_not_failed(handle)?;
        self.store.sync(handle).inspect_err(|code| {
            tracing::error!("sync of datafile {handle:?} failed ({code}); it refuses further writes");
            self.failed.lock().expect("failed datafiles lock").insert(handle);
        })
    }

    /// Forgets the datafile and deletes its bytes. Call after its record's
    /// deletion is committed, under its exclusive scheduler entry.
    pub fn remove(&self, handle: Handle) -> WeftResult<()> {
        self.known.lock().expect("known datafiles lock").remove(&handle);
        self.store.remove(handle)?;
        self.failed.lock().expect("failed datafiles lock").remove(&handle);
        Ok(())
    }

    /// Whether `handle`'s datafile record was found before (and not removed since).
    pub fn is_known(&self, handle: Handle) -> bool {
        self.known.lock().expect("known datafiles lock").contains(&handle)
    }

    /// Remembers that `handle` has a datafile record. Call under its scheduler entry.
    pub fn remember(&self, handle: Handle) {
        let mut known = self.known.lock().expect("known datafiles lock");
        if known.len() >= KNOWN_DATAFILES_MAX {
            known.clear();
        }
        known.insert(handle);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::bytestream::Bytestreams;

    /// Bytestreams whose next sync fails with EIO once armed.
    struct FailingSync {
        inner: Bytestreams,
        fail_next: AtomicBool,
    }

    impl DatafileStore for FailingSync {
        fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
            self.inner.read_at(handle, offset, buf)
        }
        fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()> {
            self.inner.write_at(handle, offset, data)
        }
        fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)> {
            self.inner.stat(handle)
        }
        fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()> {
            self.inner.set_len(handle, size)
        }
        fn sync(&self, handle: Handle) -> WeftResult<()> {
            if self.fail_next.swap(false, Ordering::SeqCst) {
                return Err(ErrorCode::Io);
            }
            self.inner.sync(handle)
        }
        fn remove(&self, handle: Handle) -> WeftResult<()> {
            self.inner.remove(handle)
        }
        fn used_bytes(&self) -> WeftResult<u64> {
            self.inner.used_bytes()
        }
    }

    #[test]
    fn a_datafile_whose_sync_failed_refuses_writes_until_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FailingSync { inner: Bytestreams::open(dir.path()).unwrap(), fail_next: false.into() });
        let datafiles = Datafiles::new(store.clone(), None).unwrap();
        let (bad, good) = (Handle(0x20), Handle(0x21));
        datafiles.write_at(bad, 0, b"unsynced").unwrap();
        datafiles.write_at(good, 0, b"fine").unwrap();
        store.fail_next.store(true, Ordering::SeqCst);
        assert_eq!(datafiles.sync(bad), Err(ErrorCode::Io));
        // The kernel may have dropped the bytes and cleared its error: a retry must not report success.
        assert_eq!(datafiles.sync(bad), Err(ErrorCode::Io));
        assert_eq!(datafiles.write_at(bad, 0, b"more"), Err(ErrorCode::Io));
        assert_eq!(datafiles.try_write_at(bad, 0, b"more"), Some(Err(ErrorCode::Io)));
        assert_eq!(datafiles.set_len(bad, 0), Err(ErrorCode::Io));
        let mut buf = [0u8; 8];
        assert_eq!(datafiles.read_at(bad, 0, &mut buf).unwrap(), 8, "reads still work");
        // Other datafiles are unaffected.
        datafiles.write_at(good, 4, b"!").unwrap();
        datafiles.sync(good).unwrap();
        // Removing the datafile clears the state: a new datafile under the handle works.
        datafiles.remove(bad).unwrap();
        datafiles.write_at(bad, 0, b"new").unwrap();
        datafiles.sync(bad).unwrap();
    }
}
