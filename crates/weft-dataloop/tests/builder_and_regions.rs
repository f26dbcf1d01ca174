//! Builder size optimizations, and region algebra against a bitmap.

use proptest::prelude::*;
use weft_dataloop::regions::{zip_lists, RegionList};
use weft_dataloop::{Cursor, Dataloop, Kind, Region};

#[test]
fn contig_and_leaf_children_fold_into_the_parent() {
    let double = Dataloop::bytes(8).unwrap();
    let three = Dataloop::contiguous(3, &double).unwrap();
    assert_eq!(three.nodes().len(), 1, "contig of a leaf is a leaf");
    let vector = Dataloop::vector(10, 2, 5, &three).unwrap();
    assert_eq!(vector.nodes().len(), 2);
    assert_eq!(vector.root().kind(), &Kind::Vector { count: 10, blocklength: 1, stride_bytes: 120, child: 0 });
    assert_eq!(vector.nodes()[0].kind(), &Kind::Bytes { size: 48 });
    assert_eq!((vector.size(), vector.extent()), (480, 9 * 120 + 48));
    // A resized leaf keeps its own extent, so nothing folds.
    let padded = Dataloop::resized(&double, 0, 16).unwrap();
    let spaced = Dataloop::contiguous(4, &padded).unwrap();
    assert_eq!(spaced.nodes().len(), 2);
    assert_eq!(Cursor::new(&spaced, 1, 0).unwrap().collect_all().len(), 4);
}

#[test]
fn struct_of_one_type_becomes_indexed() {
    let double = Dataloop::bytes(8).unwrap();
    let row = Dataloop::vector(4, 1, 3, &double).unwrap();
    let st = Dataloop::create_struct(&[1, 2, 1], &[0, 400, 1000], &[&row, &row, &row]).unwrap();
    assert!(matches!(st.root().kind(), Kind::Indexed { .. }));
    let same = Dataloop::create_struct(&[2, 2], &[0, 400], &[&row, &row]).unwrap();
    assert!(matches!(same.root().kind(), Kind::BlockIndexed { .. }));
    let mixed = Dataloop::create_struct(&[1, 1], &[0, 400], &[&row, &double]).unwrap();
    assert!(matches!(mixed.root().kind(), Kind::Struct { .. }));
    // Shared children are stored once.
    let shared = Dataloop::create_struct(&[1, 1, 1], &[0, 400, 800], &[&row, &double, &row]).unwrap();
    assert_eq!(shared.nodes().len(), row.nodes().len() + 2);
}

fn bitmap(regions: &[Region]) -> Vec<bool> {
    let mut bits = vec![false; 256];
    for r in regions {
        for b in r.offset..r.offset + r.length {
            bits[b as usize] = true;
        }
    }
    bits
}

fn arb_regions() -> impl Strategy<Value = Vec<Region>> {
    prop::collection::vec((0u64..200, 0u64..40).prop_map(|(o, l)| Region::new(o, l.min(256 - o))), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn region_list_matches_bitmap(a in arb_regions(), b in arb_regions()) {
        let la = RegionList::from_regions(a.clone()).unwrap();
        let lb = RegionList::from_regions(b.clone()).unwrap();
        prop_assert_eq!(bitmap(la.as_slice()), bitmap(&a));
        for w in la.as_slice().windows(2) {
            prop_assert!(w[0].offset + w[0].length < w[1].offset);
        }
        prop_assert!(la.as_slice().iter().all(|r| r.length > 0));
        prop_assert_eq!(la.total_bytes() as usize, bitmap(&a).iter().filter(|b| **b).count());
        let both: Vec<bool> = bitmap(&a).iter().zip(bitmap(&b)).map(|(x, y)| *x && y).collect();
        prop_assert_eq!(bitmap(la.intersect(&lb).as_slice()), both);
        for byte in 0..256u64 {
            prop_assert_eq!(la.contains(byte), bitmap(&a)[byte as usize]);
        }
    }

    #[test]
    fn zip_matches_per_byte(memory in arb_regions(), file in arb_regions()) {
        let per_byte = |list: &[Region]| -> Vec<u64> {
            list.iter().flat_map(|r| r.offset..r.offset + r.length).collect()
        };
        let (m, f) = (per_byte(&memory), per_byte(&file));
        let n = m.len().min(f.len());
        // Trim the longer list so both have n bytes.
        let trim = |list: &[Region], mut left: usize| -> Vec<Region> {
            let mut out = Vec::new();
            for r in list {
                let take = (r.length as usize).min(left);
                out.push(Region::new(r.offset, take as u64));
                left -= take;
            }
            out
        };
        let pieces = zip_lists(&trim(&memory, n), &trim(&file, n)).unwrap();
        let pairs: Vec<(u64, u64)> = pieces
            .iter()
            .flat_map(|p| (0..p.length).map(move |k| (p.memory_offset + k, p.file_offset + k)))
            .collect();
        let expected: Vec<(u64, u64)> = m[..n].iter().copied().zip(f[..n].iter().copied()).collect();
        prop_assert_eq!(pairs, expected);
    }
}
