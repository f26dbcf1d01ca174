//! The storage part of a server: everything a data request needs and
//! nothing else. It owns
//! - the datafile bytes ([`Datafiles`], the one owner of datafile I/O),
//! - per-datafile ordering ([`Scheduler`]: I/O shared, truncate/remove exclusive),
//! - byte-range exclusion for sieving read-modify-writes ([`RangeLocks`]),
//! - the in-memory size marks of datafiles being changed here ([`Growth`]),
//! - the I/O counters ([`Counters`]).
//!
//! It depends on no other part. The data handlers ([`crate::contiguous`],
//! [`crate::noncontig`], [`crate::sieve`]) take it, and [`crate::metadata`]
//! for the record checks and size marks a datafile's first change needs.

use std::sync::Arc;

use weft_proto::message::{Reply, ReplyResult};
use weft_proto::{limits, ErrorCode, Handle};

use crate::counters::Counters;
use crate::datafiles::Datafiles;
use crate::growth::Growth;
use crate::here::Here;
use crate::ranges::RangeLocks;
use crate::scheduler::Scheduler;

/// Datafile bytes and what orders and counts their I/O.
pub struct Storage {
    /// This server and the configuration.
    pub here: Here,
    /// Datafile bytes: the one owner of datafile I/O ([`crate::datafiles`]).
    pub datafiles: Datafiles,
    /// Per-handle ordering.
    pub scheduler: Arc<Scheduler>,
    /// Byte-range exclusion for sieving writes.
    pub ranges: RangeLocks,
    /// Datafiles being changed here, for size marks ([`crate::growth`]).
    pub growth: Arc<Growth>,
    /// I/O counters (`Request::Counters`).
    pub counters: Counters,
}

impl Storage {
    /// Storage over `datafiles`.
    pub fn new(here: Here, datafiles: Datafiles) -> Storage {
        Storage {
            here,
            datafiles,
            scheduler: Arc::default(),
            ranges: RangeLocks::default(),
            growth: Arc::default(),
            counters: Counters::default(),
        }
    }

    /// Serves `Fsync`: makes the local bytes of `handles` durable.
    pub async fn fsync(self: &Arc<Self>, handles: Vec<Handle>) -> ReplyResult {
        if handles.len() > limits::BATCH_HANDLES_MAX as usize {
            return Err(ErrorCode::Invalid);
        }
        for handle in &handles {
            self.here.local(*handle)?;
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || handles.iter().try_for_each(|h| this.datafiles.sync(*h)))
            .await
            .map_err(|_| ErrorCode::Io)??;
        Ok(Reply::Done)
    }
}
