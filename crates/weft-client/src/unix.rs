//! The Unix numbers of object kinds: `S_IFMT` type bits and `d_type`,
//! shared by the C API (`weft-capi`) and the MPI-IO POSIX layer
//! (`weft-mpiio`), so both answer alike. Exhaustive: a new kind must be
//! given its numbers here.

use weft_proto::message::ObjectKind;

/// `S_IFMT` type bits of an object kind. Datafiles are never reachable
/// through a path; stat'ed by handle, one holds plain bytes.
pub fn type_bits(kind: ObjectKind) -> u32 {
    match kind {
        ObjectKind::Metafile | ObjectKind::Datafile => libc::S_IFREG,
        ObjectKind::Directory => libc::S_IFDIR,
        ObjectKind::Symlink => libc::S_IFLNK,
        ObjectKind::Fifo => libc::S_IFIFO,
        ObjectKind::Socket => libc::S_IFSOCK,
        ObjectKind::BlockDevice => libc::S_IFBLK,
        ObjectKind::CharDevice => libc::S_IFCHR,
    }
}

/// `d_type` of an object kind (as [`type_bits`], a datafile is regular).
pub fn dirent_type(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Metafile | ObjectKind::Datafile => libc::DT_REG,
        ObjectKind::Directory => libc::DT_DIR,
        ObjectKind::Symlink => libc::DT_LNK,
        ObjectKind::Fifo => libc::DT_FIFO,
        ObjectKind::Socket => libc::DT_SOCK,
        ObjectKind::BlockDevice => libc::DT_BLK,
        ObjectKind::CharDevice => libc::DT_CHR,
    }
}
