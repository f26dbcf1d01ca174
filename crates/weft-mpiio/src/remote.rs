//! Files whose data path is a weft-rfs layer chain instead of Weft:
//! `rfs:HOST:PORT:/path` (remote MPI-IO through a `weft gateway`) and
//! `discard:/path` (the paper's PEAK: writes dropped on the client), each
//! optionally under ABT (active buffering, hints below).
//!
//! Such a file is an ordinary open file of [`crate::file`] (views, file
//! pointers and access checks are the same code), whose `File` carries a
//! marker handle (`REMOTE_HANDLE_BASE | id`) that the hooks in `file`,
//! `collective` and `nonblocking` recognise and send here. Writes go out
//! packed: the memory type is walked on the client and its pieces are
//! written back to back into the frame (or the ABT buffers); the view is
//! encoded once per set_view and piggybacked on the next access; reads
//! come back as the stream and are scattered with the memory type.
//!
//! Hints (at open, `MPI_Info` or `ROMIO_HINTS`):
//! - `rfs_deferred_open` (`true`): each process opens at its first access;
//! - `abt` (`enable`): ABT over the file; `abt_buffer_size` (bytes of one
//!   buffer, default 1 MiB), `abt_max_buffer_size` (most buffered bytes of
//!   the process, default 64 MiB), `abt_staging_dir` (foreground staging
//!   there when memory is full), `abt_staging_fsync` (`true`),
//!   `abt_deferred_close` (`true`).
//!
//! Shared file pointers live at the gateway (one per path, for all its
//! clients; `discard:` files keep one per process). Atomic mode is not
//! served on these names (`MPI_File_set_atomicity(1)` fails).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use weft_dataloop::{Cursor, Dataloop};
use weft_proto::limits::RFS_REGIONS_MAX;
use weft_rfs::abt::{AbtConfig, AbtFile};
use weft_rfs::client::{RemoteFile, RemoteName};
use weft_rfs::layer::{Discard, Layer};
use weft_rfs::wire::{open_flags, At, WireView};

use crate::error::{MpiClass, MpiResult};
use crate::file::{amode, Prepared};

/// Marker bits of the handle of a layered file (no Weft handle has them:
/// server-made handles stay far below).
const REMOTE_HANDLE_BASE: u64 = 0xFEED_0000_0000_0000;
/// The strip size two-phase aligns file domains to on these files.
pub const REMOTE_STRIP_BYTES: u64 = 1 << 20;

const RFS_PREFIX: &str = "rfs:";
const DISCARD_PREFIX: &str = "discard:";

#[derive(Clone, Debug)]
enum Target {
    Rfs(RemoteName),
    Discard,
}

fn target(name: &str) -> MpiResult<Target> {
    if name.starts_with(DISCARD_PREFIX) {
        return Ok(Target::Discard);
    }
    RemoteName::parse(name).map(Target::Rfs).ok_or(MpiClass::BadFile)
}

/// Whether `name` is served here (`rfs:` or `discard:`).
pub fn is_name(name: &str) -> bool {
    name.starts_with(RFS_PREFIX) || name.starts_with(DISCARD_PREFIX)
}

struct Remote {
    target: Target,
    bits: u32,
    defer_open: bool,
    abt: Option<AbtConfig>,
    layer: Option<Arc<dyn Layer>>,
    view: Arc<WireView>,
}

static REMOTES: Mutex<Option<HashMap<u64, Remote>>> = Mutex::new(None);

fn with<T>(body: impl FnOnce(&mut HashMap<u64, Remote>) -> MpiResult<T>) -> MpiResult<T> {
    let mut guard = REMOTES.lock().map_err(|_| MpiClass::Intern)?;
    body(guard.get_or_insert_with(HashMap::new))
}

/// The file id behind a marker handle.
fn id_of(file: &weft_client::File) -> Option<u64> {
    (file.handle.0 & REMOTE_HANDLE_BASE == REMOTE_HANDLE_BASE).then_some(file.handle.0 & !REMOTE_HANDLE_BASE)
}

/// Whether `file` is a layered file.
pub fn is_remote(file: &weft_client::File) -> bool {
    id_of(file).is_some_and(|id| with(|all| Ok(all.contains_key(&id))).unwrap_or(false))
}

/// The marker handle of file `id`.
pub fn handle_of(id: u64) -> weft_proto::Handle {
    weft_proto::Handle(REMOTE_HANDLE_BASE | id)
}

