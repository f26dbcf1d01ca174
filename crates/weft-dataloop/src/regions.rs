//! Byte regions: `(offset, length)` pairs and sorted, coalesced lists of them.
//!
//! This module owns region algebra used on both sides of list I/O:
//! - [`RegionList`]: a normalized set of bytes (sorted, no overlap, no two
//!   regions touching, no empty region), with union-style coalescing, total
//!   length and intersection;
//! - [`coalesce_adjacent`]: merging neighbours of a list kept in *stream order*
//!   (order matters there, so nothing is sorted);
//! - [`zip_lists`] / [`ZipIter`]: walking a memory list and a file list of equal
//!   total length together, producing `(memory_offset, file_offset, length)`
//!   pieces where neither side's boundaries are crossed.
//!
//! Every region must satisfy `offset + length <= u64::MAX`; arithmetic is
//! checked and violations are errors, not panics.

use serde::{Deserialize, Serialize};

/// A contiguous byte range `[offset, offset + length)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Region {
    /// First byte.
    pub offset: u64,
    /// Number of bytes.
    pub length: u64,
}

impl Region {
    /// Creates a region.
    pub fn new(offset: u64, length: u64) -> Self {
        Region { offset, length }
    }

    /// One past the last byte, or `None` if that exceeds `u64::MAX`.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.length)
    }
}

/// Errors of region arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegionError {
    /// A region ends beyond `u64::MAX`.
    #[error("region at {offset} of length {length} ends beyond u64::MAX")]
    EndOverflow {
        /// Offset of the offending region.
        offset: u64,
        /// Length of the offending region.
        length: u64,
    },
    /// The memory and file lists of a zip do not cover the same number of bytes.
    #[error("memory list has {memory_bytes} bytes but file list has {file_bytes}")]
    LengthMismatch {
        /// Sum of memory lengths.
        memory_bytes: u128,
        /// Sum of file lengths.
        file_bytes: u128,
    },
}

/// A sorted list of disjoint, non-touching, non-empty regions.
///
/// Only [`RegionList::from_regions`] builds one (no `Deserialize`), so the
/// invariants always hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionList {
    regions: Vec<Region>,
}

impl RegionList {
    /// The empty list.
    pub fn new() -> Self {
        RegionList::default()
    }

    /// Normalizes any list: sorts, merges overlapping or touching regions and
    /// drops empty ones.
    pub fn from_regions(mut regions: Vec<Region>) -> Result<Self, RegionError> {
        for region in &regions {
            check_end(region)?;
        }
        regions.retain(|region| region.length > 0);
        regions.sort_unstable();
        let mut merged: Vec<Region> = Vec::with_capacity(regions.len());
        for region in regions {
            match merged.last_mut() {
                Some(last) if region.offset <= last.offset + last.length => {
                    let end = (last.offset + last.length).max(region.offset + region.length);
                    last.length = end - last.offset;
                }
                _ => merged.push(region),
            }
        }
        Ok(RegionList { regions: merged })
    }

    /// The regions, sorted by offset.
    pub fn as_slice(&self) -> &[Region] {
        &self.regions
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Whether the list holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Total bytes covered (fits: the regions are disjoint inside `u64`).
    pub fn total_bytes(&self) -> u64 {
        self.regions.iter().map(|region| region.length).sum()
    }

    /// Whether byte `offset` is covered, in `O(log n)`.
    pub fn contains(&self, offset: u64) -> bool {
        let index = self.regions.partition_point(|region| region.offset <= offset);
        index > 0 && offset - self.regions[index - 1].offset < self.regions[index - 1].length
    }

    /// The bytes covered by both lists, in `O(n + m)`.
    pub fn intersect(&self, other: &RegionList) -> RegionList {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < self.regions.len() && j < other.regions.len() {
            let (a, b) = (self.regions[i], other.regions[j]);
            let (a_end, b_end) = (a.offset + a.length, b.offset + b.length);
            let start = a.offset.max(b.offset);
            let end = a_end.min(b_end);
            if start < end {
                out.push(Region::new(start, end - start));
            }
            if a_end <= b_end {
                i += 1;
            } else {
                j += 1;
            }
        }
        RegionList { regions: out }
    }

    /// The bytes of this list inside `window`.
    pub fn intersect_region(&self, window: Region) -> Result<RegionList, RegionError> {
        let window = RegionList::from_regions(vec![window])?;
        Ok(self.intersect(&window))
    }
}

fn check_end(region: &Region) -> Result<(), RegionError> {
    match region.end() {
        Some(_) => Ok(()),
        None => Err(RegionError::EndOverflow { offset: region.offset, length: region.length }),
    }
}

/// Appends `region` to a stream-ordered list, merging it into the last region
/// when it starts exactly where that one ends. Empty regions are dropped.
pub fn push_coalesced(regions: &mut Vec<Region>, region: Region) {
    if region.length == 0 {
        return;
    }
    if let Some(last) = regions.last_mut() {
        if last.offset.checked_add(last.length) == Some(region.offset) {
            last.length += region.length;
            return;
        }
    }
    regions.push(region);
}

/// Merges neighbours of a stream-ordered list where one ends exactly where the
/// next starts, and drops empty regions; the order is kept.
pub fn coalesce_adjacent(regions: &[Region]) -> Vec<Region> {
    let mut out = Vec::with_capacity(regions.len());
    for region in regions {
        push_coalesced(&mut out, *region);
    }
    out
}

/// One piece of a memory/file zip: `length` bytes at `memory_offset` move
/// to or from `file_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZipPiece {
    /// Offset in the memory buffer.
    pub memory_offset: u64,
    /// Offset in the file.
    pub file_offset: u64,
    /// Bytes in this piece.
    pub length: u64,
}

