//! Dataloops: compact, acyclic descriptions of MPI-style access patterns.
//!
//! This module owns the node representation, the numbers derived from it
//! (size, bounds, contiguity, depth) and the MPI-style builder.
//!
//! A [`Dataloop`] is a flat **post-order** array of nodes: a node refers to its
//! children by index and every child index is smaller than the node's own, so
//! no cycle can be expressed; the last node is the root. Leaves are runs of
//! `size` bytes ([`Kind::Bytes`]; a named MPI type of size N is `Bytes` of N).
//! Inner nodes repeat child instances:
//!
//! | kind | element `j` of block `b` sits at |
//! |---|---|
//! | `Contig{count}` | `j * E` (one block of `count`) |
//! | `Vector{count, blocklength, stride_bytes}` | `b * stride_bytes + j * E` |
//! | `BlockIndexed{blocklength, displacements_bytes}` | `displacements_bytes[b] + j * E` |
//! | `Indexed{blocklengths, displacements_bytes}` | `displacements_bytes[b] + j * E` |
//! | `Struct{blocklengths, displacements_bytes, children}` | `displacements_bytes[b] + j * E_b` |
//!
//! where `E` is the child's extent. The data stream (typemap order) visits
//! blocks in order, elements in order, and each element's own stream.
//!
//! Every node also stores its `lb` and `extent`: the builder sets the natural
//! MPI values and [`Dataloop::resized`] overrides them, so resized types cost
//! nothing. Derived values are recomputed, never trusted: `size` (data bytes),
//! `true_lb`/`true_ub` (first/one-past-last data byte relative to the node's
//! origin, `0`/`0` when empty), contiguity, and depth. Arithmetic is done in
//! `i128` with checks, and every result must fit in `i64` (sizes too), else
//! construction fails with [`BuildError::Overflow`].
//!
//! Natural bounds are simplified from MPI: `lb` is the minimum over all
//! element instances of `position + child.lb`, `ub` the maximum of
//! `position + child.lb + child.extent` (blocks of length 0 count for nothing),
//! and `extent = ub - lb`; there is no alignment padding (leaves are raw bytes)
//! and no "sticky" LB/UB markers beyond what `resized` sets.

use std::collections::HashMap;

use weft_proto::limits;

/// What one node does with its child(ren). Children are indices of earlier nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A leaf: `size` contiguous bytes at offset 0.
    Bytes {
        /// Data bytes of the leaf.
        size: u64,
    },
    /// `count` child instances, `child.extent` apart.
    Contig {
        /// Number of child instances.
        count: u64,
        /// Child node index.
        child: u32,
    },
    /// `count` blocks of `blocklength` child instances, blocks `stride_bytes` apart.
    Vector {
        /// Number of blocks.
        count: u64,
        /// Child instances per block.
        blocklength: u64,
        /// Distance between block starts, in bytes (may be negative).
        stride_bytes: i64,
        /// Child node index.
        child: u32,
    },
    /// One block of `blocklength` child instances at each displacement.
    BlockIndexed {
        /// Child instances per block.
        blocklength: u64,
        /// Block starts in bytes.
        displacements_bytes: Vec<i64>,
        /// Child node index.
        child: u32,
    },
    /// Block `b` holds `blocklengths[b]` child instances at `displacements_bytes[b]`.
    Indexed {
        /// Child instances per block.
        blocklengths: Vec<u64>,
        /// Block starts in bytes.
        displacements_bytes: Vec<i64>,
        /// Child node index.
        child: u32,
    },
    /// Block `b` holds `blocklengths[b]` instances of `children[b]` at `displacements_bytes[b]`.
    Struct {
        /// Child instances per block.
        blocklengths: Vec<u64>,
        /// Block starts in bytes.
        displacements_bytes: Vec<i64>,
        /// Child node index of each block.
        children: Vec<u32>,
    },
}

impl Kind {
    /// Number of blocks (0 for a leaf).
    pub fn block_count(&self) -> u64 {
        match self {
            Kind::Bytes { .. } => 0,
            Kind::Contig { .. } => 1,
            Kind::Vector { count, .. } => *count,
            Kind::BlockIndexed { displacements_bytes, .. } => displacements_bytes.len() as u64,
            Kind::Indexed { blocklengths, .. } | Kind::Struct { blocklengths, .. } => blocklengths.len() as u64,
        }
    }

    /// Child instances in block `block` (`block < block_count()`).
    pub(crate) fn block_length(&self, block: u64) -> u64 {
        match self {
            Kind::Bytes { .. } => 0,
            Kind::Contig { count, .. } => *count,
            Kind::Vector { blocklength, .. } | Kind::BlockIndexed { blocklength, .. } => *blocklength,
            Kind::Indexed { blocklengths, .. } | Kind::Struct { blocklengths, .. } => blocklengths[block as usize],
        }
    }

