//! The Weft client library.
//!
//! Layout:
//! - [`transport`], [`pool`], [`faults`], [`counters`]: the connection, the
//!   pool of connections to every server, fault injection and request
//!   counters, re-exported from `weft-net` (which servers share).
//! - [`client`]: the [`Client`] type, attributes and statfs.
//! - [`path`]: path resolution with symlinks.
//! - [`namespace`]: client-driven create, remove, mkdir, rmdir, rename, readdir.
//! - [`io`]: striped contiguous reads and writes.
//! - [`noncontig`]: list I/O and datatype I/O (and posix-style for comparison).
//! - [`paths`]: path-based convenience operations.
//! - [`dlm`]: byte-range locks at the data servers (POSIX, list, datatype) and their protocols; fenced writes.
//! - [`sessions`]: sessions on a file: shared file pointer, byte-range locks, keepalive.
//! - [`blocking`]: a blocking facade with its own runtime.
#![warn(missing_docs)]

pub mod access;
pub mod blocking;
mod capabilities;
pub mod client;
pub mod dlm;
pub mod io;
mod lock_ranges;
pub mod namespace;
pub mod noncontig;
pub mod path;
pub mod paths;
pub mod sessions;
mod takeback;
pub mod unix;
mod zipwalk;

pub use weft_net::{counters, faults, pool, transport};

pub use blocking::BlockingClient;
pub use client::{process_faults, set_process_faults, Client, ClientOptions, FsStatus, Stat};
pub use dlm::{LockMethod, LockProtocol, LockSet, Locker, RangeLock};
pub use io::File;
pub use namespace::{CreateOptions, EntryPlus};
pub use noncontig::{FileAccess, IoMethod, MemoryLayout};
pub use sessions::{KeepAlive, LockMode, Session};
pub use weft_dataloop::{Dataloop, Region};
pub use weft_proto::{ErrorCode, Handle, WeftResult};
