//! The wire format of a dataloop and its validating decoder.
//!
//! All integers are little-endian and sized; nothing is `usize`.
//!
//! ```text
//! dataloop := magic:[u8;4]="WDL1"  node_count:u32  node*node_count   (root = last node)
//! node     := tag:u8  lb:i64  extent:i64  payload
//! payload by tag:
//!   1 Bytes        size:i64
//!   2 Contig       count:i64  child:u32
//!   3 Vector       count:i64  blocklength:i64  stride_bytes:i64  child:u32
//!   4 BlockIndexed blocklength:i64  child:u32  n:u32  displacements_bytes:[i64;n]
//!   5 Indexed      child:u32  n:u32  blocklengths:[i64;n]  displacements_bytes:[i64;n]
//!   6 Struct       n:u32  blocklengths:[i64;n]  displacements_bytes:[i64;n]  children:[u32;n]
//! ```
//!
//! Counts and lengths travel as `i64` so that a negative value is recognised
//! and refused ([`DecodeError::NegativeLength`]) instead of wrapping. Derived
//! values (size, true bounds, depth) are never sent; the decoder recomputes
//! them with checked arithmetic.
//!
//! Decoding does bounded work: the input is refused above
//! [`limits::DATALOOP_ENCODED_BYTES_MAX`]; a declared count is checked against
//! the bytes left *before* anything is allocated for it; child indices must
//! point to earlier nodes; node, entry and depth limits are enforced; there is
//! no recursion. Time and memory are linear in the input length.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::dataloop::{BuildError, Dataloop, Kind, NodeSpec};
use weft_proto::limits;

/// The first four bytes of every encoded dataloop.
pub const MAGIC: [u8; 4] = *b"WDL1";

const TAG_BYTES: u8 = 1;
const TAG_CONTIG: u8 = 2;
const TAG_VECTOR: u8 = 3;
const TAG_BLOCK_INDEXED: u8 = 4;
const TAG_INDEXED: u8 = 5;
const TAG_STRUCT: u8 = 6;

/// Why bytes were refused as a dataloop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends before the declared content (more bytes needed).
    #[error("input truncated")]
    Truncated,
    /// The input is larger than [`limits::DATALOOP_ENCODED_BYTES_MAX`].
    #[error("input larger than {} bytes", limits::DATALOOP_ENCODED_BYTES_MAX)]
    TooLarge,
    /// The input does not start with [`MAGIC`].
    #[error("bad magic")]
    BadMagic,
    /// A node tag is unknown.
    #[error("unknown node tag {0}")]
    UnknownKind(u8),
    /// A count or length field is negative.
    #[error("negative count or length in node {node}")]
    NegativeLength {
        /// Offending node.
        node: u32,
    },
    /// Bytes remain after the last node.
    #[error("{0} trailing bytes")]
    TrailingBytes(u64),
    /// The structure is well-formed bytes but not a valid dataloop.
    #[error("invalid dataloop: {0}")]
    Invalid(#[from] BuildError),
}

impl Dataloop {
    /// Encodes in the format of this module's documentation.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_bytes() as usize);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(self.nodes().len() as u32).to_le_bytes());
        for node in self.nodes() {
            encode_node(&mut out, node.spec());
        }
        debug_assert_eq!(out.len() as u64, self.encoded_bytes());
        out
    }

    /// Decodes and fully validates an encoded dataloop. Never panics.
    pub fn decode(input: &[u8]) -> Result<Dataloop, DecodeError> {
        if input.len() as u64 > limits::DATALOOP_ENCODED_BYTES_MAX {
            return Err(DecodeError::TooLarge);
        }
        let mut reader = Reader { input, at: 0, entries: 0 };
        if reader.take(4)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let count = reader.u32()?;
        if count == 0 {
            return Err(BuildError::Empty.into());
        }
        if count > limits::DATALOOP_NODES_MAX {
            return Err(BuildError::TooManyNodes.into());
        }
        reader.ensure(count as u64 * limits::DATALOOP_NODE_BYTES_MIN)?;
        let mut specs = Vec::with_capacity(count as usize);
        for index in 0..count {
            specs.push(reader.node(index)?);
        }
        let trailing = reader.remaining();
        if trailing != 0 {
            return Err(DecodeError::TrailingBytes(trailing));
        }
        Ok(Dataloop::from_specs(specs)?)
    }
}

