//! The object cache of a file (hint `weft_cache=objects`, issue 14) and
//! atomic mode by objects (`weft_atomic_method=objects`).
//!
//! At each `MPI_File_set_view` the ranks exchange compact descriptions of
//! their views (`c/objects.c`; [`describe`], [`install`]) and every rank
//! builds the same [`ObjectMap`]. An access is then split, byte range by
//! byte range, into pieces *private* to this rank and *shared* ones:
//! - private pieces of writes are kept in this rank's memory (no locks, no
//!   messages) and written back as one datatype (list) request per server
//!   at `sync`, `close`, `set_view`, size calls, a read, or when the dirty
//!   bytes pass the budget (`weft_cache_bytes`, default
//!   [`BUDGET_BYTES_DEFAULT`]);
//! - shared pieces have a single home copy: Weft's data servers (written
//!   through, never cached, so there is nothing to invalidate). In atomic
//!   mode they are locked at the servers (exclusive for writes, shared for
//!   reads) — only they: an access that shares nothing takes no lock.
//!
//! Without a map (no `set_view` yet, or a rank not asking for objects)
//! every byte counts as shared: atomic mode by objects then locks the
//! whole access, and the cache keeps nothing. With the cache on, atomic
//! mode always locks by objects, whatever `weft_atomic_method` says.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use weft_client::noncontig::{FileAccess, MemoryLayout};
use weft_client::IoMethod;
use weft_dataloop::{BatchLimits, Cursor, Region};

use crate::error::{MpiClass, MpiResult};
use crate::file::{self, Prepared};
use crate::objects::{Class, Coverage, ObjectMap};
use crate::runtime::client;

/// Dirty bytes a rank keeps per file before writing them back.
pub const BUDGET_BYTES_DEFAULT: u64 = 64 << 20;
/// Regions per write-back request (each chunk is one list-datatype request per server).
const FLUSH_REGIONS_MAX: usize = 65_536;
/// Regions walked per batch when splitting an access.
const SPLIT_REGIONS_PER_BATCH: usize = 4096;

#[derive(Default)]
struct State {
    /// `weft_cache=objects`.
    cache: bool,
    /// `weft_cache_bytes` (0: the default).
    budget: u64,
    /// The objects of the current views, and this rank.
    map: Option<(Arc<ObjectMap>, u32)>,
    /// Every rank asked for the cache at the last `set_view` (so the
    /// collective paths agree on whether it is on).
    agreed: bool,
    /// Dirty private bytes by file offset (disjoint, non-adjacent).
    dirty: BTreeMap<u64, Vec<u8>>,
    dirty_bytes: u64,
    /// Write-backs done (for tests and benchmarks).
    flushes: u64,
}

static STATES: Mutex<Option<HashMap<u64, State>>> = Mutex::new(None);

fn with_state<T>(id: u64, body: impl FnOnce(&mut State) -> T) -> MpiResult<T> {
    let mut guard = STATES.lock().map_err(|_| MpiClass::Intern)?;
    Ok(body(guard.get_or_insert_with(HashMap::new).entry(id).or_default()))
}

/// Sets the cache hints of a file (-1: unchanged): `cache` 0 off, 1
/// objects; `budget` in bytes (0: default).
pub fn set_hints(id: u64, cache: i32, budget: i64) -> MpiResult<()> {
    with_state(id, |s| {
        match cache {
            -1 => {}
            0 => s.cache = false,
            1 => s.cache = true,
            _ => return Err(MpiClass::Arg),
        }
        if budget >= 0 {
            s.budget = budget as u64;
        }
        Ok(())
    })?
}

/// Whether this rank asks for objects at `set_view` (cache or atomic method).
pub fn wanted(id: u64) -> bool {
    with_state(id, |s| s.cache).unwrap_or(false) || crate::atomic_locks::uses_objects(id)
}

/// Whether this rank asks for the cache (`weft_cache=objects`).
pub fn cache_wanted(id: u64) -> bool {
    with_state(id, |s| s.cache).unwrap_or(false)
}

/// Whether the cache of file `id` is on: objects known and every rank
/// asked for it at the last `set_view` (the same on every rank).
pub fn active(id: u64) -> bool {
    with_state(id, |s| s.cache && s.agreed && s.map.is_some()).unwrap_or(false)
}

