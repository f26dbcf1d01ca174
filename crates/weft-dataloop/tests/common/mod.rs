//! Shared test helpers: a naive reference flattener and random dataloops.
#![allow(dead_code)]

use proptest::prelude::*;
use weft_dataloop::regions::coalesce_adjacent;
use weft_dataloop::{Dataloop, Kind, NodeSpec, Region};

/// Expands node `index` at `origin` into leaf regions, in stream order,
/// straight from the specs (recursion is fine: tests only).
fn expand(specs: &[NodeSpec], index: usize, origin: i128, out: &mut Vec<(i128, u64)>) {
    let spec = &specs[index];
    let kind = &spec.kind;
    if let Kind::Bytes { size } = kind {
        if *size > 0 {
            out.push((origin, *size));
        }
        return;
    }
    let blocks: Vec<(i128, u64, usize)> = match kind {
        Kind::Bytes { .. } => unreachable!(),
        Kind::Contig { count, child } => vec![(0, *count, *child as usize)],
        Kind::Vector { count, blocklength, stride_bytes, child } => {
            (0..*count).map(|b| (b as i128 * *stride_bytes as i128, *blocklength, *child as usize)).collect()
        }
        Kind::BlockIndexed { blocklength, displacements_bytes, child } => {
            displacements_bytes.iter().map(|d| (*d as i128, *blocklength, *child as usize)).collect()
        }
        Kind::Indexed { blocklengths, displacements_bytes, child } => {
            blocklengths.iter().zip(displacements_bytes).map(|(b, d)| (*d as i128, *b, *child as usize)).collect()
        }
        Kind::Struct { blocklengths, displacements_bytes, children } => blocklengths
            .iter()
            .zip(displacements_bytes)
            .zip(children)
            .map(|((b, d), c)| (*d as i128, *b, *c as usize))
            .collect(),
    };
    for (displacement, length, child) in blocks {
        let extent = specs[child].extent as i128;
        for element in 0..length {
            expand(specs, child, origin + displacement + element as i128 * extent, out);
        }
    }
}

/// Leaf regions of `count` tiled instances at `displacement`, stream order.
pub fn reference_pieces(dataloop: &Dataloop, count: u64, displacement: i64) -> Vec<(i128, u64)> {
    let specs = dataloop.specs();
    let mut out = Vec::new();
    for instance in 0..count {
        let origin = displacement as i128 + instance as i128 * dataloop.extent() as i128;
        expand(&specs, specs.len() - 1, origin, &mut out);
    }
    out
}

/// The stream window `[start, end)` of `pieces`, coalesced.
pub fn window(pieces: &[(i128, u64)], start: u64, end: u64) -> Vec<Region> {
    let mut out = Vec::new();
    let mut position = 0u64;
    for (offset, length) in pieces {
        let (lo, hi) = (position.max(start), (position + length).min(end));
        if lo < hi {
            let file = offset + (lo - position) as i128;
            out.push(Region::new(u64::try_from(file).expect("non-negative"), hi - lo));
        }
        position += length;
    }
    coalesce_adjacent(&out)
}

/// A random type expression, built with the MPI-style builder.
#[derive(Clone, Debug)]
pub enum Expr {
    Bytes(u64),
    Contig(u64, Box<Expr>),
    Vector { count: u64, blocklength: u64, stride: i64, in_bytes: bool, child: Box<Expr> },
    Indexed { blocks: Vec<(u64, i64)>, in_bytes: bool, child: Box<Expr> },
    BlockIndexed { blocklength: u64, displacements: Vec<i64>, in_bytes: bool, child: Box<Expr> },
    Struct { blocks: Vec<(u64, i64, Expr)>, same_child: bool },
    Resized { lb: i64, extent: i64, child: Box<Expr> },
}

impl Expr {
    pub fn build(&self) -> Result<Dataloop, weft_dataloop::BuildError> {
        match self {
            Expr::Bytes(n) => Dataloop::bytes(*n),
            Expr::Contig(count, child) => Dataloop::contiguous(*count, &child.build()?),
            Expr::Vector { count, blocklength, stride, in_bytes, child } => {
                let child = child.build()?;
                if *in_bytes {
                    Dataloop::hvector(*count, *blocklength, *stride, &child)
                } else {
                    Dataloop::vector(*count, *blocklength, *stride, &child)
                }
            }
            Expr::Indexed { blocks, in_bytes, child } => {
                let child = child.build()?;
                let lengths: Vec<u64> = blocks.iter().map(|b| b.0).collect();
                let displacements: Vec<i64> = blocks.iter().map(|b| b.1).collect();
                if *in_bytes {
                    Dataloop::hindexed(&lengths, &displacements, &child)
                } else {
                    Dataloop::indexed(&lengths, &displacements, &child)
                }
            }
            Expr::BlockIndexed { blocklength, displacements, in_bytes, child } => {
                let child = child.build()?;
                if *in_bytes {
                    Dataloop::hindexed_block(*blocklength, displacements, &child)
                } else {
                    Dataloop::indexed_block(*blocklength, displacements, &child)
                }
            }
            Expr::Struct { blocks, same_child } => {
                let children: Vec<Dataloop> = if *same_child {
                    let one = blocks[0].2.build()?;
                    blocks.iter().map(|_| one.clone()).collect()
                } else {
                    blocks.iter().map(|b| b.2.build()).collect::<Result<_, _>>()?
                };
                let refs: Vec<&Dataloop> = children.iter().collect();
                let lengths: Vec<u64> = blocks.iter().map(|b| b.0).collect();
                let displacements: Vec<i64> = blocks.iter().map(|b| b.1).collect();
                Dataloop::create_struct(&lengths, &displacements, &refs)
            }
            Expr::Resized { lb, extent, child } => Dataloop::resized(&child.build()?, *lb, *extent),
        }
    }
}

