//! `weft mount`: POSIX access to a Weft file system through FUSE.
//!
//! Layout:
//! - [`options`]: mount options (cache timeouts, request timeout, direct I/O,
//!   write-back cache).
//! - [`errno`]: the one place where Weft errors become errno values, and the
//!   list of unsupported calls with the errno each returns.
//! - [`attr`]: inode numbers and attributes as the kernel wants them.
//! - [`open_files`]: the table behind FUSE file handles (`fh`).
//! - [`locks`]: fcntl record locks, held by the servers' lock service.
//! - [`fs`]: the [`fuser::Filesystem`] implementation; every request is
//!   answered from a task on a tokio runtime the mount owns, so many requests
//!   are in flight and a slow one never blocks the others.
//! - [`daemon`]: foreground mount with clean unmount on SIGTERM/SIGINT,
//!   daemonizing (fork before any runtime starts), and unmount.
//!
//! Consistency model: close-to-open. Writes go straight to the servers
//! (unless the opt-in write-back cache is on), so once `close` returns
//! another mount sees the data. Opening a file drops its cached pages and
//! its cached attributes (an invalidation sent before the open is
//! answered), so the opener sees the current size and contents; between
//! opens, attributes are cached for [`MountOptions::attr_ttl`]. Missing
//! names are never cached.
#![warn(missing_docs)]

pub mod attr;
pub mod daemon;
pub mod errno;
pub mod fs;
pub mod locks;
pub mod open_files;
pub mod options;

pub use daemon::{daemonize_then_mount, is_mounted, run_mount, umount};
pub use fs::WeftFs;
pub use options::MountOptions;
