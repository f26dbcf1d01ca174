//! Byte-range locks of the bytes this data server stores (Ching 2007,
//! ch. 7): the lock service of every data server, owned by
//! [`crate::storage::Storage`].
//!
//! - A **lock request** locks pieces of one datafile stored here, shared
//!   (readers) or exclusive (a single writer), in exact datafile bytes (no
//!   rounding, so no false sharing). Its pieces come from a description
//!   ([`LockDescription`]): datafile-local ranges (POSIX and list locks) or
//!   the datatype access a datatype request carries, of which this server
//!   walks only its own pieces. Each piece also has its *file* offset; the
//!   server grants a request's pieces in increasing file offset, as far as
//!   it can (up to the first conflict, and never a piece starting at or past
//!   the caller's `until`), and answers the request number, the end of the
//!   last piece granted and the file offset of the first not granted. That
//!   is all the client protocols of `weft-client::dlm` need (two-phase,
//!   one-try, alt-try); the server knows nothing of them.
//! - A **blocking** acquire or continue waits until every piece below its
//!   `until` is granted; blocked requests are retried, in arrival order,
//!   whenever locks of their datafile are released (or their holders'
//!   leases lapse). A wait ends after `wait_ms` (at most
//!   `LOCK_WAIT_MS_MAX`) with the request's state, granted or not.
//! - **Release** is full (the request is forgotten) or partial (the
//!   granted pieces at or past a file offset, possibly 0, which the
//!   optimistic round of a protocol gives back; the request stays).
//! - Requests of one **owner** never conflict with each other (POSIX: a
//!   process's locks never block it), so an owner can take a new lock
//!   before giving back an overlapping old one: the mount changes fcntl
//!   locks (split, merge, upgrade) without a window another owner could use.
//!   With one stripe a range is one piece however long, so a whole-file
//!   lock costs one piece.
//! - Locks belong to an **owner** (a client's random id) with a lease, as
//!   sessions do (`crate::sessions`): every request of the owner renews
//!   it, `DlmRenew` too; an owner silent for a whole lease is forgotten
//!   and all its locks released, so a killed client's locks go away by
//!   themselves. Expired owners are swept by any lock request at most every
//!   [`SWEEP_PERIOD`], and blocked requests tick at that period, so no
//!   background task is needed.
//! - **Fencing**: the server draws a random epoch at start; a write under
//!   locks (`Request::Fenced`) names its owner, epoch and request numbers
//!   and is refused (`Stale`) unless all are still wholly granted and
//!   exclusive on that datafile ([`Dlm::check_fence`]); a client stopped
//!   past its lease, or a server restarted, cannot write unlocked.
//! - **Memory** is bounded per request, per datafile and per owner
//!   (`weft_proto::limits::LOCK_PIECES_*`): a request that would pass a
//!   bound is escalated to one covering piece (its span on the datafile,
//!   ordered at its first byte), never refused.
//!
//! Granted pieces sit in an interval structure per datafile
//! ([`intervals`]). All state is behind one `std::sync::Mutex` held only
//! for in-memory work, never across an await.

pub mod intervals;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use weft_dataloop::{BatchLimits, Cursor, Dataloop, StripeCursor, StripeFilter, StripePiece};
use weft_proto::limits::{
    DATATYPE_WALK_REGIONS_MAX, FILE_BYTES_MAX, IO_BYTES_MAX, LEASE_MS_DEFAULT, LEASE_MS_MAX, LEASE_MS_MIN,
    LOCK_OWNERS_MAX, LOCK_PIECES_PER_FILE_MAX, LOCK_PIECES_PER_OWNER_MAX, LOCK_PIECES_PER_REQUEST_MAX, LOCK_RANGES_MAX,
    LOCK_REQUESTS_PER_OWNER_MAX, LOCK_WAIT_MS_MAX,
};
use weft_proto::message::{Fence, LockDescription, Reply, ReplyResult, Request};
use weft_proto::{Distribution, ErrorCode, Handle, WeftResult};

use crate::here::Here;
use intervals::Intervals;

