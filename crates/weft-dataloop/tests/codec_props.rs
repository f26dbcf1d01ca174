//! Encoding round trips and hostile decoding.

mod common;

use common::{arb_dataloop, arb_specs};
use proptest::prelude::*;
use weft_dataloop::codec::MAGIC;
use weft_dataloop::{BatchLimits, BuildError, Cursor, Dataloop, DecodeError, Kind, NodeSpec};
use weft_proto::limits;

/// Hand-assembles an encoding.
struct Writer(Vec<u8>);

impl Writer {
    fn new(nodes: u32) -> Self {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&nodes.to_le_bytes());
        Writer(bytes)
    }
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn leaf(self, size: i64) -> Self {
        self.u8(1).i64(0).i64(size).i64(size)
    }
    fn contig(self, count: i64, child: u32) -> Self {
        self.u8(2).i64(0).i64(0).i64(count).u32(child)
    }
}

/// Walks a decoded dataloop for a bounded number of regions: hostile but
/// accepted input must still be safe to use.
fn exercise(dataloop: &Dataloop) {
    if let Ok(mut cursor) = Cursor::new(dataloop, 3, 1 << 40) {
        let mut out = Vec::new();
        cursor.next_batch(BatchLimits::regions(1000), &mut out);
        let middle = cursor.total_bytes() / 2;
        cursor.seek(middle).unwrap();
        cursor.next_batch(BatchLimits::regions(1000), &mut out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(dataloop in arb_dataloop()) {
        let bytes = dataloop.encode();
        prop_assert_eq!(bytes.len() as u64, dataloop.encoded_bytes());
        prop_assert_eq!(Dataloop::decode(&bytes).unwrap(), dataloop);
    }

    #[test]
    fn raw_specs_round_trip(specs in arb_specs()) {
        if let Ok(dataloop) = Dataloop::from_specs(specs.clone()) {
            prop_assert_eq!(dataloop.specs(), specs);
            prop_assert_eq!(Dataloop::decode(&dataloop.encode()).unwrap(), dataloop);
        }
    }

    #[test]
    fn random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..600), magic in any::<bool>()) {
        if magic && bytes.len() >= 4 {
            bytes[..4].copy_from_slice(&MAGIC);
        }
        if let Ok(dataloop) = Dataloop::decode(&bytes) {
            exercise(&dataloop);
        }
    }

    #[test]
    fn mutated_encodings_never_panic(
        dataloop in arb_dataloop(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u64>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = dataloop.encode();
        for (at, how, value) in edits {
            let at = at.index(bytes.len());
            let width = match how { 0 => 1, 1 => 4, _ => 8 };
            let value = if how == 3 { [i64::MAX as u64, i64::MIN as u64, u64::MAX, 1 << 62][value as usize % 4] } else { value };
            let end = (at + width).min(bytes.len());
            let len = end - at;
            bytes[at..end].copy_from_slice(&value.to_le_bytes()[..len]);
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(decoded) = Dataloop::decode(&bytes) {
            exercise(&decoded);
        }
    }
}

#[test]
fn every_truncation_is_refused() {
    let leaf = Dataloop::bytes(8).unwrap();
    let indexed = Dataloop::hindexed(&[1, 2, 3], &[0, 64, 256], &leaf).unwrap();
    let other = Dataloop::bytes(3).unwrap();
    let st = Dataloop::create_struct(&[1, 2], &[0, 1000], &[&indexed, &other]).unwrap();
    let bytes = st.encode();
    for length in 0..bytes.len() {
        assert!(Dataloop::decode(&bytes[..length]).is_err(), "prefix {length}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(Dataloop::decode(&longer), Err(DecodeError::TrailingBytes(1)));
}

#[test]
fn huge_node_count_is_refused_before_allocating() {
    let bytes = Writer::new(u32::MAX).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::Invalid(BuildError::TooManyNodes)));
    let bytes = Writer::new(limits::DATALOOP_NODES_MAX).leaf(1).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::Truncated));
    assert_eq!(Dataloop::decode(&Writer::new(0).0), Err(DecodeError::Invalid(BuildError::Empty)));
}

#[test]
fn huge_array_length_is_refused_before_allocating() {
    // An indexed node claiming 2^32-1 entries with none following.
    let bytes = Writer::new(2).leaf(1).u8(5).i64(0).i64(0).u32(0).u32(u32::MAX).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::Truncated));
}

#[test]
fn too_many_entries_are_refused() {
    let n = (limits::DATALOOP_DISPLACEMENTS_MAX / 2 + 1) as u32;
    let mut w = Writer::new(3).leaf(1).u8(4).i64(0).i64(0).i64(1).u32(0).u32(n);
    w.0.resize(w.0.len() + n as usize * 8, 0);
    let mut w = w.u8(4).i64(0).i64(0).i64(1).u32(1).u32(n);
    w.0.resize(w.0.len() + n as usize * 8, 0);
    assert_eq!(Dataloop::decode(&w.0), Err(DecodeError::Invalid(BuildError::TooManyDisplacements)));
}

