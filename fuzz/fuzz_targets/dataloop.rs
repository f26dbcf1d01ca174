//! The dataloop codec and what a server does with a decoded datatype
//! access: decode (validating), re-encode to the same bytes, then position
//! a walk of the tiling and a stripe filter from the access's numbers and
//! walk a bounded number of batches.
//!
//! Input: 40 bytes of access parameters (count u64, displacement i64,
//! stream start u64, strip bytes u64, stripe count u16, stripe index u16,
//! stream length u32), then the encoded dataloop.
//!
//! The stripe walk runs under the region budget a server sets per request
//! (`limits::DATATYPE_WALK_REGIONS_MAX`, smaller here to keep executions
//! fast): a long range of tiny regions on other stripes once cost time
//! linear in its length (`fuzz/known-issues/` history; now
//! `weft-dataloop/tests/fuzz_regressions.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_dataloop::{BatchLimits, Cursor, Dataloop, StripeCursor, StripeFilter};

const PARAMS: usize = 40;
/// Regions a walk may take (a server allows `DATATYPE_WALK_REGIONS_MAX`).
const REGION_BUDGET: u64 = 1 << 14;

fuzz_target!(|data: &[u8]| {
    if data.len() < PARAMS {
        return;
    }
    let (params, body) = data.split_at(PARAMS);
    let Ok(dataloop) = Dataloop::decode(body) else { return };
    assert_eq!(dataloop.encode(), body, "the encoding is canonical");
    let u64_at = |at: usize| u64::from_le_bytes(params[at..at + 8].try_into().expect("8"));
    let count = u64_at(0);
    let displacement = u64_at(8) as i64;
    let stream_start = u64_at(16);
    let strip_bytes = u64_at(24);
    let stripe_count = u16::from_le_bytes([params[32], params[33]]) as u32;
    let stripe_index = u16::from_le_bytes([params[34], params[35]]) as u32;
    let stream_length = u32::from_le_bytes([params[36], params[37], params[38], params[39]]) as u64;

    let _ = (dataloop.size(), dataloop.extent(), dataloop.lb());
    // The plain walk.
    if let Ok(mut cursor) = Cursor::new(&dataloop, count, displacement) {
        let mut regions = Vec::new();
        for _ in 0..16 {
            if cursor.next_batch(BatchLimits { regions_max: 64, bytes_max: 1 << 20 }, &mut regions) == 0 {
                break;
            }
        }
        let total: u64 = regions.iter().map(|r| r.length).sum();
        assert_eq!(total, cursor.position(), "regions add up to the stream position");
    }
    // As the server positions its part of an access.
    let Ok(mut cursor) = Cursor::new(&dataloop, count, displacement) else { return };
    let Some(end) = stream_start.checked_add(stream_length) else { return };
    if cursor.set_end(end).is_err() || cursor.seek(stream_start).is_err() {
        return;
    }
    let Ok(filter) = StripeFilter::new(strip_bytes, stripe_count, stripe_index) else { return };
    let mut stripes = StripeCursor::new(cursor, filter);
    stripes.set_region_budget(REGION_BUDGET);
    let mut pieces = Vec::new();
    for _ in 0..16 {
        if stripes.is_done() || stripes.budget_exhausted() {
            break;
        }
        stripes.next_batch(BatchLimits { regions_max: 64, bytes_max: 1 << 20 }, &mut pieces);
    }
    assert!(stripes.regions_examined() <= REGION_BUDGET);
});
