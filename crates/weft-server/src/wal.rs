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
//! header  (16 bytes): magic "WEFTWAL", format version (one ASCII digit, '1'),
//!                    generation u64
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
//!
//! A log whose header names another format version, or that is not a Weft
//! log at all, is refused at open (never overwritten): see
//! [`decode_header`] and docs/FORMAT.md. [`decode_image`] is the whole
//! replay decoder as a pure function over the log's bytes (the fuzz target
//! and tests use it; [`Wal::open`] applies the same checks record by record).

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use weft_proto::{ErrorCode, WeftResult};

/// The first seven bytes of a log's header.
const MAGIC: &[u8; 7] = b"WEFTWAL";
/// The log format this build writes and reads (the header's eighth byte, as an ASCII digit).
pub const FORMAT_VERSION: u8 = 1;
/// Bytes of the log's header.
pub const HEADER_BYTES: u64 = 16;
/// Bytes of a record's header.
pub const RECORD_HEADER_BYTES: u64 = 16;
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
        file.read_into(0, &mut header).map_err(io_error)?;
        let generation = decode_header(&header).map_err(|message| {
            tracing::error!("storage format: meta.wal: {message}");
            ErrorCode::VersionMismatch
        })?;
        let mut wal = Wal { file, generation: generation.unwrap_or(0), tail: HEADER_BYTES, size_bytes };
        if generation.is_none() {
            wal.write_header(1)?;
            return Ok((wal, Vec::new()));
        }
        let batches = wal.read_records()?;
        Ok((wal, batches))
    }

    fn write_header(&mut self, generation: u64) -> WeftResult<()> {
        self.file.write_from(0, &encode_header(generation)).map_err(io_error)?;
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
            let Some((length, checksum)) = decode_record_header(&head, self.generation, at, self.size_bytes) else {
                break;
            };
            let mut payload = vec![0u8; length as usize];
            if self.file.read_into(at + RECORD_HEADER_BYTES, &mut payload).is_err() {
                break;
            }
            let Some(batch) = decode_payload(self.generation, checksum, &payload) else {
                break;
            };
            batches.push(batch);
            at += RECORD_HEADER_BYTES + length;
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
        let mut record = encode_record(self.generation, payload);
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

/// The header of a log of `generation` in this build's format.
pub fn encode_header(generation: u64) -> [u8; HEADER_BYTES as usize] {
    let mut header = [0u8; HEADER_BYTES as usize];
    header[..7].copy_from_slice(MAGIC);
    header[7] = b'0' + FORMAT_VERSION;
    header[8..].copy_from_slice(&generation.to_le_bytes());
    header
}

/// One record of a log of `generation`: its header, then `payload`.
pub fn encode_record(generation: u64, payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES as usize + payload.len() + RECORD_HEADER_BYTES as usize);
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&generation.to_le_bytes());
    record.extend_from_slice(&record_checksum(generation, payload).to_le_bytes());
    record.extend_from_slice(payload);
    record
}

/// Reads a log's header: `Ok(None)` for a fresh (all-zero) log,
/// `Ok(Some(generation))` for a log of this build's format, and an
/// explanation for anything else (another format version, or not a log),
/// which the server refuses rather than overwrite.
pub fn decode_header(header: &[u8; HEADER_BYTES as usize]) -> Result<Option<u64>, String> {
    if header.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    if &header[..7] != MAGIC {
        return Err(format!("not a Weft metadata log (header starts {:02x?})", &header[..8]));
    }
    let version = header[7];
    if version != b'0' + FORMAT_VERSION {
        let shown =
            if version.is_ascii_digit() { (version - b'0').to_string() } else { format!("byte {version:#04x}") };
        return Err(format!(
            "metadata log format version {shown} is not known to this build (it reads version {FORMAT_VERSION}); \
             see docs/FORMAT.md, Upgrades"
        ));
    }
    let generation = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if generation == 0 {
        return Err("metadata log header has generation 0".into());
    }
    Ok(Some(generation))
}

