//! Round-robin striping: where byte `i` of a file lives.
//!
//! A file of stripe count `n` and strip size `s` stores file byte `i` on
//! datafile `(i / s) % n`, at local offset `(i / (s * n)) * s + i % s`.
//! Everything here is pure arithmetic, checked against a per-byte reference
//! by property tests.

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, WeftResult};
use crate::limits;

/// How a file's bytes are spread over its datafiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Distribution {
    /// Bytes of one strip (the unit placed on one datafile before moving on).
    pub strip_bytes: u64,
    /// Number of datafiles.
    pub stripe_count: u32,
}

/// One contiguous piece of a file access that falls on one datafile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index of the datafile in the file's datafile list.
    pub datafile_index: u32,
    /// Offset within that datafile.
    pub local_offset: u64,
    /// Offset within the file.
    pub file_offset: u64,
    /// Length in bytes.
    pub length: u64,
}

impl Distribution {
    /// Checks the distribution against the limits.
    pub fn validate(&self) -> WeftResult<()> {
        let strip_ok = (limits::STRIP_BYTES_MIN..=limits::STRIP_BYTES_MAX).contains(&self.strip_bytes);
        let count_ok = (1..=limits::STRIPE_COUNT_MAX).contains(&self.stripe_count);
        if strip_ok && count_ok {
            Ok(())
        } else {
            Err(ErrorCode::Invalid)
        }
    }

    fn row_bytes(&self) -> u128 {
        self.strip_bytes as u128 * self.stripe_count as u128
    }

    /// The datafile index and local offset of file byte `file_offset`.
    #[inline]
    pub fn locate(&self, file_offset: u64) -> (u32, u64) {
        let strip = self.strip_bytes;
        let strip_index = file_offset / strip;
        let datafile_index = (strip_index % self.stripe_count as u64) as u32;
        let row = strip_index / self.stripe_count as u64;
        (datafile_index, row * strip + file_offset % strip)
    }

    /// The file offset of byte `local_offset` of datafile `datafile_index`.
    pub fn file_offset(&self, datafile_index: u32, local_offset: u64) -> u128 {
        let row = (local_offset / self.strip_bytes) as u128;
        row * self.row_bytes()
            + datafile_index as u128 * self.strip_bytes as u128
            + (local_offset % self.strip_bytes) as u128
    }

    /// Splits the file range `[offset, offset + length)` into per-datafile pieces,
    /// in file order. Pieces never cross a strip boundary.
    pub fn pieces(&self, offset: u64, length: u64) -> impl Iterator<Item = Piece> + '_ {
        let end = offset.saturating_add(length);
        let mut cursor = offset;
        std::iter::from_fn(move || {
            if cursor >= end {
                return None;
            }
            let (datafile_index, local_offset) = self.locate(cursor);
            let to_strip_end = self.strip_bytes - cursor % self.strip_bytes;
            let length = to_strip_end.min(end - cursor);
            let piece = Piece { datafile_index, local_offset, file_offset: cursor, length };
            cursor += length;
            Some(piece)
        })
    }

    /// For each datafile, the one contiguous local range `[start, end)` that the
    /// file range `[offset, offset + length)` touches (empty ranges have start == end).
    /// A contiguous file range maps to one contiguous local range per datafile.
    pub fn local_ranges(&self, offset: u64, length: u64) -> Vec<(u64, u64)> {
        (0..self.stripe_count)
            .map(|i| (self.local_size(i, offset), self.local_size(i, offset.saturating_add(length))))
            .collect()
    }

    /// How many bytes of the file prefix `[0, file_size)` datafile `i` holds.
    /// This is the local size a datafile must have after a truncate to `file_size`.
    pub fn local_size(&self, datafile_index: u32, file_size: u64) -> u64 {
        let row_bytes = self.row_bytes();
        let rows = file_size as u128 / row_bytes;
        let rest = file_size as u128 % row_bytes;
        let before = datafile_index as u128 * self.strip_bytes as u128;
        let partial = rest.saturating_sub(before).min(self.strip_bytes as u128);
        (rows * self.strip_bytes as u128 + partial) as u64
    }

    /// The logical file size implied by the local sizes of all datafiles:
    /// one past the highest file offset any datafile holds.
    pub fn file_size(&self, local_sizes: &[u64]) -> u64 {
        local_sizes
            .iter()
            .enumerate()
            .filter(|(_, size)| **size > 0)
            .map(|(index, size)| self.file_offset(index as u32, size - 1) + 1)
            .max()
            .map(|size| size.min(u64::MAX as u128) as u64)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Naive reference: walk strips one by one.
    fn reference_locate(d: &Distribution, byte: u64) -> (u32, u64) {
        let mut local = vec![0u64; d.stripe_count as usize];
        let mut file = 0u64;
        let mut server = 0u32;
        loop {
            if byte < file + d.strip_bytes {
                return (server, local[server as usize] + (byte - file));
            }
            local[server as usize] += d.strip_bytes;
            file += d.strip_bytes;
            server = (server + 1) % d.stripe_count;
        }
    }

    fn dist() -> impl Strategy<Value = Distribution> {
        (1u64..64, 1u32..9).prop_map(|(strip_bytes, stripe_count)| Distribution { strip_bytes, stripe_count })
    }

    proptest! {
        #[test]
        fn locate_matches_reference(d in dist(), byte in 0u64..4096) {
            prop_assert_eq!(d.locate(byte), reference_locate(&d, byte));
            let (i, local) = d.locate(byte);
            prop_assert_eq!(d.file_offset(i, local), byte as u128);
        }

        #[test]
        fn pieces_cover_range_in_order(d in dist(), offset in 0u64..2048, length in 0u64..2048) {
            let mut next = offset;
            for piece in d.pieces(offset, length) {
                prop_assert_eq!(piece.file_offset, next);
                prop_assert!(piece.length > 0);
                for k in 0..piece.length {
                    prop_assert_eq!(reference_locate(&d, piece.file_offset + k), (piece.datafile_index, piece.local_offset + k));
                }
                next += piece.length;
            }
            prop_assert_eq!(next, offset + length);
        }

        #[test]
        fn local_sizes_round_trip(d in dist(), size in 0u64..4096) {
            let mut expected = vec![0u64; d.stripe_count as usize];
            for byte in 0..size {
                let (i, local) = reference_locate(&d, byte);
                expected[i as usize] = expected[i as usize].max(local + 1);
            }
            let sizes: Vec<u64> = (0..d.stripe_count).map(|i| d.local_size(i, size)).collect();
            prop_assert_eq!(&sizes, &expected);
            prop_assert_eq!(d.file_size(&sizes), size);
        }

        #[test]
        fn local_ranges_match_pieces(d in dist(), offset in 0u64..2048, length in 0u64..2048) {
            let ranges = d.local_ranges(offset, length);
            let mut seen = vec![None::<(u64, u64)>; d.stripe_count as usize];
            for p in d.pieces(offset, length) {
                let entry = &mut seen[p.datafile_index as usize];
                *entry = Some(match *entry {
                    None => (p.local_offset, p.local_offset + p.length),
                    Some((s, e)) => { prop_assert_eq!(e, p.local_offset); (s, p.local_offset + p.length) }
                });
            }
            for (i, r) in ranges.iter().enumerate() {
                match seen[i] {
                    None => prop_assert_eq!(r.0, r.1),
                    Some(s) => prop_assert_eq!(*r, s),
                }
            }
        }
    }
}
