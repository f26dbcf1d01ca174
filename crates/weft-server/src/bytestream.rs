//! The real [`DatafileStore`]: one local file per datafile that has been
//! written, under `data/XX/HANDLE` (XX = low byte of the object id, so no
//! directory grows past 1/256 of the files).
//!
//! Positioned I/O with `std::fs` (`pread`/`pwrite`) on descriptors kept in
//! a bounded cache ([`DESCRIPTORS_MAX`], least recently used evicted), so a
//! datafile is opened once, not per request. Only reads and writes (which
//! run under the datafile's scheduler entry) open and cache descriptors;
//! `stat` and `sync` use a cached one or the path, so they never cache a
//! descriptor of a file a concurrent remove is unlinking. `remove` drops the
//! cached descriptor before unlinking, so a removed datafile's blocks are
//! freed (and capacity accounting sees them free) as soon as the requests
//! still using it finish. A datafile that was never written has no file: it
//! reads as empty and has size 0.
//!
//! `data/FORMAT` names the layout's version (`weft-bytestreams 1`); a
//! directory of another version is refused at open ([`check_format`]), and
//! one without the file (made before versions were recorded) is version 1.
//!
//! Names are made durable as the crash model asks (docs/FORMAT.md): `data/`
//! and each shard directory are fsynced into their parent when created, and
//! a shard in which a datafile was created since its last fsync is marked
//! dirty; `sync` of any datafile in a dirty shard fsyncs the shard
//! directory before it returns, so a synced datafile's name survives power
//! loss too (one bit per shard, so nothing grows with the number of files).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::datafiles::DatafileStore;

/// Open datafile descriptors kept per server: a working set of 1024 files
/// covers the benchmarks' and typical jobs' open files, and keeps descriptor
/// use modest beside the sockets. Should the process's limit be hit anyway
/// (`EMFILE`), half the cache is closed and the open retried once.
pub const DESCRIPTORS_MAX: usize = 1024;

/// The bytestream directory of one server.
pub struct Bytestreams {
    root: PathBuf,
    descriptors: Descriptors,
    /// Shards (by low byte of the object id) with a file created since their last fsync.
    dirty_shards: [AtomicBool; 256],
}

/// The bytestream layout (paths, one file per datafile, holes as zeros)
/// this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The file in `data/` that names the layout's version.
const FORMAT_FILE: &str = "FORMAT";
/// Its contents before the version number.
const FORMAT_PREFIX: &str = "weft-bytestreams ";

fn io_error(err: std::io::Error) -> ErrorCode {
    ErrorCode::from_io(&err)
}

/// Reads the text of `data/FORMAT`: `Ok(())` for this build's version, an
/// explanation otherwise.
pub fn check_format(text: &str) -> Result<(), String> {
    let version = text
        .strip_prefix(FORMAT_PREFIX)
        .and_then(|rest| rest.trim_end().parse::<u32>().ok())
        .ok_or_else(|| format!("unreadable bytestream format file (expected `{FORMAT_PREFIX}N`): {text:?}"))?;
    if version != FORMAT_VERSION {
        return Err(format!(
            "bytestream layout version {version} is not known to this build (it reads version {FORMAT_VERSION}); \
             see docs/FORMAT.md, Upgrades"
        ));
    }
    Ok(())
}

/// Checks `data/FORMAT`, writing it (durably: file, then directory) where
/// it is missing.
fn open_format(root: &Path) -> WeftResult<()> {
    let path = root.join(FORMAT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => check_format(&text).map_err(|message| {
            tracing::error!("storage format: {}: {message}", path.display());
            ErrorCode::VersionMismatch
        }),
        Err(err) if err.kind() == ErrorKind::NotFound => {
            let temporary = root.join(format!("{FORMAT_FILE}.tmp"));
            let file = File::create(&temporary).map_err(io_error)?;
            file.write_all_at(format!("{FORMAT_PREFIX}{FORMAT_VERSION}\n").as_bytes(), 0).map_err(io_error)?;
            file.sync_all().map_err(io_error)?;
            std::fs::rename(&temporary, &path).map_err(io_error)?;
            File::open(root).and_then(|dir| dir.sync_all()).map_err(io_error)
        }
        Err(err) => Err(io_error(err)),
    }
}

