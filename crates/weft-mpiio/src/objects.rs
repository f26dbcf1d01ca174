//! Objects from file views (issue 14, after Dickens' object-based caching):
//! the maximal byte regions of a file grouped by the set of ranks whose
//! views cover them. A region covered by one rank's view is that rank's
//! *private* object; one covered by several is *shared*.
//!
//! The module owns the region arithmetic only (no MPI, no I/O):
//! - [`Coverage::of_view`]: one rank's view as a compact, periodic
//!   description — the displacement, the file type's extent (the period)
//!   and the regions of *one* tile. A view is never flattened over the
//!   file; a tile with more than [`TILE_REGIONS_MAX`] regions is coarsened
//!   to its hull (an over-approximation of what the rank covers).
//! - [`ObjectMap::build`]: the objects of all ranks' coverages. Past a
//!   prefix (up to the largest displacement) the pattern repeats with the
//!   least common multiple of the periods; the prefix and one combined
//!   period are swept. When the combined period overflows or the sweep
//!   would pass [`EVENTS_MAX`] intervals, the map is *coarse*: each rank
//!   covers everything from its first byte on, so the overlapping span is
//!   one shared object.
//!
//! Coarsening only ever adds ranks to a byte's accessor set, so a byte the
//! map calls private to rank `r` is covered by no other rank's view; the
//! converse may fail (a coarse map calls some private bytes shared).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region};

/// Regions of one tile kept exactly; a tile with more is coarsened to its hull.
pub const TILE_REGIONS_MAX: usize = 16_384;
/// Intervals a sweep may enumerate; more make the map coarse.
pub const EVENTS_MAX: u64 = 1 << 20;

/// What one rank's view covers, compactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coverage {
    /// Nothing (a file type of size zero).
    Empty,
    /// Every byte from `start` on (a contiguous view, or a coarsened one).
    From {
        /// First covered byte.
        start: u64,
    },
    /// `tile` (sorted, disjoint, non-adjacent `(offset, length)` pairs in
    /// `[0, period)`) repeated every `period` bytes from `displacement`.
    Periodic {
        /// File offset of the first tile.
        displacement: u64,
        /// Bytes between tiles (the file type's extent).
        period: u64,
        /// Covered regions of one tile, relative to its start.
        tile: Vec<(u64, u64)>,
    },
}

impl Coverage {
    /// The coverage of a view: `file_type` tiled from `displacement`.
    /// Walks at most [`TILE_REGIONS_MAX`] + 1 regions of one tile.
    pub fn of_view(displacement: u64, file_type: &Dataloop) -> Coverage {
        if file_type.size() == 0 {
            return Coverage::Empty;
        }
        let (Ok(period), Ok(lb), Ok(ub)) =
            (u64::try_from(file_type.extent()), u64::try_from(file_type.true_lb()), u64::try_from(file_type.true_ub()))
        else {
            return Coverage::From { start: displacement };
        };
        let first = displacement.saturating_add(lb);
        if period == 0 || ub > period {
            // Tiles overlap their successors: not periodic in the simple sense.
            return Coverage::From { start: first };
        }
        let Ok(mut cursor) = Cursor::new(file_type, 1, 0) else { return Coverage::From { start: first } };
        let mut tile: Vec<(u64, u64)> = Vec::new();
        let mut batch: Vec<Region> = Vec::new();
        loop {
            batch.clear();
            if cursor.next_batch(BatchLimits::regions(4096), &mut batch) == 0 {
                break;
            }
            for region in batch.iter().filter(|r| r.length > 0) {
                match tile.last_mut() {
                    Some((o, l)) if *o + *l == region.offset => *l += region.length,
                    _ => tile.push((region.offset, region.length)),
                }
            }
            if tile.len() > TILE_REGIONS_MAX {
                tile = vec![(lb, ub - lb)];
                break;
            }
        }
        Coverage::normalised(displacement, period, tile)
    }