    /// Start of block `block` in bytes relative to the node origin.
    pub(crate) fn block_displacement(&self, block: u64) -> i128 {
        match self {
            Kind::Bytes { .. } | Kind::Contig { .. } => 0,
            Kind::Vector { stride_bytes, .. } => block as i128 * *stride_bytes as i128,
            Kind::BlockIndexed { displacements_bytes, .. }
            | Kind::Indexed { displacements_bytes, .. }
            | Kind::Struct { displacements_bytes, .. } => displacements_bytes[block as usize] as i128,
        }
    }

    /// Child node of block `block`.
    pub(crate) fn block_child(&self, block: u64) -> u32 {
        match self {
            Kind::Bytes { .. } => 0,
            Kind::Contig { child, .. }
            | Kind::Vector { child, .. }
            | Kind::BlockIndexed { child, .. }
            | Kind::Indexed { child, .. } => *child,
            Kind::Struct { children, .. } => children[block as usize],
        }
    }

    /// Whether every block has the same length and child (arithmetic seek).
    pub(crate) fn is_uniform(&self) -> bool {
        matches!(self, Kind::Contig { .. } | Kind::Vector { .. } | Kind::BlockIndexed { .. })
    }

    /// Number of displacement entries, counted against
    /// [`limits::DATALOOP_DISPLACEMENTS_MAX`].
    pub fn entries(&self) -> u64 {
        match self {
            Kind::Bytes { .. } | Kind::Contig { .. } | Kind::Vector { .. } => 0,
            _ => self.block_count(),
        }
    }

    /// Every child index referenced (with repeats for structs).
    pub fn children(&self) -> Vec<u32> {
        match self {
            Kind::Bytes { .. } => Vec::new(),
            Kind::Struct { children, .. } => children.clone(),
            _ => vec![self.block_child(0)],
        }
    }

    fn map_children(&mut self, map: impl Fn(u32) -> u32) {
        match self {
            Kind::Bytes { .. } => {}
            Kind::Contig { child, .. }
            | Kind::Vector { child, .. }
            | Kind::BlockIndexed { child, .. }
            | Kind::Indexed { child, .. } => *child = map(*child),
            Kind::Struct { children, .. } => children.iter_mut().for_each(|c| *c = map(*c)),
        }
    }

    /// Bytes this node takes in the encoding (see [`crate::codec`]).
    pub(crate) fn encoded_bytes(&self) -> u64 {
        let header = 1 + 8 + 8;
        let n = self.block_count();
        header
            + match self {
                Kind::Bytes { .. } => 8,
                Kind::Contig { .. } => 8 + 4,
                Kind::Vector { .. } => 8 + 8 + 8 + 4,
                Kind::BlockIndexed { .. } => 8 + 4 + 4 + 8 * n,
                Kind::Indexed { .. } => 4 + 4 + 16 * n,
                Kind::Struct { .. } => 4 + 20 * n,
            }
    }
}

/// A node as given to [`Dataloop::from_specs`] and as carried on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeSpec {
    /// What the node repeats.
    pub kind: Kind,
    /// Lower bound in bytes (MPI `lb`).
    pub lb: i64,
    /// Extent in bytes: the distance between consecutive instances when tiled.
    pub extent: i64,
}

/// Values computed from a node and its children, never read from the wire.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct Derived {
    pub(crate) size: u64,
    pub(crate) true_lb: i64,
    pub(crate) true_ub: i64,
    /// The data stream is one increasing run `[true_lb, true_lb + size)`.
    pub(crate) contiguous: bool,
    pub(crate) depth: u32,
    /// For `Indexed`/`Struct`: data bytes before each block, plus the total.
    pub(crate) prefix_bytes: Vec<u64>,
}

/// One validated node: its spec plus derived values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    spec: NodeSpec,
    pub(crate) derived: Derived,
}

