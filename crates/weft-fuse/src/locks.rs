//! fcntl record locks through the mount (`F_SETLK`, `F_SETLKW`, `F_GETLK`,
//! and so `lockf`), held by the servers' lock service so they exclude
//! processes on every mount of the file system.
//!
//! - **Where**: every lock of a file is one request at the server storing
//!   its metafile, over the file's byte range as the caller gave it (a
//!   one-stripe description: one piece however long, so a whole-file lock
//!   costs what a one-byte lock costs). fcntl locks thus exclude each other
//!   on every mount; they are not the MPI-IO atomic-mode locks, which sit
//!   at the data servers in datafile offsets.
//! - **Owners**: the kernel names a lock owner per process (its file
//!   table); each gets its own server owner id (a hash of the owner and a
//!   random number drawn per mount), so two processes on one mount exclude
//!   each other too. An owner's locks never conflict with each other at the
//!   server, so a change (split by a partial unlock, merge with an adjacent
//!   lock of the same type, upgrade, downgrade) first takes the new ranges,
//!   then gives back the old ones: no other owner can slip in between, and
//!   a refused change leaves the old locks as they were.
//! - **Release**: closing any descriptor of the file releases the
//!   closing process's locks on it (the kernel's `flush`), as POSIX says;
//!   so does the process's exit. If the mount itself dies, its locks go
//!   when their lease lapses at the server ([`LEASE_MS`]); the mount renews
//!   the leases of the owners holding locks every third of a lease.
//! - **Waiting** (`F_SETLKW`): a task waits at the server in slices of
//!   [`WAIT_SLICE_MS`], so the mount keeps serving other requests. fuser
//!   0.18 answers the kernel's `FUSE_INTERRUPT` with ENOSYS, so between
//!   slices the task reads the waiting thread's pending signals from
//!   `/proc`: a signal that is neither blocked nor ignored ends the wait
//!   with EINTR (the kernel restarts the call if the handler asked for it;
//!   a fatal signal kills the process), and the queued request is dropped.
//! - **`F_GETLK`** answers from this mount's table when a local owner holds
//!   a conflicting lock (its exact range, type and pid); otherwise it probes
//!   the server (a non-waiting lock, given back at once) and reports the
//!   first conflicting byte found by bisection, as a one-byte lock of the
//!   type that conflicts, with pid 0 (an owner on another mount).
//! - `flock(2)` stays local to each mount (the kernel's own), as before.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_client::{Client, Locker, RangeLock};
use weft_proto::limits::FILE_BYTES_MAX;
use weft_proto::{ErrorCode, Handle, WeftResult};

/// Lease of the mount's lock owners at the servers: how long a dead
/// mount's locks outlive it.
pub const LEASE_MS: u32 = weft_proto::limits::LEASE_MS_DEFAULT;
/// One wait at the server of a blocked `F_SETLKW`, between two looks at
/// the waiter's pending signals.
pub const WAIT_SLICE_MS: u32 = 200;

/// A lock's kind, from `l_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `F_UNLCK`.
    Unlock,
    /// `F_RDLCK`: shared.
    Read,
    /// `F_WRLCK`: exclusive.
    Write,
}

impl Kind {
    /// The kind of an `l_type`, or `None` for another value.
    pub fn of(typ: i32) -> Option<Kind> {
        match typ {
            libc::F_UNLCK => Some(Kind::Unlock),
            libc::F_RDLCK => Some(Kind::Read),
            libc::F_WRLCK => Some(Kind::Write),
            _ => None,
        }
    }

    /// The `l_type` of a kind.
    pub fn typ(self) -> i32 {
        match self {
            Kind::Unlock => libc::F_UNLCK,
            Kind::Read => libc::F_RDLCK,
            Kind::Write => libc::F_WRLCK,
        }
    }
}

/// A range `[start, end)` from the kernel's inclusive `start..=end`
/// (`end` = `OFFSET_MAX` means "to end of file"), cut at the largest file.
pub fn range_of(start: u64, end: u64) -> WeftResult<(u64, u64)> {
    let end = end.saturating_add(1).min(FILE_BYTES_MAX);
    if start >= end {
        return Err(ErrorCode::Invalid);
    }
    Ok((start, end))
}

