//! Capabilities: a file's metadata server vouches that a uid may read or
//! write the file's data; its data servers check that without a round trip.
//!
//! Issue (`IssueCapability`, at the metafile's server): the mode bits of the
//! metafile are checked for the caller's credentials (already bound to the
//! connection by [`crate::auth::admit`]) and the wanted rights; the reply is
//! a [`Capability`] naming the file's datafiles, the uid, the rights and an
//! expiry `limits::CAPABILITY_LEASE_MS` ahead, with an HMAC-SHA-256 under
//! the file-system key ([`weft_net::auth::capability_message`]).
//!
//! Check ([`verify`], from `admit`, before a data request's task is
//! spawned): a connection that must present capabilities (a MUNGE client
//! other than root and the configured proxy uids) sends every data request
//! by datafile handle wrapped in `Capable`; the capability must carry the
//! connection's uid, the datafile, the rights the request needs (read:
//! `Read`, `ReadList`, `ReadDatatype`; write: `Write`, `WriteList`,
//! `WriteDatatype`, `TruncateDatafile`, fenced writes), be unexpired by the
//! data server's clock, and its MAC must verify: one HMAC over a few dozen
//! bytes per request. Root, proxies (they check permissions for the users
//! they act for), key holders and peers need none. With `auth.mode =
//! "none"` nothing is checked and none is issued (`Unsupported`).
//!
//! A capability is not revoked by a later `chmod` or `chown`: it stays valid
//! until it expires, like a POSIX descriptor opened before the change.

use std::time::{SystemTime, UNIX_EPOCH};

use weft_config::{AuthMode, Config};
use weft_net::auth::{capability_message, key_mac, verify_key_mac};
use weft_proto::limits::CAPABILITY_LEASE_MS;
use weft_proto::message::{Capability, Credentials, ObjectKind, Reply, ReplyResult};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::metadata::Metadata;
use crate::perm::{self, READ, WRITE};

/// The issuing side: the key (none when authentication is off).
pub struct Issuer {
    key: Option<Vec<u8>>,
}

impl Issuer {
    /// From the configuration's `[auth]` section.
    pub fn from_config(config: &Config) -> Result<Issuer, String> {
        let key = match (config.auth.mode, config.auth.key_file.as_deref()) {
            (AuthMode::None, _) => None,
            (_, Some(path)) => Some(weft_config::load_key(path).map_err(|e| e.to_string())?),
            (_, None) => return Err("auth.key_file is not set".into()),
        };
        Ok(Issuer { key })
    }

    /// Serves `IssueCapability` for metafile `handle`.
    pub async fn issue(&self, metadata: &Metadata, cred: Credentials, handle: Handle, rights: u32) -> ReplyResult {
        let key = self.key.as_ref().ok_or(ErrorCode::Unsupported)?;
        if rights == 0 || rights & !(READ | WRITE) != 0 {
            return Err(ErrorCode::Invalid);
        }
        metadata.here.local(handle)?;
        let record = metadata.read(move |_, r| r.object(handle)).await?;
        match record.kind {
            ObjectKind::Metafile => {}
            ObjectKind::Directory => return Err(ErrorCode::IsDir),
            _ => return Err(ErrorCode::Invalid),
        }
        perm::check(&cred, &record, rights)?;
        let layout = record.layout.ok_or(ErrorCode::Io)?;
        let mut capability = Capability {
            datafiles: layout.datafiles,
            uid: cred.uid,
            rights,
            expires_ms: now_ms().saturating_add(CAPABILITY_LEASE_MS),
            mac: Vec::new(),
        };
        capability.mac = key_mac(key, &capability_message(&capability));
        Ok(Reply::Capability(capability))
    }
}

/// Checks that `capability` lets `uid` use datafile `handle` with `needed`
/// rights now; `Access` if not.
pub fn verify(key: &[u8], capability: &Capability, uid: u32, handle: Handle, needed: u32) -> WeftResult<()> {
    let fits = capability.uid == uid
        && capability.rights & needed == needed
        && capability.expires_ms >= now_ms()
        && capability.datafiles.contains(&handle);
    if fits && verify_key_mac(key, &capability_message(capability), &capability.mac) {
        Ok(())
    } else {
        Err(ErrorCode::Access)
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(key: &[u8], uid: u32, rights: u32, expires_ms: u64) -> Capability {
        let mut capability = Capability { datafiles: vec![Handle(7), Handle(9)], uid, rights, expires_ms, mac: vec![] };
        capability.mac = key_mac(key, &capability_message(&capability));
        capability
    }

    #[test]
    fn a_capability_covers_its_uid_datafiles_rights_and_lease_only() {
        let key = b"k".repeat(32);
        let later = now_ms() + 60_000;
        let read = signed(&key, 1000, READ, later);
        assert_eq!(verify(&key, &read, 1000, Handle(9), READ), Ok(()));
        assert_eq!(verify(&key, &read, 1000, Handle(9), WRITE), Err(ErrorCode::Access), "rights");
        assert_eq!(verify(&key, &read, 1001, Handle(9), READ), Err(ErrorCode::Access), "another uid");
        assert_eq!(verify(&key, &read, 1000, Handle(8), READ), Err(ErrorCode::Access), "another datafile");
        let expired = signed(&key, 1000, READ, now_ms() - 1);
        assert_eq!(verify(&key, &expired, 1000, Handle(9), READ), Err(ErrorCode::Access), "expired");
        let forged = Capability { rights: READ | WRITE, ..read.clone() };
        assert_eq!(verify(&key, &forged, 1000, Handle(9), WRITE), Err(ErrorCode::Access), "changed rights");
        let other_key = signed(&b"x".repeat(32), 1000, READ, later);
        assert_eq!(verify(&key, &other_key, 1000, Handle(9), READ), Err(ErrorCode::Access), "another key");
    }
}
