//! The dataloop engine: a resumable walk from any byte of the data stream.
//!
//! This module owns turning a [`Dataloop`] access (the type repeated `count`
//! times, tiled by its extent, starting at a byte displacement) into file
//! regions, in bounded batches, from any stream position.
//!
//! State is an explicit stack of frames, one per nesting level, so its size
//! is bounded by `weft_proto::limits::DATALOOP_DEPTH_MAX` + 1; nothing recurses.
//! The repetition itself is a virtual `Contig(count)` frame at the bottom.
//!
//! Costs, with `d` the depth and `n` the displacement entries of a node:
//! - [`Cursor::seek`]: `O(d · log n)`. Every level locates the byte
//!   arithmetically (whole tiles, blocks and elements are skipped by division),
//!   indexed and struct levels by binary search over prefix byte counts.
//! - producing a region: `O(d)` amortized. A child that is one contiguous run
//!   is never descended into: a run of `k` such children whose extent equals
//!   their size (a contig, or a vector block of contiguous children) is
//!   emitted as one region in `O(1)`; zero-size blocks are stepped over.
//! - regions touching in the stream and in the file are coalesced in the
//!   output of [`Cursor::next_batch`].
//!
//! A walk can stop anywhere (a batch limit may split a region) and resume
//! either by calling `next_batch` again or, from another process, by building
//! a new cursor and seeking to [`Cursor::position`].

use crate::dataloop::{Dataloop, Kind};
use crate::regions::{push_coalesced, Region};

/// Frame node id of the virtual `Contig(count)` repetition.
const TOP: u32 = u32::MAX;

/// Why an access cannot be walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// `count * size` does not fit in `u64`.
    #[error("access size overflows u64")]
    SizeOverflow,
    /// Some data byte would lie below offset 0 or beyond `u64::MAX`.
    #[error("access reaches outside file offsets 0..=u64::MAX")]
    OffsetOutOfRange,
    /// A seek or end beyond the access size.
    #[error("stream position {position} beyond access size {total}")]
    PositionOutOfRange {
        /// Requested position.
        position: u64,
        /// Access size in bytes.
        total: u64,
    },
}

/// Bounds on one batch of output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most regions appended per batch (at least one is always allowed).
    pub regions_max: usize,
    /// Most data bytes per batch (at least one is always allowed).
    pub bytes_max: u64,
}

impl BatchLimits {
    /// No byte limit, at most `regions_max` regions.
    pub fn regions(regions_max: usize) -> Self {
        BatchLimits { regions_max, bytes_max: u64::MAX }
    }
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    node: u32,
    /// File offset of this node instance's origin.
    base: i128,
    block: u64,
    /// Next element of `block` not yet produced or descended into.
    element: u64,
}

/// A region not yet delivered: starts at the cursor's stream position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    pub(crate) file_offset: u64,
    pub(crate) length: u64,
}

/// A resumable walk over `count` tiled instances of a dataloop.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    dataloop: &'a Dataloop,
    top: Kind,
    displacement: i64,
    total: u64,
    end: u64,
    position: u64,
    stack: Vec<Frame>,
    pending: Option<Raw>,
}

impl<'a> Cursor<'a> {
    /// Starts a walk at stream position 0 over `count` instances of
    /// `dataloop`, instance `i` at `displacement_bytes + i * extent`.
    pub fn new(dataloop: &'a Dataloop, count: u64, displacement_bytes: i64) -> Result<Self, EngineError> {
        let total = count.checked_mul(dataloop.size()).ok_or(EngineError::SizeOverflow)?;
        if total > 0 {
            check_file_range(dataloop, count, displacement_bytes)?;
        }
        let mut cursor = Cursor {
            dataloop,
            top: Kind::Contig { count, child: dataloop.root_index() },
            displacement: displacement_bytes,
            total,
            end: total,
            position: 0,
            stack: Vec::with_capacity(dataloop.depth() as usize + 1),
            pending: None,
        };
        cursor.seek(0)?;
        Ok(cursor)
    }

