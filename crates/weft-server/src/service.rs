//! The server's state and its metadata operations, independent of how
//! requests arrive ([`crate::dispatch`] maps requests to these).
//!
//! Reads of metadata run inline with their own read transaction; changes
//! go through the committer; bytestream I/O runs on the blocking pool
//! under the scheduler's per-handle ordering.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use weft_config::{Config, MetadataSync};
use weft_proto::message::{Credentials, DatafileStat, ObjectKind, Reply, ReplyResult, ServerStatus, TimeNs};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::bytestream::Bytestreams;
use crate::committer::Committer;
use crate::datafiles::{DatafileStore, Datafiles};
use crate::namespace;
use crate::perm::{self, EXEC, READ};
use crate::scheduler::Scheduler;
use crate::store::{Reader, Store};

/// Everything one server process owns.
pub struct Service {
    /// This server's id.
    pub server_id: u32,
    /// The file system configuration.
    pub config: Config,
    /// Key/value store.
    pub store: Arc<Store>,
    /// Datafile bytes: the one owner of datafile I/O ([`crate::datafiles`]).
    pub bytestreams: Datafiles,
    /// Namespace change queue.
    pub committer: Committer,
    /// Per-handle ordering.
    pub scheduler: Arc<Scheduler>,
    /// I/O counters (`Request::Counters`).
    pub counters: crate::counters::Counters,
    /// Byte-range exclusion for sieving writes.
    pub ranges: crate::ranges::RangeLocks,
    /// Connections to the other servers.
    pub peers: crate::peers::Peers,
    /// Wakes the pool tasks (a create found a pool empty).
    pub pool_wake: Arc<tokio::sync::Notify>,
    /// Signalled after a pool refill.
    pub pool_filled: tokio::sync::Notify,
    /// Wakes the reclaim task (something was queued).
    pub reclaim_wake: Arc<tokio::sync::Notify>,
    /// The composed status table ([`crate::status`]).
    pub status_table: crate::status::StatusTable,
    /// Client sessions: shared file pointers and byte-range locks ([`crate::sessions`]).
    pub sessions: crate::sessions::Sessions,
    /// Datafiles being changed here, for size marks ([`crate::growth`]).
    pub growth: Arc<crate::growth::Growth>,
    started: Instant,
}

