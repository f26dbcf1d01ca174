//! Precreate pools: datafile handles each metadata server holds on every
//! other data server, so a create takes its datafiles from a local table
//! inside its one transaction instead of calling the data servers.
//!
//! Protocol (M = metadata server, D = data server):
//! 1. Reserve: M asks D for a batch (`ReserveDatafiles`). D creates the
//!    datafile records and a `reserved` row (handle → M) for each in one
//!    commit, durable before it replies.
//! 2. Adopt: M stores the granted handles in its `pool` table (handle → D)
//!    in one commit, durable before any create can use them.
//! 3. Use: a create moves a handle from `pool` to `pool_used` in the same
//!    transaction that writes the metafile naming it.
//! 4. Claim: in the background M tells D which handles it used
//!    (`ClaimReserved`); D drops their `reserved` rows, then M drops its
//!    `pool_used` rows.
//! 5. Reconcile: at start-up, and after any failed reservation, M asks D
//!    which handles are still reserved for it (`ListReserved`) and adopts
//!    those that are neither in `pool` nor in `pool_used`. A crash between
//!    1 and 2 therefore loses nothing, and a used handle is never adopted
//!    again: it stays in `pool_used` until D has forgotten its reservation.
//!
//! Steps 1, 2, 4 and 5 for one D run in one task, one after the other, so
//! a reconcile never races a claim of the same handles. A handle is in at
//! most one of `pool` and `pool_used`, and only M's committer moves it.
//! Nothing is held across a peer call.

use std::sync::Arc;
use std::time::Duration;

use weft_proto::limits::RESERVE_HANDLES_MAX;
use weft_proto::message::{ObjectKind, Reply, ReplyResult, Request};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::cluster::Cluster;
use crate::committer::IdAllocator;
use crate::metadata::now_ns;
use crate::store::{target_range, HandleTable, ObjectRecord, Reader, SizeTracking, Writer};

/// Period of the refill/claim loop.
const POOL_PERIOD: Duration = Duration::from_millis(200);
/// Claims sent per request.
const CLAIM_BATCH: usize = 4096;

/// Data server: creates `count` datafiles reserved for `metadata_server` (in the committer).
pub fn reserve(w: &Writer<'_>, ids: &mut IdAllocator, target_id: u16, metadata_server: u32, count: u32) -> ReplyResult {
    if count == 0 || count > RESERVE_HANDLES_MAX {
        return Err(ErrorCode::Invalid);
    }
    let mut record = ObjectRecord::new(ObjectKind::Datafile, 0o600, 0, 0, now_ns());
    record.tracking = Some(SizeTracking::Datafile(metadata_server));
    let mut handles = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let handle = ids.allocate(w, target_id)?;
        w.put_object(handle, &record)?;
        w.put_handle_row(HandleTable::Reserved, handle, metadata_server)?;
        handles.push(handle);
    }
    Ok(Reply::Handles(handles))
}

/// Data server: handles still reserved for `metadata_server`.
pub fn list_reserved(r: &Reader, metadata_server: u32) -> ReplyResult {
    let rows = r.handle_rows(HandleTable::Reserved, 0..u64::MAX, usize::MAX)?;
    let handles: Vec<Handle> = rows
        .into_iter()
        .filter(|(_, m)| *m == metadata_server)
        .map(|(h, _)| h)
        .take(RESERVE_HANDLES_MAX as usize)
        .collect();
    Ok(Reply::Handles(handles))
}

/// Data server: forgets reservations that `metadata_server` has used.
pub fn claim(w: &Writer<'_>, metadata_server: u32, handles: &[Handle]) -> ReplyResult {
    if handles.len() > RESERVE_HANDLES_MAX as usize {
        return Err(ErrorCode::Invalid);
    }
    for handle in handles {
        if w.handle_row(HandleTable::Reserved, *handle)? == Some(metadata_server) {
            w.delete_handle_row(HandleTable::Reserved, *handle)?;
            crate::growth::adopt_legacy_datafile(w, *handle, metadata_server)?;
        }
    }
    Ok(Reply::Done)
}

/// Metadata server, inside a create's transaction: takes one pool handle
/// on target `target_id`, moving it to `pool_used`.
pub fn take(w: &Writer<'_>, target_id: u16, data_server: u32) -> WeftResult<Option<Handle>> {
    let Some((handle, _)) = w.first_handle_row(HandleTable::Pool, target_range(target_id))? else {
        return Ok(None);
    };
    w.delete_handle_row(HandleTable::Pool, handle)?;
    w.put_handle_row(HandleTable::PoolUsed, handle, data_server)?;
    Ok(Some(handle))
}

impl Cluster {
    /// Whether the pool of handles from `data_server` holds at least one.
    fn pool_nonempty(&self, reader: &Reader, data_server: u32) -> bool {
        let Some(target) = self.here.config.primary_target(data_server) else { return false };
        reader.handle_rows(HandleTable::Pool, target_range(target), 1).is_ok_and(|rows| !rows.is_empty())
    }

    /// Handles in this server's pool for `data_server`.
    pub fn pool_size(&self, data_server: u32) -> WeftResult<u64> {
        let target = self.here.config.primary_target(data_server).ok_or(ErrorCode::Invalid)?;
        self.metadata.store.read()?.handle_row_count(HandleTable::Pool, target_range(target))
    }

