//! The cluster part of a server: what it does with the other servers.
//! It owns the connections to them ([`Peers`]), the composed status table
//! ([`StatusTable`]: who is up, how full), the wakes of the precreate pool
//! and reclaim tasks, and the operations that talk to other servers:
//! - aggregate namespace operations ([`crate::aggregate`]: create, stat,
//!   remove, mkdir, rmdir, rename, statfs) and the size gathers of a stat;
//! - precreate pools ([`crate::pools`]);
//! - the reclaim queue and object removal ([`crate::reclaim`]);
//! - tree collectives ([`crate::tree`]);
//! - status composition (here).
//!
//! Those modules add their methods to [`Cluster`]; none of them is
//! imported here. The cluster holds [`Metadata`] and [`Storage`] (its
//! operations read and commit records and remove local bytes); neither of
//! them knows the cluster.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;
use weft_proto::message::{Reply, Request, ServerStatus, StatusEntry};
use weft_proto::{ErrorCode, WeftResult};

use crate::here::Here;
use crate::metadata::{now_ns, Metadata};
use crate::peers::Peers;
use crate::status::StatusTable;
use crate::storage::Storage;
use crate::store::HandleTable;

/// Peers, status, background wakes; the operations across servers.
pub struct Cluster {
    /// This server and the configuration.
    pub here: Here,
    /// Local records.
    pub metadata: Arc<Metadata>,
    /// Local datafile bytes.
    pub storage: Arc<Storage>,
    /// Connections to the other servers.
    pub peers: Arc<Peers>,
    /// The composed status table ([`crate::status`]).
    pub status_table: StatusTable,
    /// Wakes the pool tasks (a create found a pool empty).
    pub pool_wake: Arc<Notify>,
    /// Signalled after a pool refill.
    pub pool_filled: Notify,
    /// Wakes the reclaim task (something was queued).
    pub reclaim_wake: Arc<Notify>,
    started: Instant,
}

impl Cluster {
    /// The cluster part over the local parts.
    pub fn new(here: Here, metadata: Arc<Metadata>, storage: Arc<Storage>, peers: Arc<Peers>) -> Cluster {
        let status_table = StatusTable::new(&here.config);
        Cluster {
            here,
            metadata,
            storage,
            peers,
            status_table,
            pool_wake: Arc::default(),
            pool_filled: Notify::default(),
            reclaim_wake: Arc::default(),
            started: Instant::now(),
        }
    }

    /// Starts the background tasks: pool refills, the reclaim queue,
    /// status composition.
    pub fn start_background(self: &Arc<Self>) {
        self.start_pools();
        self.start_reclaim();
        self.start_status();
    }

    /// This server's status.
    pub async fn status(&self) -> WeftResult<ServerStatus> {
        let server_id = self.here.server_id;
        let storage = self.here.config.server(server_id).ok_or(ErrorCode::Io)?.storage.clone();
        let datafiles = &self.storage.datafiles;
        let (mut bytes_total, mut bytes_free) = crate::reserve::statvfs(&storage)?;
        if let Some(limit) = datafiles.capacity() {
            let datafiles = datafiles.clone();
            let used =
                tokio::task::spawn_blocking(move || datafiles.measure_used()).await.map_err(|_| ErrorCode::Io)??;
            bytes_total = limit;
            bytes_free = limit.saturating_sub(used).min(bytes_free);
        }
        // Datafiles reserved for precreate pools are not in use yet.
        let objects = self
            .metadata
            .read(|_, r| Ok(r.object_count()?.saturating_sub(r.handle_row_count(HandleTable::Reserved, 0..u64::MAX)?)))
            .await?;
        if self.metadata.store.headroom().short() {
            bytes_free = 0; // Writes are refused until the metadata reserve is whole again.
        }
        let storage_device = crate::status::storage_device(&storage, datafiles.capacity(), server_id);
        let targets = self.here.config.targets_of_server(server_id).len() as u64;
        Ok(ServerStatus {
            server_id,
            bytes_total,
            bytes_free,
            objects,
            object_ids_free: (weft_proto::handle::OBJECT_ID_MAX * targets).saturating_sub(objects),
            uptime_s: self.started.elapsed().as_secs(),
            down: false,
            storage_device,
        })
    }

