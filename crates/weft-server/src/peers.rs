//! Servers as clients of each other: one connection pool per server to all
//! the others, over `weft-net` (the connection and pool clients use too).
//! Peer connections greet with `PeerHello`, so the receiving server admits
//! their requests apart from client requests
//! (`limits::PEER_REQUESTS_INFLIGHT_MAX` per connection).
//!
//! Rules every caller follows (they are what keeps tree operations running
//! in opposite directions from deadlocking): every call has a deadline
//! ([`PEER_CALL_DEADLINE`]), and no scheduler guard, committer job or lock
//! is held while a call is in flight — a server first reads or commits
//! locally, releases everything, then calls out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_config::Config;
use weft_net::pool::{Pool, Timeouts};
use weft_net::transport::Bulk;
use weft_proto::message::{ReplyResult, Request};
use weft_proto::{ErrorCode, WeftResult};

/// Longest wait for one peer call, connection included.
pub const PEER_CALL_DEADLINE: Duration = Duration::from_secs(10);

/// Connecting to a peer: short, so a dead server is skipped quickly.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The peer connection pool and what calls to it have shown about liveness.
pub struct Peers {
    pool: Pool,
    /// Servers whose last call failed to reach them, and since when.
    unreachable_since: Mutex<HashMap<u32, Instant>>,
}

impl Peers {
    /// A pool to every server of `config`, for server `server_id`.
    pub fn new(config: &Config, server_id: u32) -> WeftResult<Peers> {
        let timeouts = Timeouts { connect: PEER_CONNECT_TIMEOUT, request: PEER_CALL_DEADLINE };
        let auth = weft_net::auth::Authenticator::peer(config, server_id).map_err(|reason| {
            tracing::error!("server {server_id}: {reason}");
            ErrorCode::Access
        })?;
        let pool = Pool::new_peer(config, timeouts, server_id, auth)?;
        Ok(Peers { pool, unreachable_since: Mutex::new(HashMap::new()) })
    }

    /// Calls `server_id` with the default deadline.
    pub async fn call(&self, server_id: u32, request: Request) -> ReplyResult {
        self.call_within(server_id, request, PEER_CALL_DEADLINE).await
    }

    /// Calls `server_id`, giving up after `deadline`.
    pub async fn call_within(&self, server_id: u32, request: Request, deadline: Duration) -> ReplyResult {
        let reply = match tokio::time::timeout(deadline, self.pool.call(server_id, request, Bulk::None)).await {
            Ok(reply) => reply,
            Err(_) => Err(ErrorCode::TimedOut),
        };
        let mut unreachable = self.unreachable_since.lock().expect("peers lock");
        match reply {
            Err(ErrorCode::Unreachable) | Err(ErrorCode::TimedOut) => {
                unreachable.entry(server_id).or_insert_with(Instant::now);
            }
            _ => {
                unreachable.remove(&server_id);
            }
        }
        reply
    }

    /// Whether the connection to `server_id` was lost.
    pub fn pool_connection_lost(&self, server_id: u32) -> bool {
        self.pool.connection_lost(server_id)
    }

    /// Whether the last call to `server_id` failed to reach it, or its
    /// connection has been closed since (a killed server's kernel closes
    /// its sockets at once, so this notices a crash before any timeout).
    pub fn unreachable(&self, server_id: u32) -> bool {
        self.unreachable_since.lock().expect("peers lock").contains_key(&server_id)
            || self.pool.connection_lost(server_id)
    }
}
