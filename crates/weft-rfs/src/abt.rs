//! Active buffering with threads (ABT, Lee et al. §3.6–3.7), stackable
//! over any [`Layer`].
//!
//! A write copies its data into equal-size buffers (`buffer_bytes`),
//! allocated on demand while the process's buffered bytes stay within
//! `max_bytes`, queues them with the access's description and returns at
//! once. One background thread per process drains the queue in order,
//! keeping a few writes in flight on the layer below (pipelined), and
//! frees each entry's buffers once its data has been handed to the layer.
//! When memory is full, the write goes at once to a local staging file
//! (foreground staging; `fsync`ed if asked), and the background thread
//! reads it back when it reaches the entry. The staging file is unlinked
//! as soon as it is created, so it disappears with the process whatever
//! happens; it is emptied whenever the queue drains. Without a staging
//! directory a write that does not fit waits for memory.
//!
//! Reads, size and set_size of a file wait until its buffered writes have
//! been performed. An error of deferred work is kept on the file and
//! returned by every later call on it (write, read, sync, close); with
//! deferred close, the error of a file already closed by the application
//! is returned by [`finalize`]. Nothing is dropped silently.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use weft_proto::ErrorCode;

use crate::layer::{Layer, Pending};
use crate::wire::{At, WireView};

/// Writes the background thread keeps in flight before waiting for the oldest.
const IN_FLIGHT_MAX: usize = 8;

/// ABT settings of a file (from hints).
#[derive(Clone, Debug)]
pub struct AbtConfig {
    /// Bytes of one buffer.
    pub buffer_bytes: usize,
    /// Most buffered bytes of the process (whole buffers).
    pub max_bytes: usize,
    /// Directory of the staging file; `None`: wait for memory instead.
    pub staging_dir: Option<PathBuf>,
    /// `fsync` staged data before the write returns.
    pub staging_fsync: bool,
    /// Close returns at once; the close happens after the buffered writes.
    pub defer_close: bool,
}

impl Default for AbtConfig {
    fn default() -> AbtConfig {
        AbtConfig {
            buffer_bytes: 1 << 20,
            max_bytes: 64 << 20,
            staging_dir: None,
            staging_fsync: false,
            defer_close: false,
        }
    }
}

/// Counters of this process's ABT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AbtStats {
    /// Bytes copied into memory buffers.
    pub buffered_bytes: u64,
    /// Bytes written to the staging file by the application's thread.
    pub staged_bytes: u64,
    /// Writes performed by the background thread.
    pub drained_writes: u64,
}

static BUFFERED: AtomicU64 = AtomicU64::new(0);
static STAGED: AtomicU64 = AtomicU64::new(0);
static DRAINED: AtomicU64 = AtomicU64::new(0);

/// This process's counters.
pub fn stats() -> AbtStats {
    AbtStats {
        buffered_bytes: BUFFERED.load(Ordering::Relaxed),
        staged_bytes: STAGED.load(Ordering::Relaxed),
        drained_writes: DRAINED.load(Ordering::Relaxed),
    }
}

enum Payload {
    Memory { buffers: Vec<Vec<u8>>, charged: usize },
    Staged { offset: u64, len: u64 },
}

enum Work {
    Write { view: Arc<WireView>, at: At, payload: Payload },
    Close,
}

struct Entry {
    file: Arc<FileState>,
    work: Work,
}

struct Staging {
    file: File,
    end: u64,
}

#[derive(Default)]
struct EngineState {
    queue: VecDeque<Entry>,
    /// Entries taken by the thread and not finished.
    busy: usize,
    memory_used: usize,
    staging: Option<Staging>,
    started: bool,
    /// Errors of files closed with deferred close.
    orphan_errors: Vec<ErrorCode>,
}

struct Engine {
    state: Mutex<EngineState>,
    /// The queue got work.
    work: Condvar,
    /// Memory was freed or an entry finished.
    progress: Condvar,
}

static ENGINE: Engine =
    Engine { state: Mutex::new(EngineState::new_const()), work: Condvar::new(), progress: Condvar::new() };

impl EngineState {
    const fn new_const() -> EngineState {
        EngineState {
            queue: VecDeque::new(),
            busy: 0,
            memory_used: 0,
            staging: None,
            started: false,
            orphan_errors: Vec::new(),
        }
    }
}

