//! The metadata write-ahead log: what makes a group commit durable cheaply.
//!
//! A durable redb commit writes every dirty B-tree page and fsyncs (measured
//! here: about 400 µs of CPU each). Instead, the committer records the
//! key/value mutations of a batch, appends them to this log with one
//! `fdatasync`, and commits redb *without* fsync. Every so often (by size
//! or time, and at shutdown) a checkpoint makes redb durable and empties
//! the log. After a crash, redb comes back at its last durable commit and
//! the log's records are replayed in order; mutations are idempotent puts
//! and deletes, so replaying one that redb already has is harmless.
//!
//! File layout (`STORAGE/meta.wal`, allocated whole with `fallocate` — half
//! of the metadata reserve, [`crate::reserve`] — so appends neither change
//! the file size, which would make every `fdatasync` a journal commit, nor
//! need a free block on a full disk):
//!
//! ```text
//! header  (16 bytes): magic "WEFTWAL1", generation u64
//! record: length u32 (payload bytes, 0 = end), generation u64,
//!         crc32 u32 (of generation and payload), payload (postcard Vec<Mutation>)
//! ```
//!
//! A checkpoint bumps the generation in the header, so records left over
//! from before it (stale bytes further on in the file) are never replayed.
//! Replay stops at the first record that is empty, of another generation,
//! or fails its checksum (a torn append at the moment of a crash). A batch
//! whose store commit fails after its append is taken back
//! ([`Wal::retract`]: its length is zeroed), so a replay never applies a
//! batch that was answered with an error.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use weft_proto::{ErrorCode, WeftResult};

const MAGIC: &[u8; 8] = b"WEFTWAL1";
const HEADER_BYTES: u64 = 16;
const RECORD_HEADER_BYTES: u64 = 16;
/// Largest record (one batch); bigger batches are checkpointed instead.
pub const RECORD_BYTES_MAX: u64 = 16 << 20;

/// One key/value change, as applied by [`crate::store::Writer`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Mutation {
    /// `objects[handle] = record`.
    PutObject(u64, Vec<u8>),
    /// Delete `objects[handle]`.
    DeleteObject(u64),
    /// Insert a directory entry and its readdir-order row.
    InsertDirent {
        /// Directory.
        dir: u64,
        /// Name.
        name: String,
        /// Insertion sequence.
        sequence: u64,
        /// Target handle.
        target: u64,
        /// Kind tag.
        kind: u8,
    },
    /// Delete a directory entry and its readdir-order row.
    DeleteDirent {
        /// Directory.
        dir: u64,
        /// Name.
        name: String,
        /// Insertion sequence.
        sequence: u64,
    },
    /// `counters[name] = value`.
    SetCounter(String, u64),
    /// Insert (`Some(value)`) or delete (`None`) a row of one of the
    /// handle-keyed bookkeeping tables ([`crate::store::HandleTable`]).
    HandleRow {
        /// Table tag ([`crate::store::HandleTable::tag`]).
        table: u8,
        /// Handle (key).
        handle: u64,
        /// Server id (value), or deletion.
        value: Option<u32>,
    },
}

fn io_error(err: std::io::Error) -> ErrorCode {
    tracing::error!("write-ahead log: {err}");
    ErrorCode::from_io(&err)
}

/// The file under the log: a real file, or a simulated one in the crash
/// tests ([`crate::crashsim`]).
pub trait LogFile: Send {
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// Writes all of `data` at `offset`.
    fn write_from(&self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// Makes the written bytes durable.
    fn sync(&self) -> std::io::Result<()>;
    /// The file's length.
    fn length(&self) -> std::io::Result<u64>;
    /// Gives the file real blocks (and length) for `0..size`.
    fn allocate(&self, size: u64) -> std::io::Result<()>;
}

impl LogFile for File {
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read_exact_at(buf, offset)
    }

    fn write_from(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.write_all_at(data, offset)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.sync_data()
    }

