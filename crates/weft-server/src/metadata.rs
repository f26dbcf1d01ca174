//! The metadata part of a server: the key/value store and its one writer
//! (the committer), and the operations on records stored here — reads
//! (lookup, attributes, readdir, datafile stats), single-object changes
//! (create, set layout, set attributes, rename within the server, remove)
//! and the size marks of datafiles ([`crate::growth`]: a datafile's first
//! change marks it growing at its metafile's server).
//!
//! It holds [`Storage`] (a datafile's attributes are its local size;
//! truncate and remove change local bytes) and [`Peers`] (a mark whose
//! metafile lives on another server is a peer call); it knows nothing of
//! sessions or of the cluster-wide operations in [`crate::cluster`].
//!
//! Reads of metadata run inline with their own read transaction; changes
//! go through the committer.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use weft_config::{Config, MetadataSync};
use weft_proto::message::{Credentials, DatafileStat, ObjectKind, Reply, ReplyResult, Request, SettleStat, TimeNs};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::committer::{Committer, IdAllocator};
use crate::growth::{self, ChangeGuard};
use crate::here::Here;
use crate::namespace;
use crate::peers::Peers;
use crate::perm::{self, EXEC, READ};
use crate::storage::Storage;
use crate::store::{HandleTable, Reader, SizeTracking, Store, Writer};

