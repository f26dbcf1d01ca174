//! Remote MPI-IO for Weft (Lee et al., "RFS: efficient and flexible remote
//! file access for MPI-IO", with active buffering): an MPI program names a
//! file `rfs:HOST:PORT:/path` and its MPI-IO goes over one TCP stream per
//! process to a gateway at the storage side, which performs it against a
//! Weft file system or a local directory.
//!
//! Layout:
//! - [`wire`]: the protocol (hellos, key proof, pipelined requests with ids).
//! - [`view`]: file views as the gateway decodes and walks them.
//! - [`store`]: what the gateway writes to (local directory, Weft).
//! - [`gateway`]: the server (`weft gateway`): authentication, uid map, one
//!   thread per connection.
//! - [`layer`]: the client's data path as layers, and the discard layer.
//! - [`client`]: connections and the remote layer (`rfs:` names).
//! - [`abt`]: active buffering with threads over any layer.
#![warn(missing_docs)]

pub mod abt;
pub mod client;
pub mod gateway;
pub mod layer;
pub mod store;
pub mod view;
pub mod wire;
