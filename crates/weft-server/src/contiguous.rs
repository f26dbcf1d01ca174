//! Contiguous `Read` and `Write` of one datafile: the request's range is
//! one local range, moved in chunks of at most `CHUNK_BYTES_MAX`.
//!
//! Both run under the datafile's shared scheduler entry (truncate and
//! remove take it exclusively) after checking the datafile record. A write
//! grants the peer one credit per chunk stored; a read streams data frames.
//! The reply carries the datafile's local size, fetched with the last (or a
//! short) chunk so it costs no extra trip to the blocking pool.

use std::sync::Arc;

use weft_proto::limits::{self, CHUNK_BYTES_MAX};
use weft_proto::message::{Reply, ReplyResult};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::link::Link;
use crate::service::Service;

/// Serves `Write`: stores `length` uploaded bytes at `offset`.
pub async fn write(service: &Arc<Service>, link: &mut Link, handle: Handle, offset: u64, length: u64) -> ReplyResult {
    check_range(offset, length)?;
    let _guard = service.scheduler.shared(handle).await;
    let _change = service.begin_change(handle).await?;
    let mut received = 0u64;
    let mut local_size = None;
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
        let last = received == length;
        local_size = store_chunk(service, handle, offset + stream_offset, payload, last).await?;
        link.grant_credit().await;
    }
    let local_size = match local_size {
        Some(size) => size,
        None => local_size_of(service, handle).await?,
    };
    Ok(Reply::Io { bytes: length, local_size })
}

/// Writes one chunk on the blocking pool; with `then_size`, also returns
/// the datafile's local size in the same hand-off (the last chunk of a
/// request, saving the reply its own trip to the pool).
async fn store_chunk(
    service: &Arc<Service>,
    handle: Handle,
    offset: u64,
    payload: Vec<u8>,
    then_size: bool,
) -> WeftResult<Option<u64>> {
    let service = service.clone();
    tokio::task::spawn_blocking(move || {
        // Shared: excludes only overlapping sieving read-modify-writes (see crate::ranges).
        let end = offset.saturating_add(payload.len() as u64);
        let _range = service.ranges.lock(handle, offset, end, crate::ranges::RangeMode::Shared);
        service.counters.syscalls(1);
        service.bytestreams.write_at(handle, offset, &payload)?;
        if then_size {
            Ok(Some(service.bytestreams.stat(handle)?.0))
        } else {
            Ok(None)
        }
    })
    .await
    .map_err(|_| ErrorCode::Io)?
}

/// The datafile's local size (one trip to the blocking pool).
pub async fn local_size_of(service: &Arc<Service>, handle: Handle) -> WeftResult<u64> {
    let service = service.clone();
    let (size, _) =
        tokio::task::spawn_blocking(move || service.bytestreams.stat(handle)).await.map_err(|_| ErrorCode::Io)??;
    Ok(size)
}

/// Serves `Read`: streams up to `length` bytes at `offset` (short at the
/// local end of file).
pub async fn read(service: &Arc<Service>, link: &Link, handle: Handle, offset: u64, length: u64) -> ReplyResult {
    check_range(offset, length)?;
    let _guard = service.scheduler.shared(handle).await;
    service.check_datafile(handle).await?;
    let mut done = 0u64;
    let mut local_size = None;
    while done < length {
        let want = (length - done).min(CHUNK_BYTES_MAX as u64) as usize;
        let service = service.clone();
        let at = offset + done;
        let last = done + want as u64 == length;
        // The local size comes with the last (or a short) chunk, in the
        // same trip to the blocking pool.
        let (chunk, size) = tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; want];
            service.counters.syscalls(1);
            let n = service.bytestreams.read_at(handle, at, &mut buf)?;
            buf.truncate(n);
            let size = if last || n < want { Some(service.bytestreams.stat(handle)?.0) } else { None };
            Ok::<_, ErrorCode>((buf, size))
        })
        .await
        .map_err(|_| ErrorCode::Io)??;
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
    let local_size = match local_size {
        Some(size) => size,
        None => local_size_of(service, handle).await?,
    };
    Ok(Reply::Io { bytes: done, local_size })
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
