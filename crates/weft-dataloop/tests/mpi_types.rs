//! subarray and darray against hand-computed layouts and a naive membership test.

use proptest::prelude::*;
use weft_dataloop::mpi_types::{darray, subarray};
use weft_dataloop::regions::coalesce_adjacent;
use weft_dataloop::{Cursor, Dataloop, Distribution, DistributionArg, MpiTypeError, Order, Region};

use Distribution::{Block, Cyclic};
use DistributionArg::{Default as Dflt, Value};

fn regions(dataloop: &Dataloop) -> Vec<(u64, u64)> {
    let mut cursor = Cursor::new(dataloop, 1, 0).unwrap();
    cursor.collect_all().iter().map(|r| (r.offset, r.length)).collect()
}

fn byte() -> Dataloop {
    Dataloop::bytes(1).unwrap()
}

#[test]
fn subarray_2d_c_and_fortran() {
    let c = subarray(2, &[4, 5], &[2, 3], &[1, 2], Order::C, &byte()).unwrap();
    assert_eq!(regions(&c), vec![(7, 3), (12, 3)]);
    assert_eq!((c.lb(), c.extent(), c.size()), (0, 20, 6));
    let f = subarray(2, &[4, 5], &[2, 3], &[1, 2], Order::Fortran, &byte()).unwrap();
    assert_eq!(regions(&f), vec![(9, 2), (13, 2), (17, 2)]);
    assert_eq!((f.lb(), f.extent(), f.size()), (0, 20, 6));
}

#[test]
fn subarray_3d_c_and_fortran() {
    let two = Dataloop::bytes(2).unwrap();
    let c = subarray(3, &[2, 3, 4], &[1, 2, 2], &[1, 1, 2], Order::C, &two).unwrap();
    assert_eq!(regions(&c), vec![(36, 4), (44, 4)]);
    assert_eq!(c.extent(), 48);
    let f = subarray(3, &[2, 3, 4], &[2, 1, 2], &[0, 2, 1], Order::Fortran, &byte()).unwrap();
    assert_eq!(regions(&f), vec![(10, 2), (16, 2)]);
    assert_eq!(f.extent(), 24);
}

#[test]
fn subarray_errors() {
    let b = byte();
    assert_eq!(subarray(0, &[], &[], &[], Order::C, &b), Err(MpiTypeError::DimensionMismatch));
    assert_eq!(subarray(2, &[4], &[1], &[0], Order::C, &b), Err(MpiTypeError::DimensionMismatch));
    assert_eq!(subarray(1, &[4], &[3], &[2], Order::C, &b), Err(MpiTypeError::OutOfBounds { dim: 0 }));
    assert_eq!(subarray(1, &[4], &[0], &[0], Order::C, &b), Err(MpiTypeError::ZeroSize { dim: 0 }));
}

fn block2x2(rank: u32, order: Order) -> Vec<(u64, u64)> {
    let t = darray(4, rank, 2, &[4, 4], &[Block, Block], &[Dflt, Dflt], &[2, 2], order, &byte()).unwrap();
    assert_eq!((t.lb(), t.extent(), t.size()), (0, 16, 4));
    regions(&t)
}

#[test]
fn darray_block_block_2x2() {
    assert_eq!(block2x2(0, Order::C), vec![(0, 2), (4, 2)]);
    assert_eq!(block2x2(1, Order::C), vec![(2, 2), (6, 2)]);
    assert_eq!(block2x2(2, Order::C), vec![(8, 2), (12, 2)]);
    assert_eq!(block2x2(3, Order::C), vec![(10, 2), (14, 2)]);
    // Fortran: element (i, j) at i + 4j; ranks are still row-major in the grid.
    assert_eq!(block2x2(1, Order::Fortran), vec![(8, 2), (12, 2)]);
    assert_eq!(block2x2(2, Order::Fortran), vec![(2, 2), (6, 2)]);
}

#[test]
fn darray_cyclic_cyclic_2x2() {
    let t = |rank| darray(4, rank, 2, &[4, 4], &[Cyclic, Cyclic], &[Dflt, Dflt], &[2, 2], Order::C, &byte()).unwrap();
    assert_eq!(regions(&t(0)), vec![(0, 1), (2, 1), (8, 1), (10, 1)]);
    assert_eq!(regions(&t(3)), vec![(5, 1), (7, 1), (13, 1), (15, 1)]);
    assert_eq!(t(3).extent(), 16);
}

#[test]
fn darray_1d_cases() {
    let one = |dist, darg, gsize, psize: u64, rank| {
        darray(psize as u32, rank, 1, &[gsize], &[dist], &[darg], &[psize], Order::C, &byte())
    };
    assert_eq!(regions(&one(Cyclic, Value(3), 10, 2, 0).unwrap()), vec![(0, 3), (6, 3)]);
    assert_eq!(regions(&one(Cyclic, Value(3), 10, 2, 1).unwrap()), vec![(3, 3), (9, 1)]);
    assert_eq!(regions(&one(Block, Dflt, 5, 2, 1).unwrap()), vec![(3, 2)]);
    let empty = one(Block, Dflt, 4, 3, 2).unwrap();
    assert_eq!((empty.size(), empty.extent()), (0, 4));
    assert_eq!(one(Block, Value(1), 4, 3, 0), Err(MpiTypeError::BlockTooSmall { dim: 0 }));
    assert_eq!(one(Cyclic, Value(0), 4, 2, 0), Err(MpiTypeError::ZeroDistributionArg { dim: 0 }));
    assert_eq!(one(Distribution::None, Dflt, 4, 2, 0), Err(MpiTypeError::NotDistributed { dim: 0 }));
    assert_eq!(one(Block, Dflt, 4, 2, 2), Err(MpiTypeError::ProcessGrid));
}

