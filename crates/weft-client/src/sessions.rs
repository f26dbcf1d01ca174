//! Client sessions on a file: the shared file pointer and byte-range locks
//! kept by the server that stores the file's metafile
//! (`weft-server::sessions`; limits in `weft_proto::limits`).
//!
//! A [`Session`] is a plain value (file handle, id, lease), so processes
//! can share one: one opens it and sends the id to the others (MPI-IO
//! broadcasts it), who rebuild it with [`Session::attach`]. Every request
//! naming a session renews its lease; [`Client::keep_alive`] renews it in
//! the background for as long as the returned guard lives, so a session
//! (and every lock it owns) ends at most one lease after its process dies.
//! After a server restart every session is gone: requests answer
//! `ErrorCode::Stale`.

use std::time::Duration;

use weft_proto::limits::{LOCK_RANGES_MAX, LOCK_WAIT_MS_MAX};
use weft_proto::message::{Reply, Request};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::blocking::BlockingClient;
use crate::client::Client;

/// An open session on one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The file's metafile (routes the requests).
    pub file: Handle,
    /// Session id, unique per server start.
    pub id: u64,
    /// The lease the server granted.
    pub lease: Duration,
}

impl Session {
    /// A session opened elsewhere (id received from another process).
    pub fn attach(file: Handle, id: u64, lease: Duration) -> Session {
        Session { file, id, lease }
    }
}

/// Lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Readers: compatible with other shared locks.
    Shared,
    /// Writers: conflicts with every overlapping lock.
    Exclusive,
}

/// Renews a session in the background until dropped.
#[derive(Debug)]
pub struct KeepAlive {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Ranges sent in one lock request: `ranges` itself, or its span when the
/// list is longer than the server accepts (coarser, still correct).
pub fn lock_ranges(ranges: &[(u64, u64)]) -> WeftResult<Vec<(u64, u64)>> {
    if ranges.len() <= LOCK_RANGES_MAX {
        return Ok(ranges.to_vec());
    }
    let start = ranges.iter().map(|r| r.0).min().ok_or(ErrorCode::Invalid)?;
    let end = ranges.iter().map(|r| r.0.saturating_add(r.1)).max().ok_or(ErrorCode::Invalid)?;
    Ok(vec![(start, end - start)])
}

impl Client {
    async fn session_call(&self, file: Handle, request: Request) -> WeftResult<Reply> {
        self.call(self.server_of(file)?, request).await
    }