/// How often expired owners are looked for.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// What a lock request holds after an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Request number.
    pub request: u64,
    /// End (exclusive file offset) of the last granted piece; 0 if none.
    pub last: u64,
    /// File offset of the first piece not granted; `u64::MAX` once all are.
    pub next: u64,
}

/// One piece of a lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    /// File offset of its first byte (the grant order).
    file: u64,
    /// Datafile offset of its first byte.
    local: u64,
    /// Bytes.
    length: u64,
}

/// The lock service of one data server.
pub struct Dlm {
    epoch: u64,
    state: Mutex<State>,
}

struct State {
    next_request: u64,
    owners: HashMap<u64, Owner>,
    requests: HashMap<u64, LockRequest>,
    files: HashMap<Handle, FileLocks>,
    last_sweep: Instant,
}

struct Owner {
    lease: Duration,
    expires: Instant,
    requests: HashSet<u64>,
    pieces: usize,
}

#[derive(Default)]
struct FileLocks {
    granted: Intervals,
    /// Blocked requests, in arrival order.
    blocked: VecDeque<u64>,
    /// Pieces of all requests on the datafile.
    pieces: usize,
    requests: usize,
}

struct LockRequest {
    owner: u64,
    file: Handle,
    exclusive: bool,
    /// Sorted by file offset; the first `granted` are held.
    pieces: Vec<Piece>,
    granted: usize,
    waiter: Option<Waiter>,
}

struct Waiter {
    until: u64,
    reply: oneshot::Sender<WeftResult<Grant>>,
}

impl LockRequest {
    fn grant(&self, request: u64) -> Grant {
        let last = match self.granted {
            0 => 0,
            n => self.pieces[n - 1].file + self.pieces[n - 1].length,
        };
        let next = self.pieces.get(self.granted).map_or(u64::MAX, |p| p.file);
        Grant { request, last, next }
    }
}