/// This rank's view, described compactly (postcard of a [`Coverage`]).
pub fn describe(id: u64) -> MpiResult<Vec<u8>> {
    let open = file::snapshot(id)?;
    let displacement = u64::try_from(open.view.displacement).map_err(|_| MpiClass::Arg)?;
    let coverage = Coverage::of_view(displacement, &open.view.file_type);
    postcard::to_allocvec(&coverage).map_err(|_| MpiClass::Intern)
}

/// Builds the objects of all ranks' views (`blobs[rank]` from [`describe`]).
/// A malformed description leaves the file without objects (all shared).
/// `cache`: every rank asked for the cache.
pub fn install(id: u64, rank: u32, blobs: &[&[u8]], cache: bool) -> MpiResult<()> {
    let coverages: Option<Vec<Coverage>> = blobs.iter().map(|b| postcard::from_bytes(b).ok()).collect();
    let map = coverages.and_then(|c| ObjectMap::build(&c)).filter(|_| (rank as usize) < blobs.len());
    with_state(id, |s| {
        s.map = map.map(|m| (Arc::new(m), rank));
        s.agreed = cache;
    })
}

/// Number of objects and whether the map is coarse (`None`: no map).
pub fn summary(id: u64) -> MpiResult<Option<(usize, bool, u64)>> {
    with_state(id, |s| s.map.as_ref().map(|(m, _)| (m.objects(), m.is_coarse(), s.flushes)))
}

/// The view is about to change: writes back and forgets the objects.
pub fn view_changing(id: u64) -> MpiResult<()> {
    let flushed = flush(id);
    with_state(id, |s| {
        s.map = None;
        s.agreed = false;
    })?;
    flushed
}

/// Writes back and forgets a closing file's state.
pub fn close(id: u64) -> MpiResult<()> {
    let flushed = flush(id);
    if let Ok(mut guard) = STATES.lock() {
        if let Some(all) = guard.as_mut() {
            all.remove(&id);
        }
    }
    flushed
}

/// Writes this rank's dirty bytes of file `id` back to the servers, one
/// list-datatype request per server per [`FLUSH_REGIONS_MAX`] regions.
/// On failure the bytes stay dirty (the error surfaces at sync or close).
pub fn flush(id: u64) -> MpiResult<()> {
    let dirty = with_state(id, |s| {
        s.dirty_bytes = 0;
        std::mem::take(&mut s.dirty)
    })?;
    if dirty.is_empty() {
        return Ok(());
    }
    let outcome = write_back(id, &dirty);
    with_state(id, |s| {
        s.flushes += 1;
        if outcome.is_err() {
            // Keep the bytes dirty, under anything written meanwhile.
            let newer = std::mem::replace(&mut s.dirty, dirty);
            s.dirty_bytes = s.dirty.values().map(|d| d.len() as u64).sum();
            for (offset, data) in newer {
                keep(s, offset, &data);
            }
        }
    })?;
    outcome
}

fn write_back(id: u64, dirty: &BTreeMap<u64, Vec<u8>>) -> MpiResult<()> {
    let open = file::snapshot(id)?;
    let client = client()?;
    let entries: Vec<(&u64, &Vec<u8>)> = dirty.iter().collect();
    for chunk in entries.chunks(FLUSH_REGIONS_MAX) {
        let regions: Vec<Region> = chunk.iter().map(|(o, d)| Region::new(**o, d.len() as u64)).collect();
        let mut data = Vec::with_capacity(regions.iter().map(|r| r.length as usize).sum());
        chunk.iter().for_each(|(_, d)| data.extend_from_slice(d));
        client.block_on(client.client().write_noncontig(
            &open.file,
            IoMethod::Datatype,
            &data,
            MemoryLayout::Contiguous,
            FileAccess::List(&regions),
        ))?;
    }
    Ok(())
}

/// Adds `data` at file `offset` to the dirty bytes (merging with neighbours).
fn keep(s: &mut State, offset: u64, data: &[u8]) {
    let end = offset + data.len() as u64;
    let mut start = offset;
    let mut stop = end;
    let touching: Vec<u64> =
        s.dirty.range(..=end).rev().take_while(|(o, d)| **o + d.len() as u64 >= offset).map(|(o, _)| *o).collect();
    let mut old: Vec<(u64, Vec<u8>)> = Vec::with_capacity(touching.len());
    for o in touching {
        if let Some(d) = s.dirty.remove(&o) {
            s.dirty_bytes -= d.len() as u64;
            start = start.min(o);
            stop = stop.max(o + d.len() as u64);
            old.push((o, d));
        }
    }
    let merged = if old.is_empty() {
        data.to_vec()
    } else {
        let mut merged = vec![0u8; (stop - start) as usize];
        for (o, d) in &old {
            merged[(o - start) as usize..][..d.len()].copy_from_slice(d);
        }
        merged[(offset - start) as usize..][..data.len()].copy_from_slice(data);
        merged
    };
    s.dirty_bytes += merged.len() as u64;
    s.dirty.insert(start, merged);
}