#[test]
fn darray_none_and_3d() {
    let none =
        darray(2, 1, 2, &[4, 6], &[Block, Distribution::None], &[Dflt, Dflt], &[2, 1], Order::C, &byte()).unwrap();
    assert_eq!(regions(&none), vec![(12, 12)]);
    // 4x4x4 on a 2x2x2 grid: rank 5 has coordinates (1, 0, 1).
    let cube = darray(8, 5, 3, &[4, 4, 4], &[Block; 3], &[Dflt; 3], &[2, 2, 2], Order::C, &byte()).unwrap();
    assert_eq!(regions(&cube), vec![(34, 2), (38, 2), (50, 2), (54, 2)]);
    assert_eq!(cube.extent(), 64);
}

/// Offsets of the elements a darray rank owns, by brute force.
fn naive_darray(gsizes: &[u64], dargs: &[u64], psizes: &[u64], rank: u64, order: Order, elem: u64) -> Vec<Region> {
    let n = gsizes.len();
    let mut coords = vec![0; n];
    let mut rem = rank;
    let mut size: u64 = psizes.iter().product();
    for d in 0..n {
        size /= psizes[d];
        coords[d] = rem / size;
        rem %= size;
    }
    let total: u64 = gsizes.iter().product();
    let mut out = Vec::new();
    for linear in 0..total {
        // Decompose the storage offset into indices.
        let mut idx = vec![0; n];
        let mut r = linear;
        let dims: Vec<usize> = match order {
            Order::C => (0..n).rev().collect(),
            Order::Fortran => (0..n).collect(),
        };
        for &d in &dims {
            idx[d] = r % gsizes[d];
            r /= gsizes[d];
        }
        if (0..n).all(|d| (idx[d] / dargs[d]) % psizes[d] == coords[d]) {
            out.push(Region::new(linear * elem, elem));
        }
    }
    coalesce_adjacent(&out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn darray_matches_membership(
        dims in prop::collection::vec((1u64..7, 1u64..4, any::<bool>(), 1u64..4), 1..4),
        rank_pick in any::<prop::sample::Index>(),
        fortran in any::<bool>(),
        elem in 1u64..4,
    ) {
        let gsizes: Vec<u64> = dims.iter().map(|d| d.0).collect();
        let psizes: Vec<u64> = dims.iter().map(|d| d.1).collect();
        let distribs: Vec<Distribution> = dims.iter().map(|d| if d.2 { Cyclic } else { Block }).collect();
        let dargs: Vec<DistributionArg> = dims.iter().map(|d| if d.2 { Value(d.3) } else { Dflt }).collect();
        let effective: Vec<u64> = dims.iter().map(|d| if d.2 { d.3 } else { d.0.div_ceil(d.1) }).collect();
        let size: u64 = psizes.iter().product();
        let rank = rank_pick.index(size as usize) as u64;
        let order = if fortran { Order::Fortran } else { Order::C };
        let element = Dataloop::bytes(elem).unwrap();
        let n = dims.len() as u32;
        let t = darray(size as u32, rank as u32, n, &gsizes, &distribs, &dargs, &psizes, order, &element).unwrap();
        let expected = naive_darray(&gsizes, &effective, &psizes, rank, order, elem);
        let got = Cursor::new(&t, 1, 0).unwrap().collect_all();
        prop_assert_eq!(got, expected);
        prop_assert_eq!(t.extent() as u64, gsizes.iter().product::<u64>() * elem);
    }

    #[test]
    fn subarray_matches_membership(
        dims in prop::collection::vec((1u64..7, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..4),
        fortran in any::<bool>(),
        elem in 1u64..4,
    ) {
        let sizes: Vec<u64> = dims.iter().map(|d| d.0).collect();
        let starts: Vec<u64> = dims.iter().map(|d| d.1.index(d.0 as usize) as u64).collect();
        let subsizes: Vec<u64> =
            dims.iter().zip(&starts).map(|(d, s)| 1 + d.2.index((d.0 - s) as usize) as u64).collect();
        let order = if fortran { Order::Fortran } else { Order::C };
        let element = Dataloop::bytes(elem).unwrap();
        let t = subarray(dims.len() as u32, &sizes, &subsizes, &starts, order, &element).unwrap();
        // Express the box as a darray-like membership: index in [start, start+sub).
        let n = sizes.len();
        let total: u64 = sizes.iter().product();
        let mut expected = Vec::new();
        for linear in 0..total {
            let mut r = linear;
            let dims_order: Vec<usize> = if fortran { (0..n).collect() } else { (0..n).rev().collect() };
            let mut inside = true;
            for &d in &dims_order {
                let i = r % sizes[d];
                r /= sizes[d];
                inside &= i >= starts[d] && i < starts[d] + subsizes[d];
            }
            if inside {
                expected.push(Region::new(linear * elem, elem));
            }
        }
        let got = Cursor::new(&t, 1, 0).unwrap().collect_all();
        prop_assert_eq!(got, coalesce_adjacent(&expected));
        prop_assert_eq!((t.lb(), t.extent() as u64), (0, total * elem));
    }
}