/// The current time in nanoseconds since the epoch.
pub fn now_ns() -> TimeNs {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The store, its committer and the operations on local records.
pub struct Metadata {
    /// This server and the configuration.
    pub here: Here,
    /// Key/value store.
    pub store: Arc<Store>,
    /// Namespace change queue: the one writer of the store.
    pub committer: Committer,
    /// Local datafile bytes (sizes for attributes; truncate, remove).
    pub storage: Arc<Storage>,
    /// Connections to the other servers (size marks at another metafile server).
    pub peers: Arc<Peers>,
}

impl Metadata {
    /// Opens the store and starts the committer.
    pub fn open(here: Here, store: Arc<Store>, storage: Arc<Storage>, peers: Arc<Peers>) -> WeftResult<Metadata> {
        let config: &Config = &here.config;
        let section = config.server(here.server_id).ok_or(ErrorCode::Invalid)?;
        let reserve_half_bytes = config.durability.metadata_reserve_bytes / 2;
        let durable = config.durability.metadata_sync == MetadataSync::Commit;
        let batch_max = config.durability.commit_batch_max;
        let committer = Committer::start(store.clone(), &section.storage, reserve_half_bytes, durable, batch_max)?;
        Ok(Metadata { here, store, committer, storage, peers })
    }

    /// With `metadata_sync = none`, waits until every change committed so
    /// far is durable (an `Fsync` makes the file's metadata durable too);
    /// with `commit` every acknowledged change already is.
    pub async fn flush_if_lazy(&self) -> ReplyResult {
        if self.here.config.durability.metadata_sync == MetadataSync::Commit {
            return Ok(Reply::Done);
        }
        self.committer.flush().await
    }

    /// Runs `f` in the committer's transaction and returns its value.
    pub async fn committer_call<T, F>(&self, f: F) -> WeftResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Writer<'_>) -> WeftResult<T> + Send + 'static,
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

    /// Runs a closure over a read transaction.
    ///
    /// Runs inline on the network worker: every read is bounded by the
    /// limits (one object, one page, one batch) and mostly served from
    /// redb's cache, so a hop to the blocking pool would cost more (a
    /// thread handoff per request) than it saves.
    pub(crate) async fn read<T, F>(&self, f: F) -> WeftResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Metadata, &Reader) -> WeftResult<T> + Send + 'static,
    {
        let reader = self.store.read()?;
        f(self, &reader)
    }

    /// Runs a change in the committer's (group-committed) transaction.
    pub(crate) async fn commit<F>(&self, f: F) -> ReplyResult
    where
        F: FnOnce(&Writer<'_>, &mut IdAllocator) -> ReplyResult + Send + 'static,
    {
        self.committer.submit(Box::new(f)).await
    }

    pub(crate) async fn lookup(&self, cred: Credentials, parent: Handle, name: String) -> ReplyResult {
        self.here.local(parent)?;
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
            ObjectKind::Datafile => self.storage.datafiles.stat(handle)?.0,
            _ => 0,
        };
        Ok(record.attributes(handle, local_size))
    }

    /// Attributes of `handle` and, for a metafile, its size tracking, read together.
    pub(crate) fn tracked_attributes(
        &self,
        r: &Reader,
        handle: Handle,
    ) -> WeftResult<(weft_proto::message::Attributes, growth::Tracked)> {
        let record = r.object(handle)?;
        let local_size = if record.kind == ObjectKind::Datafile { self.storage.datafiles.stat(handle)?.0 } else { 0 };
        Ok((record.attributes(handle, local_size), growth::tracked(r, &record)?))
    }

    pub(crate) async fn getattr(&self, handle: Handle) -> ReplyResult {
        self.here.local(handle)?;
        let attrs = self.read(move |s, r| s.attributes(r, handle)).await?;
        Ok(Reply::Attributes(attrs))
    }

    pub(crate) async fn getattr_batch(&self, handles: Vec<Handle>) -> ReplyResult {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        self.read(move |s, r| {
            let all = handles.iter().map(|h| s.here.local(*h).and_then(|_| s.attributes(r, *h))).collect();
            Ok(Reply::AttributesBatch(all))
        })
        .await
    }

    pub(crate) async fn datafile_sizes(&self, handles: Vec<Handle>) -> ReplyResult {
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
        self.here.local(handle)?;
        if reader.object(handle)?.kind != ObjectKind::Datafile {
            return Err(ErrorCode::Invalid);
        }
        let (local_size, mtime_ns) = self.storage.datafiles.stat(handle)?;
        Ok(DatafileStat { local_size, mtime_ns })
    }

    /// Local sizes of datafiles stored here (a `DatafileSizes` share).
    pub fn local_datafile_stats(&self, handles: &[Handle]) -> WeftResult<Vec<WeftResult<DatafileStat>>> {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        let reader = self.store.read()?;
        Ok(handles.iter().map(|h| self.datafile_stat(&reader, *h)).collect())
    }

    /// Verifies that `handle` is a datafile stored here. Call under the
    /// handle's scheduler entry: a found record is remembered (see
    /// [`crate::datafiles`]), so later requests skip the store.
    pub async fn check_datafile(&self, handle: Handle) -> WeftResult<()> {
        self.here.local(handle)?;
        if self.storage.datafiles.is_known(handle) {
            return Ok(());
        }
        self.read(move |_, r| match r.object(handle)?.kind {
            ObjectKind::Datafile => Ok(()),
            _ => Err(ErrorCode::Invalid),
        })
        .await?;
        self.storage.datafiles.remember(handle);
        Ok(())
    }

    /// Data server: checks that `handle` is a datafile stored here and, if
    /// it is not marked, marks it at its metadata server; the guard counts
    /// the change as in flight until dropped. Every write and truncate of a
    /// datafile holds one while it changes the bytes ([`crate::growth`]).
    pub async fn begin_change(&self, handle: Handle) -> WeftResult<ChangeGuard> {
        self.check_datafile(handle).await?;
        let (guard, unmarked) = self.storage.growth.enter(handle);
        if unmarked {
            // The record is read only on a transition (check_datafile remembers it).
            let owner = self
                .read(move |_, r| match r.object(handle)?.tracking {
                    Some(SizeTracking::Datafile(server)) => Ok(Some(server)),
                    // Reserved before records named their server: the reservation does.
                    _ => r.handle_row(HandleTable::Reserved, handle),
                })
                .await?;
            if let Some(owner) = owner {
                self.mark_growing_at(owner, handle).await?;
            }
            self.storage.growth.set_marked(handle);
        }
        Ok(guard)
    }

    async fn mark_growing_at(&self, owner: u32, handle: Handle) -> WeftResult<()> {
        if owner == self.here.server_id {
            self.commit(move |w, _| growth::mark_txn(w, &[handle])).await?;
            return Ok(());
        }
        match self.peers.call(owner, Request::MarkGrowing { datafiles: vec![handle] }).await? {
            Reply::Done => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Metadata server: `MarkGrowing`.
    pub async fn mark_growing(&self, datafiles: Vec<Handle>) -> ReplyResult {
        self.commit(move |w, _| growth::mark_txn(w, &datafiles)).await
    }

    /// Data server: this server's share of a `SettleSizes` collective.
    pub fn local_settle_stats(&self, handles: &[Handle]) -> WeftResult<Vec<WeftResult<SettleStat>>> {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        let reader = self.store.read()?;
        // The stat first: a change after it is either still in flight or
        // recent (not idle), or starts after the datafile was forgotten and
        // is marked again.
        Ok(handles
            .iter()
            .map(|h| {
                self.datafile_stat(&reader, *h).map(|stat| SettleStat { stat, idle: self.storage.growth.take_idle(*h) })
            })
            .collect())
    }

    pub(crate) async fn truncate(&self, handle: Handle, local_size: u64) -> ReplyResult {
        if local_size > limits::FILE_BYTES_MAX {
            return Err(ErrorCode::TooBig);
        }
        let _guard = self.storage.scheduler.exclusive(handle).await;
        let _change = self.begin_change(handle).await?;
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || storage.datafiles.set_len(handle, local_size))
            .await
            .map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Io { bytes: 0, local_size })
    }

    /// `TrimDatafile`: shrinks to `local_size` only if the local size is
    /// exactly `if_size`, under the datafile's exclusive scheduler entry
    /// (no write runs meanwhile).
    pub(crate) async fn trim(&self, handle: Handle, if_size: u64, local_size: u64) -> ReplyResult {
        let _guard = self.storage.scheduler.exclusive(handle).await;
        let _change = self.begin_change(handle).await?;
        let storage = self.storage.clone();
        let after = tokio::task::spawn_blocking(move || {
            let (size, _) = storage.datafiles.stat(handle)?;
            if size == if_size && local_size < if_size {
                storage.datafiles.set_len(handle, local_size)?;
                return Ok(local_size);
            }
            Ok::<_, ErrorCode>(size)
        })
        .await
        .map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Io { bytes: 0, local_size: after })
    }

    pub(crate) async fn remove_object(&self, handle: Handle) -> ReplyResult {
        self.here.local(handle)?;
        let _guard = self.storage.scheduler.exclusive(handle).await;
        self.commit(move |w, _| namespace::remove_object(w, handle)).await?;
        let storage = self.storage.clone();
        // The record is gone (committed); the local file, if any, follows.
        tokio::task::spawn_blocking(move || storage.datafiles.remove(handle)).await.map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Done)
    }

    pub(crate) async fn readdir(&self, cred: Credentials, dir: Handle, cookie: u64, max_entries: u32) -> ReplyResult {
        self.here.local(dir)?;
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
}