    /// Starts one refill/claim task per other data server (metadata servers only).
    pub fn start_pools(self: &Arc<Self>) {
        if !self.here.config.metadata_servers().contains(&self.here.server_id) {
            return;
        }
        for data_server in self.here.config.data_servers() {
            if data_server != self.here.server_id {
                let weak = Arc::downgrade(self);
                tokio::spawn(pool_task(weak, data_server));
            }
        }
    }

    /// Reconciles, refills and claims for `data_server` once. Returns
    /// whether the pool is reconciled afterwards.
    pub async fn pool_round(self: &Arc<Self>, data_server: u32, reconciled: bool) -> bool {
        // Keeps a connection open, so a crash is noticed when it closes
        // (`Peers::unreachable`) and a return on the next round.
        if self.peers.call_within(data_server, Request::Ping, POOL_PERIOD * 5).await.is_err() {
            return reconciled;
        }
        if !reconciled && self.reconcile(data_server).await.is_err() {
            return false;
        }
        if self.refill(data_server).await.is_err() {
            return false;
        }
        let _ = self.claim_used(data_server).await;
        true
    }

    async fn reconcile(self: &Arc<Self>, data_server: u32) -> WeftResult<()> {
        let request = Request::ListReserved { metadata_server: self.here.server_id };
        let Reply::Handles(handles) = self.peers.call(data_server, request).await? else {
            return Err(ErrorCode::Protocol);
        };
        self.metadata
            .committer
            .submit(Box::new(move |w, _| {
                for handle in handles {
                    let known = w.handle_row(HandleTable::Pool, handle)?.is_some()
                        || w.handle_row(HandleTable::PoolUsed, handle)?.is_some();
                    if !known {
                        w.put_handle_row(HandleTable::Pool, handle, data_server)?;
                    }
                }
                Ok(Reply::Done)
            }))
            .await?;
        Ok(())
    }

    async fn refill(self: &Arc<Self>, data_server: u32) -> WeftResult<()> {
        if self.pool_size(data_server)? >= u64::from(self.here.config.collectives.pool_batch) {
            return Ok(());
        }
        let request = Request::ReserveDatafiles {
            metadata_server: self.here.server_id,
            count: self.here.config.collectives.pool_batch.min(RESERVE_HANDLES_MAX),
        };
        let Reply::Handles(handles) = self.peers.call(data_server, request).await? else {
            return Err(ErrorCode::Protocol);
        };
        let target = self.here.config.primary_target(data_server).ok_or(ErrorCode::Invalid)?;
        if handles.iter().any(|h| !target_range(target).contains(&h.0)) {
            return Err(ErrorCode::Protocol);
        }
        self.metadata
            .committer
            .submit(Box::new(move |w, _| {
                handles.iter().try_for_each(|h| w.put_handle_row(HandleTable::Pool, *h, data_server))?;
                Ok(Reply::Done)
            }))
            .await?;
        self.pool_filled.notify_waiters();
        Ok(())
    }

    async fn claim_used(self: &Arc<Self>, data_server: u32) -> WeftResult<()> {
        let target = self.here.config.primary_target(data_server).ok_or(ErrorCode::Invalid)?;
        let used = self.metadata.store.read()?.handle_rows(HandleTable::PoolUsed, target_range(target), CLAIM_BATCH)?;
        if used.is_empty() {
            return Ok(());
        }
        let handles: Vec<Handle> = used.into_iter().map(|(h, _)| h).collect();
        let request = Request::ClaimReserved { metadata_server: self.here.server_id, handles: handles.clone() };
        self.peers.call(data_server, request).await?;
        self.metadata
            .committer
            .submit(Box::new(move |w, _| {
                handles.iter().try_for_each(|h| w.delete_handle_row(HandleTable::PoolUsed, *h))?;
                Ok(Reply::Done)
            }))
            .await?;
        Ok(())
    }

    /// Waits (bounded, 2 s) until the pools of the servers among
    /// `data_servers` that are not known to be down hold a
    /// handle, so creates right after start-up get their full stripe count.
    pub async fn await_pools(self: &Arc<Self>, data_servers: &[u32]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            // Runs on every create: one read transaction and a one-row
            // probe per pool (counting a pool's rows cost about an eighth
            // of a server's CPU during creates).
            let reader = self.metadata.store.read().ok();
            let empty = data_servers.iter().any(|d| {
                *d != self.here.server_id
                    && !self.status_table.is_down(*d)
                    && !self.peers.pool_connection_lost(*d)
                    && !reader.as_ref().is_some_and(|r| self.pool_nonempty(r, *d))
            });
            drop(reader);
            if !empty || tokio::time::Instant::now() >= deadline {
                return;
            }
            self.pool_wake.notify_waiters();
            let _ = tokio::time::timeout(Duration::from_millis(50), self.pool_filled.notified()).await;
        }
    }
}

async fn pool_task(service: std::sync::Weak<Cluster>, data_server: u32) {
    let mut reconciled = false;
    loop {
        let Some(this) = service.upgrade() else { return };
        reconciled = this.pool_round(data_server, reconciled).await;
        let wake = this.pool_wake.clone();
        drop(this);
        let _ = tokio::time::timeout(POOL_PERIOD, wake.notified()).await;
    }
}
