//! Client-side permission pre-checks against attributes already fetched,
//! used where a client-driven sequence must fail before its first change.
//! The rules are the server's ([`weft_proto::access`]).

use weft_proto::access::{self, Ownership};
use weft_proto::message::{Attributes, Credentials};
use weft_proto::WeftResult;

pub use weft_proto::access::{EXEC, READ, WRITE};

/// Checks that `cred` has all `wanted` bits on an object with `attrs`.
pub fn check(cred: &Credentials, attrs: &Attributes, wanted: u32) -> WeftResult<()> {
    access::check(cred, Ownership { kind: attrs.kind, mode: attrs.mode, uid: attrs.uid, gid: attrs.gid }, wanted)
}