    /// Bytes in the whole data stream (`count * size`).
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Stream position of the next byte to be produced.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Stream position where the walk stops (initially the total).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Whether nothing is left before the end.
    pub fn is_done(&self) -> bool {
        self.position >= self.end
    }

    /// Stops the walk at stream position `end` (`<= total_bytes`).
    pub fn set_end(&mut self, end: u64) -> Result<(), EngineError> {
        if end > self.total {
            return Err(EngineError::PositionOutOfRange { position: end, total: self.total });
        }
        self.end = end;
        Ok(())
    }

    /// Moves to stream position `position` (skipping the first `position`
    /// bytes of the typemap) in `O(depth · log entries)`.
    pub fn seek(&mut self, position: u64) -> Result<(), EngineError> {
        if position > self.total {
            return Err(EngineError::PositionOutOfRange { position, total: self.total });
        }
        self.stack.clear();
        self.pending = None;
        self.position = position;
        if position < self.total {
            self.descend(position);
        }
        Ok(())
    }

    /// Appends the next coalesced regions within `limits` to `out` and
    /// returns the data bytes appended (0 once the walk is done).
    pub fn next_batch(&mut self, limits: BatchLimits, out: &mut Vec<Region>) -> u64 {
        let first = out.len();
        let regions_max = limits.regions_max.max(1);
        let bytes_max = limits.bytes_max.max(1);
        let mut bytes = 0u64;
        while bytes < bytes_max {
            let Some(raw) = self.next_raw() else { break };
            let mergeable = out.len() > first && out.last().and_then(Region::end) == Some(raw.file_offset);
            if !mergeable && out.len() - first >= regions_max {
                self.unread(raw, 0);
                break;
            }
            let take = raw.length.min(bytes_max - bytes);
            self.unread(raw, take);
            push_coalesced(out, Region::new(raw.file_offset, take));
            bytes += take;
        }
        bytes
    }

    /// Moves past at most `regions_max` regions exactly as the walk
    /// produces them (before coalescing; the unit a
    /// [`crate::StripeCursor`] region budget counts); returns how many.
    /// `O(regions · depth)`.
    pub fn skip_regions(&mut self, regions_max: u64) -> u64 {
        let mut taken = 0;
        while taken < regions_max && self.next_raw().is_some() {
            taken += 1;
        }
        taken
    }

    /// Every remaining region, coalesced. Only for small accesses and tests.
    pub fn collect_all(&mut self) -> Vec<Region> {
        let mut out = Vec::new();
        while self.next_batch(BatchLimits::regions(usize::MAX), &mut out) > 0 {}
        out
    }

    /// The next region exactly as the walk produces it (not coalesced).
    pub(crate) fn next_raw(&mut self) -> Option<Raw> {
        if self.position >= self.end {
            return None;
        }
        let mut raw = match self.pending.take() {
            Some(raw) => raw,
            None => self.walk()?,
        };
        let left = self.end - self.position;
        if raw.length > left {
            self.pending = Some(Raw { file_offset: raw.file_offset + left, length: raw.length - left });
            raw.length = left;
        }
        self.position += raw.length;
        Some(raw)
    }

    /// Gives back all but the first `kept` bytes of the region last
    /// returned by [`Cursor::next_raw`].
    fn unread(&mut self, raw: Raw, kept: u64) {
        if kept == raw.length {
            return;
        }
        let mut rest = Raw { file_offset: raw.file_offset + kept, length: raw.length - kept };
        self.position -= rest.length;
        // A pending region here can only be the tail `next_raw` clipped off
        // this same region at `end`, so it continues `rest` exactly.
        if let Some(tail) = self.pending.take() {
            debug_assert_eq!(tail.file_offset, rest.file_offset + rest.length);
            rest.length += tail.length;
        }
        self.pending = Some(rest);
    }

    fn kind(&self, node: u32) -> &Kind {
        if node == TOP {
            &self.top
        } else {
            self.dataloop.node(node).kind()
        }
    }