impl Node {
    /// The node's kind.
    pub fn kind(&self) -> &Kind {
        &self.spec.kind
    }
    /// The node's spec (kind, lb, extent).
    pub fn spec(&self) -> &NodeSpec {
        &self.spec
    }
    /// Lower bound in bytes.
    pub fn lb(&self) -> i64 {
        self.spec.lb
    }
    /// Extent in bytes.
    pub fn extent(&self) -> i64 {
        self.spec.extent
    }
    /// Data bytes of one instance.
    pub fn size(&self) -> u64 {
        self.derived.size
    }
    /// First data byte relative to the origin (0 if empty).
    pub fn true_lb(&self) -> i64 {
        self.derived.true_lb
    }
    /// One past the last data byte relative to the origin (0 if empty).
    pub fn true_ub(&self) -> i64 {
        self.derived.true_ub
    }
    /// Span from the first to one past the last data byte (0 if empty),
    /// saturated at `i64::MAX` (a span can exceed it: exact bounds are
    /// [`Node::true_lb`] and [`Node::true_ub`]).
    pub fn true_extent(&self) -> i64 {
        self.derived.true_ub.saturating_sub(self.derived.true_lb)
    }
    /// Whether one instance is a single increasing run of bytes.
    pub fn is_contiguous(&self) -> bool {
        self.derived.contiguous
    }
    /// Nodes on the longest path down to a leaf, this one included.
    pub fn depth(&self) -> u32 {
        self.derived.depth
    }
}

/// Why a dataloop could not be built (or a decoded one was refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A dataloop needs at least one node.
    #[error("dataloop has no nodes")]
    Empty,
    /// More than [`limits::DATALOOP_NODES_MAX`] nodes.
    #[error("dataloop has more than {} nodes", limits::DATALOOP_NODES_MAX)]
    TooManyNodes,
    /// Deeper than [`limits::DATALOOP_DEPTH_MAX`].
    #[error("dataloop deeper than {}", limits::DATALOOP_DEPTH_MAX)]
    TooDeep,
    /// More than [`limits::DATALOOP_DISPLACEMENTS_MAX`] displacement entries.
    #[error("dataloop has more than {} displacement entries", limits::DATALOOP_DISPLACEMENTS_MAX)]
    TooManyDisplacements,
    /// Encoding would exceed [`limits::DATALOOP_ENCODED_BYTES_MAX`].
    #[error("dataloop encoding exceeds {} bytes", limits::DATALOOP_ENCODED_BYTES_MAX)]
    TooLarge,
    /// A node refers to itself or a later node.
    #[error("node {node} refers to child {child}, which is not an earlier node")]
    ChildNotEarlier {
        /// Referring node.
        node: u32,
        /// Referenced index.
        child: u32,
    },
    /// Parallel arrays of one node differ in length.
    #[error("node {node} has arrays of different lengths")]
    LengthMismatch {
        /// Offending node.
        node: u32,
    },
    /// A size, bound or displacement does not fit in `i64`.
    #[error("node {node}: size or bound overflows i64")]
    Overflow {
        /// Offending node (the would-be node for builders).
        node: u32,
    },
    /// A negative count or length was given to a builder.
    #[error("negative count or length")]
    Negative,
    /// An indexed or struct block of zero length, or a struct block of
    /// zero-size data. The builders drop such blocks (they carry no data and,
    /// as in MPI, do not move the bounds), so only a hostile description has
    /// them; refusing them bounds the walk's work per byte of data.
    #[error("node {node} has an empty block")]
    EmptyBlock {
        /// Offending node.
        node: u32,
    },
}

/// A validated access pattern: a post-order node array whose last node is the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dataloop {
    nodes: Vec<Node>,
}

impl Dataloop {
    /// Validates a post-order node array and computes derived values.
    ///
    /// Work and memory are linear in the input (nodes plus displacement
    /// entries); all limits are checked.
    pub fn from_specs(specs: Vec<NodeSpec>) -> Result<Dataloop, BuildError> {
        if specs.is_empty() {
            return Err(BuildError::Empty);
        }
        if specs.len() as u64 > limits::DATALOOP_NODES_MAX as u64 {
            return Err(BuildError::TooManyNodes);
        }
        check_totals(&specs)?;
        let mut nodes: Vec<Node> = Vec::with_capacity(specs.len());
        for (index, spec) in specs.into_iter().enumerate() {
            check_shape(index as u32, &spec.kind)?;
            check_blocks_carry_data(&nodes, index as u32, &spec.kind)?;
            let derived = derive(&nodes, index as u32, &spec.kind)?.0;
            nodes.push(Node { spec, derived });
        }
        Ok(Dataloop { nodes })
    }

    /// The nodes, root last.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The root node.
    pub fn root(&self) -> &Node {
        &self.nodes[self.nodes.len() - 1]
    }

    pub(crate) fn node(&self, index: u32) -> &Node {
        &self.nodes[index as usize]
    }

    pub(crate) fn root_index(&self) -> u32 {
        (self.nodes.len() - 1) as u32
    }

    /// The node specs, root last (what [`Dataloop::from_specs`] takes back).
    pub fn specs(&self) -> Vec<NodeSpec> {
        self.nodes.iter().map(|node| node.spec.clone()).collect()
    }

