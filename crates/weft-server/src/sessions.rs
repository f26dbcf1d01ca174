//! Client sessions: shared file pointers and byte-range locks, kept in
//! memory by the server that stores the file's metafile.
//!
//! - A **session** is opened on one file and lives while it is used within
//!   its lease (`weft_proto::limits`): every request naming it renews the
//!   lease; a session unused for a whole lease expires, and its locks are
//!   released (so a dead client's locks go away by themselves). Sessions
//!   are not durable: a restarted server knows none of the old ids and
//!   answers `Stale`, which the client reports as such. Ids carry a random
//!   per-start prefix, so an old id is never mistaken for a new session.
//! - The **shared pointer** is a counter per session (fetch-and-add, set,
//!   get); what it counts is the client's business (MPI-IO: etypes).
//! - **Locks** cover lists of byte ranges of the session's file, shared
//!   (readers) or exclusive (writers). Every lock is independent: two locks
//!   conflict when their ranges overlap and either is exclusive, whoever
//!   owns them. A request is granted at once only if it conflicts neither
//!   with a granted lock nor with an earlier *waiting* request, so
//!   conflicting requests are served first come, first served and a
//!   writer is never starved by a stream of readers. A waiting request
//!   gives up after its wait (at most `LOCK_WAIT_MS_MAX`) with `TimedOut`.
//!
//! A self-contained part of the server: it depends only on
//! [`crate::metadata`], passed to [`Sessions::serve`] to check the file.
//!
//! All state sits behind one `std::sync::Mutex` held only for in-memory
//! work, never across an await. A waiting lock request awaits a oneshot in
//! its own request task (the connection's reader keeps serving; the wait
//! occupies one of the connection's in-flight slots until it is granted
//! or times out). Expired sessions are swept at most every
//! [`SWEEP_PERIOD`] by any session request, and waiting requests tick at
//! that period, so an expired holder's locks are handed on without a
//! background task.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use weft_proto::limits::{
    LEASE_MS_DEFAULT, LEASE_MS_MAX, LEASE_MS_MIN, LOCKS_PER_FILE_MAX, LOCK_RANGES_MAX, LOCK_WAIT_MS_MAX, SESSIONS_MAX,
    WAITERS_PER_FILE_MAX,
};
use weft_proto::message::{ObjectKind, Reply, ReplyResult, Request};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::metadata::Metadata;

/// How often expired sessions are looked for.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// Sessions, pointers and locks of one server.
pub struct Sessions {
    state: Mutex<State>,
}

struct State {
    /// Random high bits of every id issued by this server start.
    prefix: u64,
    next: u64,
    sessions: HashMap<u64, Session>,
    files: HashMap<Handle, FileLocks>,
    last_sweep: Instant,
}

struct Session {
    file: Handle,
    pointer: u64,
    lease: Duration,
    expires: Instant,
}

#[derive(Default)]
struct FileLocks {
    granted: Vec<Lock>,
    waiting: VecDeque<Waiter>,
}

struct Lock {
    id: u64,
    session: u64,
    exclusive: bool,
    /// Sorted, disjoint, non-adjacent `[start, end)` ranges.
    ranges: Vec<(u64, u64)>,
}

struct Waiter {
    lock: Lock,
    reply: oneshot::Sender<WeftResult<u64>>,
}

