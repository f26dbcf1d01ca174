//! Two-phase collective buffering (`weft_coll_method=two_phase`): the Rust
//! half. The C layer (`c/collective.c`) owns every MPI call — the
//! allgather of access ranges, the file domains, and per round the
//! alltoall of counts and the alltoallv of region lists and data; this
//! module owns the files, the dataloops and the bytes.
//!
//! One collective call on one rank:
//! 1. [`range`]: the first and last file byte of the rank's access through
//!    its view (two cursor seeks; MPI requires file types to be monotone,
//!    `MPI_File_set_view` refuses those that are not, so these bound the
//!    access) — gathered by C to place the file domains.
//! 2. [`begin`]: a [`Plan`]: the view, where the access starts in it, and the
//!    user buffer with its memory type — no copy of the data, no list of
//!    pieces (a walk checks the tiled view is monotone inside `[lo, hi)`).
//! 3. Per round, [`round`]: given one file window per destination rank
//!    (empty for non-aggregators), the view is walked from where that
//!    destination's last window ended (a binary search over the monotone
//!    view finds the first window), and the regions inside the window go
//!    out as region pairs and, for writes, data gathered straight from the
//!    user's memory: per round at most the windows' bytes.
//! 4. On aggregators, [`write_window`] copies what every source sent into a
//!    window buffer (at most `cb_buffer_size` of file range) in source-rank
//!    order (so where writes overlap the highest rank wins, as in ROMIO) and
//!    writes the union of the regions: one contiguous write when the union
//!    has no hole, otherwise list I/O (`WriteList`) over exactly the covered
//!    bytes — holes are never read or rewritten, so no read-modify-write is
//!    needed. [`read_window`] reads the union of the requested regions
//!    (list I/O over holes, no data sieving) and returns each source's
//!    bytes in its request order.
//! 5. Reads: [`deliver`] scatters what came back straight into user memory
//!    (only bytes before end of file); [`end`] advances the individual file
//!    pointer and forgets the plan.
//!
//! Memory per call beyond the user's buffer: the round's outgoing data and
//! pairs (at most the windows of that round), and on an aggregator its
//! window buffer and what C receives for it.
//!
//! Plans live in a registry under numeric ids; pointers handed to C by
//! [`round`] stay valid until the next call on the same plan.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use weft_client::{FileAccess, IoMethod, MemoryLayout};
use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region};

use crate::error::{MpiClass, MpiResult};
use crate::ffi::{guarded, store};
use crate::file::{self, OpenFile, Position, View};
use crate::runtime::client;
use crate::types;

/// Regions taken from the view cursor per batch while checking a view.
const FLATTEN_REGIONS_PER_BATCH: usize = 65_536;

/// Regions taken from the view cursor per batch in a round (a round stops
/// at its window's end, so batches stay small).
const ROUND_REGIONS_PER_BATCH: usize = 1024;

/// Data request kinds counted by [`data_requests`].
const DATA_KINDS: [&str; 6] = ["read", "write", "read_list", "write_list", "read_datatype", "write_datatype"];

/// One rank's side of one collective call. It holds no copy of the data:
/// each round gathers the outgoing bytes straight from the user's memory
/// (writes) and scatters what comes back straight into it (reads).
#[derive(Debug)]
pub struct Plan {
    file_id: u64,
    write: bool,
    individual: bool,
    etype_bytes: u64,
    /// The view the access goes through, and where in its stream it starts.
    view: View,
    view_offset: u64,
    /// The user buffer: address of the memory span's first byte and the
    /// memory type placed there (`None`: contiguous).
    base: usize,
    span_bytes: usize,
    memory: Option<(Dataloop, u64)>,
    total: u64,
    /// Reads: stream bytes before end of file (only these reach user memory).
    available: u64,
    /// Per destination: the access's stream position up to which its
    /// windows have been served (`None`: not yet located).
    next: Vec<Option<u64>>,
    out_pairs: Vec<i64>,
    out_data: Vec<u8>,
    /// Reads: stream spans of the outgoing requests, in order.
    out_stream: Vec<(u64, u64)>,
}

/// The next plan id and the live plans.
type Plans = Option<(u64, HashMap<u64, Box<Plan>>)>;

static PLANS: Mutex<Plans> = Mutex::new(None);

