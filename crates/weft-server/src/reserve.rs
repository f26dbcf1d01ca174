//! The metadata reserve: real blocks a server keeps on its storage file
//! system so that the namespace changes that free space (remove, truncate,
//! rename, setattr, the bookkeeping of a failed write) still commit when
//! the disk is full.
//!
//! `[durability] metadata_reserve_bytes` is split in two halves:
//! - the write-ahead log (`meta.wal`) is allocated whole with `fallocate`
//!   ([`allocate`]), so appends never need a new block;
//! - the key/value store (`meta.redb`) keeps [`Headroom`]: blocks allocated
//!   beyond what the store uses (`fallocate` with `FALLOC_FL_KEEP_SIZE`
//!   from 0 to its length plus the headroom), so its growth is served
//!   from blocks it already owns. [`StoreBackend`] wraps redb's file
//!   backend and tops the headroom up whenever redb changes the file's
//!   length.
//!
//! When a top-up cannot get its blocks (the disk is full) the headroom is
//! *short*: object creation is refused with `NoSpace` (the committer's id
//! allocator asks [`Headroom::short`]) and so are data writes
//! ([`Headroom::admit_write`]), while removals go on from the blocks still
//! held. Every later check retries the top-up, so the reserve refills as
//! soon as removals have given blocks back. Data writes are also refused
//! when the file system has fewer free bytes than the write carries, so a
//! full disk answers ENOSPC before a write changes anything.
//!
//! The free-space check does not cost a `statvfs` per write ([`FreeSpace`]):
//! a measurement is reused for at most [`FREE_SPACE_STALE`], each admitted
//! write is subtracted from it, and a write is admitted from the cached
//! figure only while that leaves more than [`FREE_SPACE_LOW_WATER`] free;
//! otherwise the file system is measured again first, so near a full disk
//! every write is checked against a fresh measurement (as before) and a
//! refusal is always backed by one.

use std::fs::File;
use std::io;
use std::ops::Bound;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};
use weft_proto::{ErrorCode, WeftResult};

