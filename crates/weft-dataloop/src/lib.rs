//! Pure region math for noncontiguous I/O: no network, no file I/O.
//!
//! The crate owns the description of *which bytes* an access touches, and
//! nothing about moving them. Clients build a [`Dataloop`] from MPI-style
//! constructors, [`Dataloop::encode`] it into a request, and servers
//! [`Dataloop::decode`] it (validating everything against `weft_proto::limits`) and walk it
//! with an [`engine::Cursor`], usually through a [`stripe::StripeCursor`] that
//! keeps only the pieces stored on one server.
//!
//! Layout (one idea per module):
//! - `weft_proto::limits` (`DATALOOP_*`): every bound a hostile description is
//!   checked against, beside the request header limit it must fit in.
//! - [`regions`]: `(offset, length)` lists, coalescing, intersection, and the
//!   memory/file "zip" used by list I/O.
//! - [`dataloop`]: the post-order node array, derived sizes and bounds, and the
//!   MPI-style builder (contiguous, vector, indexed, struct, resized).
//! - [`mpi_types`]: `subarray` and `darray`, following MPI-3.1 §4.1.3–4.1.4.
//! - [`codec`]: the little-endian wire format and its validating decoder.
//! - [`engine`]: the resumable, batch-bounded walk from any stream position.
//! - [`stripe`]: the walk intersected with round-robin striping, per server.
#![warn(missing_docs)]

pub mod codec;
pub mod dataloop;
pub mod engine;
pub mod mpi_types;
pub mod regions;
pub mod stripe;

pub use codec::DecodeError;
pub use dataloop::{BuildError, Dataloop, Kind, Node, NodeSpec};
pub use engine::{BatchLimits, Cursor, EngineError};
pub use mpi_types::{Distribution, DistributionArg, MpiTypeError, Order};
pub use regions::{Region, RegionError, RegionList, ZipPiece};
pub use stripe::{StripeCursor, StripeError, StripeFilter, StripePiece};
