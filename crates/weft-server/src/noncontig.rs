//! Noncontiguous I/O served in one request per server: list I/O and
//! datatype I/O.
//!
//! Both kinds reduce to a *piece source*: a resumable walk yielding, in the
//! order of the request's packed data stream, `(datafile offset, length)`
//! pieces of this server's datafile.
//! - **List I/O** (`ReadList`/`WriteList`): the pieces are the request's
//!   region list (at most `LIST_REGIONS_MAX`, already local to the datafile).
//! - **Datatype I/O** (`ReadDatatype`/`WriteDatatype`): the server decodes
//!   the file type (`weft_dataloop::Dataloop::decode`, which bounds nodes,
//!   depth and entries), positions a `Cursor` at `stream_start`, stops it at
//!   `stream_start + stream_length`, and wraps it in a `StripeCursor` for
//!   its own stripe index. The walk computes only this server's pieces; for
//!   vectors it jumps over other servers' strips arithmetically. Nothing is
//!   expanded into a list beyond one batch.
//!
//! Data moves as the per-server **packed stream**: this server's bytes in
//! stream order. Reads send `Data` frames whose `aux` is the offset in that
//! packed stream; writes receive such frames, strictly in order (`aux` must
//! equal the bytes already stored), and the server walks its piece source in
//! lockstep to learn where each byte goes. The client runs the same walk to
//! gather and scatter, so no offsets travel besides the description.
//!
//! CPU per request is bounded too: a datatype walk takes at most
//! `limits::DATATYPE_WALK_REGIONS_MAX` regions from the dataloop, else the
//! request fails with `TooBig` (the client splits longer accesses).
//!
//! Memory per request is bounded: one batch of at most
//! [`PIECES_PER_BATCH_MAX`] pieces and `CHUNK_BYTES_MAX` data bytes, plus a
//! sieve window (see [`crate::sieve`]), plus the write window of chunks.

use std::sync::Arc;

use weft_dataloop::{BatchLimits, Cursor, Dataloop, StripeCursor, StripeFilter, StripePiece};
use weft_proto::limits::{self, CHUNK_BYTES_MAX};
use weft_proto::message::{DatatypeAccess, Reply, ReplyResult};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::contiguous::local_size_of;
use crate::link::Link;
use crate::metadata::Metadata;
use crate::sieve::{self, Piece};
use crate::storage::Storage;

/// Most pieces handled in one batch (bounds per-request piece memory to
/// 1.5 MiB at 24 bytes a piece).
pub const PIECES_PER_BATCH_MAX: usize = 65_536;

/// A walk over a request's pieces in packed-stream order.
trait PieceSource {
    /// Appends the next pieces (at most `bytes_max` bytes and
    /// [`PIECES_PER_BATCH_MAX`] pieces), packed offsets counted from 0;
    /// returns the bytes appended (0 once done).
    fn next_pieces(&mut self, bytes_max: u64, out: &mut Vec<Piece>) -> u64;

    /// Why the walk returned 0: `TooBig` if it stopped at the region budget
    /// (`limits::DATATYPE_WALK_REGIONS_MAX`), else `otherwise`.
    fn stopped(&self, otherwise: ErrorCode) -> ErrorCode {
        otherwise
    }
}

/// List I/O pieces.
struct ListSource {
    regions: Vec<(u64, u64)>,
    index: usize,
    used: u64,
}

impl PieceSource for ListSource {
    fn next_pieces(&mut self, bytes_max: u64, out: &mut Vec<Piece>) -> u64 {
        let mut bytes = 0u64;
        while bytes < bytes_max && out.len() < PIECES_PER_BATCH_MAX {
            let Some(&(offset, length)) = self.regions.get(self.index) else { break };
            let take = (length - self.used).min(bytes_max - bytes);
            if take > 0 {
                out.push(Piece {
                    packed_offset: bytes as usize,
                    datafile_offset: offset + self.used,
                    length: take as usize,
                });
            }
            bytes += take;
            self.used += take;
            if self.used == length {
                self.index += 1;
                self.used = 0;
            }
        }
        bytes
    }
}

