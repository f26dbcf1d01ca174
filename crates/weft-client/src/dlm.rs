//! Byte-range locks held at the data servers (`weft-server::locks`), and
//! the client protocols that take them without deadlock (Ching 2007, §7.3–7.4).
//!
//! A lock on an access (a list of file regions or a datatype view) is cut
//! into *slots*, one lock request each, by the **method**:
//! - [`LockMethod::Posix`]: one request per contiguous file region and
//!   server (the region split at strip boundaries);
//! - [`LockMethod::List`]: one request per datafile per `regions_per_request`
//!   local ranges;
//! - [`LockMethod::Datatype`]: one request per datafile carrying the whole
//!   access (each server walks only its own pieces); a list access falls
//!   back to list locks.
//!
//! The posix and list methods' ranges are made by `crate::lock_ranges` in
//! bounded client memory: past `CLIENT_RANGES_MAX` ranges for an access,
//! runs of a datafile's pieces are locked as covering ranges.
//!
//! Every server grants a request's pieces in increasing file offset and
//! answers `last` (end of the last piece granted) and `next` (first piece
//! not granted). The client keeps the slots in a heap by `next` and runs
//! one of three **protocols**, built of two rounds:
//! - an *optimistic round*: every unfinished slot asks for all it can
//!   without waiting; with `m` the least `next`, every slot holding
//!   pieces at or past `m` gives them back (partial release);
//! - a *two-phase round*: the slot with the least `next` asks, blocking,
//!   for its pieces below the second least `next`.
//!
//! [`LockProtocol::TwoPhase`] runs two-phase rounds only (after registering
//! every slot without taking anything), [`LockProtocol::OneTry`] one
//! optimistic round then two-phase rounds, [`LockProtocol::AltTry`] alternates
//! them. Progress: whenever a client waits, it holds only pieces below the
//! offset it waits for, so the client waiting at the least offset among
//! all waiters waits for no one who waits (ordered two-phase locking); an
//! optimistic round never waits. A wait ends after the server's wait limit
//! with the state as it stands, and the round is simply asked again.
//!
//! Locks belong to the [`Locker`]'s owner id, whose lease every lock
//! request renews ([`Locker::renew`] otherwise); a dead client's locks are
//! released by the servers when its lease lapses. A write under locks
//! ([`Client::write_at_fenced`]) carries the lock request numbers and each
//! server's epoch, so a server refuses it once the locks are gone.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use futures::stream::{self, StreamExt};
use weft_dataloop::Dataloop;
use weft_net::transport::Bulk;
use weft_proto::limits::{LOCK_RANGES_MAX, LOCK_WAIT_MS_MAX};
use weft_proto::message::{DatatypeAccess, Fence, LockDescription, Reply, Request};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::client::Client;
use crate::io::File;
use crate::lock_ranges::lock_ranges;
use crate::noncontig::FileAccess;

/// How an access is described to the lock servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMethod {
    /// One request per contiguous region per server.
    Posix,
    /// Offset–length lists, at most `regions_per_request` ranges per request.
    List {
        /// Ranges per request (at most `limits::LOCK_RANGES_MAX`).
        regions_per_request: usize,
    },
    /// The datatype access itself, one request per datafile.
    Datatype,
}

/// How the lock requests are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockProtocol {
    /// Ordered rounds only.
    TwoPhase,
    /// One optimistic round, then ordered rounds.
    OneTry,
    /// Optimistic and ordered rounds alternately.
    AltTry,
}

/// Requests in flight at once in a round (bounds client memory and server queues).
const IN_FLIGHT: usize = 256;

/// A lock owner: the id the servers keep locks and a lease under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locker {
    /// Owner id (random).
    pub owner: u64,
    /// Lease asked of every server (0 = the server's default).
    pub lease_ms: u32,
}

impl Locker {
    /// A new owner with a random id.
    pub fn new(lease_ms: u32) -> Locker {
        Locker { owner: rand::random::<u64>() | 1, lease_ms }
    }
}

/// One lock request of a lock operation.
#[derive(Clone, Debug)]
struct Slot {
    server: u32,
    handle: Handle,
    description: Option<LockDescription>,
    request: u64,
    epoch: u64,
    last: u64,
    next: u64,
    started: bool,
}

/// Locks held on an access (until [`Client::unlock_access`]).
#[derive(Debug)]
pub struct LockSet {
    locker: Locker,
    slots: Vec<Slot>,
    /// Rounds run to acquire (optimistic + two-phase; statistics).
    pub rounds: u64,
}

impl LockSet {
    /// Lock requests held.
    pub fn requests(&self) -> usize {
        self.slots.len()
    }