pub fn arb_expr() -> impl Strategy<Value = Expr> {
    (1usize..5).prop_flat_map(arb_expr_depth)
}

/// Mostly 1..max, sometimes 0.
fn small_count(max: u64) -> BoxedStrategy<u64> {
    prop_oneof![1 => Just(0u64), 7 => 1u64..max].boxed()
}

fn arb_leaf() -> BoxedStrategy<Expr> {
    prop_oneof![9 => 1u64..=8, 1 => Just(0u64)].prop_map(Expr::Bytes).boxed()
}

/// Expressions nested exactly `depth` levels on their first path.
pub fn arb_expr_depth(depth: usize) -> BoxedStrategy<Expr> {
    if depth <= 1 {
        return arb_leaf();
    }
    let inner = arb_expr_depth(depth - 1);
    let boxed = inner.clone().prop_map(Box::new);
    let any_child = prop_oneof![3 => inner.clone(), 1 => arb_leaf()];
    prop_oneof![
        (small_count(5), boxed.clone()).prop_map(|(c, e)| Expr::Contig(c, e)),
        (small_count(5), small_count(4), -12i64..12, any::<bool>(), boxed.clone()).prop_map(
            |(count, blocklength, stride, in_bytes, child)| Expr::Vector {
                count,
                blocklength,
                stride,
                in_bytes,
                child
            }
        ),
        (prop::collection::vec((small_count(4), -20i64..20), 0..5), any::<bool>(), boxed.clone())
            .prop_map(|(blocks, in_bytes, child)| Expr::Indexed { blocks, in_bytes, child }),
        (small_count(3), prop::collection::vec(-20i64..20, 0..4), any::<bool>(), boxed.clone()).prop_map(
            |(blocklength, displacements, in_bytes, child)| Expr::BlockIndexed {
                blocklength,
                displacements,
                in_bytes,
                child
            }
        ),
        (prop::collection::vec((small_count(3), -20i64..40, any_child), 1..4), any::<bool>())
            .prop_map(|(blocks, same_child)| Expr::Struct { blocks, same_child }),
        (-10i64..10, -6i64..30, boxed).prop_map(|(lb, extent, child)| Expr::Resized { lb, extent, child }),
    ]
    .boxed()
}

/// Random raw node arrays (no builder folding), children always earlier.
pub fn arb_specs() -> impl Strategy<Value = Vec<NodeSpec>> {
    (1usize..6).prop_flat_map(|n| {
        let nodes: Vec<_> = (0..n).map(arb_node).collect();
        nodes
    })
}

fn arb_node(index: usize) -> BoxedStrategy<NodeSpec> {
    let bounds = (-8i64..8, -4i64..24);
    if index == 0 {
        return ((0u64..6), bounds)
            .prop_map(|(size, (lb, extent))| NodeSpec { kind: Kind::Bytes { size }, lb, extent })
            .boxed();
    }
    let child = 0..index as u32;
    let kind = prop_oneof![
        (0u64..6).prop_map(|size| Kind::Bytes { size }),
        (0u64..3, child.clone()).prop_map(|(count, child)| Kind::Contig { count, child }),
        (0u64..3, 0u64..3, -16i64..16, child.clone()).prop_map(|(count, blocklength, stride_bytes, child)| {
            Kind::Vector { count, blocklength, stride_bytes, child }
        }),
        (0u64..3, prop::collection::vec(-16i64..16, 0..3), child.clone()).prop_map(
            |(blocklength, displacements_bytes, child)| Kind::BlockIndexed { blocklength, displacements_bytes, child }
        ),
        (prop::collection::vec((0u64..3, -16i64..16), 0..3), child.clone()).prop_map(|(blocks, child)| {
            Kind::Indexed {
                blocklengths: blocks.iter().map(|b| b.0).collect(),
                displacements_bytes: blocks.iter().map(|b| b.1).collect(),
                child,
            }
        }),
        prop::collection::vec((0u64..3, -16i64..16, child), 0..3).prop_map(|blocks| Kind::Struct {
            blocklengths: blocks.iter().map(|b| b.0).collect(),
            displacements_bytes: blocks.iter().map(|b| b.1).collect(),
            children: blocks.iter().map(|b| b.2).collect(),
        }),
    ];
    (kind, bounds).prop_map(|(kind, (lb, extent))| NodeSpec { kind, lb, extent }).boxed()
}

/// Either a builder-made or a raw dataloop (raw ones that fail validation
/// fall back to one byte).
pub fn arb_dataloop() -> impl Strategy<Value = Dataloop> {
    prop_oneof![
        arb_expr().prop_map(|e| e.build().unwrap_or_else(|_| Dataloop::bytes(1).unwrap())),
        arb_specs().prop_map(|s| Dataloop::from_specs(s).unwrap_or_else(|_| Dataloop::bytes(1).unwrap())),
    ]
}
