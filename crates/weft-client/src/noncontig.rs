//! Noncontiguous I/O: a memory layout and a file access of equal total
//! length, moved by one of three methods.
//!
//! - [`IoMethod::Datatype`]: one `ReadDatatype`/`WriteDatatype` request per
//!   datafile holding any byte of the access, all in flight at once (an
//!   access of more than `limits::DATATYPE_WALK_REGIONS_MAX` walk regions
//!   goes in consecutive parts of at most that many, the most a server
//!   walks per request). The
//!   request carries the encoded file type; each server walks only its own
//!   pieces (see `weft_server::noncontig`). The client runs the same
//!   `StripeCursor` walk per datafile to gather the bytes that datafile
//!   stores, packed in stream order (writes), or to scatter the packed bytes
//!   it receives (reads, walked in lockstep with the data chunks, so a read
//!   needs no per-piece memory). Memory is a contiguous buffer, a region
//!   list or a dataloop over the buffer.
//! - [`IoMethod::List`]: the memory and file sides are zipped, split at
//!   strip boundaries into datafile-local regions (adjacent ones merged),
//!   and sent to each datafile in `ReadList`/`WriteList` requests of at
//!   most `regions_per_request` regions: the access is walked a window at a
//!   time (`crate::zipwalk`), and whenever one datafile's list is full, the
//!   lists of every datafile go out (datafiles in parallel) before the walk
//!   goes on. Cost: about `ceil(local regions / regions_per_request)`
//!   requests per datafile for a balanced access. The default is
//!   [`weft_proto::limits::LIST_REGIONS_MAX`] (65,536); 64 reproduces the
//!   list I/O of the papers.
//! - [`IoMethod::Posix`]: one blocking `read_at`/`write_at` per contiguous
//!   piece (a memory/file zip piece), one after another, as a program using
//!   `pread`/`pwrite` would. A piece crossing a strip boundary costs one
//!   request per datafile it touches.
//!
//! Reads fill bytes past end of file with zeros (as holes read).
//!
//! Cost on the client: memory per request independent of its size. Writes
//! gather each datafile's packed bytes straight from the caller's buffer
//! into the transport's chunks as they are sent (`Bulk::UploadWith`: at most
//! `WRITE_WINDOW_CHUNKS` chunks of `CHUNK_BYTES_MAX` in flight per request);
//! reads scatter chunks into the buffer as they arrive. No copy of the
//! access is made, and the list and posix methods hold at most a window of
//! zipped pieces plus one request's region list per datafile (a list access
//! is walked in the caller's own list). Input is checked by a walk that
//! keeps nothing before any byte moves.

use std::sync::Mutex;

use futures::future::join_all;
use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region, StripeCursor, StripeFilter, StripePiece};
use weft_proto::limits::{self, HEADER_BYTES_MAX};
use weft_proto::message::{DatatypeAccess, Reply, Request, ServerCounters};
use weft_proto::{ErrorCode, WeftResult};

use crate::blocking::BlockingClient;
use crate::capabilities::capable;
use crate::client::Client;
use crate::io::File;
use crate::zipwalk::{self, RegionSource, ZipWalk};
use weft_net::transport::Bulk;

/// How a noncontiguous access goes over the wire (for comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMethod {
    /// One blocking request per contiguous piece.
    Posix,
    /// List I/O with at most this many regions per request.
    List {
        /// Regions per request (1 ..= `LIST_REGIONS_MAX`).
        regions_per_request: u32,
    },
    /// Datatype I/O: one request per datafile involved.
    Datatype,
}

impl IoMethod {
    /// List I/O with the default chunking.
    pub const LIST_DEFAULT: IoMethod = IoMethod::List { regions_per_request: limits::LIST_REGIONS_MAX };
}

/// Where the access's data stream lies in the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub enum MemoryLayout<'a> {
    /// The whole buffer, in order.
    Contiguous,
    /// `(offset, length)` pieces of the buffer, in stream order.
    List(&'a [Region]),
    /// `count` instances of `memory_type` from buffer offset 0.
    Datatype {
        /// The memory type.
        memory_type: &'a Dataloop,
        /// Instances.
        count: u64,
    },
}

/// Which file bytes the access touches, in stream order.
#[derive(Clone, Copy, Debug)]
pub enum FileAccess<'a> {
    /// `(offset, length)` regions of the file, in stream order.
    List(&'a [Region]),
    /// An MPI-style view: `file_type` tiled from byte `displacement`,
    /// starting `view_offset` bytes into the view's data stream.
    Datatype {
        /// The file type.
        file_type: &'a Dataloop,
        /// File offset of the first tile.
        displacement: i64,
        /// Offset into the view, in bytes of the file type's data stream.
        view_offset: u64,
    },
}

fn invalid<E>(_: E) -> ErrorCode {
    ErrorCode::Invalid
}

