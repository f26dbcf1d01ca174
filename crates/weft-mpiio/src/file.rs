//! Open Weft files: the view, the individual file pointer, and data moved
//! through the client's datatype I/O.
//!
//! Open is split so the C layer can make it collective: one rank calls
//! [`lookup`] (create or open, checking the access mode) and broadcasts the
//! resulting blob *or the error*; every rank then calls [`attach`]. Files
//! are kept by numeric id; the C handle holds the id.
//!
//! Reads past end of file: the status counts only the bytes before end of
//! file; the rest of the user buffer is left untouched.
//!
//! The independent I/O method (`weft_io_method` hint) is kept per file, and
//! so is the window (`cb_buffer_size` hint, default
//! [`weft_proto::limits::MPIIO_WINDOW_BYTES_DEFAULT`]): the most bytes a
//! bounce buffer holds (reads into a noncontiguous memory type through a
//! contiguous view, and reads crossing end of file through any view go
//! window by window). Everything else moves straight between the user's
//! memory and the wire (see `weft_client::noncontig`).
//!
//! Views: [`set_view`] refuses (`MPI_ERR_IO`, as ROMIO) file types and
//! etypes whose typemap has negative, decreasing or overlapping
//! displacements (MPI-3.1 §13.3 calls them erroneous).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use weft_client::{Client, CreateOptions, File, FileAccess, IoMethod, MemoryLayout};
use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region};
use weft_proto::message::FileLayout;
use weft_proto::Handle;

use crate::error::{MpiClass, MpiResult};
use crate::runtime::client;

/// Access-mode bits of the C ABI (the C layer maps `MPI_MODE_*` to these).
pub mod amode {
    /// `MPI_MODE_CREATE`.
    pub const CREATE: u32 = 1;
    /// `MPI_MODE_EXCL`.
    pub const EXCL: u32 = 2;
    /// `MPI_MODE_RDONLY`.
    pub const RDONLY: u32 = 4;
    /// `MPI_MODE_WRONLY`.
    pub const WRONLY: u32 = 8;
    /// `MPI_MODE_RDWR`.
    pub const RDWR: u32 = 16;
    /// `MPI_MODE_DELETE_ON_CLOSE`.
    pub const DELETE_ON_CLOSE: u32 = 32;
    /// `MPI_MODE_APPEND`.
    pub const APPEND: u32 = 64;
    /// `MPI_MODE_UNIQUE_OPEN` (accepted, no effect).
    pub const UNIQUE_OPEN: u32 = 128;
    /// `MPI_MODE_SEQUENTIAL`.
    pub const SEQUENTIAL: u32 = 256;
}

/// Regions walked per batch when a view must be scanned.
const SCAN_REGIONS_PER_BATCH: usize = 4096;

/// Walks `cursor` [`SCAN_REGIONS_PER_BATCH`] regions at a time, calling `f`
/// for each until it breaks (the scans of a view or memory type share it).
fn for_each_region<B>(cursor: &mut Cursor<'_>, mut f: impl FnMut(&Region) -> ControlFlow<B>) -> ControlFlow<B> {
    let mut batch: Vec<Region> = Vec::new();
    loop {
        batch.clear();
        if cursor.next_batch(BatchLimits::regions(SCAN_REGIONS_PER_BATCH), &mut batch) == 0 {
            return ControlFlow::Continue(());
        }
        for region in &batch {
            f(region)?;
        }
    }
}

/// A file view: `file_type` tiled from `displacement`, counted in etypes.
#[derive(Clone, Debug)]
pub struct View {
    /// Byte offset of the first tile.
    pub displacement: i64,
    /// Bytes per etype.
    pub etype_bytes: u64,
    /// The file type.
    pub file_type: Arc<Dataloop>,
}

impl View {
    pub(crate) fn is_contiguous(&self) -> bool {
        let t = &self.file_type;
        t.root().is_contiguous() && t.true_lb() == 0 && t.extent() == t.size() as i64
    }
}

/// One open file of this process.
#[derive(Clone, Debug)]
pub struct OpenFile {
    /// The Weft file.
    pub file: File,
    /// Path inside Weft (for delete-on-close).
    pub path: String,
    /// Access-mode bits ([`amode`]).
    pub amode: u32,
    /// The current view.
    pub view: View,
    /// Individual file pointer, in etypes of the view.
    pub position_etypes: i64,
    /// How independent accesses go over the wire (`weft_io_method` hint).
    pub io_method: IoMethod,
    /// Bounce and collective window in bytes (`cb_buffer_size` hint).
    pub window_bytes: u64,
}