    /// Data bytes of one instance.
    pub fn size(&self) -> u64 {
        self.root().size()
    }
    /// Extent of one instance in bytes.
    pub fn extent(&self) -> i64 {
        self.root().extent()
    }
    /// Lower bound of one instance in bytes.
    pub fn lb(&self) -> i64 {
        self.root().lb()
    }
    /// First data byte relative to the origin.
    pub fn true_lb(&self) -> i64 {
        self.root().true_lb()
    }
    /// One past the last data byte relative to the origin.
    pub fn true_ub(&self) -> i64 {
        self.root().true_ub()
    }
    /// Span of the data bytes, saturated at `i64::MAX` (see [`Node::true_extent`]).
    pub fn true_extent(&self) -> i64 {
        self.root().true_extent()
    }
    /// Depth of the root.
    pub fn depth(&self) -> u32 {
        self.root().depth()
    }

    /// Bytes of [`Dataloop::encode`]'s output.
    pub fn encoded_bytes(&self) -> u64 {
        4 + 4 + self.nodes.iter().map(|node| node.spec.kind.encoded_bytes()).sum::<u64>()
    }

    // ----- builder (MPI-style constructors) -----

    /// A named type: `size` contiguous bytes (e.g. 8 for a double).
    pub fn bytes(size: u64) -> Result<Dataloop, BuildError> {
        let size_i64 = i64::try_from(size).map_err(|_| BuildError::Overflow { node: 0 })?;
        Dataloop::from_specs(vec![NodeSpec { kind: Kind::Bytes { size }, lb: 0, extent: size_i64 }])
    }

    /// `MPI_Type_contiguous`.
    pub fn contiguous(count: u64, child: &Dataloop) -> Result<Dataloop, BuildError> {
        build(&[child], |c| Kind::Contig { count, child: c[0] })
    }

    /// `MPI_Type_vector`: the stride counts child extents.
    pub fn vector(count: u64, blocklength: u64, stride: i64, child: &Dataloop) -> Result<Dataloop, BuildError> {
        let stride_bytes = mul_i64(stride, child.extent())?;
        Dataloop::hvector(count, blocklength, stride_bytes, child)
    }

    /// `MPI_Type_create_hvector`: the stride is in bytes.
    pub fn hvector(count: u64, blocklength: u64, stride_bytes: i64, child: &Dataloop) -> Result<Dataloop, BuildError> {
        build(&[child], |c| Kind::Vector { count, blocklength, stride_bytes, child: c[0] })
    }

    /// `MPI_Type_indexed`: displacements count child extents.
    pub fn indexed(blocklengths: &[u64], displacements: &[i64], child: &Dataloop) -> Result<Dataloop, BuildError> {
        let bytes = scale_all(displacements, child.extent())?;
        Dataloop::hindexed(blocklengths, &bytes, child)
    }

    /// `MPI_Type_create_hindexed`: displacements in bytes. Becomes a
    /// block-indexed loop when all block lengths are equal.
    pub fn hindexed(
        blocklengths: &[u64],
        displacements_bytes: &[i64],
        child: &Dataloop,
    ) -> Result<Dataloop, BuildError> {
        if blocklengths.len() != displacements_bytes.len() {
            return Err(BuildError::LengthMismatch { node: 0 });
        }
        // Zero-length blocks carry no data and do not move MPI's bounds.
        let kept: Vec<usize> = (0..blocklengths.len()).filter(|i| blocklengths[*i] > 0).collect();
        let blocklengths: Vec<u64> = kept.iter().map(|i| blocklengths[*i]).collect();
        let displacements_bytes: Vec<i64> = kept.iter().map(|i| displacements_bytes[*i]).collect();
        let (blocklengths, displacements_bytes) = (&blocklengths[..], &displacements_bytes[..]);
        if let Some(first) = blocklengths.first() {
            if blocklengths.iter().all(|b| b == first) {
                return Dataloop::hindexed_block(*first, displacements_bytes, child);
            }
        }
        let kind = |c: &[u32]| Kind::Indexed {
            blocklengths: blocklengths.to_vec(),
            displacements_bytes: displacements_bytes.to_vec(),
            child: c[0],
        };
        build(&[child], kind)
    }

    /// `MPI_Type_create_indexed_block`: displacements count child extents.
    pub fn indexed_block(blocklength: u64, displacements: &[i64], child: &Dataloop) -> Result<Dataloop, BuildError> {
        let bytes = scale_all(displacements, child.extent())?;
        Dataloop::hindexed_block(blocklength, &bytes, child)
    }

