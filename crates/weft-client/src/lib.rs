//! The Weft client library.
//!
//! Layout:
//! - [`transport`]: one pipelined, flow-controlled connection to one server.
//! - [`pool`]: connections to every server, reconnecting; counts every request.
//! - [`faults`]: test-only fault injection (delay, fail N-th, drop connection).
//! - [`counters`]: requests and bytes per server and per operation kind.
//! - [`client`]: the [`Client`] type, attributes and statfs.
//! - [`path`]: path resolution with symlinks.
//! - [`namespace`]: client-driven create, remove, mkdir, rmdir, rename, readdir.
//! - [`io`]: striped contiguous reads and writes.
//! - [`noncontig`]: list I/O and datatype I/O (and posix-style for comparison).
//! - [`paths`]: path-based convenience operations.
//! - [`sessions`]: sessions on a file: shared file pointer, byte-range locks, keepalive.
//! - [`blocking`]: a blocking facade with its own runtime.
#![warn(missing_docs)]

pub mod access;
pub mod blocking;
pub mod client;
pub mod counters;
pub mod faults;
pub mod io;
pub mod namespace;
pub mod noncontig;
pub mod path;
pub mod paths;
pub mod pool;
pub mod sessions;
pub mod transport;

pub use blocking::BlockingClient;
pub use client::{Client, ClientOptions, FsStatus, Stat};
pub use io::File;
pub use namespace::{CreateOptions, EntryPlus};
pub use noncontig::{FileAccess, IoMethod, MemoryLayout};
pub use sessions::{KeepAlive, LockMode, Session};
pub use weft_dataloop::{Dataloop, Region};
pub use weft_proto::{ErrorCode, Handle, WeftResult};
