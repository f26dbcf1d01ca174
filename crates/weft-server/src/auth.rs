//! Who is on the other end of a connection, and what that lets it ask.
//!
//! [`Auth`] verifies the proof a connection presents after its `Hello`
//! (once per connection) and binds the connection to an [`Identity`]:
//! - a **peer** (greeted with `PeerHello`, proved the file-system key);
//! - a **client** with a uid, gid and groups: from a key proof (the claimed
//!   identity of a key holder: key mode trusts key holders) or from a
//!   MUNGE credential (uid and primary gid as munged vouches for them,
//!   supplementary groups from this server's group database);
//! - **anyone**, when the configuration says `auth.mode = "none"`.
//!
//! [`admit`] then classifies every request kind in one exhaustive match
//! and refuses, before the request runs, what the identity may not ask:
//! - peer-only requests (precreate reservations, status exchange,
//!   destructive or mark-changing collectives, single-object steps, scans)
//!   from clients other than root and key holders: `Perm`;
//! - a request whose `cred` is not the connection's own identity, unless
//!   the connection is root or a configured proxy uid: `Perm`.
//!
//! Data requests (`Read`, `Write`, ... by datafile handle) are not checked
//! against the file's permissions here: a client that knows a datafile
//! handle can read or write it (see ARCHITECTURE.md, "Authentication").

use std::path::PathBuf;

use weft_config::{AuthMode, Config};
use weft_net::auth::{client_message, munge_payload, peer_message, verify_key_mac};
use weft_proto::message::{CollectiveOp, Credentials, Proof, Request};
use weft_proto::{ErrorCode, WeftResult};

/// The server's side of authentication: its key and rules.
pub struct Auth {
    mode: AuthMode,
    key: Vec<u8>,
    proxy_uids: Vec<u32>,
    munge_socket: Option<PathBuf>,
    server_id: u32,
}

/// How a connection greeted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Greeting {
    /// `Hello`: a client.
    Client,
    /// `PeerHello` from this server id.
    Peer(u32),
}

/// Who a connection acts as, fixed at authentication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// No authentication configured: every request is taken as it comes.
    Anyone,
    /// Another server of this file system.
    Peer,
    /// A client process.
    Client {
        /// Its uid, gid and groups.
        cred: Credentials,
        /// Root or a configured proxy: may act for other users.
        proxy: bool,
        /// Proved the file-system key (could greet as a peer anyway):
        /// may send peer-only requests, like root.
        key_holder: bool,
    },
}

impl Auth {
    /// The rules of `config` for server `server_id`; loads the key (the
    /// error says what is wrong with the key file). Warns when
    /// authentication is off.
    pub fn from_config(config: &Config, server_id: u32) -> Result<Auth, String> {
        let auth = &config.auth;
        let key = match auth.mode {
            AuthMode::None => {
                tracing::warn!(
                    "auth.mode = \"none\": any process that reaches this server may read, change or remove anything"
                );
                Vec::new()
            }
            AuthMode::Key | AuthMode::Munge => {
                let path = auth.key_file.as_deref().ok_or("auth.key_file is not set")?;
                weft_config::load_key(path).map_err(|e| e.to_string())?
            }
        };
        Ok(Auth {
            mode: auth.mode,
            key,
            proxy_uids: auth.proxy_uids.clone(),
            munge_socket: auth.munge_socket.clone(),
            server_id,
        })
    }

    /// Verifies `proof` for a connection that greeted with `greeting` and
    /// was sent `nonce`; `Access` if it proves nothing.
    pub async fn verify(&self, greeting: Greeting, nonce: &[u8], proof: Proof) -> WeftResult<Identity> {
        if self.mode == AuthMode::None {
            return Ok(Identity::Anyone);
        }
        match (greeting, proof) {
            (Greeting::Peer(sender), Proof::Peer { mac }) => {
                match verify_key_mac(&self.key, &peer_message(self.server_id, nonce, sender), &mac) {
                    true => Ok(Identity::Peer),
                    false => Err(ErrorCode::Access),
                }
            }
            (Greeting::Client, Proof::Key { cred, mac }) => {
                match verify_key_mac(&self.key, &client_message(self.server_id, nonce, &cred), &mac) {
                    true => Ok(self.client(cred, true)),
                    false => Err(ErrorCode::Access),
                }
            }
            (Greeting::Client, Proof::Munge { credential }) if self.mode == AuthMode::Munge => {
                let socket = self.munge_socket.clone();
                let decoded = tokio::task::spawn_blocking(move || {
                    let decoded = weft_net::auth::munge_decode(socket.as_deref(), &credential)?;
                    let groups = groups_of(decoded.uid, decoded.gid);
                    Ok::<_, ErrorCode>((decoded, groups))
                })
                .await
                .map_err(|_| ErrorCode::Io)?;
                let (decoded, groups) = decoded.map_err(|_| ErrorCode::Access)?;
                if decoded.payload != munge_payload(self.server_id, nonce) {
                    return Err(ErrorCode::Access);
                }
                Ok(self.client(Credentials { uid: decoded.uid, gid: decoded.gid, groups }, false))
            }
            _ => Err(ErrorCode::Access),
        }
    }

