//! Blocks without data: the builders drop them (as MPI ignores them for
//! the typemap and bounds), and the decoder refuses them, which bounds the
//! walk's work per byte of data. Regression for a hostile description: a
//! vector of an indexed type with a million zero-length blocks and one
//! byte of data would otherwise cost a million steps per byte.

use weft_dataloop::{BuildError, Cursor, Dataloop, DecodeError, Kind, NodeSpec, Region};

#[test]
fn builders_drop_empty_blocks_without_changing_the_data() {
    let byte = Dataloop::bytes(1).unwrap();
    let with_empty = Dataloop::hindexed(&[0, 2, 0, 3], &[100, 10, 200, 20], &byte).unwrap();
    let without = Dataloop::hindexed(&[2, 3], &[10, 20], &byte).unwrap();
    assert_eq!(with_empty.size(), 5);
    let regions = |d: &Dataloop| Cursor::new(d, 1, 0).unwrap().collect_all();
    assert_eq!(regions(&with_empty), regions(&without));
    assert_eq!(regions(&with_empty), vec![Region::new(10, 2), Region::new(20, 3)]);
    // Zero-size children of a struct go too.
    let empty = Dataloop::contiguous(0, &byte).unwrap();
    let two = Dataloop::bytes(2).unwrap();
    let s = Dataloop::create_struct(&[1, 4, 1], &[0, 50, 8], &[&two, &empty, &byte]).unwrap();
    assert_eq!(s.size(), 3);
    assert_eq!(regions(&s), vec![Region::new(0, 2), Region::new(8, 1)]);
}

#[test]
fn decoder_refuses_zero_length_blocks() {
    let leaf = NodeSpec { kind: Kind::Bytes { size: 1 }, lb: 0, extent: 1 };
    let indexed = NodeSpec {
        kind: Kind::Indexed { blocklengths: vec![1, 0], displacements_bytes: vec![0, 5], child: 0 },
        lb: 0,
        extent: 6,
    };
    assert!(matches!(Dataloop::from_specs(vec![leaf.clone(), indexed]), Err(BuildError::EmptyBlock { node: 1 })));
    // The same through the wire decoder: build a valid one and patch a block length to 0.
    let valid = NodeSpec {
        kind: Kind::Indexed { blocklengths: vec![1, 7], displacements_bytes: vec![0, 5], child: 0 },
        lb: 0,
        extent: 12,
    };
    let mut bytes = Dataloop::from_specs(vec![leaf, valid]).unwrap().encode();
    let seven = 7i64.to_le_bytes();
    let at = bytes.windows(8).rposition(|w| w == seven).unwrap();
    bytes[at..at + 8].copy_from_slice(&0i64.to_le_bytes());
    assert!(matches!(Dataloop::decode(&bytes), Err(DecodeError::Invalid(BuildError::EmptyBlock { .. }))));
}