    /// A periodic coverage, simplified: a tile covering its whole period
    /// is [`Coverage::From`].
    pub fn normalised(displacement: u64, period: u64, tile: Vec<(u64, u64)>) -> Coverage {
        match tile.as_slice() {
            [] => Coverage::Empty,
            [(0, l)] if *l == period => Coverage::From { start: displacement },
            _ => Coverage::Periodic { displacement, period, tile },
        }
    }

    /// The first covered byte, if any.
    fn start(&self) -> Option<u64> {
        match self {
            Coverage::Empty => None,
            Coverage::From { start } => Some(*start),
            Coverage::Periodic { displacement, tile, .. } => Some(displacement.saturating_add(tile[0].0)),
        }
    }

    /// Whether the coverage is well formed (checked on data from other ranks).
    fn valid(&self) -> bool {
        match self {
            Coverage::Empty | Coverage::From { .. } => true,
            Coverage::Periodic { displacement, period, tile } => {
                let mut end = 0u64;
                !tile.is_empty()
                    && *period > 0
                    && displacement.checked_add(*period).is_some()
                    && tile.iter().enumerate().all(|(i, (o, l))| {
                        let ok = *l > 0 && (i == 0 || *o > end) && o.checked_add(*l).is_some_and(|e| e <= *period);
                        end = o + l;
                        ok
                    })
            }
        }
    }
}

/// One object piece: `[start, end)` with accessor set `object` (an index
/// into [`ObjectMap::accessors`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start: u64,
    end: u64,
    object: u32,
}

/// How a piece of an access is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Covered by the accessing rank's view only.
    Private,
    /// Covered by several views (or not known to be private).
    Shared,
}

