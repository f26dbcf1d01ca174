//! A dataloop walk intersected with round-robin striping, for one server.
//!
//! This module owns the server side of datatype I/O: given the whole
//! client access and a [`StripeFilter`], keep only the bytes this server
//! stores, as [`StripePiece`]s that say where each byte is in the client's
//! packed data stream and where it is in this server's datafile.
//!
//! Striping is `weft_proto::Distribution`'s (`locate` says which server
//! stores a byte and where); this module adds only what the walk needs
//! beyond it: the next owned byte and the gap of other servers' strips
//! around a byte.
//!
//! Cost. A region crossing many strips yields its owned pieces in `O(1)`
//! each, jumping straight over other servers' strips. When a region ends
//! in another server's strip, the cursor skips every upcoming unit that
//! lies wholly inside that gap of non-owned bytes arithmetically: a vector
//! block, a contig element or a whole tile of the repetition, found by
//! division on the unit index, at the innermost strided levels of the walk
//! (a level is skipped only at a block boundary and with a positive
//! stride). For a vector whose blocks are smaller than a strip this makes
//! the work `O(owned pieces + owned strips touched)` instead of
//! `O(all blocks)`; in general it is `O(owned pieces + (gaps entered) ·
//! depth)`. Indexed and struct levels, and negative strides, are walked
//! region by region (still correct, just not accelerated).
//!
//! The remaining worst case — many tiny regions none of which this server
//! owns, each in a different gap (say a vector whose stride is a whole
//! stripe) — costs one step per region. A server bounds it per request with
//! [`StripeCursor::set_region_budget`]: past the budget the walk stops and
//! [`StripeCursor::budget_exhausted`] says so.

use serde::{Deserialize, Serialize};

use weft_proto::Distribution;

use crate::engine::{BatchLimits, Cursor};

/// Why a stripe filter is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StripeError {
    /// `strip_bytes` is 0.
    #[error("strip size must be at least one byte")]
    ZeroStrip,
    /// `stripe_count` is 0.
    #[error("stripe count must be at least one")]
    ZeroStripeCount,
    /// `server_index >= stripe_count`.
    #[error("server index {server_index} not below stripe count {stripe_count}")]
    ServerOutOfRange {
        /// Given server index.
        server_index: u32,
        /// Given stripe count.
        stripe_count: u32,
    },
}

/// Which file bytes one server stores under round-robin striping.
///
/// Only [`StripeFilter::new`] builds one (no `Deserialize`), so a zero strip
/// or an out-of-range index cannot reach the arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeFilter {
    strip_bytes: u64,
    stripe_count: u32,
    server_index: u32,
}

impl StripeFilter {
    /// Checks and builds a filter.
    pub fn new(strip_bytes: u64, stripe_count: u32, server_index: u32) -> Result<Self, StripeError> {
        if strip_bytes == 0 {
            return Err(StripeError::ZeroStrip);
        }
        if stripe_count == 0 {
            return Err(StripeError::ZeroStripeCount);
        }
        if server_index >= stripe_count {
            return Err(StripeError::ServerOutOfRange { server_index, stripe_count });
        }
        Ok(StripeFilter { strip_bytes, stripe_count, server_index })
    }

    /// Bytes per strip.
    pub fn strip_bytes(&self) -> u64 {
        self.strip_bytes
    }
    /// Number of servers in the stripe.
    pub fn stripe_count(&self) -> u32 {
        self.stripe_count
    }
    /// This server's position in the stripe.
    pub fn server_index(&self) -> u32 {
        self.server_index
    }

    fn distribution(&self) -> Distribution {
        Distribution { strip_bytes: self.strip_bytes, stripe_count: self.stripe_count }
    }

    /// Whether this server stores file byte `file_offset`.
    pub fn owns(&self, file_offset: u64) -> bool {
        self.distribution().locate(file_offset).0 == self.server_index
    }

    /// Local datafile offset of file byte `file_offset` (meaningful when owned).
    pub fn datafile_offset(&self, file_offset: u64) -> u64 {
        self.distribution().locate(file_offset).1
    }

    /// First owned byte at or after `file_offset` (may be `2^64`).
    pub fn next_owned(&self, file_offset: u64) -> u128 {
        let count = self.stripe_count as u64;
        let strip = file_offset / self.strip_bytes;
        let owner = strip % count;
        if owner == self.server_index as u64 {
            return file_offset as u128;
        }
        let ahead = (self.server_index as u64 + count - owner) % count;
        (strip as u128 + ahead as u128) * self.strip_bytes as u128
    }

    /// End of the owned strip holding `file_offset` (requires ownership).
    fn strip_end(&self, file_offset: u64) -> u128 {
        (file_offset / self.strip_bytes + 1) as u128 * self.strip_bytes as u128
    }

    /// The largest run of non-owned bytes `[from, to)` around the non-owned
    /// byte `file_offset`.
    fn gap_around(&self, file_offset: u64) -> (u64, u64) {
        let count = self.stripe_count as u64;
        let strip = file_offset / self.strip_bytes;
        let behind = (strip % count + count - self.server_index as u64) % count;
        let from = match strip.checked_sub(behind) {
            Some(owned) => (owned + 1) * self.strip_bytes,
            None => 0,
        };
        let to = self.next_owned(file_offset).min(u64::MAX as u128) as u64;
        (from, to)
    }
}