impl Bytestreams {
    /// Uses (and creates) `storage/data`.
    pub fn open(storage: &Path) -> WeftResult<Bytestreams> {
        Bytestreams::with_descriptors(storage, DESCRIPTORS_MAX)
    }

    /// As [`Bytestreams::open`] with at most `descriptors_max` cached descriptors.
    pub fn with_descriptors(storage: &Path, descriptors_max: usize) -> WeftResult<Bytestreams> {
        let root = storage.join("data");
        crate::durable::create_dir_all_durable(&root).map_err(io_error)?;
        open_format(&root)?;
        let dirty_shards = std::array::from_fn(|_| AtomicBool::new(false));
        Ok(Bytestreams { root, descriptors: Descriptors::new(descriptors_max), dirty_shards })
    }

    fn shard(handle: Handle) -> usize {
        (handle.object_id() & 0xff) as usize
    }

    /// Fsyncs `handle`'s shard directory if a file was created in it since its last fsync.
    fn sync_shard(&self, handle: Handle) -> WeftResult<()> {
        let shard = Self::shard(handle);
        if self.dirty_shards[shard].swap(false, Ordering::AcqRel) {
            let dir = self.path(handle);
            if let Err(err) = crate::durable::sync_dir(dir.parent().expect("sharded path has a parent")) {
                self.dirty_shards[shard].store(true, Ordering::Release);
                return Err(io_error(err));
            }
        }
        Ok(())
    }

    /// Path of a datafile's local file.
    pub fn path(&self, handle: Handle) -> PathBuf {
        self.root.join(format!("{:02x}", handle.object_id() & 0xff)).join(format!("{:016x}", handle.0))
    }

    /// Descriptors currently cached (for tests).
    pub fn descriptors_cached(&self) -> usize {
        self.descriptors.len()
    }

    /// The datafile's descriptor, opened (and cached) if needed; `None` if
    /// it was never written and `create` is false.
    fn file(&self, handle: Handle, create: bool) -> WeftResult<Option<Arc<File>>> {
        if let Some(file) = self.descriptors.get(handle) {
            return Ok(Some(file));
        }
        let path = self.path(handle);
        // Opened without O_CREAT first, so a creation is known (its shard is then dirty).
        let options = |create| OpenOptions::new().read(true).write(true).create(create).clone();
        let opened = match options(false).open(&path) {
            Err(err) if matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                drop(self.descriptors.evict_half());
                options(false).open(&path)
            }
            opened => opened,
        };
        let file = match opened {
            Ok(file) => file,
            Err(err) if err.kind() == ErrorKind::NotFound && !create => return Ok(None),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                let shard = path.parent().expect("sharded path has a parent");
                crate::durable::create_dir_all_durable(shard).map_err(io_error)?;
                let file = options(true).open(&path).map_err(io_error)?;
                // The name is durable at the shard's next fsync (the datafile's first sync).
                self.dirty_shards[Self::shard(handle)].store(true, Ordering::Release);
                file
            }
            Err(err) => return Err(io_error(err)),
        };
        let file = Arc::new(file);
        self.descriptors.insert(handle, file.clone());
        Ok(Some(file))
    }
}