/// Maps stream positions to buffer offsets, moving forward.
enum MemoryMap<'a> {
    Contiguous,
    List {
        regions: &'a [Region],
        prefix: &'a [u64],
    },
    /// A vector of contiguous blocks (the common strided memory type),
    /// mapped by arithmetic instead of walking the dataloop.
    Strided(Strided),
    Loop {
        cursor: Cursor<'a>,
        scratch: Vec<Region>,
    },
}

/// Run `i` of a strided memory type starts at
/// `(i / runs_per_tile) * tile_extent + (i % runs_per_tile) * stride + first`.
#[derive(Clone, Copy)]
struct Strided {
    runs_per_tile: u64,
    run_bytes: u64,
    tile_extent: i64,
    stride: i64,
    first: i64,
}

impl Strided {
    /// The arithmetic form of `memory_type`, if it is a vector of contiguous blocks.
    fn of(memory_type: &Dataloop) -> Option<Strided> {
        let root = memory_type.root();
        let weft_dataloop::Kind::Vector { count, blocklength, stride_bytes, child } = root.kind() else { return None };
        let child = memory_type.nodes().get(*child as usize)?;
        if !child.is_contiguous() || child.extent() as u64 != child.size() || *count == 0 || *blocklength == 0 {
            return None;
        }
        Some(Strided {
            runs_per_tile: *count,
            run_bytes: blocklength.checked_mul(child.size())?,
            tile_extent: root.extent(),
            stride: *stride_bytes,
            first: child.true_lb(),
        })
    }

    fn run_offset(&self, run: u64) -> Option<u64> {
        let tile = i128::from(run / self.runs_per_tile);
        let within = i128::from(run % self.runs_per_tile);
        let offset = tile * i128::from(self.tile_extent) + within * i128::from(self.stride) + i128::from(self.first);
        u64::try_from(offset).ok()
    }
}

/// What every per-datafile [`MemoryMap`] shares.
struct MemoryPlan<'a> {
    layout: MemoryLayout<'a>,
    /// The whole buffer as one region (the contiguous layout's source).
    whole: Region,
    prefix: Vec<u64>,
    total: u64,
    buffer_len: usize,
}

impl<'a> MemoryPlan<'a> {
    fn new(layout: MemoryLayout<'a>, buffer_len: usize) -> WeftResult<MemoryPlan<'a>> {
        let mut prefix = Vec::new();
        let total = match layout {
            MemoryLayout::Contiguous => buffer_len as u64,
            MemoryLayout::List(regions) => {
                prefix.reserve(regions.len() + 1);
                prefix.push(0u64);
                for region in regions {
                    check_in_buffer(region.offset, region.length, buffer_len)?;
                    let next =
                        prefix.last().copied().unwrap_or(0).checked_add(region.length).ok_or(ErrorCode::Invalid)?;
                    prefix.push(next);
                }
                *prefix.last().unwrap_or(&0)
            }
            MemoryLayout::Datatype { memory_type, count } => {
                count.checked_mul(memory_type.size()).ok_or(ErrorCode::Invalid)?
            }
        };
        Ok(MemoryPlan { layout, whole: Region::new(0, buffer_len as u64), prefix, total, buffer_len })
    }

    fn map(&self) -> WeftResult<MemoryMap<'_>> {
        Ok(match self.layout {
            MemoryLayout::Contiguous => MemoryMap::Contiguous,
            MemoryLayout::List(regions) => MemoryMap::List { regions, prefix: &self.prefix },
            MemoryLayout::Datatype { memory_type, count } => match Strided::of(memory_type) {
                Some(strided) => MemoryMap::Strided(strided),
                None => MemoryMap::Loop {
                    cursor: Cursor::new(memory_type, count, 0).map_err(invalid)?,
                    scratch: Vec::new(),
                },
            },
        })
    }

    /// The memory side as a region source (list and posix methods).
    fn source(&self) -> WeftResult<RegionSource<'_>> {
        Ok(match self.layout {
            MemoryLayout::Contiguous => RegionSource::List(std::slice::from_ref(&self.whole).iter()),
            MemoryLayout::List(regions) => RegionSource::List(regions.iter()),
            MemoryLayout::Datatype { memory_type, count } => {
                RegionSource::Walk(Cursor::new(memory_type, count, 0).map_err(invalid)?)
            }
        })
    }
}

fn check_in_buffer(offset: u64, length: u64, buffer_len: usize) -> WeftResult<()> {
    match offset.checked_add(length) {
        Some(end) if end <= buffer_len as u64 => Ok(()),
        _ => Err(ErrorCode::Invalid),
    }
}

