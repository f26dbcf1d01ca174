//! Inputs the coverage-guided fuzz targets (`fuzz/`, `scripts/fuzz.sh`)
//! found to crash, replayed through the same steps as the `dataloop`
//! target: 40 bytes of access parameters, then an encoded dataloop.

use weft_dataloop::{BatchLimits, Cursor, Dataloop, StripeCursor, StripeFilter};

/// Runs the `dataloop` fuzz target's steps on one input.
fn replay(input: &[u8]) {
    let (params, body) = input.split_at(40);
    let Ok(dataloop) = Dataloop::decode(body) else { return };
    assert_eq!(dataloop.encode(), body);
    let u64_at = |at: usize| u64::from_le_bytes(params[at..at + 8].try_into().unwrap());
    let (count, displacement, stream_start, strip_bytes) = (u64_at(0), u64_at(8) as i64, u64_at(16), u64_at(24));
    let stripe_count = u16::from_le_bytes([params[32], params[33]]) as u32;
    let stripe_index = u16::from_le_bytes([params[34], params[35]]) as u32;
    let stream_length = u16::from_le_bytes([params[36], params[37]]) as u64;
    let span = dataloop.true_ub() as i128 - dataloop.true_lb() as i128;
    assert!(span >= 0);
    assert_eq!(dataloop.true_extent() as i128, span.min(i64::MAX as i128), "saturated, never wrapped");
    if let Ok(mut cursor) = Cursor::new(&dataloop, count, displacement) {
        let mut regions = Vec::new();
        for _ in 0..16 {
            if cursor.next_batch(BatchLimits { regions_max: 64, bytes_max: 1 << 20 }, &mut regions) == 0 {
                break;
            }
        }
        assert_eq!(regions.iter().map(|r| r.length).sum::<u64>(), cursor.position());
    }
    let Ok(mut cursor) = Cursor::new(&dataloop, count, displacement) else { return };
    let Some(end) = stream_start.checked_add(stream_length) else { return };
    if cursor.set_end(end).is_err() || cursor.seek(stream_start).is_err() {
        return;
    }
    let Ok(filter) = StripeFilter::new(strip_bytes, stripe_count, stripe_index) else { return };
    let mut stripes = StripeCursor::new(cursor, filter);
    let mut pieces = Vec::new();
    for _ in 0..16 {
        if stripes.is_done() {
            break;
        }
        stripes.next_batch(BatchLimits { regions_max: 64, bytes_max: 1 << 20 }, &mut pieces);
    }
}

/// A dataloop whose data span exceeds `i64::MAX`: `true_ub - true_lb`
/// overflowed (a panic with overflow checks; without them a wrapped,
/// negative span, so the file-range check of a walk could pass an access
/// whose bytes lie beyond `u64::MAX`). Found by the `dataloop` target,
/// 2026-11-25.
#[test]
fn a_data_span_beyond_i64_neither_overflows_nor_wraps() {
    const INPUT: &str = "AwAEAAAAAAAAAAAAAAAAAAD/AAAAAAAAAAABAAAAAAAEAAEAAAgQAFdETDEDAAAAAQAAAAAAAAAABAAACQAAAAAEAAAAAAAAAAIA\
                         AAAAAAAAAAwAAAAAAACAAwAAAAAAAAAAAAAAAwAAAAAAAAAAuAAAAAA/AAAFAAAAAAAAAAIAAAAAAAAAKAAAAAC4AAABAAAA";
    let input = decode_base64(INPUT);
    let dataloop = Dataloop::decode(&input[40..]).expect("the input decodes");
    assert!(dataloop.true_ub() as i128 - dataloop.true_lb() as i128 > i64::MAX as i128);
    replay(&input);
}