/// Reads until `buf` is full or end of file.
fn read_full(file: &File, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
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

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

impl DatafileStore for Bytestreams {
    fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
        match self.file(handle, false)? {
            Some(file) => read_full(&file, offset, buf),
            None => Ok(0),
        }
    }

    fn try_read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<Option<usize>> {
        // Opening may block (a directory lookup on disk): only cached descriptors.
        let Some(file) = self.descriptors.get(handle) else { return Ok(None) };
        crate::nowait::read_full_nowait(&file, offset, buf)
    }

    fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()> {
        let file = self.file(handle, true)?.expect("created");
        file.write_all_at(data, offset).map_err(io_error)
    }

    fn try_write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> Option<WeftResult<()>> {
        let file = self.descriptors.get(handle)?;
        Some(file.write_all_at(data, offset).map_err(io_error))
    }

    fn try_stat(&self, handle: Handle) -> Option<WeftResult<(u64, i64)>> {
        let file = self.descriptors.get(handle)?;
        Some(file.metadata().map(|meta| (meta.len(), mtime_ns(&meta))).map_err(io_error))
    }

    fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)> {
        let meta = match self.descriptors.get(handle) {
            Some(file) => file.metadata(),
            None => std::fs::metadata(self.path(handle)),
        };
        match meta {
            Ok(meta) => Ok((meta.len(), mtime_ns(&meta))),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok((0, 0)),
            Err(err) => Err(io_error(err)),
        }
    }

    fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()> {
        let Some(file) = self.file(handle, size > 0)? else { return Ok(()) };
        file.set_len(size).map_err(io_error)
    }

    fn sync(&self, handle: Handle) -> WeftResult<()> {
        if let Some(file) = self.descriptors.get(handle) {
            file.sync_data().map_err(io_error)?;
            return self.sync_shard(handle);
        }
        match OpenOptions::new().write(true).open(self.path(handle)) {
            Ok(file) => file.sync_data().map_err(io_error)?,
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(io_error(err)),
        }
        self.sync_shard(handle)
    }

    fn remove(&self, handle: Handle) -> WeftResult<()> {
        self.descriptors.forget(handle);
        match std::fs::remove_file(self.path(handle)) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            Err(err) => Err(io_error(err)),
        }
    }

    fn used_bytes(&self) -> WeftResult<u64> {
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
        Ok(used)
    }
}

/// A bounded cache of open descriptors, least recently used evicted.
///
/// Eviction drops the oldest eighth at once (one scan per `max / 8`
/// inserts), so inserting stays cheap without a linked list.
struct Descriptors {
    table: Mutex<DescriptorTable>,
    max: usize,
}

#[derive(Default)]
struct DescriptorTable {
    open: HashMap<Handle, (Arc<File>, u64)>,
    clock: u64,
}

impl Descriptors {
    fn new(max: usize) -> Descriptors {
        Descriptors { table: Mutex::default(), max: max.max(1) }
    }

    fn len(&self) -> usize {
        self.table.lock().expect("descriptor cache lock").open.len()
    }

    fn get(&self, handle: Handle) -> Option<Arc<File>> {
        let mut table = self.table.lock().expect("descriptor cache lock");
        table.clock += 1;
        let now = table.clock;
        table.open.get_mut(&handle).map(|(file, used)| {
            *used = now;
            file.clone()
        })
    }

    fn insert(&self, handle: Handle, file: Arc<File>) {
        let evicted = {
            let mut table = self.table.lock().expect("descriptor cache lock");
            let evicted = if table.open.len() >= self.max && !table.open.contains_key(&handle) {
                table.evict_oldest((self.max / 8).max(1))
            } else {
                Vec::new()
            };
            table.clock += 1;
            let now = table.clock;
            table.open.insert(handle, (file, now));
            evicted
        };
        drop(evicted); // closed outside the lock
    }

    fn evict_half(&self) -> Vec<Arc<File>> {
        let mut table = self.table.lock().expect("descriptor cache lock");
        let half = table.open.len().div_ceil(2);
        table.evict_oldest(half)
    }

    fn forget(&self, handle: Handle) {
        let removed = self.table.lock().expect("descriptor cache lock").open.remove(&handle);
        drop(removed);
    }
}

impl DescriptorTable {
    fn evict_oldest(&mut self, count: usize) -> Vec<Arc<File>> {
        let mut ages: Vec<(u64, Handle)> = self.open.iter().map(|(handle, (_, used))| (*used, *handle)).collect();
        let count = count.min(ages.len());
        if count < ages.len() {
            ages.select_nth_unstable(count);
        }
        ages[..count].iter().filter_map(|(_, handle)| self.open.remove(handle).map(|(file, _)| file)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_cache_is_bounded_and_keeps_recent_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Bytestreams::with_descriptors(dir.path(), 16).unwrap();
        for id in 1..=40u64 {
            store.write_at(Handle(id), 0, &id.to_le_bytes()).unwrap();
            // Handle 1 stays in use, so it is never the least recently used.
            let mut buf = [0u8; 8];
            assert_eq!(store.read_at(Handle(1), 0, &mut buf).unwrap(), 8);
            assert!(store.descriptors_cached() <= 16);
        }
        assert!(store.descriptors.get(Handle(1)).is_some());
        for id in 1..=40u64 {
            let mut buf = [0u8; 8];
            assert_eq!(store.read_at(Handle(id), 0, &mut buf).unwrap(), 8);
            assert_eq!(u64::from_le_bytes(buf), id);
        }
    }

    #[test]
    fn nowait_reads_serve_cached_pages_only_from_open_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Bytestreams::open(dir.path()).unwrap();
        let h = Handle(9);
        let mut buf = [0u8; 8192];
        assert_eq!(store.try_read_at(h, 0, &mut buf).unwrap(), None, "never opened: the pool opens it");
        store.write_at(h, 0, &[5u8; 6000]).unwrap();
        // Just written, so in the page cache: served whole, short at end of file.
        assert_eq!(store.try_read_at(h, 0, &mut buf).unwrap(), Some(6000));
        assert!(buf[..6000].iter().all(|b| *b == 5));
        assert_eq!(store.try_read_at(h, 1 << 20, &mut buf).unwrap(), Some(0));
        assert_eq!(store.try_stat(h).unwrap().unwrap().0, 6000);
    }