/// One piece of an access: file region, its position in the access's
/// data stream, and its class.
struct Piece {
    file: Region,
    stream: u64,
    class: Class,
}

/// The file regions of an access split by objects (all shared without a map).
fn pieces(p: &Prepared, map: Option<&(Arc<ObjectMap>, u32)>) -> MpiResult<Vec<Piece>> {
    let view = &p.view;
    let mut regions: Vec<Region> = Vec::new();
    if view.is_contiguous() {
        let start = u64::try_from(view.displacement).map_err(|_| MpiClass::Arg)?;
        regions.push(Region::new(start.checked_add(p.view_offset).ok_or(MpiClass::Arg)?, p.total));
    } else {
        let end = p.view_offset.checked_add(p.total).ok_or(MpiClass::Arg)?;
        let tiles = end.div_ceil(view.file_type.size());
        let mut cursor = Cursor::new(&view.file_type, tiles, view.displacement).map_err(|_| MpiClass::Arg)?;
        cursor.seek(p.view_offset).map_err(|_| MpiClass::Arg)?;
        cursor.set_end(end).map_err(|_| MpiClass::Arg)?;
        let mut batch = Vec::new();
        loop {
            batch.clear();
            if cursor.next_batch(BatchLimits::regions(SPLIT_REGIONS_PER_BATCH), &mut batch) == 0 {
                break;
            }
            regions.extend(batch.iter().filter(|r| r.length > 0));
        }
    }
    let mut out = Vec::with_capacity(regions.len());
    let mut stream = 0u64;
    let mut split = Vec::new();
    for region in regions {
        split.clear();
        match map {
            Some((map, rank)) => map.split(*rank, region, &mut split),
            None => split.push((region, Class::Shared)),
        }
        for (file, class) in split.drain(..) {
            out.push(Piece { file, stream, class });
            stream += file.length;
        }
    }
    Ok(out)
}

/// The access's data stream, packed (a copy only for noncontiguous memory).
///
/// # Safety
/// As `file::run`: the memory of `p` is valid for the call.
unsafe fn stream<'a>(p: &'a Prepared, packed: &'a mut Vec<u8>) -> MpiResult<&'a [u8]> {
    // SAFETY: `base..base+span` is the user's buffer (see `file::prepare`).
    let span = unsafe { std::slice::from_raw_parts(p.base as *const u8, p.span_bytes) };
    let Some((shaped, count)) = &p.shaped else { return Ok(&span[..p.total as usize]) };
    let mut cursor = Cursor::new(shaped, *count, 0).map_err(|_| MpiClass::Type)?;
    packed.reserve(p.total as usize);
    let mut batch = Vec::new();
    loop {
        batch.clear();
        if cursor.next_batch(BatchLimits::regions(SPLIT_REGIONS_PER_BATCH), &mut batch) == 0 {
            break;
        }
        for r in &batch {
            let piece = span.get(r.offset as usize..(r.offset + r.length) as usize).ok_or(MpiClass::Intern)?;
            packed.extend_from_slice(piece);
        }
    }
    Ok(packed.as_slice())
}

