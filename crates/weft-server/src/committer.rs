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

/// Object ids reserved per block.
pub const OBJECT_ID_BLOCK: u64 = 4096;

/// In `metadata_sync = none` mode, the longest time between durable commits.
const LAZY_DURABLE_INTERVAL: Duration = Duration::from_secs(2);

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
    /// Starts the committer thread.
    pub fn start(store: Arc<Store>, durable: bool, batch_max: u32) -> std::io::Result<Committer> {
        let (queue, receiver) = mpsc::channel(8192);
        std::thread::Builder::new()
            .name("weft-committer".into())
            .spawn(move || run(store, receiver, durable, batch_max.max(1) as usize))?;
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

fn run(store: Arc<Store>, mut receiver: mpsc::Receiver<Job>, durable: bool, batch_max: usize) {
    let mut ids = IdAllocator::new();
    let mut failed = false;
    let mut last_durable = Instant::now();
    let mut dirty = false;
    loop {
        let first = if dirty {
            match receiver.try_recv() {
                Ok(job) => Some(job),
                Err(mpsc::error::TryRecvError::Empty) => {
                    // Lazy mode: make earlier commits durable while idle.
                    if commit_empty(&store).is_ok() {
                        dirty = false;
                        last_durable = Instant::now();
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
        if failed {
            batch.into_iter().for_each(|job| drop(job.reply.send(Err(ErrorCode::Io))));
            continue;
        }
        let forced = batch.iter().any(|job| job.force_durable);
        let make_durable = durable || forced || last_durable.elapsed() >= LAZY_DURABLE_INTERVAL;
        match apply_batch(&store, &mut ids, batch, make_durable) {
            Ok(()) if make_durable => {
                last_durable = Instant::now();
                dirty = false;
            }
            Ok(()) => dirty = true,
            Err(()) => {
                failed = true;
                tracing::error!("metadata commit failed; refusing further namespace changes until restart");
            }
        }
    }
    if dirty {
        let _ = commit_empty(&store);
    }
}

fn commit_empty(store: &Store) -> WeftResult<()> {
    let mut txn = store.begin_write()?;
    txn.set_durability(Durability::Immediate).map_err(|_| ErrorCode::Io)?;
    txn.commit().map_err(|_| ErrorCode::Io)
}

fn apply_batch(store: &Store, ids: &mut IdAllocator, batch: Vec<Job>, durable: bool) -> Result<(), ()> {
    let mut txn = match store.begin_write() {
        Ok(txn) => txn,
        Err(code) => {
            batch.into_iter().for_each(|job| drop(job.reply.send(Err(code))));
            return Err(());
        }
    };
    let durability = if durable { Durability::Immediate } else { Durability::None };
    if txn.set_durability(durability).is_err() {
        batch.into_iter().for_each(|job| drop(job.reply.send(Err(ErrorCode::Io))));
        return Err(());
    }
    let mut results = Vec::with_capacity(batch.len());
    {
        let writer = Writer::new(&txn);
        for job in batch {
            let result = (job.operation)(&writer, ids);
            results.push((job.reply, result));
        }
    }
    match txn.commit() {
        Ok(()) => {
            results.into_iter().for_each(|(reply, result)| drop(reply.send(result)));
            Ok(())
        }
        Err(err) => {
            tracing::error!("commit: {err}");
            *ids = IdAllocator::new();
            results.into_iter().for_each(|(reply, _)| drop(reply.send(Err(ErrorCode::Io))));
            Err(())
        }
    }
}
