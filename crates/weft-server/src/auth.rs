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
//! - a data request by datafile handle (`Read`, `Write`, ...) from a
//!   client that must present capabilities (MUNGE, not root, not a proxy)
//!   without a valid capability for it ([`crate::capability`]): `Access`.
//!   Key holders (trusted in key mode), root, proxies and peers need none;
//!   with `auth.mode = "none"` nothing is checked.

use std::path::PathBuf;
use std::sync::Arc;

use weft_config::{AuthMode, Config};
use weft_net::auth::{client_message, munge_payload, peer_message, verify_key_mac};
use weft_proto::access::{READ, WRITE};
use weft_proto::message::{Capability, CollectiveOp, Credentials, Proof, Request};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

/// The server's side of authentication: its key and rules.
pub struct Auth {
    mode: AuthMode,
    key: Arc<Vec<u8>>,
    proxy_uids: Vec<u32>,
    munge_socket: Option<PathBuf>,
    server_id: u32,
    /// Slots for connections not yet authenticated.
    unauthenticated: Arc<tokio::sync::Semaphore>,
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
        /// The key to check capabilities with, when its data requests by
        /// datafile handle need one (a MUNGE client, not root or proxy).
        capability_key: Option<Arc<Vec<u8>>>,
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
            key: Arc::new(key),
            proxy_uids: auth.proxy_uids.clone(),
            munge_socket: auth.munge_socket.clone(),
            server_id,
            unauthenticated: Arc::new(tokio::sync::Semaphore::new(limits::UNAUTHENTICATED_CONNECTIONS_MAX)),
        })
    }

    /// A slot for a new connection until it authenticates; `None` when
    /// `limits::UNAUTHENTICATED_CONNECTIONS_MAX` are waiting already (the
    /// new one is closed).
    pub fn unauthenticated_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.unauthenticated.clone().try_acquire_owned().ok()
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
        let capability_key = (!proxy && !key_holder).then(|| self.key.clone());
        Identity::Client { cred, proxy, key_holder, capability_key }
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
    /// Data by datafile handle: needs these rights on it (a capability,
    /// from connections that must present one).
    Data(Handle, u32),
    /// A capability wrapped around what is not a data request.
    Misplaced,
}