    /// `MPI_Type_create_hindexed_block`: displacements in bytes.
    pub fn hindexed_block(
        blocklength: u64,
        displacements_bytes: &[i64],
        child: &Dataloop,
    ) -> Result<Dataloop, BuildError> {
        let kind = |c: &[u32]| Kind::BlockIndexed {
            blocklength,
            displacements_bytes: displacements_bytes.to_vec(),
            child: c[0],
        };
        build(&[child], kind)
    }

    /// `MPI_Type_create_struct`. When every child is the same type this
    /// becomes an hindexed loop over that one child.
    pub fn create_struct(
        blocklengths: &[u64],
        displacements_bytes: &[i64],
        children: &[&Dataloop],
    ) -> Result<Dataloop, BuildError> {
        if blocklengths.len() != displacements_bytes.len() || blocklengths.len() != children.len() {
            return Err(BuildError::LengthMismatch { node: 0 });
        }
        // Blocks without data (zero length or zero-size type) do not move MPI's bounds.
        let kept: Vec<usize> =
            (0..blocklengths.len()).filter(|i| blocklengths[*i] > 0 && children[*i].size() > 0).collect();
        let blocklengths: Vec<u64> = kept.iter().map(|i| blocklengths[*i]).collect();
        let displacements_bytes: Vec<i64> = kept.iter().map(|i| displacements_bytes[*i]).collect();
        let children: Vec<&Dataloop> = kept.iter().map(|i| children[*i]).collect();
        let (blocklengths, displacements_bytes, children) =
            (&blocklengths[..], &displacements_bytes[..], &children[..]);
        if let Some(first) = children.first() {
            if children.iter().all(|c| c == first) {
                return Dataloop::hindexed(blocklengths, displacements_bytes, first);
            }
        }
        let kind = |c: &[u32]| Kind::Struct {
            blocklengths: blocklengths.to_vec(),
            displacements_bytes: displacements_bytes.to_vec(),
            children: c.to_vec(),
        };
        build(children, kind)
    }

    /// `MPI_Type_create_resized`: same data, new `lb` and `extent`.
    pub fn resized(child: &Dataloop, lb: i64, extent: i64) -> Result<Dataloop, BuildError> {
        let mut specs = child.specs();
        let last = specs.len() - 1;
        specs[last].lb = lb;
        specs[last].extent = extent;
        Dataloop::from_specs(specs)
    }
}

fn mul_i64(a: i64, b: i64) -> Result<i64, BuildError> {
    a.checked_mul(b).ok_or(BuildError::Overflow { node: 0 })
}

fn scale_all(values: &[i64], factor: i64) -> Result<Vec<i64>, BuildError> {
    values.iter().map(|v| mul_i64(*v, factor)).collect()
}

fn check_totals(specs: &[NodeSpec]) -> Result<(), BuildError> {
    let mut entries = 0u64;
    let mut encoded = 8u64;
    for spec in specs {
        entries = entries.saturating_add(spec.kind.entries());
        encoded = encoded.saturating_add(spec.kind.encoded_bytes());
    }
    if entries > limits::DATALOOP_DISPLACEMENTS_MAX {
        return Err(BuildError::TooManyDisplacements);
    }
    if encoded > limits::DATALOOP_ENCODED_BYTES_MAX {
        return Err(BuildError::TooLarge);
    }
    Ok(())
}

/// Counts travel as `i64` on the wire, so they must fit one.
fn counts_fit_i64(kind: &Kind) -> bool {
    let fits = |v: &u64| *v <= i64::MAX as u64;
    match kind {
        Kind::Bytes { size } => fits(size),
        Kind::Contig { count, .. } => fits(count),
        Kind::Vector { count, blocklength, .. } => fits(count) && fits(blocklength),
        Kind::BlockIndexed { blocklength, .. } => fits(blocklength),
        Kind::Indexed { blocklengths, .. } | Kind::Struct { blocklengths, .. } => blocklengths.iter().all(fits),
    }
}

fn check_shape(index: u32, kind: &Kind) -> Result<(), BuildError> {
    let lengths_match = match kind {
        Kind::Indexed { blocklengths, displacements_bytes, .. } => blocklengths.len() == displacements_bytes.len(),
        Kind::Struct { blocklengths, displacements_bytes, children } => {
            blocklengths.len() == displacements_bytes.len() && children.len() == blocklengths.len()
        }
        _ => true,
    };
    if !lengths_match {
        return Err(BuildError::LengthMismatch { node: index });
    }
    if !counts_fit_i64(kind) {
        return Err(BuildError::Overflow { node: index });
    }
    for child in kind.children() {
        if child >= index {
            return Err(BuildError::ChildNotEarlier { node: index, child });
        }
    }
    Ok(())
}

