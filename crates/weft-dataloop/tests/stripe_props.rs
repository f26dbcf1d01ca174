//! Stripe intersection against a per-byte ownership loop.

mod common;

use common::{arb_dataloop, reference_pieces};
use proptest::prelude::*;
use weft_dataloop::{BatchLimits, Cursor, Dataloop, StripeCursor, StripeFilter, StripePiece};

/// Per byte: keep owned bytes, map them, merge runs contiguous on both sides.
fn naive(pieces: &[(i128, u64)], filter: &StripeFilter, start: u64) -> Vec<StripePiece> {
    let mut out: Vec<StripePiece> = Vec::new();
    let mut stream = 0u64;
    for (offset, length) in pieces {
        for k in 0..*length {
            let file = (*offset + k as i128) as u64;
            let position = stream + k;
            if position < start || !filter.owns(file) {
                continue;
            }
            let datafile = filter.datafile_offset(file);
            match out.last_mut() {
                Some(last)
                    if last.stream_offset + last.length == position
                        && last.datafile_offset + last.length == datafile =>
                {
                    last.length += 1
                }
                _ => out.push(StripePiece { stream_offset: position, datafile_offset: datafile, length: 1 }),
            }
        }
        stream += length;
    }
    out
}

fn merge_all(pieces: Vec<StripePiece>) -> Vec<StripePiece> {
    let mut out: Vec<StripePiece> = Vec::new();
    for piece in pieces {
        match out.last_mut() {
            Some(last)
                if last.stream_offset + last.length == piece.stream_offset
                    && last.datafile_offset + last.length == piece.datafile_offset =>
            {
                last.length += piece.length
            }
            _ => out.push(piece),
        }
    }
    out
}

fn stripe_walk(
    dataloop: &Dataloop,
    count: u64,
    displacement: i64,
    start: u64,
    filter: StripeFilter,
    limits: BatchLimits,
    resume_mask: u32,
) -> Vec<StripePiece> {
    let new_cursor = |position: u64| {
        let mut cursor = Cursor::new(dataloop, count, displacement).unwrap();
        cursor.seek(position).unwrap();
        StripeCursor::new(cursor, filter)
    };
    let mut stripes = new_cursor(start);
    let mut all = Vec::new();
    let mut round = 0u32;
    loop {
        let mut batch = Vec::new();
        let bytes = stripes.next_batch(limits, &mut batch);
        assert!(batch.len() <= limits.regions_max.max(1));
        assert!(bytes <= limits.bytes_max.max(1));
        if bytes == 0 {
            assert!(stripes.is_done());
            break;
        }
        all.extend(batch);
        round += 1;
        if resume_mask & (1 << (round % 32)) != 0 {
            stripes = new_cursor(stripes.stream_position());
        }
    }
    merge_all(all)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn stripe_matches_per_byte(
        dataloop in arb_dataloop(),
        count in 0u64..4,
        displacement in 0i64..300,
        start_frac in 0.0f64..1.0,
        strip_bytes in 1u64..16,
        stripe_count in 1u32..5,
        server in 0u32..5,
        regions_max in 1usize..6,
        bytes_max in prop_oneof![Just(u64::MAX), 1u64..40],
        resume_mask in any::<u32>(),
    ) {
        let filter = StripeFilter::new(strip_bytes, stripe_count, server % stripe_count).unwrap();
        let cursor = Cursor::new(&dataloop, count, displacement);
        prop_assume!(cursor.is_ok());
        let total = cursor.unwrap().total_bytes();
        let start = (start_frac * total as f64) as u64;
        let pieces = reference_pieces(&dataloop, count, displacement);
        let expected = naive(&pieces, &filter, start);
        let limits = BatchLimits { regions_max, bytes_max };
        let got = stripe_walk(&dataloop, count, displacement, start, filter, limits, resume_mask);
        prop_assert_eq!(got, expected);
    }

    /// Strided patterns (the case the arithmetic skip accelerates), larger.
    #[test]
    fn strided_stripe_matches_per_byte(
        element in 1u64..9,
        inner_count in 1u64..20,
        blocklength in 1u64..4,
        inner_stride in 1i64..12,
        outer_count in 1u64..4,
        outer_stride_extra in 0i64..100,
        count in 1u64..3,
        displacement in 0i64..100,
        strip_bytes in 1u64..64,
        stripe_count in 1u32..6,
        server in 0u32..6,
    ) {
        let leaf = Dataloop::bytes(element).unwrap();
        let inner = Dataloop::vector(inner_count, blocklength, inner_stride + blocklength as i64, &leaf).unwrap();
        let outer_stride = inner.extent() + outer_stride_extra;
        let outer = Dataloop::hvector(outer_count, 1, outer_stride, &inner).unwrap();
        let filter = StripeFilter::new(strip_bytes, stripe_count, server % stripe_count).unwrap();
        let pieces = reference_pieces(&outer, count, displacement);
        let expected = naive(&pieces, &filter, 0);
        let limits = BatchLimits { regions_max: 3, bytes_max: u64::MAX };
        let got = stripe_walk(&outer, count, displacement, 0, filter, limits, 0);
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn vector_intersection_skips_other_servers_blocks() {
    // 2^36 blocks of 8 bytes every 16 bytes; 64 KiB strips over 16 servers:
    // server 3 owns 1/16 of the blocks. Walking all 2^36 blocks would not
    // finish; the arithmetic skip visits only this server's strips.
    let leaf = Dataloop::bytes(8).unwrap();
    let vector = Dataloop::hvector(1 << 36, 1, 16, &leaf).unwrap();
    let filter = StripeFilter::new(64 << 10, 16, 3).unwrap();
    let cursor = Cursor::new(&vector, 1, 0).unwrap();
    let mut stripes = StripeCursor::new(cursor, filter);
    let mut out = Vec::new();
    for _ in 0..100 {
        out.clear();
        stripes.next_batch(BatchLimits::regions(4096), &mut out);
    }
    // Each owned strip holds 4096 blocks, none adjacent in the stream.
    assert_eq!(out.len(), 4096);
    let first = out[0];
    let strip_row = 99;
    assert_eq!(first.datafile_offset, strip_row * (64 << 10));
    let file_offset = (strip_row * 16 + 3) * (64 << 10);
    assert_eq!(first.stream_offset, file_offset / 16 * 8);
    assert_eq!(first.length, 8);
}

#[test]
fn far_first_owned_strip_is_reached_arithmetically() {
    // The first byte server 15 owns is at 15 * 2^40: about 10^12 blocks lie
    // before it. Without the arithmetic skip this test would not finish.
    let leaf = Dataloop::bytes(8).unwrap();
    let inner = Dataloop::hvector(1 << 20, 1, 16, &leaf).unwrap();
    let outer = Dataloop::hvector(1 << 30, 1, 16 << 20, &inner).unwrap();
    let filter = StripeFilter::new(1 << 40, 16, 15).unwrap();
    let cursor = Cursor::new(&outer, 4, 0).unwrap();
    let mut stripes = StripeCursor::new(cursor, filter);
    let mut out = Vec::new();
    stripes.next_batch(BatchLimits::regions(3), &mut out);
    let file_offset: u64 = 15 << 40;
    let expected: Vec<StripePiece> = (0..3)
        .map(|k| StripePiece { stream_offset: (file_offset + 16 * k) / 2, datafile_offset: 16 * k, length: 8 })
        .collect();
    assert_eq!(out, expected);
}