impl MemoryMap<'_> {
    /// Calls `f(buffer_offset, length)` for stream bytes `[stream_offset, +length)`.
    fn for_each(
        &mut self,
        buffer_len: usize,
        stream_offset: u64,
        length: u64,
        mut f: impl FnMut(usize, usize),
    ) -> WeftResult<()> {
        match self {
            MemoryMap::Contiguous => {
                check_in_buffer(stream_offset, length, buffer_len)?;
                f(stream_offset as usize, length as usize);
            }
            MemoryMap::List { regions, prefix } => {
                let mut index = prefix.partition_point(|p| *p <= stream_offset).saturating_sub(1);
                let (mut at, end) = (stream_offset, stream_offset + length);
                while at < end {
                    let region = regions.get(index).ok_or(ErrorCode::Invalid)?;
                    let within = at - prefix[index];
                    let take = (region.length - within).min(end - at);
                    f((region.offset + within) as usize, take as usize);
                    at += take;
                    index += 1;
                }
            }
            MemoryMap::Strided(strided) => {
                // Divide once, then step from run to run by addition.
                let (mut at, end) = (stream_offset, stream_offset.checked_add(length).ok_or(ErrorCode::Invalid)?);
                let run = at / strided.run_bytes;
                let mut within = at % strided.run_bytes;
                let mut index_in_tile = run % strided.runs_per_tile;
                let mut offset = i128::from(strided.run_offset(run).ok_or(ErrorCode::Invalid)?);
                let mut tile_start = offset - i128::from(index_in_tile as i64) * i128::from(strided.stride);
                while at < end {
                    let take = (strided.run_bytes - within).min(end - at);
                    let start = u64::try_from(offset).map_err(invalid)? + within;
                    check_in_buffer(start, take, buffer_len)?;
                    f(start as usize, take as usize);
                    at += take;
                    within = 0;
                    index_in_tile += 1;
                    if index_in_tile == strided.runs_per_tile {
                        index_in_tile = 0;
                        tile_start += i128::from(strided.tile_extent);
                        offset = tile_start;
                    } else {
                        offset += i128::from(strided.stride);
                    }
                }
            }
            MemoryMap::Loop { cursor, scratch } => {
                if cursor.position() != stream_offset {
                    cursor.seek(stream_offset).map_err(invalid)?;
                }
                let mut left = length;
                while left > 0 {
                    scratch.clear();
                    let got = cursor.next_batch(BatchLimits { regions_max: 256, bytes_max: left }, scratch);
                    if got == 0 {
                        return Err(ErrorCode::Invalid);
                    }
                    for region in scratch.iter() {
                        check_in_buffer(region.offset, region.length, buffer_len)?;
                        f(region.offset as usize, region.length as usize);
                    }
                    left -= got;
                }
            }
        }
        Ok(())
    }
}

/// A file access resolved to a dataloop walk.
#[derive(Clone)]
struct FileWalk {
    dataloop: Dataloop,
    encoded: Vec<u8>,
    count: u64,
    displacement: i64,
    /// Where the whole access starts in the view's stream (the caller's
    /// memory stream starts there).
    access_start: u64,
    /// The part of the access this walk covers.
    stream_start: u64,
    stream_length: u64,
}

impl FileWalk {
    fn new(access: FileAccess<'_>, total: u64) -> WeftResult<FileWalk> {
        let (dataloop, displacement, view_offset) = match access {
            FileAccess::Datatype { file_type, displacement, view_offset } => {
                (file_type.clone(), displacement, view_offset)
            }
            FileAccess::List(regions) => (list_dataloop(regions)?, 0, 0),
        };
        let size = dataloop.size();
        let end = view_offset.checked_add(total).ok_or(ErrorCode::TooBig)?;
        let count = match size {
            0 if total > 0 => return Err(ErrorCode::Invalid),
            0 => 0,
            size => end.div_ceil(size),
        };
        let encoded = dataloop.encode();
        if encoded.len() as u64 + limits::DATATYPE_ACCESS_OTHER_BYTES_MAX > HEADER_BYTES_MAX as u64 {
            return Err(ErrorCode::TooBig);
        }
        Ok(FileWalk {
            dataloop,
            encoded,
            count,
            displacement,
            access_start: view_offset,
            stream_start: view_offset,
            stream_length: total,
        })
    }

    /// The access as consecutive parts of at most
    /// `limits::DATATYPE_WALK_REGIONS_MAX` walk regions each, the most a
    /// server walks for one request (one part when the access has fewer
    /// bytes than that: every region holds a byte).
    fn parts(&self) -> WeftResult<Vec<FileWalk>> {
        if self.stream_length <= limits::DATATYPE_WALK_REGIONS_MAX {
            return Ok(vec![self.clone()]);
        }
        let mut cursor = self.cursor()?;
        let mut parts = Vec::new();
        let mut start = self.stream_start;
        while !cursor.is_done() {
            cursor.skip_regions(limits::DATATYPE_WALK_REGIONS_MAX);
            let end = cursor.position();
            parts.push(FileWalk { stream_start: start, stream_length: end - start, ..self.clone() });
            start = end;
        }
        Ok(parts)
    }