impl Default for Sessions {
    fn default() -> Self {
        let prefix = (rand::random::<u64>() & 0xffff_ff00_0000_0000).max(1 << 40);
        Sessions {
            state: Mutex::new(State {
                prefix,
                next: 1,
                sessions: HashMap::new(),
                files: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }
}

/// Sorts and merges `(offset, length)` ranges into `[start, end)` ranges.
/// Zero lengths, ranges past the maximum file size and oversized lists are
/// refused.
pub fn normalize(ranges: &[(u64, u64)]) -> WeftResult<Vec<(u64, u64)>> {
    if ranges.is_empty() || ranges.len() > LOCK_RANGES_MAX {
        return Err(ErrorCode::Invalid);
    }
    let mut out = Vec::with_capacity(ranges.len());
    for &(offset, length) in ranges {
        if length == 0 {
            return Err(ErrorCode::Invalid);
        }
        match offset.checked_add(length) {
            Some(end) if end <= limits::FILE_BYTES_MAX => out.push((offset, end)),
            _ => return Err(ErrorCode::TooBig),
        }
    }
    out.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(out.len());
    for (start, end) in out {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    Ok(merged)
}

/// Whether two normalized range lists share a byte.
fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].1 <= b[j].0 {
            i += 1;
        } else if b[j].1 <= a[i].0 {
            j += 1;
        } else {
            return true;
        }
    }
    false
}

fn conflicts(a: &Lock, b: &Lock) -> bool {
    (a.exclusive || b.exclusive) && overlap(&a.ranges, &b.ranges)
}

impl State {
    fn issue(&mut self) -> u64 {
        let id = self.prefix | (self.next & 0xff_ffff_ffff);
        self.next += 1;
        id
    }

    /// The live session `id`, renewed; an expired one is removed.
    fn touch(&mut self, id: u64, now: Instant) -> WeftResult<&mut Session> {
        let expired = match self.sessions.get(&id) {
            None => return Err(ErrorCode::Stale),
            Some(session) => session.expires <= now,
        };
        if expired {
            self.end_session(id);
            return Err(ErrorCode::Stale);
        }
        let session = self.sessions.get_mut(&id).ok_or(ErrorCode::Stale)?;
        session.expires = now + session.lease;
        Ok(session)
    }

    /// Removes a session, its locks and its waiting requests (answered `Stale`).
    fn end_session(&mut self, id: u64) {
        let Some(session) = self.sessions.remove(&id) else { return };
        let Some(locks) = self.files.get_mut(&session.file) else { return };
        locks.granted.retain(|lock| lock.session != id);
        let mut kept = VecDeque::with_capacity(locks.waiting.len());
        for waiter in locks.waiting.drain(..) {
            if waiter.lock.session == id {
                let _ = waiter.reply.send(Err(ErrorCode::Stale));
            } else {
                kept.push_back(waiter);
            }
        }
        locks.waiting = kept;
        self.regrant(session.file);
    }

    fn sweep(&mut self, now: Instant) {
        self.last_sweep = now;
        let expired: Vec<u64> = self.sessions.iter().filter(|(_, s)| s.expires <= now).map(|(id, _)| *id).collect();
        for id in expired {
            self.end_session(id);
        }
    }

    fn sweep_if_due(&mut self, now: Instant) {
        if now.duration_since(self.last_sweep) >= SWEEP_PERIOD {
            self.sweep(now);
        }
    }

    /// Grants, in queue order, every waiting request that conflicts
    /// neither with a granted lock nor with an earlier waiting request.
    fn regrant(&mut self, file: Handle) {
        let Some(locks) = self.files.get_mut(&file) else { return };
        let mut still: VecDeque<Waiter> = VecDeque::with_capacity(locks.waiting.len());
        while let Some(waiter) = locks.waiting.pop_front() {
            let blocked = locks.granted.iter().any(|g| conflicts(g, &waiter.lock))
                || still.iter().any(|w| conflicts(&w.lock, &waiter.lock));
            if blocked {
                still.push_back(waiter);
                continue;
            }
            let id = waiter.lock.id;
            // A receiver that is gone (cannot happen while its task waits) takes nothing.
            if waiter.reply.send(Ok(id)).is_ok() {
                locks.granted.push(waiter.lock);
            }
        }
        locks.waiting = still;
        if locks.granted.is_empty() && locks.waiting.is_empty() {
            self.files.remove(&file);
        }
    }