fn with_plan<T>(id: u64, body: impl FnOnce(&mut Plan) -> MpiResult<T>) -> MpiResult<T> {
    let mut guard = PLANS.lock().map_err(|_| MpiClass::Intern)?;
    let (_, plans) = guard.get_or_insert_with(|| (1, HashMap::new()));
    body(plans.get_mut(&id).ok_or(MpiClass::Intern)?)
}

fn insert(plan: Plan) -> MpiResult<u64> {
    let mut guard = PLANS.lock().map_err(|_| MpiClass::Intern)?;
    let (next, plans) = guard.get_or_insert_with(|| (1, HashMap::new()));
    let id = *next;
    *next += 1;
    plans.insert(id, Box::new(plan));
    Ok(id)
}

fn take(id: u64) -> MpiResult<Box<Plan>> {
    let mut guard = PLANS.lock().map_err(|_| MpiClass::Intern)?;
    let (_, plans) = guard.get_or_insert_with(|| (1, HashMap::new()));
    plans.remove(&id).ok_or(MpiClass::Intern)
}

/// Checks the access mode and the etype rule; returns the view offset and
/// the stream length in bytes.
fn access(open: &OpenFile, write: bool, at: Position, count: u64, memory_type: &Dataloop) -> MpiResult<(u64, u64)> {
    let (view_offset, total) = file::access_bytes(open, write, at, count, memory_type)?;
    if total > 0 && open.view.file_type.size() == 0 {
        return Err(MpiClass::Arg);
    }
    view_offset.checked_add(total).ok_or(MpiClass::Arg)?;
    Ok((view_offset, total))
}

/// The file offset of stream byte `position` of the view.
fn file_offset_of(open: &OpenFile, position: u64) -> MpiResult<u64> {
    file_offset_in(&open.view, position)
}

