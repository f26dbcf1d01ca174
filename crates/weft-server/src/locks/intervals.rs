//! The granted locks of one datafile: a write map and a read map of exact
//! byte ranges (single writer, shared readers), each an ordered map keyed
//! by `(start, request)` with the longest range it holds, so the ranges
//! overlapping `[start, end)` are found in `O(log n + k)` when lengths are
//! similar (one-byte locks, regions of one access). A read conflicts with
//! the write map; a write with both. Pieces of the same request never
//! conflict with each other.

use std::collections::BTreeMap;

/// One map of granted ranges.
#[derive(Default)]
struct RangeMap {
    /// `(start, request)` → end (exclusive); a request may hold several
    /// ranges with one start only if its own pieces repeat, so the count is kept.
    ranges: BTreeMap<(u64, u64), (u64, u32)>,
    /// Longest range ever held since the map was last empty.
    longest: u64,
}

impl RangeMap {
    /// Whether a range of another request than `request` overlaps `[start, end)`.
    fn conflicts(&self, start: u64, end: u64, request: u64) -> bool {
        let from = start.saturating_sub(self.longest);
        self.ranges.range((from, 0)..(end, 0)).any(|(&(other_start, other_request), &(other_end, _))| {
            other_request != request && other_end > start && other_start < end
        })
    }

    fn insert(&mut self, start: u64, end: u64, request: u64) {
        let entry = self.ranges.entry((start, request)).or_insert((end, 0));
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
    /// Whether `request` may take `[start, end)` (exclusive: a write lock).
    pub fn conflicts(&self, start: u64, end: u64, exclusive: bool, request: u64) -> bool {
        self.writes.conflicts(start, end, request) || (exclusive && self.reads.conflicts(start, end, request))
    }

    /// Records a granted range.
    pub fn insert(&mut self, start: u64, end: u64, exclusive: bool, request: u64) {
        if exclusive {
            self.writes.insert(start, end, request)
        } else {
            self.reads.insert(start, end, request)
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
        map.insert(10, 20, false, 1);
        assert!(!map.conflicts(10, 20, false, 2), "readers share");
        assert!(map.conflicts(19, 30, true, 2), "a writer waits for a reader");
        assert!(!map.conflicts(20, 30, true, 2), "exact ranges: adjacent bytes are free");
        assert!(!map.conflicts(0, 10, true, 2));
        assert!(!map.conflicts(12, 13, true, 1), "a request never conflicts with itself");
        map.insert(100, 101, true, 3);
        assert!(map.conflicts(0, 1000, false, 2), "a reader waits for a writer");
        map.remove(100, true, 3);
        map.remove(10, false, 1);
        assert!(map.is_empty());
        assert!(!map.conflicts(0, u64::MAX, true, 9));
    }

    #[test]
    fn long_range_found_from_far_left() {
        let mut map = Intervals::default();
        map.insert(0, 1 << 30, true, 1);
        for start in [0, 5, 1 << 20, (1 << 30) - 1] {
            assert!(map.conflicts(start, start + 1, false, 2));
        }
        assert!(!map.conflicts(1 << 30, (1 << 30) + 1, false, 2));
    }
}
