//! Client sessions, shared file pointers and byte-range locks: the limits
//! both sides apply (the messages are `Request::SessionOpen` …
//! `Request::LockRelease` in [`crate::message`]).
//!
//! A session is opened on a file at the server that stores the file's
//! metafile. It holds one shared file pointer (a plain counter; the MPI-IO
//! layer counts it in etypes of the view) and owns the byte-range locks
//! taken through it. It lives while it is used within its lease: every
//! request naming it renews the lease; a session not used for a whole
//! lease expires and its locks are released. Sessions are kept in the
//! server's memory only: after a server restart every old session id is
//! unknown and answers [`crate::ErrorCode::Stale`].

/// Lease given when the client asks for 0.
pub const LEASE_MS_DEFAULT: u32 = 30_000;
/// Shortest lease (shorter requests are raised to it).
pub const LEASE_MS_MIN: u32 = 100;
/// Longest lease (longer requests are lowered to it).
pub const LEASE_MS_MAX: u32 = 600_000;
/// Longest a lock request waits on the server before it fails with
/// `TimedOut`: below the client's 30 s request timeout, so a waiting lock
/// is always answered before the client gives up on the connection.
pub const LOCK_WAIT_MS_MAX: u32 = 20_000;
/// Ranges in one lock request (the client coarsens longer lists to their span).
pub const LOCK_RANGES_MAX: usize = 65_536;
/// Sessions one server keeps at once (beyond: `Busy`).
pub const SESSIONS_MAX: usize = 65_536;
/// Granted locks per file (beyond: `Busy`).
pub const LOCKS_PER_FILE_MAX: usize = 4096;
/// Waiting lock requests per file (beyond: `Busy`).
pub const WAITERS_PER_FILE_MAX: usize = 1024;
