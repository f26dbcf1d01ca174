//! Every limit a dataloop is checked against, in one place.
//!
//! The builder and the decoder enforce the same numbers, so anything a client
//! can build, a server accepts, and anything a server accepts costs bounded
//! memory and bounded work per region to walk.

/// Most nodes in one dataloop: child indices are `u32` on the wire, and a server
/// must not hold more per request than it can afford.
pub const DATALOOP_NODES_MAX: u32 = 65_536;

/// Deepest chain of nested nodes (a leaf has depth 1). Bounds the engine's
/// explicit stack; real MPI types rarely pass 10.
pub const DATALOOP_DEPTH_MAX: u32 = 64;

/// Most displacement (and per-block length/child) entries summed over all
/// indexed, block-indexed and struct nodes of one dataloop. Beyond this a
/// list of regions is the better description.
pub const DATALOOP_DISPLACEMENTS_MAX: u64 = 1 << 20;

/// Largest encoded dataloop. The builder refuses types whose encoding would
/// be larger, so every buildable dataloop decodes. At 20 bytes per struct
/// entry (16 per indexed, 8 per block-indexed entry) this, not
/// [`DATALOOP_DISPLACEMENTS_MAX`], bounds a single struct (~838k entries).
pub const DATALOOP_ENCODED_BYTES_MAX: u64 = 16 << 20;

/// Bytes of the smallest possible encoded node (an empty struct: tag, lb,
/// extent, entry count).
pub const NODE_BYTES_MIN: u64 = 1 + 8 + 8 + 4;

const _: () = assert!(DATALOOP_DEPTH_MAX >= 2 && DATALOOP_DEPTH_MAX <= DATALOOP_NODES_MAX);
const _: () = assert!(DATALOOP_NODES_MAX as u64 * NODE_BYTES_MIN <= DATALOOP_ENCODED_BYTES_MAX);
const _: () = assert!(DATALOOP_DISPLACEMENTS_MAX * 8 <= DATALOOP_ENCODED_BYTES_MAX);
