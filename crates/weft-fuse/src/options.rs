//! Mount options and their defaults.
//!
//! The defaults keep close-to-open consistency between mounts: attributes
//! of regular files are cached for `attr_ttl` (1 s), but every open drops
//! them, so an opener sees the current size; only a plain `stat` may lag
//! another mount's change by up to `attr_ttl`. Without that cache the
//! kernel asks for attributes at every permission check, so each open (and,
//! with the write-back cache, each write) would cost a stat. Names,
//! directories and symlinks are cached for `entry_ttl` (1 s), which bounds
//! how long another mount's rename or removal can go unnoticed by a path
//! walk (an open of a removed file answers `ESTALE`, and the kernel then
//! looks the name up again). Cached file pages are dropped on every open
//! (no `keep_cache`).

use std::time::Duration;

/// How a Weft file system is mounted.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// How long the kernel may cache attributes of regular files between
    /// opens (an open always drops them). 0 makes `stat` exact across mounts
    /// at the price of a stat per open.
    pub attr_ttl: Duration,
    /// How long the kernel may cache names (lookups) and the attributes of
    /// directories and symlinks.
    pub entry_ttl: Duration,
    /// Longest wait for a server's reply before the operation fails with
    /// EIO. Shorter than the library default (30 s) so that a dead server
    /// makes calls fail quickly instead of hanging.
    pub request_timeout: Duration,
    /// Bypass the page cache for every file (`direct_io`). Off by default:
    /// shared `mmap` and executing binaries need the page cache.
    pub direct_io: bool,
    /// Let users other than the mounting one use the mount (`allow_other`).
    /// Default: on when mounting as root. Needed for `AutoUnmount`; a
    /// non-root user also needs `user_allow_other` in `/etc/fuse.conf`.
    pub allow_other: bool,
    /// Let the kernel check mode bits (`default_permissions`). On by
    /// default; the servers check again with the caller's credentials.
    pub default_permissions: bool,
    /// Let the kernel buffer writes in its page cache and send them later,
    /// in large requests (FUSE `writeback_cache`). Off by default: write
    /// errors then surface only at `fsync` or `close`, and the kernel keeps
    /// its own size and mtime of a cached file (see the README). Needs
    /// `default_permissions`: the kernel turns write-only opens into
    /// read-write ones (it may read pages to complete partial writes), so
    /// only the kernel still knows what the caller asked for.
    pub writeback_cache: bool,
    /// Threads of the runtime answering requests.
    pub worker_threads: usize,
    /// The configuration file the mount was made with, recorded in the
    /// mount's source (`weft:NAME@PATH`, shown by `/proc/self/mountinfo`
    /// and `df`) so that `libweft_mpiio` can open files named by mount path
    /// natively without `WEFT_CONFIG`. Made absolute at mount time; `None`
    /// gives the source `weft:NAME`.
    pub config_path: Option<std::path::PathBuf>,
}

impl Default for MountOptions {
    fn default() -> Self {
        // SAFETY: geteuid has no preconditions.
        let is_root = unsafe { libc::geteuid() } == 0;
        MountOptions {
            attr_ttl: Duration::from_secs(1),
            entry_ttl: Duration::from_secs(1),
            request_timeout: Duration::from_secs(5),
            direct_io: false,
            allow_other: is_root,
            default_permissions: true,
            writeback_cache: false,
            worker_threads: 2,
            config_path: None,
        }
    }
}