    fn cursor(&self) -> WeftResult<Cursor<'_>> {
        let mut cursor = Cursor::new(&self.dataloop, self.count, self.displacement).map_err(invalid)?;
        cursor.set_end(self.stream_start + self.stream_length).map_err(invalid)?;
        cursor.seek(self.stream_start).map_err(invalid)?;
        Ok(cursor)
    }

    fn stripe(&self, file: &File, index: u32) -> WeftResult<StripeCursor<'_>> {
        let d = file.layout.distribution;
        let filter = StripeFilter::new(d.strip_bytes, d.stripe_count, index).map_err(invalid)?;
        Ok(StripeCursor::new(self.cursor()?, filter))
    }

    fn access(&self, file: &File, index: u32) -> DatatypeAccess {
        DatatypeAccess {
            handle: file.layout.datafiles[index as usize],
            dataloop: self.encoded.clone(),
            count: self.count,
            displacement: self.displacement,
            stream_start: self.stream_start,
            stream_length: self.stream_length,
            distribution: file.layout.distribution,
            stripe_index: index,
        }
    }
}

/// A file region list as an hindexed dataloop of bytes (datatype method on a list).
fn list_dataloop(regions: &[Region]) -> WeftResult<Dataloop> {
    let lengths: Vec<u64> = regions.iter().map(|r| r.length).collect();
    let displacements =
        regions.iter().map(|r| i64::try_from(r.offset).map_err(invalid)).collect::<WeftResult<Vec<i64>>>()?;
    Dataloop::hindexed(&lengths, &displacements, &Dataloop::bytes(1).map_err(invalid)?).map_err(|_| ErrorCode::TooBig)
}

/// Next pieces of a stripe walk, in batches.
fn stripe_batch(cursor: &mut StripeCursor<'_>, out: &mut Vec<StripePiece>) -> u64 {
    out.clear();
    cursor.next_batch(BatchLimits { regions_max: 4096, bytes_max: u64::MAX }, out)
}

/// One datafile's part of a list access: `(local offset, length, memory offset)`.
type LocalPieces = Vec<(u64, u64, u64)>;

/// One datafile's packed stream of a datatype access, walked chunk by
/// chunk as the transport moves it: maps each chunk's bytes to the
/// caller's memory. Reads scatter arriving chunks into the buffer through
/// it, writes gather outgoing chunks from the buffer: one walk, two copy
/// directions.
struct StreamWalk<'a> {
    stripe: StripeCursor<'a>,
    memory: MemoryMap<'a>,
    pieces: Vec<StripePiece>,
    index: usize,
    used: u64,
    /// Stream bytes walked so far (the next chunk must start here).
    position: u64,
    stream_start: u64,
}

impl<'a> StreamWalk<'a> {
    fn new(stripe: StripeCursor<'a>, memory: MemoryMap<'a>, stream_start: u64) -> Self {
        StreamWalk { stripe, memory, pieces: Vec::new(), index: 0, used: 0, position: 0, stream_start }
    }

    /// Walks the `len` bytes of the chunk at `chunk_offset`, which must
    /// follow the previous one: calls `copy(chunk_at, memory_offset,
    /// length)` for each run, where `memory_offset` lies in a buffer of
    /// `buffer_len` bytes. `bad` is the error for a chunk out of order or
    /// beyond this datafile's share (`Protocol` for what a server sent,
    /// `Invalid` for what the transport asked).
    fn walk(
        &mut self,
        chunk_offset: u64,
        len: usize,
        buffer_len: usize,
        bad: ErrorCode,
        mut copy: impl FnMut(usize, usize, usize),
    ) -> WeftResult<()> {
        if chunk_offset != self.position {
            return Err(bad);
        }
        let mut at = 0usize;
        while at < len {
            if self.index == self.pieces.len() {
                self.index = 0;
                self.used = 0;
                if stripe_batch(&mut self.stripe, &mut self.pieces) == 0 {
                    return Err(bad); // more bytes than this datafile's share
                }
            }
            let piece = self.pieces[self.index];
            let take = (piece.length - self.used).min((len - at) as u64);
            let stream = piece.stream_offset + self.used - self.stream_start;
            let mut cursor = at;
            self.memory.for_each(buffer_len, stream, take, |offset, length| {
                copy(cursor, offset, length);
                cursor += length;
            })?;
            at += take as usize;
            self.used += take;
            if self.used == piece.length {
                self.index += 1;
                self.used = 0;
            }
        }
        self.position += len as u64;
        Ok(())
    }

    /// Read side: copies arriving `bytes` into `buffer`.
    fn scatter(&mut self, chunk_offset: u64, bytes: &[u8], buffer: &Mutex<&mut [u8]>) -> WeftResult<()> {
        let mut buffer = buffer.lock().expect("scatter buffer lock");
        let buffer_len = buffer.len();
        self.walk(chunk_offset, bytes.len(), buffer_len, ErrorCode::Protocol, |at, offset, length| {
            buffer[offset..offset + length].copy_from_slice(&bytes[at..at + length]);
        })
    }

    /// Write side: fills `out` from `buffer`.
    fn gather(&mut self, chunk_offset: u64, out: &mut [u8], buffer: &[u8]) -> WeftResult<()> {
        self.walk(chunk_offset, out.len(), buffer.len(), ErrorCode::Invalid, |at, offset, length| {
            out[at..at + length].copy_from_slice(&buffer[offset..offset + length]);
        })
    }