fn layer_and_view(file: &weft_client::File) -> MpiResult<(Arc<dyn Layer>, Arc<WireView>)> {
    let id = id_of(file).ok_or(MpiClass::Intern)?;
    with(|all| {
        let remote = all.get(&id).ok_or(MpiClass::BadFile)?;
        Ok((remote.layer.clone().ok_or(MpiClass::BadFile)?, remote.view.clone()))
    })
}

fn wire_flags(bits: u32) -> u32 {
    let mut flags = 0;
    if bits & (amode::RDONLY | amode::RDWR) != 0 {
        flags |= open_flags::READ;
    }
    if bits & (amode::WRONLY | amode::RDWR) != 0 {
        flags |= open_flags::WRITE;
    }
    flags
}

/// Opening rank: creates or opens the file once (access mode checked);
/// returns the size for `MPI_MODE_APPEND` (0 otherwise).
pub fn lookup(name: &str, bits: u32) -> MpiResult<u64> {
    let Target::Rfs(remote) = target(name)? else { return Ok(0) };
    let mut flags = wire_flags(bits);
    if bits & amode::CREATE != 0 {
        flags |= open_flags::CREATE;
    }
    if bits & amode::EXCL != 0 {
        flags |= open_flags::EXCL;
    }
    let conn = weft_rfs::client::control_connection(&remote.host, remote.port)?;
    let file = RemoteFile::open(conn, &remote.path, flags, false)?;
    let size = if bits & amode::APPEND != 0 { file.size() } else { Ok(0) };
    let closed = file.close();
    let size = size?;
    closed?;
    Ok(size)
}

/// Every rank: registers file `id` (its layer is built by [`ready`], after the hints).
pub fn attach(id: u64, name: &str, bits: u32) -> MpiResult<()> {
    let view = Arc::new(encode_view(0, 1, &Dataloop::bytes(1).map_err(|_| MpiClass::Intern)?));
    let remote = Remote { target: target(name)?, bits, defer_open: false, abt: None, layer: None, view };
    with(|all| {
        all.insert(id, remote);
        Ok(())
    })
}

/// A hint of file `id` (before [`ready`]); unknown keys and bad values are ignored, as in ROMIO.
pub fn hint(id: u64, key: &str, value: &str) -> MpiResult<()> {
    let truthy = matches!(value, "true" | "enable" | "1" | "yes");
    with(|all| {
        let Some(remote) = all.get_mut(&id) else { return Ok(()) };
        let abt = || AbtConfig::default();
        match key {
            "rfs_deferred_open" => remote.defer_open = truthy,
            "abt" => remote.abt = if truthy { Some(remote.abt.clone().unwrap_or_else(abt)) } else { None },
            "abt_buffer_size" | "abt_max_buffer_size" => {
                if let Ok(bytes) = value.parse::<usize>() {
                    let config = remote.abt.get_or_insert_with(abt);
                    if key == "abt_buffer_size" {
                        config.buffer_bytes = bytes.max(1);
                    } else {
                        config.max_bytes = bytes.max(1);
                    }
                }
            }
            "abt_staging_dir" => remote.abt.get_or_insert_with(abt).staging_dir = Some(value.into()),
            "abt_staging_fsync" => remote.abt.get_or_insert_with(abt).staging_fsync = truthy,
            "abt_deferred_close" => remote.abt.get_or_insert_with(abt).defer_close = truthy,
            _ => {}
        }
        Ok(())
    })
}

/// Every rank, after the hints: builds the layer chain (and opens, unless deferred).
pub fn ready(id: u64) -> MpiResult<()> {
    let (target, bits, defer, abt) = with(|all| {
        let remote = all.get(&id).ok_or(MpiClass::BadFile)?;
        Ok((remote.target.clone(), remote.bits, remote.defer_open, remote.abt.clone()))
    })?;
    let base: Arc<dyn Layer> = match target {
        Target::Discard => Arc::new(Discard),
        Target::Rfs(name) => {
            let conn = weft_rfs::client::connection(&name.host, name.port)?;
            Arc::new(RemoteFile::open(conn, &name.path, wire_flags(bits), defer)?)
        }
    };
    let layer: Arc<dyn Layer> = match abt {
        Some(config) => Arc::new(AbtFile::new(base, config)),
        None => base,
    };
    with(|all| {
        all.get_mut(&id).ok_or(MpiClass::BadFile)?.layer = Some(layer);
        Ok(())
    })
}