static FILES: Mutex<Option<(u64, HashMap<u64, OpenFile>)>> = Mutex::new(None);

fn with_files<T>(body: impl FnOnce(&mut u64, &mut HashMap<u64, OpenFile>) -> MpiResult<T>) -> MpiResult<T> {
    let mut guard = FILES.lock().map_err(|_| MpiClass::Intern)?;
    let (next_id, files) = guard.get_or_insert_with(|| (1, HashMap::new()));
    body(next_id, files)
}

/// A copy of an open file's state.
pub fn snapshot(id: u64) -> MpiResult<OpenFile> {
    with_files(|_, files| files.get(&id).cloned().ok_or(MpiClass::BadFile))
}

pub(crate) fn update(id: u64, body: impl FnOnce(&mut OpenFile) -> MpiResult<()>) -> MpiResult<()> {
    with_files(|_, files| body(files.get_mut(&id).ok_or(MpiClass::BadFile)?))
}

/// Checks an access mode as MPI-3.1 §13.2.1 requires.
pub fn check_amode(bits: u32) -> MpiResult<()> {
    let kinds = [amode::RDONLY, amode::WRONLY, amode::RDWR].iter().filter(|k| bits & **k != 0).count();
    let read_only_creates = bits & amode::RDONLY != 0 && bits & (amode::CREATE | amode::EXCL) != 0;
    let sequential_rdwr = bits & amode::RDWR != 0 && bits & amode::SEQUENTIAL != 0;
    if kinds != 1 || read_only_creates || sequential_rdwr {
        return Err(MpiClass::Amode);
    }
    Ok(())
}

/// What the opening rank broadcasts.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct OpenBlob {
    handle: Handle,
    layout: FileLayout,
    size_bytes: u64,
}

/// Creates or opens `path` (the opening rank only); returns the blob to broadcast.
pub fn lookup(path: &str, bits: u32, strip_bytes: Option<u64>, stripe_count: Option<u32>) -> MpiResult<Vec<u8>> {
    check_amode(bits)?;
    if crate::remote::is_name(path) {
        // rfs: and discard: names (crate::remote): a marker handle, set at attach.
        let size_bytes = crate::remote::lookup(path, bits)?;
        let layout = FileLayout {
            distribution: weft_proto::layout::Distribution {
                strip_bytes: crate::remote::REMOTE_STRIP_BYTES,
                stripe_count: 1,
            },
            datafiles: Vec::new(),
        };
        let blob = OpenBlob { handle: Handle(0), layout, size_bytes };
        return postcard::to_allocvec(&blob).map_err(|_| MpiClass::Intern);
    }
    let client = client()?;
    let mut wanted = 0;
    if bits & (amode::RDONLY | amode::RDWR) != 0 {
        wanted |= weft_client::access::READ;
    }
    if bits & (amode::WRONLY | amode::RDWR) != 0 {
        wanted |= weft_client::access::WRITE;
    }
    let file = if bits & amode::CREATE != 0 {
        let exclusive = bits & amode::EXCL != 0;
        let options = CreateOptions { mode: None, strip_bytes, stripe_count, exclusive };
        match client.create(path, options) {
            // Another process (e.g. every rank opening on MPI_COMM_SELF)
            // created it first: open it (the client does the same inside
            // one create; this covers the name appearing in between).
            Err(weft_proto::ErrorCode::Exists) if !exclusive => client.open(path, wanted)?,
            other => other?,
        }
    } else {
        client.open(path, wanted)?
    };
    let size_bytes = if bits & amode::APPEND != 0 { client.file_size(&file)? } else { 0 };
    let blob = OpenBlob { handle: file.handle, layout: file.layout, size_bytes };
    postcard::to_allocvec(&blob).map_err(|_| MpiClass::Intern)
}

