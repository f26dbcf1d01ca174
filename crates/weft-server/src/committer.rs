//! The committer: the one thread per server that owns the write transaction.
//!
//! Namespace operations are queued as closures. The committer takes the first
//! queued operation, then everything else already waiting (up to the batch
//! limit), applies them in arrival order to one write transaction, commits it
//! (fsync unless `metadata_sync = none`), and only then answers all of them:
//! group commit. Arrival order is the order operations reach the queue, so
//! operations on one directory apply in the order they arrived.
//!
//! Object ids are allocated here too, from blocks whose upper bound is stored
//! in the same transaction as the objects that use them, so an id is never
//! handed out twice, even across a crash.
//!
//! Durability comes from the write-ahead log ([`crate::wal`]): a batch's
//! key/value changes are appended with one fdatasync before redb commits
//! without one; checkpoints make redb durable every `CHECKPOINT_INTERVAL`
//! or when the log is full, and empty the log.
//!
//! A failed commit (typically ENOSPC from the store on a full disk) is
//! answered with its code (`NoSpace`, else `Io`) for the whole batch, and
//! the committer recovers at once, as a restart would: the batch's log
//! record is taken back, the store is reopened (redb refuses everything
//! after a failed write) and comes back at its last durable commit, and the
//! log is replayed on top. If recovery fails too, the next batch retries it
//! first; no restart is ever needed. With `metadata_sync = none` there is
//! no log, so recovery loses the changes since the last durable commit
//! (which a crash would lose as well).
//!
//! New objects (every id allocation) are refused with `NoSpace` while the
//! store's headroom in the metadata reserve is short ([`crate::reserve`]),
//! so a full disk still leaves room for the changes that free space.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::Durability;
use tokio::sync::{mpsc, oneshot};
use weft_proto::handle::FIRST_OBJECT_ID;
use weft_proto::message::ReplyResult;
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::reserve::Headroom;
use crate::store::{storage_error, Store, Writer};
use crate::wal::{Mutation, Wal};

/// Object ids reserved per block.
pub const OBJECT_ID_BLOCK: u64 = 4096;

/// Longest time between durable redb commits: bounds what a lazy
/// (`metadata_sync = none`) server can lose, and how much log a logged one
/// replays after a crash.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(2);

/// Hands out object ids from durably reserved blocks.
pub struct IdAllocator {
    next: HashMap<u16, u64>,
    /// Refuses new objects while the metadata reserve is short.
    headroom: Arc<Headroom>,
}

fn reservation_key(target_id: u16) -> String {
    format!("object_ids_reserved/{target_id}")
}

impl IdAllocator {
    fn new(headroom: Arc<Headroom>) -> IdAllocator {
        IdAllocator { next: HashMap::new(), headroom }
    }

    /// Allocates a fresh handle on `target_id`, extending the durable
    /// reservation inside `writer`'s transaction when the block is used up.
    /// `NoSpace` while the metadata reserve is short (the disk is full).
    pub fn allocate(&mut self, writer: &Writer<'_>, target_id: u16) -> WeftResult<Handle> {
        if self.headroom.short() {
            return Err(ErrorCode::NoSpace);
        }
        let key = reservation_key(target_id);
        let reserved = writer.counter(&key)?.max(FIRST_OBJECT_ID);
        let next = *self.next.entry(target_id).or_insert(reserved);
        if next >= reserved {
            writer.set_counter(&key, next + OBJECT_ID_BLOCK)?;
        }
        self.next.insert(target_id, next + 1);
        Handle::new(target_id, next).ok_or(ErrorCode::NoSpace)
    }
}

