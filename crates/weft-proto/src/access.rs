//! Mode-bit permission checks, as a POSIX kernel makes them. Shared by the
//! server (authoritative checks) and the client (pre-checks before a
//! multi-step operation changes anything).
//!
//! Root passes every read/write check, and an execute check only if the
//! object is a directory or has some execute bit.

use crate::error::{ErrorCode, WeftResult};
use crate::message::{Credentials, ObjectKind};

/// Read permission bit (in the "other" position).
pub const READ: u32 = 4;
/// Write permission bit.
pub const WRITE: u32 = 2;
/// Execute / search permission bit.
pub const EXEC: u32 = 1;

/// The owner, group and mode of an object: what a check needs.
#[derive(Clone, Copy, Debug)]
pub struct Ownership {
    /// Object kind.
    pub kind: ObjectKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// Checks that `cred` has all the `wanted` bits (READ/WRITE/EXEC).
pub fn check(cred: &Credentials, object: Ownership, wanted: u32) -> WeftResult<()> {
    if cred.uid == 0 {
        let exec_ok = wanted & EXEC == 0 || object.kind == ObjectKind::Directory || object.mode & 0o111 != 0;
        return if exec_ok { Ok(()) } else { Err(ErrorCode::Access) };
    }
    let granted = if cred.uid == object.uid {
        (object.mode >> 6) & 7
    } else if cred.in_group(object.gid) {
        (object.mode >> 3) & 7
    } else {
        object.mode & 7
    };
    if granted & wanted == wanted {
        Ok(())
    } else {
        Err(ErrorCode::Access)
    }
}

/// Checks that `cred` owns the object (or is root).
pub fn check_owner(cred: &Credentials, object: Ownership) -> WeftResult<()> {
    if cred.uid == 0 || cred.uid == object.uid {
        Ok(())
    } else {
        Err(ErrorCode::Perm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(mode: u32) -> Ownership {
        Ownership { kind: ObjectKind::Metafile, mode, uid: 100, gid: 200 }
    }

    fn user(uid: u32, gid: u32) -> Credentials {
        Credentials { uid, gid, groups: vec![] }
    }

    #[test]
    fn owner_group_other() {
        let f = file(0o640);
        assert!(check(&user(100, 1), f, READ | WRITE).is_ok());
        assert!(check(&user(5, 200), f, READ).is_ok());
        assert_eq!(check(&user(5, 200), f, WRITE), Err(ErrorCode::Access));
        assert_eq!(check(&user(5, 5), f, READ), Err(ErrorCode::Access));
        let with_group = Credentials { uid: 5, gid: 5, groups: vec![200] };
        assert!(check(&with_group, f, READ).is_ok());
    }

    #[test]
    fn root_needs_some_exec_bit_on_files() {
        assert!(check(&Credentials::root(), file(0o600), READ | WRITE).is_ok());
        assert_eq!(check(&Credentials::root(), file(0o600), EXEC), Err(ErrorCode::Access));
        assert!(check(&Credentials::root(), file(0o700), EXEC).is_ok());
        assert_eq!(check_owner(&user(7, 7), file(0o777)), Err(ErrorCode::Perm));
    }
}