/// Closes file `id`; `delete` (delete-on-close, opening rank) removes it.
pub fn close(id: u64, delete: bool) -> MpiResult<()> {
    let Some(remote) = with(|all| Ok(all.remove(&id)))? else { return Ok(()) };
    let closed = match &remote.layer {
        Some(layer) => layer.close().map_err(MpiClass::from),
        None => Ok(()),
    };
    if delete && remote.bits & amode::DELETE_ON_CLOSE != 0 {
        if let Target::Rfs(name) = &remote.target {
            weft_rfs::client::delete(name)?;
        }
    }
    closed
}

/// An operation on file `id`'s shared file pointer; `None` if `id` is not
/// a layered file. Returns the old value.
pub fn shared(id: u64, op: weft_rfs::wire::SharedOp) -> Option<MpiResult<u64>> {
    static LOCAL: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);
    let target = with(|all| Ok(all.get(&id).map(|r| r.target.clone()))).ok()??;
    Some(match target {
        Target::Rfs(name) => weft_rfs::client::shared(&name, op).map_err(MpiClass::from),
        Target::Discard => {
            let mut local = LOCAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let pointer = local.get_or_insert_with(HashMap::new).entry(id).or_insert(0);
            let old = *pointer;
            *pointer = match op {
                weft_rfs::wire::SharedOp::FetchAdd(delta) => old.saturating_add(delta),
                weft_rfs::wire::SharedOp::Get => old,
                weft_rfs::wire::SharedOp::Set(value) => value,
            };
            Ok(old)
        }
    })
}

/// `MPI_File_delete` of a layered name.
pub fn delete(name: &str) -> MpiResult<()> {
    match target(name)? {
        Target::Rfs(name) => Ok(weft_rfs::client::delete(&name)?),
        Target::Discard => Ok(()),
    }
}

/// Size of a layered file.
pub fn size(file: &weft_client::File) -> MpiResult<u64> {
    Ok(layer_and_view(file)?.0.size()?)
}

/// Sets the size.
pub fn set_size(file: &weft_client::File, size: u64) -> MpiResult<()> {
    Ok(layer_and_view(file)?.0.set_size(size)?)
}

/// Makes written data durable (waits for ABT's buffered writes first).
pub fn sync(file: &weft_client::File) -> MpiResult<()> {
    Ok(layer_and_view(file)?.0.sync()?)
}

fn encode_view(displacement: i64, etype_bytes: u64, file_type: &Dataloop) -> WireView {
    WireView { displacement, etype_bytes, file_type: file_type.encode() }
}

/// A new view of file `id`: encoded once, sent with the next access.
pub fn set_view(id: u64, displacement: i64, etype_bytes: u64, file_type: &Dataloop) -> MpiResult<()> {
    let view = Arc::new(encode_view(displacement, etype_bytes, file_type));
    with(|all| {
        if let Some(remote) = all.get_mut(&id) {
            remote.view = view;
        }
        Ok(())
    })
}

/// Moves the data of a prepared access; bytes moved (reads: before EOF).
///
/// # Safety
/// As `file::run`: the prepared memory is the caller's for this call.
pub(crate) unsafe fn run(p: &Prepared) -> MpiResult<u64> {
    if p.total == 0 {
        return Ok(0);
    }
    let (layer, view) = layer_and_view(&p.file)?;
    let at = At::Stream { view_offset: p.view_offset };
    if p.write {
        // SAFETY: `base..base+span` is the user's buffer (file::prepare).
        let span = unsafe { std::slice::from_raw_parts(p.base as *const u8, p.span_bytes) };
        let parts: Vec<&[u8]> = match &p.shaped {
            None => vec![span],
            Some((memory_type, count)) => {
                let mut cursor = Cursor::new(memory_type, *count, 0).map_err(|_| MpiClass::Type)?;
                let mut parts = Vec::new();
                for region in cursor.collect_all() {
                    let (from, length) = (region.offset as usize, region.length as usize);
                    parts.push(span.get(from..from + length).ok_or(MpiClass::Intern)?);
                }
                parts
            }
        };
        layer.write(&view, &at, &parts)?.wait()?;
        return Ok(p.total);
    }
    let data = layer.read(&view, &at, p.total)?;
    let got = (data.len() as u64).min(p.total);
    // SAFETY: per this function's contract.
    unsafe { crate::file::scatter(p, 0, &data[..got as usize])? };
    Ok(got)
}

/// Collective window write: `buffer` holds the `covered` regions' bytes,
/// each at `region.offset - base`.
pub fn write_regions(file: &weft_client::File, covered: &[(u64, u64)], base: u64, buffer: &[u8]) -> MpiResult<()> {
    let (layer, view) = layer_and_view(file)?;
    for group in covered.chunks(RFS_REGIONS_MAX) {
        let parts: Vec<&[u8]> = group
            .iter()
            .map(|&(offset, length)| &buffer[(offset - base) as usize..(offset - base + length) as usize])
            .collect();
        layer.write(&view, &At::Regions(group.to_vec()), &parts)?.wait()?;
    }
    Ok(())
}