/// Takes an access of file `id` when the cache or atomic mode by objects
/// applies; `None` leaves it to the ordinary path.
///
/// # Safety
/// As `file::run`.
pub(crate) unsafe fn intercept(id: u64, p: &Prepared) -> MpiResult<Option<u64>> {
    let (cache, map, dirty) =
        with_state(id, |s| (s.cache && s.agreed && s.map.is_some(), s.map.clone(), !s.dirty.is_empty()))?;
    let atomic = crate::shared::atomic(id)? && (cache || crate::atomic_locks::uses_objects(id));
    if !cache && !atomic {
        return Ok(None);
    }
    if !p.write {
        if dirty {
            flush(id)?;
        }
        let lock = if atomic { lock_shared(id, p, map.as_ref(), false)? } else { None };
        let client = client()?;
        // SAFETY: per this function's contract.
        let moved = client.block_on(unsafe { file::run(client.client(), p) });
        unlock(lock)?;
        return moved.map(Some);
    }
    let pieces = pieces(p, map.as_ref())?;
    if !cache || !pieces.iter().any(|x| x.class == Class::Private) {
        // Nothing to keep (no cache, or no private piece): the ordinary
        // transfer, its shared pieces locked in atomic mode.
        let shared = pieces.iter().filter(|x| x.class == Class::Shared).map(|x| x.file).collect();
        let lock = if atomic { lock_regions(id, shared, true)? } else { None };
        let client = client()?;
        // SAFETY: per this function's contract.
        let moved = client.block_on(unsafe { file::run(client.client(), p) });
        unlock(lock)?;
        return moved.map(Some);
    }
    let mut packed = Vec::new();
    // SAFETY: per this function's contract.
    let data = unsafe { stream(p, &mut packed)? };
    let shared: Vec<&Piece> = pieces.iter().filter(|x| x.class == Class::Shared).collect();
    let lock = if atomic && !shared.is_empty() {
        lock_regions(id, shared.iter().map(|x| x.file).collect(), true)?
    } else {
        None
    };
    let written = write_shared(p, data, &shared);
    let over_budget = with_state(id, |s| {
        for x in pieces.iter().filter(|x| x.class == Class::Private) {
            keep(s, x.file.offset, &data[x.stream as usize..][..x.file.length as usize]);
        }
        s.dirty_bytes > if s.budget == 0 { BUDGET_BYTES_DEFAULT } else { s.budget }
    })?;
    unlock(lock)?;
    written?;
    if over_budget {
        flush(id)?;
    }
    Ok(Some(p.total))
}

/// Writes the shared pieces of an access through to the servers.
fn write_shared(p: &Prepared, data: &[u8], shared: &[&Piece]) -> MpiResult<()> {
    if shared.is_empty() {
        return Ok(());
    }
    let client = client()?;
    for chunk in shared.chunks(FLUSH_REGIONS_MAX) {
        let regions: Vec<Region> = chunk.iter().map(|x| x.file).collect();
        let mut packed = Vec::with_capacity(regions.iter().map(|r| r.length as usize).sum());
        chunk.iter().for_each(|x| packed.extend_from_slice(&data[x.stream as usize..][..x.file.length as usize]));
        client.block_on(client.client().write_noncontig(
            &p.file,
            IoMethod::Datatype,
            &packed,
            MemoryLayout::Contiguous,
            FileAccess::List(&regions),
        ))?;
    }
    Ok(())
}

/// Locks the shared pieces of an access (none: no lock).
fn lock_shared(
    id: u64,
    p: &Prepared,
    map: Option<&(Arc<ObjectMap>, u32)>,
    write: bool,
) -> MpiResult<Option<weft_client::LockSet>> {
    let shared: Vec<Region> =
        pieces(p, map)?.into_iter().filter(|x| x.class == Class::Shared).map(|x| x.file).collect();
    lock_regions(id, shared, write)
}

fn lock_regions(id: u64, mut regions: Vec<Region>, write: bool) -> MpiResult<Option<weft_client::LockSet>> {
    if regions.is_empty() {
        return Ok(None);
    }
    regions.sort_unstable();
    let mut merged: Vec<Region> = Vec::with_capacity(regions.len());
    for r in regions {
        match merged.last_mut() {
            Some(last) if last.offset + last.length >= r.offset => {
                last.length = last.length.max(r.offset + r.length - last.offset)
            }
            _ => merged.push(r),
        }
    }
    crate::atomic_locks::lock_regions(id, &merged, write).map(Some)
}

fn unlock(lock: Option<weft_client::LockSet>) -> MpiResult<()> {
    match lock {
        Some(set) => crate::atomic_locks::unlock(set),
        None => Ok(()),
    }
}

/// The C ABI of the object cache (`c/objects.c`, `c/weft_objects.h`).
mod c_abi {
    use std::ffi::c_int;

    use crate::error::MpiClass;
    use crate::ffi::{guarded, store};

    /// Cache hints of a file (see [`super::set_hints`]).
    #[no_mangle]
    pub extern "C" fn weft_mpiio_set_cache_hints(id: u64, cache: c_int, budget: i64) -> c_int {
        guarded(|| super::set_hints(id, cache, budget))
    }