fn lock_engine() -> MutexGuard<'static, EngineState> {
    ENGINE.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct FileState {
    inner: Arc<dyn Layer>,
    /// Queued or in-flight entries of this file, and its first deferred error.
    pending: Mutex<(usize, Option<ErrorCode>)>,
    done: Condvar,
}

impl FileState {
    fn finish(&self, outcome: Result<(), ErrorCode>) {
        let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        pending.0 -= 1;
        if let Err(code) = outcome {
            pending.1.get_or_insert(code);
        }
        self.done.notify_all();
    }

    /// Waits for the file's queued work; its deferred error if any.
    fn drain(&self) -> Result<(), ErrorCode> {
        let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while pending.0 > 0 {
            pending = self.done.wait(pending).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        pending.1.map_or(Ok(()), Err)
    }

    fn error(&self) -> Result<(), ErrorCode> {
        let pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        pending.1.map_or(Ok(()), Err)
    }
}

/// A file with ABT over `inner`.
pub struct AbtFile {
    state: Arc<FileState>,
    config: AbtConfig,
}

impl AbtFile {
    /// ABT over `inner` with `config`.
    pub fn new(inner: Arc<dyn Layer>, config: AbtConfig) -> AbtFile {
        let config = AbtConfig {
            buffer_bytes: config.buffer_bytes.max(1),
            max_bytes: config.max_bytes.max(config.buffer_bytes.max(1)),
            ..config
        };
        AbtFile { state: Arc::new(FileState { inner, pending: Mutex::new((0, None)), done: Condvar::new() }), config }
    }

    fn enqueue(&self, mut engine: MutexGuard<'static, EngineState>, work: Work) -> Result<(), ErrorCode> {
        if !engine.started {
            std::thread::Builder::new().name("weft-abt".into()).spawn(background).map_err(|_| ErrorCode::Io)?;
            engine.started = true;
        }
        self.state.pending.lock().map_err(|_| ErrorCode::Io)?.0 += 1;
        engine.queue.push_back(Entry { file: self.state.clone(), work });
        ENGINE.work.notify_all();
        Ok(())
    }

    /// Writes `parts` to the staging file; the entry's payload.
    fn stage(&self, engine: &mut EngineState, parts: &[&[u8]], total: u64) -> Result<Payload, ErrorCode> {
        let dir = self.config.staging_dir.as_ref().ok_or(ErrorCode::Io)?;
        if engine.staging.is_none() {
            let path = dir.join(format!("weft-abt-{}-{}", std::process::id(), rand_suffix()));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|_| ErrorCode::Io)?;
            // Gone from the directory at once; the space is freed when the
            // process ends, however it ends.
            let _ = std::fs::remove_file(&path);
            engine.staging = Some(Staging { file, end: 0 });
        }
        let staging = engine.staging.as_mut().ok_or(ErrorCode::Io)?;
        let offset = staging.end;
        let mut at = offset;
        for part in parts {
            staging.file.write_all_at(part, at).map_err(|_| ErrorCode::Io)?;
            at += part.len() as u64;
        }
        if self.config.staging_fsync {
            staging.file.sync_data().map_err(|_| ErrorCode::Io)?;
        }
        staging.end = at;
        STAGED.fetch_add(total, Ordering::Relaxed);
        Ok(Payload::Staged { offset, len: total })
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
    );
    hasher.finish()
}