/// Collective window read into `buffer` (zeros past end of file).
pub fn read_regions(file: &weft_client::File, covered: &[(u64, u64)], base: u64, buffer: &mut [u8]) -> MpiResult<()> {
    let (layer, view) = layer_and_view(file)?;
    for group in covered.chunks(RFS_REGIONS_MAX) {
        let len = group.iter().map(|r| r.1).sum();
        let data = layer.read(&view, &At::Regions(group.to_vec()), len)?;
        let mut at = 0usize;
        for &(offset, length) in group {
            let (from, length) = ((offset - base) as usize, length as usize);
            let piece = data.get(at..at + length).ok_or(MpiClass::Io)?;
            buffer[from..from + length].copy_from_slice(piece);
            at += length;
        }
    }
    Ok(())
}

/// At `MPI_Finalize`: waits for all buffered work; the first deferred
/// error nobody has reported yet (a file closed with deferred close).
pub fn finalize() -> MpiResult<()> {
    Ok(weft_rfs::abt::finalize()?)
}

// ---------- C ABI (c/remote.c) ----------

/// # Safety
/// `ptr` is a NUL-terminated string valid for the call.
unsafe fn text<'a>(ptr: *const std::ffi::c_char) -> MpiResult<&'a str> {
    if ptr.is_null() {
        return Err(MpiClass::Arg);
    }
    // SAFETY: per this function's contract.
    unsafe { std::ffi::CStr::from_ptr(ptr) }.to_str().map_err(|_| MpiClass::Arg)
}

/// Whether `name` is a layered name (1) or not (0).
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_remote_is_name(name: *const std::ffi::c_char) -> std::ffi::c_int {
    // SAFETY: per this function's contract.
    match unsafe { text(name) } {
        Ok(name) => is_name(name) as std::ffi::c_int,
        Err(_) => 0,
    }
}

/// Gives file `id` the hint `key` = `value` (see the module documentation).
///
/// # Safety
/// `key` and `value` are C strings.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_remote_hint(
    id: u64,
    key: *const std::ffi::c_char,
    value: *const std::ffi::c_char,
) -> std::ffi::c_int {
    // SAFETY: per this function's contract.
    crate::ffi::guarded(|| hint(id, unsafe { text(key)? }, unsafe { text(value)? }))
}

/// Builds file `id`'s layers once its hints are in (no-op for Weft files).
#[no_mangle]
pub extern "C" fn weft_mpiio_remote_ready(id: u64) -> std::ffi::c_int {
    crate::ffi::guarded(|| if with(|all| Ok(all.contains_key(&id)))? { ready(id) } else { Ok(()) })
}

/// Waits for file `id`'s buffered writes (ABT); stores whether it is a
/// layered file (the C layer then adds a barrier before collective reads).
/// A deferred error is left for the read itself to return.
///
/// # Safety
/// `remote` is writable.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_remote_drain(id: u64, remote: *mut std::ffi::c_int) -> std::ffi::c_int {
    crate::ffi::guarded(|| {
        let layer = with(|all| Ok(all.get(&id).map(|r| r.layer.clone())))?;
        // SAFETY: per this function's contract.
        unsafe { crate::ffi::store(remote, layer.is_some() as std::ffi::c_int)? };
        if let Some(Some(layer)) = layer {
            let _ = layer.flush();
        }
        Ok(())
    })
}

/// At finalize: waits for buffered work; a deferred error not yet reported.
#[no_mangle]
pub extern "C" fn weft_mpiio_remote_finalize() -> std::ffi::c_int {
    crate::ffi::guarded(finalize)
}

/// ABT counters of this process: bytes buffered, bytes staged, writes drained.
///
/// # Safety
/// `out` has 3 writable words.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_abt_stats(out: *mut i64) -> std::ffi::c_int {
    crate::ffi::guarded(|| {
        if out.is_null() {
            return Err(MpiClass::Arg);
        }
        let stats = weft_rfs::abt::stats();
        // SAFETY: `out` has 3 writable words.
        unsafe {
            out.write(stats.buffered_bytes as i64);
            out.add(1).write(stats.staged_bytes as i64);
            out.add(2).write(stats.drained_writes as i64);
        }
        Ok(())
    })
}