    /// The fence for a write to datafile `handle`: the requests on it.
    pub fn fence(&self, handle: Handle) -> Option<Fence> {
        let requests: Vec<u64> = self.slots.iter().filter(|s| s.handle == handle).map(|s| s.request).collect();
        let epoch = self.slots.iter().find(|s| s.handle == handle)?.epoch;
        Some(Fence { owner: self.locker.owner, epoch, requests })
    }
}

fn datatype_access(
    file: &File,
    index: u32,
    dataloop: &Dataloop,
    displacement: i64,
    start: u64,
    total: u64,
) -> DatatypeAccess {
    let size = dataloop.size().max(1);
    DatatypeAccess {
        handle: file.layout.datafiles[index as usize],
        dataloop: dataloop.encode(),
        count: (start + total).div_ceil(size),
        displacement,
        stream_start: start,
        stream_length: total,
        distribution: file.layout.distribution,
        stripe_index: index,
    }
}

impl Client {
    /// The lock requests of an access under `method`.
    fn lock_slots(&self, file: &File, access: FileAccess<'_>, total: u64, method: LockMethod) -> WeftResult<Vec<Slot>> {
        let d = file.layout.distribution;
        let slot = |index: u32, description: LockDescription, next: u64| -> WeftResult<Slot> {
            let handle = file.layout.datafiles[index as usize];
            Ok(Slot {
                server: self.server_of(handle)?,
                handle,
                description: Some(description),
                request: 0,
                epoch: 0,
                last: 0,
                next,
                started: false,
            })
        };
        let ranges_of = |index: u32, ranges: Vec<(u64, u64)>| LockDescription::Ranges {
            handle: file.layout.datafiles[index as usize],
            distribution: d,
            stripe_index: index,
            ranges,
        };
        let mut slots = Vec::new();
        match (method, access) {
            (LockMethod::Datatype, FileAccess::Datatype { file_type, displacement, view_offset }) => {
                for index in 0..file.layout.datafiles.len() as u32 {
                    let access = datatype_access(file, index, file_type, displacement, view_offset, total);
                    slots.push(slot(index, LockDescription::Datatype(access), 0)?);
                }
            }
            (LockMethod::Posix, access) => {
                // One slot per range (a piece, or a run of them past the client's bound).
                for (index, ranges) in
                    lock_ranges(&d, file.layout.datafiles.len(), access, total)?.into_iter().enumerate()
                {
                    for (file_offset, local, length) in ranges {
                        slots.push(slot(index as u32, ranges_of(index as u32, vec![(local, length)]), file_offset)?);
                    }
                }
            }
            (LockMethod::List { .. } | LockMethod::Datatype, access) => {
                let per = match method {
                    LockMethod::List { regions_per_request } => regions_per_request.clamp(1, LOCK_RANGES_MAX),
                    _ => LOCK_RANGES_MAX,
                };
                for (index, ranges) in
                    lock_ranges(&d, file.layout.datafiles.len(), access, total)?.into_iter().enumerate()
                {
                    for chunk in ranges.chunks(per) {
                        let list = chunk.iter().map(|&(_, local, length)| (local, length)).collect();
                        slots.push(slot(index as u32, ranges_of(index as u32, list), chunk[0].0)?);
                    }
                }
            }
        }
        Ok(slots)
    }

    /// One lock call for a slot; updates it from the `LockGrant` reply.
    async fn lock_call(
        &self,
        locker: Locker,
        slot: &mut Slot,
        exclusive: bool,
        until: u64,
        block: bool,
    ) -> WeftResult<()> {
        let wait_ms = if block { LOCK_WAIT_MS_MAX } else { 0 };
        let request = if slot.started {
            Request::DlmContinue { owner: locker.owner, request: slot.request, until, block, wait_ms }
        } else {
            let lock = slot.description.clone().ok_or(ErrorCode::Invalid)?;
            Request::DlmAcquire {
                owner: locker.owner,
                lease_ms: locker.lease_ms,
                exclusive,
                lock,
                until,
                block,
                wait_ms,
            }
        };
        match self.call(slot.server, request).await? {
            Reply::LockGrant { request, last, next, epoch } => {
                slot.request = request;
                slot.last = last;
                slot.next = next;
                slot.epoch = epoch;
                slot.started = true;
                // The description is no longer needed once the server has it.
                slot.description = None;
                Ok(())
            }
            _ => Err(ErrorCode::Protocol),
        }
    }