/// One held lock of an owner on a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    start: u64,
    end: u64,
    exclusive: bool,
    lock: RangeLock,
}

/// A range in a planned change: held already (`Some`) or to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Planned {
    start: u64,
    end: u64,
    exclusive: bool,
    lock: Option<RangeLock>,
}

/// What a change of an owner's locks needs: the ranges to take (the
/// target first, if any) and the old locks to give back afterwards.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    /// The owner's ranges after the change, sorted.
    after: Vec<Planned>,
    /// Index in `after` of the asked range (merged with its neighbours), if a lock.
    target: Option<usize>,
    /// Old locks no longer needed.
    release: Vec<RangeLock>,
}

/// The change of `held` (sorted, disjoint) that sets `[start, end)` to `kind`.
fn plan(held: &[Held], start: u64, end: u64, kind: Kind) -> Plan {
    let mut after = Vec::with_capacity(held.len() + 2);
    let mut release = Vec::new();
    for h in held {
        if h.end <= start || h.start >= end {
            after.push(Planned { start: h.start, end: h.end, exclusive: h.exclusive, lock: Some(h.lock) });
            continue;
        }
        // Overlapped: whatever is left outside [start, end) is taken anew.
        release.push(h.lock);
        if h.start < start {
            after.push(Planned { start: h.start, end: start, exclusive: h.exclusive, lock: None });
        }
        if h.end > end {
            after.push(Planned { start: end, end: h.end, exclusive: h.exclusive, lock: None });
        }
    }
    let target = if kind == Kind::Unlock {
        None
    } else {
        let exclusive = kind == Kind::Write;
        let (mut lo, mut hi) = (start, end);
        // Merge with adjacent ranges of the same kind (POSIX merges them).
        after.retain(|p| {
            let adjacent = p.exclusive == exclusive && (p.end == start || p.start == end);
            if adjacent {
                lo = lo.min(p.start);
                hi = hi.max(p.end);
                if let Some(lock) = p.lock {
                    release.push(lock);
                }
            }
            !adjacent
        });
        after.push(Planned { start: lo, end: hi, exclusive, lock: None });
        Some(lo)
    };
    after.sort_by_key(|p| p.start);
    let target = target.and_then(|lo| after.iter().position(|p| p.start == lo && p.lock.is_none()));
    Plan { after, target, release }
}

/// An owner's locks on one file.
#[derive(Debug)]
struct OwnerLocks {
    locker: Locker,
    pid: u32,
    held: Vec<Held>,
}

/// Key: the file and the kernel's lock owner.
pub type Key = (Handle, u64);

/// The fcntl locks of one mount.
pub struct PosixLocks {
    salt: u64,
    /// Per (file, owner); the async mutex orders one owner's changes on a file.
    owners: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<OwnerLocks>>>>,
}

/// Why a lock was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Another owner holds a conflicting lock (`F_SETLK`: EAGAIN).
    Conflict,
    /// The waiting thread got a signal (`F_SETLKW`: EINTR).
    Interrupted,
    /// A server error.
    Failed(ErrorCode),
}

impl From<ErrorCode> for Refused {
    fn from(code: ErrorCode) -> Refused {
        Refused::Failed(code)
    }
}

/// A conflicting lock, as `F_GETLK` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive).
    pub end: u64,
    /// `F_RDLCK` or `F_WRLCK`.
    pub typ: i32,
    /// The holder's pid on this mount, 0 for another mount's.
    pub pid: u32,
}

impl Default for PosixLocks {
    fn default() -> Self {
        PosixLocks { salt: rand_salt(), owners: Mutex::new(HashMap::new()) }
    }
}

fn rand_salt() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

impl PosixLocks {
    /// The server owner of a kernel lock owner (the same on every file).
    fn locker(&self, owner: u64) -> Locker {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        hasher.write_u64(self.salt);
        hasher.write_u64(owner);
        Locker { owner: hasher.finish() | 1, lease_ms: LEASE_MS }
    }