    /// Whether the whole share has been walked.
    fn finished(&mut self) -> bool {
        self.index == self.pieces.len() && stripe_batch(&mut self.stripe, &mut self.pieces) == 0
    }
}

/// The dataloop walk of a datatype file access (`None` for a list access,
/// whose regions are walked in place).
fn walk_of(access: FileAccess<'_>, total: u64) -> WeftResult<Option<FileWalk>> {
    match access {
        FileAccess::List(_) => Ok(None),
        FileAccess::Datatype { .. } => FileWalk::new(access, total).map(Some),
    }
}

/// The file side of an access as a region source.
fn file_source<'a>(access: FileAccess<'a>, walk: Option<&'a FileWalk>) -> WeftResult<RegionSource<'a>> {
    match (access, walk) {
        (FileAccess::List(regions), _) => Ok(RegionSource::List(regions.iter())),
        (FileAccess::Datatype { .. }, Some(walk)) => Ok(RegionSource::Walk(walk.cursor()?)),
        (FileAccess::Datatype { .. }, None) => Err(ErrorCode::Invalid),
    }
}

/// The windowed zip of an access (list and posix methods), its input
/// checked first in a walk that keeps nothing.
fn zip_walk<'a>(
    plan: &'a MemoryPlan<'a>,
    access: FileAccess<'a>,
    walk: Option<&'a FileWalk>,
) -> WeftResult<ZipWalk<'a>> {
    zipwalk::validate(plan.source()?, file_source(access, walk)?, plan.buffer_len, plan.total)?;
    Ok(ZipWalk::new(plan.source()?, file_source(access, walk)?))
}

/// A list access's requests, planned window by window: the zipped pieces
/// are split at strip boundaries into per-datafile local pieces (merged
/// when adjacent in both file and memory); when one datafile's list is full
/// (`regions_per_request` pieces), the lists of every datafile are handed
/// out to be sent, so the client holds at most one request's list per
/// datafile whatever the access's size.
struct ListPlan<'a> {
    zip: ZipWalk<'a>,
    distribution: weft_proto::Distribution,
    /// The current window; `window[at]` is what is left of its current piece.
    window: Vec<(u64, u64, u64)>,
    at: usize,
    lists: Vec<LocalPieces>,
    per_request: usize,
    done: bool,
}

impl<'a> ListPlan<'a> {
    fn new(file: &File, regions_per_request: u32, zip: ZipWalk<'a>) -> Self {
        ListPlan {
            zip,
            distribution: file.layout.distribution,
            window: Vec::new(),
            at: 0,
            lists: vec![Vec::new(); file.layout.datafiles.len()],
            per_request: regions_per_request.clamp(1, limits::LIST_REGIONS_MAX) as usize,
            done: false,
        }
    }

    /// The next lists to send, one request per non-empty list; `None` at the end.
    fn next_lists(&mut self) -> WeftResult<Option<Vec<LocalPieces>>> {
        loop {
            if self.at == self.window.len() {
                if self.done {
                    return Ok(None);
                }
                self.at = 0;
                if !self.zip.next_window(&mut self.window)? {
                    self.done = true;
                    return Ok(Some(self.take_lists()));
                }
            }
            let (memory, file_offset, length) = self.window[self.at];
            let Some(piece) = self.distribution.pieces(file_offset, length).next() else {
                self.at += 1;
                continue;
            };
            self.window[self.at] = (memory + piece.length, file_offset + piece.length, length - piece.length);
            let index = piece.datafile_index as usize;
            let list = self.lists.get_mut(index).ok_or(ErrorCode::Invalid)?;
            if let Some(last) = list.last_mut() {
                if last.0 + last.1 == piece.local_offset && last.2 + last.1 == memory {
                    last.1 += piece.length;
                    continue;
                }
            }
            let full = if list.len() == self.per_request { Some(self.take_lists()) } else { None };
            self.lists[index].push((piece.local_offset, piece.length, memory));
            if full.is_some() {
                return Ok(full);
            }
        }
    }

    fn take_lists(&mut self) -> Vec<LocalPieces> {
        let empty = vec![Vec::new(); self.lists.len()];
        std::mem::replace(&mut self.lists, empty)
    }
}

/// Walks a list request's packed stream over its pieces' buffer offsets,
/// chunk by chunk: one walk for both copy directions (writes gather
/// outgoing chunks from the buffer, reads scatter arriving ones into it).
struct PartWalk<'p> {
    part: &'p [(u64, u64, u64)],
    index: usize,
    used: u64,
    position: u64,
}

impl<'p> PartWalk<'p> {
    fn new(part: &'p [(u64, u64, u64)]) -> Self {
        PartWalk { part, index: 0, used: 0, position: 0 }
    }