/// Datatype I/O pieces: this server's part of a dataloop walk.
struct StripeSource<'a> {
    cursor: StripeCursor<'a>,
    batch: Vec<StripePiece>,
}

impl PieceSource for StripeSource<'_> {
    fn next_pieces(&mut self, bytes_max: u64, out: &mut Vec<Piece>) -> u64 {
        self.batch.clear();
        let limits = BatchLimits { regions_max: PIECES_PER_BATCH_MAX, bytes_max };
        let bytes = self.cursor.next_batch(limits, &mut self.batch);
        let mut packed = 0usize;
        for piece in &self.batch {
            out.push(Piece {
                packed_offset: packed,
                datafile_offset: piece.datafile_offset,
                length: piece.length as usize,
            });
            packed += piece.length as usize;
        }
        bytes
    }

    fn stopped(&self, otherwise: ErrorCode) -> ErrorCode {
        match self.cursor.budget_exhausted() {
            true => ErrorCode::TooBig,
            false => otherwise,
        }
    }
}

/// Checks a list request and builds its source.
fn list_source(regions: Vec<(u64, u64)>, total_length: u64) -> WeftResult<ListSource> {
    if regions.len() > limits::LIST_REGIONS_MAX as usize || total_length > limits::IO_BYTES_MAX {
        return Err(ErrorCode::Invalid);
    }
    let mut sum = 0u64;
    for &(offset, length) in &regions {
        match offset.checked_add(length) {
            Some(end) if end <= limits::FILE_BYTES_MAX => {}
            _ => return Err(ErrorCode::TooBig),
        }
        sum = sum.checked_add(length).ok_or(ErrorCode::Invalid)?;
    }
    if sum != total_length {
        return Err(ErrorCode::Invalid);
    }
    Ok(ListSource { regions, index: 0, used: 0 })
}

/// Decodes the file type of a datatype access (bounded by the decoder).
fn decode_access(access: &DatatypeAccess) -> WeftResult<Dataloop> {
    if access.stream_length > limits::IO_BYTES_MAX {
        return Err(ErrorCode::Invalid);
    }
    access.distribution.validate()?;
    Dataloop::decode(&access.dataloop).map_err(|_| ErrorCode::Invalid)
}

/// Positions this server's walk of a decoded access.
fn stripe_source<'a>(access: &DatatypeAccess, dataloop: &'a Dataloop) -> WeftResult<StripeSource<'a>> {
    let mut cursor = Cursor::new(dataloop, access.count, access.displacement).map_err(|_| ErrorCode::Invalid)?;
    let end = access.stream_start.checked_add(access.stream_length).ok_or(ErrorCode::Invalid)?;
    cursor.set_end(end).map_err(|_| ErrorCode::Invalid)?;
    cursor.seek(access.stream_start).map_err(|_| ErrorCode::Invalid)?;
    let d = access.distribution;
    let filter =
        StripeFilter::new(d.strip_bytes, d.stripe_count, access.stripe_index).map_err(|_| ErrorCode::Invalid)?;
    let mut cursor = StripeCursor::new(cursor, filter);
    cursor.set_region_budget(limits::DATATYPE_WALK_REGIONS_MAX);
    Ok(StripeSource { cursor, batch: Vec::new() })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> WeftResult<T> + Send + 'static) -> WeftResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|_| ErrorCode::Io)?
}

/// Serves `ReadList`.
pub async fn read_list(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &Link,
    handle: Handle,
    regions: Vec<(u64, u64)>,
    total_length: u64,
) -> ReplyResult {
    let source = list_source(regions, total_length)?;
    read(storage, metadata, link, handle, source).await
}

/// Serves `WriteList`.
pub async fn write_list(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &mut Link,
    handle: Handle,
    regions: Vec<(u64, u64)>,
    total_length: u64,
) -> ReplyResult {
    let source = list_source(regions, total_length)?;
    write(storage, metadata, link, handle, source, total_length).await
}