/// Walks a memory list and a file list together (both in stream order),
/// yielding pieces that cross neither side's boundaries.
///
/// Built by [`ZipIter::new`], which checks that both sides hold the same
/// number of bytes and that no region overflows.
#[derive(Clone, Debug)]
pub struct ZipIter<'a> {
    memory: &'a [Region],
    file: &'a [Region],
    memory_index: usize,
    file_index: usize,
    memory_used: u64,
    file_used: u64,
}

impl<'a> ZipIter<'a> {
    /// Checks the lists and starts the walk.
    pub fn new(memory: &'a [Region], file: &'a [Region]) -> Result<Self, RegionError> {
        let memory_bytes = checked_sum(memory)?;
        let file_bytes = checked_sum(file)?;
        if memory_bytes != file_bytes {
            return Err(RegionError::LengthMismatch { memory_bytes, file_bytes });
        }
        Ok(ZipIter { memory, file, memory_index: 0, file_index: 0, memory_used: 0, file_used: 0 })
    }

    fn skip_exhausted(&mut self) {
        while self.memory_index < self.memory.len() && self.memory_used == self.memory[self.memory_index].length {
            self.memory_index += 1;
            self.memory_used = 0;
        }
        while self.file_index < self.file.len() && self.file_used == self.file[self.file_index].length {
            self.file_index += 1;
            self.file_used = 0;
        }
    }
}

impl Iterator for ZipIter<'_> {
    type Item = ZipPiece;

    fn next(&mut self) -> Option<ZipPiece> {
        self.skip_exhausted();
        let memory = self.memory.get(self.memory_index)?;
        let file = self.file.get(self.file_index)?;
        let length = (memory.length - self.memory_used).min(file.length - self.file_used);
        let piece = ZipPiece {
            memory_offset: memory.offset + self.memory_used,
            file_offset: file.offset + self.file_used,
            length,
        };
        self.memory_used += length;
        self.file_used += length;
        Some(piece)
    }
}

fn checked_sum(regions: &[Region]) -> Result<u128, RegionError> {
    let mut total = 0u128;
    for region in regions {
        check_end(region)?;
        total += region.length as u128;
    }
    Ok(total)
}

/// Collects a [`ZipIter`]: the `(memory, file, length)` triples of list I/O.
pub fn zip_lists(memory: &[Region], file: &[Region]) -> Result<Vec<ZipPiece>, RegionError> {
    Ok(ZipIter::new(memory, file)?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_intersects() {
        let a = RegionList::from_regions(vec![
            Region::new(10, 5),
            Region::new(0, 4),
            Region::new(4, 2),
            Region::new(12, 10),
            Region::new(50, 0),
        ])
        .unwrap();
        assert_eq!(a.as_slice(), &[Region::new(0, 6), Region::new(10, 12)]);
        assert_eq!(a.total_bytes(), 18);
        assert!(a.contains(5) && !a.contains(6) && a.contains(21) && !a.contains(22));
        let b = RegionList::from_regions(vec![Region::new(3, 10)]).unwrap();
        assert_eq!(a.intersect(&b).as_slice(), &[Region::new(3, 3), Region::new(10, 3)]);
        assert!(RegionList::from_regions(vec![Region::new(u64::MAX, 1)]).is_err());
    }

    #[test]
    fn zips_unaligned_lists() {
        let memory = [Region::new(100, 3), Region::new(200, 5)];
        let file = [Region::new(0, 4), Region::new(10, 4)];
        let pieces = zip_lists(&memory, &file).unwrap();
        let triples: Vec<_> = pieces.iter().map(|p| (p.memory_offset, p.file_offset, p.length)).collect();
        assert_eq!(triples, vec![(100, 0, 3), (200, 3, 1), (201, 10, 4)]);
        assert!(zip_lists(&memory, &file[..1]).is_err());
    }
}