    /// Calls `copy(chunk_at, buffer_offset, length)` for each run of the
    /// `len` bytes of the chunk at `chunk_offset` (which must follow the
    /// previous one); every run lies in a buffer of `buffer_len` bytes.
    fn walk(
        &mut self,
        chunk_offset: u64,
        len: usize,
        buffer_len: usize,
        mut copy: impl FnMut(usize, usize, usize),
    ) -> WeftResult<()> {
        if chunk_offset != self.position {
            return Err(ErrorCode::Protocol);
        }
        let mut at = 0usize;
        while at < len {
            let &(_, length, memory) = self.part.get(self.index).ok_or(ErrorCode::Protocol)?;
            let take = ((length - self.used) as usize).min(len - at);
            let offset = (memory + self.used) as usize;
            check_in_buffer(offset as u64, take as u64, buffer_len)?;
            copy(at, offset, take);
            at += take;
            self.used += take as u64;
            if self.used == length {
                self.index += 1;
                self.used = 0;
            }
        }
        self.position += len as u64;
        Ok(())
    }
}

impl Client {
    /// List I/O write (default chunking): `memory` pieces of `buf` to `file_regions`.
    pub async fn write_list(
        &self,
        file: &File,
        buf: &[u8],
        memory: &[Region],
        file_regions: &[Region],
    ) -> WeftResult<()> {
        self.write_noncontig(
            file,
            IoMethod::LIST_DEFAULT,
            buf,
            MemoryLayout::List(memory),
            FileAccess::List(file_regions),
        )
        .await
    }

    /// List I/O read (default chunking): `file_regions` into `memory` pieces of `buf`.
    pub async fn read_list(
        &self,
        file: &File,
        buf: &mut [u8],
        memory: &[Region],
        file_regions: &[Region],
    ) -> WeftResult<()> {
        self.read_noncontig(
            file,
            IoMethod::LIST_DEFAULT,
            buf,
            MemoryLayout::List(memory),
            FileAccess::List(file_regions),
        )
        .await
    }

    /// Datatype I/O write: `memory_count` instances of `memory_type` in `buf`
    /// to the view (`file_type` tiled from `displacement`) at `view_offset`.
    #[allow(clippy::too_many_arguments)]
    pub async fn write_dtype(
        &self,
        file: &File,
        buf: &[u8],
        memory_type: &Dataloop,
        memory_count: u64,
        displacement: i64,
        view_offset: u64,
        file_type: &Dataloop,
    ) -> WeftResult<()> {
        let memory = MemoryLayout::Datatype { memory_type, count: memory_count };
        let access = FileAccess::Datatype { file_type, displacement, view_offset };
        self.write_noncontig(file, IoMethod::Datatype, buf, memory, access).await
    }

    /// Datatype I/O read; see [`Client::write_dtype`].
    #[allow(clippy::too_many_arguments)]
    pub async fn read_dtype(
        &self,
        file: &File,
        buf: &mut [u8],
        memory_type: &Dataloop,
        memory_count: u64,
        displacement: i64,
        view_offset: u64,
        file_type: &Dataloop,
    ) -> WeftResult<()> {
        let memory = MemoryLayout::Datatype { memory_type, count: memory_count };
        let access = FileAccess::Datatype { file_type, displacement, view_offset };
        self.read_noncontig(file, IoMethod::Datatype, buf, memory, access).await
    }

