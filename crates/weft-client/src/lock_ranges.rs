//! The lock ranges of an access under the posix and list lock methods
//! (`crate::dlm`), in client memory that does not grow with the access
//! (issue 25). The file regions are walked a batch at a time
//! (`crate::zipwalk::RegionSource`), twice: once to count each datafile's
//! strip pieces, once to make the ranges. A datafile with more pieces than
//! its share of [`CLIENT_RANGES_MAX`] gets covering ranges instead: each run
//! of consecutive pieces becomes one range from the first piece's start to
//! the last one's end, which locks the bytes between them too — more than
//! asked, never less, so atomicity holds and only concurrency is lost. That
//! is done only where the pieces come in increasing local order (every MPI
//! view, refused otherwise); a huge list in another order keeps its exact
//! ranges (memory per range, as the caller's own list).

use weft_dataloop::Cursor;
use weft_proto::{Distribution, ErrorCode, WeftResult};

use crate::noncontig::FileAccess;
use crate::zipwalk::RegionSource;

/// Most lock ranges kept at the client for one access (24 bytes each).
pub(crate) const CLIENT_RANGES_MAX: usize = 65_536;

/// One datafile's lock range: `(file offset of its first byte, local offset, length)`.
pub(crate) type LockRange = (u64, u64, u64);

/// The file regions of an access of `total` bytes, in stream order.
fn regions(access: FileAccess<'_>, total: u64) -> WeftResult<RegionSource<'_>> {
    match access {
        FileAccess::List(regions) => Ok(RegionSource::List(regions.iter())),
        FileAccess::Datatype { file_type, displacement, view_offset } => {
            let size = file_type.size();
            if size == 0 {
                return if total == 0 { Ok(RegionSource::List([].iter())) } else { Err(ErrorCode::Invalid) };
            }
            let end = view_offset.checked_add(total).ok_or(ErrorCode::TooBig)?;
            let mut cursor =
                Cursor::new(file_type, end.div_ceil(size), displacement).map_err(|_| ErrorCode::Invalid)?;
            cursor.set_end(end).map_err(|_| ErrorCode::Invalid)?;
            cursor.seek(view_offset).map_err(|_| ErrorCode::Invalid)?;
            Ok(RegionSource::Walk(cursor))
        }
    }
}

/// Per datafile, the lock ranges of an access, in increasing file offset.
pub(crate) fn lock_ranges(
    d: &Distribution,
    datafiles: usize,
    access: FileAccess<'_>,
    total: u64,
) -> WeftResult<Vec<Vec<LockRange>>> {
    // Pass 1: pieces per datafile, and whether they come in increasing local order.
    let mut counts = vec![0usize; datafiles];
    let mut increasing = vec![true; datafiles];
    let mut last_end = vec![0u64; datafiles];
    regions(access, total)?.for_each(|region| {
        for piece in d.pieces(region.offset, region.length) {
            let i = piece.datafile_index as usize;
            *counts.get_mut(i).ok_or(ErrorCode::Invalid)? += 1;
            increasing[i] &= piece.local_offset >= last_end[i];
            last_end[i] = piece.local_offset + piece.length;
        }
        Ok(())
    })?;
    let share = (CLIENT_RANGES_MAX / datafiles.max(1)).max(1);
    let group: Vec<usize> = (0..datafiles)
        .map(|i| if counts[i] > share && increasing[i] { counts[i].div_ceil(share) } else { 1 })
        .collect();
    // Pass 2: the ranges, `group[i]` consecutive pieces each.
    let mut out: Vec<Vec<LockRange>> = vec![Vec::new(); datafiles];
    let mut in_group = vec![0usize; datafiles];
    regions(access, total)?.for_each(|region| {
        for piece in d.pieces(region.offset, region.length) {
            let i = piece.datafile_index as usize;
            let list = &mut out[i];
            match list.last_mut() {
                Some(last) if in_group[i] < group[i] => {
                    // Increasing local order (groups of more than one only then).
                    last.2 = piece.local_offset + piece.length - last.1;
                    in_group[i] += 1;
                }
                _ => {
                    list.push((piece.file_offset, piece.local_offset, piece.length));
                    in_group[i] = 1;
                }
            }
        }
        Ok(())
    })?;
    for list in &mut out {
        list.sort_unstable();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_dataloop::Region;

    fn dist(strip_bytes: u64, stripe_count: u32) -> Distribution {
        Distribution { strip_bytes, stripe_count }
    }

    #[test]
    fn exact_ranges_below_the_bound() {
        let d = dist(64, 2);
        let regions = [Region::new(0, 10), Region::new(100, 40)];
        let ranges = lock_ranges(&d, 2, FileAccess::List(&regions), 50).unwrap();
        // 100..128 is datafile 1 local 36..64; 128..140 datafile 0 local 64..76.
        assert_eq!(ranges, vec![vec![(0, 0, 10), (128, 64, 12)], vec![(100, 36, 28)]]);
    }

    #[test]
    fn many_pieces_become_covering_ranges_within_the_bound() {
        let d = dist(64, 1);
        let n = 3 * CLIENT_RANGES_MAX as u64;
        let regions: Vec<Region> = (0..n).map(|i| Region::new(i * 4, 1)).collect();
        let ranges = lock_ranges(&d, 1, FileAccess::List(&regions), n).unwrap();
        assert!(ranges[0].len() <= CLIENT_RANGES_MAX, "{} ranges", ranges[0].len());
        // Every byte asked for is covered.
        let mut at = 0;
        for region in &regions {
            while ranges[0][at].1 + ranges[0][at].2 <= region.offset {
                at += 1;
            }
            assert!(ranges[0][at].1 <= region.offset, "byte {} not locked", region.offset);
        }
    }

    #[test]
    fn a_list_out_of_order_keeps_exact_ranges() {
        let d = dist(64, 1);
        let n = 2 * CLIENT_RANGES_MAX as u64;
        let regions: Vec<Region> = (0..n).rev().map(|i| Region::new(i * 4, 1)).collect();
        let ranges = lock_ranges(&d, 1, FileAccess::List(&regions), n).unwrap();
        assert_eq!(ranges[0].len(), n as usize);
        assert_eq!(ranges[0][0], (0, 0, 1));
    }
}
