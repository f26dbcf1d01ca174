//! The bytestream half of a server's storage: one local file per datafile
//! that has been written, under `data/XX/HANDLE` (XX = low byte of the
//! object id, so no directory grows past 1/256 of the files).
//!
//! Positioned I/O with `std::fs` (`pread`/`pwrite`); callers run these on
//! the blocking thread pool. A datafile that was never written has no file:
//! it reads as empty and has size 0.
//!
//! A server configured with `capacity_bytes` measures the space its
//! datafiles occupy (once per status period, [`Bytestreams::measure_used`])
//! and refuses writes with ENOSPC while that measure is at the limit.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use weft_proto::{ErrorCode, Handle, WeftResult};

/// The bytestream directory of one server.
#[derive(Clone, Debug)]
pub struct Bytestreams {
    root: PathBuf,
    /// Configured capacity limit, if any.
    capacity: Option<u64>,
    /// Bytes the datafiles occupied at the last measurement.
    used: Arc<AtomicU64>,
}

fn io_error(err: std::io::Error) -> ErrorCode {
    ErrorCode::from_io(&err)
}

impl Bytestreams {
    /// Uses (and creates) `storage/data`; `capacity` limits the bytes its
    /// datafiles may occupy.
    pub fn open(storage: &Path, capacity: Option<u64>) -> WeftResult<Bytestreams> {
        let root = storage.join("data");
        std::fs::create_dir_all(&root).map_err(io_error)?;
        let bytestreams = Bytestreams { root, capacity, used: Arc::new(AtomicU64::new(0)) };
        if capacity.is_some() {
            bytestreams.measure_used()?;
        }
        Ok(bytestreams)
    }

    /// The configured capacity limit.
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// Walks the datafiles and records (and returns) the bytes they occupy
    /// (allocated blocks, so holes are free). Blocking.
    pub fn measure_used(&self) -> WeftResult<u64> {
        let mut used = 0u64;
        for shard in std::fs::read_dir(&self.root).map_err(io_error)? {
            let shard = shard.map_err(io_error)?;
            let Ok(files) = std::fs::read_dir(shard.path()) else { continue };
            for file in files.flatten() {
                if let Ok(meta) = file.metadata() {
                    used = used.saturating_add(meta.blocks() * 512);
                }
            }
        }
        self.used.store(used, Ordering::Relaxed);
        Ok(used)
    }

    /// ENOSPC while the last measured usage is at the capacity limit.
    pub fn check_space(&self) -> WeftResult<()> {
        match self.capacity {
            Some(limit) if self.used.load(Ordering::Relaxed) >= limit => Err(ErrorCode::NoSpace),
            _ => Ok(()),
        }
    }

    /// Path of a datafile's local file.
    pub fn path(&self, handle: Handle) -> PathBuf {
        self.root.join(format!("{:02x}", handle.object_id() & 0xff)).join(format!("{:016x}", handle.0))
    }

    fn open_existing(&self, handle: Handle) -> WeftResult<Option<File>> {
        match File::open(self.path(handle)) {
            Ok(file) => Ok(Some(file)),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
            Err(err) => Err(io_error(err)),
        }
    }

    fn open_for_write(&self, handle: Handle) -> WeftResult<File> {
        let path = self.path(handle);
        let options = || OpenOptions::new().write(true).create(true).clone();
        match options().open(&path) {
            Ok(file) => Ok(file),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                std::fs::create_dir_all(path.parent().expect("sharded path has a parent")).map_err(io_error)?;
                options().open(&path).map_err(io_error)
            }
            Err(err) => Err(io_error(err)),
        }
    }

    /// Size and mtime (ns) of a datafile; (0, 0) if never written.
    pub fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)> {
        match std::fs::metadata(self.path(handle)) {
            Ok(meta) => Ok((meta.len(), meta.mtime() * 1_000_000_000 + meta.mtime_nsec())),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok((0, 0)),
            Err(err) => Err(io_error(err)),
        }
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns bytes read (short at end).
    pub fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
        let Some(file) = self.open_existing(handle)? else { return Ok(0) };
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(io_error(err)),
            }
        }
        Ok(done)
    }

    /// Writes all of `data` at `offset`, creating the file on first write.
    pub fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()> {
        self.check_space()?;
        let file = self.open_for_write(handle)?;
        file.write_all_at(data, offset).map_err(io_error)
    }

    /// Sets the local size (truncate or extend with a hole).
    pub fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()> {
        if size == 0 && self.open_existing(handle)?.is_none() {
            return Ok(());
        }
        self.open_for_write(handle)?.set_len(size).map_err(io_error)
    }

    /// Makes a datafile's bytes durable (no-op if never written).
    pub fn sync(&self, handle: Handle) -> WeftResult<()> {
        match OpenOptions::new().write(true).open(self.path(handle)) {
            Ok(file) => file.sync_data().map_err(io_error),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            Err(err) => Err(io_error(err)),
        }
    }

    /// Deletes a datafile's local file, if any.
    pub fn remove(&self, handle: Handle) -> WeftResult<()> {
        match std::fs::remove_file(self.path(handle)) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            Err(err) => Err(io_error(err)),
        }
    }
}