    fn length(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn allocate(&self, size: u64) -> std::io::Result<()> {
        crate::reserve::allocate(self, 0, size, false)
    }
}

/// The open log.
pub struct Wal {
    file: Box<dyn LogFile>,
    generation: u64,
    tail: u64,
    /// The file's allocated size; a checkpoint happens before the log would outgrow it.
    size_bytes: u64,
}

impl Wal {
    /// Opens (creating and allocating `size_bytes` of real blocks if
    /// needed) and returns the log with the batches to replay, in order. A
    /// log that is already larger keeps its size.
    pub fn open(dir: &Path, size_bytes: u64) -> WeftResult<(Wal, Vec<Vec<Mutation>>)> {
        let path = dir.join("meta.wal");
        let existed = path.exists();
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_error)?;
        let opened = Wal::open_file(Box::new(file), size_bytes)?;
        if !existed {
            // The new name is durable only once its directory is.
            crate::durable::sync_dir(dir).map_err(io_error)?;
        }
        Ok(opened)
    }

    /// [`Wal::open`] on an already open file.
    pub fn open_file(file: Box<dyn LogFile>, size_bytes: u64) -> WeftResult<(Wal, Vec<Vec<Mutation>>)> {
        let length = file.length().map_err(io_error)?;
        let size_bytes = size_bytes.max(length);
        // Also fills the holes of a log from before the reserve (sparse set_len).
        file.allocate(size_bytes).map_err(io_error)?;
        let mut header = [0u8; HEADER_BYTES as usize];
        let generation = match file.read_into(0, &mut header) {
            Ok(()) if &header[..8] == MAGIC => u64::from_le_bytes(header[8..16].try_into().expect("8 bytes")),
            Ok(()) | Err(_) => 0,
        };
        let mut wal = Wal { file, generation, tail: HEADER_BYTES, size_bytes };
        if generation == 0 {
            wal.write_header(1)?;
            return Ok((wal, Vec::new()));
        }
        let batches = wal.read_records()?;
        Ok((wal, batches))
    }

    fn write_header(&mut self, generation: u64) -> WeftResult<()> {
        let mut header = [0u8; HEADER_BYTES as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..].copy_from_slice(&generation.to_le_bytes());
        self.file.write_from(0, &header).map_err(io_error)?;
        self.file.sync().map_err(io_error)?;
        self.generation = generation;
        self.tail = HEADER_BYTES;
        Ok(())
    }

    /// Reads the valid records of the current generation and positions the
    /// tail after them (at open, and to recover after a failed commit).
    pub fn read_records(&mut self) -> WeftResult<Vec<Vec<Mutation>>> {
        let mut batches = Vec::new();
        let mut at = HEADER_BYTES;
        loop {
            let mut head = [0u8; RECORD_HEADER_BYTES as usize];
            match self.file.read_into(at, &mut head) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::UnexpectedEof => break,
                Err(err) => return Err(io_error(err)),
            }
            let length = u32::from_le_bytes(head[0..4].try_into().expect("4")) as u64;
            let generation = u64::from_le_bytes(head[4..12].try_into().expect("8"));
            let checksum = u32::from_le_bytes(head[12..16].try_into().expect("4"));
            let end = at + RECORD_HEADER_BYTES + length;
            if length == 0 || generation != self.generation || length > RECORD_BYTES_MAX || end > self.size_bytes {
                break;
            }
            let mut payload = vec![0u8; length as usize];
            if self.file.read_into(at + RECORD_HEADER_BYTES, &mut payload).is_err() {
                break;
            }
            if checksum != record_checksum(generation, &payload) {
                break;
            }
            match postcard::from_bytes::<Vec<Mutation>>(&payload) {
                Ok(batch) => batches.push(batch),
                Err(_) => break,
            }
            at = end;
        }
        self.tail = at;
        Ok(batches)
    }

    /// Whether a batch of `bytes` still fits before a checkpoint is due.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.tail + RECORD_HEADER_BYTES + bytes + RECORD_HEADER_BYTES <= self.size_bytes && bytes <= RECORD_BYTES_MAX
    }

    /// Bytes of records since the last checkpoint.
    pub fn used_bytes(&self) -> u64 {
        self.tail - HEADER_BYTES
    }

    /// Encodes a batch; `None` if it is too large for one record.
    pub fn encode(batch: &[Mutation]) -> Option<Vec<u8>> {
        let payload = postcard::to_allocvec(batch).ok()?;
        (payload.len() as u64 <= RECORD_BYTES_MAX).then_some(payload)
    }

    /// Appends one encoded batch and makes it durable. Returns where the
    /// record starts (for [`Wal::retract`]).
    pub fn append(&mut self, payload: &[u8]) -> WeftResult<u64> {
        let start = self.tail;
        let mut record =
            Vec::with_capacity(RECORD_HEADER_BYTES as usize + payload.len() + RECORD_HEADER_BYTES as usize);
        record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        record.extend_from_slice(&self.generation.to_le_bytes());
        record.extend_from_slice(&record_checksum(self.generation, payload).to_le_bytes());
        record.extend_from_slice(payload);
        // A zero length after the record marks the end even over stale bytes.
        record.extend_from_slice(&[0u8; RECORD_HEADER_BYTES as usize]);
        self.file.write_from(self.tail, &record).map_err(io_error)?;
        self.file.sync().map_err(io_error)?;
        self.tail += RECORD_HEADER_BYTES + payload.len() as u64;
        Ok(start)
    }

    /// Takes back the last record, which starts at `start`: its length is
    /// zeroed (the end mark), durably.
    pub fn retract(&mut self, start: u64) -> WeftResult<()> {
        self.file.write_from(start, &[0u8; RECORD_HEADER_BYTES as usize]).map_err(io_error)?;
        self.file.sync().map_err(io_error)?;
        self.tail = start;
        Ok(())
    }

    /// Empties the log; call only after redb has made everything durable.
    pub fn reset(&mut self) -> WeftResult<()> {
        self.write_header(self.generation + 1)
    }
}