fn file_offset_in(view: &View, position: u64) -> MpiResult<u64> {
    if view.is_contiguous() {
        return u64::try_from(view.displacement).ok().and_then(|d| d.checked_add(position)).ok_or(MpiClass::Arg);
    }
    let tiles = position / view.file_type.size() + 1;
    let mut cursor = Cursor::new(&view.file_type, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
    cursor.seek(position).map_err(|_| MpiClass::Arg)?;
    let mut out = Vec::new();
    cursor.next_batch(BatchLimits::regions(1), &mut out);
    Ok(out.first().ok_or(MpiClass::Arg)?.offset)
}

/// `[start, end)` of the file bytes the access touches and its length in
/// bytes; `(0, 0, 0)` for an empty access.
pub fn range(id: u64, write: bool, at: Position, count: u64, memory_type: &Dataloop) -> MpiResult<(u64, u64, u64)> {
    let open = file::snapshot(id)?;
    let (view_offset, total) = access(&open, write, at, count, memory_type)?;
    if total == 0 {
        return Ok((0, 0, 0));
    }
    let start = file_offset_of(&open, view_offset)?;
    let last = file_offset_of(&open, view_offset + total - 1)?;
    let end = last.checked_add(1).ok_or(MpiClass::Arg)?;
    if end <= start {
        // Not monotone: MPI requires file types to be.
        return Err(MpiClass::Arg);
    }
    Ok((start, end, total))
}

/// Checks that the access's file regions never go backwards or overlap (MPI
/// requires monotone file types; a file type resized below its span tiles
/// backwards) and lie in `[lo, hi)`: a walk, nothing kept.
fn check_monotone(view: &View, view_offset: u64, total: u64, lo: u64, hi: u64) -> MpiResult<()> {
    if view.is_contiguous() {
        return Ok(());
    }
    let mut cursor = view_cursor(view, view_offset, total)?;
    let mut end = lo;
    let mut batch: Vec<Region> = Vec::new();
    loop {
        batch.clear();
        if cursor.next_batch(BatchLimits::regions(FLATTEN_REGIONS_PER_BATCH), &mut batch) == 0 {
            return Ok(());
        }
        for region in &batch {
            if region.offset < end || region.offset + region.length > hi {
                return Err(MpiClass::Arg);
            }
            end = region.offset + region.length;
        }
    }
}

/// A cursor over the view's stream `[view_offset, view_offset + total)`, at its start.
fn view_cursor(view: &View, view_offset: u64, total: u64) -> MpiResult<Cursor<'_>> {
    let end = view_offset + total;
    let tiles = end.div_ceil(view.file_type.size());
    let mut cursor = Cursor::new(&view.file_type, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
    cursor.set_end(end).map_err(|_| MpiClass::Arg)?;
    cursor.seek(view_offset).map_err(|_| MpiClass::Arg)?;
    Ok(cursor)
}

/// The first stream position (relative to the access) whose file byte is at
/// or after `file_offset` (`total` if none): a binary search, the view being
/// monotone.
fn locate(open_view: &View, view_offset: u64, total: u64, file_offset: u64) -> MpiResult<u64> {
    let (mut low, mut high) = (0u64, total);
    while low < high {
        let mid = low + (high - low) / 2;
        if file_offset_in(open_view, view_offset + mid)? >= file_offset {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    Ok(low)
}

/// Maps stream positions of the access to the user's memory, moving forward.
struct MemoryWalk<'a> {
    base: usize,
    span_bytes: usize,
    cursor: Option<Cursor<'a>>,
    scratch: Vec<Region>,
}

impl<'a> MemoryWalk<'a> {
    fn new(base: usize, span_bytes: usize, memory: &'a Option<(Dataloop, u64)>) -> MpiResult<MemoryWalk<'a>> {
        let cursor = match memory {
            None => None,
            Some((shaped, count)) => Some(Cursor::new(shaped, *count, 0).map_err(|_| MpiClass::Type)?),
        };
        Ok(MemoryWalk { base, span_bytes, cursor, scratch: Vec::new() })
    }

    /// Calls `f(address, length)` for the memory of stream bytes `[stream, stream + length)`.
    fn for_each(&mut self, stream: u64, length: u64, mut f: impl FnMut(usize, usize)) -> MpiResult<()> {
        let Some(cursor) = &mut self.cursor else {
            if stream + length > self.span_bytes as u64 {
                return Err(MpiClass::Intern);
            }
            f(self.base + stream as usize, length as usize);
            return Ok(());
        };
        if cursor.position() != stream {
            cursor.seek(stream).map_err(|_| MpiClass::Intern)?;
        }
        let mut left = length;
        while left > 0 {
            self.scratch.clear();
            let got = cursor.next_batch(BatchLimits { regions_max: 256, bytes_max: left }, &mut self.scratch);
            if got == 0 {
                return Err(MpiClass::Intern);
            }
            for region in &self.scratch {
                if region.offset + region.length > self.span_bytes as u64 {
                    return Err(MpiClass::Intern);
                }
                f(self.base + region.offset as usize, region.length as usize);
            }
            left -= got;
        }
        Ok(())
    }
}

/// Starts a collective access on this rank; `[lo, hi)` is the aggregate
/// range all ranks agreed on. Returns the plan id.
///
/// # Safety
/// `buffer` with the memory type's span for `count` instances is the
/// caller's MPI buffer (readable; writable for reads) until [`end`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn begin(
    id: u64,
    write: bool,
    at: Position,
    buffer: *mut u8,
    count: u64,
    memory_type: &Dataloop,
    lo: u64,
    hi: u64,
) -> MpiResult<u64> {
    let open = file::snapshot(id)?;
    let (view_offset, total) = access(&open, write, at, count, memory_type)?;
    let plan = file::memory_plan(memory_type, count)?;
    let available = if total == 0 {
        0
    } else {
        check_monotone(&open.view, view_offset, total, lo, hi)?;
        if write {
            total
        } else {
            let size_bytes = file::size_of(&open)?;
            file::bytes_before_eof(&open.view, view_offset, total, size_bytes)?
        }
    };
    let base =
        if total == 0 { buffer as usize } else { (buffer as usize).wrapping_add_signed(plan.start_offset as isize) };
    insert(Plan {
        file_id: id,
        write,
        individual: matches!(at, Position::Individual),
        etype_bytes: open.view.etype_bytes,
        view: open.view,
        view_offset,
        base,
        span_bytes: plan.span_bytes,
        memory: plan.shaped,
        total,
        available,
        next: Vec::new(),
        out_pairs: Vec::new(),
        out_data: Vec::new(),
        out_stream: Vec::new(),
    })
}

/// One round: `windows[2d], windows[2d+1]` is destination `d`'s window
/// (empty when equal). Fills `counts[2d]` (regions) and `counts[2d+1]`
/// (bytes) and returns pointers to the region pairs and (writes) the data,
/// gathered from user memory and concatenated in destination order, valid
/// until the next call on the plan. The data is at most the windows' bytes.
pub fn round(plan_id: u64, windows: &[i64], counts: &mut [i64]) -> MpiResult<(*const i64, *const u8)> {
    if windows.len() != counts.len() || windows.len() % 2 != 0 {
        return Err(MpiClass::Intern);
    }
    with_plan(plan_id, |plan| {
        let destinations = windows.len() / 2;
        plan.next.resize(destinations, None);
        plan.out_pairs.clear();
        plan.out_data.clear();
        plan.out_stream.clear();
        let Plan {
            view,
            view_offset,
            total,
            write,
            base,
            span_bytes,
            memory,
            next,
            out_pairs,
            out_data,
            out_stream,
            ..
        } = plan;
        let (view_offset, total) = (*view_offset, *total);
        let mut memory = MemoryWalk::new(*base, *span_bytes, memory)?;
        let mut batch: Vec<Region> = Vec::new();
        for d in 0..destinations {
            let (lo, hi) = (windows[2 * d], windows[2 * d + 1]);
            counts[2 * d] = 0;
            counts[2 * d + 1] = 0;
            if lo >= hi || lo < 0 || total == 0 {
                continue;
            }
            let (lo, hi) = (lo as u64, hi as u64);
            // Windows of one destination move forward: resume where its
            // last window ended (found by a search the first time).
            let mut position = match next[d] {
                Some(position) => position,
                None => locate(view, view_offset, total, lo)?,
            };
            if position < total {
                let mut cursor = view_cursor(view, view_offset, total)?;
                cursor.seek(view_offset + position).map_err(|_| MpiClass::Arg)?;
                'walk: loop {
                    batch.clear();
                    if cursor.next_batch(BatchLimits::regions(ROUND_REGIONS_PER_BATCH), &mut batch) == 0 {
                        break;
                    }
                    for region in &batch {
                        let end = region.offset + region.length;
                        if region.offset >= hi {
                            break 'walk;
                        }
                        if end <= lo {
                            position += region.length;
                            continue;
                        }
                        let start = region.offset.max(lo);
                        let stop = end.min(hi);
                        let length = stop - start;
                        let stream = position + (start - region.offset);
                        out_pairs.push(start as i64);
                        out_pairs.push(length as i64);
                        if *write {
                            memory.for_each(stream, length, |address, len| {
                                // SAFETY: inside the caller's buffer (begin's contract; checked against the span).
                                out_data.extend_from_slice(unsafe {
                                    std::slice::from_raw_parts(address as *const u8, len)
                                });
                            })?;
                        } else {
                            out_stream.push((stream, length));
                        }
                        counts[2 * d] += 1;
                        counts[2 * d + 1] += length as i64;
                        position = stream + length;
                        if end > hi {
                            break 'walk;
                        }
                    }
                }
            }
            next[d] = Some(position);
        }
        Ok((out_pairs.as_ptr(), out_data.as_ptr()))
    })
}

/// Reads: the data answering the last [`round`]'s requests, in their order,
/// scattered straight into user memory (only stream bytes before end of
/// file: MPI leaves the rest of the buffer untouched).
pub fn deliver(plan_id: u64, data: &[u8]) -> MpiResult<()> {
    with_plan(plan_id, |plan| {
        let expected: u64 = plan.out_stream.iter().map(|(_, l)| l).sum();
        if expected != data.len() as u64 {
            return Err(MpiClass::Intern);
        }
        let Plan { base, span_bytes, memory, out_stream, available, .. } = plan;
        let mut memory = MemoryWalk::new(*base, *span_bytes, memory)?;
        let mut at = 0usize;
        for (stream, length) in out_stream.iter() {
            let keep = (*length).min(available.saturating_sub(*stream));
            let mut from = at;
            memory.for_each(*stream, keep, |address, len| {
                // SAFETY: inside the caller's buffer, writable for reads (begin's contract).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(from), address as *mut u8, len) };
                from += len;
            })?;
            at += *length as usize;
        }
        Ok(())
    })
}

/// Finishes the plan: the individual pointer advances; returns the bytes moved.
///
/// # Safety
/// Nothing is touched any more (kept `unsafe` for the C ABI's contract).
pub unsafe fn end(plan_id: u64, ok: bool) -> MpiResult<u64> {
    let plan = take(plan_id)?;
    if !ok {
        return Ok(0);
    }
    let moved = if plan.write { plan.total } else { plan.available };
    if plan.individual {
        let advanced = (moved / plan.etype_bytes) as i64;
        file::update(plan.file_id, |open| {
            open.position_etypes += advanced;
            Ok(())
        })?;
    }
    Ok(moved)
}

/// Pairs `(offset, length)` of `pairs` as checked regions inside `[lo, hi)`.
fn window_regions(pairs: &[i64], lo: u64, hi: u64) -> MpiResult<Vec<Region>> {
    pairs
        .chunks_exact(2)
        .map(|pair| {
            let (offset, length) = (u64::try_from(pair[0]).ok(), u64::try_from(pair[1]).ok());
            match (offset, length) {
                (Some(offset), Some(length))
                    if offset >= lo && length > 0 && offset.checked_add(length).is_some_and(|e| e <= hi) =>
                {
                    Ok(Region::new(offset, length))
                }
                _ => Err(MpiClass::Intern),
            }
        })
        .collect()
}

/// The sorted, coalesced union of `regions`.
fn union(regions: &[Region]) -> Vec<Region> {
    let mut sorted: Vec<Region> = regions.to_vec();
    sorted.sort_by_key(|r| r.offset);
    let mut out: Vec<Region> = Vec::with_capacity(sorted.len());
    for region in sorted {
        match out.last_mut() {
            Some(last) if region.offset <= last.offset + last.length => {
                let end = (region.offset + region.length).max(last.offset + last.length);
                last.length = end - last.offset;
            }
            _ => out.push(region),
        }
    }
    out
}

/// Aggregator, writes: `pairs` (regions of all sources, in source order)
/// and `data` (their bytes, same order) inside window `[lo, hi)`.
pub fn write_window(file_id: u64, lo: u64, hi: u64, pairs: &[i64], data: &[u8]) -> MpiResult<()> {
    let regions = window_regions(pairs, lo, hi)?;
    if regions.iter().map(|r| r.length).sum::<u64>() != data.len() as u64 {
        return Err(MpiClass::Intern);
    }
    let covered = union(&regions);
    let (Some(first), Some(last)) = (covered.first(), covered.last()) else { return Ok(()) };
    let base = first.offset;
    let mut buffer = vec![0u8; (last.offset + last.length - base) as usize];
    let mut at = 0usize;
    // Source order: where regions overlap, the later (higher) rank wins.
    for region in &regions {
        let (from, length) = ((region.offset - base) as usize, region.length as usize);
        buffer[from..from + length].copy_from_slice(&data[at..at + length]);
        at += length;
    }
    let open = file::snapshot(file_id)?;
    if crate::remote::is_remote(&open.file) {
        let covered: Vec<(u64, u64)> = covered.iter().map(|r| (r.offset, r.length)).collect();
        return crate::remote::write_regions(&open.file, &covered, base, &buffer);
    }
    let client = client()?;
    if covered.len() == 1 {
        client.write_at(&open.file, base, &buffer)?;
        return Ok(());
    }
    let memory: Vec<Region> = covered.iter().map(|r| Region::new(r.offset - base, r.length)).collect();
    client.write_noncontig(
        &open.file,
        IoMethod::LIST_DEFAULT,
        &buffer,
        MemoryLayout::List(&memory),
        FileAccess::List(&covered),
    )?;
    Ok(())
}

/// Aggregator, reads: the bytes of `pairs` (regions inside `[lo, hi)`)
/// into `out`, one region after another.
pub fn read_window(file_id: u64, lo: u64, hi: u64, pairs: &[i64], out: &mut [u8]) -> MpiResult<()> {
    let regions = window_regions(pairs, lo, hi)?;
    if regions.iter().map(|r| r.length).sum::<u64>() != out.len() as u64 {
        return Err(MpiClass::Intern);
    }
    let covered = union(&regions);
    let (Some(first), Some(last)) = (covered.first(), covered.last()) else { return Ok(()) };
    let base = first.offset;
    let mut buffer = vec![0u8; (last.offset + last.length - base) as usize];
    let open = file::snapshot(file_id)?;
    if crate::remote::is_remote(&open.file) {
        let pairs: Vec<(u64, u64)> = covered.iter().map(|r| (r.offset, r.length)).collect();
        crate::remote::read_regions(&open.file, &pairs, base, &mut buffer)?;
    } else if covered.len() == 1 {
        let client = client()?;
        let got = client.read_at(&open.file, base, &mut buffer)?;
        buffer[got..].fill(0);
    } else {
        let client = client()?;
        let memory: Vec<Region> = covered.iter().map(|r| Region::new(r.offset - base, r.length)).collect();
        client.read_noncontig(
            &open.file,
            IoMethod::LIST_DEFAULT,
            &mut buffer,
            MemoryLayout::List(&memory),
            FileAccess::List(&covered),
        )?;
    }
    let mut at = 0usize;
    for region in &regions {
        let (from, length) = ((region.offset - base) as usize, region.length as usize);
        out[at..at + length].copy_from_slice(&buffer[from..from + length]);
        at += length;
    }
    Ok(())
}

/// The strip size of a file (file domains are aligned to it).
pub fn strip_bytes(file_id: u64) -> MpiResult<u64> {
    Ok(file::snapshot(file_id)?.file.layout.distribution.strip_bytes)
}

/// Data requests (and their bulk bytes) this process's client has sent so
/// far; `(0, 0)` before the client started. A debugging and test counter.
pub fn data_requests() -> (u64, u64) {
    let Ok(client) = client() else { return (0, 0) };
    let snapshot = client.counters();
    let mut requests = 0;
    let mut bytes = 0;
    for ((_, kind), tally) in &snapshot.tallies {
        if DATA_KINDS.contains(kind) {
            requests += tally.requests;
            bytes += tally.bytes;
        }
    }
    (requests, bytes)
}

// ---------- C ABI (declared in c/weft_mpiio.h; every call behind the panic guard) ----------

fn position(explicit: c_int, offset: i64) -> Position {
    if explicit != 0 {
        Position::Explicit(offset)
    } else {
        Position::Individual
    }
}

fn count_arg(count: i64) -> MpiResult<u64> {
    u64::try_from(count).map_err(|_| MpiClass::Count)
}

/// # Safety
/// `ptr` is valid for `len` elements, or `len == 0`.
unsafe fn slice_arg<'a, T>(ptr: *const T, len: i64) -> MpiResult<&'a [T]> {
    let len = usize::try_from(len).map_err(|_| MpiClass::Intern)?;
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(MpiClass::Intern);
    }
    // SAFETY: per this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// See [`range`]: stores the first file byte, one past the last, and the
/// bytes of the access.
///
/// # Safety
/// `start`, `end` and `bytes` are writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn weft_mpiio_coll_range(
    id: u64,
    write: c_int,
    explicit: c_int,
    offset: i64,
    count: i64,
    memory_type_id: u64,
    start: *mut i64,
    end: *mut i64,
    bytes: *mut i64,
) -> c_int {
    guarded(|| {
        let memory_type = types::get(memory_type_id)?;
        let (first, stop, total) = range(id, write != 0, position(explicit, offset), count_arg(count)?, &memory_type)?;
        let as_i64 = |v: u64| i64::try_from(v).map_err(|_| MpiClass::Arg);
        // SAFETY: per this function's contract.
        unsafe {
            store(start, as_i64(first)?)?;
            store(end, as_i64(stop)?)?;
            store(bytes, as_i64(total)?)
        }
    })
}

