//! The gateway at the storage side (`weft gateway`): accepts remote MPI-IO
//! sessions, one TCP stream per client process, and performs their
//! requests in order against a [`Store`], one thread per connection (the
//! paper's "one thread per client").
//!
//! Authentication reuses the file system's key scheme
//! (`weft_net::auth`): the client proves the key with an HMAC over the
//! gateway's nonce and the identity it claims; the claimed uid is then
//! mapped through the configured uid map (an unmapped uid is refused), and
//! the connection acts as the mapped local user: for a local directory
//! with the thread's filesystem uid and gid (`setfsuid`/`setfsgid`, when
//! the gateway runs as root), for Weft with a client of that identity.
//! Without a key the gateway only listens on loopback addresses.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_net::auth::{client_message, new_nonce, verify_key_mac};
use weft_proto::limits::{RFS_AUTH_TIMEOUT_MS, RFS_DATA_BYTES_MAX};
use weft_proto::message::Credentials;
use weft_proto::ErrorCode;

use crate::store::{LocalStore, Store, StoreFile, WeftStore};
use crate::view::View;
use crate::wire::{
    read_frame, write_frame, Answer, At, AuthProof, AuthReply, Body, ClientHello, Reply, Request, ServerHello,
    SharedOp, GATEWAY_AUTH_ID, PROTOCOL_VERSION,
};

/// Where the gateway's files live.
pub enum Backend {
    /// Under a local directory.
    Local(PathBuf),
    /// In a Weft file system.
    Weft(Arc<WeftStore>),
}

/// What a gateway needs to run.
pub struct GatewayConfig {
    /// The file-system key; `None` runs without authentication (loopback only).
    pub key: Option<Vec<u8>>,
    /// Remote uid → local (uid, gid).
    pub uid_map: HashMap<u32, (u32, u32)>,
    /// The storage.
    pub backend: Backend,
}

/// Parses one uid-map entry `REMOTE:LOCAL_UID:LOCAL_GID`.
pub fn parse_uid_map(entry: &str) -> Result<(u32, (u32, u32)), String> {
    let parts: Vec<&str> = entry.split(':').collect();
    let number = |s: &str| s.parse::<u32>().map_err(|_| format!("bad uid map entry {entry:?}: {s:?} is not a number"));
    match parts.as_slice() {
        [remote, uid, gid] => Ok((number(remote)?, (number(uid)?, number(gid)?))),
        _ => Err(format!("bad uid map entry {entry:?}: expected REMOTE_UID:LOCAL_UID:LOCAL_GID")),
    }
}

/// Refuses to serve without authentication on a non-loopback address.
pub fn check_exposure(config: &GatewayConfig, address: &SocketAddr) -> Result<(), String> {
    if config.key.is_none() && !address.ip().is_loopback() {
        return Err(format!(
            "refusing to run without authentication on {address}: give the file-system key (--key) \
             or listen on a loopback address"
        ));
    }
    Ok(())
}

/// Serves connections on `listener` until the process ends.
pub fn serve(listener: TcpListener, config: Arc<GatewayConfig>) -> std::io::Result<()> {
    check_exposure(&config, &listener.local_addr()?).map_err(std::io::Error::other)?;
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!("gateway accept: {error}");
                continue;
            }
        };
        let config = config.clone();
        std::thread::spawn(move || {
            let peer = stream.peer_addr().ok();
            if let Err(error) = connection(stream, &config) {
                tracing::info!("gateway connection {peer:?} ended: {error}");
            }
        });
    }
    Ok(())
}

fn invalid(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.to_string())
}

/// Checks the proof and maps the identity; `Access` if refused.
fn admit(config: &GatewayConfig, nonce: &[u8], proof: &AuthProof) -> Result<Credentials, ErrorCode> {
    if let Some(key) = &config.key {
        let mac = proof.mac.as_deref().ok_or(ErrorCode::Access)?;
        if !verify_key_mac(key, &client_message(GATEWAY_AUTH_ID, nonce, &proof.cred), mac) {
            return Err(ErrorCode::Access);
        }
    }
    let &(uid, gid) = config.uid_map.get(&proof.cred.uid).ok_or(ErrorCode::Access)?;
    Ok(Credentials { uid, gid, groups: vec![gid] })
}

/// Makes this thread's file accesses those of `cred` (local directory
/// stores, gateway running as root).
fn become_user(cred: &Credentials) -> Result<(), ErrorCode> {
    // SAFETY: plain libc calls without pointers.
    unsafe {
        if libc::geteuid() != 0 {
            return if libc::geteuid() == cred.uid { Ok(()) } else { Err(ErrorCode::Perm) };
        }
        libc::setfsgid(cred.gid);
        libc::setfsuid(cred.uid);
        // setfsuid returns the previous value; asking again confirms the switch.
        if libc::setfsuid(cred.uid) as u32 != cred.uid {
            return Err(ErrorCode::Perm);
        }
    }
    Ok(())
}

