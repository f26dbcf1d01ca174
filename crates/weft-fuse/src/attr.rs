//! Inode numbers and attributes as the kernel sees them.
//!
//! Inode numbers are Weft handles: handles are never 0, and the only handle
//! equal to 1 is the root directory, which is exactly FUSE's root inode, so
//! the mapping is the identity and needs no table. Handles are never reused,
//! so the generation is always 0.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, Generation, INodeNo};
use weft_client::Stat;
use weft_proto::message::ObjectKind;
use weft_proto::Handle;

const _: () = assert!(Handle::ROOT.0 == INodeNo::ROOT.0, "the root handle must be FUSE's root inode");

/// The generation of every inode.
pub const GENERATION: Generation = Generation(0);

/// Block size reported to `stat`: large, so that tools such as `cp` move
/// data in requests as large as the mount accepts.
pub const BLOCK_SIZE_BYTES: u32 = 1 << 20;

/// The handle behind an inode number.
pub fn handle_of(ino: INodeNo) -> Handle {
    Handle(ino.0)
}

/// The inode number of a handle.
pub fn ino_of(handle: Handle) -> INodeNo {
    INodeNo(handle.0)
}

/// The FUSE file type of a Weft object kind.
pub fn file_type(kind: ObjectKind) -> FileType {
    match kind {
        ObjectKind::Metafile | ObjectKind::Datafile => FileType::RegularFile,
        ObjectKind::Directory => FileType::Directory,
        ObjectKind::Symlink => FileType::Symlink,
        ObjectKind::Fifo => FileType::NamedPipe,
        ObjectKind::Socket => FileType::Socket,
        ObjectKind::BlockDevice => FileType::BlockDevice,
        ObjectKind::CharDevice => FileType::CharDevice,
    }
}

/// A time in nanoseconds since the epoch (negative before it).
pub fn system_time(ns: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// Nanoseconds since the epoch of a time (saturating).
pub fn nanoseconds(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// Kernel attributes of a Weft object. Every object has one link:
/// directories too (as on btrfs), which tells `find` and `fts` not to use
/// link counts to skip subdirectories.
pub fn file_attr(stat: &Stat) -> FileAttr {
    let size = stat.size;
    FileAttr {
        ino: ino_of(stat.handle),
        size,
        blocks: size.div_ceil(512),
        atime: system_time(stat.atime_ns),
        mtime: system_time(stat.mtime_ns),
        ctime: system_time(stat.ctime_ns),
        crtime: system_time(stat.ctime_ns),
        kind: file_type(stat.kind),
        perm: (stat.mode & 0o7777) as u16,
        nlink: 1,
        uid: stat.uid,
        gid: stat.gid,
        rdev: stat.rdev as u32,
        blksize: BLOCK_SIZE_BYTES,
        flags: 0,
    }
}

/// Minimal attributes of a directory, for the `.` and `..` entries of a
/// readdirplus reply (the kernel does not use their attributes).
pub fn dot_attr(handle: Handle) -> FileAttr {
    FileAttr {
        ino: ino_of(handle),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLOCK_SIZE_BYTES,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        for ns in [0i64, 1, -1, 1_700_000_000_123_456_789, -5_000_000_000] {
            assert_eq!(nanoseconds(system_time(ns)), ns);
        }
    }

    #[test]
    fn inode_is_handle() {
        assert_eq!(handle_of(INodeNo::ROOT), Handle::ROOT);
        let h = Handle::new(3, 77).unwrap();
        assert_eq!(handle_of(ino_of(h)), h);
    }
}