fn put_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u64_as_i64(out: &mut Vec<u8>, value: u64) {
    // `Dataloop::from_specs` refuses counts above i64::MAX, so this is exact.
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn encode_node(out: &mut Vec<u8>, spec: &NodeSpec) {
    let tag = match spec.kind {
        Kind::Bytes { .. } => TAG_BYTES,
        Kind::Contig { .. } => TAG_CONTIG,
        Kind::Vector { .. } => TAG_VECTOR,
        Kind::BlockIndexed { .. } => TAG_BLOCK_INDEXED,
        Kind::Indexed { .. } => TAG_INDEXED,
        Kind::Struct { .. } => TAG_STRUCT,
    };
    out.push(tag);
    put_i64(out, spec.lb);
    put_i64(out, spec.extent);
    match &spec.kind {
        Kind::Bytes { size } => put_u64_as_i64(out, *size),
        Kind::Contig { count, child } => {
            put_u64_as_i64(out, *count);
            put_u32(out, *child);
        }
        Kind::Vector { count, blocklength, stride_bytes, child } => {
            put_u64_as_i64(out, *count);
            put_u64_as_i64(out, *blocklength);
            put_i64(out, *stride_bytes);
            put_u32(out, *child);
        }
        Kind::BlockIndexed { blocklength, displacements_bytes, child } => {
            put_u64_as_i64(out, *blocklength);
            put_u32(out, *child);
            put_u32(out, displacements_bytes.len() as u32);
            displacements_bytes.iter().for_each(|d| put_i64(out, *d));
        }
        Kind::Indexed { blocklengths, displacements_bytes, child } => {
            put_u32(out, *child);
            put_u32(out, blocklengths.len() as u32);
            blocklengths.iter().for_each(|b| put_u64_as_i64(out, *b));
            displacements_bytes.iter().for_each(|d| put_i64(out, *d));
        }
        Kind::Struct { blocklengths, displacements_bytes, children } => {
            put_u32(out, blocklengths.len() as u32);
            blocklengths.iter().for_each(|b| put_u64_as_i64(out, *b));
            displacements_bytes.iter().for_each(|d| put_i64(out, *d));
            children.iter().for_each(|c| put_u32(out, *c));
        }
    }
}

/// A bounds-checked cursor over untrusted bytes.
struct Reader<'a> {
    input: &'a [u8],
    at: usize,
    /// Displacement entries read so far, against the limit.
    entries: u64,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> u64 {
        (self.input.len() - self.at) as u64
    }

    fn ensure(&self, bytes: u64) -> Result<(), DecodeError> {
        if bytes > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(())
    }

    fn take(&mut self, bytes: usize) -> Result<&'a [u8], DecodeError> {
        self.ensure(bytes as u64)?;
        let slice = &self.input[self.at..self.at + bytes];
        self.at += bytes;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(bytes))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(bytes))
    }

    /// A count or length: an `i64` that must not be negative.
    fn length(&mut self, node: u32) -> Result<u64, DecodeError> {
        u64::try_from(self.i64()?).map_err(|_| DecodeError::NegativeLength { node })
    }

    /// A child index, which must name an earlier node.
    fn child(&mut self, node: u32) -> Result<u32, DecodeError> {
        let child = self.u32()?;
        if child >= node {
            return Err(BuildError::ChildNotEarlier { node, child }.into());
        }
        Ok(child)
    }

    /// An array length `n` whose entries take `entry_bytes` each: checked
    /// against the remaining input and the entry limit before any allocation.
    fn array_len(&mut self, entry_bytes: u64) -> Result<usize, DecodeError> {
        let n = self.u32()? as u64;
        self.ensure(n * entry_bytes)?;
        self.entries += n;
        if self.entries > limits::DATALOOP_DISPLACEMENTS_MAX {
            return Err(BuildError::TooManyDisplacements.into());
        }
        Ok(n as usize)
    }

    fn lengths(&mut self, node: u32, n: usize) -> Result<Vec<u64>, DecodeError> {
        (0..n).map(|_| self.length(node)).collect()
    }

    fn displacements(&mut self, n: usize) -> Result<Vec<i64>, DecodeError> {
        (0..n).map(|_| self.i64()).collect()
    }

    fn node(&mut self, node: u32) -> Result<NodeSpec, DecodeError> {
        let tag = self.u8()?;
        let lb = self.i64()?;
        let extent = self.i64()?;
        let kind = match tag {
            TAG_BYTES => Kind::Bytes { size: self.length(node)? },
            TAG_CONTIG => Kind::Contig { count: self.length(node)?, child: self.child(node)? },
            TAG_VECTOR => Kind::Vector {
                count: self.length(node)?,
                blocklength: self.length(node)?,
                stride_bytes: self.i64()?,
                child: self.child(node)?,
            },
            TAG_BLOCK_INDEXED => {
                let blocklength = self.length(node)?;
                let child = self.child(node)?;
                let n = self.array_len(8)?;
                Kind::BlockIndexed { blocklength, displacements_bytes: self.displacements(n)?, child }
            }
            TAG_INDEXED => {
                let child = self.child(node)?;
                let n = self.array_len(16)?;
                let blocklengths = self.lengths(node, n)?;
                Kind::Indexed { blocklengths, displacements_bytes: self.displacements(n)?, child }
            }
            TAG_STRUCT => {
                let n = self.array_len(20)?;
                let blocklengths = self.lengths(node, n)?;
                let displacements_bytes = self.displacements(n)?;
                let children = (0..n).map(|_| self.child(node)).collect::<Result<_, _>>()?;
                Kind::Struct { blocklengths, displacements_bytes, children }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        };
        Ok(NodeSpec { kind, lb, extent })
    }
}

impl Serialize for Dataloop {
    /// Serializes as the byte string of [`Dataloop::encode`].
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.encode())
    }
}

impl<'de> Deserialize<'de> for Dataloop {
    /// Deserializes a byte string through [`Dataloop::decode`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes: Vec<u8> = deserializer.deserialize_byte_buf(BytesVisitor)?;
        Dataloop::decode(&bytes).map_err(serde::de::Error::custom)
    }
}

struct BytesVisitor;

impl<'de> serde::de::Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an encoded dataloop as bytes")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::new();
        while let Some(byte) = seq.next_element::<u8>()? {
            if out.len() as u64 >= limits::DATALOOP_ENCODED_BYTES_MAX {
                return Err(serde::de::Error::custom("encoded dataloop too large"));
            }
            out.push(byte);
        }
        Ok(out)
    }
}