/// See [`begin`]; stores the plan id.
///
/// # Safety
/// `buffer` is the caller's MPI buffer for this access until
/// `weft_mpiio_coll_end`; `plan` is writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn weft_mpiio_coll_begin(
    id: u64,
    write: c_int,
    explicit: c_int,
    offset: i64,
    buffer: *mut c_void,
    count: i64,
    memory_type_id: u64,
    lo: i64,
    hi: i64,
    plan: *mut u64,
) -> c_int {
    guarded(|| {
        let memory_type = types::get(memory_type_id)?;
        let (lo, hi) =
            (u64::try_from(lo).map_err(|_| MpiClass::Intern)?, u64::try_from(hi).map_err(|_| MpiClass::Intern)?);
        // SAFETY: per this function's contract.
        let new_plan = unsafe {
            begin(id, write != 0, position(explicit, offset), buffer.cast(), count_arg(count)?, &memory_type, lo, hi)?
        };
        // SAFETY: per this function's contract.
        unsafe { store(plan, new_plan) }
    })
}

/// See [`round`]: `windows` and `counts` have `2 * destinations` words.
///
/// # Safety
/// As stated; `pairs` and `data` are writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_round(
    plan: u64,
    destinations: i64,
    windows: *const i64,
    counts: *mut i64,
    pairs: *mut *const i64,
    data: *mut *const u8,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let windows = unsafe { slice_arg(windows, 2 * destinations)? };
        if counts.is_null() {
            return Err(MpiClass::Intern);
        }
        // SAFETY: `counts` has `2 * destinations` writable words.
        let counts = unsafe { std::slice::from_raw_parts_mut(counts, windows.len()) };
        let (out_pairs, out_data) = round(plan, windows, counts)?;
        // SAFETY: per this function's contract.
        unsafe {
            store(pairs, out_pairs)?;
            store(data, out_data)
        }
    })
}

