//! The storage path of noncontiguous pieces: coalescing, data sieving and
//! direct positioned I/O on one datafile, through [`Datafiles`] (the one
//! owner of datafile I/O).
//!
//! Pieces come in the order of the request's packed stream; each says where
//! its bytes are in a packed buffer and in the datafile. They are cut into
//! *groups* of consecutive pieces whose covering span stays within
//! [`SIEVE_SPAN_BYTES_MAX`] and where each new piece lies within
//! [`SIEVE_GAP_BYTES_MAX`] of the span so far. Policy:
//! - a group of one piece is moved directly (one `pread`/`pwrite`);
//! - a group of several pieces is **sieved**: the span is read once and the
//!   pieces are copied out of (or into) it in memory. Writes then write the
//!   span back: a read-modify-write under an exclusive [`RangeLocks`] range,
//!   so another client's write inside the span cannot be lost. When the
//!   pieces tile the span exactly the read is skipped.
//!
//! Why these numbers: a syscall costs about as much as copying ~16 KiB, so
//! reading a gap of up to 16 KiB is cheaper than a second call; 4 MiB bounds
//! the extra buffer per request. Small dense pieces (8 bytes every 128) cost
//! one call per 4 MiB of span instead of one per piece. Bytes past the local
//! end of file read as zeros, as holes do.

use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::counters::Counters;
use crate::datafiles::Datafiles;
use crate::ranges::{RangeLocks, RangeMode};

/// Largest covering span read or rewritten by one sieving step.
pub const SIEVE_SPAN_BYTES_MAX: u64 = 4 << 20;

/// Largest hole between pieces that sieving reads through rather than
/// issuing another syscall.
pub const SIEVE_GAP_BYTES_MAX: u64 = 16 << 10;

/// One piece of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the batch's packed buffer.
    pub packed_offset: usize,
    /// Offset in the datafile.
    pub datafile_offset: u64,
    /// Bytes.
    pub length: usize,
}

impl Piece {
    fn end(&self) -> u64 {
        self.datafile_offset + self.length as u64
    }
}

/// Cuts `pieces` into sieving groups (index ranges), see the module doc.
pub fn groups(pieces: &[Piece]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let (mut lo, mut hi) = (0u64, 0u64);
    for (index, piece) in pieces.iter().enumerate() {
        if index > start {
            let near = piece.datafile_offset <= hi.saturating_add(SIEVE_GAP_BYTES_MAX)
                && piece.end().saturating_add(SIEVE_GAP_BYTES_MAX) >= lo;
            let (new_lo, new_hi) = (lo.min(piece.datafile_offset), hi.max(piece.end()));
            if near && new_hi - new_lo <= SIEVE_SPAN_BYTES_MAX {
                (lo, hi) = (new_lo, new_hi);
                continue;
            }
            out.push(start..index);
        }
        start = index;
        (lo, hi) = (piece.datafile_offset, piece.end());
    }
    if start < pieces.len() {
        out.push(start..pieces.len());
    }
    out
}

fn span(pieces: &[Piece]) -> (u64, u64) {
    let lo = pieces.iter().map(|p| p.datafile_offset).min().unwrap_or(0);
    let hi = pieces.iter().map(Piece::end).max().unwrap_or(0);
    (lo, hi)
}

fn check_pieces(pieces: &[Piece], packed_len: usize) -> WeftResult<()> {
    for piece in pieces {
        if piece.datafile_offset.checked_add(piece.length as u64).is_none_or(|end| end > limits::FILE_BYTES_MAX) {
            return Err(ErrorCode::TooBig);
        }
        if piece.packed_offset.checked_add(piece.length).is_none_or(|end| end > packed_len) {
            return Err(ErrorCode::Protocol);
        }
    }
    Ok(())
}

/// Reads `buf.len()` bytes at `offset`, zero-filling past end of file.
fn pread_full(
    datafiles: &Datafiles,
    handle: Handle,
    offset: u64,
    buf: &mut [u8],
    counters: &Counters,
) -> WeftResult<()> {
    counters.syscalls(1);
    let done = datafiles.read_at(handle, offset, buf)?;
    buf[done..].fill(0);
    Ok(())
}

fn pwrite_all(datafiles: &Datafiles, handle: Handle, offset: u64, data: &[u8], counters: &Counters) -> WeftResult<()> {
    counters.syscalls(1);
    datafiles.write_at(handle, offset, data)
}