/// Registers an opened file on this rank from the broadcast blob.
pub fn attach(path: &str, blob: &[u8], bits: u32) -> MpiResult<u64> {
    let blob: OpenBlob = postcard::from_bytes(blob).map_err(|_| MpiClass::Intern)?;
    let view = View {
        displacement: 0,
        etype_bytes: 1,
        file_type: Arc::new(Dataloop::bytes(1).map_err(|_| MpiClass::Intern)?),
    };
    let position_etypes = i64::try_from(blob.size_bytes).map_err(|_| MpiClass::Io)?;
    let file = File { handle: blob.handle, layout: blob.layout };
    let open = OpenFile {
        file,
        path: path.to_string(),
        amode: bits,
        view,
        position_etypes,
        io_method: IoMethod::Datatype,
        window_bytes: weft_proto::limits::MPIIO_WINDOW_BYTES_DEFAULT,
    };
    let id = with_files(|next_id, files| {
        let id = *next_id;
        *next_id += 1;
        files.insert(id, open);
        Ok(id)
    })?;
    if crate::remote::is_name(path) {
        let registered = update(id, |open| {
            open.file.handle = crate::remote::handle_of(id);
            Ok(())
        })
        .and_then(|()| crate::remote::attach(id, path, bits));
        if let Err(class) = registered {
            with_files(|_, files| Ok(files.remove(&id)))?;
            return Err(class);
        }
    }
    Ok(id)
}

/// Forgets a file; `remove` unlinks it (delete-on-close, opening rank only).
pub fn detach(id: u64, remove: bool) -> MpiResult<()> {
    let flushed = crate::object_cache::close(id);
    let open = with_files(|_, files| files.remove(&id).ok_or(MpiClass::BadFile))?;
    if crate::remote::is_remote(&open.file) {
        return crate::remote::close(id, remove);
    }
    if remove && open.amode & amode::DELETE_ON_CLOSE != 0 {
        client()?.unlink(&open.path)?;
    }
    flushed
}

/// Removes a file by path (`MPI_File_delete`).
pub fn unlink(path: &str) -> MpiResult<()> {
    if crate::remote::is_name(path) {
        return crate::remote::delete(path);
    }
    Ok(client()?.unlink(path)?)
}

/// File size in bytes.
pub fn size(id: u64) -> MpiResult<u64> {
    crate::object_cache::flush(id)?;
    size_of(&snapshot(id)?)
}

/// Size in bytes of an open file (Weft, or a layered file of crate::remote).
pub(crate) fn size_of(open: &OpenFile) -> MpiResult<u64> {
    if crate::remote::is_remote(&open.file) {
        return crate::remote::size(&open.file);
    }
    Ok(client()?.file_size(&open.file)?)
}

/// Sets the file size (one rank calls this; the C layer synchronizes).
pub fn set_size(id: u64, size_bytes: u64) -> MpiResult<()> {
    crate::object_cache::flush(id)?;
    let open = snapshot(id)?;
    if open.amode & amode::RDONLY != 0 {
        return Err(MpiClass::ReadOnly);
    }
    if crate::remote::is_remote(&open.file) {
        return crate::remote::set_size(&open.file, size_bytes);
    }
    Ok(client()?.truncate_file(&open.file, size_bytes)?)
}

/// Makes written data durable.
pub fn sync(id: u64) -> MpiResult<()> {
    crate::object_cache::flush(id)?;
    let open = snapshot(id)?;
    if crate::remote::is_remote(&open.file) {
        return crate::remote::sync(&open.file);
    }
    Ok(client()?.fsync(&open.file)?)
}

/// Whether one instance of `dataloop` has a typemap with non-negative,
/// non-decreasing, non-overlapping displacements, as MPI requires of
/// etypes and file types (zero-size types with holes pass).
pub fn monotone(dataloop: &Dataloop) -> bool {
    if dataloop.size() == 0 {
        return true;
    }
    if dataloop.true_lb() < 0 {
        return false;
    }
    let Ok(mut cursor) = Cursor::new(dataloop, 1, 0) else { return false };
    let mut end = 0u64;
    for_each_region(&mut cursor, |region| {
        if region.offset < end {
            return ControlFlow::Break(());
        }
        end = region.offset + region.length;
        ControlFlow::Continue(())
    })
    .is_continue()
}

/// Sets the view and resets the individual file pointer. Erroneous types
/// (see [`monotone`]) are refused with [`MpiClass::Io`], as ROMIO does.
pub fn set_view(id: u64, displacement: i64, etype: &Dataloop, file_type: Arc<Dataloop>) -> MpiResult<()> {
    let etype_bytes = etype.size();
    if displacement < 0 || etype_bytes == 0 || !whole_multiple(file_type.size(), etype_bytes) || file_type.extent() <= 0
    {
        return Err(MpiClass::Arg);
    }
    if !monotone(etype) || !monotone(&file_type) {
        return Err(MpiClass::Io);
    }
    crate::object_cache::view_changing(id)?;
    crate::remote::set_view(id, displacement, etype_bytes, &file_type)?;
    update(id, |open| {
        open.view = View { displacement, etype_bytes, file_type };
        open.position_etypes = 0;
        Ok(())
    })
}

