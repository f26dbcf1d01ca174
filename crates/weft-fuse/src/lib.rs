//! `weft mount`: POSIX access to a Weft file system through FUSE.
//!
//! Layout:
//! - [`options`]: mount options (cache timeouts, request timeout, direct I/O).
//! - [`errno`]: the one place where Weft errors become errno values, and the
//!   list of unsupported calls with the errno each returns.
//! - [`attr`]: inode numbers and attributes as the kernel wants them.
//! - [`open_files`]: the table behind FUSE file handles (`fh`).
//! - [`fs`]: the [`fuser::Filesystem`] implementation; every request is
//!   answered from a task on a tokio runtime the mount owns, so many requests
//!   are in flight and a slow one never blocks the others.
//! - [`daemon`]: foreground mount with clean unmount on SIGTERM/SIGINT,
//!   daemonizing (fork before any runtime starts), and unmount.
//!
//! Consistency model: close-to-open. Writes go straight to the servers (no
//! write-back cache), so once `close` returns another mount sees the data.
//! Opening a file drops its cached pages, and regular-file attributes are not
//! cached by default (see [`MountOptions`]), so the opener sees the new size
//! and contents.
#![warn(missing_docs)]

pub mod attr;
pub mod daemon;
pub mod errno;
pub mod fs;
pub mod open_files;
pub mod options;

pub use daemon::{daemonize_then_mount, is_mounted, run_mount, umount};
pub use fs::WeftFs;
pub use options::MountOptions;