/// Refuses indexed and struct blocks that carry no data (see [`BuildError::EmptyBlock`]).
fn check_blocks_carry_data(nodes: &[Node], index: u32, kind: &Kind) -> Result<(), BuildError> {
    let empty = match kind {
        Kind::Indexed { blocklengths, .. } => blocklengths.contains(&0),
        Kind::Struct { blocklengths, children, .. } => blocklengths
            .iter()
            .zip(children)
            .any(|(length, child)| *length == 0 || nodes.get(*child as usize).is_some_and(|c| c.size() == 0)),
        _ => false,
    };
    if empty {
        Err(BuildError::EmptyBlock { node: index })
    } else {
        Ok(())
    }
}

/// Running bounds, size and contiguity of a node being derived.
struct Accumulator<'a> {
    nodes: &'a [Node],
    node: u32,
    size: i128,
    lb: Option<i128>,
    ub: i128,
    true_lb: Option<i128>,
    true_ub: i128,
    contiguous: bool,
    next_start: Option<i128>,
}

/// `(min, max)` of `k * step` for `k` in `0..count` (`count >= 1`).
fn span(count: u128, step: i128) -> Option<(i128, i128)> {
    let last = i128::try_from(count - 1).ok()?.checked_mul(step)?;
    Some((last.min(0), last.max(0)))
}

impl Accumulator<'_> {
    fn overflow(&self) -> BuildError {
        BuildError::Overflow { node: self.node }
    }

    /// Adds `groups` groups `group_step` apart, each of `elements` instances
    /// of `child` one child extent apart, starting at `start`.
    fn add_run(
        &mut self,
        child: u32,
        start: i128,
        elements: u64,
        groups: u64,
        group_step: i128,
    ) -> Result<(), BuildError> {
        if elements == 0 || groups == 0 {
            return Ok(());
        }
        let c = &self.nodes[child as usize];
        let bad = self.overflow();
        let (e_min, e_max) = span(elements as u128, c.spec.extent as i128).ok_or(bad)?;
        let (g_min, g_max) = span(groups as u128, group_step).ok_or(bad)?;
        let low = start.checked_add(e_min).and_then(|v| v.checked_add(g_min)).ok_or(bad)?;
        let high = start.checked_add(e_max).and_then(|v| v.checked_add(g_max)).ok_or(bad)?;
        let lb = low.checked_add(c.spec.lb as i128).ok_or(bad)?;
        let ub = high.checked_add(c.spec.lb as i128 + c.spec.extent as i128).ok_or(bad)?;
        self.lb = Some(self.lb.map_or(lb, |v| v.min(lb)));
        self.ub = self.ub.max(ub);
        let bytes = (c.derived.size as i128)
            .checked_mul(elements as i128)
            .and_then(|v| v.checked_mul(groups as i128))
            .ok_or(bad)?;
        if bytes == 0 {
            return Ok(());
        }
        self.size = self.size.checked_add(bytes).filter(|s| *s <= i64::MAX as i128).ok_or(bad)?;
        let true_lb = low.checked_add(c.derived.true_lb as i128).ok_or(bad)?;
        let true_ub = high.checked_add(c.derived.true_ub as i128).ok_or(bad)?;
        self.true_lb = Some(self.true_lb.map_or(true_lb, |v| v.min(true_lb)));
        self.true_ub = self.true_ub.max(true_ub);
        self.track_contiguity(c, start, elements, groups, group_step, bytes);
        Ok(())
    }

    fn track_contiguity(&mut self, c: &Node, start: i128, elements: u64, groups: u64, group_step: i128, bytes: i128) {
        let size = c.derived.size as i128;
        let block_bytes = size * elements as i128;
        let dense_block = c.derived.contiguous && (elements == 1 || c.spec.extent as i128 == size);
        let dense_groups = groups == 1 || group_step == block_bytes;
        let first = start + c.derived.true_lb as i128;
        let continues = !matches!(self.next_start, Some(next) if next != first);
        self.contiguous = self.contiguous && dense_block && dense_groups && continues;
        self.next_start = Some(first + bytes);
    }
}