/// The objects of a set of views.
#[derive(Clone, Debug)]
pub struct ObjectMap {
    /// Accessor set of each object (sorted ranks).
    accessors: Vec<Vec<u32>>,
    /// Pieces in `[0, frame_start)`, sorted.
    prefix: Vec<Segment>,
    /// Pieces of one combined period `[frame_start, frame_start + frame_len)`, sorted.
    frame: Vec<Segment>,
    frame_start: u64,
    frame_len: u64,
    coarse: bool,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl ObjectMap {
    /// The objects of `views[rank]` for every rank. `None` if a coverage
    /// is malformed.
    pub fn build(views: &[Coverage]) -> Option<ObjectMap> {
        if !views.iter().all(Coverage::valid) {
            return None;
        }
        if let Some(map) = Self::sweep(views) {
            return Some(map);
        }
        let coarse: Vec<Coverage> =
            views.iter().map(|v| v.start().map_or(Coverage::Empty, |start| Coverage::From { start })).collect();
        let mut map = Self::sweep(&coarse)?;
        map.coarse = true;
        Some(map)
    }

    /// Whether the map was coarsened.
    pub fn is_coarse(&self) -> bool {
        self.coarse
    }

    /// Number of distinct objects (accessor sets).
    pub fn objects(&self) -> usize {
        self.accessors.len()
    }

    /// The accessor sets, by object index.
    pub fn accessors(&self) -> &[Vec<u32>] {
        &self.accessors
    }

    /// The exact sweep, or `None` when it would be too large.
    fn sweep(views: &[Coverage]) -> Option<ObjectMap> {
        let mut frame_start = 0u64;
        let mut frame_len = 1u64;
        for view in views {
            match view {
                Coverage::Empty => {}
                Coverage::From { start } => frame_start = frame_start.max(*start),
                Coverage::Periodic { displacement, period, .. } => {
                    frame_start = frame_start.max(*displacement);
                    frame_len = (frame_len / gcd(frame_len, *period)).checked_mul(*period)?;
                }
            }
        }
        let frame_end = frame_start.checked_add(frame_len)?;
        // Count before enumerating.
        let mut events = 0u64;
        for view in views {
            if let Coverage::Periodic { displacement, period, tile } = view {
                let tiles = (frame_end - displacement).div_ceil(*period);
                events = events.checked_add(tiles.checked_mul(tile.len() as u64)?)?;
            } else {
                events += 1;
            }
            if events > EVENTS_MAX {
                return None;
            }
        }
        // Boundaries: (position, rank, +1 / -1).
        let mut bounds: Vec<(u64, bool, u32)> = Vec::with_capacity(2 * events as usize);
        for (rank, view) in views.iter().enumerate() {
            let rank = rank as u32;
            match view {
                Coverage::Empty => {}
                Coverage::From { start } => {
                    bounds.push((*start, true, rank));
                    bounds.push((frame_end, false, rank));
                }
                Coverage::Periodic { displacement, period, tile } => {
                    let mut base = *displacement;
                    while base < frame_end {
                        for (o, l) in tile {
                            let s = base + o;
                            if s >= frame_end {
                                break;
                            }
                            bounds.push((s, true, rank));
                            bounds.push(((s + l).min(frame_end), false, rank));
                        }
                        base = base.saturating_add(*period);
                    }
                }
            }
        }
        // Ends sort before starts at one position (`false < true`).
        bounds.sort_unstable();
        let mut map = ObjectMap {
            accessors: Vec::new(),
            prefix: Vec::new(),
            frame: Vec::new(),
            frame_start,
            frame_len,
            coarse: false,
        };
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut active: Vec<u32> = Vec::new(); // sorted ranks
        let mut cuts: Vec<u64> = bounds.iter().map(|b| b.0).collect();
        cuts.push(frame_start);
        cuts.sort_unstable();
        cuts.dedup();
        let mut next = 0usize;
        for window in cuts.windows(2) {
            let (at, until) = (window[0], window[1]);
            while next < bounds.len() && bounds[next].0 == at {
                let (_, open, rank) = bounds[next];
                match (open, active.binary_search(&rank)) {
                    (true, Err(i)) => active.insert(i, rank),
                    (false, Ok(i)) => {
                        active.remove(i);
                    }
                    // A rank's own regions are disjoint: no double opens.
                    _ => {}
                }
                next += 1;
            }
            if active.is_empty() || until <= at {
                continue;
            }
            let object = *ids.entry(active.clone()).or_insert_with(|| {
                map.accessors.push(active.clone());
                (map.accessors.len() - 1) as u32
            });
            let list = if at < frame_start { &mut map.prefix } else { &mut map.frame };
            match list.last_mut() {
                Some(last) if last.end == at && last.object == object => last.end = until,
                _ => list.push(Segment { start: at, end: until, object }),
            }
        }
        Some(map)
    }

    /// The object holding byte `at` and the end of its piece (`None`: no
    /// view covers it; the end is then the next covered byte, or `u64::MAX`).
    fn piece_at(&self, at: u64) -> (Option<u32>, u64) {
        let (list, base, local) = if at < self.frame_start {
            (&self.prefix, 0, at)
        } else if self.frame.is_empty() {
            return (None, u64::MAX);
        } else {
            let period = (at - self.frame_start) / self.frame_len;
            let base = period * self.frame_len;
            (&self.frame, base, at - base)
        };
        let i = list.partition_point(|s| s.end <= local);
        match list.get(i) {
            Some(s) if s.start <= local => (Some(s.object), s.end.saturating_add(base)),
            Some(s) => (None, s.start.saturating_add(base)),
            None if at < self.frame_start => (None, self.frame_start),
            None => (None, (self.frame_start + self.frame_len).saturating_add(base)),
        }
    }

    /// The accessor set of byte `at` (empty: no view covers it).
    pub fn accessors_at(&self, at: u64) -> &[u32] {
        match self.piece_at(at).0 {
            Some(object) => &self.accessors[object as usize],
            None => &[],
        }
    }

    /// Splits `region` into maximal pieces private to `rank` or shared,
    /// appended to `out` in file order (adjacent pieces of one class merged).
    pub fn split(&self, rank: u32, region: Region, out: &mut Vec<(Region, Class)>) {
        let end = region.offset.saturating_add(region.length);
        let mut at = region.offset;
        while at < end {
            let (object, piece_end) = self.piece_at(at);
            let until = piece_end.min(end).max(at + 1);
            let class = match object {
                Some(o) if self.accessors[o as usize] == [rank] => Class::Private,
                _ => Class::Shared,
            };
            match out.last_mut() {
                Some((last, c)) if *c == class && last.offset + last.length == at => last.length += until - at,
                _ => out.push((Region::new(at, until - at), class)),
            }
            at = until;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every byte below `limit` a coverage covers, by enumeration.
    fn brute(view: &Coverage, limit: u64) -> Vec<bool> {
        let mut covered = vec![false; limit as usize];
        match view {
            Coverage::Empty => {}
            Coverage::From { start } => (*start..limit).for_each(|x| covered[x as usize] = true),
            Coverage::Periodic { displacement, period, tile } => {
                let mut base = *displacement;
                while base < limit {
                    for (o, l) in tile {
                        (base + o..(base + o + l).min(limit)).for_each(|x| covered[x as usize] = true);
                    }
                    base += period;
                }
            }
        }
        covered
    }

    fn truth(views: &[Coverage], limit: u64) -> Vec<Vec<u32>> {
        let each: Vec<Vec<bool>> = views.iter().map(|v| brute(v, limit)).collect();
        (0..limit as usize).map(|x| (0..views.len() as u32).filter(|r| each[*r as usize][x]).collect()).collect()
    }

    fn coverage() -> impl Strategy<Value = Coverage> {
        (0u64..40, 1u64..24, proptest::collection::vec((0u64..24, 1u64..6), 0..5)).prop_map(|(disp, period, raw)| {
            let mut marks = vec![false; period as usize];
            for (o, l) in raw {
                (o..o + l).filter(|x| *x < period).for_each(|x| marks[x as usize] = true);
            }
            let mut tile: Vec<(u64, u64)> = Vec::new();
            for (x, m) in marks.iter().enumerate() {
                if *m {
                    match tile.last_mut() {
                        Some((o, l)) if *o + *l == x as u64 => *l += 1,
                        _ => tile.push((x as u64, 1)),
                    }
                }
            }
            Coverage::normalised(disp, period, tile)
        })
    }

    proptest! {
        #[test]
        fn objects_match_brute_force(views in proptest::collection::vec(coverage(), 1..5)) {
            let map = ObjectMap::build(&views).unwrap();
            prop_assert!(!map.is_coarse());
            let limit = 600;
            let truth = truth(&views, limit);
            for x in 0..limit {
                prop_assert_eq!(map.accessors_at(x), truth[x as usize].as_slice(), "byte {}", x);
            }
            // Maximal: adjacent pieces of one list differ in accessors.
            for list in [&map.prefix, &map.frame] {
                for w in list.windows(2) {
                    prop_assert!(w[0].end < w[1].start || w[0].object != w[1].object);
                }
            }
            // split agrees byte by byte.
            for rank in 0..views.len() as u32 {
                let mut out = Vec::new();
                map.split(rank, Region::new(0, limit), &mut out);
                let mut at = 0;
                for (region, class) in out {
                    prop_assert_eq!(region.offset, at);
                    for x in region.offset..region.offset + region.length {
                        let private = truth[x as usize] == [rank];
                        prop_assert_eq!(class == Class::Private, private, "rank {} byte {}", rank, x);
                    }
                    at = region.offset + region.length;
                }
                prop_assert_eq!(at, limit);
            }
        }

        #[test]
        fn coarse_maps_never_call_shared_bytes_private(views in proptest::collection::vec(coverage(), 1..5)) {
            let coarse: Vec<Coverage> =
                views.iter().map(|v| v.start().map_or(Coverage::Empty, |start| Coverage::From { start })).collect();
            let mut map = ObjectMap::sweep(&coarse).unwrap();
            map.coarse = true;
            let limit = 300;
            let truth = truth(&views, limit);
            for x in 0..limit {
                let got = map.accessors_at(x);
                prop_assert!(truth[x as usize].iter().all(|r| got.contains(r)), "byte {}", x);
            }
        }

        #[test]
        fn view_coverage_matches_the_view(count in 1u64..6, block in 1u64..5, gap in 0u64..5, disp in 0u64..30) {
            let int = Dataloop::bytes(4).unwrap();
            let file_type = Dataloop::vector(count, block, (block + gap) as i64, &int).unwrap();
            let coverage = Coverage::of_view(disp, &file_type);
            let limit = 400u64;
            let tiles = limit / file_type.extent() as u64 + 1;
            let mut cursor = Cursor::new(&file_type, tiles, disp as i64).unwrap();
            let mut expected = vec![false; limit as usize];
            for r in cursor.collect_all() {
                (r.offset..(r.offset + r.length).min(limit)).for_each(|x| expected[x as usize] = true);
            }
            prop_assert_eq!(brute(&coverage, limit), expected);
        }
    }

    #[test]
    fn tiles_of_two_ranks() {
        // Rank 0: bytes 0..6 of every 8; rank 1: bytes 4..8 of every 8.
        let views = [Coverage::normalised(0, 8, vec![(0, 6)]), Coverage::normalised(0, 8, vec![(4, 4)])];
        let map = ObjectMap::build(&views).unwrap();
        assert_eq!(map.objects(), 3);
        assert_eq!(map.accessors_at(1003), &[0u32][..]);
        assert_eq!(map.accessors_at(1005), &[0u32, 1][..]);
        assert_eq!(map.accessors_at(1007), &[1u32][..]);
        let mut out = Vec::new();
        map.split(0, Region::new(8, 8), &mut out);
        assert_eq!(out, vec![(Region::new(8, 4), Class::Private), (Region::new(12, 4), Class::Shared)]);
    }

    #[test]
    fn huge_combined_periods_coarsen() {
        // Coprime large periods: the least common multiple is far past the bound.
        let views =
            [Coverage::normalised(0, 1_000_003, vec![(0, 10)]), Coverage::normalised(5, 999_983, vec![(0, 10)])];
        let map = ObjectMap::build(&views).unwrap();
        assert!(map.is_coarse());
        assert_eq!(map.accessors_at(2), &[0u32][..]);
        assert_eq!(map.accessors_at(7), &[0u32, 1][..]);
        assert_eq!(map.accessors_at(u64::MAX / 2), &[0u32, 1][..]);
    }

    #[test]
    fn a_huge_tile_is_its_hull_and_a_contiguous_view_is_from() {
        let byte = Dataloop::bytes(1).unwrap();
        let n = TILE_REGIONS_MAX as u64 + 10;
        let vector = Dataloop::vector(n, 1, 2, &byte).unwrap();
        let many = Dataloop::resized(&vector, 0, 2 * n as i64 + 100).unwrap();
        match Coverage::of_view(100, &many) {
            Coverage::Periodic { displacement: 100, period, tile } => {
                assert_eq!(period, 2 * n + 100);
                assert_eq!(tile, vec![(0, 2 * n - 1)])
            }
            other => panic!("{other:?}"),
        }
        let contiguous = Dataloop::bytes(64).unwrap();
        assert_eq!(Coverage::of_view(7, &contiguous), Coverage::From { start: 7 });
    }

    #[test]
    fn malformed_coverages_are_refused() {
        assert!(ObjectMap::build(&[Coverage::Periodic { displacement: 0, period: 4, tile: vec![(2, 4)] }]).is_none());
        assert!(ObjectMap::build(&[Coverage::Periodic { displacement: 0, period: 0, tile: vec![] }]).is_none());
    }
}
