//! Contiguous file I/O over striped datafiles.
//!
//! A contiguous file range touches one contiguous local range of each
//! datafile, so a read or write costs one request per datafile involved,
//! all in flight at once. Downloaded chunks are scattered straight into the
//! caller's buffer; bytes a server does not have read as zeros (holes), and
//! the local sizes in the replies tell a hole from end of file.

use std::collections::BTreeMap;

use futures::future::join_all;
use weft_proto::message::{FileLayout, Reply, Request};
use weft_proto::{limits, Distribution, ErrorCode, Handle, WeftResult};

use crate::capabilities::capable;
use crate::client::Client;
use crate::takeback::StoredPart;
use weft_net::transport::Bulk;

/// An open file: its metafile handle and layout. Servers keep no open state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// Metafile handle.
    pub handle: Handle,
    /// Distribution and datafiles.
    pub layout: FileLayout,
}

/// A caller buffer that several concurrent downloads fill at disjoint places.
struct ScatterTarget {
    base: *mut u8,
    len: usize,
}

// SAFETY: every writer writes only the bytes of the file range that belong to
// its own datafile; the striping function maps each file byte to exactly one
// datafile, so concurrent writes never overlap, and the buffer outlives them
// (the futures are joined before `read_at` returns).
unsafe impl Send for ScatterTarget {}
// SAFETY: as for `Send` above: shared use never writes overlapping bytes.
unsafe impl Sync for ScatterTarget {}

impl ScatterTarget {
    /// Copies `bytes` to `at`, bounds-checked.
    fn put(&self, at: usize, bytes: &[u8]) -> WeftResult<()> {
        let end = at.checked_add(bytes.len()).ok_or(ErrorCode::Protocol)?;
        if end > self.len {
            return Err(ErrorCode::Protocol);
        }
        // SAFETY: in bounds (checked above) and disjoint from other writers (see the Send impl).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(at), bytes.len()) };
        Ok(())
    }

    /// Zeroes `len` bytes at `at`.
    fn zero(&self, at: usize, len: usize) -> WeftResult<()> {
        if at.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(ErrorCode::Protocol);
        }
        // SAFETY: as for `put`.
        unsafe { std::ptr::write_bytes(self.base.add(at), 0, len) };
        Ok(())
    }
}

/// Calls `f(buffer_index, run_length, run_start_in_bytes)` for each strip-bounded
/// run of the local range `[local, local + len)` of datafile `index`, where
/// buffer_index is the position relative to file offset `origin`.
fn for_each_run(
    d: &Distribution,
    index: u32,
    origin: u64,
    local: u64,
    len: usize,
    mut f: impl FnMut(usize, usize, usize) -> WeftResult<()>,
) -> WeftResult<()> {
    let mut done = 0usize;
    while done < len {
        let at = local + done as u64;
        let run = ((d.strip_bytes - at % d.strip_bytes) as usize).min(len - done);
        let file_offset = d.file_offset(index, at);
        let position = file_offset.checked_sub(origin as u128).ok_or(ErrorCode::Protocol)? as usize;
        f(position, run, done)?;
        done += run;
    }
    Ok(())
}

fn check_range(offset: u64, len: usize) -> WeftResult<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= limits::FILE_BYTES_MAX => Ok(()),
        _ => Err(ErrorCode::TooBig),
    }
}