/// Computes a node's derived values and its natural `(lb, extent)`.
pub(crate) fn derive(nodes: &[Node], index: u32, kind: &Kind) -> Result<(Derived, i64, i64), BuildError> {
    let mut acc = Accumulator {
        nodes,
        node: index,
        size: 0,
        lb: None,
        ub: i128::MIN,
        true_lb: None,
        true_ub: i128::MIN,
        contiguous: true,
        next_start: None,
    };
    let mut prefix_bytes = Vec::new();
    let mut depth = 0u32;
    match kind {
        Kind::Bytes { size } => {
            let size_i64 = i64::try_from(*size).map_err(|_| acc.overflow())?;
            let derived =
                Derived { size: *size, true_lb: 0, true_ub: size_i64, contiguous: true, depth: 1, prefix_bytes };
            return Ok((derived, 0, size_i64));
        }
        Kind::Contig { count, child } => acc.add_run(*child, 0, *count, 1, 0)?,
        Kind::Vector { count, blocklength, stride_bytes, child } => {
            acc.add_run(*child, 0, *blocklength, *count, *stride_bytes as i128)?
        }
        Kind::BlockIndexed { blocklength, displacements_bytes, child } => {
            for displacement in displacements_bytes {
                acc.add_run(*child, *displacement as i128, *blocklength, 1, 0)?;
            }
        }
        Kind::Indexed { .. } | Kind::Struct { .. } => {
            prefix_bytes.reserve(kind.block_count() as usize + 1);
            for block in 0..kind.block_count() {
                prefix_bytes.push(acc.size as u64);
                let child = kind.block_child(block);
                let start = kind.block_displacement(block);
                acc.add_run(child, start, kind.block_length(block), 1, 0)?;
            }
            prefix_bytes.push(acc.size as u64);
        }
    }
    for child in kind_children_iter(kind) {
        depth = depth.max(nodes[child as usize].derived.depth);
    }
    finish(acc, depth + 1, prefix_bytes)
}

fn kind_children_iter(kind: &Kind) -> Box<dyn Iterator<Item = u32> + '_> {
    match kind {
        Kind::Bytes { .. } => Box::new(std::iter::empty()),
        Kind::Struct { children, .. } => Box::new(children.iter().copied()),
        _ => Box::new(std::iter::once(kind.block_child(0))),
    }
}

fn finish(acc: Accumulator<'_>, depth: u32, prefix_bytes: Vec<u64>) -> Result<(Derived, i64, i64), BuildError> {
    let bad = acc.overflow();
    if depth > limits::DATALOOP_DEPTH_MAX {
        return Err(BuildError::TooDeep);
    }
    let fit = |v: i128| i64::try_from(v).map_err(|_| bad);
    let (lb, ub) = match acc.lb {
        Some(lb) => (lb, acc.ub),
        None => (0, 0),
    };
    let (true_lb, true_ub) = match acc.true_lb {
        Some(true_lb) => (true_lb, acc.true_ub),
        None => (0, 0),
    };
    let derived = Derived {
        size: acc.size as u64,
        true_lb: fit(true_lb)?,
        true_ub: fit(true_ub)?,
        contiguous: acc.contiguous,
        depth,
        prefix_bytes,
    };
    Ok((derived, fit(lb)?, fit(ub.checked_sub(lb).ok_or(bad)?)?))
}

// ----- builder internals -----

/// Copies `children` into one node array (equal children once), appends the
/// node made by `make` with its natural bounds, folds it, and compacts.
fn build(children: &[&Dataloop], make: impl FnOnce(&[u32]) -> Kind) -> Result<Dataloop, BuildError> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut roots = Vec::with_capacity(children.len());
    let mut seen: HashMap<&Dataloop, u32> = HashMap::new();
    for child in children {
        if let Some(root) = seen.get(child) {
            roots.push(*root);
            continue;
        }
        let base = nodes.len() as u32;
        if nodes.len() + child.nodes.len() > limits::DATALOOP_NODES_MAX as usize {
            return Err(BuildError::TooManyNodes);
        }
        for node in &child.nodes {
            let mut node = node.clone();
            node.spec.kind.map_children(|c| c + base);
            nodes.push(node);
        }
        let root = nodes.len() as u32 - 1;
        seen.insert(child, root);
        roots.push(root);
    }
    let kind = make(&roots);
    check_shape(nodes.len() as u32, &kind)?;
    let (_, lb, extent) = derive(&nodes, nodes.len() as u32, &kind)?;
    let kind = fold(&mut nodes, kind)?;
    let mut specs: Vec<NodeSpec> = nodes.into_iter().map(|node| node.spec).collect();
    specs.push(NodeSpec { kind, lb, extent });
    Dataloop::from_specs(compact(specs))
}