/// Allocates real blocks for `offset..offset + length` of `file`; with
/// `keep_size` the file's length does not change (blocks beyond the end).
pub fn allocate(file: &File, offset: u64, length: u64, keep_size: bool) -> io::Result<()> {
    if length == 0 {
        return Ok(());
    }
    let mode = if keep_size { libc::FALLOC_FL_KEEP_SIZE } else { 0 };
    loop {
        // SAFETY: fallocate on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The store's headroom: blocks allocated beyond the store's length.
#[derive(Debug)]
pub struct Headroom {
    /// The store's file (a duplicate descriptor of redb's).
    file: File,
    /// Storage directory (for the free-space check of data writes).
    storage: PathBuf,
    /// Bytes to keep allocated beyond the store's length.
    bytes: u64,
    /// The last top-up could not get all its blocks.
    short: AtomicBool,
    /// The last free-space measurement and what was admitted since.
    free: Mutex<FreeSpace>,
}

/// Longest reuse of a free-space measurement by the data-write check.
pub const FREE_SPACE_STALE: Duration = Duration::from_millis(100);

/// Free bytes that must remain (after the cached figure less what was
/// admitted since) for a write to be admitted without a fresh measurement.
/// Other writers of the file system (other servers, other programs) would
/// have to use this much within [`FREE_SPACE_STALE`] for the cached check to
/// admit a write a fresh one would refuse (which then fails with ENOSPC
/// from the kernel, as a write racing the check always could).
pub const FREE_SPACE_LOW_WATER: u64 = 256 << 20;

/// A cached `statvfs` free figure (see the module documentation).
#[derive(Debug, Default)]
pub struct FreeSpace {
    /// When `free` was measured (`None`: never).
    measured: Option<Instant>,
    /// Available bytes at the measurement.
    free: u64,
    /// Bytes of writes admitted since the measurement.
    admitted: u64,
}

impl FreeSpace {
    /// Whether a write of `bytes` may be admitted from the cached figure at `now`.
    fn admits_cached(&self, bytes: u64, now: Instant) -> bool {
        let fresh = self.measured.is_some_and(|at| now.saturating_duration_since(at) < FREE_SPACE_STALE);
        let left = self.free.saturating_sub(self.admitted).saturating_sub(bytes);
        fresh && left > FREE_SPACE_LOW_WATER
    }
}

impl Headroom {
    /// Headroom of `bytes` behind `file` (the store) in `storage`.
    pub fn new(file: File, storage: &Path, bytes: u64) -> Headroom {
        Headroom { file, storage: storage.to_path_buf(), bytes, short: AtomicBool::new(false), free: Mutex::default() }
    }

    /// Allocates blocks from 0 to the store's length plus the headroom;
    /// failing that, at least up to its length. Returns whether the whole
    /// headroom is held.
    pub fn top_up(&self) -> bool {
        let full = match self.file.metadata() {
            Ok(meta) => {
                let length = meta.len();
                match allocate(&self.file, 0, length + self.bytes, true) {
                    Ok(()) => true,
                    Err(_) => {
                        let _ = allocate(&self.file, 0, length, true);
                        false
                    }
                }
            }
            Err(_) => false,
        };
        let short = !full;
        let was_short = self.short.swap(short, Ordering::Relaxed);
        if was_short != short {
            if full {
                tracing::info!("metadata reserve refilled");
            } else {
                tracing::warn!("storage file system full: metadata reserve short; creates and writes refused");
            }
        }
        full
    }

    /// Whether the headroom is short even after trying to top it up.
    pub fn short(&self) -> bool {
        self.short.load(Ordering::Relaxed) && !self.top_up()
    }

    /// `NoSpace` if a data write of `bytes` would dip into the reserve: the
    /// headroom is short, or the file system has fewer free bytes.
    pub fn admit_write(&self, bytes: u64) -> WeftResult<()> {
        if self.short() {
            return Err(ErrorCode::NoSpace);
        }
        let now = Instant::now();
        let mut cached = self.free.lock().expect("free space lock");
        if !cached.admits_cached(bytes, now) {
            let (_, free) = statvfs(&self.storage)?;
            *cached = FreeSpace { measured: Some(now), free, admitted: 0 };
            if free < bytes {
                return Err(ErrorCode::NoSpace);
            }
        }
        cached.admitted = cached.admitted.saturating_add(bytes);
        Ok(())
    }
}

/// redb's file backend, topping the [`Headroom`] up whenever the store's
/// length changes.
#[derive(Debug)]
pub struct StoreBackend {
    inner: FileBackend,
    headroom: Arc<Headroom>,
}

impl StoreBackend {
    /// Wraps `file` (the store); `headroom` holds a duplicate of its descriptor.
    pub fn new(file: File, headroom: Arc<Headroom>) -> WeftResult<StoreBackend> {
        let inner = FileBackend::new(file).map_err(|err| {
            tracing::error!("key/value store: {err}");
            ErrorCode::Io
        })?;
        Ok(StoreBackend { inner, headroom })
    }
}

impl StorageBackend for StoreBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.inner.set_len(len)?;
        self.headroom.top_up();
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

/// Total and available bytes of the file system holding `path`.
pub(crate) fn statvfs(path: &std::path::Path) -> WeftResult<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| ErrorCode::Invalid)?;
    // SAFETY: statvfs is plain integers, for which all-zero bytes are valid.
    let mut out: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and out is a valid statvfs.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut out) };
    if rc != 0 {
        return Err(ErrorCode::from_io(&std::io::Error::last_os_error()));
    }
    let block = out.f_frsize as u64;
    Ok((out.f_blocks as u64 * block, out.f_bavail as u64 * block))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn headroom_holds_real_blocks_beyond_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let file = File::create(&path).unwrap();
        file.set_len(4096).unwrap();
        let headroom = Headroom::new(file.try_clone().unwrap(), dir.path(), 1 << 20);
        assert!(headroom.top_up());
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 4096, "the length is kept");
        assert!(meta.blocks() * 512 >= (1 << 20) + 4096, "blocks: {}", meta.blocks());
        assert!(!headroom.short());
        assert_eq!(headroom.admit_write(u64::MAX), Err(ErrorCode::NoSpace));
        headroom.admit_write(1).unwrap();
    }

    #[test]
    fn the_free_space_figure_is_reused_only_while_fresh_and_far_from_full() {
        let start = Instant::now();
        let mut cached = FreeSpace { measured: Some(start), free: FREE_SPACE_LOW_WATER + (10 << 20), admitted: 0 };
        assert!(cached.admits_cached(1 << 20, start), "fresh and well above the low-water mark");
        assert!(!cached.admits_cached(1 << 20, start + FREE_SPACE_STALE), "stale");
        cached.admitted = 9 << 20;
        assert!(!cached.admits_cached(1 << 20, start), "admitted writes count against the figure");
        assert!(!FreeSpace::default().admits_cached(1, start), "never measured");
    }
}