/// One queued namespace operation.
pub type Operation = Box<dyn FnOnce(&Writer<'_>, &mut IdAllocator) -> ReplyResult + Send>;

struct Job {
    operation: Operation,
    reply: oneshot::Sender<ReplyResult>,
    force_durable: bool,
}

/// Handle used to queue operations.
#[derive(Clone)]
pub struct Committer {
    queue: mpsc::Sender<Job>,
}

impl Committer {
    /// Replays the write-ahead log in `dir` (allocating `wal_bytes` for
    /// it), then starts the committer thread.
    pub fn start(
        store: Arc<Store>,
        dir: &std::path::Path,
        wal_bytes: u64,
        durable: bool,
        batch_max: u32,
    ) -> WeftResult<Committer> {
        let (wal, batches) = Wal::open(dir, wal_bytes)?;
        Committer::start_on(store, wal, batches, durable, batch_max)
    }

    /// [`Committer::start`] with an opened log and its records.
    pub fn start_on(
        store: Arc<Store>,
        mut wal: Wal,
        batches: Vec<Vec<Mutation>>,
        durable: bool,
        batch_max: u32,
    ) -> WeftResult<Committer> {
        replay(&store, &mut wal, batches)?;
        let sequence = store.read()?.counter(LOG_SEQUENCE)?;
        let persistence = if durable { Persistence::Logged(wal) } else { Persistence::Lazy };
        let state = State {
            ids: IdAllocator::new(store.headroom().clone()),
            store,
            persistence,
            sequence,
            last_durable: Instant::now(),
            dirty: false,
            broken: false,
        };
        let (queue, receiver) = mpsc::channel(8192);
        std::thread::Builder::new()
            .name("weft-committer".into())
            .spawn(move || run(state, receiver, batch_max.max(1) as usize))
            .map_err(|e| ErrorCode::from_io(&e))?;
        Ok(Committer { queue })
    }

    /// Queues an operation and waits until it is committed.
    pub async fn submit(&self, operation: Operation) -> ReplyResult {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Job { operation, reply, force_durable: false }).await.map_err(|_| ErrorCode::ShuttingDown)?;
        answer.await.map_err(|_| ErrorCode::ShuttingDown)?
    }

    /// Waits until everything queued before is durable, whatever `metadata_sync` says.
    pub async fn flush(&self) -> ReplyResult {
        let (reply, answer) = oneshot::channel();
        let operation: Operation = Box::new(|_, _| Ok(weft_proto::message::Reply::Done));
        self.queue.send(Job { operation, reply, force_durable: true }).await.map_err(|_| ErrorCode::ShuttingDown)?;
        answer.await.map_err(|_| ErrorCode::ShuttingDown)?
    }
}

/// How batches reach stable storage.
enum Persistence {
    /// `metadata_sync = commit`: each batch is appended to the write-ahead
    /// log with one fdatasync; redb is made durable at checkpoints.
    Logged(Wal),
    /// `metadata_sync = none`: redb is made durable at most every
    /// `LAZY_DURABLE_INTERVAL`, when idle, and at shutdown.
    Lazy,
}

struct State {
    store: Arc<Store>,
    ids: IdAllocator,
    persistence: Persistence,
    /// Log sequence number of the last batch with changes ([`LOG_SEQUENCE`]).
    sequence: u64,
    /// When redb was last made durable.
    last_durable: Instant,
    /// Whether redb holds commits that are not durable in redb itself.
    dirty: bool,
    /// A commit failed and recovery has not yet succeeded.
    broken: bool,
}

/// The counter holding the log sequence number of the last batch the store
/// contains. Every batch with changes gets the next number, set in its own
/// transaction and carried in its log record (as its last mutation), so a
/// replay skips the records the store already has (docs/FORMAT.md).
pub const LOG_SEQUENCE: &str = "log_sequence";

/// The log sequence number a logged batch carries (`None` in records
/// written before sequence numbers existed: they are always replayed).
fn batch_sequence(batch: &[Mutation]) -> Option<u64> {
    match batch.last() {
        Some(Mutation::SetCounter(name, value)) if name == LOG_SEQUENCE => Some(*value),
        _ => None,
    }
}