/// See [`deliver`].
///
/// # Safety
/// `data` has `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_deliver(plan: u64, data: *const u8, len: i64) -> c_int {
    // SAFETY: per this function's contract.
    guarded(|| deliver(plan, unsafe { slice_arg(data, len)? }))
}

/// See [`end`]; stores the bytes moved.
///
/// # Safety
/// The buffer given to `weft_mpiio_coll_begin` is still valid; `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_end(plan: u64, ok: c_int, bytes: *mut i64) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let moved = unsafe { end(plan, ok != 0)? };
        // SAFETY: per this function's contract.
        unsafe { store(bytes, moved as i64) }
    })
}

/// See [`write_window`]: `regions` pairs and `len` bytes of data.
///
/// # Safety
/// `pairs` has `2 * regions` readable words, `data` `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_write_window(
    id: u64,
    lo: i64,
    hi: i64,
    regions: i64,
    pairs: *const i64,
    data: *const u8,
    len: i64,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let (pairs, data) = unsafe { (slice_arg(pairs, 2 * regions)?, slice_arg(data, len)?) };
        let (lo, hi) =
            (u64::try_from(lo).map_err(|_| MpiClass::Intern)?, u64::try_from(hi).map_err(|_| MpiClass::Intern)?);
        write_window(id, lo, hi, pairs, data)
    })
}