    /// 1 if this rank asks for objects at `set_view`, else 0.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_objects_wanted(id: u64) -> c_int {
        c_int::from(super::wanted(id))
    }

    /// 1 if this rank asks for the cache, else 0.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_cache_wanted(id: u64) -> c_int {
        c_int::from(super::cache_wanted(id))
    }

    /// 1 if the cache of file `id` is on (the same on every rank), else 0.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_cache_active(id: u64) -> c_int {
        c_int::from(super::active(id))
    }

    /// Writes back this rank's cached bytes of file `id`.
    #[no_mangle]
    pub extern "C" fn weft_mpiio_cache_flush(id: u64) -> c_int {
        guarded(|| super::flush(id))
    }

    /// Drops the objects of file `id` (after writing back its cached bytes).
    #[no_mangle]
    pub extern "C" fn weft_mpiio_objects_forget(id: u64) -> c_int {
        guarded(|| super::view_changing(id))
    }

    /// This rank's view description into `buf` (`cap` bytes); its length in `*len`.
    ///
    /// # Safety
    /// `buf` has `cap` writable bytes; `len` is writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_objects_describe(id: u64, buf: *mut u8, cap: usize, len: *mut usize) -> c_int {
        guarded(|| {
            let blob = super::describe(id)?;
            if blob.len() > cap {
                return Err(MpiClass::Intern);
            }
            // SAFETY: per this function's contract.
            unsafe { std::ptr::copy_nonoverlapping(blob.as_ptr(), buf, blob.len()) };
            // SAFETY: per this function's contract.
            unsafe { store(len, blob.len()) }
        })
    }

    /// Builds the objects from every rank's description: `nprocs` blobs
    /// laid end to end in `data`, `lens[rank]` bytes each; `cache`: every
    /// rank asked for the cache.
    ///
    /// # Safety
    /// `lens` has `nprocs` readable words; `data` their sum of readable bytes.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_objects_install(
        id: u64,
        rank: c_int,
        nprocs: c_int,
        data: *const u8,
        lens: *const i64,
        cache: c_int,
    ) -> c_int {
        guarded(|| {
            let n = usize::try_from(nprocs).map_err(|_| MpiClass::Arg)?;
            let rank = u32::try_from(rank).map_err(|_| MpiClass::Arg)?;
            // SAFETY: per this function's contract.
            let lens = unsafe { std::slice::from_raw_parts(lens, n) };
            let lens: Vec<usize> =
                lens.iter().map(|l| usize::try_from(*l).map_err(|_| MpiClass::Arg)).collect::<Result<_, _>>()?;
            // SAFETY: per this function's contract.
            let data = unsafe { std::slice::from_raw_parts(data, lens.iter().sum()) };
            let mut blobs = Vec::with_capacity(n);
            let mut at = 0;
            for l in lens {
                blobs.push(&data[at..at + l]);
                at += l;
            }
            super::install(id, rank, &blobs, cache != 0)
        })
    }

    /// Objects of file `id` (-1: none), 1 if coarse, and write-backs done.
    ///
    /// # Safety
    /// The pointers are writable.
    #[no_mangle]
    pub unsafe extern "C" fn weft_mpiio_cache_summary(
        id: u64,
        objects: *mut i64,
        coarse: *mut c_int,
        flushes: *mut i64,
    ) -> c_int {
        guarded(|| {
            let (o, c, f) = match super::summary(id)? {
                Some((o, c, f)) => (o as i64, c_int::from(c), f as i64),
                None => (-1, 0, 0),
            };
            // SAFETY: per this function's contract.
            unsafe {
                store(objects, o)?;
                store(coarse, c)?;
                store(flushes, f)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirty(s: &State) -> Vec<(u64, Vec<u8>)> {
        s.dirty.iter().map(|(o, d)| (*o, d.clone())).collect()
    }

    #[test]
    fn kept_bytes_merge_with_neighbours_and_overwrite() {
        let mut s = State::default();
        keep(&mut s, 10, b"abc");
        keep(&mut s, 20, b"xy");
        assert_eq!(s.dirty_bytes, 5);
        keep(&mut s, 13, b"def");
        assert_eq!(dirty(&s), vec![(10, b"abcdef".to_vec()), (20, b"xy".to_vec())]);
        keep(&mut s, 15, b"ZZZZZ");
        assert_eq!(dirty(&s), vec![(10, b"abcdeZZZZZxy".to_vec())]);
        assert_eq!(s.dirty_bytes, 12);
        keep(&mut s, 0, b"0");
        keep(&mut s, 11, b"B");
        assert_eq!(dirty(&s), vec![(0, b"0".to_vec()), (10, b"aBcdeZZZZZxy".to_vec())]);
    }
}
