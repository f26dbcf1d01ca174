//! File views on the gateway: a [`WireView`] decoded once per set_view,
//! and the file regions a stream range of it covers.

use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region};
use weft_proto::ErrorCode;

use crate::wire::{At, WireView};

/// Regions walked per batch.
const REGIONS_PER_BATCH: usize = 4096;

/// A decoded view.
#[derive(Clone, Debug)]
pub struct View {
    displacement: i64,
    etype_bytes: u64,
    file_type: Dataloop,
}

impl View {
    /// The default view: bytes from offset 0.
    pub fn bytes() -> View {
        View { displacement: 0, etype_bytes: 1, file_type: Dataloop::bytes(1).expect("one byte is a valid type") }
    }

    /// Decodes a view sent by a client; a malformed one is `Invalid`.
    pub fn decode(wire: &WireView) -> Result<View, ErrorCode> {
        let file_type = Dataloop::decode(&wire.file_type).map_err(|_| ErrorCode::Invalid)?;
        if wire.displacement < 0 || wire.etype_bytes == 0 || file_type.size() == 0 || file_type.extent() <= 0 {
            return Err(ErrorCode::Invalid);
        }
        Ok(View { displacement: wire.displacement, etype_bytes: wire.etype_bytes, file_type })
    }

    /// Bytes per etype.
    pub fn etype_bytes(&self) -> u64 {
        self.etype_bytes
    }

    fn contiguous(&self) -> bool {
        let t = &self.file_type;
        t.root().is_contiguous() && t.true_lb() == 0 && t.extent() == t.size() as i64
    }

    /// The file regions of stream bytes `[view_offset, view_offset + len)`, in stream order.
    pub fn regions(&self, view_offset: u64, len: u64) -> Result<Vec<(u64, u64)>, ErrorCode> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let end = view_offset.checked_add(len).ok_or(ErrorCode::Invalid)?;
        if self.contiguous() {
            let start = (self.displacement as u64).checked_add(view_offset).ok_or(ErrorCode::Invalid)?;
            return Ok(vec![(start, len)]);
        }
        let tiles = end.div_ceil(self.file_type.size());
        let mut cursor = Cursor::new(&self.file_type, tiles, self.displacement).map_err(|_| ErrorCode::Invalid)?;
        cursor.seek(view_offset).map_err(|_| ErrorCode::Invalid)?;
        cursor.set_end(end).map_err(|_| ErrorCode::Invalid)?;
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut batch: Vec<Region> = Vec::new();
        loop {
            batch.clear();
            if cursor.next_batch(BatchLimits::regions(REGIONS_PER_BATCH), &mut batch) == 0 {
                return Ok(out);
            }
            for region in &batch {
                match out.last_mut() {
                    Some(last) if last.0 + last.1 == region.offset => last.1 += region.length,
                    _ => out.push((region.offset, region.length)),
                }
            }
        }
    }

    /// The regions of an access `at` of `len` bytes through this view.
    pub fn resolve(&self, at: &At, len: u64) -> Result<Vec<(u64, u64)>, ErrorCode> {
        match at {
            At::Stream { view_offset } => self.regions(*view_offset, len),
            At::Regions(regions) => {
                if regions.iter().map(|r| r.1).sum::<u64>() != len {
                    return Err(ErrorCode::Invalid);
                }
                Ok(regions.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_view_regions() {
        let int = Dataloop::bytes(4).unwrap();
        let file_type = Dataloop::vector(2, 1, 2, &int).unwrap();
        let wire = WireView { displacement: 100, etype_bytes: 4, file_type: file_type.encode() };
        let view = View::decode(&wire).unwrap();
        // Stream bytes 2..10: half of the first int (at 100), the second
        // (at 108), half of the third (next tile, extent 12: at 112), which
        // joins the second.
        assert_eq!(view.regions(2, 8).unwrap(), vec![(102, 2), (108, 6)]);
        assert_eq!(View::bytes().regions(5, 3).unwrap(), vec![(5, 3)]);
    }

    #[test]
    fn malformed_views_are_invalid() {
        let wire = WireView { displacement: 0, etype_bytes: 1, file_type: vec![0xff; 3] };
        assert_eq!(View::decode(&wire).unwrap_err(), ErrorCode::Invalid);
    }
}