    fn entry(&self, key: Key, pid: u32) -> Arc<tokio::sync::Mutex<OwnerLocks>> {
        let mut owners = self.owners.lock().expect("lock table");
        owners
            .entry(key)
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(OwnerLocks { locker: self.locker(key.1), pid, held: Vec::new() }))
            })
            .clone()
    }

    /// Drops the table entry of an owner holding nothing.
    fn tidy(&self, key: Key, entry: &Arc<tokio::sync::Mutex<OwnerLocks>>, empty: bool) {
        if empty {
            let mut owners = self.owners.lock().expect("lock table");
            if owners.get(&key).is_some_and(|e| Arc::ptr_eq(e, entry)) && Arc::strong_count(entry) <= 2 {
                owners.remove(&key);
            }
        }
    }

    /// `F_SETLK` (`wait_for` = None) or `F_SETLKW` (`wait_for` = the
    /// waiting thread) of `[start, end)` of `file` by kernel lock owner
    /// `owner` (process `pid`).
    pub async fn set(
        &self,
        client: &Client,
        (file, owner): Key,
        (start, end): (u64, u64),
        kind: Kind,
        wait_for: Option<u32>,
        pid: u32,
    ) -> Result<(), Refused> {
        let key = (file, owner);
        let entry = self.entry(key, pid);
        let mut locks = entry.lock().await;
        let result = self.change(client, file, &mut locks, (start, end), kind, wait_for).await;
        if result.is_ok() && kind != Kind::Unlock {
            locks.pid = pid;
        }
        let empty = locks.held.is_empty();
        drop(locks);
        self.tidy(key, &entry, empty);
        result
    }

    async fn change(
        &self,
        client: &Client,
        file: Handle,
        locks: &mut OwnerLocks,
        (start, end): (u64, u64),
        kind: Kind,
        wait_for: Option<u32>,
    ) -> Result<(), Refused> {
        let plan = plan(&locks.held, start, end, kind);
        if kind == Kind::Unlock && plan.release.is_empty() {
            return Ok(());
        }
        let locker = locks.locker;
        let mut taken: Vec<RangeLock> = Vec::new();
        let mut after = plan.after;
        // The asked range first: the only one that can conflict.
        let order = plan.target.into_iter().chain((0..after.len()).filter(|&i| Some(i) != plan.target));
        let mut outcome = Ok(());
        for index in order {
            let p = after[index];
            if p.lock.is_some() {
                continue;
            }
            let wait = if Some(index) == plan.target { wait_for } else { None };
            match take(client, locker, file, (p.start, p.end), p.exclusive, wait).await {
                Ok(lock) => {
                    taken.push(lock);
                    after[index].lock = Some(lock);
                }
                Err(refused) => {
                    outcome = Err(refused);
                    break;
                }
            }
        }
        if let Err(refused) = outcome {
            for lock in taken {
                let _ = client.unlock_range(locker, lock).await;
            }
            // A remainder refused means the server lost our locks (lease): say so.
            return Err(refused);
        }
        for lock in plan.release {
            if let Err(code) = client.unlock_range(locker, lock).await {
                tracing::warn!("giving back a lock of {file:?}: {code:?}");
            }
        }
        locks.held = after
            .into_iter()
            .filter_map(|p| p.lock.map(|lock| Held { start: p.start, end: p.end, exclusive: p.exclusive, lock }))
            .collect();
        Ok(())
    }

    /// Whether `owner` may hold locks on `file` (a close then releases them).
    pub fn holds(&self, file: Handle, owner: u64) -> bool {
        self.owners.lock().expect("lock table").contains_key(&(file, owner))
    }

    /// Releases every lock of `owner` on `file` (close).
    pub async fn release_owner(&self, client: &Client, file: Handle, owner: u64) {
        let key = (file, owner);
        let entry = {
            let owners = self.owners.lock().expect("lock table");
            match owners.get(&key) {
                Some(entry) => entry.clone(),
                None => return,
            }
        };
        let mut locks = entry.lock().await;
        let locker = locks.locker;
        for held in std::mem::take(&mut locks.held) {
            if let Err(code) = client.unlock_range(locker, held.lock).await {
                tracing::warn!("releasing a lock of {file:?} at close: {code:?}");
            }
        }
        drop(locks);
        self.tidy(key, &entry, true);
    }

    /// `F_GETLK`: a lock that would conflict with `kind` on `[start, end)`
    /// for `owner`, or `None`.
    pub async fn get(
        &self,
        client: &Client,
        file: Handle,
        owner: u64,
        (start, end): (u64, u64),
        kind: Kind,
    ) -> WeftResult<Option<Conflict>> {
        if kind == Kind::Unlock {
            return Err(ErrorCode::Invalid);
        }
        let exclusive = kind == Kind::Write;
        if let Some(conflict) = self.local_conflict(file, owner, (start, end), exclusive).await {
            return Ok(Some(conflict));
        }
        let locker = self.locker(owner);
        let conflicts = |lo: u64, hi: u64, exclusive: bool| async move {
            let (lock, granted) = client.lock_range(locker, file, lo, hi, exclusive, 0).await?;
            client.unlock_range(locker, lock).await?;
            WeftResult::Ok(!granted)
        };
        if !conflicts(start, end, exclusive).await? {
            return Ok(None);
        }
        // Bisection for the first conflicting byte: a conflict lies in [lo, hi).
        let (mut lo, mut hi) = (start, end);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if conflicts(lo, mid, exclusive).await? {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        // A write lock conflicts with both kinds; a reader only with a writer.
        let typ = if exclusive && !conflicts(lo, lo + 1, false).await? { libc::F_RDLCK } else { libc::F_WRLCK };
        Ok(Some(Conflict { start: lo, end: lo, typ, pid: 0 }))
    }

    /// A conflicting lock of another owner on this mount.
    async fn local_conflict(
        &self,
        file: Handle,
        owner: u64,
        (start, end): (u64, u64),
        exclusive: bool,
    ) -> Option<Conflict> {
        let others: Vec<Arc<tokio::sync::Mutex<OwnerLocks>>> = {
            let owners = self.owners.lock().expect("lock table");
            owners.iter().filter(|((f, o), _)| *f == file && *o != owner).map(|(_, e)| e.clone()).collect()
        };
        for entry in others {
            // An owner busy changing its locks (or waiting) is skipped: the server probe still sees what it holds.
            let Ok(locks) = entry.try_lock() else { continue };
            let hit = locks.held.iter().find(|h| h.start < end && h.end > start && (exclusive || h.exclusive));
            if let Some(h) = hit {
                let typ = if h.exclusive { libc::F_WRLCK } else { libc::F_RDLCK };
                return Some(Conflict { start: h.start, end: h.end - 1, typ, pid: locks.pid });
            }
        }
        None
    }

    /// The server owners holding locks and the servers holding them (lease renewal).
    pub fn holders(&self) -> Vec<(Locker, u32)> {
        let entries: Vec<Arc<tokio::sync::Mutex<OwnerLocks>>> =
            self.owners.lock().expect("lock table").values().cloned().collect();
        let mut holders = Vec::new();
        for entry in entries {
            if let Ok(locks) = entry.try_lock() {
                for held in &locks.held {
                    holders.push((locks.locker, held.lock.server));
                }
            }
        }
        holders.sort_by_key(|(l, s)| (l.owner, *s));
        holders.dedup();
        holders
    }

    /// Renews the leases of every owner holding locks, every third of a
    /// lease, for as long as the mount runs.
    pub async fn renew_forever(self: Arc<Self>, client: Client) {
        let period = Duration::from_millis(u64::from(LEASE_MS) / 3);
        loop {
            tokio::time::sleep(period).await;
            for (locker, server) in self.holders() {
                if let Err(code) = client.renew_locks_at(locker, server).await {
                    tracing::warn!("renewing the fcntl locks of owner {:x} at server {server}: {code:?}", locker.owner);
                }
            }
        }
    }
}

