//! The C-visible types: opaque handle types and the `#[repr(C)]` structs
//! the API fills in. Each struct mirrors one in `include/weft.h` field by
//! field; the size assertions at the bottom catch a drift of either side
//! (the header asserts the same sizes).
#![allow(non_camel_case_types)]

use weft_client::{FsStatus, Stat};
use weft_proto::limits;
use weft_proto::message::{DirEntry, ObjectKind, ServerStatus};

/// A connection to one Weft file system (opaque to C).
pub struct weft_fs_t {
    _opaque: [u8; 0],
}

/// An open file (opaque to C).
pub struct weft_file_t {
    _opaque: [u8; 0],
}

/// An open directory stream (opaque to C).
pub struct weft_dir_t {
    _opaque: [u8; 0],
}

/// An immutable datatype: a memory or file access pattern (opaque to C).
pub struct weft_type_t {
    _opaque: [u8; 0],
}

/// `struct weft_stat`: attributes of one object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct weft_stat {
    /// Object handle (unique in the file system, never reused).
    pub handle: u64,
    /// Logical size: bytes of a file, target length of a symlink, entry
    /// count of a directory.
    pub size: u64,
    /// Access time, nanoseconds since the Unix epoch.
    pub atime_ns: i64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
    /// Strip size of a file, 0 for other objects.
    pub strip_bytes: u64,
    /// Stripe count (datafiles) of a file, 0 for other objects.
    pub stripe_count: u32,
    /// Type bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`) and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// `struct weft_statfs`: space of the whole file system.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct weft_statfs {
    /// Sum of the servers' total bytes.
    pub bytes_total: u64,
    /// Sum of the servers' free bytes.
    pub bytes_free: u64,
    /// Sum of the objects stored on the servers.
    pub objects: u64,
    /// Number of servers.
    pub server_count: u32,
    /// Always 0 (keeps the size a multiple of 8).
    pub reserved: u32,
}

/// `struct weft_server_statfs`: space of one server.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct weft_server_statfs {
    /// Total bytes of the server's storage.
    pub bytes_total: u64,
    /// Free bytes of the server's storage.
    pub bytes_free: u64,
    /// Objects stored on the server.
    pub objects: u64,
    /// Server id.
    pub server_id: u32,
    /// Always 0.
    pub reserved: u32,
}

/// Room for a name and its terminating NUL in [`weft_dirent`].
pub const DIRENT_NAME_BYTES: usize = limits::NAME_BYTES_MAX + 1;

/// `struct weft_dirent`: one directory entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct weft_dirent {
    /// Handle of the entry's object.
    pub handle: u64,
    /// `WEFT_DT_REG`, `WEFT_DT_DIR`, `WEFT_DT_LNK` (the `DT_*` values of
    /// `<dirent.h>`), or `WEFT_DT_UNKNOWN`.
    pub kind: u32,
    /// Length of `name` in bytes, without the NUL.
    pub name_bytes: u32,
    /// The name, NUL-terminated.
    pub name: [u8; DIRENT_NAME_BYTES],
}

fn type_bits(kind: ObjectKind) -> u32 {
    weft_client::unix::type_bits(kind)
}

fn dirent_kind(kind: ObjectKind) -> u32 {
    u32::from(weft_client::unix::dirent_type(kind))
}

impl From<&Stat> for weft_stat {
    fn from(stat: &Stat) -> Self {
        let distribution = stat.layout.as_ref().map(|layout| layout.distribution);
        weft_stat {
            handle: stat.handle.0,
            size: stat.size,
            atime_ns: stat.atime_ns,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
            strip_bytes: distribution.map_or(0, |d| d.strip_bytes),
            stripe_count: distribution.map_or(0, |d| d.stripe_count),
            mode: type_bits(stat.kind) | (stat.mode & 0o7777),
            uid: stat.uid,
            gid: stat.gid,
        }
    }
}

impl From<&FsStatus> for weft_statfs {
    fn from(status: &FsStatus) -> Self {
        weft_statfs {
            bytes_total: status.bytes_total,
            bytes_free: status.bytes_free,
            objects: status.objects,
            server_count: status.servers.len() as u32,
            reserved: 0,
        }
    }
}

impl From<&ServerStatus> for weft_server_statfs {
    fn from(status: &ServerStatus) -> Self {
        weft_server_statfs {
            bytes_total: status.bytes_total,
            bytes_free: status.bytes_free,
            objects: status.objects,
            server_id: status.server_id,
            reserved: 0,
        }
    }
}

impl From<&DirEntry> for weft_dirent {
    fn from(entry: &DirEntry) -> Self {
        let mut name = [0u8; DIRENT_NAME_BYTES];
        let name_bytes = crate::boundary::copy_c_string(&entry.name, &mut name).min(DIRENT_NAME_BYTES - 1);
        weft_dirent { handle: entry.handle.0, kind: dirent_kind(entry.kind), name_bytes: name_bytes as u32, name }
    }
}

// The header asserts the same sizes; change both together.
const _: () = assert!(std::mem::size_of::<weft_stat>() == 64);
const _: () = assert!(std::mem::size_of::<weft_statfs>() == 32);
const _: () = assert!(std::mem::size_of::<weft_server_statfs>() == 32);
const _: () = assert!(std::mem::size_of::<weft_dirent>() == 272);

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::Handle;

    #[test]
    fn dirent_names_are_terminated() {
        let entry = DirEntry { name: "abc".into(), handle: Handle(7), kind: ObjectKind::Symlink, sequence: 1 };
        let dirent = weft_dirent::from(&entry);
        assert_eq!(&dirent.name[..4], b"abc\0");
        assert_eq!(dirent.name_bytes, 3);
        assert_eq!(dirent.kind, libc::DT_LNK as u32);
    }
}
