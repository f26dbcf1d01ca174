//! The granted locks of one datafile: a write map and a read map of exact
//! byte ranges (single writer, shared readers), each an ordered map keyed
//! by `(start, request)` with the longest range it holds, so the ranges
//! overlapping `[start, end)` are found in `O(log n + k)` when lengths are
//! similar (one-byte locks, regions of one access). A read conflicts with
//! the write map; a write with both. Pieces of the same owner never
//! conflict with each other (POSIX: a process's own locks never block it,
//! so an owner can take a new lock before giving up an overlapping old one,
//! which is how the mount splits and upgrades fcntl locks atomically).

use std::collections::BTreeMap;

/// One map of granted ranges.
#[derive(Default)]
struct RangeMap {
    /// `(start, request)` → (end (exclusive), count, owner); a request may
    /// hold several ranges with one start only if its own pieces repeat, so
    /// the count is kept.
    ranges: BTreeMap<(u64, u64), (u64, u32, u64)>,
    /// Longest range ever held since the map was last empty.
    longest: u64,
}

impl RangeMap {
    /// Whether a range of another owner than `owner` overlaps `[start, end)`.
    fn conflicts(&self, start: u64, end: u64, owner: u64) -> bool {
        let from = start.saturating_sub(self.longest);
        self.ranges.range((from, 0)..(end, 0)).any(|(&(other_start, _), &(other_end, _, other_owner))| {
            other_owner != owner && other_end > start && other_start < end
        })
    }

    fn insert(&mut self, start: u64, end: u64, request: u64, owner: u64) {
        let entry = self.ranges.entry((start, request)).or_insert((end, 0, owner));
        entry.0 = entry.0.max(end);
        entry.1 += 1;
        self.longest = self.longest.max(end - start);
    }

    fn remove(&mut self, start: u64, request: u64) {
        if let Some(entry) = self.ranges.get_mut(&(start, request)) {
            entry.1 -= 1;
            if entry.1 == 0 {
                self.ranges.remove(&(start, request));
            }
        }
        if self.ranges.is_empty() {
            self.longest = 0;
        }
    }
}

/// Granted read and write ranges of one datafile (datafile-local offsets).
#[derive(Default)]
pub struct Intervals {
    writes: RangeMap,
    reads: RangeMap,
}

impl Intervals {
    /// Whether `owner` may take `[start, end)` (exclusive: a write lock).
    pub fn conflicts(&self, start: u64, end: u64, exclusive: bool, owner: u64) -> bool {
        self.writes.conflicts(start, end, owner) || (exclusive && self.reads.conflicts(start, end, owner))
    }

    /// Records a range granted to `request` of `owner`.
    pub fn insert(&mut self, start: u64, end: u64, exclusive: bool, request: u64, owner: u64) {
        if exclusive {
            self.writes.insert(start, end, request, owner)
        } else {
            self.reads.insert(start, end, request, owner)
        }
    }

    /// Forgets a granted range.
    pub fn remove(&mut self, start: u64, exclusive: bool, request: u64) {
        if exclusive {
            self.writes.remove(start, request)
        } else {
            self.reads.remove(start, request)
        }
    }

    /// Whether no range is held.
    pub fn is_empty(&self) -> bool {
        self.writes.ranges.is_empty() && self.reads.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_writer_shared_readers() {
        let mut map = Intervals::default();
        // Request 1 of owner 11; owner n + 10 for request n below.
        map.insert(10, 20, false, 1, 11);
        assert!(!map.conflicts(10, 20, false, 12), "readers share");
        assert!(map.conflicts(19, 30, true, 12), "a writer waits for a reader");
        assert!(!map.conflicts(20, 30, true, 12), "exact ranges: adjacent bytes are free");
        assert!(!map.conflicts(0, 10, true, 12));
        assert!(!map.conflicts(12, 13, true, 11), "an owner never conflicts with itself");
        map.insert(100, 101, true, 3, 13);
        assert!(map.conflicts(0, 1000, false, 2), "a reader waits for a writer");
        map.remove(100, true, 3);
        map.remove(10, false, 1);
        assert!(map.is_empty());
        assert!(!map.conflicts(0, u64::MAX, true, 9));
    }

    #[test]
    fn long_range_found_from_far_left() {
        let mut map = Intervals::default();
        map.insert(0, 1 << 30, true, 1, 11);
        for start in [0, 5, 1 << 20, (1 << 30) - 1] {
            assert!(map.conflicts(start, start + 1, false, 2));
        }
        assert!(!map.conflicts(1 << 30, (1 << 30) + 1, false, 2));
    }
}