/// Selects the independent I/O method of a file (`weft_io_method` hint:
/// 0 datatype, 1 list, 2 posix, 3 sieve; see `c/nonblocking.h`). `sieve`
/// is datatype I/O: Weft sieves on the servers, per datafile, under their
/// byte-range exclusion, not with client-side read-modify-write.
pub fn set_io_method(id: u64, method: i32) -> MpiResult<()> {
    let method = match method {
        0 | 3 => IoMethod::Datatype,
        1 => IoMethod::LIST_DEFAULT,
        2 => IoMethod::Posix,
        _ => return Err(MpiClass::Arg),
    };
    update(id, |open| {
        open.io_method = method;
        Ok(())
    })
}

/// Sets the regions per request of list I/O (hint `weft_list_regions`,
/// clamped to `1..=LIST_REGIONS_MAX`) if the file's method is list I/O.
pub fn set_list_regions(id: u64, regions: i64) -> MpiResult<()> {
    let regions =
        u32::try_from(regions.clamp(1, i64::from(weft_proto::limits::LIST_REGIONS_MAX))).map_err(|_| MpiClass::Arg)?;
    update(id, |open| {
        if let IoMethod::List { .. } = open.io_method {
            open.io_method = IoMethod::List { regions_per_request: regions };
        }
        Ok(())
    })
}

/// Sets the window of a file (`cb_buffer_size` hint), clamped to
/// `[MPIIO_WINDOW_BYTES_MIN, MPIIO_WINDOW_BYTES_MAX]`.
pub fn set_window(id: u64, bytes: u64) -> MpiResult<()> {
    use weft_proto::limits::{MPIIO_WINDOW_BYTES_MAX, MPIIO_WINDOW_BYTES_MIN};
    update(id, |open| {
        open.window_bytes = bytes.clamp(MPIIO_WINDOW_BYTES_MIN, MPIIO_WINDOW_BYTES_MAX);
        Ok(())
    })
}

/// The individual file pointer, in etypes.
pub fn position(id: u64) -> MpiResult<i64> {
    Ok(snapshot(id)?.position_etypes)
}

/// Where a seek lands (`whence`: 0 set, 1 current, 2 end).
pub fn seek(id: u64, offset: i64, whence: i32) -> MpiResult<()> {
    let open = snapshot(id)?;
    let base = match whence {
        0 => 0,
        1 => open.position_etypes,
        2 => {
            crate::object_cache::flush(id)?;
            eof_etypes(&open)?
        }
        _ => return Err(MpiClass::Arg),
    };
    let target = base.checked_add(offset).filter(|t| *t >= 0).ok_or(MpiClass::Arg)?;
    update(id, |open| {
        open.position_etypes = target;
        Ok(())
    })
}