    /// Writes a noncontiguous access with the given method.
    pub async fn write_noncontig(
        &self,
        file: &File,
        method: IoMethod,
        buf: &[u8],
        memory: MemoryLayout<'_>,
        access: FileAccess<'_>,
    ) -> WeftResult<()> {
        let plan = MemoryPlan::new(memory, buf.len())?;
        match method {
            IoMethod::Datatype => self.write_datatype(file, buf, &plan, FileWalk::new(access, plan.total)?).await,
            IoMethod::List { regions_per_request } => {
                let walk = walk_of(access, plan.total)?;
                let mut plan = ListPlan::new(file, regions_per_request, zip_walk(&plan, access, walk.as_ref())?);
                while let Some(lists) = plan.next_lists()? {
                    self.write_lists(file, buf, lists).await?;
                }
                Ok(())
            }
            IoMethod::Posix => {
                let walk = walk_of(access, plan.total)?;
                let mut zip = zip_walk(&plan, access, walk.as_ref())?;
                let mut window = Vec::new();
                while zip.next_window(&mut window)? {
                    for &(memory_offset, file_offset, length) in &window {
                        self.write_at(
                            file,
                            file_offset,
                            &buf[memory_offset as usize..(memory_offset + length) as usize],
                        )
                        .await?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Reads a noncontiguous access with the given method.
    pub async fn read_noncontig(
        &self,
        file: &File,
        method: IoMethod,
        buf: &mut [u8],
        memory: MemoryLayout<'_>,
        access: FileAccess<'_>,
    ) -> WeftResult<()> {
        let plan = MemoryPlan::new(memory, buf.len())?;
        match method {
            IoMethod::Datatype => self.read_datatype(file, buf, &plan, FileWalk::new(access, plan.total)?).await,
            IoMethod::List { regions_per_request } => {
                let walk = walk_of(access, plan.total)?;
                let mut plan = ListPlan::new(file, regions_per_request, zip_walk(&plan, access, walk.as_ref())?);
                while let Some(lists) = plan.next_lists()? {
                    self.read_lists(file, buf, lists).await?;
                }
                Ok(())
            }
            IoMethod::Posix => {
                let walk = walk_of(access, plan.total)?;
                let mut zip = zip_walk(&plan, access, walk.as_ref())?;
                let mut window = Vec::new();
                while zip.next_window(&mut window)? {
                    for &(memory_offset, file_offset, length) in &window {
                        let target = &mut buf[memory_offset as usize..(memory_offset + length) as usize];
                        let got = self.read_at(file, file_offset, target).await?;
                        target[got..].fill(0);
                    }
                }
                Ok(())
            }
        }
    }

    /// I/O counters of one server.
    pub async fn server_counters(&self, server_id: u32) -> WeftResult<ServerCounters> {
        match self.call(server_id, Request::Counters).await? {
            Reply::Counters(counters) => Ok(counters),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Sends one `WriteList` per non-empty list, datafiles in parallel.
    async fn write_lists(&self, file: &File, buf: &[u8], lists: Vec<LocalPieces>) -> WeftResult<()> {
        let capability = &self.capability(file, weft_proto::access::WRITE).await?;
        let writes = lists.into_iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(index, part)| async move {
            let handle = file.layout.datafiles[index];
            let total: u64 = part.iter().map(|p| p.1).sum();
            // Gathered from `buf` chunk by chunk as it is sent.
            let mut walk = PartWalk::new(&part);
            let mut fill = |chunk_offset: u64, out: &mut [u8]| {
                walk.walk(chunk_offset, out.len(), buf.len(), |at, offset, length| {
                    out[at..at + length].copy_from_slice(&buf[offset..offset + length]);
                })
            };
            let regions = part.iter().map(|&(offset, length, _)| (offset, length)).collect();
            let request = capable(capability, Request::WriteList { handle, regions, total_length: total });
            let bulk = Bulk::UploadWith { length: total, fill: &mut fill };
            expect_io(self.call_bulk(self.server_of(handle)?, request, bulk).await?, total)
        });
        join_all(writes).await.into_iter().collect()
    }

    /// Sends one `ReadList` per non-empty list, datafiles in parallel.
    async fn read_lists(&self, file: &File, buf: &mut [u8], lists: Vec<LocalPieces>) -> WeftResult<()> {
        let capability = &self.capability(file, weft_proto::access::READ).await?;
        let buffer_len = buf.len();
        let buffer = Mutex::new(buf);
        let buffer = &buffer;
        let reads = lists.into_iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(index, part)| async move {
            let handle = file.layout.datafiles[index];
            let server = self.server_of(handle)?;
            let total: u64 = part.iter().map(|p| p.1).sum();
            let mut walk = PartWalk::new(&part);
            let mut sink = |chunk_offset: u64, bytes: &[u8]| {
                let mut buffer = buffer.lock().expect("scatter buffer lock");
                walk.walk(chunk_offset, bytes.len(), buffer_len, |at, offset, length| {
                    buffer[offset..offset + length].copy_from_slice(&bytes[at..at + length]);
                })
            };
            let regions = part.iter().map(|&(offset, length, _)| (offset, length)).collect();
            let request = capable(capability, Request::ReadList { handle, regions, total_length: total });
            expect_io(self.call_bulk(server, request, Bulk::Download(&mut sink)).await?, total)?;
            self.shared.pool.count_download(server, "read_list", total);
            Ok::<(), ErrorCode>(())
        });
        join_all(reads).await.into_iter().collect()
    }

    async fn write_datatype(&self, file: &File, buf: &[u8], plan: &MemoryPlan<'_>, walk: FileWalk) -> WeftResult<()> {
        for part in walk.parts()? {
            self.write_datatype_part(file, buf, plan, part).await?;
        }
        Ok(())
    }

    async fn read_datatype(
        &self,
        file: &File,
        buf: &mut [u8],
        plan: &MemoryPlan<'_>,
        walk: FileWalk,
    ) -> WeftResult<()> {
        for part in walk.parts()? {
            self.read_datatype_part(file, buf, plan, part).await?;
        }
        Ok(())
    }

    async fn write_datatype_part(
        &self,
        file: &File,
        buf: &[u8],
        plan: &MemoryPlan<'_>,
        walk: FileWalk,
    ) -> WeftResult<()> {
        let capability = &self.capability(file, weft_proto::access::WRITE).await?;
        let mut involved = Vec::new();
        let mut pieces = Vec::new();
        for index in 0..file.layout.datafiles.len() as u32 {
            // This datafile's share of the stream (a walk, no copy).
            let mut stripe = walk.stripe(file, index)?;
            let mut packed_length = 0u64;
            while stripe_batch(&mut stripe, &mut pieces) > 0 {
                packed_length += pieces.iter().map(|p| p.length).sum::<u64>();
            }
            if packed_length > 0 {
                let gather = StreamWalk::new(walk.stripe(file, index)?, plan.map()?, walk.access_start);
                involved.push((walk.access(file, index), packed_length, gather));
            }
        }
        let writes = involved.into_iter().map(|(access, packed_length, mut gather)| async move {
            let server = self.server_of(access.handle)?;
            let request = capable(capability, Request::WriteDatatype { access, packed_length });
            let mut fill = |chunk_offset: u64, chunk: &mut [u8]| gather.gather(chunk_offset, chunk, buf);
            let bulk = Bulk::UploadWith { length: packed_length, fill: &mut fill };
            expect_io(self.call_bulk(server, request, bulk).await?, packed_length)
        });
        join_all(writes).await.into_iter().collect()
    }

    async fn read_datatype_part(
        &self,
        file: &File,
        buf: &mut [u8],
        plan: &MemoryPlan<'_>,
        walk: FileWalk,
    ) -> WeftResult<()> {
        let capability = &self.capability(file, weft_proto::access::READ).await?;
        let buffer_len = buf.len();
        let buffer = Mutex::new(buf);
        let buffer = &buffer;
        let mut involved = Vec::new();
        for index in 0..file.layout.datafiles.len() as u32 {
            let mut probe = walk.stripe(file, index)?;
            if probe.next_batch(BatchLimits { regions_max: 1, bytes_max: 1 }, &mut Vec::new()) > 0 {
                let scatter = StreamWalk::new(walk.stripe(file, index)?, plan.map()?, walk.access_start);
                involved.push((walk.access(file, index), scatter));
            }
        }
        debug_assert!(plan.buffer_len == buffer_len);
        let reads = involved.into_iter().map(|(access, mut scatter)| async move {
            let server = self.server_of(access.handle)?;
            let mut sink = |chunk_offset: u64, bytes: &[u8]| scatter.scatter(chunk_offset, bytes, buffer);
            let request = capable(capability, Request::ReadDatatype { access });
            let reply = self.call_bulk(server, request, Bulk::Download(&mut sink)).await?;
            let consumed = scatter.position;
            expect_io(reply, consumed)?;
            if !scatter.finished() {
                return Err(ErrorCode::Protocol);
            }
            self.shared.pool.count_download(server, "read_datatype", consumed);
            Ok(())
        });
        join_all(reads).await.into_iter().collect()
    }
}

fn expect_io(reply: Reply, bytes_expected: u64) -> WeftResult<()> {
    match reply {
        Reply::Io { bytes, .. } if bytes == bytes_expected => Ok(()),
        _ => Err(ErrorCode::Protocol),
    }
}

impl BlockingClient {
    /// See [`Client::write_list`].
    pub fn write_list(&self, file: &File, buf: &[u8], memory: &[Region], file_regions: &[Region]) -> WeftResult<()> {
        self.block_on(self.client().write_list(file, buf, memory, file_regions))
    }

    /// See [`Client::read_list`].
    pub fn read_list(&self, file: &File, buf: &mut [u8], memory: &[Region], file_regions: &[Region]) -> WeftResult<()> {
        self.block_on(self.client().read_list(file, buf, memory, file_regions))
    }

    /// See [`Client::write_dtype`].
    #[allow(clippy::too_many_arguments)]
    pub fn write_dtype(
        &self,
        file: &File,
        buf: &[u8],
        memory_type: &Dataloop,
        memory_count: u64,
        displacement: i64,
        view_offset: u64,
        file_type: &Dataloop,
    ) -> WeftResult<()> {
        self.block_on(self.client().write_dtype(
            file,
            buf,
            memory_type,
            memory_count,
            displacement,
            view_offset,
            file_type,
        ))
    }

    /// See [`Client::read_dtype`].
    #[allow(clippy::too_many_arguments)]
    pub fn read_dtype(
        &self,
        file: &File,
        buf: &mut [u8],
        memory_type: &Dataloop,
        memory_count: u64,
        displacement: i64,
        view_offset: u64,
        file_type: &Dataloop,
    ) -> WeftResult<()> {
        self.block_on(self.client().read_dtype(
            file,
            buf,
            memory_type,
            memory_count,
            displacement,
            view_offset,
            file_type,
        ))
    }

    /// See [`Client::write_noncontig`].
    pub fn write_noncontig(
        &self,
        file: &File,
        method: IoMethod,
        buf: &[u8],
        memory: MemoryLayout<'_>,
        access: FileAccess<'_>,
    ) -> WeftResult<()> {
        self.block_on(self.client().write_noncontig(file, method, buf, memory, access))
    }

    /// See [`Client::read_noncontig`].
    pub fn read_noncontig(
        &self,
        file: &File,
        method: IoMethod,
        buf: &mut [u8],
        memory: MemoryLayout<'_>,
        access: FileAccess<'_>,
    ) -> WeftResult<()> {
        self.block_on(self.client().read_noncontig(file, method, buf, memory, access))
    }

    /// See [`Client::server_counters`].
    pub fn server_counters(&self, server_id: u32) -> WeftResult<ServerCounters> {
        self.block_on(self.client().server_counters(server_id))
    }
}
