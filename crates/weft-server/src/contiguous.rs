//! Contiguous `Read` and `Write` of one datafile: the request's range is
//! one local range, moved in chunks of at most `CHUNK_BYTES_MAX`.
//!
//! Both run under the datafile's shared scheduler entry (truncate and
//! remove take it exclusively) after checking the datafile record. A write
//! grants the peer one credit per chunk stored; a read streams data frames.
//! A read's reply carries the datafile's local size, fetched with the last
//! (or a short) chunk so it costs no extra trip to the blocking pool. A
//! write's reply carries the local size *before* the write (taken under the
//! same scheduler entry, inline when the datafile is open): a client whose
//! write to several datafiles failed on some learns from it how far each
//! stored one grew, and trims that growth back (issue 21).
//!
//! Where the I/O runs (measured; see ARCHITECTURE.md, design decisions):
//! a read first tries the page cache inline on the runtime worker
//! (`preadv2` with `RWF_NOWAIT` on the cached descriptor, which never waits
//! for the disk) and goes to the blocking pool only on a miss; a write of
//! at most [`INLINE_WRITE_BYTES_MAX`] to an open datafile, with its byte
//! range free of sieving writes, is done inline too; everything else runs
//! on the blocking pool.

use std::sync::Arc;

use weft_proto::limits::{self, CHUNK_BYTES_MAX};
use weft_proto::message::{Reply, ReplyResult};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::link::Link;
use crate::metadata::Metadata;
use crate::ranges::RangeMode;
use crate::storage::Storage;

/// Largest write done inline on the runtime worker when the datafile is
/// already open (see ARCHITECTURE.md, design decisions: measured).
/// `WEFT_INLINE_WRITE_BYTES` overrides it (0 = every write on the pool).
pub const INLINE_WRITE_BYTES_MAX: usize = 64 << 10;

/// Whether reads try the page cache inline first (`WEFT_INLINE_READ=0` turns it off).
fn inline_read() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("WEFT_INLINE_READ").map(|v| v != "0").unwrap_or(true))
}

fn inline_write_bytes_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("WEFT_INLINE_WRITE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(INLINE_WRITE_BYTES_MAX)
    })
}

/// Serves `Write`: stores `length` uploaded bytes at `offset`.
pub async fn write(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &mut Link,
    handle: Handle,
    offset: u64,
    length: u64,
) -> ReplyResult {
    check_range(offset, length)?;
    // Refused whole rather than partly stored when the disk lacks room for it (issue 21).
    storage.datafiles.check_space_for(length)?;
    let guard = storage.scheduler.shared(handle).await;
    let _change = metadata.begin_change(handle).await?;
    let before = size_now(storage, handle).await?;
    let mut reached = 0u64;
    match receive(storage, link, handle, offset, length, &mut reached).await {
        Ok(()) => Ok(Reply::Io { bytes: length, local_size: before }),
        Err(code) => {
            // Stored in part (the disk filled between chunks, say): what
            // this write grew is taken back, exclusively, and only if the
            // datafile still ends where it left it.
            drop(guard);
            let _exclusive = storage.scheduler.exclusive(handle).await;
            let storage = storage.clone();
            let keep = before.max(offset);
            let _ = tokio::task::spawn_blocking(move || {
                if reached > keep && storage.datafiles.stat(handle)?.0 == reached {
                    storage.datafiles.set_len(handle, keep)?;
                }
                Ok::<_, ErrorCode>(())
            })
            .await;
            Err(code)
        }
    }
}

/// Receives and stores a write's chunks; `reached` is the furthest local
/// end stored so far.
async fn receive(
    storage: &Arc<Storage>,
    link: &mut Link,
    handle: Handle,
    offset: u64,
    length: u64,
    reached: &mut u64,
) -> WeftResult<()> {
    let mut received = 0u64;
    while received < length {
        let (stream_offset, payload) = link.next_chunk().await?;
        if payload.is_empty() {
            continue;
        }
        let end = stream_offset.checked_add(payload.len() as u64).ok_or(ErrorCode::Protocol)?;
        if end > length {
            return Err(ErrorCode::Protocol);
        }
        received += payload.len() as u64;
        store_chunk(storage, handle, offset + stream_offset, payload).await?;
        *reached = (*reached).max(offset + end);
        link.grant_credit().await;
    }
    Ok(())
}

