//! Capabilities for data requests (see `weft_server::capability`): a client
//! that must present them (a MUNGE client other than root and the
//! configured proxy uids) asks a file's metadata server for one per file,
//! access mode and uid, caches it, asks again when less than
//! `limits::CAPABILITY_RENEW_MS` of it is left, and wraps each data request
//! by datafile handle in `Request::Capable`. Other clients send data
//! requests as they are (one `Option` test per request).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use weft_config::{AuthMode, Config};
use weft_net::auth::Authenticator;
use weft_proto::limits::CAPABILITY_RENEW_MS;
use weft_proto::message::{Capability, Reply, Request};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::client::Client;
use crate::io::File;

/// Capabilities held, by `(metafile, rights, uid)`.
pub(crate) type Cache = Mutex<HashMap<(Handle, u32, u32), Capability>>;

/// A cache when clients of `config` in this process need capabilities.
pub(crate) fn cache_for(config: &Config) -> Option<Cache> {
    if config.auth.mode != AuthMode::Munge {
        return None;
    }
    let uid = weft_net::auth::process_credentials().uid;
    if uid == 0 || config.auth.proxy_uids.contains(&uid) {
        return None;
    }
    match Authenticator::client(config) {
        Ok(Authenticator::Munge { .. }) => Some(Mutex::new(HashMap::new())),
        _ => None, // a key holder is trusted without them
    }
}

/// Wraps `request` in `capability`, if there is one.
pub(crate) fn capable(capability: &Option<Capability>, request: Request) -> Request {
    match capability {
        Some(capability) => Request::Capable { capability: capability.clone(), request: Box::new(request) },
        None => request,
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Client {
    /// The capability for `rights` (`access::READ` / `access::WRITE`) on
    /// `file`, when this client needs one: cached, or asked of the file's
    /// metadata server (which checks the permission: `Access` if denied).
    pub(crate) async fn capability(&self, file: &File, rights: u32) -> WeftResult<Option<Capability>> {
        let Some(cache) = &self.shared.capabilities else { return Ok(None) };
        let key = (file.handle, rights, self.credentials.uid);
        let fresh =
            |c: &Capability| c.expires_ms > now_ms() + CAPABILITY_RENEW_MS && c.datafiles == file.layout.datafiles;
        if let Some(capability) = cache.lock().expect("capability cache").get(&key).filter(|c| fresh(c)) {
            return Ok(Some(capability.clone()));
        }
        let request = Request::IssueCapability { cred: self.cred(), handle: file.handle, rights };
        let Reply::Capability(capability) = self.call_at(file.handle, request).await? else {
            return Err(ErrorCode::Protocol);
        };
        let mut cache = cache.lock().expect("capability cache");
        if cache.len() >= CACHE_ENTRIES_MAX {
            cache.retain(|_, c| fresh(c));
            if cache.len() >= CACHE_ENTRIES_MAX {
                cache.clear();
            }
        }
        cache.insert(key, capability.clone());
        Ok(Some(capability))
    }
}

/// Most capabilities cached per client (past it, expired ones are dropped,
/// then all).
const CACHE_ENTRIES_MAX: usize = 4096;