fn connection(stream: TcpStream, config: &GatewayConfig) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(RFS_AUTH_TIMEOUT_MS as u64)))?;
    let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(1 << 20, stream.try_clone()?);
    let (hello, _): (ClientHello, _) = read_frame(&mut reader)?;
    if hello.version != PROTOCOL_VERSION {
        return Err(invalid("protocol version mismatch"));
    }
    let nonce = new_nonce();
    write_frame(&mut writer, &ServerHello { version: PROTOCOL_VERSION, nonce: nonce.clone() }, &[])?;
    writer.flush()?;
    let (proof, _): (AuthProof, _) = read_frame(&mut reader)?;
    let admitted = admit(config, &nonce, &proof);
    let store: Result<Box<dyn Store>, ErrorCode> = admitted.and_then(|cred| match &config.backend {
        Backend::Local(root) => {
            become_user(&cred)?;
            Ok(Box::new(LocalStore::new(root.clone())) as Box<dyn Store>)
        }
        Backend::Weft(weft) => Ok(Box::new(weft.for_identity(cred)?) as Box<dyn Store>),
    });
    let result = store.as_ref().map(|_| ()).map_err(|e| *e);
    write_frame(&mut writer, &AuthReply { result }, &[])?;
    writer.flush()?;
    let Ok(store) = store else {
        tracing::warn!("gateway: refused uid {} from {:?}", proof.cred.uid, stream.peer_addr().ok());
        return Ok(());
    };
    stream.set_read_timeout(None)?;
    let mut session = Session { store, files: HashMap::new(), next_fh: 1 };
    loop {
        let (request, data): (Request, Vec<u8>) = match read_frame(&mut reader) {
            Ok(frame) => frame,
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(error) => return Err(error),
        };
        let (result, out) = match session.perform(request.body, data) {
            Ok((answer, out)) => (Ok(answer), out),
            Err(code) => (Err(code), Vec::new()),
        };
        write_frame(&mut writer, &Reply { id: request.id, result }, &[&out])?;
        // Flush when no further request is already waiting, so pipelined
        // replies go out together.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

/// One connection's open files.
struct Session {
    store: Box<dyn Store>,
    files: HashMap<u64, (Box<dyn StoreFile>, View)>,
    next_fh: u64,
}

impl Session {
    fn file(
        &mut self,
        fh: u64,
        view: Option<crate::wire::WireView>,
    ) -> Result<&mut (Box<dyn StoreFile>, View), ErrorCode> {
        let entry = self.files.get_mut(&fh).ok_or(ErrorCode::Invalid)?;
        if let Some(wire) = view {
            entry.1 = View::decode(&wire)?;
        }
        Ok(entry)
    }

    fn perform(&mut self, body: Body, data: Vec<u8>) -> Result<(Answer, Vec<u8>), ErrorCode> {
        match body {
            Body::Open { path, flags } => {
                let file = self.store.open(&path, flags)?;
                let fh = self.next_fh;
                self.next_fh += 1;
                self.files.insert(fh, (file, View::bytes()));
                Ok((Answer::Opened { fh }, Vec::new()))
            }
            Body::Write { fh, view, at } => {
                let (file, view) = self.file(fh, view)?;
                let regions = view.resolve(&at, data.len() as u64)?;
                file.write(&regions, &data)?;
                Ok((Answer::Done, Vec::new()))
            }
            Body::Read { fh, view, at, len } => {
                if len > RFS_DATA_BYTES_MAX {
                    return Err(ErrorCode::TooBig);
                }
                let (file, view) = self.file(fh, view)?;
                let regions = view.resolve(&at, len)?;
                let mut out = vec![0u8; len as usize];
                let before = file.read(&regions, &mut out)?;
                if let At::Stream { .. } = at {
                    out.truncate(before as usize);
                }
                Ok((Answer::Data, out))
            }
            Body::Size { fh } => Ok((Answer::Size(self.file(fh, None)?.0.size()?), Vec::new())),
            Body::SetSize { fh, size } => {
                self.file(fh, None)?.0.set_size(size)?;
                Ok((Answer::Done, Vec::new()))
            }
            Body::Sync { fh } => {
                self.file(fh, None)?.0.sync()?;
                Ok((Answer::Done, Vec::new()))
            }
            Body::Close { fh } => {
                self.files.remove(&fh).ok_or(ErrorCode::Invalid)?;
                Ok((Answer::Done, Vec::new()))
            }
            Body::Delete { path } => {
                self.store.delete(&path)?;
                Ok((Answer::Done, Vec::new()))
            }
            Body::Shared { path, op } => {
                // One table per gateway process, for every client of a path.
                static POINTERS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
                let mut pointers = POINTERS.lock().map_err(|_| ErrorCode::Io)?;
                let pointer = pointers.get_or_insert_with(HashMap::new).entry(path).or_insert(0);
                let old = *pointer;
                match op {
                    SharedOp::FetchAdd(delta) => *pointer = old.checked_add(delta).ok_or(ErrorCode::Invalid)?,
                    SharedOp::Get => {}
                    SharedOp::Set(value) => *pointer = value,
                }
                Ok((Answer::Size(old), Vec::new()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_map_entries() {
        assert_eq!(parse_uid_map("1000:2000:3000").unwrap(), (1000, (2000, 3000)));
        assert!(parse_uid_map("1000:2000").unwrap_err().contains("REMOTE_UID"));
        assert!(parse_uid_map("a:1:2").unwrap_err().contains("not a number"));
    }

    #[test]
    fn no_auth_only_on_loopback() {
        let config = GatewayConfig { key: None, uid_map: HashMap::new(), backend: Backend::Local("/tmp".into()) };
        assert!(check_exposure(&config, &"127.0.0.5:1".parse().unwrap()).is_ok());
        assert!(check_exposure(&config, &"10.0.0.1:1".parse().unwrap()).unwrap_err().contains("refusing"));
        let keyed = GatewayConfig { key: Some(vec![1; 32]), ..config };
        assert!(check_exposure(&keyed, &"10.0.0.1:1".parse().unwrap()).is_ok());
    }
}