    /// Produces the next region from the stack, popping finished frames.
    fn walk(&mut self) -> Option<Raw> {
        loop {
            let frame = *self.stack.last()?;
            let kind = self.kind(frame.node);
            if frame.block >= kind.block_count() {
                self.stack.pop();
                continue;
            }
            let length = kind.block_length(frame.block);
            let child_index = kind.block_child(frame.block);
            let child = self.dataloop.node(child_index);
            if frame.element >= length || child.size() == 0 {
                let top = self.stack.last_mut()?;
                top.block += 1;
                top.element = 0;
                continue;
            }
            let origin =
                frame.base + kind.block_displacement(frame.block) + frame.element as i128 * child.extent() as i128;
            if child.is_contiguous() {
                let run = if child.extent() as u64 == child.size() { length - frame.element } else { 1 };
                self.stack.last_mut()?.element += run;
                let file_offset = (origin + child.true_lb() as i128) as u64;
                return Some(Raw { file_offset, length: run * child.size() });
            }
            self.stack.last_mut()?.element += 1;
            self.stack.push(Frame { node: child_index, base: origin, block: 0, element: 0 });
        }
    }

    /// Builds the stack for stream position `position < total`.
    fn descend(&mut self, position: u64) {
        let mut node = TOP;
        let mut base = self.displacement as i128;
        let mut rem = position;
        loop {
            let (block, element, intra) = self.locate(node, rem);
            let kind = self.kind(node);
            let length = kind.block_length(block);
            let child_index = kind.block_child(block);
            let child = self.dataloop.node(child_index);
            let origin = base + kind.block_displacement(block) + element as i128 * child.extent() as i128;
            if child.is_contiguous() {
                let run = if child.extent() as u64 == child.size() { length - element } else { 1 };
                let file_offset = (origin + child.true_lb() as i128) as u64 + intra;
                self.pending = Some(Raw { file_offset, length: run * child.size() - intra });
                self.stack.push(Frame { node, base, block, element: element + run });
                return;
            }
            self.stack.push(Frame { node, base, block, element: element + 1 });
            node = child_index;
            base = origin;
            rem = intra;
        }
    }

    /// `(block, element, byte within element)` of byte `rem` of one instance
    /// of `node`; requires `rem < size(node)`.
    fn locate(&self, node: u32, rem: u64) -> (u64, u64, u64) {
        let kind = self.kind(node);
        let block = if kind.is_uniform() {
            let child_size = self.dataloop.node(kind.block_child(0)).size();
            rem / (kind.block_length(0) * child_size)
        } else {
            let prefix = &self.dataloop.node(node).derived.prefix_bytes;
            (prefix.partition_point(|bytes| *bytes <= rem) - 1) as u64
        };
        let before = match kind.is_uniform() {
            true => block * kind.block_length(0) * self.dataloop.node(kind.block_child(0)).size(),
            false => self.dataloop.node(node).derived.prefix_bytes[block as usize],
        };
        let child_size = self.dataloop.node(kind.block_child(block)).size();
        let within = rem - before;
        (block, within / child_size, within % child_size)
    }

    /// Skips, without producing them, upcoming units whose data lies
    /// entirely inside `[from, to)`: elements of the current block of any
    /// frame (a tile of the repetition, contig elements, a block's elements)
    /// and whole vector blocks, found by division whatever the sign of the
    /// step (a zero step, as with a zero-extent child, skips every
    /// remaining unit at once). Blocks of indexed and struct frames are
    /// stepped over one by one. Returns the stream bytes skipped. `O(depth
    /// + blocks stepped over)`.
    pub(crate) fn skip_inside(&mut self, from: u64, to: u64) -> u64 {
        if self.pending.is_some() {
            return 0;
        }
        let mut skipped = 0;
        while let Some(frame) = self.stack.last().copied() {
            let kind = self.kind(frame.node);
            if frame.block >= kind.block_count() {
                self.stack.pop();
                continue;
            }
            let is_vector = matches!(kind, Kind::Vector { .. });
            let block_done = frame.element >= kind.block_length(frame.block)
                || self.dataloop.node(kind.block_child(frame.block)).size() == 0;
            if block_done && !is_vector {
                let top = self.stack.last_mut().expect("the frame viewed");
                top.block += 1;
                top.element = 0;
                continue;
            }
            let Some(unit) = self.unit_view(frame) else { break };
            if unit.index >= unit.count {
                self.stack.pop();
                continue;
            }
            let count = self.skippable(&unit, from as i128, to as i128);
            let count = count.min((self.end - self.position) / unit.bytes);
            let bytes = count * unit.bytes;
            self.position += bytes;
            skipped += bytes;
            let top = self.stack.last_mut().expect("the frame viewed");
            if unit.by_block {
                top.block = unit.index + count;
                top.element = 0;
            } else {
                top.element = unit.index + count;
            }
            if unit.index + count < unit.count {
                break;
            }
            if !unit.by_block && !is_vector {
                // The block is done: on to the next (a vector's next
                // blocks are viewed as units on the next round).
                top.block += 1;
                top.element = 0;
            }
        }
        skipped
    }