impl Layer for AbtFile {
    fn write(&self, view: &Arc<WireView>, at: &At, parts: &[&[u8]]) -> Result<Pending, ErrorCode> {
        self.state.error()?;
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if total == 0 {
            return Ok(Pending::Done);
        }
        let size = self.config.buffer_bytes;
        let charged = (total as usize).div_ceil(size) * size;
        let mut engine = lock_engine();
        loop {
            if engine.memory_used + charged <= self.config.max_bytes {
                engine.memory_used += charged;
                break;
            }
            if self.config.staging_dir.is_some() || charged > self.config.max_bytes {
                // Memory is full (or the access is larger than all of it):
                // stage now rather than wait for the remote side.
                if self.config.staging_dir.is_none() {
                    drop(engine);
                    self.state.drain()?;
                    self.state.inner.write(view, at, parts)?.wait()?;
                    return Ok(Pending::Done);
                }
                let payload = self.stage(&mut engine, parts, total)?;
                self.enqueue(engine, Work::Write { view: view.clone(), at: at.clone(), payload })?;
                return Ok(Pending::Done);
            }
            engine = ENGINE.progress.wait(engine).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        drop(engine);
        // Copy outside the lock, into buffers allocated now.
        let mut buffers: Vec<Vec<u8>> = Vec::with_capacity(charged / size);
        for part in parts {
            let mut rest: &[u8] = part;
            while !rest.is_empty() {
                let full = match buffers.last() {
                    Some(buffer) => buffer.len() == size,
                    None => true,
                };
                if full {
                    buffers.push(Vec::with_capacity(size));
                }
                let buffer = buffers.last_mut().expect("just pushed");
                let n = (size - buffer.len()).min(rest.len());
                buffer.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
        }
        BUFFERED.fetch_add(total, Ordering::Relaxed);
        let payload = Payload::Memory { buffers, charged };
        self.enqueue(lock_engine(), Work::Write { view: view.clone(), at: at.clone(), payload })?;
        Ok(Pending::Done)
    }

    fn read(&self, view: &Arc<WireView>, at: &At, len: u64) -> Result<Vec<u8>, ErrorCode> {
        self.state.drain()?;
        self.state.inner.read(view, at, len)
    }

    fn size(&self) -> Result<u64, ErrorCode> {
        self.state.drain()?;
        self.state.inner.size()
    }

    fn set_size(&self, size: u64) -> Result<(), ErrorCode> {
        self.state.drain()?;
        self.state.inner.set_size(size)
    }

    fn sync(&self) -> Result<(), ErrorCode> {
        self.state.drain()?;
        self.state.inner.sync()
    }

    fn flush(&self) -> Result<(), ErrorCode> {
        self.state.drain()
    }

    fn close(&self) -> Result<(), ErrorCode> {
        if self.config.defer_close {
            self.state.error()?;
            return self.enqueue(lock_engine(), Work::Close);
        }
        let drained = self.state.drain();
        let closed = self.state.inner.close();
        drained.and(closed)
    }
}

/// Waits for all buffered work of the process (every file, deferred
/// closes included); the first error no call has reported yet.
pub fn finalize() -> Result<(), ErrorCode> {
    let mut engine = lock_engine();
    while !engine.queue.is_empty() || engine.busy > 0 {
        engine = ENGINE.progress.wait(engine).unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    engine.staging = None;
    match engine.orphan_errors.first() {
        Some(code) => Err(*code),
        None => Ok(()),
    }
}

/// The data of an entry, read back from staging if needed.
fn load(payload: Payload) -> Result<(Vec<Vec<u8>>, usize), ErrorCode> {
    match payload {
        Payload::Memory { buffers, charged } => Ok((buffers, charged)),
        Payload::Staged { offset, len } => {
            let engine = lock_engine();
            let staging = engine.staging.as_ref().ok_or(ErrorCode::Io)?;
            let mut data = vec![0u8; len as usize];
            staging.file.read_exact_at(&mut data, offset).map_err(|_| ErrorCode::Io)?;
            Ok((vec![data], 0))
        }
    }
}

/// The background thread: drains the queue in order.
fn background() {
    let mut in_flight: VecDeque<(Arc<FileState>, Pending)> = VecDeque::new();
    loop {
        let entry = {
            let mut engine = lock_engine();
            loop {
                if let Some(entry) = engine.queue.pop_front() {
                    engine.busy += 1;
                    break Some(entry);
                }
                if !in_flight.is_empty() {
                    break None;
                }
                if engine.busy == 0 {
                    // Idle: the staging file's contents are all consumed.
                    if let Some(staging) = engine.staging.as_mut() {
                        if staging.end > 0 && staging.file.set_len(0).is_ok() {
                            staging.end = 0;
                        }
                    }
                }
                engine = ENGINE.work.wait(engine).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        let Some(entry) = entry else {
            // Nothing queued: settle what is in flight.
            while let Some((file, pending)) = in_flight.pop_front() {
                settle(&file, pending);
            }
            continue;
        };
        match entry.work {
            Work::Write { view, at, payload } => {
                let outcome = load(payload).and_then(|(buffers, charged)| {
                    let parts: Vec<&[u8]> = buffers.iter().map(|b| b.as_slice()).collect();
                    let sent = entry.file.inner.write(&view, &at, &parts);
                    drop(parts);
                    drop(buffers);
                    release(charged);
                    sent
                });
                DRAINED.fetch_add(1, Ordering::Relaxed);
                match outcome {
                    Ok(pending) => in_flight.push_back((entry.file, pending)),
                    Err(code) => settle_with(&entry.file, Err(code)),
                }
                while in_flight.len() > IN_FLIGHT_MAX {
                    if let Some((file, pending)) = in_flight.pop_front() {
                        settle(&file, pending);
                    }
                }
            }
            Work::Close => {
                while let Some((file, pending)) = in_flight.pop_front() {
                    settle(&file, pending);
                }
                let earlier = entry.file.error();
                let closed = entry.file.inner.close();
                let outcome = earlier.and(closed);
                if let Err(code) = outcome {
                    lock_engine().orphan_errors.push(code);
                }
                settle_with(&entry.file, outcome);
            }
        }
    }
}

fn release(charged: usize) {
    let mut engine = lock_engine();
    engine.memory_used -= charged;
    ENGINE.progress.notify_all();
}

fn settle(file: &Arc<FileState>, pending: Pending) {
    settle_with(file, pending.wait());
}

fn settle_with(file: &Arc<FileState>, outcome: Result<(), ErrorCode>) {
    file.finish(outcome);
    let mut engine = lock_engine();
    engine.busy -= 1;
    ENGINE.progress.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Records writes; fails them while `fail` is set.
    #[derive(Default)]
    struct Sink {
        data: Mutex<Vec<u8>>,
        fail: AtomicBool,
    }

    impl Layer for Sink {
        fn write(&self, _: &Arc<WireView>, _: &At, parts: &[&[u8]]) -> Result<Pending, ErrorCode> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(ErrorCode::NoSpace);
            }
            let mut data = self.data.lock().unwrap();
            for part in parts {
                data.extend_from_slice(part);
            }
            Ok(Pending::Done)
        }
        fn read(&self, _: &Arc<WireView>, _: &At, _: u64) -> Result<Vec<u8>, ErrorCode> {
            Ok(self.data.lock().unwrap().clone())
        }
        fn size(&self) -> Result<u64, ErrorCode> {
            Ok(self.data.lock().unwrap().len() as u64)
        }
        fn set_size(&self, _: u64) -> Result<(), ErrorCode> {
            Ok(())
        }
        fn sync(&self) -> Result<(), ErrorCode> {
            Ok(())
        }
        fn close(&self) -> Result<(), ErrorCode> {
            Ok(())
        }
    }

    fn view() -> Arc<WireView> {
        Arc::new(WireView { displacement: 0, etype_bytes: 1, file_type: Vec::new() })
    }

    #[test]
    fn buffered_and_staged_writes_arrive_in_order_and_errors_stick() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(Sink::default());
        let config = AbtConfig {
            buffer_bytes: 4,
            max_bytes: 8,
            staging_dir: Some(dir.path().to_path_buf()),
            staging_fsync: true,
            defer_close: false,
        };
        let file = AbtFile::new(sink.clone(), config);
        let at = At::Stream { view_offset: 0 };
        let mut expected = Vec::new();
        for round in 0u8..50 {
            let data: Vec<u8> = (0..7).map(|i| round.wrapping_mul(7).wrapping_add(i)).collect();
            file.write(&view(), &at, &[&data[..3], &data[3..]]).unwrap();
            expected.extend_from_slice(&data);
        }
        assert_eq!(file.read(&view(), &at, 0).unwrap(), expected);
        // The staging file was unlinked at creation.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        sink.fail.store(true, Ordering::SeqCst);
        file.write(&view(), &at, &[b"x"]).unwrap();
        assert_eq!(file.sync(), Err(ErrorCode::NoSpace));
        assert_eq!(file.write(&view(), &at, &[b"y"]).err(), Some(ErrorCode::NoSpace));
        assert_eq!(file.close(), Err(ErrorCode::NoSpace));
    }
}