/// Serves `ReadDatatype`.
pub async fn read_datatype(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &Link,
    access: DatatypeAccess,
) -> ReplyResult {
    let dataloop = decode_access(&access)?;
    let source = stripe_source(&access, &dataloop)?;
    read(storage, metadata, link, access.handle, source).await
}

/// Serves `WriteDatatype`.
pub async fn write_datatype(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &mut Link,
    access: DatatypeAccess,
    packed_length: u64,
) -> ReplyResult {
    let dataloop = decode_access(&access)?;
    let source = stripe_source(&access, &dataloop)?;
    write(storage, metadata, link, access.handle, source, packed_length).await
}

/// Streams the packed bytes of `source` to the peer.
async fn read(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &Link,
    handle: Handle,
    mut source: impl PieceSource,
) -> ReplyResult {
    let _guard = storage.scheduler.shared(handle).await;
    metadata.check_datafile(handle).await?;
    let mut sent = 0u64;
    loop {
        let mut pieces = Vec::new();
        let bytes = source.next_pieces(CHUNK_BYTES_MAX as u64, &mut pieces);
        if bytes == 0 {
            match source.stopped(ErrorCode::Protocol) {
                ErrorCode::TooBig => return Err(ErrorCode::TooBig),
                _ => break,
            }
        }
        let storage = storage.clone();
        let packed = blocking(move || {
            let mut packed = vec![0u8; bytes as usize];
            sieve::read_pieces(&storage.datafiles, handle, &pieces, &mut packed, &storage.counters)?;
            Ok(packed)
        })
        .await?;
        link.send_data(sent, packed).await?;
        sent += bytes;
    }
    Ok(Reply::Io { bytes: sent, local_size: local_size_of(storage, handle).await? })
}

/// Receives `packed_length` packed bytes and stores them where `source` says.
async fn write(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &mut Link,
    handle: Handle,
    mut source: impl PieceSource,
    packed_length: u64,
) -> ReplyResult {
    if packed_length > limits::IO_BYTES_MAX {
        return Err(ErrorCode::Invalid);
    }
    let _guard = storage.scheduler.shared(handle).await;
    let _change = metadata.begin_change(handle).await?;
    storage.datafiles.check_space()?;
    let mut received = 0u64;
    while received < packed_length {
        let (stream_offset, payload) = link.next_chunk().await?;
        if payload.is_empty() {
            continue;
        }
        let length = payload.len() as u64;
        if stream_offset != received || packed_length - received < length {
            return Err(ErrorCode::Protocol);
        }
        store(storage, handle, &mut source, Arc::new(payload)).await?;
        received += length;
        link.grant_credit().await;
    }
    if source.next_pieces(1, &mut Vec::new()) != 0 {
        return Err(ErrorCode::Protocol); // the access holds more bytes than were sent
    }
    if source.stopped(ErrorCode::Protocol) == ErrorCode::TooBig {
        return Err(ErrorCode::TooBig);
    }
    Ok(Reply::Io { bytes: received, local_size: local_size_of(storage, handle).await? })
}

/// Stores one chunk: the next `payload.len()` bytes of the walk.
async fn store(
    storage: &Arc<Storage>,
    handle: Handle,
    source: &mut impl PieceSource,
    payload: Arc<Vec<u8>>,
) -> WeftResult<()> {
    let mut done = 0u64;
    let length = payload.len() as u64;
    while done < length {
        let mut pieces = Vec::new();
        let bytes = source.next_pieces(length - done, &mut pieces);
        if bytes == 0 {
            // More bytes sent than the access holds, or a walk past its budget.
            return Err(source.stopped(ErrorCode::Protocol));
        }
        let (storage, payload) = (storage.clone(), payload.clone());
        let from = done as usize;
        blocking(move || {
            let packed = &payload[from..from + bytes as usize];
            sieve::write_pieces(&storage.datafiles, handle, &pieces, packed, &storage.ranges, &storage.counters)
        })
        .await?;
        done += bytes;
    }
    Ok(())
}