    fn client(&self, cred: Credentials, key_holder: bool) -> Identity {
        let proxy = cred.uid == 0 || self.proxy_uids.contains(&cred.uid);
        Identity::Client { cred, proxy, key_holder }
    }
}

/// The supplementary groups of `uid` in this server's group database
/// (`getgrouplist` of its user name; just `gid` for an unknown uid).
fn groups_of(uid: u32, gid: u32) -> Vec<u32> {
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is valid (null pointers, zero ids); getpwuid_r
    // writes only into `entry` and `buffer`, whose sizes we pass.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; see above.
    let status = unsafe { libc::getpwuid_r(uid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found) };
    if status != 0 || found.is_null() {
        return vec![gid];
    }
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut count = groups.len() as libc::c_int;
    // SAFETY: `entry.pw_name` points into `buffer`, alive here; `groups` holds `count` entries.
    let status = unsafe { libc::getgrouplist(entry.pw_name, gid, groups.as_mut_ptr(), &mut count) };
    if status < 0 {
        return vec![gid];
    }
    groups.truncate(count.max(0) as usize);
    groups
}

/// What a request needs of its connection's identity.
enum Class<'a> {
    /// The greeting and proof: only before authentication.
    Greeting,
    /// Anyone authenticated.
    Open,
    /// Peers (and root or key-holding clients) only.
    PeerOnly,
    /// Carries credentials that must be the connection's own.
    Acting(&'a Credentials),
    /// Both: peer-only and carrying credentials.
    PeerOnlyActing(&'a Credentials),
}

/// Every request kind's class, in one exhaustive match. Its lists of
/// request kinds resemble `dispatch::dispatch`'s (a review with `duplicates`
/// pairs them): both must name every kind with no wildcard, so that a new
/// kind is decided in both; that is the point.
fn class(request: &Request) -> Class<'_> {
    match request {
        Request::Hello { .. } | Request::PeerHello { .. } | Request::Authenticate { .. } => Class::Greeting,
        // Data by handle (no file permission check at the data server) and
        // status, counters, sessions: any authenticated connection.
        Request::Ping
        | Request::GetAttr { .. }
        | Request::GetAttrBatch { .. }
        | Request::DatafileSizes { .. }
        | Request::StatFs
        | Request::StatFsAll
        | Request::Counters
        | Request::Read { .. }
        | Request::Write { .. }
        | Request::Fsync { .. }
        | Request::ReadList { .. }
        | Request::WriteList { .. }
        | Request::ReadDatatype { .. }
        | Request::WriteDatatype { .. }
        | Request::TruncateDatafile { .. }
        | Request::TrimDatafile { .. }
        | Request::StatFile { .. }
        | Request::SessionOpen { .. }
        | Request::SessionRenew { .. }
        | Request::SessionClose { .. }
        | Request::PointerFetchAdd { .. }
        | Request::PointerSet { .. }
        | Request::PointerGet { .. }
        | Request::LockAcquire { .. }
        | Request::LockRelease { .. }
        | Request::DlmAcquire { .. }
        | Request::DlmContinue { .. }
        | Request::DlmRelease { .. }
        | Request::DlmRenew { .. } => Class::Open,
        // A fenced write is admitted as the write it wraps.
        Request::Fenced { request, .. } => class(request),
        Request::Collective { operation, .. } => match operation {
            CollectiveOp::Ping | CollectiveOp::DatafileSizes | CollectiveOp::Status | CollectiveOp::Counters => {
                Class::Open
            }
            CollectiveOp::RemoveObjects | CollectiveOp::SettleSizes => Class::PeerOnly,
        },
        Request::Lookup { cred, .. }
        | Request::SetAttr { cred, .. }
        | Request::ReadDir { cred, .. }
        | Request::CreateFile { cred, .. }
        | Request::StatEntry { cred, .. }
        | Request::RemoveEntry { cred, .. }
        | Request::MakeDirectory { cred, .. }
        | Request::RenameEntry { cred, .. } => Class::Acting(cred),
        Request::CreateObject { cred, .. }
        | Request::CreateDirent { cred, .. }
        | Request::RemoveDirent { cred, .. }
        | Request::ReplaceDirent { cred, .. }
        | Request::Rename { cred, .. } => Class::PeerOnlyActing(cred),
        Request::SetLayout { .. }
        | Request::RemoveObject { .. }
        | Request::ReserveDatafiles { .. }
        | Request::ListReserved { .. }
        | Request::ClaimReserved { .. }
        | Request::ExchangeStatus { .. }
        | Request::ScanObjects { .. }
        | Request::ScanHandleRows { .. }
        | Request::MarkGrowing { .. } => Class::PeerOnly,
    }
}