    async fn release_call(&self, locker: Locker, slot: &mut Slot, from: Option<u64>) -> WeftResult<()> {
        let request = Request::DlmRelease { owner: locker.owner, request: slot.request, from };
        match self.call(slot.server, request).await? {
            Reply::LockGrant { last, next, .. } => {
                if from.is_some() {
                    slot.last = last;
                    slot.next = next;
                }
                Ok(())
            }
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Runs `op` on every selected slot, at most [`IN_FLIGHT`] at once.
    async fn round<'a, F, Fut>(&self, slots: impl Iterator<Item = &'a mut Slot>, op: F) -> WeftResult<()>
    where
        F: Fn(&'a mut Slot) -> Fut,
        Fut: std::future::Future<Output = WeftResult<()>>,
    {
        let results: Vec<WeftResult<()>> = stream::iter(slots.map(op)).buffer_unordered(IN_FLIGHT).collect().await;
        results.into_iter().collect()
    }

    /// Optimistic round over the unfinished slots; then gives back every piece at or past the least `next`.
    async fn optimistic_round(&self, locker: Locker, slots: &mut [Slot], exclusive: bool) -> WeftResult<()> {
        self.round(slots.iter_mut().filter(|s| s.next != u64::MAX || !s.started), |s| {
            self.lock_call(locker, s, exclusive, u64::MAX, false)
        })
        .await?;
        let least = slots.iter().map(|s| s.next).min().unwrap_or(u64::MAX);
        if least == u64::MAX {
            return Ok(());
        }
        self.round(slots.iter_mut().filter(|s| s.last > least), |s| self.release_call(locker, s, Some(least))).await
    }

    /// Takes locks on an access (`total` stream bytes) for writing
    /// (`exclusive`) or reading, by `method` under `protocol`.
    #[allow(clippy::too_many_arguments)]
    pub async fn lock_access(
        &self,
        locker: Locker,
        file: &File,
        access: FileAccess<'_>,
        total: u64,
        exclusive: bool,
        method: LockMethod,
        protocol: LockProtocol,
    ) -> WeftResult<LockSet> {
        let mut slots = self.lock_slots(file, access, total, method)?;
        let mut set = LockSet { locker, slots: Vec::new(), rounds: 0 };
        let result = self.acquire_slots(locker, &mut slots, exclusive, protocol, &mut set.rounds).await;
        set.slots = slots;
        if let Err(code) = result {
            let _ = self.unlock_access(set).await;
            return Err(code);
        }
        Ok(set)
    }

    async fn acquire_slots(
        &self,
        locker: Locker,
        slots: &mut [Slot],
        exclusive: bool,
        protocol: LockProtocol,
        rounds: &mut u64,
    ) -> WeftResult<()> {
        if slots.is_empty() {
            return Ok(());
        }
        match protocol {
            LockProtocol::TwoPhase => {
                // Register every slot, taking nothing: learn each one's first piece.
                self.round(slots.iter_mut(), |s| self.lock_call(locker, s, exclusive, 0, false)).await?;
            }
            LockProtocol::OneTry | LockProtocol::AltTry => {
                *rounds += 1;
                self.optimistic_round(locker, slots, exclusive).await?;
            }
        }
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            slots.iter().enumerate().filter(|(_, s)| s.next != u64::MAX).map(|(i, s)| Reverse((s.next, i))).collect();
        // Bounded: every two-phase round either grants at least the least
        // waiting piece or ends a server-side wait (at most LOCK_WAIT_MS_MAX);
        // a lock that no round can take within this many rounds is reported.
        let rounds_max = 64 * slots.len() as u64 + 1_000_000;
        let mut optimistic_next = protocol == LockProtocol::AltTry;
        while *rounds < rounds_max {
            // The least `next` (dropping stale heap entries).
            let Some(Reverse((next, index))) = heap.pop() else { return Ok(()) };
            if slots[index].next != next {
                continue;
            }
            *rounds += 1;
            if optimistic_next {
                optimistic_next = false;
                heap.push(Reverse((next, index)));
                self.optimistic_round(locker, slots, exclusive).await?;
                heap = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.next != u64::MAX)
                    .map(|(i, s)| Reverse((s.next, i)))
                    .collect();
                continue;
            }
            while let Some(Reverse((n, i))) = heap.peek() {
                if slots[*i].next == *n {
                    break;
                }
                heap.pop();
            }
            let second = heap.peek().map_or(u64::MAX, |Reverse((n, _))| *n);
            let until = second.max(next.saturating_add(1));
            self.lock_call(locker, &mut slots[index], exclusive, until, true).await?;
            if slots[index].next != u64::MAX {
                heap.push(Reverse((slots[index].next, index)));
            }
            if slots[index].next >= until {
                optimistic_next = protocol == LockProtocol::AltTry;
            }
        }
        Err(ErrorCode::TimedOut)
    }

    /// Releases every lock of a set.
    pub async fn unlock_access(&self, mut set: LockSet) -> WeftResult<()> {
        let locker = set.locker;
        self.round(set.slots.iter_mut().filter(|s| s.started), |s| self.release_call(locker, s, None)).await
    }

    /// Renews the owner's lease at every server.
    pub async fn renew_locks(&self, locker: Locker) -> WeftResult<()> {
        for server in 0..self.shared.pool.server_count() {
            match self.call(server, Request::DlmRenew { owner: locker.owner }).await {
                Ok(_) | Err(ErrorCode::Stale) => {}
                Err(code) => return Err(code),
            }
        }
        Ok(())
    }

    /// Writes `data` at `offset` under `locks`: each server refuses its
    /// part (`Stale`) unless the set's locks on that datafile are still held.
    pub async fn write_at_fenced(&self, file: &File, offset: u64, data: &[u8], locks: &LockSet) -> WeftResult<()> {
        let d = file.layout.distribution;
        let mut parts: Vec<Vec<u8>> = vec![Vec::new(); file.layout.datafiles.len()];
        for piece in d.pieces(offset, data.len() as u64) {
            let at = (piece.file_offset - offset) as usize;
            parts[piece.datafile_index as usize].extend_from_slice(&data[at..at + piece.length as usize]);
        }
        let ranges = d.local_ranges(offset, data.len() as u64);
        let capability = self.capability(file, weft_proto::access::WRITE).await?;
        for (index, (start, end)) in ranges.into_iter().enumerate() {
            if start == end {
                continue;
            }
            let handle = file.layout.datafiles[index];
            let fence = locks.fence(handle).ok_or(ErrorCode::Invalid)?;
            let inner = Request::Write { handle, offset: start, length: end - start };
            let request =
                crate::capabilities::capable(&capability, Request::Fenced { fence, request: Box::new(inner) });
            match self.call_bulk(self.server_of(handle)?, request, Bulk::Upload(&parts[index])).await? {
                Reply::Io { .. } => {}
                _ => return Err(ErrorCode::Protocol),
            }
        }
        Ok(())
    }
}

/// One byte range locked at one server under a single-stripe description
/// (the mount's fcntl locks: [`Client::lock_range`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeLock {
    /// Server holding the lock.
    pub server: u32,
    /// The server's request number.
    pub request: u64,
}