/// Fills `packed` from the pieces of one batch.
pub fn read_pieces(
    datafiles: &Datafiles,
    handle: Handle,
    pieces: &[Piece],
    packed: &mut [u8],
    counters: &Counters,
) -> WeftResult<()> {
    check_pieces(pieces, packed.len())?;
    counters.regions(pieces.len() as u64);
    for group in groups(pieces) {
        let group = &pieces[group];
        if let [piece] = group {
            let target = &mut packed[piece.packed_offset..piece.packed_offset + piece.length];
            pread_full(datafiles, handle, piece.datafile_offset, target, counters)?;
            continue;
        }
        let (lo, hi) = span(group);
        let mut window = vec![0u8; (hi - lo) as usize];
        pread_full(datafiles, handle, lo, &mut window, counters)?;
        counters.sieve(hi - lo);
        for piece in group {
            let from = (piece.datafile_offset - lo) as usize;
            packed[piece.packed_offset..piece.packed_offset + piece.length]
                .copy_from_slice(&window[from..from + piece.length]);
        }
    }
    Ok(())
}

/// Whether the pieces, in order, tile `[lo, hi)` exactly.
fn tiles(group: &[Piece], lo: u64, hi: u64) -> bool {
    let mut next = lo;
    for piece in group {
        if piece.datafile_offset != next {
            return false;
        }
        next = piece.end();
    }
    next == hi
}

/// Stores the pieces of one batch from `packed`. The mirror of
/// [`read_pieces`] (a review with `duplicates` pairs them): a write also
/// takes range locks and sieves with a read-modify-write, so the two loops
/// differ in more than the copy direction and stay apart.
pub fn write_pieces(
    datafiles: &Datafiles,
    handle: Handle,
    pieces: &[Piece],
    packed: &[u8],
    locks: &RangeLocks,
    counters: &Counters,
) -> WeftResult<()> {
    check_pieces(pieces, packed.len())?;
    counters.regions(pieces.len() as u64);
    for group in groups(pieces) {
        let group = &pieces[group];
        if let [piece] = group {
            let _range = locks.lock(handle, piece.datafile_offset, piece.end(), RangeMode::Shared);
            pwrite_all(
                datafiles,
                handle,
                piece.datafile_offset,
                &packed[piece.packed_offset..piece.packed_offset + piece.length],
                counters,
            )?;
            continue;
        }
        let (lo, hi) = span(group);
        let _range = locks.lock(handle, lo, hi, RangeMode::Exclusive);
        let mut window = vec![0u8; (hi - lo) as usize];
        if !tiles(group, lo, hi) {
            pread_full(datafiles, handle, lo, &mut window, counters)?;
        }
        counters.sieve(hi - lo);
        for piece in group {
            let at = (piece.datafile_offset - lo) as usize;
            window[at..at + piece.length]
                .copy_from_slice(&packed[piece.packed_offset..piece.packed_offset + piece.length]);
        }
        pwrite_all(datafiles, handle, lo, &window, counters)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(packed_offset: usize, datafile_offset: u64, length: usize) -> Piece {
        Piece { packed_offset, datafile_offset, length }
    }

    #[test]
    fn dense_small_pieces_form_one_group() {
        let pieces: Vec<Piece> = (0..1000).map(|i| piece(i * 8, i as u64 * 128, 8)).collect();
        assert_eq!(groups(&pieces), vec![0..1000]);
    }

    #[test]
    fn far_pieces_and_span_limit_split_groups() {
        let pieces = vec![piece(0, 0, 8), piece(8, 1 << 30, 8), piece(16, (1 << 30) + 100, 8)];
        assert_eq!(groups(&pieces), vec![0..1, 1..3]);
        let pieces: Vec<Piece> = (0..4).map(|i| piece(i << 21, (i as u64) << 21, 1 << 21)).collect();
        assert_eq!(groups(&pieces), vec![0..2, 2..4]);
    }

    /// Reference: sieved writes and reads against a byte vector.
    #[test]
    fn sieved_io_matches_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::bytestream::Bytestreams::open(dir.path()).unwrap());
        let path = store.path(Handle(1));
        let datafiles = Datafiles::new(store, None).unwrap();
        let counters = Counters::default();
        let locks = RangeLocks::default();
        let mut model = vec![0u8; 0];
        let mut x = 12345u64;
        for round in 0..50 {
            let mut pieces = Vec::new();
            let mut packed_len = 0;
            for _ in 0..20 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let offset = (x >> 33) % 50_000;
                let length = 1 + ((x >> 20) % 64) as usize;
                pieces.push(piece(packed_len, offset, length));
                packed_len += length;
            }
            let packed: Vec<u8> = (0..packed_len).map(|i| (i + round * 7) as u8).collect();
            write_pieces(&datafiles, Handle(1), &pieces, &packed, &locks, &counters).unwrap();
            for p in &pieces {
                let end = p.end() as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[p.datafile_offset as usize..end]
                    .copy_from_slice(&packed[p.packed_offset..p.packed_offset + p.length]);
            }
            let mut back = vec![0xEEu8; packed_len];
            read_pieces(&datafiles, Handle(1), &pieces, &mut back, &counters).unwrap();
            for p in &pieces {
                assert_eq!(
                    &back[p.packed_offset..p.packed_offset + p.length],
                    &model[p.datafile_offset as usize..p.end() as usize]
                );
            }
        }
        assert_eq!(std::fs::read(&path).unwrap(), model);
    }
}
