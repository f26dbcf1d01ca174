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