/// A datatype access whose stream range holds many tiny regions, none on
/// the requested stripe: a vector of 5 blocks of ~10^16 instances of a
/// zero-extent type (every instance at file bytes 0..12, stripe 0 of 4),
/// seen from stripe 1 with 64 KiB strips. The walk used to skip the
/// unowned regions one by one (over 100 s for the 251 MB range this input
/// once named, hours for `IO_BYTES_MAX`); it now skips each block's
/// zero-step elements, then the blocks, arithmetically. Found by the
/// `dataloop` target, 2026-11-25, when its stream length was a `u32`
/// (bytes 36..40 of the parameters).
#[test]
fn a_long_range_of_unowned_zero_extent_regions_is_skipped_arithmetically() {
    const INPUT: &str = "AwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABAAAAAAAEAAEAAAAAD1dETDEDAAAAAQAAAABAAAAABAAAAAAAAAAEAAAAAAAAAAIA\
                         AAAAAAADAAAAAAAAAAAAAwAAAAAAAAAAAAAAAwAAAAAAAAAAuAAAAAAAAAAFAAAAAAAAAAIAAAAAACQAKAAAAAAAAAABAAAA";
    let input = decode_base64(INPUT);
    replay(&input);
    let dataloop = Dataloop::decode(&input[40..]).expect("the input decodes");
    let original = u32::from_le_bytes(input[36..40].try_into().unwrap()) as u64;
    assert_eq!(original, 251_658_240);
    for stream_length in [original, 1 << 40] {
        let mut cursor = Cursor::new(&dataloop, 3, 0).unwrap();
        cursor.set_end(stream_length).unwrap();
        let filter = StripeFilter::new(1 << 16, 4, 1).unwrap();
        let mut stripes = StripeCursor::new(cursor, filter);
        let mut pieces = Vec::new();
        assert_eq!(stripes.next_batch(BatchLimits { regions_max: 64, bytes_max: 1 << 20 }, &mut pieces), 0);
        assert!(pieces.is_empty(), "stripe 1 stores none of bytes 0..172");
        assert!(stripes.is_done());
        assert!(stripes.regions_examined() <= 2, "examined {}", stripes.regions_examined());
    }
}

/// The case no arithmetic skip covers: one-byte blocks a whole stripe
/// apart, every one on stripe 0, so stripe 1 sees 2^40 regions each in a
/// different gap. A region budget (as servers set per request) stops the
/// walk after that many regions and says so.
#[test]
fn a_region_budget_bounds_a_walk_of_unowned_regions_in_separate_gaps() {
    let strip = 1u64 << 16;
    let byte = Dataloop::bytes(1).unwrap();
    let vector = Dataloop::hvector(1 << 40, 1, 4 * strip as i64, &byte).unwrap();
    let mut stripes = StripeCursor::new(Cursor::new(&vector, 1, 0).unwrap(), StripeFilter::new(strip, 4, 1).unwrap());
    stripes.set_region_budget(1 << 16);
    let mut pieces = Vec::new();
    assert_eq!(stripes.next_batch(BatchLimits::regions(64), &mut pieces), 0);
    assert!(pieces.is_empty());
    assert!(!stripes.is_done());
    assert!(stripes.budget_exhausted());
    assert_eq!(stripes.regions_examined(), 1 << 16);
    // A range of at most `budget` raw regions never exhausts it.
    let mut count = Cursor::new(&vector, 1, 0).unwrap();
    assert_eq!(count.skip_regions(1 << 16), 1 << 16);
    let mut cursor = Cursor::new(&vector, 1, 0).unwrap();
    cursor.set_end(count.position()).unwrap();
    let mut stripes = StripeCursor::new(cursor, StripeFilter::new(strip, 4, 0).unwrap());
    stripes.set_region_budget(1 << 16);
    let mut bytes = 0;
    while !stripes.is_done() && !stripes.budget_exhausted() {
        bytes += stripes.next_batch(BatchLimits::regions(4096), &mut Vec::new());
    }
    assert_eq!(bytes, 1 << 16, "stripe 0 stores every block");
    assert!(!stripes.budget_exhausted());
}

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    digits
        .chunks(4)
        .flat_map(|chunk| {
            let bits = chunk.iter().enumerate().fold(0u32, |acc, (i, &d)| acc | (d as u32) << (18 - 6 * i));
            let bytes = bits.to_be_bytes();
            bytes[1..chunk.len()].to_vec()
        })
        .collect()
}