    /// The frame's next units: whole blocks of a vector at a block
    /// boundary, else the remaining elements of the current block.
    fn unit_view(&self, frame: Frame) -> Option<Unit> {
        let kind = self.kind(frame.node);
        let length = kind.block_length(frame.block);
        let child = self.dataloop.node(kind.block_child(frame.block));
        let extent = child.extent() as i128;
        let (lo, hi) = (child.true_lb() as i128, child.true_ub() as i128);
        let unit = match kind {
            Kind::Vector { count, blocklength, stride_bytes, .. } if frame.element == 0 || frame.element >= length => {
                let index = if frame.element == 0 { frame.block } else { frame.block + 1 };
                let spread = (*blocklength as i128 - 1) * extent;
                Unit {
                    by_block: true,
                    index,
                    count: *count,
                    step: *stride_bytes as i128,
                    base: frame.base,
                    lo: lo + spread.min(0),
                    hi: hi + spread.max(0),
                    bytes: blocklength.checked_mul(child.size())?,
                }
            }
            _ if frame.element < length => Unit {
                by_block: false,
                index: frame.element,
                count: length,
                step: extent,
                base: frame.base + kind.block_displacement(frame.block),
                lo,
                hi,
                bytes: child.size(),
            },
            _ => return None,
        };
        (unit.bytes > 0).then_some(unit)
    }

    /// How many units from `unit.index` on lie entirely in `[from, to)`.
    fn skippable(&self, unit: &Unit, from: i128, to: i128) -> u64 {
        let first = unit.base + unit.index as i128 * unit.step;
        if first + unit.lo < from || first + unit.hi > to {
            return 0;
        }
        let left = (unit.count - unit.index) as u128;
        let fitting = match unit.step.cmp(&0) {
            std::cmp::Ordering::Greater => ((to - first - unit.hi) / unit.step + 1) as u128,
            std::cmp::Ordering::Less => ((first + unit.lo - from) / -unit.step + 1) as u128,
            std::cmp::Ordering::Equal => left,
        };
        fitting.min(left) as u64
    }
}

/// A strided frame viewed as `count` equal units.
struct Unit {
    by_block: bool,
    index: u64,
    count: u64,
    step: i128,
    base: i128,
    lo: i128,
    hi: i128,
    bytes: u64,
}

/// Checks that every data byte of the access lies in `0..=u64::MAX`.
fn check_file_range(dataloop: &Dataloop, count: u64, displacement: i64) -> Result<(), EngineError> {
    let out = EngineError::OffsetOutOfRange;
    let last = (count as i128 - 1).checked_mul(dataloop.extent() as i128).ok_or(out)?;
    let low = (displacement as i128 + dataloop.true_lb() as i128).checked_add(last.min(0)).ok_or(out)?;
    // The upper end from `true_ub` itself: the span `true_ub - true_lb` may exceed i64.
    let high = (displacement as i128 + dataloop.true_ub() as i128).checked_add(last.max(0)).ok_or(out)?;
    if low < 0 || high > u64::MAX as i128 {
        return Err(out);
    }
    Ok(())
}
