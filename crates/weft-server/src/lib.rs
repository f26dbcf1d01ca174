//! The Weft server: one process per storage node.
//!
//! Layout:
//! - [`store`]: key/value records (objects, directory entries, counters) in redb.
//! - [`datafiles`]: the one owner of datafile I/O ([`datafiles::DatafileStore`]), capacity, known records.
//! - [`bytestream`]: the real datafile store: one local file per written datafile, cached descriptors.
//! - [`nowait`]: page-cache-only reads (`RWF_NOWAIT`) that never block a runtime worker.
//! - [`committer`]: the one writer of the store; group commit; object ids.
//! - [`wal`]: the metadata write-ahead log that makes group commits durable.
//! - [`durable`]: directory fsyncs (a new name is durable only once its directory is).
//! - [`crashsim`] (tests only): simulated storage that crashes at any write or sync.
//! - [`reserve`]: the metadata reserve (real blocks for the log and the store's growth).
//! - [`namespace`]: namespace changes applied inside the committer's transaction.
//! - [`perm`]: mode-bit checks.
//! - [`scheduler`]: per-datafile ordering (I/O shared, truncate/remove exclusive).
//! - [`service`]: the server process as a thin owner of its four parts:
//!   - [`storage`]: datafile bytes and what orders and counts their I/O (the data path's part);
//!   - [`metadata`]: the store, the committer and operations on local records; size marks;
//!   - [`sessions`]: client sessions with leases: shared file pointers, byte-range locks;
//!   - [`cluster`]: peers, status, pool and reclaim wakes; operations across servers.
//! - [`here`]: this server's id and the configuration (the locality checks every part makes).
//! - [`auth`]: who a connection is (verified once, at its greeting) and what that lets it ask.
//! - [`connection`]: framing, flow control and request tasks for one socket.
//! - [`link`]: what a request handler may do with its connection (data out, chunks in, credits).
//! - [`dispatch`]: the one map from every request kind to its handler.
//! - [`contiguous`]: `Read` and `Write` of one datafile range.
//! - [`noncontig`]: list I/O and datatype I/O, one request per server.
//! - [`sieve`]: the storage path of noncontiguous pieces (coalescing, sieving).
//! - [`ranges`]: byte-range exclusion for sieving read-modify-writes.
//! - [`locks`] (storage): byte-range locks of the bytes stored here (POSIX, list, datatype), fencing.
//! - [`counters`]: requests, bytes, syscalls and pieces, readable over the wire.
//! - [`peers`]: connections to the other servers (servers as clients of each other).
//! - [`tree`] (cluster): tree collectives (one-to-many requests, replies reduced on the way back).
//! - [`aggregate`] (cluster): one-request namespace operations (create, stat, remove, mkdir, rmdir, rename, statfs).
//! - [`pools`] (cluster): precreate pools of datafile handles on other data servers.
//! - [`reclaim`] (cluster): the durable reclaim queue and object removal.
//! - [`status`]: the composed status table (filled by the cluster's recursive doubling).
#![warn(missing_docs)]

pub mod aggregate;
pub mod auth;
pub mod bytestream;
pub mod capability;
pub mod cluster;
pub mod committer;
pub mod connection;
pub mod contiguous;
pub mod counters;
#[cfg(test)]
mod crashsim;
pub mod datafiles;
pub mod dispatch;
pub mod durable;
pub mod growth;
pub mod here;
pub mod link;
pub mod locks;
pub mod metadata;
pub mod namespace;
pub mod noncontig;
pub mod nowait;
pub mod peers;
pub mod perm;
pub mod pools;
pub mod ranges;
pub mod reclaim;
pub mod reserve;
pub mod scheduler;
pub mod service;
pub mod sessions;
pub mod sieve;
pub mod status;
pub mod storage;
pub mod store;
pub mod tree;
pub mod wal;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use weft_config::Config;
use weft_proto::limits::CONNECTIONS_MAX;

pub use service::Service;

/// Why a server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No such server id in the configuration.
    #[error("server id {0} is not in the configuration")]
    UnknownServer(u32),
    /// Storage could not be opened.
    #[error("opening storage: {0}")]
    Storage(weft_proto::ErrorCode),
    /// The listen address could not be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// Address.
        address: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Authentication is misconfigured (e.g. an unsafe or missing key file).
    #[error("authentication: {0}")]
    Auth(String),
    /// The runtime could not be built.
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
}

/// Builds a runtime sized by the configuration and serves until SIGTERM or SIGINT.
pub fn run_blocking(config: Config, server_id: u32) -> Result<(), ServerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.network as usize)
        .max_blocking_threads(config.threads.io as usize)
        .thread_name("weft-server")
        .enable_all()
        .build()
        .map_err(ServerError::Runtime)?;
    runtime.block_on(run(config, server_id))
}

/// Serves until SIGTERM or SIGINT, then makes metadata durable and returns.
pub async fn run(config: Config, server_id: u32) -> Result<(), ServerError> {
    let address = config.server(server_id).ok_or(ServerError::UnknownServer(server_id))?.address.clone();
    let listener =
        TcpListener::bind(&address).await.map_err(|source| ServerError::Bind { address: address.clone(), source })?;
    let auth = Arc::new(auth::Auth::from_config(&config, server_id).map_err(ServerError::Auth)?);
    let service = Service::open(config, server_id).await.map_err(ServerError::Storage)?;
    tracing::info!("server {server_id} listening on {address}");
    service.start_background();
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(ServerError::Runtime)?;
    let mut interrupt =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).map_err(ServerError::Runtime)?;
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX as usize));
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::warn!("connection limit reached; refusing a connection");
                    continue;
                };
                let service = service.clone();
                let auth = auth.clone();
                tokio::spawn(async move {
                    connection::serve(stream, service, auth).await;
                    drop(slot);
                });
            }
        }
    }
    tracing::info!("server {server_id} shutting down");
    let _ = service.metadata.committer.flush().await;
    Ok(())
}