impl Default for Dlm {
    fn default() -> Self {
        Dlm {
            epoch: rand::random::<u64>().max(1),
            state: Mutex::new(State {
                next_request: 1,
                owners: HashMap::new(),
                requests: HashMap::new(),
                files: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }
}

impl State {
    /// The live owner `id`, renewed; created (with `lease_ms`) if `create`.
    fn touch(&mut self, id: u64, now: Instant, create: Option<u32>) -> WeftResult<&mut Owner> {
        let expired = self.owners.get(&id).map(|o| o.expires <= now);
        match (expired, create) {
            (Some(true), _) => {
                self.end_owner(id);
                return Err(ErrorCode::Stale);
            }
            (None, None) => return Err(ErrorCode::Stale),
            (None, Some(lease_ms)) => {
                if self.owners.len() >= LOCK_OWNERS_MAX {
                    return Err(ErrorCode::Busy);
                }
                let lease_ms =
                    if lease_ms == 0 { LEASE_MS_DEFAULT } else { lease_ms.clamp(LEASE_MS_MIN, LEASE_MS_MAX) };
                let lease = Duration::from_millis(lease_ms as u64);
                self.owners.insert(id, Owner { lease, expires: now, requests: HashSet::new(), pieces: 0 });
            }
            (Some(false), _) => {}
        }
        let owner = self.owners.get_mut(&id).ok_or(ErrorCode::Stale)?;
        owner.expires = now + owner.lease;
        Ok(owner)
    }

    /// Forgets an owner and all its requests (blocked ones answered `Stale`).
    fn end_owner(&mut self, id: u64) {
        let Some(owner) = self.owners.remove(&id) else { return };
        let mut files = HashSet::new();
        for request in owner.requests {
            if let Some(file) = self.forget(request) {
                files.insert(file);
            }
        }
        for file in files {
            self.retry_blocked(file);
        }
    }

    fn sweep_if_due(&mut self, now: Instant) {
        if now.duration_since(self.last_sweep) < SWEEP_PERIOD {
            return;
        }
        self.last_sweep = now;
        let expired: Vec<u64> = self.owners.iter().filter(|(_, o)| o.expires <= now).map(|(id, _)| *id).collect();
        for id in expired {
            self.end_owner(id);
        }
    }

    /// Grants pieces of `id` in file order below `until` up to the first conflict.
    fn advance(&mut self, id: u64, until: u64) -> Grant {
        let Some(request) = self.requests.get_mut(&id) else {
            return Grant { request: id, last: 0, next: u64::MAX };
        };
        if let Some(file) = self.files.get_mut(&request.file) {
            while let Some(piece) = request.pieces.get(request.granted) {
                if piece.file >= until {
                    break;
                }
                let end = piece.local + piece.length;
                if file.granted.conflicts(piece.local, end, request.exclusive, request.owner) {
                    break;
                }
                file.granted.insert(piece.local, end, request.exclusive, id, request.owner);
                request.granted += 1;
            }
        }
        request.grant(id)
    }

    /// Releases the granted pieces of `id` starting at or past `from`.
    fn release_from(&mut self, id: u64, from: u64) -> Option<Handle> {
        let request = self.requests.get_mut(&id)?;
        let file = self.files.get_mut(&request.file)?;
        while request.granted > 0 && request.pieces[request.granted - 1].file >= from {
            let piece = request.pieces[request.granted - 1];
            file.granted.remove(piece.local, request.exclusive, id);
            request.granted -= 1;
        }
        Some(request.file)
    }

    /// Removes a request entirely; returns its datafile (to retry waiters).
    fn forget(&mut self, id: u64) -> Option<Handle> {
        let file_handle = self.release_from(id, 0)?;
        let request = self.requests.remove(&id)?;
        if let Some(waiter) = request.waiter {
            let _ = waiter.reply.send(Err(ErrorCode::Stale));
        }
        if let Some(owner) = self.owners.get_mut(&request.owner) {
            owner.requests.remove(&id);
            owner.pieces = owner.pieces.saturating_sub(request.pieces.len());
        }
        if let Some(file) = self.files.get_mut(&file_handle) {
            file.blocked.retain(|&r| r != id);
            file.pieces = file.pieces.saturating_sub(request.pieces.len());
            file.requests -= 1;
            if file.requests == 0 {
                self.files.remove(&file_handle);
            }
        }
        Some(file_handle)
    }

    /// Retries the blocked requests of a datafile in arrival order; answers those now granted up to their target.
    fn retry_blocked(&mut self, file: Handle) {
        let Some(blocked) = self.files.get(&file).map(|f| f.blocked.clone()) else { return };
        let mut still = VecDeque::with_capacity(blocked.len());
        for id in blocked {
            let Some(until) = self.requests.get(&id).and_then(|r| r.waiter.as_ref()).map(|w| w.until) else {
                continue;
            };
            let grant = self.advance(id, until);
            if grant.next >= until {
                if let Some(waiter) = self.requests.get_mut(&id).and_then(|r| r.waiter.take()) {
                    let _ = waiter.reply.send(Ok(grant));
                }
            } else {
                still.push_back(id);
            }
        }
        if let Some(f) = self.files.get_mut(&file) {
            f.blocked = still;
        }
    }

    /// Ends the wait of `id` (its deadline passed); its state as it stands.
    fn unblock(&mut self, id: u64) -> Option<Grant> {
        let request = self.requests.get_mut(&id)?;
        request.waiter.take()?;
        let grant = request.grant(id);
        let file = request.file;
        if let Some(f) = self.files.get_mut(&file) {
            f.blocked.retain(|&r| r != id);
        }
        Some(grant)
    }

    /// The request `id` of `owner`, or `Stale`.
    fn owned(&self, owner: u64, id: u64) -> WeftResult<&LockRequest> {
        match self.requests.get(&id) {
            Some(request) if request.owner == owner => Ok(request),
            _ => Err(ErrorCode::Stale),
        }
    }
}

/// What an acquire or continue decided under the mutex.
enum Step {
    Done(Grant),
    Wait(u64, oneshot::Receiver<WeftResult<Grant>>),
}

/// Collects pieces, escalating to one covering piece past `budget`.
struct PieceSink {
    distribution: Distribution,
    stripe_index: u32,
    budget: usize,
    pieces: Vec<Piece>,
    /// Covering `(first local, local end, first file offset)` once escalated.
    covering: Option<(u64, u64, u64)>,
}

impl PieceSink {
    /// Adds datafile bytes `[local, local + length)`, split at strip boundaries.
    fn add(&mut self, mut local: u64, length: u64) -> WeftResult<()> {
        let end = local.checked_add(length).ok_or(ErrorCode::TooBig)?;
        if end > FILE_BYTES_MAX {
            return Err(ErrorCode::TooBig);
        }
        // With one stripe, datafile and file offsets are the same and a
        // range is one piece however long (a whole-file fcntl lock).
        let strip = if self.distribution.stripe_count == 1 { FILE_BYTES_MAX } else { self.distribution.strip_bytes };
        while local < end {
            let piece_end = end.min((local / strip + 1).saturating_mul(strip));
            let file = self.distribution.file_offset(self.stripe_index, local);
            if file + (piece_end - local) as u128 > FILE_BYTES_MAX as u128 {
                return Err(ErrorCode::TooBig);
            }
            let piece = Piece { file: file as u64, local, length: piece_end - local };
            match &mut self.covering {
                Some((first, last, first_file)) => {
                    *first = (*first).min(piece.local);
                    *last = (*last).max(piece_end);
                    *first_file = (*first_file).min(piece.file);
                }
                None => {
                    self.pieces.push(piece);
                    if self.pieces.len() > self.budget {
                        let first = self.pieces.iter().map(|p| p.local).min().unwrap_or(0);
                        let last = self.pieces.iter().map(|p| p.local + p.length).max().unwrap_or(0);
                        let first_file = self.pieces.iter().map(|p| p.file).min().unwrap_or(0);
                        self.covering = Some((first, last, first_file));
                        self.pieces = Vec::new();
                    }
                }
            }
            local = piece_end;
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<Piece> {
        if let Some((first, last, file)) = self.covering {
            return vec![Piece { file, local: first, length: last - first }];
        }
        self.pieces.sort_by_key(|p| (p.file, p.local));
        self.pieces
    }
}

/// The pieces a description locks at this server (at most `budget`, else one covering piece).
fn pieces_of(lock: &LockDescription, budget: usize) -> WeftResult<(Handle, Vec<Piece>)> {
    match lock {
        LockDescription::Ranges { handle, distribution, stripe_index, ranges } => {
            distribution.validate()?;
            if *stripe_index >= distribution.stripe_count || ranges.is_empty() || ranges.len() > LOCK_RANGES_MAX {
                return Err(ErrorCode::Invalid);
            }
            let mut sink = PieceSink {
                distribution: *distribution,
                stripe_index: *stripe_index,
                budget,
                pieces: Vec::with_capacity(ranges.len().min(budget)),
                covering: None,
            };
            for &(offset, length) in ranges {
                if length == 0 {
                    return Err(ErrorCode::Invalid);
                }
                sink.add(offset, length)?;
            }
            Ok((*handle, sink.finish()))
        }
        LockDescription::Datatype(access) => {
            if access.stream_length > IO_BYTES_MAX {
                return Err(ErrorCode::Invalid);
            }
            let d = access.distribution;
            d.validate()?;
            let dataloop = Dataloop::decode(&access.dataloop).map_err(|_| ErrorCode::Invalid)?;
            let mut cursor =
                Cursor::new(&dataloop, access.count, access.displacement).map_err(|_| ErrorCode::Invalid)?;
            let end = access.stream_start.checked_add(access.stream_length).ok_or(ErrorCode::Invalid)?;
            cursor.set_end(end).map_err(|_| ErrorCode::Invalid)?;
            cursor.seek(access.stream_start).map_err(|_| ErrorCode::Invalid)?;
            let filter = StripeFilter::new(d.strip_bytes, d.stripe_count, access.stripe_index)
                .map_err(|_| ErrorCode::Invalid)?;
            let mut walk = StripeCursor::new(cursor, filter);
            walk.set_region_budget(DATATYPE_WALK_REGIONS_MAX);
            let mut sink = PieceSink {
                distribution: d,
                stripe_index: access.stripe_index,
                budget,
                pieces: Vec::new(),
                covering: None,
            };
            let mut batch: Vec<StripePiece> = Vec::new();
            let limits = BatchLimits { regions_max: 65_536, bytes_max: u64::MAX };
            // Bounded: every batch consumes stream bytes of a finite access.
            loop {
                batch.clear();
                if walk.next_batch(limits, &mut batch) == 0 {
                    if walk.budget_exhausted() {
                        return Err(ErrorCode::TooBig);
                    }
                    break;
                }
                for piece in &batch {
                    sink.add(piece.datafile_offset, piece.length)?;
                }
            }
            Ok((access.handle, sink.finish()))
        }
    }
}

impl Dlm {
    /// This server start's epoch (fences name it).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned mutex means a panic inside a short critical section;
        // every change there is a sequence of inserts and removes.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a lock request; see `Request::DlmAcquire`.
    #[allow(clippy::too_many_arguments)]
    pub async fn acquire(
        &self,
        owner: u64,
        lease_ms: u32,
        exclusive: bool,
        lock: &LockDescription,
        until: u64,
        block: bool,
        wait_ms: u32,
    ) -> WeftResult<Grant> {
        let handle = lock.handle();
        let budget = {
            let now = Instant::now();
            let mut state = self.state();
            state.sweep_if_due(now);
            let owned = state.touch(owner, now, Some(lease_ms))?;
            if owned.requests.len() >= LOCK_REQUESTS_PER_OWNER_MAX {
                return Err(ErrorCode::Busy);
            }
            let owner_room = LOCK_PIECES_PER_OWNER_MAX.saturating_sub(owned.pieces);
            let file_room = LOCK_PIECES_PER_FILE_MAX.saturating_sub(state.files.get(&handle).map_or(0, |f| f.pieces));
            LOCK_PIECES_PER_REQUEST_MAX.min(owner_room).min(file_room).max(1)
        };
        // The walk runs outside the mutex (its cost is the description's).
        let (handle, pieces) = pieces_of(lock, budget)?;
        let step = {
            let now = Instant::now();
            let mut state = self.state();
            state.touch(owner, now, Some(lease_ms))?;
            let id = state.next_request;
            state.next_request += 1;
            let count = pieces.len();
            let owned = state.touch(owner, now, None)?;
            owned.requests.insert(id);
            owned.pieces += count;
            let file = state.files.entry(handle).or_default();
            file.pieces += count;
            file.requests += 1;
            state.requests.insert(id, LockRequest { owner, file: handle, exclusive, pieces, granted: 0, waiter: None });
            Self::step(&mut state, id, until, block)
        };
        self.finish(owner, step, wait_ms).await
    }

    /// Grants more of a request; see `Request::DlmContinue`.
    pub async fn resume(&self, owner: u64, request: u64, until: u64, block: bool, wait_ms: u32) -> WeftResult<Grant> {
        let step = {
            let now = Instant::now();
            let mut state = self.state();
            state.sweep_if_due(now);
            state.touch(owner, now, None)?;
            if state.owned(owner, request)?.waiter.is_some() {
                return Err(ErrorCode::Busy);
            }
            Self::step(&mut state, request, until, block)
        };
        self.finish(owner, step, wait_ms).await
    }

    fn step(state: &mut State, id: u64, until: u64, block: bool) -> Step {
        let grant = state.advance(id, until);
        if !block || grant.next >= until {
            return Step::Done(grant);
        }
        let (reply, receiver) = oneshot::channel();
        if let Some(request) = state.requests.get_mut(&id) {
            request.waiter = Some(Waiter { until, reply });
            let file = request.file;
            if let Some(f) = state.files.get_mut(&file) {
                f.blocked.push_back(id);
            }
        }
        Step::Wait(id, receiver)
    }

    /// Waits (bounded by `wait_ms`) for a blocked request of `owner`; the
    /// owner's lease is renewed at every tick, so a wait longer than a
    /// lease does not expire the waiter itself.
    async fn finish(&self, owner: u64, step: Step, wait_ms: u32) -> WeftResult<Grant> {
        let (id, mut receiver) = match step {
            Step::Done(grant) => return Ok(grant),
            Step::Wait(id, receiver) => (id, receiver),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms.min(LOCK_WAIT_MS_MAX) as u64);
        // Bounded: one iteration per sweep period until the deadline.
        loop {
            let tick = (tokio::time::Instant::now() + SWEEP_PERIOD).min(deadline);
            tokio::select! {
                granted = &mut receiver => return granted.unwrap_or(Err(ErrorCode::Io)),
                _ = tokio::time::sleep_until(tick) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            let now = Instant::now();
            let mut state = self.state();
            // A waiting owner is alive: renew it (an owner already forgotten stays so).
            let _ = state.touch(owner, now, None);
            // Hands on the locks of expired holders (no background task).
            state.sweep_if_due(now);
        }
        let mut state = self.state();
        match state.unblock(id) {
            Some(grant) => Ok(grant),
            // Answered between the deadline and now.
            None => receiver.try_recv().unwrap_or(Err(ErrorCode::TimedOut)),
        }
    }

    /// Releases a request's pieces at or past file offset `from` (`None`:
    /// all, and the request is forgotten); retries the blocked requests.
    pub fn release(&self, owner: u64, request: u64, from: Option<u64>) -> WeftResult<Grant> {
        let now = Instant::now();
        let mut state = self.state();
        state.sweep_if_due(now);
        state.touch(owner, now, None)?;
        state.owned(owner, request)?;
        let file = match from {
            None => state.forget(request),
            Some(from) => state.release_from(request, from),
        };
        let grant = match state.requests.get(&request) {
            Some(r) => r.grant(request),
            None => Grant { request, last: 0, next: 0 },
        };
        if let Some(file) = file {
            state.retry_blocked(file);
        }
        Ok(grant)
    }

    /// Renews an owner's lease.
    pub fn renew(&self, owner: u64) -> WeftResult<()> {
        let now = Instant::now();
        let mut state = self.state();
        state.sweep_if_due(now);
        state.touch(owner, now, None).map(|_| ())
    }

    /// Whether a write to `handle` under `fence` may go ahead: `Stale` unless
    /// the epoch is this server's and every request is the owner's, on
    /// `handle`, exclusive and wholly granted. Renews the owner.
    pub fn check_fence(&self, fence: &Fence, handle: Handle) -> WeftResult<()> {
        if fence.epoch != self.epoch || fence.requests.is_empty() {
            return Err(ErrorCode::Stale);
        }
        let now = Instant::now();
        let mut state = self.state();
        state.sweep_if_due(now);
        state.touch(fence.owner, now, None)?;
        for &id in &fence.requests {
            let request = state.owned(fence.owner, id)?;
            if request.file != handle || !request.exclusive || request.granted != request.pieces.len() {
                return Err(ErrorCode::Stale);
            }
        }
        Ok(())
    }

    /// Lock owners kept (tests).
    pub fn owners(&self) -> usize {
        self.state().owners.len()
    }

    /// Serves `DlmAcquire`, `DlmContinue`, `DlmRelease`, `DlmRenew`.
    pub async fn serve(&self, here: &Here, request: Request) -> ReplyResult {
        let epoch = self.epoch;
        let reply = |g: Grant| Reply::LockGrant { request: g.request, last: g.last, next: g.next, epoch };
        match request {
            Request::DlmAcquire { owner, lease_ms, exclusive, lock, until, block, wait_ms } => {
                here.local(lock.handle())?;
                self.acquire(owner, lease_ms, exclusive, &lock, until, block, wait_ms).await.map(reply)
            }
            Request::DlmContinue { owner, request, until, block, wait_ms } => {
                self.resume(owner, request, until, block, wait_ms).await.map(reply)
            }
            Request::DlmRelease { owner, request, from } => self.release(owner, request, from).map(reply),
            Request::DlmRenew { owner } => self.renew(owner).map(|_| Reply::Done),
            _ => Err(ErrorCode::Protocol),
        }
    }
}

#[cfg(test)]
mod tests;