/// Part of the access stored on one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripePiece {
    /// Position of the first byte in the client's data stream.
    pub stream_offset: u64,
    /// Offset in this server's datafile.
    pub datafile_offset: u64,
    /// Bytes in the piece.
    pub length: u64,
}

/// The rest of a region not yet examined.
#[derive(Clone, Copy, Debug)]
struct Span {
    stream_offset: u64,
    file_offset: u64,
    length: u64,
}

impl Span {
    fn advance(&mut self, bytes: u64) {
        self.stream_offset += bytes;
        self.file_offset += bytes;
        self.length -= bytes;
    }
}

/// A resumable walk yielding only one server's pieces.
#[derive(Clone, Debug)]
pub struct StripeCursor<'a> {
    cursor: Cursor<'a>,
    filter: StripeFilter,
    current: Option<Span>,
    /// Regions taken from the cursor so far.
    examined: u64,
    /// Most regions the walk may take from the cursor.
    budget: u64,
    exhausted: bool,
}

impl<'a> StripeCursor<'a> {
    /// Filters `cursor` (from its current position) through `filter`.
    pub fn new(cursor: Cursor<'a>, filter: StripeFilter) -> Self {
        StripeCursor { cursor, filter, current: None, examined: 0, budget: u64::MAX, exhausted: false }
    }

    /// Bounds the regions this walk takes from the underlying cursor (a
    /// region skipped arithmetically is not taken). Once the budget is
    /// spent, [`StripeCursor::next_batch`] returns what it has, then 0,
    /// and [`StripeCursor::budget_exhausted`] is true. A stream range of
    /// at most `budget` raw regions (see [`Cursor::skip_regions`]) never
    /// exhausts it.
    pub fn set_region_budget(&mut self, budget: u64) {
        self.budget = budget;
    }

    /// Whether the walk stopped at its region budget, not at its end.
    pub fn budget_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Regions taken from the cursor so far.
    pub fn regions_examined(&self) -> u64 {
        self.examined
    }

    /// Stream position up to which the access has been examined: a new
    /// cursor seeked here resumes the walk exactly.
    pub fn stream_position(&self) -> u64 {
        match self.current {
            Some(span) => span.stream_offset,
            None => self.cursor.position(),
        }
    }

    /// Whether the access is exhausted.
    pub fn is_done(&self) -> bool {
        self.current.is_none() && self.cursor.is_done()
    }

    /// Appends the next owned pieces within `limits` to `out`, merging
    /// pieces contiguous in both stream and datafile; returns the bytes
    /// appended (0 once done, or once the region budget is spent).
    pub fn next_batch(&mut self, limits: BatchLimits, out: &mut Vec<StripePiece>) -> u64 {
        let first = out.len();
        let regions_max = limits.regions_max.max(1);
        let bytes_max = limits.bytes_max.max(1);
        let mut bytes = 0u64;
        while bytes < bytes_max {
            let Some(mut span) = self.current.take().or_else(|| self.fetch()) else { break };
            if !self.filter.owns(span.file_offset) {
                self.skip_gap(&mut span);
                continue;
            }
            let to_strip_end = self.filter.strip_end(span.file_offset) - span.file_offset as u128;
            let take = (span.length as u128).min(to_strip_end).min((bytes_max - bytes) as u128) as u64;
            let piece = StripePiece {
                stream_offset: span.stream_offset,
                datafile_offset: self.filter.datafile_offset(span.file_offset),
                length: take,
            };
            if !merge(out, first, piece) {
                if out.len() - first >= regions_max {
                    self.current = Some(span);
                    break;
                }
                out.push(piece);
            }
            bytes += take;
            span.advance(take);
            self.keep(span);
        }
        bytes
    }

    /// Every remaining piece. Only for small accesses and tests.
    pub fn collect_all(&mut self) -> Vec<StripePiece> {
        let mut out = Vec::new();
        while self.next_batch(BatchLimits::regions(usize::MAX), &mut out) > 0 {}
        out
    }

    fn fetch(&mut self) -> Option<Span> {
        if self.cursor.is_done() {
            return None;
        }
        if self.examined >= self.budget {
            self.exhausted = true;
            return None;
        }
        let stream_offset = self.cursor.position();
        let raw = self.cursor.next_raw()?;
        self.examined += 1;
        Some(Span { stream_offset, file_offset: raw.file_offset, length: raw.length })
    }

    fn keep(&mut self, span: Span) {
        if span.length > 0 {
            self.current = Some(span);
        }
    }

    /// Steps over non-owned bytes of `span`; if the span ends inside the
    /// gap, also skips upcoming units wholly inside it.
    fn skip_gap(&mut self, span: &mut Span) {
        let gap = self.filter.next_owned(span.file_offset) - span.file_offset as u128;
        if gap < span.length as u128 {
            span.advance(gap as u64);
            self.keep(*span);
            return;
        }
        let last = span.file_offset + (span.length - 1);
        let (from, to) = self.filter.gap_around(last);
        self.cursor.skip_inside(from, to);
    }
}

fn merge(out: &mut [StripePiece], first: usize, piece: StripePiece) -> bool {
    if out.len() <= first {
        return false;
    }
    let last = out.last_mut().expect("non-empty");
    let stream_next = last.stream_offset.checked_add(last.length) == Some(piece.stream_offset);
    let datafile_next = last.datafile_offset.checked_add(last.length) == Some(piece.datafile_offset);
    if stream_next && datafile_next {
        last.length += piece.length;
        return true;
    }
    false
}