/// Checks a record header found at `at` in a log of `generation` allocated
/// to `size_bytes`: the payload length and checksum of a record that may
/// be replayed, or `None` where replay stops (end mark, another
/// generation, oversized, past the end).
pub fn decode_record_header(
    head: &[u8; RECORD_HEADER_BYTES as usize],
    generation: u64,
    at: u64,
    size_bytes: u64,
) -> Option<(u64, u32)> {
    let length = u32::from_le_bytes(head[0..4].try_into().expect("4")) as u64;
    let record_generation = u64::from_le_bytes(head[4..12].try_into().expect("8"));
    let checksum = u32::from_le_bytes(head[12..16].try_into().expect("4"));
    let end = at.checked_add(RECORD_HEADER_BYTES + length)?;
    if length == 0 || record_generation != generation || length > RECORD_BYTES_MAX || end > size_bytes {
        return None;
    }
    Some((length, checksum))
}

/// Decodes a record's payload if its checksum holds; `None` ends replay.
pub fn decode_payload(generation: u64, checksum: u32, payload: &[u8]) -> Option<Vec<Mutation>> {
    if checksum != record_checksum(generation, payload) {
        return None;
    }
    postcard::from_bytes::<Vec<Mutation>>(payload).ok()
}

/// The replay decoder over a whole log image, as [`Wal::open`] reads the
/// file: the batches to replay and where the next append goes, or why the
/// log is refused. Pure; never panics.
pub fn decode_image(image: &[u8]) -> Result<(Vec<Vec<Mutation>>, u64), String> {
    let Some(header) = image.get(..HEADER_BYTES as usize) else {
        return Ok((Vec::new(), HEADER_BYTES));
    };
    let Some(generation) = decode_header(header.try_into().expect("16 bytes"))? else {
        return Ok((Vec::new(), HEADER_BYTES));
    };
    let size_bytes = image.len() as u64;
    let mut batches = Vec::new();
    let mut at = HEADER_BYTES;
    while let Some(head) = image.get(at as usize..(at + RECORD_HEADER_BYTES) as usize) {
        let Some((length, checksum)) = decode_record_header(head.try_into().expect("16"), generation, at, size_bytes)
        else {
            break;
        };
        let start = (at + RECORD_HEADER_BYTES) as usize;
        let Some(batch) = decode_payload(generation, checksum, &image[start..start + length as usize]) else {
            break;
        };
        batches.push(batch);
        at += RECORD_HEADER_BYTES + length;
    }
    Ok((batches, at))
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

    #[test]
    fn a_log_of_another_format_version_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 1 << 20).unwrap();
        wal.append(&Wal::encode(&batch(1)).unwrap()).unwrap();
        drop(wal);
        let path = dir.path().join("meta.wal");
        let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        file.write_all_at(b"2", 7).unwrap();
        assert_eq!(Wal::open(dir.path(), 1 << 20).err(), Some(ErrorCode::VersionMismatch));
        let mut header = [0u8; HEADER_BYTES as usize];
        file.read_exact_at(&mut header, 0).unwrap();
        let message = decode_header(&header).unwrap_err();
        assert!(message.contains("format version 2 is not known to this build (it reads version 1)"), "{message}");
        // Untouched: putting the version back makes the log readable again.
        file.write_all_at(b"1", 7).unwrap();
        let (_, replay) = Wal::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(replay, vec![batch(1)]);
        // Something that is not a log at all is refused too.
        file.write_all_at(b"NOTALOG!", 0).unwrap();
        assert_eq!(Wal::open(dir.path(), 1 << 20).err(), Some(ErrorCode::VersionMismatch));
        file.read_exact_at(&mut header, 0).unwrap();
        assert!(decode_header(&header).unwrap_err().contains("not a Weft metadata log"));
    }

    #[test]
    fn the_pure_decoder_replays_what_open_replays() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 1 << 16).unwrap();
        for n in 0..3 {
            wal.append(&Wal::encode(&batch(n)).unwrap()).unwrap();
        }
        let tail = wal.tail;
        drop(wal);
        let image = std::fs::read(dir.path().join("meta.wal")).unwrap();
        assert_eq!(decode_image(&image).unwrap(), ((0..3).map(batch).collect::<Vec<_>>(), tail));
        assert_eq!(decode_image(&[]).unwrap(), (Vec::new(), HEADER_BYTES));
        assert_eq!(decode_image(&image[..tail as usize - 1]).unwrap().0.len(), 2, "a cut record ends replay");
    }
}
