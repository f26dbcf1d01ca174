//! Authentication, both ends: the proofs a connection presents after the
//! `Hello` (its [`Authenticator`]) and their checks ([`verify_key_mac`],
//! [`munge_decode`]), shared by clients and servers.
//!
//! Every proof covers the server's nonce (fresh random bytes of the
//! `Hello` reply) and the id of the server greeted, so a recorded proof is
//! worth nothing on another connection or at another server:
//! - key: HMAC-SHA-256 under the file-system key (the `hmac` and `sha2`
//!   crates) over a domain tag, the server id, the nonce and, for a client,
//!   the identity it claims; for a peer, its own server id;
//! - MUNGE: a credential from the local munged whose payload is the same
//!   tag, server id and nonce; the server's munged decodes it (uid and
//!   primary gid; the replay cache refuses a second use).
//!
//! Nothing here protects the frames after authentication: they are neither
//! encrypted nor integrity-protected (see ARCHITECTURE.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use weft_config::{AuthMode, Config, KeyError};
use weft_proto::limits::AUTH_NONCE_BYTES;
use weft_proto::message::{Credentials, Proof};
use weft_proto::{ErrorCode, WeftResult};

type HmacSha256 = Hmac<Sha256>;

/// The uid, gid and supplementary groups of this process.
pub fn process_credentials() -> Credentials {
    // SAFETY: plain libc getters without pointers, and getgroups into a buffer of the size we pass.
    unsafe {
        let mut groups = vec![0 as libc::gid_t; 256];
        let n = libc::getgroups(groups.len() as i32, groups.as_mut_ptr());
        groups.truncate(n.max(0) as usize);
        Credentials { uid: libc::getuid(), gid: libc::getgid(), groups }
    }
}

/// A fresh nonce for a `Hello` reply.
pub fn new_nonce() -> Vec<u8> {
    let mut nonce = vec![0u8; AUTH_NONCE_BYTES];
    getrandom::fill(&mut nonce).expect("the OS random source works");
    nonce
}

/// What a connection presents after its `Hello`.
#[derive(Clone, Debug)]
pub enum Authenticator {
    /// Nothing (`auth.mode = "none"`).
    None,
    /// The file-system key: a client claims this process's identity; a
    /// server (`peer` = its id) proves it is one.
    Key {
        /// The key.
        key: Vec<u8>,
        /// `Some(id)` for a server's connections to its peers.
        peer: Option<u32>,
    },
    /// A MUNGE credential per connection, from the munged at `socket`.
    Munge {
        /// munged's socket (`None`: munge's default).
        socket: Option<PathBuf>,
    },
}

impl Authenticator {
    /// How a client of `config` authenticates: with the key when it can
    /// read it (any mode: key holders are trusted), else with MUNGE in
    /// MUNGE mode; in key mode a client that cannot read the key cannot
    /// connect (`Access`). A key file others may read is refused.
    pub fn client(config: &Config) -> WeftResult<Authenticator> {
        let auth = &config.auth;
        if auth.mode == AuthMode::None {
            return Ok(Authenticator::None);
        }
        let path = auth.key_file.as_deref().ok_or(ErrorCode::Invalid)?;
        match weft_config::load_key(path) {
            Ok(key) => Ok(Authenticator::Key { key, peer: None }),
            Err(KeyError::Unreadable(..)) if auth.mode == AuthMode::Munge => {
                Ok(Authenticator::Munge { socket: auth.munge_socket.clone() })
            }
            Err(KeyError::Unreadable(_, std::io::ErrorKind::NotFound)) => Err(ErrorCode::NoEntry),
            Err(_) => Err(ErrorCode::Access),
        }
    }

    /// How server `server_id` authenticates to its peers (the key, in every
    /// mode but none). The error says what is wrong with the key file.
    pub fn peer(config: &Config, server_id: u32) -> Result<Authenticator, String> {
        let auth = &config.auth;
        if auth.mode == AuthMode::None {
            return Ok(Authenticator::None);
        }
        let path = auth.key_file.as_deref().ok_or("auth.key_file is not set")?;
        let key = weft_config::load_key(path).map_err(|e| e.to_string())?;
        Ok(Authenticator::Key { key, peer: Some(server_id) })
    }

    /// The proof for server `server_id`, which sent `nonce`.
    pub async fn proof(&self, server_id: u32, nonce: &[u8]) -> WeftResult<Proof> {
        match self {
            Authenticator::None => Ok(Proof::None),
            Authenticator::Key { key, peer: Some(sender) } => {
                Ok(Proof::Peer { mac: key_mac(key, &peer_message(server_id, nonce, *sender)) })
            }
            Authenticator::Key { key, peer: None } => {
                let cred = process_credentials();
                let mac = key_mac(key, &client_message(server_id, nonce, &cred));
                Ok(Proof::Key { cred, mac })
            }
            Authenticator::Munge { socket } => {
                let socket = socket.clone();
                let payload = munge_payload(server_id, nonce);
                let credential = tokio::task::spawn_blocking(move || munge_encode(socket.as_deref(), &payload))
                    .await
                    .map_err(|_| ErrorCode::Io)??;
                Ok(Proof::Munge { credential })
            }
        }
    }
}

/// What a client's key MAC covers.
pub fn client_message(server_id: u32, nonce: &[u8], cred: &Credentials) -> Vec<u8> {
    let mut message = b"weft-auth-1 client\0".to_vec();
    message.extend_from_slice(&server_id.to_le_bytes());
    message.extend_from_slice(nonce);
    message.extend_from_slice(&cred.uid.to_le_bytes());
    message.extend_from_slice(&cred.gid.to_le_bytes());
    message.extend_from_slice(&(cred.groups.len() as u32).to_le_bytes());
    for group in &cred.groups {
        message.extend_from_slice(&group.to_le_bytes());
    }
    message
}