    /// The composed status table, once it knows every server.
    pub fn composed_status(&self) -> Option<Vec<ServerStatus>> {
        self.status_table.composed()
    }

    /// The composed table as statfs answers it: the free space of this
    /// server's own storage file system is measured now, not taken from
    /// rows up to a period old. It replaces the free bytes of every row
    /// naming the same device, except rows at 0 (a server whose metadata
    /// reserve is short refuses writes until its own row says otherwise).
    ///
    /// Why: a row produced just before a fill still shows the space the
    /// fill took, and one produced before a remove does not show what the
    /// remove gave back; the client counts a shared device by its least
    /// free row, so a stale row could report space that is gone (seen: a
    /// fill and the removal after it within one status period). With the
    /// answering server's device measured at the request, statfs is exact
    /// for the disk it shares and at most about a period old for others.
    pub fn composed_status_now(&self) -> Option<Vec<ServerStatus>> {
        let mut table = self.status_table.composed()?;
        if self.storage.datafiles.capacity().is_some() {
            // Free space is limit − measured usage, measured once per period.
            return Some(table);
        }
        let server_id = self.here.server_id;
        let storage = &self.here.config.server(server_id)?.storage;
        let Ok((total, free)) = crate::reserve::statvfs(storage) else { return Some(table) };
        let own_free = if self.metadata.store.headroom().short() { 0 } else { free };
        let Some(device) = table.iter().find(|s| s.server_id == server_id).map(|s| s.storage_device) else {
            return Some(table);
        };
        for row in table.iter_mut().filter(|row| row.storage_device == device) {
            row.bytes_total = total;
            if row.server_id == server_id || row.bytes_free > 0 {
                row.bytes_free = if row.server_id == server_id { own_free } else { free };
            }
        }
        Some(table)
    }

    /// Free bytes of `server` from the composed table.
    pub fn free_bytes_known(&self, server: u32) -> Option<u64> {
        self.status_table.free_bytes(server)
    }

    /// Whether `server` should be skipped: reported down by status
    /// composition, or the last peer call could not reach it.
    pub fn is_down(&self, server: u32) -> bool {
        server != self.here.server_id && (self.peers.unreachable(server) || self.status_table.is_down(server))
    }

    /// Answers an exchange step: merges the sender's rows, replies with ours.
    pub fn exchange_status(&self, entries: Vec<StatusEntry>) -> Reply {
        self.status_table.merge(entries);
        Reply::StatusEntries(self.status_table.entries())
    }

    /// One period of status composition ([`crate::status`]): own row, then
    /// the recursive-doubling steps.
    pub async fn status_round(&self) {
        if let Ok(status) = self.status().await {
            self.status_table.merge(vec![StatusEntry { status, produced_ns: now_ns() }]);
        }
        let servers = self.status_table.servers().to_vec();
        let Some(index) = servers.iter().position(|s| *s == self.here.server_id) else { return };
        let steps = usize::BITS - (servers.len().max(1) - 1).leading_zeros();
        let step_deadline = self.status_table.period / steps.max(1);
        for step in 0..steps {
            let partner = index ^ (1 << step);
            let Some(partner) = servers.get(partner).copied() else { continue };
            let request = Request::ExchangeStatus { entries: self.status_table.entries() };
            if let Ok(Reply::StatusEntries(entries)) = self.peers.call_within(partner, request, step_deadline).await {
                self.status_table.merge(entries);
            }
        }
    }

    /// Starts status composition.
    pub fn start_status(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                let period = this.status_table.period;
                let started = tokio::time::Instant::now();
                this.status_round().await;
                drop(this);
                tokio::time::sleep_until(started + period).await;
            }
        });
    }
}