    /// Opens a session on `file` with the lease asked for (zero: the server's default).
    pub async fn session_open(&self, file: Handle, lease: Duration) -> WeftResult<Session> {
        let lease_ms = u32::try_from(lease.as_millis()).unwrap_or(u32::MAX);
        match self.session_call(file, Request::SessionOpen { handle: file, lease_ms }).await? {
            Reply::Session { session, lease_ms } => {
                Ok(Session { file, id: session, lease: Duration::from_millis(lease_ms as u64) })
            }
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Renews a session's lease.
    pub async fn session_renew(&self, session: &Session) -> WeftResult<()> {
        match self.session_call(session.file, Request::SessionRenew { session: session.id }).await? {
            Reply::Done => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Ends a session; its locks are released.
    pub async fn session_close(&self, session: &Session) -> WeftResult<()> {
        match self.session_call(session.file, Request::SessionClose { session: session.id }).await? {
            Reply::Done => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }

    async fn pointer_call(&self, session: &Session, request: Request) -> WeftResult<u64> {
        match self.session_call(session.file, request).await? {
            Reply::Pointer(value) => Ok(value),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Adds `delta` to the shared pointer; returns its old value.
    pub async fn pointer_fetch_add(&self, session: &Session, delta: u64) -> WeftResult<u64> {
        self.pointer_call(session, Request::PointerFetchAdd { session: session.id, delta }).await
    }

    /// Sets the shared pointer; returns its old value.
    pub async fn pointer_set(&self, session: &Session, value: u64) -> WeftResult<u64> {
        self.pointer_call(session, Request::PointerSet { session: session.id, value }).await
    }

    /// The shared pointer.
    pub async fn pointer_get(&self, session: &Session) -> WeftResult<u64> {
        self.pointer_call(session, Request::PointerGet { session: session.id }).await
    }

    /// Locks `(offset, length)` ranges of the session's file, waiting up to
    /// `wait` (at most `LOCK_WAIT_MS_MAX`; zero fails at once with
    /// `TimedOut` if the lock is not free). Returns the lock id.
    pub async fn lock(
        &self,
        session: &Session,
        ranges: &[(u64, u64)],
        mode: LockMode,
        wait: Duration,
    ) -> WeftResult<u64> {
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX).min(LOCK_WAIT_MS_MAX);
        let request = Request::LockAcquire {
            session: session.id,
            ranges: lock_ranges(ranges)?,
            exclusive: mode == LockMode::Exclusive,
            wait_ms,
        };
        match self.session_call(session.file, request).await? {
            Reply::Lock(id) => Ok(id),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Releases a lock.
    pub async fn unlock(&self, session: &Session, lock: u64) -> WeftResult<()> {
        match self.session_call(session.file, Request::LockRelease { session: session.id, lock }).await? {
            Reply::Done => Ok(()),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Renews `session` every third of its lease until the guard is
    /// dropped (must be called inside a tokio runtime). Failed renewals
    /// are retried at the next period; the session ends one lease after
    /// the last renewal that arrived.
    pub fn keep_alive(&self, session: &Session) -> KeepAlive {
        let client = self.clone();
        let session = *session;
        let period = (session.lease / 3).max(Duration::from_millis(20));
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            // Ends when the guard aborts the task, or when the session is gone.
            loop {
                ticks.tick().await;
                if client.session_renew(&session).await == Err(ErrorCode::Stale) {
                    return;
                }
            }
        });
        KeepAlive { task }
    }
}

impl BlockingClient {
    /// See [`Client::session_open`].
    pub fn session_open(&self, file: Handle, lease: Duration) -> WeftResult<Session> {
        self.block_on(self.client().session_open(file, lease))
    }

    /// See [`Client::session_renew`].
    pub fn session_renew(&self, session: &Session) -> WeftResult<()> {
        self.block_on(self.client().session_renew(session))
    }

    /// See [`Client::session_close`].
    pub fn session_close(&self, session: &Session) -> WeftResult<()> {
        self.block_on(self.client().session_close(session))
    }

    /// See [`Client::pointer_fetch_add`].
    pub fn pointer_fetch_add(&self, session: &Session, delta: u64) -> WeftResult<u64> {
        self.block_on(self.client().pointer_fetch_add(session, delta))
    }

    /// See [`Client::pointer_set`].
    pub fn pointer_set(&self, session: &Session, value: u64) -> WeftResult<u64> {
        self.block_on(self.client().pointer_set(session, value))
    }

    /// See [`Client::pointer_get`].
    pub fn pointer_get(&self, session: &Session) -> WeftResult<u64> {
        self.block_on(self.client().pointer_get(session))
    }

    /// See [`Client::lock`].
    pub fn lock(&self, session: &Session, ranges: &[(u64, u64)], mode: LockMode, wait: Duration) -> WeftResult<u64> {
        self.block_on(self.client().lock(session, ranges, mode, wait))
    }

    /// See [`Client::unlock`].
    pub fn unlock(&self, session: &Session, lock: u64) -> WeftResult<()> {
        self.block_on(self.client().unlock(session, lock))
    }

    /// See [`Client::keep_alive`] (runs on this client's runtime).
    pub fn keep_alive(&self, session: &Session) -> KeepAlive {
        self.block_on(async { self.client().keep_alive(session) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_become_their_span() {
        assert_eq!(lock_ranges(&[(4, 2), (0, 1)]).unwrap(), vec![(4, 2), (0, 1)]);
        let many: Vec<(u64, u64)> = (0..LOCK_RANGES_MAX as u64 + 1).map(|i| (10 + 4 * i, 2)).collect();
        let last = 10 + 4 * LOCK_RANGES_MAX as u64 + 2;
        assert_eq!(lock_ranges(&many).unwrap(), vec![(10, last - 10)]);
    }
}