/// Whether a connection authenticated as `identity` may send `request`:
/// `Perm` if not (`Protocol` for a second greeting).
pub fn admit(identity: &Identity, request: &Request) -> WeftResult<()> {
    let class = class(request);
    let (cred, proxy, key_holder) = match identity {
        Identity::Anyone | Identity::Peer => {
            return match class {
                Class::Greeting => Err(ErrorCode::Protocol),
                _ => Ok(()),
            };
        }
        Identity::Client { cred, proxy, key_holder } => (cred, *proxy, *key_holder),
    };
    let root = cred.uid == 0 || key_holder;
    let acting = match class {
        Class::Greeting => return Err(ErrorCode::Protocol),
        Class::Open => return Ok(()),
        Class::PeerOnly if root => return Ok(()),
        Class::PeerOnly => return Err(ErrorCode::Perm),
        Class::PeerOnlyActing(_) if !root => return Err(ErrorCode::Perm),
        Class::PeerOnlyActing(acting) | Class::Acting(acting) => acting,
    };
    if proxy || acts_as(cred, acting) {
        Ok(())
    } else {
        Err(ErrorCode::Perm)
    }
}

/// Whether request credentials `acting` are within the connection's
/// identity `cred`: the same uid, groups among its groups.
fn acts_as(cred: &Credentials, acting: &Credentials) -> bool {
    acting.uid == cred.uid && cred.in_group(acting.gid) && acting.groups.iter().all(|g| cred.in_group(*g))
}

#[cfg(test)]
mod tests {
    use weft_proto::Handle;

    use super::*;

    fn user(uid: u32) -> Credentials {
        Credentials { uid, gid: uid, groups: vec![uid, 50] }
    }

    fn lookup(cred: Credentials) -> Request {
        Request::Lookup { cred, parent: Handle::ROOT, name: "x".into() }
    }

    #[test]
    fn clients_act_only_as_themselves_unless_proxy() {
        let alice = Identity::Client { cred: user(1000), proxy: false, key_holder: false };
        assert_eq!(admit(&alice, &lookup(user(1000))), Ok(()));
        assert_eq!(admit(&alice, &lookup(Credentials { groups: vec![50], ..user(1000) })), Ok(()), "fewer groups");
        assert_eq!(admit(&alice, &lookup(user(0))), Err(ErrorCode::Perm), "forged uid");
        assert_eq!(admit(&alice, &lookup(Credentials { gid: 0, ..user(1000) })), Err(ErrorCode::Perm), "forged gid");
        assert_eq!(admit(&alice, &lookup(Credentials { groups: vec![0], ..user(1000) })), Err(ErrorCode::Perm));
        let gateway = Identity::Client { cred: user(7), proxy: true, key_holder: false };
        assert_eq!(admit(&gateway, &lookup(user(1000))), Ok(()));
        assert_eq!(admit(&Identity::Peer, &lookup(user(1000))), Ok(()));
    }

    #[test]
    fn peer_only_requests_need_a_peer_or_root() {
        let requests = [
            Request::RemoveObject { handle: Handle::ROOT },
            Request::ScanObjects { after: 0, max: 1 },
            Request::MarkGrowing { datafiles: vec![] },
            Request::CreateObject {
                cred: user(1000),
                target_id: 0,
                mode: 0o644,
                object: weft_proto::message::NewObject::Datafile,
            },
            Request::Collective { operation: CollectiveOp::RemoveObjects, groups: vec![], fanout: 0, round: 0 },
        ];
        let alice = Identity::Client { cred: user(1000), proxy: false, key_holder: false };
        let gateway = Identity::Client { cred: user(7), proxy: true, key_holder: false };
        let root = Identity::Client { cred: user(0), proxy: true, key_holder: false };
        let key_holder = Identity::Client { cred: user(1000), proxy: false, key_holder: true };
        for request in &requests {
            assert_eq!(admit(&key_holder, request), Ok(()), "{request:?}");
            assert_eq!(admit(&alice, request), Err(ErrorCode::Perm), "{request:?}");
            assert_eq!(admit(&gateway, request), Err(ErrorCode::Perm), "{request:?}");
            assert_eq!(admit(&root, request), Ok(()), "{request:?}");
            assert_eq!(admit(&Identity::Peer, request), Ok(()), "{request:?}");
        }
        let status = Request::Collective { operation: CollectiveOp::Status, groups: vec![], fanout: 0, round: 0 };
        assert_eq!(admit(&alice, &status), Ok(()));
        assert_eq!(admit(&alice, &Request::Read { handle: Handle::ROOT, offset: 0, length: 1 }), Ok(()));
        assert_eq!(admit(&alice, &Request::Hello { protocol_version: 2 }), Err(ErrorCode::Protocol));
    }
}