/// Replays the write-ahead log into redb, makes redb durable, empties the
/// log. Records whose sequence number the store already has are skipped:
/// the store may be newer than them (a batch made durable in redb itself
/// is not logged, and the log is emptied only after that commit).
fn replay(store: &Store, wal: &mut Wal, batches: Vec<Vec<Mutation>>) -> WeftResult<()> {
    let applied = store.read()?.counter(LOG_SEQUENCE)?;
    let batches: Vec<Vec<Mutation>> =
        batches.into_iter().filter(|batch| batch_sequence(batch).is_none_or(|sequence| sequence > applied)).collect();
    if !batches.is_empty() {
        let count: usize = batches.iter().map(Vec::len).sum();
        let mut txn = store.begin_write()?;
        txn.set_durability(Durability::Immediate).map_err(storage_error)?;
        {
            let writer = Writer::new(&txn);
            for mutation in batches.into_iter().flatten() {
                writer.apply(mutation)?;
            }
        }
        txn.commit().map_err(storage_error)?;
        tracing::info!("replayed {count} metadata changes from the write-ahead log");
    }
    wal.reset()
}

fn run(mut state: State, mut receiver: mpsc::Receiver<Job>, batch_max: usize) {
    loop {
        let lazy_and_dirty = state.dirty && matches!(state.persistence, Persistence::Lazy);
        let first = if lazy_and_dirty {
            match receiver.try_recv() {
                Ok(job) => Some(job),
                Err(mpsc::error::TryRecvError::Empty) => {
                    // Lazy mode: make earlier commits durable while idle.
                    if state.checkpoint().is_err() {
                        // Not again until the next batch, which recovers first.
                        state.dirty = false;
                    }
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => None,
            }
        } else {
            receiver.blocking_recv()
        };
        let Some(first) = first else { break };
        let mut batch = vec![first];
        while batch.len() < batch_max {
            match receiver.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if state.broken {
            if let Err(code) = state.recover() {
                batch.into_iter().for_each(|job| drop(job.reply.send(Err(code))));
                continue;
            }
        }
        if let Err(code) = state.apply_batch(batch) {
            tracing::warn!("metadata commit failed ({code}); reopening the store and replaying the log");
            state.broken = true;
            let _ = state.recover();
        }
    }
    if state.dirty {
        let _ = state.checkpoint();
    }
}

impl State {
    /// Makes redb durable and empties the log.
    fn checkpoint(&mut self) -> WeftResult<()> {
        let outcome = self.checkpoint_once();
        if outcome.is_err() {
            self.broken = true;
        }
        outcome
    }

    fn checkpoint_once(&mut self) -> WeftResult<()> {
        let mut txn = self.store.begin_write()?;
        txn.set_durability(Durability::Immediate).map_err(storage_error)?;
        txn.commit().map_err(storage_error)?;
        if let Persistence::Logged(wal) = &mut self.persistence {
            wal.reset()?;
        }
        self.dirty = false;
        self.last_durable = Instant::now();
        Ok(())
    }

    /// After a failed commit: reopens the store (back at its last durable
    /// commit) and replays the log on top, as a restart would.
    fn recover(&mut self) -> WeftResult<()> {
        self.store.reopen()?;
        if let Persistence::Logged(wal) = &mut self.persistence {
            let batches = wal.read_records()?;
            replay(&self.store, wal, batches)?;
        }
        self.ids = IdAllocator::new(self.store.headroom().clone());
        self.sequence = self.store.read()?.counter(LOG_SEQUENCE)?;
        self.dirty = false;
        self.last_durable = Instant::now();
        self.broken = false;
        tracing::info!("metadata store recovered after a failed commit");
        Ok(())
    }

    /// Applies, persists and answers one batch. On `Err` every job of the
    /// batch has been answered with that code and nothing of it is
    /// durable; the caller recovers the store.
    fn apply_batch(&mut self, batch: Vec<Job>) -> WeftResult<()> {
        let forced = batch.iter().any(|job| job.force_durable);
        let txn = match self.store.begin_write() {
            Ok(txn) => txn,
            Err(code) => {
                batch.into_iter().for_each(|job| drop(job.reply.send(Err(code))));
                return Err(code);
            }
        };
        let mut results = Vec::with_capacity(batch.len());
        let mut rollback_failed = None;
        let mutations = {
            let writer = Writer::new(&txn);
            for job in batch {
                let mark = writer.mark();
                let mut result = (job.operation)(&writer, &mut self.ids);
                if let Err(failed) = result {
                    // A failed operation leaves nothing behind in the batch.
                    if let Err(code) = writer.rollback_to(mark) {
                        tracing::error!("rollback of a failed operation: {code}");
                        result = Err(no_space_or_io(failed, code));
                        rollback_failed = Some(no_space_or_io(failed, code));
                    }
                }
                results.push((job.reply, result));
            }
            if rollback_failed.is_none() && writer.changed() {
                // The batch's log sequence number, in its own transaction and as the record's last mutation.
                if let Err(code) = writer.set_counter(LOG_SEQUENCE, self.sequence + 1) {
                    rollback_failed = Some(code);
                }
            }
            writer.take_mutations()
        };
        if let Some(code) = rollback_failed {
            // Nothing of this batch may commit: drop the transaction.
            drop(txn);
            results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(code))));
            return Err(code);
        }
        match self.persist_and_commit(txn, &mutations, forced) {
            Ok(durable_in_redb) => {
                if !mutations.is_empty() {
                    self.sequence += 1;
                }
                let mut outcome = Ok(());
                if durable_in_redb {
                    // The batch is durable in redb: its answers stand even if emptying the log fails.
                    if let Persistence::Logged(wal) = &mut self.persistence {
                        outcome = wal.reset();
                    }
                    self.dirty = false;
                    self.last_durable = Instant::now();
                } else if !mutations.is_empty() {
                    self.dirty = true;
                }
                results.into_iter().for_each(|(reply, result)| drop(reply.send(result)));
                outcome
            }
            Err(code) => {
                results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(code))));
                Err(code)
            }
        }
    }

    /// Makes the batch durable (through the log, or by committing redb
    /// durably: a checkpoint) and commits it. Returns whether the commit is
    /// durable in redb itself. On `Err` the batch's log record has been
    /// taken back.
    fn persist_and_commit(
        &mut self,
        mut txn: redb::WriteTransaction,
        mutations: &[Mutation],
        forced: bool,
    ) -> WeftResult<bool> {
        let due = self.last_durable.elapsed() >= CHECKPOINT_INTERVAL;
        let mut appended_at = None;
        let durable_in_redb = match &mut self.persistence {
            Persistence::Lazy => forced || due,
            Persistence::Logged(wal) => {
                let payload = if mutations.is_empty() { Some(Vec::new()) } else { Wal::encode(mutations) };
                match payload {
                    Some(payload) if !(forced || due && self.dirty) && wal.has_room(payload.len() as u64) => {
                        if !payload.is_empty() {
                            appended_at = Some(wal.append(&payload)?);
                        }
                        false
                    }
                    _ => true,
                }
            }
        };
        let durability = if durable_in_redb { Durability::Immediate } else { Durability::None };
        let committed =
            txn.set_durability(durability).map_err(storage_error).and_then(|()| txn.commit().map_err(storage_error));
        if let Err(code) = committed {
            if let (Some(start), Persistence::Logged(wal)) = (appended_at, &mut self.persistence) {
                // The batch is answered with an error: a replay must not apply it.
                wal.retract(start)?;
            }
            return Err(code);
        }
        Ok(durable_in_redb)
    }
}

