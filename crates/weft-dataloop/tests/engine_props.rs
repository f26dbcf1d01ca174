//! The engine against the naive reference flattener.

mod common;

use common::{arb_dataloop, reference_pieces, window};
use proptest::prelude::*;
use weft_dataloop::regions::coalesce_adjacent;
use weft_dataloop::{BatchLimits, Cursor, Dataloop, Region};

/// Walks `[start, end)` in batches, re-seeking a fresh cursor whenever
/// `resume_mask` says so (resume from a saved position).
fn walk_in_batches(
    dataloop: &Dataloop,
    count: u64,
    displacement: i64,
    start: u64,
    end: u64,
    limits: BatchLimits,
    resume_mask: u32,
) -> Vec<Region> {
    let mut cursor = Cursor::new(dataloop, count, displacement).unwrap();
    cursor.seek(start).unwrap();
    cursor.set_end(end).unwrap();
    let mut all = Vec::new();
    let mut round = 0u32;
    loop {
        let mut batch = Vec::new();
        let bytes = cursor.next_batch(limits, &mut batch);
        assert!(batch.len() <= limits.regions_max.max(1));
        assert!(bytes <= limits.bytes_max.max(1));
        assert_eq!(bytes, batch.iter().map(|r| r.length).sum::<u64>());
        if bytes == 0 {
            assert!(cursor.is_done());
            break;
        }
        all.extend(batch);
        round += 1;
        if resume_mask & (1 << (round % 32)) != 0 {
            let position = cursor.position();
            cursor = Cursor::new(dataloop, count, displacement).unwrap();
            cursor.seek(position).unwrap();
            cursor.set_end(end).unwrap();
        }
    }
    coalesce_adjacent(&all)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_reference(
        dataloop in arb_dataloop(),
        count in 0u64..4,
        displacement in 0i64..2000,
        start_frac in 0.0f64..1.0,
        end_frac in 0.0f64..1.0,
        regions_max in 1usize..6,
        bytes_max in prop_oneof![Just(u64::MAX), 1u64..40],
        resume_mask in any::<u32>(),
    ) {
        let cursor = Cursor::new(&dataloop, count, displacement);
        prop_assume!(cursor.is_ok());
        let total = cursor.unwrap().total_bytes();
        let pieces = reference_pieces(&dataloop, count, displacement);
        prop_assert_eq!(total, pieces.iter().map(|p| p.1).sum::<u64>());
        let a = (start_frac * total as f64) as u64;
        let b = (end_frac * total as f64) as u64;
        let (start, end) = (a.min(b), a.max(b).min(total));
        let expected = window(&pieces, start, end);
        let limits = BatchLimits { regions_max, bytes_max };
        let got = walk_in_batches(&dataloop, count, displacement, start, end, limits, resume_mask);
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn derived_values_match_reference(dataloop in arb_dataloop()) {
        let pieces = reference_pieces(&dataloop, 1, 0);
        let size: u64 = pieces.iter().map(|p| p.1).sum();
        prop_assert_eq!(size, dataloop.size());
        if size > 0 {
            let low = pieces.iter().filter(|p| p.1 > 0).map(|p| p.0).min().unwrap();
            let high = pieces.iter().map(|p| p.0 + p.1 as i128).max().unwrap();
            prop_assert_eq!(low, dataloop.true_lb() as i128);
            prop_assert_eq!(high - low, dataloop.true_extent() as i128);
        }
        if dataloop.root().is_contiguous() && size > 0 {
            let mut position = pieces[0].0;
            for (offset, length) in &pieces {
                prop_assert_eq!(*offset, position);
                position += *length as i128;
            }
        }
    }
}

#[test]
fn vector_seek_is_arithmetic() {
    // 2^40 blocks: enumerating from the start would never finish.
    let leaf = Dataloop::bytes(8).unwrap();
    let vector = Dataloop::vector(1 << 40, 2, 5, &leaf).unwrap();
    let mut cursor = Cursor::new(&vector, 3, 0).unwrap();
    let position = 2 * vector.size() + 16 * 12_345 + 3;
    cursor.seek(position).unwrap();
    let mut out = Vec::new();
    cursor.next_batch(BatchLimits { regions_max: 2, bytes_max: u64::MAX }, &mut out);
    let tile = vector.extent() as u64;
    let block = 2 * tile + 12_345 * 40;
    assert_eq!(out, vec![Region::new(block + 3, 13), Region::new(block + 40, 16)]);
}

#[test]
fn extent_edge_case_from_the_thesis() {
    // vector(2,2,3,INT) tiled, 8 ints read: file ints {0,1,3,4},{5,6,8,9};
    // 4 and 5 touch across the tile boundary and coalesce.
    let int = Dataloop::bytes(4).unwrap();
    let filetype = Dataloop::vector(2, 2, 3, &int).unwrap();
    assert_eq!(filetype.extent(), 20);
    let mut cursor = Cursor::new(&filetype, 2, 0).unwrap();
    let ints: Vec<(u64, u64)> = cursor.collect_all().iter().map(|r| (r.offset / 4, r.length / 4)).collect();
    assert_eq!(ints, vec![(0, 2), (3, 4), (8, 2)]);
}

#[test]
fn negative_file_offsets_are_refused() {
    let leaf = Dataloop::bytes(4).unwrap();
    let backwards = Dataloop::hvector(3, 1, -8, &leaf).unwrap();
    assert!(Cursor::new(&backwards, 1, 0).is_err());
    let cursor = Cursor::new(&backwards, 1, 16).unwrap();
    assert_eq!(cursor.clone().collect_all(), vec![Region::new(16, 4), Region::new(8, 4), Region::new(0, 4)]);
    assert!(Cursor::new(&leaf, u64::MAX, 0).is_err());
}
