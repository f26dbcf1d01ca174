//! Permission checks on stored records, through the shared rules in
//! [`weft_proto::access`].

use weft_proto::access::{self, Ownership};
use weft_proto::message::Credentials;
use weft_proto::WeftResult;

use crate::store::ObjectRecord;

pub use weft_proto::access::{EXEC, READ, WRITE};

fn ownership(record: &ObjectRecord) -> Ownership {
    Ownership { kind: record.kind, mode: record.mode, uid: record.uid, gid: record.gid }
}

/// Checks that `cred` has all the `wanted` bits on `record`.
pub fn check(cred: &Credentials, record: &ObjectRecord, wanted: u32) -> WeftResult<()> {
    access::check(cred, ownership(record), wanted)
}

/// Checks that `cred` owns `record` (or is root).
pub fn check_owner(cred: &Credentials, record: &ObjectRecord) -> WeftResult<()> {
    access::check_owner(cred, ownership(record))
}