/// The current time in nanoseconds since the epoch.
pub fn now_ns() -> TimeNs {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

impl Service {
    /// Opens storage, starts the committer, creates the root if this server holds target 0.
    pub async fn open(config: Config, server_id: u32) -> WeftResult<Arc<Service>> {
        Service::open_with(config, server_id, |store| store).await
    }

    /// As [`Service::open`], with the datafile store passed through `wrap`
    /// (tests wrap the real store to inject faults).
    pub async fn open_with(
        config: Config,
        server_id: u32,
        wrap: impl FnOnce(Arc<dyn DatafileStore>) -> Arc<dyn DatafileStore>,
    ) -> WeftResult<Arc<Service>> {
        let section = config.server(server_id).ok_or(ErrorCode::Invalid)?.clone();
        let reserve_half_bytes = config.durability.metadata_reserve_bytes / 2;
        let store = Arc::new(Store::open(&section.storage, reserve_half_bytes)?);
        let bytestreams = Datafiles::new(wrap(Arc::new(Bytestreams::open(&section.storage)?)), section.capacity_bytes)?
            .with_headroom(store.headroom().clone());
        let durable = config.durability.metadata_sync == MetadataSync::Commit;
        let config_for_peers = config.clone();
        let batch_max = config.durability.commit_batch_max;
        let committer = Committer::start(store.clone(), &section.storage, reserve_half_bytes, durable, batch_max)?;
        let service = Arc::new(Service {
            server_id,
            config,
            store,
            bytestreams,
            committer,
            scheduler: Arc::new(Scheduler::default()),
            counters: Default::default(),
            ranges: Default::default(),
            peers: crate::peers::Peers::new(&config_for_peers, server_id)?,
            pool_wake: Arc::default(),
            pool_filled: Default::default(),
            reclaim_wake: Arc::default(),
            status_table: crate::status::StatusTable::new(&config_for_peers),
            sessions: Default::default(),
            growth: Default::default(),
            started: Instant::now(),
        });
        if service.config.targets_of_server(server_id).contains(&0) {
            let now = now_ns();
            service.committer.submit(Box::new(move |w, _| namespace::ensure_root(w, now))).await?;
        }
        Ok(service)
    }

    /// Starts the background tasks: pool refills, the reclaim queue,
    /// status composition. Not started by [`Service::open`], so tools that
    /// open storage offline do not talk to other servers.
    pub fn start_background(self: &Arc<Self>) {
        self.start_pools();
        self.start_reclaim();
        self.start_status();
    }

    /// Runs `f` in the committer's transaction and returns its value.
    pub async fn committer_call<T, F>(&self, f: F) -> WeftResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&crate::store::Writer<'_>) -> WeftResult<T> + Send + 'static,
    {
        let slot = Arc::new(std::sync::Mutex::new(None));
        let out = slot.clone();
        self.committer
            .submit(Box::new(move |w, _| {
                let value = f(w)?;
                *out.lock().expect("result slot") = Some(value);
                Ok(Reply::Done)
            }))
            .await?;
        let value = slot.lock().expect("result slot").take();
        value.ok_or(ErrorCode::Io)
    }

    /// Checks that a handle belongs to a target this server hosts.
    pub(crate) fn local(&self, handle: Handle) -> WeftResult<()> {
        match self.config.server_of_handle(handle) {
            Some(id) if id == self.server_id => Ok(()),
            _ => Err(ErrorCode::Stale),
        }
    }

    pub(crate) fn local_target(&self, target_id: u16) -> WeftResult<()> {
        match self.config.server_of_target(target_id) {
            Some(id) if id == self.server_id => Ok(()),
            _ => Err(ErrorCode::Invalid),
        }
    }

    /// Runs a closure over a read transaction.
    ///
    /// Runs inline on the network worker: every read is bounded by the
    /// limits (one object, one page, one batch) and mostly served from
    /// redb's cache, so a hop to the blocking pool would cost more (a
    /// thread handoff per request) than it saves.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> WeftResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Service, &Reader) -> WeftResult<T> + Send + 'static,
    {
        let reader = self.store.read()?;
        f(self, &reader)
    }

    pub(crate) async fn commit<F>(&self, f: F) -> ReplyResult
    where
        F: FnOnce(&crate::store::Writer<'_>, &mut crate::committer::IdAllocator) -> ReplyResult + Send + 'static,
    {
        self.committer.submit(Box::new(f)).await
    }

    pub(crate) async fn lookup(self: &Arc<Self>, cred: Credentials, parent: Handle, name: String) -> ReplyResult {
        self.local(parent)?;
        weft_proto::message::validate_name(&name)?;
        self.read(move |_, r| {
            let dir = r.object(parent).map_err(|e| if e == ErrorCode::Stale { ErrorCode::NoEntry } else { e })?;
            if dir.kind != ObjectKind::Directory {
                return Err(ErrorCode::NotDir);
            }
            perm::check(&cred, &dir, EXEC)?;
            let (handle, kind) = r.dirent(parent, &name)?.ok_or(ErrorCode::NoEntry)?;
            Ok(Reply::Entry { handle, kind })
        })
        .await
    }

    pub(crate) fn attributes(&self, reader: &Reader, handle: Handle) -> WeftResult<weft_proto::message::Attributes> {
        let record = reader.object(handle)?;
        let local_size = match record.kind {
            ObjectKind::Datafile => self.bytestreams.stat(handle)?.0,
            _ => 0,
        };
        Ok(record.attributes(handle, local_size))
    }

    pub(crate) async fn getattr_batch(self: &Arc<Self>, handles: Vec<Handle>) -> ReplyResult {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        self.read(move |s, r| {
            let all = handles.iter().map(|h| s.local(*h).and_then(|_| s.attributes(r, *h))).collect();
            Ok(Reply::AttributesBatch(all))
        })
        .await
    }

    pub(crate) async fn datafile_sizes(self: &Arc<Self>, handles: Vec<Handle>) -> ReplyResult {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        self.read(move |s, r| {
            let all = handles.iter().map(|h| s.datafile_stat(r, *h)).collect();
            Ok(Reply::Sizes(all))
        })
        .await
    }

    pub(crate) fn datafile_stat(&self, reader: &Reader, handle: Handle) -> WeftResult<DatafileStat> {
        self.local(handle)?;
        if reader.object(handle)?.kind != ObjectKind::Datafile {
            return Err(ErrorCode::Invalid);
        }
        let (local_size, mtime_ns) = self.bytestreams.stat(handle)?;
        Ok(DatafileStat { local_size, mtime_ns })
    }

    /// Verifies that `handle` is a datafile stored here. Call under the
    /// handle's scheduler entry: a found record is remembered (see
    /// [`crate::datafiles`]), so later requests skip the store.
    pub async fn check_datafile(self: &Arc<Self>, handle: Handle) -> WeftResult<()> {
        self.local(handle)?;
        if self.bytestreams.is_known(handle) {
            return Ok(());
        }
        self.read(move |_, r| match r.object(handle)?.kind {
            ObjectKind::Datafile => Ok(()),
            _ => Err(ErrorCode::Invalid),
        })
        .await?;
        self.bytestreams.remember(handle);
        Ok(())
    }

    pub(crate) async fn truncate(self: &Arc<Self>, handle: Handle, local_size: u64) -> ReplyResult {
        if local_size > limits::FILE_BYTES_MAX {
            return Err(ErrorCode::TooBig);
        }
        let _guard = self.scheduler.exclusive(handle).await;
        let _change = self.begin_change(handle).await?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.bytestreams.set_len(handle, local_size))
            .await
            .map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Io { bytes: 0, local_size })
    }

    pub(crate) async fn remove_object(self: &Arc<Self>, handle: Handle) -> ReplyResult {
        self.local(handle)?;
        let _guard = self.scheduler.exclusive(handle).await;
        self.commit(move |w, _| namespace::remove_object(w, handle)).await?;
        let this = self.clone();
        // The record is gone (committed); the local file, if any, follows.
        tokio::task::spawn_blocking(move || this.bytestreams.remove(handle)).await.map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Done)
    }

    pub(crate) async fn readdir(
        self: &Arc<Self>,
        cred: Credentials,
        dir: Handle,
        cookie: u64,
        max_entries: u32,
    ) -> ReplyResult {
        self.local(dir)?;
        let max = max_entries.clamp(1, limits::READDIR_ENTRIES_MAX);
        self.read(move |_, r| {
            let record = r.object(dir).map_err(|e| if e == ErrorCode::Stale { ErrorCode::NoEntry } else { e })?;
            if record.kind != ObjectKind::Directory {
                return Err(ErrorCode::NotDir);
            }
            perm::check(&cred, &record, READ)?;
            let (entries, end) = r.dir_page(dir, cookie, max)?;
            Ok(Reply::DirPage { entries, end })
        })
        .await
    }

    pub(crate) async fn fsync(self: &Arc<Self>, handles: Vec<Handle>) -> ReplyResult {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        for handle in &handles {
            self.local(*handle)?;
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || handles.iter().try_for_each(|h| this.bytestreams.sync(*h)))
            .await
            .map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Done)
    }

    /// This server's status.
    pub async fn status(self: &Arc<Self>) -> WeftResult<ServerStatus> {
        let storage = self.config.server(self.server_id).ok_or(ErrorCode::Io)?.storage.clone();
        let (mut bytes_total, mut bytes_free) = statvfs(&storage)?;
        if let Some(limit) = self.bytestreams.capacity() {
            let bytestreams = self.bytestreams.clone();
            let used =
                tokio::task::spawn_blocking(move || bytestreams.measure_used()).await.map_err(|_| ErrorCode::Io)??;
            bytes_total = limit;
            bytes_free = limit.saturating_sub(used).min(bytes_free);
        }
        // Datafiles reserved for precreate pools are not in use yet.
        let objects = self
            .read(|_, r| {
                Ok(r.object_count()?
                    .saturating_sub(r.handle_row_count(crate::store::HandleTable::Reserved, 0..u64::MAX)?))
            })
            .await?;
        if self.store.headroom().short() {
            bytes_free = 0; // Writes are refused until the metadata reserve is whole again.
        }
        let storage_device = crate::status::storage_device(&storage, self.bytestreams.capacity(), self.server_id);
        let targets = self.config.targets_of_server(self.server_id).len() as u64;
        Ok(ServerStatus {
            server_id: self.server_id,
            bytes_total,
            bytes_free,
            objects,
            object_ids_free: (weft_proto::handle::OBJECT_ID_MAX * targets).saturating_sub(objects),
            uptime_s: self.started.elapsed().as_secs(),
            down: false,
            storage_device,
        })
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
