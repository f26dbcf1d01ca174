//! The bottom of the Weft stack: everything two Weft processes must agree on.
//!
//! Layout:
//! - [`access`]: mode-bit permission checks.
//! - [`ancestry`]: whether one directory is inside another (rename's loop check).
//! - [`limits`]: every size, count and time bound, with its reason, in one place.
//! - [`error`]: the closed set of error codes and their errno mapping.
//! - [`handle`]: object handles (target id + object id).
//! - [`layout`]: round-robin striping math (file offset ↔ datafile offset).
//! - [`message`]: request and reply bodies (encoded with postcard).
//! - [`frame`]: the fixed frame header, and async read/write of whole frames.
#![warn(missing_docs)]

pub mod access;
pub mod ancestry;
pub mod error;
pub mod frame;
pub mod handle;
pub mod layout;
pub mod limits;
pub mod message;

pub use error::{ErrorCode, WeftResult};
pub use handle::Handle;
pub use layout::Distribution;