    #[test]
    fn new_datafiles_and_their_directories_are_made_durable() {
        use crate::durable::synced_count;
        let dir = tempfile::tempdir().unwrap();
        let store = Bytestreams::open(dir.path()).unwrap();
        assert_eq!(synced_count(dir.path()), 1, "data/ is made durable in the storage directory");
        let (h, sibling) = (Handle(0x1_0203), Handle(0x2_0203));
        let shard = store.path(h).parent().unwrap().to_path_buf();
        store.write_at(h, 0, b"x").unwrap();
        assert_eq!(synced_count(&store.root), 1, "the new shard is made durable in data/");
        assert_eq!(synced_count(&shard), 0, "a create alone does not fsync the shard");
        store.sync(h).unwrap();
        assert_eq!(synced_count(&shard), 1, "the first sync makes the new name durable");
        store.sync(h).unwrap();
        assert_eq!(synced_count(&shard), 1, "later syncs need no directory fsync");
        // A second file in the same shard, synced through the path (no cached descriptor).
        store.write_at(sibling, 0, b"y").unwrap();
        store.descriptors.forget(sibling);
        store.sync(sibling).unwrap();
        assert_eq!(synced_count(&shard), 2);
        assert_eq!(synced_count(&store.root), 1, "the shard existed already");
    }

    #[test]
    fn remove_and_truncate_see_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Bytestreams::open(dir.path()).unwrap();
        let h = Handle(7);
        store.write_at(h, 0, &[1u8; 4096]).unwrap();
        store.set_len(h, 100).unwrap();
        assert_eq!(store.stat(h).unwrap().0, 100);
        let mut buf = [0u8; 4096];
        assert_eq!(store.read_at(h, 0, &mut buf).unwrap(), 100);
        store.remove(h).unwrap();
        assert_eq!(store.descriptors_cached(), 0);
        assert!(!store.path(h).exists());
        assert_eq!(store.stat(h).unwrap(), (0, 0));
        assert_eq!(store.read_at(h, 0, &mut buf).unwrap(), 0);
        // Written again after removal: a new file, not the unlinked one.
        store.write_at(h, 0, b"again").unwrap();
        assert_eq!(std::fs::read(store.path(h)).unwrap(), b"again");
        assert!(store.used_bytes().unwrap() > 0);
    }

    #[test]
    fn a_bytestream_directory_of_another_layout_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Bytestreams::open(dir.path()).unwrap());
        let format = dir.path().join("data").join(FORMAT_FILE);
        assert_eq!(std::fs::read_to_string(&format).unwrap(), "weft-bytestreams 1\n");
        std::fs::write(&format, "weft-bytestreams 2\n").unwrap();
        assert_eq!(Bytestreams::open(dir.path()).err(), Some(ErrorCode::VersionMismatch));
        let message = check_format("weft-bytestreams 2\n").unwrap_err();
        assert!(message.contains("layout version 2 is not known to this build (it reads version 1)"), "{message}");
        std::fs::write(&format, "garbage").unwrap();
        assert_eq!(Bytestreams::open(dir.path()).err(), Some(ErrorCode::VersionMismatch));
        // A directory from before versions were recorded is version 1.
        std::fs::remove_file(&format).unwrap();
        drop(Bytestreams::open(dir.path()).unwrap());
        assert_eq!(std::fs::read_to_string(&format).unwrap(), "weft-bytestreams 1\n");
    }
}