/// The absolute byte offset of view position `offset_etypes`.
pub fn byte_offset(id: u64, offset_etypes: i64) -> MpiResult<i64> {
    let open = snapshot(id)?;
    let view_offset = view_bytes(&open.view, offset_etypes)?;
    let view = &open.view;
    if view.is_contiguous() {
        return view.displacement.checked_add(view_offset as i64).ok_or(MpiClass::Arg);
    }
    let tiles = view_offset / view.file_type.size() + 1;
    let mut cursor = Cursor::new(&view.file_type, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
    cursor.seek(view_offset).map_err(|_| MpiClass::Arg)?;
    let mut out = Vec::new();
    cursor.next_batch(BatchLimits::regions(1), &mut out);
    let first = out.first().ok_or(MpiClass::Arg)?;
    i64::try_from(first.offset).map_err(|_| MpiClass::Arg)
}

/// `value % divisor == 0` (`u64::is_multiple_of` needs Rust 1.87; MSRV is 1.80).
#[allow(clippy::manual_is_multiple_of)]
pub(crate) fn whole_multiple(value: u64, divisor: u64) -> bool {
    value % divisor == 0
}

pub(crate) fn view_bytes(view: &View, offset_etypes: i64) -> MpiResult<u64> {
    let offset = u64::try_from(offset_etypes).map_err(|_| MpiClass::Arg)?;
    offset.checked_mul(view.etype_bytes).ok_or(MpiClass::Arg)
}

/// End of file as a view position in etypes (rounded up).
pub(crate) fn eof_etypes(open: &OpenFile) -> MpiResult<i64> {
    let size_bytes = size_of(open)?;
    let view = &open.view;
    let span = (size_bytes as i64).saturating_sub(view.displacement).max(0) as u64;
    let tiles = span / view.file_type.extent() as u64 + 1;
    let stream = tiles.checked_mul(view.file_type.size()).ok_or(MpiClass::Arg)?;
    let before = bytes_before_eof(view, 0, stream, size_bytes)?;
    Ok(before.div_ceil(view.etype_bytes) as i64)
}

/// How many of the `total` view bytes from `view_offset` lie before `size_bytes`.
pub(crate) fn bytes_before_eof(view: &View, view_offset: u64, total: u64, size_bytes: u64) -> MpiResult<u64> {
    if view.is_contiguous() {
        let start = (view.displacement as u64).saturating_add(view_offset);
        return Ok(size_bytes.saturating_sub(start).min(total));
    }
    let end = view_offset.checked_add(total).ok_or(MpiClass::Arg)?;
    let tiles = end.div_ceil(view.file_type.size());
    let mut cursor = Cursor::new(&view.file_type, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
    cursor.seek(view_offset).map_err(|_| MpiClass::Arg)?;
    cursor.set_end(end).map_err(|_| MpiClass::Arg)?;
    let mut before = 0u64;
    let _ = for_each_region(&mut cursor, |region| {
        if region.offset >= size_bytes {
            return ControlFlow::Break(());
        }
        before += region.length.min(size_bytes - region.offset);
        if region.offset + region.length > size_bytes {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    Ok(before)
}

/// Memory of one access: where it starts relative to the user pointer, and
/// how the stream lies in it.
pub(crate) struct MemoryPlan {
    /// Offset of the span's first byte from the user pointer.
    pub(crate) start_offset: i64,
    /// Bytes of the span.
    pub(crate) span_bytes: usize,
    /// The memory type placed at the span's start, or `None` for contiguous memory.
    pub(crate) shaped: Option<(Dataloop, u64)>,
}

pub(crate) fn memory_plan(memory_type: &Dataloop, count: u64) -> MpiResult<MemoryPlan> {
    let total = count.checked_mul(memory_type.size()).ok_or(MpiClass::Count)?;
    let contiguous = memory_type.root().is_contiguous()
        && memory_type.true_lb() == 0
        && (count <= 1 || memory_type.extent() == memory_type.size() as i64);
    if contiguous {
        let span_bytes = usize::try_from(total).map_err(|_| MpiClass::Count)?;
        return Ok(MemoryPlan { start_offset: 0, span_bytes, shaped: None });
    }
    let last = (count as i128 - 1) * memory_type.extent() as i128;
    let lo = memory_type.true_lb() as i128 + last.min(0);
    let hi = memory_type.true_lb() as i128 + memory_type.true_extent() as i128 + last.max(0);
    let start_offset = i64::try_from(lo).map_err(|_| MpiClass::Count)?;
    let span_bytes = usize::try_from(hi - lo).map_err(|_| MpiClass::Count)?;
    let shaped = if start_offset == 0 {
        (memory_type.clone(), count)
    } else {
        let tiled = Dataloop::contiguous(count, memory_type).map_err(|_| MpiClass::Type)?;
        (Dataloop::hindexed_block(1, &[-start_offset], &tiled).map_err(|_| MpiClass::Type)?, 1)
    };
    Ok(MemoryPlan { start_offset, span_bytes, shaped: Some(shaped) })
}

/// Where an access starts: an explicit offset or the individual pointer.
#[derive(Clone, Copy, Debug)]
pub enum Position {
    /// `_at` calls: this offset in etypes.
    Explicit(i64),
    /// The individual file pointer, advanced afterwards.
    Individual,
}

/// One access, checked and planned on the caller's thread: everything
/// needed to move its data, owned, so that it can also run in the
/// background (`crate::nonblocking`).
pub(crate) struct Prepared {
    pub(crate) file: File,
    pub(crate) view: View,
    pub(crate) write: bool,
    method: IoMethod,
    /// Address of the first byte of the memory span (user pointer plus the
    /// memory type's lowest offset).
    pub(crate) base: usize,
    pub(crate) span_bytes: usize,
    pub(crate) shaped: Option<(Dataloop, u64)>,
    pub(crate) view_offset: u64,
    /// Bytes of the access (the data stream's length).
    pub(crate) total: u64,
    /// Bytes per etype of the view.
    pub(crate) etype_bytes: u64,
    /// Bounce window in bytes.
    window_bytes: u64,
}

/// Checks an access against the file's access mode and the etype rule;
/// returns its view offset and its length in bytes. Shared by the
/// independent ([`prepare`]) and collective (`crate::collective`) paths.
pub(crate) fn access_bytes(
    open: &OpenFile,
    write: bool,
    at: Position,
    count: u64,
    memory_type: &Dataloop,
) -> MpiResult<(u64, u64)> {
    if write && open.amode & amode::RDONLY != 0 {
        return Err(MpiClass::ReadOnly);
    }
    if !write && open.amode & amode::WRONLY != 0 {
        return Err(MpiClass::Access);
    }
    let offset_etypes = match at {
        Position::Explicit(offset) => offset,
        Position::Individual => open.position_etypes,
    };
    let view_offset = view_bytes(&open.view, offset_etypes)?;
    let total = count.checked_mul(memory_type.size()).ok_or(MpiClass::Count)?;
    if !whole_multiple(total, open.view.etype_bytes) {
        return Err(MpiClass::Type);
    }
    Ok((view_offset, total))
}

/// Checks and plans an access of `count` instances of `memory_type` at
/// `buffer` (see [`transfer`]); moves nothing and leaves the pointer alone.
///
/// # Safety
/// As [`transfer`]; the memory must stay valid until the access has run.
pub(crate) unsafe fn prepare(
    id: u64,
    write: bool,
    at: Position,
    buffer: *mut u8,
    count: u64,
    memory_type: &Dataloop,
) -> MpiResult<Prepared> {
    let open = snapshot(id)?;
    let (view_offset, total) = access_bytes(&open, write, at, count, memory_type)?;
    let plan = memory_plan(memory_type, count)?;
    let base =
        if total == 0 { buffer as usize } else { (buffer as usize).wrapping_add_signed(plan.start_offset as isize) };
    Ok(Prepared {
        etype_bytes: open.view.etype_bytes,
        window_bytes: open.window_bytes.max(1),
        file: open.file,
        view: open.view,
        write,
        method: open.io_method,
        base,
        span_bytes: plan.span_bytes,
        shaped: plan.shaped,
        view_offset,
        total,
    })
}

/// Advances the individual file pointer by `etypes`.
pub(crate) fn advance(id: u64, etypes: i64) -> MpiResult<()> {
    update(id, |open| {
        open.position_etypes += etypes;
        Ok(())
    })
}

/// Accesses of at least this many bytes run as a task on the runtime
/// (`WEFT_MPIIO_SPAWN_BYTES`, default 256 KiB).
fn spawn_bytes_min() -> u64 {
    static MIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| std::env::var("WEFT_MPIIO_SPAWN_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(256 << 10))
}

/// Reads or writes `count` instances of `memory_type` at `buffer`.
///
/// # Safety
/// `buffer` plus the memory type's span for `count` instances is valid
/// user memory, writable for reads, as MPI requires of its caller.
pub unsafe fn transfer(
    id: u64,
    write: bool,
    at: Position,
    buffer: *mut u8,
    count: u64,
    memory_type: &Dataloop,
) -> MpiResult<u64> {
    // SAFETY: per this function's contract.
    let prepared = unsafe { prepare(id, write, at, buffer, count, memory_type)? };
    let etype_bytes = prepared.etype_bytes;
    // The object cache, or atomic mode by objects (crate::object_cache).
    // SAFETY: per this function's contract.
    if let Some(moved) = unsafe { crate::object_cache::intercept(id, &prepared)? } {
        if let Position::Individual = at {
            advance(id, (moved / etype_bytes) as i64)?;
        }
        return Ok(moved);
    }
    let moved = if prepared.total == 0 {
        0
    } else if crate::remote::is_remote(&prepared.file) {
        // SAFETY: per this function's contract.
        unsafe { crate::remote::run(&prepared)? }
    } else {
        let client = client()?;
        // Atomic mode: a byte-range lock on the access's file bytes (crate::shared).
        let lock = crate::shared::lock_access(id, &prepared.view, write, prepared.view_offset, prepared.total)?;
        let moved = if prepared.total >= spawn_bytes_min() {
            // A large access is many frames from several servers: run it
            // as a task on the runtime, so each frame wakes the task on the
            // worker that read it, and this thread wakes once at the end.
            // (A small one runs on this thread: its request goes out from
            // here without waking a worker.)
            let outcome = client.block_on(async move {
                // SAFETY: the memory is the caller's until this task has
                // finished, which this thread waits for here.
                tokio::spawn(async move { unsafe { run(client.client(), &prepared) }.await }).await
            });
            // Err: the task panicked (it no longer touches the memory).
            outcome.unwrap_or(Err(MpiClass::Intern))
        } else {
            // SAFETY: the memory is the caller's for the duration of this call.
            client.block_on(unsafe { run(client.client(), &prepared) })
        };
        crate::shared::unlock_access(id, lock)?;
        moved?
    };
    if let Position::Individual = at {
        advance(id, (moved / etype_bytes) as i64)?;
    }
    Ok(moved)
}

/// Moves the data of a prepared access; returns the bytes moved (reads:
/// only those before end of file).
///
/// Reads past end of file leave the user's memory beyond the data
/// untouched (MPI semantics). A contiguous view reads first, straight into
/// contiguous memory (through a bounce buffer into a memory type), and the
/// file size is asked only when a datafile comes back short
/// (`Client::read_at_within_eof`). Other views ask the size first; a short
/// read goes through a bounce buffer of the available bytes, which are then
/// scattered into the memory type.
///
/// # Safety
/// The memory of `prepared` is valid (writable for reads) until this
/// future completes and nothing else accesses it meanwhile.
pub(crate) async unsafe fn run(client: &Client, prepared: &Prepared) -> MpiResult<u64> {
    let p = prepared;
    if p.total == 0 {
        return Ok(0);
    }
    let view = &p.view;
    let access = FileAccess::Datatype {
        file_type: &view.file_type,
        displacement: view.displacement,
        view_offset: p.view_offset,
    };
    let memory = match &p.shaped {
        None => MemoryLayout::Contiguous,
        Some((memory_type, count)) => MemoryLayout::Datatype { memory_type, count: *count },
    };
    // A contiguous view makes the access one contiguous file range: plain
    // striped I/O, with no file type to encode and walk per call. (List
    // I/O, and posix with a noncontiguous memory type — one request per
    // piece — keep their own paths, as the hint asks.)
    let plain = view.is_contiguous()
        && match p.method {
            IoMethod::Datatype => true,
            IoMethod::Posix => p.shaped.is_none(),
            IoMethod::List { .. } => false,
        };
    let file_range = if plain {
        Some(
            u64::try_from(view.displacement)
                .map_err(|_| MpiClass::Arg)?
                .checked_add(p.view_offset)
                .ok_or(MpiClass::Arg)?,
        )
    } else {
        None
    };
    if p.write {
        // SAFETY: `base..base+span` is the user's buffer (see `prepare`).
        let data = unsafe { std::slice::from_raw_parts(p.base as *const u8, p.span_bytes) };
        match file_range {
            Some(offset) if p.shaped.is_none() => client.write_at(&p.file, offset, data).await?,
            _ => client.write_noncontig(&p.file, p.method, data, memory, access).await?,
        }
        return Ok(p.total);
    }
    if let Some(offset) = file_range {
        // Read first; the size is asked only if a datafile comes back short,
        // and the memory past end of file is never written.
        return match &p.shaped {
            None => {
                // SAFETY: as below (contiguous memory: `span_bytes == total`).
                let data = unsafe { std::slice::from_raw_parts_mut(p.base as *mut u8, p.span_bytes) };
                Ok(client.read_at_within_eof(&p.file, offset, data).await? as u64)
            }
            Some(_) => {
                // Window by window through a bounce buffer of at most the window.
                let window = p.window_bytes.min(p.total);
                let mut bounce = vec![0u8; usize::try_from(window).map_err(|_| MpiClass::Count)?];
                let mut done = 0u64;
                while done < p.total {
                    let n = (p.total - done).min(window) as usize;
                    let got = client.read_at_within_eof(&p.file, offset + done, &mut bounce[..n]).await?;
                    // SAFETY: as below.
                    unsafe { scatter(p, done, &bounce[..got])? };
                    done += got as u64;
                    if got < n {
                        break;
                    }
                }
                Ok(done)
            }
        };
    }
    let size_bytes = client.file_size(&p.file).await?;
    let available = bytes_before_eof(view, p.view_offset, p.total, size_bytes)?;
    if available == p.total {
        // SAFETY: as above, and MPI gives the callee the buffer for writing.
        // Holes in a noncontiguous memory type are never written (the
        // client scatters only the type's bytes), but a Rust slice must
        // cover initialised memory: user buffers are initialised C memory.
        let data = unsafe { std::slice::from_raw_parts_mut(p.base as *mut u8, p.span_bytes) };
        client.read_noncontig(&p.file, p.method, data, memory, access).await?;
    } else if available > 0 {
        // The bytes before end of file, window by window through a bounce
        // buffer of at most the window, then scattered into the memory type.
        let window = p.window_bytes.min(available);
        let mut bounce = vec![0u8; usize::try_from(window).map_err(|_| MpiClass::Count)?];
        let mut done = 0u64;
        while done < available {
            let n = (available - done).min(window) as usize;
            let access = FileAccess::Datatype {
                file_type: &view.file_type,
                displacement: view.displacement,
                view_offset: p.view_offset + done,
            };
            client.read_noncontig(&p.file, p.method, &mut bounce[..n], MemoryLayout::Contiguous, access).await?;
            // SAFETY: as above.
            unsafe { scatter(p, done, &bounce[..n])? };
            done += n as u64;
        }
    }
    Ok(available)
}

/// Copies `data` (stream bytes from `stream_from`) into the user's memory.
///
/// # Safety
/// As [`run`].
pub(crate) unsafe fn scatter(p: &Prepared, stream_from: u64, data: &[u8]) -> MpiResult<()> {
    let end = stream_from.checked_add(data.len() as u64).filter(|e| *e <= p.total).ok_or(MpiClass::Intern)?;
    let Some((shaped, count)) = &p.shaped else {
        // SAFETY: `end <= total <= span_bytes` bytes at `base`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (p.base as *mut u8).add(stream_from as usize), data.len())
        };
        return Ok(());
    };
    let mut cursor = Cursor::new(shaped, *count, 0).map_err(|_| MpiClass::Type)?;
    cursor.set_end(end).map_err(|_| MpiClass::Type)?;
    cursor.seek(stream_from).map_err(|_| MpiClass::Type)?;
    let mut done = 0usize;
    let flow = for_each_region(&mut cursor, |region| {
        let length = region.length as usize;
        if region.offset as usize + length > p.span_bytes || done + length > data.len() {
            return ControlFlow::Break(MpiClass::Intern);
        }
        // SAFETY: the region lies in the memory span (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr().add(done),
                (p.base as *mut u8).add(region.offset as usize),
                length,
            )
        };
        done += length;
        ControlFlow::Continue(())
    });
    match flow {
        ControlFlow::Break(class) => Err(class),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// `(offset, length)` regions of `count` instances of `dataloop` placed at
/// offset 0 of memory, coalesced (negative offsets allowed).
pub fn flatten(dataloop: &Dataloop, count: u64) -> MpiResult<Vec<(i64, u64)>> {
    let plan = memory_plan(dataloop, count)?;
    let Some((shaped, shaped_count)) = plan.shaped else {
        return Ok(if plan.span_bytes == 0 { vec![] } else { vec![(0, plan.span_bytes as u64)] });
    };
    let mut cursor = Cursor::new(&shaped, shaped_count, 0).map_err(|_| MpiClass::Type)?;
    let regions = cursor.collect_all();
    Ok(regions.iter().map(|r| (r.offset as i64 + plan.start_offset, r.length)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amode_rules() {
        assert!(check_amode(amode::RDWR | amode::CREATE).is_ok());
        assert_eq!(check_amode(amode::RDONLY | amode::CREATE), Err(MpiClass::Amode));
        assert_eq!(check_amode(amode::RDONLY | amode::RDWR), Err(MpiClass::Amode));
        assert_eq!(check_amode(amode::CREATE), Err(MpiClass::Amode));
    }

    #[test]
    fn eof_scan_of_a_strided_view() {
        let int = Dataloop::bytes(4).unwrap();
        let file_type = Arc::new(Dataloop::vector(2, 1, 2, &int).unwrap());
        let view = View { displacement: 0, etype_bytes: 4, file_type };
        // Stream bytes 0..4 at file 0, 4..8 at file 8, 8..12 at file 12 (next tile starts at 12?)
        assert_eq!(bytes_before_eof(&view, 0, 8, 10).unwrap(), 6);
        assert_eq!(bytes_before_eof(&view, 0, 8, 100).unwrap(), 8);
        assert_eq!(bytes_before_eof(&view, 0, 8, 0).unwrap(), 0);
    }

    #[test]
    fn flatten_negative_lb() {
        let int = Dataloop::bytes(4).unwrap();
        let t = Dataloop::hindexed(&[1, 1], &[-8, 4], &int).unwrap();
        assert_eq!(flatten(&t, 1).unwrap(), vec![(-8, 4), (4, 4)]);
    }
}