    /// Removes a waiting request (its wait ended); false if it was granted meanwhile.
    fn withdraw(&mut self, file: Handle, lock_id: u64) -> bool {
        let Some(locks) = self.files.get_mut(&file) else { return false };
        let before = locks.waiting.len();
        locks.waiting.retain(|w| w.lock.id != lock_id);
        let removed = locks.waiting.len() != before;
        if removed {
            // Later requests may have waited only behind this one.
            self.regrant(file);
        }
        removed
    }
}

/// What [`Sessions::lock_begin`] decided.
enum Acquire {
    Granted(u64),
    Wait { file: Handle, lock_id: u64, receiver: oneshot::Receiver<WeftResult<u64>> },
}

impl Sessions {
    fn state(&self) -> WeftResult<std::sync::MutexGuard<'_, State>> {
        // A poisoned mutex means a panic inside a short critical section:
        // the maps are still consistent (every change is one insert/remove).
        Ok(self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Opens a session on `file` (the caller checked it is a metafile stored here).
    pub fn open(&self, file: Handle, lease_ms: u32) -> WeftResult<(u64, u32)> {
        let lease_ms = if lease_ms == 0 { LEASE_MS_DEFAULT } else { lease_ms.clamp(LEASE_MS_MIN, LEASE_MS_MAX) };
        let now = Instant::now();
        let mut state = self.state()?;
        state.sweep_if_due(now);
        if state.sessions.len() >= SESSIONS_MAX {
            state.sweep(now);
            if state.sessions.len() >= SESSIONS_MAX {
                return Err(ErrorCode::Busy);
            }
        }
        let id = state.issue();
        let lease = Duration::from_millis(lease_ms as u64);
        state.sessions.insert(id, Session { file, pointer: 0, lease, expires: now + lease });
        Ok((id, lease_ms))
    }

    /// Renews a session.
    pub fn renew(&self, session: u64) -> WeftResult<()> {
        let now = Instant::now();
        let mut state = self.state()?;
        state.sweep_if_due(now);
        state.touch(session, now).map(|_| ())
    }

    /// Ends a session, releasing its locks.
    pub fn close(&self, session: u64) -> WeftResult<()> {
        let now = Instant::now();
        let mut state = self.state()?;
        state.touch(session, now)?;
        state.end_session(session);
        Ok(())
    }

    /// Applies `change` to the shared pointer; returns the old value.
    pub fn pointer(&self, session: u64, change: impl FnOnce(u64) -> WeftResult<u64>) -> WeftResult<u64> {
        let now = Instant::now();
        let mut state = self.state()?;
        state.sweep_if_due(now);
        let session = state.touch(session, now)?;
        let old = session.pointer;
        let new = change(old)?;
        if new > limits::FILE_BYTES_MAX {
            return Err(ErrorCode::TooBig);
        }
        session.pointer = new;
        Ok(old)
    }

    fn lock_begin(
        &self,
        session: u64,
        ranges: Vec<(u64, u64)>,
        exclusive: bool,
        may_wait: bool,
    ) -> WeftResult<Acquire> {
        let now = Instant::now();
        let mut state = self.state()?;
        state.sweep_if_due(now);
        let file = state.touch(session, now)?.file;
        let id = state.issue();
        let lock = Lock { id, session, exclusive, ranges };
        let locks = state.files.entry(file).or_default();
        let blocked = locks.granted.iter().any(|g| conflicts(g, &lock))
            || locks.waiting.iter().any(|w| conflicts(&w.lock, &lock));
        if !blocked {
            if locks.granted.len() >= LOCKS_PER_FILE_MAX {
                return Err(ErrorCode::Busy);
            }
            locks.granted.push(lock);
            return Ok(Acquire::Granted(id));
        }
        if !may_wait {
            if locks.granted.is_empty() && locks.waiting.is_empty() {
                state.files.remove(&file);
            }
            return Err(ErrorCode::TimedOut);
        }
        if locks.waiting.len() >= WAITERS_PER_FILE_MAX {
            return Err(ErrorCode::Busy);
        }
        let (reply, receiver) = oneshot::channel();
        locks.waiting.push_back(Waiter { lock, reply });
        Ok(Acquire::Wait { file, lock_id: id, receiver })
    }

    /// Takes a lock, waiting up to `wait_ms` (clamped) behind conflicting
    /// locks and earlier conflicting requests. Returns the lock id.
    pub async fn lock(&self, session: u64, ranges: &[(u64, u64)], exclusive: bool, wait_ms: u32) -> WeftResult<u64> {
        let ranges = normalize(ranges)?;
        let wait = Duration::from_millis(wait_ms.min(LOCK_WAIT_MS_MAX) as u64);
        let (file, lock_id, mut receiver) = match self.lock_begin(session, ranges, exclusive, wait_ms > 0)? {
            Acquire::Granted(id) => return Ok(id),
            Acquire::Wait { file, lock_id, receiver } => (file, lock_id, receiver),
        };
        let deadline = tokio::time::Instant::now() + wait;
        // Bounded: one iteration per sweep period until the deadline. (The
        // data servers' locks wait the same way, `locks::Dlm::acquire`;
        // each tick does its own table's work, so the loops stay apart.)
        loop {
            let tick = (tokio::time::Instant::now() + SWEEP_PERIOD).min(deadline);
            tokio::select! {
                granted = &mut receiver => return granted.unwrap_or(Err(ErrorCode::Io)),
                _ = tokio::time::sleep_until(tick) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            // Hands on the locks of expired holders (no background task).
            let now = Instant::now();
            self.state()?.sweep_if_due(now);
        }
        let withdrawn = self.state()?.withdraw(file, lock_id);
        if withdrawn {
            return Err(ErrorCode::TimedOut);
        }
        // Granted (or failed) between the deadline and the withdrawal.
        receiver.try_recv().unwrap_or(Err(ErrorCode::TimedOut))
    }

    /// Releases a lock held through `session`.
    pub fn unlock(&self, session: u64, lock_id: u64) -> WeftResult<()> {
        let now = Instant::now();
        let mut state = self.state()?;
        state.sweep_if_due(now);
        let file = state.touch(session, now)?.file;
        let locks = state.files.get_mut(&file).ok_or(ErrorCode::Invalid)?;
        let before = locks.granted.len();
        locks.granted.retain(|lock| !(lock.id == lock_id && lock.session == session));
        if locks.granted.len() == before {
            return Err(ErrorCode::Invalid);
        }
        state.regrant(file);
        Ok(())
    }

    /// Sessions currently kept (tests, counters).
    pub fn len(&self) -> usize {
        self.state().map(|s| s.sessions.len()).unwrap_or(0)
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sessions {
    /// Serves the session, pointer and lock requests; `metadata` checks
    /// that a session is opened on a file whose metafile is stored here.
    pub async fn serve(&self, metadata: &Metadata, request: Request) -> ReplyResult {
        match request {
            Request::SessionOpen { handle, lease_ms } => {
                metadata.here.local(handle)?;
                // Only files have sessions (the metafile must exist here).
                metadata
                    .read(move |_, r| match r.object(handle)?.kind {
                        ObjectKind::Metafile => Ok(()),
                        ObjectKind::Directory => Err(ErrorCode::IsDir),
                        _ => Err(ErrorCode::Invalid),
                    })
                    .await?;
                let (session, lease_ms) = self.open(handle, lease_ms)?;
                Ok(Reply::Session { session, lease_ms })
            }
            Request::SessionRenew { session } => self.renew(session).map(|_| Reply::Done),
            Request::SessionClose { session } => self.close(session).map(|_| Reply::Done),
            Request::PointerFetchAdd { session, delta } => {
                self.pointer(session, |old| old.checked_add(delta).ok_or(ErrorCode::TooBig)).map(Reply::Pointer)
            }
            Request::PointerSet { session, value } => self.pointer(session, |_| Ok(value)).map(Reply::Pointer),
            Request::PointerGet { session } => self.pointer(session, Ok).map(Reply::Pointer),
            Request::LockAcquire { session, ranges, exclusive, wait_ms } => {
                self.lock(session, &ranges, exclusive, wait_ms).await.map(Reply::Lock)
            }
            Request::LockRelease { session, lock } => self.unlock(session, lock).map(|_| Reply::Done),
            _ => Err(ErrorCode::Protocol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Handle {
        Handle::new(0, 7).unwrap()
    }

    #[test]
    fn normalize_merges_and_refuses_bad_input() {
        assert_eq!(normalize(&[(10, 5), (0, 4), (4, 2), (12, 10)]).unwrap(), vec![(0, 6), (10, 22)]);
        assert_eq!(normalize(&[]), Err(ErrorCode::Invalid));
        assert_eq!(normalize(&[(0, 0)]), Err(ErrorCode::Invalid));
        assert_eq!(normalize(&[(u64::MAX - 1, 2)]), Err(ErrorCode::TooBig));
        assert_eq!(normalize(&[(limits::FILE_BYTES_MAX, 1)]), Err(ErrorCode::TooBig));
    }

    #[test]
    fn overlap_of_lists() {
        assert!(!overlap(&[(0, 4), (8, 12)], &[(4, 8), (12, 16)]));
        assert!(overlap(&[(0, 4), (8, 12)], &[(4, 9)]));
        assert!(overlap(&[(100, 200)], &[(0, 4), (150, 151)]));
    }

    #[test]
    fn pointer_fetch_add_and_unknown_session() {
        let sessions = Sessions::default();
        let (id, lease) = sessions.open(file(), 0).unwrap();
        assert_eq!(lease, LEASE_MS_DEFAULT);
        assert_eq!(sessions.pointer(id, |p| Ok(p + 5)).unwrap(), 0);
        assert_eq!(sessions.pointer(id, |p| Ok(p + 5)).unwrap(), 5);
        assert_eq!(sessions.pointer(id, Ok).unwrap(), 10);
        assert_eq!(sessions.pointer(id, |_| Ok(u64::MAX)), Err(ErrorCode::TooBig));
        assert_eq!(sessions.pointer(id + 1, Ok), Err(ErrorCode::Stale));
        sessions.close(id).unwrap();
        assert_eq!(sessions.pointer(id, Ok), Err(ErrorCode::Stale));
    }

    #[test]
    fn fifo_readers_do_not_pass_a_waiting_writer() {
        let sessions = Sessions::default();
        let (s, _) = sessions.open(file(), 0).unwrap();
        let reader = match sessions.lock_begin(s, vec![(0, 10)], false, true).unwrap() {
            Acquire::Granted(id) => id,
            Acquire::Wait { .. } => panic!("first reader waits"),
        };
        let Acquire::Wait { receiver: mut writer, .. } = sessions.lock_begin(s, vec![(5, 6)], true, true).unwrap()
        else {
            panic!("writer granted over a reader")
        };
        let Acquire::Wait { receiver: mut late_reader, .. } =
            sessions.lock_begin(s, vec![(0, 10)], false, true).unwrap()
        else {
            panic!("reader passed a waiting writer")
        };
        // A request that conflicts with nobody is granted at once.
        assert!(matches!(sessions.lock_begin(s, vec![(100, 110)], true, true).unwrap(), Acquire::Granted(_)));
        assert!(writer.try_recv().is_err());
        sessions.unlock(s, reader).unwrap();
        let writer_id = writer.try_recv().unwrap().unwrap();
        assert!(late_reader.try_recv().is_err());
        sessions.unlock(s, writer_id).unwrap();
        assert!(late_reader.try_recv().unwrap().is_ok());
        assert_eq!(sessions.unlock(s, writer_id), Err(ErrorCode::Invalid));
    }
}
