//! Windowed walks of a noncontiguous access's regions, for the list and
//! posix I/O methods (`crate::noncontig`): the memory regions and the file
//! regions are produced in batches of at most [`WINDOW_REGIONS`] (from the
//! caller's lists, or walking a dataloop) and zipped into `(memory offset,
//! file offset, length)` pieces a window at a time, so a request's
//! client memory does not grow with its size (issue 25). Bad input is
//! found by [`validate`] before anything moves, not part-way.

use weft_dataloop::{BatchLimits, Cursor, Region};
use weft_proto::{limits, ErrorCode, WeftResult};

/// Regions a source produces per batch, and pieces per window.
pub(crate) const WINDOW_REGIONS: usize = 4096;

/// Regions in stream order, produced in batches.
pub(crate) enum RegionSource<'a> {
    /// A list the caller holds.
    List(std::slice::Iter<'a, Region>),
    /// A dataloop walk.
    Walk(Cursor<'a>),
}

impl RegionSource<'_> {
    /// Replaces `out` by the next batch (empty at the end).
    fn next_batch(&mut self, out: &mut Vec<Region>) {
        out.clear();
        match self {
            RegionSource::List(regions) => out.extend(regions.by_ref().take(WINDOW_REGIONS).copied()),
            RegionSource::Walk(cursor) => {
                cursor.next_batch(BatchLimits::regions(WINDOW_REGIONS), out);
            }
        }
    }

    /// Calls `f` for every region, a batch at a time.
    pub(crate) fn for_each(mut self, mut f: impl FnMut(Region) -> WeftResult<()>) -> WeftResult<()> {
        let mut batch = Vec::new();
        loop {
            self.next_batch(&mut batch);
            if batch.is_empty() {
                return Ok(());
            }
            batch.iter().try_for_each(|region| f(*region))?;
        }
    }

    /// Walks every region: `check` each, and returns their total bytes.
    fn total(self, mut check: impl FnMut(&Region) -> WeftResult<()>) -> WeftResult<u64> {
        let mut total = 0u64;
        self.for_each(|region| {
            check(&region)?;
            total = total.checked_add(region.length).ok_or(ErrorCode::TooBig)?;
            Ok(())
        })?;
        Ok(total)
    }
}

/// Checks, walking both sides once without keeping them, that every
/// memory region lies in a buffer of `buffer_len` bytes, that no file
/// region ends past `FILE_BYTES_MAX`, and that both sides hold `total` bytes.
pub(crate) fn validate(
    memory: RegionSource<'_>,
    file: RegionSource<'_>,
    buffer_len: usize,
    total: u64,
) -> WeftResult<()> {
    let memory_bytes = memory.total(|region| match region.end() {
        Some(end) if end <= buffer_len as u64 => Ok(()),
        _ => Err(ErrorCode::Invalid),
    })?;
    let file_bytes = file.total(|region| match region.end() {
        Some(end) if end <= limits::FILE_BYTES_MAX => Ok(()),
        _ => Err(ErrorCode::TooBig),
    })?;
    if memory_bytes != total || file_bytes != total {
        return Err(ErrorCode::Invalid);
    }
    Ok(())
}

/// One side of a [`ZipWalk`]: a source read a batch at a time.
struct Side<'a> {
    source: RegionSource<'a>,
    batch: Vec<Region>,
    index: usize,
    used: u64,
}

impl<'a> Side<'a> {
    fn new(source: RegionSource<'a>) -> Self {
        Side { source, batch: Vec::new(), index: 0, used: 0 }
    }

    /// What is left of the current region (`None` at the end).
    fn current(&mut self) -> Option<Region> {
        loop {
            if let Some(region) = self.batch.get(self.index) {
                if self.used < region.length {
                    return Some(Region::new(region.offset + self.used, region.length - self.used));
                }
                self.index += 1;
                self.used = 0;
                continue;
            }
            self.source.next_batch(&mut self.batch);
            self.index = 0;
            self.used = 0;
            if self.batch.is_empty() {
                return None;
            }
        }
    }
}

/// Memory and file regions walked together, yielding pieces that cross
/// neither side's boundaries.
pub(crate) struct ZipWalk<'a> {
    memory: Side<'a>,
    file: Side<'a>,
}

impl<'a> ZipWalk<'a> {
    /// Zips two sources (checked by [`validate`] first).
    pub(crate) fn new(memory: RegionSource<'a>, file: RegionSource<'a>) -> Self {
        ZipWalk { memory: Side::new(memory), file: Side::new(file) }
    }

    /// Replaces `out` by the next window of at most [`WINDOW_REGIONS`]
    /// `(memory offset, file offset, length)` pieces; `false` (and `out`
    /// empty) at the end.
    pub(crate) fn next_window(&mut self, out: &mut Vec<(u64, u64, u64)>) -> WeftResult<bool> {
        out.clear();
        while out.len() < WINDOW_REGIONS {
            let (memory, file) = match (self.memory.current(), self.file.current()) {
                (Some(memory), Some(file)) => (memory, file),
                (None, None) => break,
                _ => return Err(ErrorCode::Invalid), // one side ended first (validated before: not reached)
            };
            let length = memory.length.min(file.length);
            out.push((memory.offset, file.offset, length));
            self.memory.used += length;
            self.file.used += length;
        }
        Ok(!out.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(memory: &[Region], file: &[Region]) -> Vec<(u64, u64, u64)> {
        let mut zip = ZipWalk::new(RegionSource::List(memory.iter()), RegionSource::List(file.iter()));
        let (mut out, mut window) = (Vec::new(), Vec::new());
        while zip.next_window(&mut window).unwrap() {
            out.extend_from_slice(&window);
        }
        out
    }

    #[test]
    fn zips_unaligned_lists_across_windows() {
        let memory = [Region::new(100, 3), Region::new(200, 0), Region::new(200, 5)];
        let file = [Region::new(0, 4), Region::new(10, 4)];
        assert_eq!(all(&memory, &file), vec![(100, 0, 3), (200, 3, 1), (201, 10, 4)]);
        // More pieces than one window: every piece, in order.
        let many: Vec<Region> = (0..3 * WINDOW_REGIONS as u64).map(|i| Region::new(i * 2, 1)).collect();
        let one = [Region::new(0, many.len() as u64)];
        let pieces = all(&one, &many);
        assert_eq!(pieces.len(), many.len());
        assert!(pieces.iter().enumerate().all(|(i, &p)| p == (i as u64, i as u64 * 2, 1)));
    }

    #[test]
    fn validation_refuses_mismatches_and_bad_regions() {
        let list = |r: &'static [Region]| RegionSource::List(r.iter());
        static MEMORY: [Region; 1] = [Region { offset: 0, length: 8 }];
        static FILE: [Region; 2] = [Region { offset: 0, length: 4 }, Region { offset: 10, length: 4 }];
        static SHORT: [Region; 1] = [Region { offset: 0, length: 4 }];
        static HUGE: [Region; 1] = [Region { offset: u64::MAX - 3, length: 8 }];
        assert_eq!(validate(list(&MEMORY), list(&FILE), 8, 8), Ok(()));
        assert_eq!(validate(list(&MEMORY), list(&FILE), 7, 8), Err(ErrorCode::Invalid), "memory past the buffer");
        assert_eq!(validate(list(&MEMORY), list(&SHORT), 8, 8), Err(ErrorCode::Invalid), "lengths differ");
        assert_eq!(validate(list(&MEMORY), list(&HUGE), 8, 8), Err(ErrorCode::TooBig), "file region overflows");
    }
}