/// Takes one range, waiting (in slices, watching `wait_for`'s signals) or not.
async fn take(
    client: &Client,
    locker: Locker,
    file: Handle,
    (start, end): (u64, u64),
    exclusive: bool,
    wait_for: Option<u32>,
) -> Result<RangeLock, Refused> {
    let slice = if wait_for.is_some() { WAIT_SLICE_MS } else { 0 };
    let (lock, mut granted) = client.lock_range(locker, file, start, end, exclusive, slice).await?;
    // Unbounded by design (F_SETLKW waits until granted), ended by a
    // signal to the waiter or by an error.
    while !granted {
        let refused = match wait_for {
            None => Some(Refused::Conflict),
            Some(tid) if signal_pending(tid) => Some(Refused::Interrupted),
            Some(_) => None,
        };
        if let Some(refused) = refused {
            let _ = client.unlock_range(locker, lock).await;
            return Err(refused);
        }
        granted = match client.lock_range_wait(locker, lock, slice).await {
            Ok(granted) => granted,
            Err(code) => {
                let _ = client.unlock_range(locker, lock).await;
                return Err(Refused::Failed(code));
            }
        };
    }
    Ok(lock)
}

/// Whether thread `tid` has a signal pending that it neither blocks nor
/// ignores (or is gone), from `/proc/<tid>/status`.
pub fn signal_pending(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else { return true };
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = mask("SigPnd:") | mask("ShdPnd:");
    pending & !mask("SigBlk:") & !mask("SigIgn:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(start: u64, end: u64, exclusive: bool, request: u64) -> Held {
        Held { start, end, exclusive, lock: RangeLock { server: 0, request } }
    }

    fn spans(plan: &Plan) -> Vec<(u64, u64, bool, Option<u64>)> {
        plan.after.iter().map(|p| (p.start, p.end, p.exclusive, p.lock.map(|l| l.request))).collect()
    }

    #[test]
    fn unlock_in_the_middle_splits() {
        let plan = plan(&[held(0, 100, true, 1)], 40, 60, Kind::Unlock);
        assert_eq!(spans(&plan), [(0, 40, true, None), (60, 100, true, None)]);
        assert_eq!(plan.release, [RangeLock { server: 0, request: 1 }]);
        assert_eq!(plan.target, None);
    }

    #[test]
    fn same_kind_merges_and_other_kind_splits() {
        let old = [held(0, 10, false, 1), held(10, 20, true, 2), held(30, 40, false, 3)];
        // A read lock over 15..30 cuts the write lock and merges with the read lock at 30.
        let p = plan(&old, 15, 30, Kind::Read);
        assert_eq!(spans(&p), [(0, 10, false, Some(1)), (10, 15, true, None), (15, 40, false, None)]);
        assert_eq!(p.target, Some(2));
        let mut released: Vec<u64> = p.release.iter().map(|l| l.request).collect();
        released.sort_unstable();
        assert_eq!(released, [2, 3]);
        // An upgrade of exactly a held range replaces it.
        let p = plan(&old, 0, 10, Kind::Write);
        assert_eq!(spans(&p)[0..2], [(0, 20, true, None), (30, 40, false, Some(3))]);
        assert_eq!(p.target, Some(0));
    }

    #[test]
    fn unlocking_nothing_changes_nothing() {
        let p = plan(&[held(0, 10, true, 1)], 20, 30, Kind::Unlock);
        assert!(p.release.is_empty());
        assert_eq!(spans(&p), [(0, 10, true, Some(1))]);
    }

    #[test]
    fn kernel_ranges() {
        assert_eq!(range_of(0, i64::MAX as u64), Ok((0, FILE_BYTES_MAX)));
        assert_eq!(range_of(5, 5), Ok((5, 6)));
        assert_eq!(range_of(FILE_BYTES_MAX, i64::MAX as u64), Err(ErrorCode::Invalid));
        assert_eq!(Kind::of(libc::F_WRLCK), Some(Kind::Write));
        assert_eq!(Kind::of(77), None);
    }

    #[test]
    fn own_signals_are_read() {
        assert!(!signal_pending(std::process::id()));
        assert!(signal_pending(u32::MAX), "a thread that is gone");
    }
}
