//! Connections to every server, opened on first use and reopened after a
//! failure (a restarted server is reached again without any action by the
//! caller). Every call is counted and passes through the fault layer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use weft_config::Config;
use weft_proto::message::{ReplyResult, Request};
use weft_proto::{ErrorCode, WeftResult};

use crate::auth::Authenticator;
use crate::counters::Counters;
use crate::faults::{Faults, Verdict};
use crate::transport::{Bulk, Connection};

/// Timeouts of the pool.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// Connecting and saying hello.
    pub connect: Duration,
    /// Longest wait for any frame of a request in flight.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_millis(weft_proto::limits::CONNECT_TIMEOUT_MS_DEFAULT as u64),
            request: Duration::from_millis(weft_proto::limits::REQUEST_TIMEOUT_MS_DEFAULT as u64),
        }
    }
}

struct Slot {
    address: SocketAddr,
    connection: Mutex<Option<Arc<Connection>>>,
}

/// The connection pool.
pub struct Pool {
    slots: Vec<Slot>,
    timeouts: Timeouts,
    /// Request counters.
    pub counters: Counters,
    /// Fault injection.
    pub faults: Faults,
    /// Sent first on each new connection.
    greeting: Request,
    /// The proof sent second.
    auth: Authenticator,
}

impl Pool {
    /// A pool for every server of `config`; connects lazily. Its
    /// connections authenticate as [`Authenticator::client`] says (so a
    /// process that may not authenticate fails here, e.g. `Access`).
    pub fn new(config: &Config, timeouts: Timeouts) -> WeftResult<Pool> {
        let auth = Authenticator::client(config)?;
        Pool::with_auth(config, timeouts, auth)
    }

    fn with_auth(config: &Config, timeouts: Timeouts, auth: Authenticator) -> WeftResult<Pool> {
        let mut servers: Vec<_> = config.servers.iter().collect();
        servers.sort_by_key(|s| s.id);
        let slots = servers
            .iter()
            .map(|s| {
                let address = s.address.parse().map_err(|_| ErrorCode::Invalid)?;
                Ok(Slot { address, connection: Mutex::new(None) })
            })
            .collect::<WeftResult<Vec<_>>>()?;
        let greeting = Request::Hello { protocol_version: weft_proto::limits::PROTOCOL_VERSION };
        Ok(Pool { slots, timeouts, counters: Counters::default(), faults: Faults::default(), greeting, auth })
    }

    /// A pool used by server `server_id` to reach the other servers: its
    /// connections greet with `PeerHello` and prove knowledge of the key
    /// (`auth`, from [`Authenticator::peer`]), so they are admitted as a peer's.
    pub fn new_peer(config: &Config, timeouts: Timeouts, server_id: u32, auth: Authenticator) -> WeftResult<Pool> {
        let mut pool = Pool::with_auth(config, timeouts, auth)?;
        pool.greeting = Request::PeerHello { protocol_version: weft_proto::limits::PROTOCOL_VERSION, server_id };
        Ok(pool)
    }

    /// Number of servers.
    pub fn server_count(&self) -> u32 {
        self.slots.len() as u32
    }

    async fn connection(&self, server_id: u32) -> WeftResult<Arc<Connection>> {
        let slot = self.slots.get(server_id as usize).ok_or(ErrorCode::Invalid)?;
        let mut current = slot.connection.lock().await;
        if let Some(connection) = current.as_ref() {
            if !connection.is_closed() {
                return Ok(connection.clone());
            }
        }
        let connection =
            Connection::open_with(slot.address, self.timeouts.connect, self.greeting.clone(), &self.auth).await?;
        *current = Some(connection.clone());
        Ok(connection)
    }

    /// Whether the last connection to `server_id` was lost (the peer closed
    /// it or failed); false if there is none yet or it is busy being opened.
    pub fn connection_lost(&self, server_id: u32) -> bool {
        let Some(slot) = self.slots.get(server_id as usize) else { return false };
        match slot.connection.try_lock() {
            Ok(current) => current.as_ref().is_some_and(|c| c.is_closed()),
            Err(_) => false,
        }
    }

    /// Sends `request` to `server_id` and waits for the reply.
    pub async fn call(&self, server_id: u32, request: Request, bulk: Bulk<'_>) -> ReplyResult {
        let bytes = bulk.upload_len() as u64;
        self.counters.record(server_id, request.kind_name(), bytes);
        let delay = self.faults.delay();
        let verdict = self.faults.judge();
        if verdict == Verdict::Fail {
            return Err(ErrorCode::Unreachable);
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let connection = self.connection(server_id).await?;
        if verdict == Verdict::Drop {
            connection.close();
            return Err(ErrorCode::Unreachable);
        }
        let reply = connection.call(request, bulk).await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        reply
    }

    /// Counts bytes received by a download (reads).
    pub fn count_download(&self, server_id: u32, kind: &'static str, bytes: u64) {
        if bytes > 0 {
            self.counters.record_bytes(server_id, kind, bytes);
        }
    }
}