/// What a peer's key MAC covers.
pub fn peer_message(server_id: u32, nonce: &[u8], sender: u32) -> Vec<u8> {
    let mut message = b"weft-auth-1 peer\0".to_vec();
    message.extend_from_slice(&server_id.to_le_bytes());
    message.extend_from_slice(nonce);
    message.extend_from_slice(&sender.to_le_bytes());
    message
}

/// What a capability's MAC covers: everything in it but the MAC.
pub fn capability_message(capability: &weft_proto::message::Capability) -> Vec<u8> {
    let mut message = b"weft-capability-1\0".to_vec();
    message.extend_from_slice(&capability.uid.to_le_bytes());
    message.extend_from_slice(&capability.rights.to_le_bytes());
    message.extend_from_slice(&capability.expires_ms.to_le_bytes());
    message.extend_from_slice(&(capability.datafiles.len() as u32).to_le_bytes());
    for datafile in &capability.datafiles {
        message.extend_from_slice(&datafile.0.to_le_bytes());
    }
    message
}

/// The payload of a MUNGE credential for server `server_id`.
pub fn munge_payload(server_id: u32, nonce: &[u8]) -> String {
    let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    format!("weft-auth-1 munge {server_id} {hex}")
}

/// HMAC-SHA-256 of `message` under `key`.
pub fn key_mac(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// Whether `mac` is the MAC of `message` under `key` (constant-time compare).
pub fn verify_key_mac(key: &[u8], message: &[u8], mac: &[u8]) -> bool {
    let mut check = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    check.update(message);
    check.verify_slice(mac).is_ok()
}

fn munge_command(program: &str, socket: Option<&Path>) -> Command {
    let mut command = Command::new(program);
    if let Some(socket) = socket {
        command.arg("--socket").arg(socket);
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// A credential with `payload` from the munged at `socket` (runs `munge`;
/// blocking). `Unreachable` when munge fails (no daemon, no binary).
pub fn munge_encode(socket: Option<&Path>, payload: &str) -> WeftResult<String> {
    let mut command = munge_command("munge", socket);
    command.arg("--string").arg(payload).stdin(Stdio::null());
    let output = command.output().map_err(|_| ErrorCode::Unreachable)?;
    if !output.status.success() {
        return Err(ErrorCode::Unreachable);
    }
    String::from_utf8(output.stdout).map(|s| s.trim().to_string()).map_err(|_| ErrorCode::Io)
}

/// What a decoded MUNGE credential says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MungeIdentity {
    /// The uid of the process that made the credential.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// The payload.
    pub payload: String,
}

/// Decodes `credential` with the munged at `socket` (runs `unmunge`;
/// blocking). `Access` if munged refuses it (invalid, expired, replayed,
/// another realm's key).
pub fn munge_decode(socket: Option<&Path>, credential: &str) -> WeftResult<MungeIdentity> {
    let mut command = munge_command("unmunge", socket);
    command.arg("--numeric");
    let mut child = command.spawn().map_err(|_| ErrorCode::Unreachable)?;
    {
        let mut stdin = child.stdin.take().ok_or(ErrorCode::Io)?;
        stdin.write_all(credential.as_bytes()).map_err(|_| ErrorCode::Io)?;
    }
    let output = child.wait_with_output().map_err(|_| ErrorCode::Io)?;
    if !output.status.success() {
        return Err(ErrorCode::Access);
    }
    parse_unmunge(&String::from_utf8_lossy(&output.stdout)).ok_or(ErrorCode::Access)
}

/// Parses `unmunge --numeric` output: metadata lines, a blank line, the payload.
fn parse_unmunge(text: &str) -> Option<MungeIdentity> {
    let (metadata, payload) = text.split_once("\n\n")?;
    let field = |name: &str| {
        metadata.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_string()))
    };
    if field("STATUS")? != "0" {
        return None;
    }
    Some(MungeIdentity { uid: field("UID")?.parse().ok()?, gid: field("GID")?.parse().ok()?, payload: payload.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_macs_verify_only_for_their_message_and_key() {
        let key = b"0123456789abcdef0123456789abcdef".to_vec();
        let nonce = new_nonce();
        let cred = Credentials { uid: 1000, gid: 100, groups: vec![100, 27] };
        let mac = key_mac(&key, &client_message(3, &nonce, &cred));
        assert!(verify_key_mac(&key, &client_message(3, &nonce, &cred), &mac));
        let other = Credentials { uid: 0, ..cred.clone() };
        assert!(!verify_key_mac(&key, &client_message(3, &nonce, &other), &mac), "another uid");
        assert!(!verify_key_mac(&key, &client_message(4, &nonce, &cred), &mac), "another server");
        assert!(!verify_key_mac(&key, &client_message(3, &new_nonce(), &cred), &mac), "another nonce");
        assert!(!verify_key_mac(b"another key of at least 32 bytes...", &client_message(3, &nonce, &cred), &mac));
        assert!(!verify_key_mac(&key, &peer_message(3, &nonce, 1000), &mac), "a client MAC is no peer MAC");
    }

    #[test]
    fn unmunge_output_parses() {
        let text = "STATUS:          0\nUID:             1000\nGID:             100\nLENGTH:          5\n\nhello";
        let id = parse_unmunge(text).unwrap();
        assert_eq!((id.uid, id.gid, id.payload.as_str()), (1000, 100, "hello"));
        assert_eq!(parse_unmunge("STATUS:          15\nUID: 0\nGID: 0\n\nx"), None);
        assert_eq!(parse_unmunge("garbage"), None);
    }
}