impl Client {
    /// Asks the server storing `handle` for bytes `[start, end)` of it,
    /// exclusive or shared, as one lock request with one piece however long
    /// (a one-stripe description: offsets are the caller's, not a
    /// datafile's). Waits at most `wait_ms` (0: not at all). Returns the
    /// request and whether it is granted; a request not granted stays
    /// queued until [`Client::lock_range_wait`] or [`Client::unlock_range`].
    pub async fn lock_range(
        &self,
        locker: Locker,
        handle: Handle,
        start: u64,
        end: u64,
        exclusive: bool,
        wait_ms: u32,
    ) -> WeftResult<(RangeLock, bool)> {
        if start >= end || end > weft_proto::limits::FILE_BYTES_MAX {
            return Err(ErrorCode::Invalid);
        }
        let lock = LockDescription::Ranges {
            handle,
            distribution: weft_proto::Distribution {
                strip_bytes: weft_proto::limits::STRIP_BYTES_MAX,
                stripe_count: 1,
            },
            stripe_index: 0,
            ranges: vec![(start, end - start)],
        };
        let server = self.server_of(handle)?;
        let block = wait_ms > 0;
        let request = Request::DlmAcquire {
            owner: locker.owner,
            lease_ms: locker.lease_ms,
            exclusive,
            lock,
            until: u64::MAX,
            block,
            wait_ms: wait_ms.min(LOCK_WAIT_MS_MAX),
        };
        match self.call(server, request).await? {
            Reply::LockGrant { request, next, .. } => Ok((RangeLock { server, request }, next == u64::MAX)),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Waits at most `wait_ms` more for a range asked by [`Client::lock_range`]; whether it is granted.
    pub async fn lock_range_wait(&self, locker: Locker, lock: RangeLock, wait_ms: u32) -> WeftResult<bool> {
        let request = Request::DlmContinue {
            owner: locker.owner,
            request: lock.request,
            until: u64::MAX,
            block: wait_ms > 0,
            wait_ms: wait_ms.min(LOCK_WAIT_MS_MAX),
        };
        match self.call(lock.server, request).await? {
            Reply::LockGrant { next, .. } => Ok(next == u64::MAX),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Gives back a range (granted or still queued).
    pub async fn unlock_range(&self, locker: Locker, lock: RangeLock) -> WeftResult<()> {
        let request = Request::DlmRelease { owner: locker.owner, request: lock.request, from: None };
        match self.call(lock.server, request).await? {
            Reply::LockGrant { .. } => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Renews the owner's lease at one server.
    pub async fn renew_locks_at(&self, locker: Locker, server: u32) -> WeftResult<()> {
        match self.call(server, Request::DlmRenew { owner: locker.owner }).await? {
            Reply::Done => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }
}
