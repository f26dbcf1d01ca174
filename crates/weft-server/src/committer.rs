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
//! After a failed commit the committer refuses every later operation with
//! `Io`: the store's state is no longer known, and restart repairs it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::Durability;
use tokio::sync::{mpsc, oneshot};
use weft_proto::handle::FIRST_OBJECT_ID;
use weft_proto::message::ReplyResult;
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::store::{Store, Writer};
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
}

fn reservation_key(target_id: u16) -> String {
    format!("object_ids_reserved/{target_id}")
}

impl IdAllocator {
    fn new() -> IdAllocator {
        IdAllocator { next: HashMap::new() }
    }

    /// Allocates a fresh handle on `target_id`, extending the durable
    /// reservation inside `writer`'s transaction when the block is used up.
    pub fn allocate(&mut self, writer: &Writer<'_>, target_id: u16) -> WeftResult<Handle> {
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
    /// Replays the write-ahead log in `dir`, then starts the committer thread.
    pub fn start(store: Arc<Store>, dir: &std::path::Path, durable: bool, batch_max: u32) -> WeftResult<Committer> {
        let (mut wal, batches) = Wal::open(dir)?;
        recover(&store, &mut wal, batches)?;
        let persistence = if durable { Persistence::Logged(wal) } else { Persistence::Lazy };
        let state = State {
            store,
            ids: IdAllocator::new(),
            persistence,
            last_durable: Instant::now(),
            dirty: false,
            failed: false,
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
    /// When redb was last made durable.
    last_durable: Instant,
    /// Whether redb holds commits that are not durable in redb itself.
    dirty: bool,
    failed: bool,
}

/// Replays the write-ahead log into redb, makes redb durable, empties the log.
fn recover(store: &Store, wal: &mut Wal, batches: Vec<Vec<Mutation>>) -> WeftResult<()> {
    if !batches.is_empty() {
        let count: usize = batches.iter().map(Vec::len).sum();
        let mut txn = store.begin_write()?;
        txn.set_durability(Durability::Immediate).map_err(|_| ErrorCode::Io)?;
        {
            let writer = Writer::new(&txn);
            for mutation in batches.into_iter().flatten() {
                writer.apply(mutation)?;
            }
        }
        txn.commit().map_err(|_| ErrorCode::Io)?;
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
                    let _ = state.checkpoint();
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
        if state.failed {
            batch.into_iter().for_each(|job| drop(job.reply.send(Err(ErrorCode::Io))));
            continue;
        }
        if state.apply_batch(batch).is_err() {
            state.failed = true;
            tracing::error!("metadata commit failed; refusing further namespace changes until restart");
        }
    }
    if state.dirty {
        let _ = state.checkpoint();
    }
}

impl State {
    /// Makes redb durable and empties the log.
    fn checkpoint(&mut self) -> WeftResult<()> {
        let mut txn = self.store.begin_write()?;
        txn.set_durability(Durability::Immediate).map_err(|_| ErrorCode::Io)?;
        txn.commit().map_err(|_| ErrorCode::Io)?;
        if let Persistence::Logged(wal) = &mut self.persistence {
            wal.reset()?;
        }
        self.dirty = false;
        self.last_durable = Instant::now();
        Ok(())
    }

    fn apply_batch(&mut self, batch: Vec<Job>) -> Result<(), ()> {
        let forced = batch.iter().any(|job| job.force_durable);
        let mut txn = match self.store.begin_write() {
            Ok(txn) => txn,
            Err(code) => {
                batch.into_iter().for_each(|job| drop(job.reply.send(Err(code))));
                return Err(());
            }
        };
        let mut results = Vec::with_capacity(batch.len());
        let mut rollback_failed = false;
        let mutations = {
            let writer = Writer::new(&txn);
            for job in batch {
                let mark = writer.mark();
                let mut result = (job.operation)(&writer, &mut self.ids);
                if result.is_err() {
                    // A failed operation leaves nothing behind in the batch.
                    if let Err(code) = writer.rollback_to(mark) {
                        tracing::error!("rollback of a failed operation: {code}");
                        result = Err(ErrorCode::Io);
                        rollback_failed = true;
                    }
                }
                results.push((job.reply, result));
            }
            writer.take_mutations()
        };
        if rollback_failed {
            // Nothing of this batch may commit: drop the transaction.
            drop(txn);
            self.ids = IdAllocator::new();
            results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(ErrorCode::Io))));
            return Err(());
        }
        let outcome = self.persist(&mut txn, &mutations, forced).and_then(|durable_in_redb| {
            txn.commit().map_err(|err| {
                tracing::error!("commit: {err}");
                ErrorCode::Io
            })?;
            Ok(durable_in_redb)
        });
        match outcome {
            Ok(durable_in_redb) => {
                if durable_in_redb {
                    if let Persistence::Logged(wal) = &mut self.persistence {
                        if wal.reset().is_err() {
                            results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(ErrorCode::Io))));
                            return Err(());
                        }
                    }
                    self.dirty = false;
                    self.last_durable = Instant::now();
                } else if !mutations.is_empty() {
                    self.dirty = true;
                }
                results.into_iter().for_each(|(reply, result)| drop(reply.send(result)));
                Ok(())
            }
            Err(_) => {
                self.ids = IdAllocator::new();
                results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(ErrorCode::Io))));
                Err(())
            }
        }
    }

    /// Makes the batch durable before its transaction commits: through the
    /// log, or by committing redb durably (a checkpoint). Returns whether
    /// the commit will be durable in redb itself.
    fn persist(&mut self, txn: &mut redb::WriteTransaction, mutations: &[Mutation], forced: bool) -> WeftResult<bool> {
        let due = self.last_durable.elapsed() >= CHECKPOINT_INTERVAL;
        let durable_in_redb = match &mut self.persistence {
            Persistence::Lazy => forced || due,
            Persistence::Logged(wal) => {
                let payload = if mutations.is_empty() { Some(Vec::new()) } else { Wal::encode(mutations) };
                match payload {
                    Some(payload) if !(forced || due && self.dirty) && wal.has_room(payload.len() as u64) => {
                        if !payload.is_empty() {
                            wal.append(&payload)?;
                        }
                        false
                    }
                    _ => true,
                }
            }
        };
        let durability = if durable_in_redb { Durability::Immediate } else { Durability::None };
        txn.set_durability(durability).map_err(|_| ErrorCode::Io)?;
        Ok(durable_in_redb)
    }
}