/// See [`read_window`]: `regions` pairs; `data` receives `len` bytes.
///
/// # Safety
/// `pairs` has `2 * regions` readable words, `data` `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_read_window(
    id: u64,
    lo: i64,
    hi: i64,
    regions: i64,
    pairs: *const i64,
    data: *mut u8,
    len: i64,
) -> c_int {
    guarded(|| {
        // SAFETY: per this function's contract.
        let pairs = unsafe { slice_arg(pairs, 2 * regions)? };
        let len = usize::try_from(len).map_err(|_| MpiClass::Intern)?;
        let out: &mut [u8] = if len == 0 {
            &mut []
        } else if data.is_null() {
            return Err(MpiClass::Intern);
        } else {
            // SAFETY: per this function's contract.
            unsafe { std::slice::from_raw_parts_mut(data, len) }
        };
        let (lo, hi) =
            (u64::try_from(lo).map_err(|_| MpiClass::Intern)?, u64::try_from(hi).map_err(|_| MpiClass::Intern)?);
        read_window(id, lo, hi, pairs, out)
    })
}

/// The strip size of a file.
///
/// # Safety
/// `strip` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_coll_strip(id: u64, strip: *mut i64) -> c_int {
    guarded(|| {
        let bytes = i64::try_from(strip_bytes(id)?).map_err(|_| MpiClass::Intern)?;
        // SAFETY: per this function's contract.
        unsafe { store(strip, bytes) }
    })
}