/// Writes one chunk, inline if small and the datafile is open, else on
/// the blocking pool.
async fn store_chunk(storage: &Arc<Storage>, handle: Handle, offset: u64, payload: Vec<u8>) -> WeftResult<()> {
    let end = offset.saturating_add(payload.len() as u64);
    if payload.len() <= inline_write_bytes_max() {
        // Shared: excludes only overlapping sieving read-modify-writes (see
        // crate::ranges); one in progress sends this write to the pool.
        let stored = match storage.ranges.try_lock(handle, offset, end, RangeMode::Shared) {
            Some(_range) => storage.datafiles.try_write_at(handle, offset, &payload),
            None => None,
        };
        if let Some(stored) = stored {
            storage.counters.syscalls(1);
            return stored;
        }
    }
    let storage = storage.clone();
    tokio::task::spawn_blocking(move || {
        let _range = storage.ranges.lock(handle, offset, end, RangeMode::Shared);
        storage.counters.syscalls(1);
        storage.datafiles.write_at(handle, offset, &payload)
    })
    .await
    .map_err(|_| ErrorCode::Io)?
}

/// The local size: inline from the open descriptor, else from the pool.
async fn size_now(storage: &Arc<Storage>, handle: Handle) -> WeftResult<u64> {
    match storage.datafiles.try_stat(handle) {
        Some(stat) => Ok(stat?.0),
        None => local_size_of(storage, handle).await,
    }
}

/// The datafile's local size (one trip to the blocking pool).
pub async fn local_size_of(storage: &Arc<Storage>, handle: Handle) -> WeftResult<u64> {
    let storage = storage.clone();
    let (size, _) =
        tokio::task::spawn_blocking(move || storage.datafiles.stat(handle)).await.map_err(|_| ErrorCode::Io)??;
    Ok(size)
}

/// Serves `Read`: streams up to `length` bytes at `offset` (short at the
/// local end of file).
pub async fn read(
    storage: &Arc<Storage>,
    metadata: &Metadata,
    link: &Link,
    handle: Handle,
    offset: u64,
    length: u64,
) -> ReplyResult {
    check_range(offset, length)?;
    let _guard = storage.scheduler.shared(handle).await;
    metadata.check_datafile(handle).await?;
    let mut done = 0u64;
    let mut local_size = None;
    while done < length {
        let want = (length - done).min(CHUNK_BYTES_MAX as u64) as usize;
        let last = done + want as u64 == length;
        let (chunk, size) = read_chunk(storage, handle, offset + done, want, last).await?;
        local_size = size;
        let got = chunk.len();
        if got > 0 {
            link.send_data(done, chunk).await?;
        }
        done += got as u64;
        if got < want {
            break;
        }
    }
    io_reply(storage, handle, done, local_size).await
}

/// A data request's reply: `bytes` moved and the datafile's local size
/// (asked now if no chunk brought it back).
async fn io_reply(storage: &Arc<Storage>, handle: Handle, bytes: u64, local_size: Option<u64>) -> ReplyResult {
    let local_size = match local_size {
        Some(size) => size,
        None => local_size_of(storage, handle).await?,
    };
    Ok(Reply::Io { bytes, local_size })
}

/// Reads one chunk: from the page cache inline if it is all there, else
/// on the blocking pool. The local size comes with the last (or a short)
/// chunk, in the same step.
async fn read_chunk(
    storage: &Arc<Storage>,
    handle: Handle,
    at: u64,
    want: usize,
    last: bool,
) -> WeftResult<(Vec<u8>, Option<u64>)> {
    let mut buf = vec![0u8; want];
    if inline_read() {
        if let Some(n) = storage.datafiles.try_read_at(handle, at, &mut buf)? {
            storage.counters.syscalls(1);
            buf.truncate(n);
            let size = if last || n < want { Some(size_now(storage, handle).await?) } else { None };
            return Ok((buf, size));
        }
    }
    let storage = storage.clone();
    tokio::task::spawn_blocking(move || {
        storage.counters.syscalls(1);
        let n = storage.datafiles.read_at(handle, at, &mut buf)?;
        buf.truncate(n);
        let size = if last || n < want { Some(storage.datafiles.stat(handle)?.0) } else { None };
        Ok::<_, ErrorCode>((buf, size))
    })
    .await
    .map_err(|_| ErrorCode::Io)?
}

fn check_range(offset: u64, length: u64) -> WeftResult<()> {
    if length > limits::IO_BYTES_MAX {
        return Err(ErrorCode::Invalid);
    }
    match offset.checked_add(length) {
        Some(end) if end <= limits::FILE_BYTES_MAX => Ok(()),
        _ => Err(ErrorCode::TooBig),
    }
}
