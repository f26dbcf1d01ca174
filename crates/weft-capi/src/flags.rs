//! `open` flags from `<fcntl.h>`, decoded once into [`OpenFlags`].
//!
//! Accepted: the access mode (`O_RDONLY`, `O_WRONLY`, `O_RDWR`),
//! `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND`, `O_SYNC`/`O_DSYNC` (fsync
//! after every write), and flags that mean nothing without a kernel file
//! descriptor and are ignored (`O_CLOEXEC`, `O_NOCTTY`, `O_NONBLOCK`,
//! `O_LARGEFILE`, `O_NOATIME`). Anything else, an access mode of 3, and
//! `O_TRUNC` on a read-only open (unspecified in POSIX) are rejected with
//! `EINVAL`, so a caller never silently gets semantics it did not ask for.

use std::ffi::c_int;

use crate::error::{CapiError, CapiResult};

/// Flags with no meaning for a Weft file; accepted and ignored.
const IGNORED: c_int = libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_LARGEFILE | libc::O_NOATIME;

/// Flags this API acts on, besides the access mode.
const HANDLED: c_int = libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND | libc::O_SYNC | libc::O_DSYNC;

/// Decoded `open` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpenFlags {
    /// Reads are allowed.
    pub(crate) read: bool,
    /// Writes are allowed.
    pub(crate) write: bool,
    /// Create the file if it is missing.
    pub(crate) create: bool,
    /// With `create`: fail with `EEXIST` if it exists.
    pub(crate) exclusive: bool,
    /// Set the size to 0 after opening an existing file.
    pub(crate) truncate: bool,
    /// Every write goes to the current end of the file.
    pub(crate) append: bool,
    /// Every write is followed by an fsync.
    pub(crate) sync: bool,
}

impl OpenFlags {
    /// Decodes `flags`.
    pub(crate) fn parse(flags: c_int) -> CapiResult<OpenFlags> {
        if flags & !(libc::O_ACCMODE | IGNORED | HANDLED) != 0 {
            return Err(CapiError::InvalidFlags);
        }
        let (read, write) = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => (true, false),
            libc::O_WRONLY => (false, true),
            libc::O_RDWR => (true, true),
            _ => return Err(CapiError::InvalidFlags),
        };
        let truncate = flags & libc::O_TRUNC != 0;
        if truncate && !write {
            return Err(CapiError::InvalidFlags);
        }
        Ok(OpenFlags {
            read,
            write,
            create: flags & libc::O_CREAT != 0,
            exclusive: flags & libc::O_EXCL != 0,
            truncate,
            append: flags & libc::O_APPEND != 0,
            sync: flags & libc::O_DSYNC != 0,
        })
    }

    /// The permission bits (`weft_client::access`) an open must check.
    pub(crate) fn wanted_access(&self) -> u32 {
        let read = if self.read { weft_client::access::READ } else { 0 };
        let write = if self.write { weft_client::access::WRITE } else { 0 };
        read | write
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_access_modes() {
        let read_only = OpenFlags::parse(libc::O_RDONLY).unwrap();
        assert!(read_only.read && !read_only.write && !read_only.create);
        let flags = OpenFlags::parse(libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC).unwrap();
        assert!(flags.read && flags.write && flags.create && flags.exclusive);
        assert!(OpenFlags::parse(libc::O_WRONLY | libc::O_SYNC).unwrap().sync);
        assert_eq!(
            OpenFlags::parse(libc::O_WRONLY | libc::O_APPEND).unwrap().wanted_access(),
            weft_client::access::WRITE
        );
    }

    #[test]
    fn rejects_unknown_and_contradictory_flags() {
        assert_eq!(OpenFlags::parse(libc::O_ACCMODE), Err(CapiError::InvalidFlags));
        assert_eq!(OpenFlags::parse(libc::O_RDONLY | libc::O_TRUNC), Err(CapiError::InvalidFlags));
        assert_eq!(OpenFlags::parse(libc::O_RDONLY | libc::O_DIRECTORY), Err(CapiError::InvalidFlags));
        assert_eq!(OpenFlags::parse(libc::O_RDWR | libc::O_NOFOLLOW), Err(CapiError::InvalidFlags));
    }
}