/// Size optimizations that keep the typemap: a plain `Contig(k)` child is
/// merged into its parent's block lengths, and blocks of a plain leaf become
/// one bigger leaf.
fn fold(nodes: &mut Vec<Node>, mut kind: Kind) -> Result<Kind, BuildError> {
    loop {
        if matches!(kind, Kind::Bytes { .. } | Kind::Struct { .. }) {
            return Ok(kind);
        }
        let child = &nodes[kind.block_child(0) as usize];
        let next = match child.spec.kind {
            Kind::Contig { count, child: grandchild } => fold_contig(nodes, &kind, count, grandchild),
            Kind::Bytes { size } if child.spec.lb == 0 && u64::try_from(child.spec.extent) == Ok(size) => {
                fold_leaf(nodes, &kind, size)?
            }
            _ => None,
        };
        match next {
            Some(folded) => kind = folded,
            None => return Ok(kind),
        }
    }
}

fn fold_contig(nodes: &[Node], kind: &Kind, count: u64, grandchild: u32) -> Option<Kind> {
    let inner = &nodes[grandchild as usize];
    let outer = &nodes[kind.block_child(0) as usize];
    if (count as i128) * (inner.spec.extent as i128) != outer.spec.extent as i128 {
        return None;
    }
    let scale = |b: u64| b.checked_mul(count);
    Some(match kind {
        Kind::Contig { count: n, .. } => Kind::Contig { count: scale(*n)?, child: grandchild },
        Kind::Vector { count: n, blocklength, stride_bytes, .. } => Kind::Vector {
            count: *n,
            blocklength: scale(*blocklength)?,
            stride_bytes: *stride_bytes,
            child: grandchild,
        },
        Kind::BlockIndexed { blocklength, displacements_bytes, .. } => Kind::BlockIndexed {
            blocklength: scale(*blocklength)?,
            displacements_bytes: displacements_bytes.clone(),
            child: grandchild,
        },
        Kind::Indexed { blocklengths, displacements_bytes, .. } => Kind::Indexed {
            blocklengths: blocklengths.iter().map(|b| scale(*b)).collect::<Option<Vec<_>>>()?,
            displacements_bytes: displacements_bytes.clone(),
            child: grandchild,
        },
        Kind::Bytes { .. } | Kind::Struct { .. } => return None,
    })
}

fn fold_leaf(nodes: &mut Vec<Node>, kind: &Kind, size: u64) -> Result<Option<Kind>, BuildError> {
    let (blocklength, make): (u64, fn(&Kind, u32) -> Kind) = match kind {
        Kind::Contig { count, .. } => {
            let total = match count.checked_mul(size).filter(|t| *t <= i64::MAX as u64) {
                Some(total) => total,
                None => return Ok(None),
            };
            return Ok(Some(Kind::Bytes { size: total }));
        }
        Kind::Vector { blocklength, .. } => (*blocklength, |k, leaf| match k {
            Kind::Vector { count, stride_bytes, .. } => {
                Kind::Vector { count: *count, blocklength: 1, stride_bytes: *stride_bytes, child: leaf }
            }
            _ => k.clone(),
        }),
        Kind::BlockIndexed { blocklength, .. } => (*blocklength, |k, leaf| match k {
            Kind::BlockIndexed { displacements_bytes, .. } => {
                Kind::BlockIndexed { blocklength: 1, displacements_bytes: displacements_bytes.clone(), child: leaf }
            }
            _ => k.clone(),
        }),
        _ => return Ok(None),
    };
    let total = match blocklength.checked_mul(size).filter(|t| *t <= i64::MAX as u64) {
        Some(total) if blocklength > 1 => total,
        _ => return Ok(None),
    };
    let leaf_kind = Kind::Bytes { size: total };
    let index = nodes.len() as u32;
    let (derived, lb, extent) = derive(nodes, index, &leaf_kind)?;
    nodes.push(Node { spec: NodeSpec { kind: leaf_kind, lb, extent }, derived });
    Ok(Some(make(kind, index)))
}

/// Drops nodes the root cannot reach and renumbers the rest (order kept).
fn compact(mut specs: Vec<NodeSpec>) -> Vec<NodeSpec> {
    let mut reachable = vec![false; specs.len()];
    let last = specs.len() - 1;
    reachable[last] = true;
    for index in (0..specs.len()).rev() {
        if reachable[index] {
            for child in kind_children_iter(&specs[index].kind) {
                reachable[child as usize] = true;
            }
        }
    }
    let mut new_index = vec![0u32; specs.len()];
    let mut next = 0u32;
    for (index, keep) in reachable.iter().enumerate() {
        new_index[index] = next;
        next += u32::from(*keep);
    }
    let mut kept = Vec::with_capacity(next as usize);
    for (index, mut spec) in specs.drain(..).enumerate() {
        if reachable[index] {
            spec.kind.map_children(|c| new_index[c as usize]);
            kept.push(spec);
        }
    }
    kept
}