/// Debug counter: data requests and bytes this process's client sent.
///
/// # Safety
/// `requests` and `bytes` are writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_data_requests(requests: *mut i64, bytes: *mut i64) -> c_int {
    guarded(|| {
        let (sent, moved) = data_requests();
        // SAFETY: per this function's contract.
        unsafe {
            store(requests, sent as i64)?;
            store(bytes, moved as i64)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlaps_and_neighbours() {
        let regions =
            [Region::new(10, 5), Region::new(0, 4), Region::new(4, 2), Region::new(12, 10), Region::new(30, 1)];
        assert_eq!(union(&regions), vec![Region::new(0, 6), Region::new(10, 12), Region::new(30, 1)]);
        assert!(union(&[]).is_empty());
    }

    #[test]
    fn window_regions_are_checked() {
        assert_eq!(window_regions(&[10, 5, 20, 1], 10, 21).unwrap(), vec![Region::new(10, 5), Region::new(20, 1)]);
        assert_eq!(window_regions(&[9, 5], 10, 21), Err(MpiClass::Intern));
        assert_eq!(window_regions(&[20, 2], 10, 21), Err(MpiClass::Intern));
        assert_eq!(window_regions(&[12, 0], 10, 21), Err(MpiClass::Intern));
        assert_eq!(window_regions(&[-1, 2], 0, 21), Err(MpiClass::Intern));
    }

    #[test]
    fn rounds_clip_pieces_to_windows_in_destination_order() {
        // File regions [0, 10), [20, 50), [60, 64): stream 0..10, 10..40, 40..44.
        let byte = Dataloop::bytes(1).unwrap();
        let file_type = std::sync::Arc::new(Dataloop::hindexed(&[10, 30, 4], &[0, 20, 60], &byte).unwrap());
        let view = View { displacement: 0, etype_bytes: 1, file_type };
        let user: Vec<u8> = (0..44).collect();
        let plan = Plan {
            file_id: 0,
            write: true,
            individual: false,
            etype_bytes: 1,
            view,
            view_offset: 0,
            base: user.as_ptr() as usize,
            span_bytes: user.len(),
            memory: None,
            total: 44,
            available: 44,
            next: Vec::new(),
            out_pairs: Vec::new(),
            out_data: Vec::new(),
            out_stream: Vec::new(),
        };
        let id = insert(plan).unwrap();
        let mut counts = [0i64; 6];
        // dest 0: [5, 25), dest 1: empty, dest 2: [25, 64)
        round(id, &[5, 25, 0, 0, 25, 64], &mut counts).unwrap();
        assert_eq!(counts, [2, 10, 0, 0, 2, 29]);
        let (pairs, data) = with_plan(id, |p| Ok((p.out_pairs.clone(), p.out_data.clone()))).unwrap();
        assert_eq!(pairs, vec![5, 5, 20, 5, 25, 25, 60, 4]);
        let mut expected: Vec<u8> = (5..10).chain(10..15).collect();
        expected.extend(15..40);
        expected.extend(40..44);
        assert_eq!(data, expected);
        // Next round: later windows; each destination resumes where it stopped.
        round(id, &[25, 30, 0, 0, 64, 70], &mut counts).unwrap();
        assert_eq!(counts, [1, 5, 0, 0, 0, 0]);
        let data = with_plan(id, |p| Ok(p.out_data.clone())).unwrap();
        assert_eq!(data, (15..20).collect::<Vec<u8>>());
        // SAFETY: a write plan touches no user memory at end.
        assert_eq!(unsafe { end(id, true) }.unwrap(), 44);
        drop(user);
    }

    #[test]
    fn locate_finds_the_first_byte_at_or_after_an_offset() {
        let byte = Dataloop::bytes(1).unwrap();
        let file_type = std::sync::Arc::new(Dataloop::hindexed(&[10, 30, 4], &[0, 20, 60], &byte).unwrap());
        let view = View { displacement: 0, etype_bytes: 1, file_type };
        assert_eq!(locate(&view, 0, 44, 0).unwrap(), 0);
        assert_eq!(locate(&view, 0, 44, 5).unwrap(), 5);
        assert_eq!(locate(&view, 0, 44, 12).unwrap(), 10);
        assert_eq!(locate(&view, 0, 44, 25).unwrap(), 15);
        assert_eq!(locate(&view, 0, 44, 55).unwrap(), 40);
        assert_eq!(locate(&view, 0, 44, 64).unwrap(), 44);
    }
}