/// The code a batch is answered with when an operation failed with
/// `first` and its rollback with `then`: a full disk stays `NoSpace`.
fn no_space_or_io(first: ErrorCode, then: ErrorCode) -> ErrorCode {
    if first == ErrorCode::NoSpace || then == ErrorCode::NoSpace {
        ErrorCode::NoSpace
    } else {
        ErrorCode::Io
    }
}

#[cfg(test)]
mod tests {
    //! Before the reserve, a commit that failed on a full disk made the
    //! committer refuse every later change until restart ("metadata commit
    //! failed; refusing further namespace changes until restart").

    use std::io::Write;
    use std::process::Command;

    use weft_proto::message::{ObjectKind, Reply};

    use super::*;
    use crate::store::ObjectRecord;

    /// A tmpfs mounted for the test's lifetime (the tests run as root).
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn mount(size_bytes: u64) -> Tmpfs {
            let dir = tempfile::tempdir().unwrap();
            let status = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size_bytes}"), "tmpfs"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "mount -t tmpfs failed (the test needs root)");
            Tmpfs(dir)
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
        }
    }

    /// Stores a record of about `bytes` bytes under object id `id`.
    fn put(id: u64, bytes: usize) -> Operation {
        Box::new(move |w, _| {
            let mut record = ObjectRecord::new(ObjectKind::Symlink, 0o777, 0, 0, 1);
            record.symlink_target = Some("x".repeat(bytes));
            w.put_object(Handle::new(0, id).expect("handle"), &record)?;
            Ok(Reply::Done)
        })
    }

    /// Group commit across submitters (connections, clients): everything
    /// queued while a batch commits shares the next batch, so one log
    /// append and one fdatasync (each batch with changes takes one log
    /// sequence number).
    #[test]
    fn changes_queued_by_many_submitters_share_one_commit() {
        const WAITING: usize = 16;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), 0).unwrap());
        let committer = Committer::start(store.clone(), dir.path(), 1 << 20, true, 512).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let sequence = || store.read().unwrap().counter(LOG_SEQUENCE).unwrap();
        let before = sequence();
        // The first change holds the committer until the others are queued.
        let (started, in_first) = std::sync::mpsc::channel::<()>();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let first: Operation = Box::new(move |w, ids| {
            started.send(()).unwrap();
            gate.recv().unwrap();
            put(1, 10)(w, ids)
        });
        let submitter = committer.clone();
        let first = runtime.spawn(async move { submitter.submit(first).await });
        in_first.recv().unwrap();
        let waiting: Vec<_> = (0..WAITING as u64)
            .map(|i| {
                let submitter = committer.clone();
                runtime.spawn(async move { submitter.submit(put(100 + i, 10)).await })
            })
            .collect();
        let queued = || committer.queue.max_capacity() - committer.queue.capacity();
        for _ in 0..10_000 {
            if queued() == WAITING {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(queued(), WAITING, "the submitters never queued");
        release.send(()).unwrap();
        runtime.block_on(first).unwrap().unwrap();
        for task in waiting {
            runtime.block_on(task).unwrap().unwrap();
        }
        assert_eq!(sequence(), before + 2, "one batch for the first change, one for all that waited");
        let reader = store.read().unwrap();
        for id in (100..100 + WAITING as u64).chain([1]) {
            reader.object(Handle::new(0, id).unwrap()).unwrap();
        }
    }

    #[test]
    fn a_commit_failing_on_a_full_disk_answers_no_space_and_the_next_one_commits() {
        let disk = Tmpfs::mount(8 << 20);
        let dir = disk.0.path();
        // No headroom behind the store, so its commits can meet ENOSPC.
        let store = Arc::new(Store::open(dir, 0).unwrap());
        let committer = Committer::start(store.clone(), dir, 1 << 20, true, 8).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
        while filler.write_all(&[7u8; 64 << 10]).is_ok() {}
        let mut acknowledged = Vec::new();
        let mut failed = None;
        for id in 10..2000 {
            match runtime.block_on(committer.submit(put(id, 50_000))) {
                Ok(_) => acknowledged.push(id),
                Err(code) => {
                    failed = Some((id, code));
                    break;
                }
            }
        }
        let (failed_id, code) = failed.expect("the disk never filled");
        assert_eq!(code, ErrorCode::NoSpace, "a full disk is ENOSPC, not EIO");
        // Space comes back: the next change commits, no restart needed.
        filler.set_len(0).unwrap();
        runtime.block_on(committer.submit(put(1, 10))).expect("commit after space came back");
        let reader = store.read().unwrap();
        for id in acknowledged {
            reader.object(Handle::new(0, id).unwrap()).expect("an acknowledged change survived recovery");
        }
        assert_eq!(reader.object(Handle::new(0, failed_id).unwrap()), Err(ErrorCode::Stale), "the failed change");
        reader.object(Handle::new(0, 1).unwrap()).unwrap();
    }
}