/// Every request kind's class, in one exhaustive match. Its lists of
/// request kinds resemble `dispatch::dispatch`'s (a review with `duplicates`
/// pairs them): both must name every kind with no wildcard, so that a new
/// kind is decided in both; that is the point.
fn class(request: &Request) -> Class<'_> {
    match request {
        Request::Hello { .. } | Request::PeerHello { .. } | Request::Authenticate { .. } => Class::Greeting,
        Request::Read { handle, .. } | Request::ReadList { handle, .. } => Class::Data(*handle, READ),
        Request::ReadDatatype { access } => Class::Data(access.handle, READ),
        Request::Write { handle, .. }
        | Request::WriteList { handle, .. }
        | Request::TruncateDatafile { handle, .. }
        | Request::TrimDatafile { handle, .. } => Class::Data(*handle, WRITE),
        Request::WriteDatatype { access, .. } => Class::Data(access.handle, WRITE),
        Request::Capable { .. } => Class::Misplaced,
        // Status, counters, sessions: any authenticated connection.
        Request::Ping
        | Request::GetAttr { .. }
        | Request::GetAttrBatch { .. }
        | Request::DatafileSizes { .. }
        | Request::StatFs
        | Request::StatFsAll
        | Request::Counters
        | Request::Fsync { .. }
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
        Request::Fenced { request, .. } => match class(request) {
            Class::Data(handle, rights) => Class::Data(handle, rights),
            _ => Class::Misplaced,
        },
        Request::Collective { operation, .. } => match operation {
            CollectiveOp::Ping | CollectiveOp::DatafileSizes | CollectiveOp::Status | CollectiveOp::Counters => {
                Class::Open
            }
            CollectiveOp::RemoveObjects | CollectiveOp::SettleSizes => Class::PeerOnly,
        },
        Request::Lookup { cred, .. }
        | Request::IssueCapability { cred, .. }
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
/// `Perm` if not, `Access` for a data request without the capability it
/// needs (`Protocol` for a second greeting or a misplaced capability).
pub fn admit(identity: &Identity, request: &Request) -> WeftResult<()> {
    let (capability, request) = match request {
        Request::Capable { capability, request } => (Some(capability), &**request),
        request => (None, request),
    };
    let class = class(request);
    if capability.is_some() && !matches!(class, Class::Data(..)) {
        return Err(ErrorCode::Protocol);
    }
    let (cred, proxy, key_holder, capability_key) = match identity {
        Identity::Anyone | Identity::Peer => {
            return match class {
                Class::Greeting | Class::Misplaced => Err(ErrorCode::Protocol),
                _ => Ok(()),
            };
        }
        Identity::Client { cred, proxy, key_holder, capability_key } => (cred, *proxy, *key_holder, capability_key),
    };
    let root = cred.uid == 0 || key_holder;
    let acting = match class {
        Class::Greeting | Class::Misplaced => return Err(ErrorCode::Protocol),
        Class::Open => return Ok(()),
        Class::Data(handle, rights) => return check_capability(capability_key, capability, cred.uid, handle, rights),
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

/// Binds the lock owner id a client names (`DlmAcquire`, `DlmContinue`,
/// `DlmRelease`, `DlmRenew`, a `Fenced` write) to the connection's uid:
/// the server keeps the lock under a keyed hash of (uid, id), with a key
/// random per server process, so a client of another uid that names the
/// same id addresses another owner and can neither release, renew, fence
/// with nor wait on the first one's locks. Connections without a client
/// identity (peers; `auth.mode = "none"`, where the uid is unknown) keep
/// ids as sent. The same id from the same uid is the same owner on every
/// connection (a client's pool has several).
pub fn bind_owner(identity: &Identity, mut request: Request) -> Request {
    let Identity::Client { cred, .. } = identity else { return request };
    let uid = cred.uid;
    match &mut request {
        Request::DlmAcquire { owner, .. }
        | Request::DlmContinue { owner, .. }
        | Request::DlmRelease { owner, .. }
        | Request::DlmRenew { owner } => *owner = owner_of(uid, *owner),
        Request::Fenced { fence, .. } => fence.owner = owner_of(uid, fence.owner),
        Request::Capable { request: inner, .. } => {
            let taken = std::mem::replace(&mut **inner, Request::Ping);
            **inner = bind_owner(identity, taken);
        }
        _ => {}
    }
    request
}

/// The owner id kept for id `owner` named by `uid`.
fn owner_of(uid: u32, owner: u64) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> = std::sync::OnceLock::new();
    KEY.get_or_init(std::collections::hash_map::RandomState::new).hash_one((uid, owner)) | 1
}

/// A data request's capability check (none needed without a key).
fn check_capability(
    key: &Option<Arc<Vec<u8>>>,
    capability: Option<&Capability>,
    uid: u32,
    handle: Handle,
    rights: u32,
) -> WeftResult<()> {
    match (key, capability) {
        (None, _) => Ok(()),
        (Some(_), None) => Err(ErrorCode::Access),
        (Some(key), Some(capability)) => crate::capability::verify(key, capability, uid, handle, rights),
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
        let alice = Identity::Client { cred: user(1000), proxy: false, key_holder: false, capability_key: None };
        assert_eq!(admit(&alice, &lookup(user(1000))), Ok(()));
        assert_eq!(admit(&alice, &lookup(Credentials { groups: vec![50], ..user(1000) })), Ok(()), "fewer groups");
        assert_eq!(admit(&alice, &lookup(user(0))), Err(ErrorCode::Perm), "forged uid");
        assert_eq!(admit(&alice, &lookup(Credentials { gid: 0, ..user(1000) })), Err(ErrorCode::Perm), "forged gid");
        assert_eq!(admit(&alice, &lookup(Credentials { groups: vec![0], ..user(1000) })), Err(ErrorCode::Perm));
        let gateway = Identity::Client { cred: user(7), proxy: true, key_holder: false, capability_key: None };
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
        let alice = Identity::Client { cred: user(1000), proxy: false, key_holder: false, capability_key: None };
        let gateway = Identity::Client { cred: user(7), proxy: true, key_holder: false, capability_key: None };
        let root = Identity::Client { cred: user(0), proxy: true, key_holder: false, capability_key: None };
        let key_holder = Identity::Client { cred: user(1000), proxy: false, key_holder: true, capability_key: None };
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

    #[test]
    fn data_requests_need_a_capability_only_where_one_is_required() {
        let key = Arc::new(b"k".repeat(32));
        let munge_alice =
            Identity::Client { cred: user(1000), proxy: false, key_holder: false, capability_key: Some(key.clone()) };
        let read = Request::Read { handle: Handle(9), offset: 0, length: 1 };
        assert_eq!(admit(&munge_alice, &read), Err(ErrorCode::Access), "no capability");
        let mut capability =
            Capability { datafiles: vec![Handle(9)], uid: 1000, rights: READ, expires_ms: u64::MAX, mac: vec![] };
        capability.mac = weft_net::auth::key_mac(&key, &weft_net::auth::capability_message(&capability));
        let capable =
            |request: Request| Request::Capable { capability: capability.clone(), request: Box::new(request) };
        assert_eq!(admit(&munge_alice, &capable(read.clone())), Ok(()));
        let write = Request::Write { handle: Handle(9), offset: 0, length: 1 };
        assert_eq!(admit(&munge_alice, &capable(write.clone())), Err(ErrorCode::Access), "read-only");
        assert_eq!(admit(&munge_alice, &capable(lookup(user(1000)))), Err(ErrorCode::Protocol), "misplaced");
        assert_eq!(admit(&munge_alice, &capable(capable(read.clone()))), Err(ErrorCode::Protocol), "nested");
        // Key holders, proxies, peers and `none` mode need none.
        let key_alice = Identity::Client { cred: user(1000), proxy: false, key_holder: true, capability_key: None };
        for identity in [key_alice, Identity::Peer, Identity::Anyone] {
            assert_eq!(admit(&identity, &write), Ok(()));
        }
    }

    #[test]
    fn lock_owner_ids_are_kept_per_uid() {
        let client = |uid| Identity::Client { cred: user(uid), proxy: false, key_holder: true, capability_key: None };
        let renew = Request::DlmRenew { owner: 5 };
        let owner = |identity: &Identity| match bind_owner(identity, renew.clone()) {
            Request::DlmRenew { owner } => owner,
            other => panic!("{other:?}"),
        };
        assert_eq!(owner(&client(1000)), owner(&client(1000)), "the same uid: the same owner");
        assert_ne!(owner(&client(1000)), owner(&client(2000)));
        assert_eq!(owner(&Identity::Peer), 5);
        assert_eq!(owner(&Identity::Anyone), 5);
    }
}