fn record_checksum(generation: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&generation.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: u64) -> Vec<Mutation> {
        vec![Mutation::PutObject(n, vec![n as u8; 10]), Mutation::SetCounter("c".into(), n)]
    }

    #[test]
    fn records_survive_reopen_until_reset() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert!(replay.is_empty());
        assert_eq!(crate::durable::synced_count(dir.path()), 1, "the new log's name is made durable");
        for n in 0..5 {
            wal.append(&Wal::encode(&batch(n)).unwrap()).unwrap();
        }
        drop(wal);
        let (mut wal, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay, (0..5).map(batch).collect::<Vec<_>>());
        wal.append(&Wal::encode(&batch(9)).unwrap()).unwrap();
        drop(wal);
        let (mut wal, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay.len(), 6);
        wal.reset().unwrap();
        wal.append(&Wal::encode(&batch(1)).unwrap()).unwrap();
        drop(wal);
        // Stale records of the old generation further on are not replayed.
        let (_, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay, vec![batch(1)]);
    }

    #[test]
    fn a_retracted_record_is_not_replayed_and_the_log_is_allocated() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 1 << 20).unwrap();
        let meta = std::fs::metadata(dir.path().join("meta.wal")).unwrap();
        assert!(meta.blocks() * 512 >= 1 << 20, "real blocks, not a sparse length: {}", meta.blocks());
        wal.append(&Wal::encode(&batch(1)).unwrap()).unwrap();
        let start = wal.append(&Wal::encode(&batch(2)).unwrap()).unwrap();
        wal.retract(start).unwrap();
        wal.append(&Wal::encode(&batch(3)).unwrap()).unwrap();
        drop(wal);
        let (_, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay, vec![batch(1), batch(3)]);
    }

    #[test]
    fn torn_record_ends_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 1 << 20).unwrap();
        wal.append(&Wal::encode(&batch(1)).unwrap()).unwrap();
        let torn_at = wal.tail;
        wal.append(&Wal::encode(&batch(2)).unwrap()).unwrap();
        drop(wal);
        // Corrupt one payload byte of the second record.
        let file = OpenOptions::new().write(true).open(dir.path().join("meta.wal")).unwrap();
        file.write_all_at(&[0xff], torn_at + RECORD_HEADER_BYTES + 2).unwrap();
        let (wal, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay, vec![batch(1)]);
        assert_eq!(wal.tail, torn_at);
    }
}
