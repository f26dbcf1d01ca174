//! Removing objects: the durable reclaim queue and the local removal that
//! both the queue and tree collectives use.
//!
//! An aggregate remove drops the directory entry and the metafile and puts
//! the file's datafiles in the `reclaim` table (handle → server), all in one
//! transaction, then replies. A background task on every server removes
//! what its queue holds with one `RemoveObjects` tree collective (its own
//! datafiles being its own share) and deletes the rows of the objects that
//! are gone; a wake (something was queued) starts a round after a short
//! pause, so a stream of removes shares rounds. Rows of servers that do
//! not answer stay and are retried every [`RECLAIM_PERIOD`], so datafiles
//! on a server that is down are reclaimed after it returns. `fsck` counts
//! queued handles as accounted for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use weft_proto::message::{CollectiveOp, CollectivePart, ObjectKind, Reply};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::cluster::Cluster;
use crate::store::{HandleTable, Writer};

/// Retry period of the reclaim queue.
pub const RECLAIM_PERIOD: Duration = Duration::from_millis(500);
/// Handles taken from the queue per round.
const RECLAIM_BATCH: usize = 4096;
/// After a wake, how long the task lets more removes join its round: a
/// round costs a collective and a durable commit on every server holding a
/// datafile, so one round per remove made removes several times dearer
/// than creates.
const RECLAIM_COALESCE: Duration = Duration::from_millis(50);

/// What removing an object left to do after the commit.
pub enum Removed {
    /// Nothing.
    Nothing,
    /// Delete the datafile's local bytestream.
    Bytestream(Handle),
}

impl Cluster {
    /// Inside a transaction: removes `handle` if it is stored here, else
    /// queues it for reclaim on its server. A metafile's datafiles are queued.
    pub fn destroy_or_queue(&self, w: &Writer<'_>, handle: Handle) -> WeftResult<Removed> {
        match self.here.config.server_of_handle(handle) {
            Some(server) if server == self.here.server_id => self.destroy_local(w, handle),
            Some(server) => {
                w.put_handle_row(HandleTable::Reclaim, handle, server)?;
                Ok(Removed::Nothing)
            }
            None => Ok(Removed::Nothing),
        }
    }

    /// Inside a transaction: removes a local object (absent is fine). A
    /// directory must be empty.
    pub fn destroy_local(&self, w: &Writer<'_>, handle: Handle) -> WeftResult<Removed> {
        let record = match w.object(handle) {
            Ok(record) => record,
            Err(ErrorCode::Stale) => return Ok(Removed::Nothing),
            Err(code) => return Err(code),
        };
        match record.kind {
            ObjectKind::Directory if handle == Handle::ROOT => return Err(ErrorCode::Busy),
            ObjectKind::Directory if record.entry_count > 0 => return Err(ErrorCode::NotEmpty),
            _ => {}
        }
        w.delete_object(handle)?;
        match record.kind {
            ObjectKind::Metafile => {
                for datafile in record.layout.map(|l| l.datafiles).unwrap_or_default() {
                    let server = self.here.config.server_of_handle(datafile).ok_or(ErrorCode::Io)?;
                    w.put_handle_row(HandleTable::Reclaim, datafile, server)?;
                }
                self.reclaim_wake.notify_one();
                Ok(Removed::Nothing)
            }
            ObjectKind::Datafile => {
                w.delete_handle_row(HandleTable::Reserved, handle)?;
                Ok(Removed::Bytestream(handle))
            }
            ObjectKind::Directory
            | ObjectKind::Symlink
            | ObjectKind::Fifo
            | ObjectKind::Socket
            | ObjectKind::BlockDevice
            | ObjectKind::CharDevice => Ok(Removed::Nothing),
        }
    }

    /// Removes local objects (a `RemoveObjects` share): one transaction,
    /// datafiles under their exclusive scheduler entries; missing objects
    /// count as removed. One result per handle.
    pub async fn remove_local_objects(self: &Arc<Self>, handles: Vec<Handle>) -> WeftResult<Vec<WeftResult<()>>> {
        if handles.len() > weft_proto::limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        let mut sorted = handles.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let mut guards = Vec::with_capacity(sorted.len());
        for handle in &sorted {
            guards.push(self.storage.scheduler.exclusive(*handle).await);
        }
        let this = self.clone();
        let (results, bytestreams) = self
            .metadata
            .committer_call(move |w| {
                let mut bytestreams = Vec::new();
                let results: Vec<WeftResult<()>> = handles
                    .iter()
                    .map(|h| match this.here.config.server_of_handle(*h) {
                        Some(server) if server == this.here.server_id => match this.destroy_local(w, *h) {
                            Ok(Removed::Bytestream(b)) => {
                                bytestreams.push(b);
                                Ok(())
                            }
                            Ok(Removed::Nothing) => Ok(()),
                            Err(code) => Err(code),
                        },
                        _ => Err(ErrorCode::Stale),
                    })
                    .collect();
                Ok((results, bytestreams))
            })
            .await?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || bytestreams.iter().try_for_each(|h| this.storage.datafiles.remove(*h)))
            .await
            .map_err(|_| ErrorCode::Io)??;
        drop(guards);
        Ok(results)
    }

    /// One pass over the reclaim queue. Returns how many rows remain unreclaimed.
    pub async fn reclaim_round(self: &Arc<Self>) -> WeftResult<usize> {
        let rows = self.metadata.store.read()?.handle_rows(HandleTable::Reclaim, 0..u64::MAX, RECLAIM_BATCH)?;
        if rows.is_empty() {
            return Ok(0);
        }
        let mut by_server: BTreeMap<u32, Vec<Handle>> = BTreeMap::new();
        for (handle, server) in &rows {
            by_server.entry(*server).or_default().push(*handle);
        }
        let groups = crate::tree::groups_rooted_at(self.here.server_id, by_server);
        let result = crate::tree::run(self, CollectiveOp::RemoveObjects, groups.clone(), 0, 0).await?;
        let mut done = Vec::new();
        for (group, (_, part)) in groups.iter().zip(result.parts) {
            if let Ok(CollectivePart::Removed(results)) = part {
                for (handle, removed) in group.handles.iter().zip(results) {
                    if matches!(removed, Ok(()) | Err(ErrorCode::Stale)) {
                        done.push(*handle);
                    }
                }
            }
        }
        let remaining = rows.len() - done.len();
        self.metadata
            .committer
            .submit(Box::new(move |w, _| {
                for handle in &done {
                    w.delete_handle_row(HandleTable::Reclaim, *handle)?;
                    // A removed datafile's size mark (crate::growth) goes with it.
                    w.delete_handle_row(HandleTable::Growing, *handle)?;
                }
                Ok(Reply::Done)
            }))
            .await?;
        Ok(remaining)
    }

    /// Starts the reclaim task.
    pub fn start_reclaim(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                let _ = this.reclaim_round().await;
                let wake = this.reclaim_wake.clone();
                drop(this);
                if tokio::time::timeout(RECLAIM_PERIOD, wake.notified()).await.is_ok() {
                    tokio::time::sleep(RECLAIM_COALESCE).await;
                }
            }
        });
    }
}