#[test]
fn children_must_be_earlier() {
    let self_loop = Writer::new(2).leaf(1).contig(2, 1).0;
    assert_eq!(
        Dataloop::decode(&self_loop),
        Err(DecodeError::Invalid(BuildError::ChildNotEarlier { node: 1, child: 1 }))
    );
    let forward = Writer::new(3).leaf(1).contig(2, 2).leaf(1).0;
    assert!(matches!(Dataloop::decode(&forward), Err(DecodeError::Invalid(BuildError::ChildNotEarlier { .. }))));
    let specs = vec![NodeSpec { kind: Kind::Contig { count: 1, child: 0 }, lb: 0, extent: 0 }];
    assert!(Dataloop::from_specs(specs).is_err());
}

#[test]
fn negative_lengths_are_refused() {
    let bytes = Writer::new(1).leaf(-1).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::NegativeLength { node: 0 }));
    let bytes = Writer::new(2).leaf(1).contig(-5, 0).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::NegativeLength { node: 1 }));
    let bytes = Writer::new(2).leaf(1).u8(5).i64(0).i64(0).u32(0).u32(1).i64(-1).i64(0).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::NegativeLength { node: 1 }));
}

#[test]
fn overflowing_sizes_and_extents_are_refused() {
    // 2^40 * 2^40 bytes of data.
    let bytes = Writer::new(3).leaf(1 << 40).contig(1 << 40, 0).contig(1, 1).0;
    assert!(matches!(Dataloop::decode(&bytes), Err(DecodeError::Invalid(BuildError::Overflow { .. }))));
    // A vector whose stride times count leaves i64.
    let bytes = Writer::new(2).leaf(1).u8(3).i64(0).i64(0).i64(1 << 40).i64(1).i64(1 << 40).u32(0).0;
    assert!(matches!(Dataloop::decode(&bytes), Err(DecodeError::Invalid(BuildError::Overflow { .. }))));
    // Empty leaves with huge counts are fine: no data, nothing overflows.
    let bytes = Writer::new(2).leaf(0).contig(i64::MAX, 0).0;
    let empty = Dataloop::decode(&bytes).unwrap();
    assert_eq!(empty.size(), 0);
    assert!(Cursor::new(&empty, u64::MAX, 0).unwrap().collect_all().is_empty());
    // Builders refuse the same.
    let big = Dataloop::bytes(1 << 40).unwrap();
    assert!(Dataloop::contiguous(1 << 40, &big).is_err());
    assert!(Dataloop::bytes(u64::MAX).is_err());
}

#[test]
fn deep_nesting_is_refused() {
    let depth = limits::DATALOOP_DEPTH_MAX + 1;
    let mut w = Writer::new(depth).leaf(1);
    for child in 0..depth - 1 {
        w = w.contig(1, child);
    }
    assert_eq!(Dataloop::decode(&w.0), Err(DecodeError::Invalid(BuildError::TooDeep)));
    // Exactly at the limit is fine, and walkable.
    let mut w = Writer::new(depth - 1).leaf(1);
    for child in 0..depth - 2 {
        w = w.contig(1, child);
    }
    let deep = Dataloop::decode(&w.0).unwrap();
    exercise(&deep);
}

#[test]
fn wide_struct_is_decoded_in_linear_time() {
    // The largest struct the encoded-size limit allows (20 bytes an entry),
    // every block the same leaf.
    let n = ((limits::DATALOOP_ENCODED_BYTES_MAX - 100) / 20) as u32;
    let mut w = Writer::new(2).leaf(8).u8(6).i64(0).i64(0).u32(n);
    for _ in 0..n {
        w = w.i64(1);
    }
    for k in 0..n {
        w = w.i64(k as i64 * 16);
    }
    for _ in 0..n {
        w = w.u32(0);
    }
    let wide = Dataloop::decode(&w.0).unwrap();
    assert_eq!(wide.size(), 8 * n as u64);
    exercise(&wide);
}

#[test]
fn bad_magic_and_unknown_kind() {
    assert_eq!(Dataloop::decode(b"NOPE\x01\x00\x00\x00"), Err(DecodeError::BadMagic));
    let bytes = Writer::new(1).u8(99).i64(0).i64(0).u32(0).0;
    assert_eq!(Dataloop::decode(&bytes), Err(DecodeError::UnknownKind(99)));
    let oversized = vec![0u8; limits::DATALOOP_ENCODED_BYTES_MAX as usize + 1];
    assert_eq!(Dataloop::decode(&oversized), Err(DecodeError::TooLarge));
}