impl Client {
    /// Writes `data` at `offset` (one request per datafile involved). When
    /// some datafiles' parts fail and others are stored, the growth of the
    /// stored parts is taken back (see [`crate::takeback`]) before the
    /// error is returned, so the file's size is not raised by a write
    /// that was not acknowledged.
    pub async fn write_at(&self, file: &File, offset: u64, data: &[u8]) -> WeftResult<()> {
        check_range(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let capability = self.capability(file, weft_proto::access::WRITE).await?;
        let d = file.layout.distribution;
        let ranges = d.local_ranges(offset, data.len() as u64);
        // Each datafile's bytes are gathered from `data` chunk by chunk as
        // they are sent: no copy of the request is made.
        let writes = ranges.iter().enumerate().filter(|(_, (s, e))| s != e).map(|(i, (start, end))| {
            let handle = file.layout.datafiles[i];
            let (start, length) = (*start, end - start);
            let request = capable(&capability, Request::Write { handle, offset: start, length });
            async move {
                let mut fill = |stream_offset: u64, chunk: &mut [u8]| {
                    for_each_run(&d, i as u32, offset, start + stream_offset, chunk.len(), |at, run, from| {
                        let source = data.get(at..at + run).ok_or(ErrorCode::Invalid)?;
                        chunk[from..from + run].copy_from_slice(source);
                        Ok(())
                    })
                };
                let reply = match self.server_of(handle) {
                    Ok(server) => self.call_bulk(server, request, Bulk::UploadWith { length, fill: &mut fill }).await,
                    Err(code) => Err(code),
                };
                (i, start, reply)
            }
        });
        let mut stored = Vec::new();
        let mut failure = None;
        for (index, start, reply) in join_all(writes).await {
            match reply {
                Ok(Reply::Io { bytes, local_size }) => {
                    stored.push(StoredPart { index, start, end: start + bytes, before: local_size });
                }
                Ok(_) => failure = failure.or(Some(ErrorCode::Protocol)),
                Err(code) => failure = failure.or(Some(code)),
            }
        }
        let Some(code) = failure else { return Ok(()) };
        if !stored.is_empty() {
            // Best effort: the write's own error is what the caller hears.
            if let Err(undo) = self.take_back_growth(file, &stored).await {
                tracing::warn!("write failed ({code}); taking back its stored parts' growth failed too: {undo}");
            }
        }
        Err(code)
    }

    /// Reads into `buf` from `offset`; returns the bytes read (short only at end of file).
    /// Bytes of `buf` past end of file are zeroed.
    pub async fn read_at(&self, file: &File, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
        self.read_at_with(file, offset, buf, true).await
    }

    /// As [`Client::read_at`], but the bytes of `buf` past end of file are
    /// left untouched (MPI-IO semantics); holes before end of file read as
    /// zeros. One request per datafile involved; the file size is asked
    /// (of the datafiles not in the access) only when a datafile comes back
    /// short.
    pub async fn read_at_within_eof(&self, file: &File, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
        self.read_at_with(file, offset, buf, false).await
    }

    async fn read_at_with(&self, file: &File, offset: u64, buf: &mut [u8], zero_past_eof: bool) -> WeftResult<usize> {
        check_range(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(0);
        }
        let capability = self.capability(file, weft_proto::access::READ).await?;
        let capability = &capability;
        let d = file.layout.distribution;
        let ranges = d.local_ranges(offset, buf.len() as u64);
        let target = ScatterTarget { base: buf.as_mut_ptr(), len: buf.len() };
        let reads = ranges.iter().enumerate().filter(|(_, (s, e))| s != e).map(|(i, (start, end))| {
            let handle = file.layout.datafiles[i];
            let target = &target;
            let (start, length) = (*start, end - start);
            async move {
                let server = self.server_of(handle)?;
                let mut sink = |stream_offset: u64, bytes: &[u8]| {
                    if stream_offset.saturating_add(bytes.len() as u64) > length {
                        return Err(ErrorCode::Protocol);
                    }
                    for_each_run(&d, i as u32, offset, start + stream_offset, bytes.len(), |at, run, from| {
                        target.put(at, &bytes[from..from + run])
                    })
                };
                let request = capable(capability, Request::Read { handle, offset: start, length });
                let reply = self.call_bulk(server, request, Bulk::Download(&mut sink)).await?;
                match reply {
                    Reply::Io { bytes, local_size } if bytes <= length => {
                        self.shared.pool.count_download(server, "read", bytes);
                        // The local range this datafile did not have: holes
                        // or past end of file, told apart below.
                        Ok((i, (start + bytes, length - bytes), local_size))
                    }
                    _ => Err(ErrorCode::Protocol),
                }
            }
        });
        let results = join_all(reads).await;
        let mut known_sizes = BTreeMap::new();
        let mut missing = Vec::new();
        for result in results {
            let (index, (tail, tail_length), local_size) = result?;
            if tail_length > 0 {
                missing.push((index, tail, tail_length));
            }
            known_sizes.insert(index, local_size);
        }
        if missing.is_empty() {
            return Ok(buf.len());
        }
        let size = self.size_with(&file.layout, known_sizes).await?;
        // Buffer bytes before end of file; the others are zeroed only when asked.
        let before_eof = size.saturating_sub(offset).min(buf.len() as u64) as usize;
        let zero_limit = if zero_past_eof { buf.len() } else { before_eof };
        for (index, tail, tail_length) in missing {
            for_each_run(&d, index as u32, offset, tail, tail_length as usize, |at, run, _| {
                let run = run.min(zero_limit.saturating_sub(at));
                if run > 0 {
                    target.zero(at, run)?;
                }
                Ok(())
            })?;
        }
        Ok(before_eof)
    }

    /// Logical size, asking only the datafiles whose size is not yet known.
    async fn size_with(&self, layout: &FileLayout, mut known: BTreeMap<usize, u64>) -> WeftResult<u64> {
        let missing: Vec<Handle> =
            layout.datafiles.iter().enumerate().filter(|(i, _)| !known.contains_key(i)).map(|(_, h)| *h).collect();
        if !missing.is_empty() {
            let stats = self.datafile_stats(&missing).await?;
            for (i, handle) in layout.datafiles.iter().enumerate() {
                if let Some(stat) = stats.get(handle) {
                    known.insert(i, stat.local_size);
                }
            }
        }
        let locals: Vec<u64> = (0..layout.datafiles.len()).map(|i| known.get(&i).copied().unwrap_or(0)).collect();
        Ok(layout.distribution.file_size(&locals))
    }

    /// Logical size of a file: one `StatFile` to its metafile's server
    /// (answered from settled stats unless the file is growing), or
    /// client-driven one request per data server.
    pub async fn file_size(&self, file: &File) -> WeftResult<u64> {
        if self.client_driven() {
            return self.size_with(&file.layout, BTreeMap::new()).await;
        }
        Ok(self.stat_handle(file.handle).await?.size)
    }

    /// Makes the file's bytes durable on every server holding them, and its
    /// metadata at its metafile's server (which, with `metadata_sync =
    /// none`, waits for its committed changes to be durable).
    pub async fn fsync(&self, file: &File) -> WeftResult<()> {
        let mut by_server: BTreeMap<u32, Vec<Handle>> = BTreeMap::new();
        // The metafile has no local bytes: syncing it is a no-op besides the metadata.
        by_server.entry(self.server_of(file.handle)?).or_default().push(file.handle);
        for handle in &file.layout.datafiles {
            by_server.entry(self.server_of(*handle)?).or_default().push(*handle);
        }
        let results =
            join_all(by_server.into_iter().map(|(server, handles)| self.call(server, Request::Fsync { handles })))
                .await;
        results.into_iter().try_for_each(|r| r.map(|_| ()))
    }
}
