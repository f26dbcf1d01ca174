//! The server process as a whole: a thin owner of its four parts, each
//! with one job ([`crate::storage`]: datafile bytes and their I/O;
//! [`crate::metadata`]: the store, the committer and local records;
//! [`crate::sessions`]: client sessions, shared pointers, byte-range locks;
//! [`crate::cluster`]: peers, status, pools, reclaim, aggregate operations
//! and collectives). It builds them in dependency order (storage, then
//! metadata, then cluster) and starts the background tasks; requests reach
//! the parts through [`crate::dispatch`], which hands each handler only the
//! parts it needs.

use std::sync::Arc;

use weft_config::Config;
use weft_proto::{ErrorCode, WeftResult};

use crate::bytestream::Bytestreams;
use crate::capability::Issuer;
use crate::cluster::Cluster;
use crate::datafiles::{DatafileStore, Datafiles};
use crate::here::Here;
use crate::metadata::{now_ns, Metadata};
use crate::namespace;
use crate::peers::Peers;
use crate::sessions::Sessions;
use crate::storage::Storage;
use crate::store::Store;

/// Everything one server process owns.
pub struct Service {
    /// This server's id.
    pub server_id: u32,
    /// The file system configuration.
    pub config: Arc<Config>,
    /// Datafile bytes and their I/O.
    pub storage: Arc<Storage>,
    /// The store, the committer and local records.
    pub metadata: Arc<Metadata>,
    /// Client sessions: shared file pointers and byte-range locks.
    pub sessions: Sessions,
    /// Peers, status, pools, reclaim; operations across servers.
    pub cluster: Arc<Cluster>,
    /// Issues capabilities for data requests.
    pub capabilities: Issuer,
}

impl Service {
    /// Opens storage, starts the committer, creates the root if this server holds target 0.
    pub async fn open(config: Config, server_id: u32) -> WeftResult<Arc<Service>> {
        Service::open_with(config, server_id, |store| store).await
    }

    /// As [`Service::open`], with the datafile store passed through `wrap`
    /// (tests wrap the real store to inject faults).
    pub async fn open_with(
        config: Config,
        server_id: u32,
        wrap: impl FnOnce(Arc<dyn DatafileStore>) -> Arc<dyn DatafileStore>,
    ) -> WeftResult<Arc<Service>> {
        let section = config.server(server_id).ok_or(ErrorCode::Invalid)?.clone();
        let reserve_half_bytes = config.durability.metadata_reserve_bytes / 2;
        let store = Arc::new(Store::open(&section.storage, reserve_half_bytes)?);
        let datafiles = Datafiles::new(wrap(Arc::new(Bytestreams::open(&section.storage)?)), section.capacity_bytes)?
            .with_headroom(store.headroom().clone());
        let peers = Arc::new(Peers::new(&config, server_id)?);
        let capabilities = Issuer::from_config(&config).map_err(|_| ErrorCode::Invalid)?;
        let config = Arc::new(config);
        let here = Here { server_id, config: config.clone() };
        let storage = Arc::new(Storage::new(here.clone(), datafiles));
        let metadata = Arc::new(Metadata::open(here.clone(), store, storage.clone(), peers.clone())?);
        let cluster = Arc::new(Cluster::new(here, metadata.clone(), storage.clone(), peers));
        if config.targets_of_server(server_id).contains(&0) {
            let now = now_ns();
            metadata.committer.submit(Box::new(move |w, _| namespace::ensure_root(w, now))).await?;
        }
        Ok(Arc::new(Service {
            server_id,
            config,
            storage,
            metadata,
            sessions: Sessions::default(),
            cluster,
            capabilities,
        }))
    }

    /// Starts the background tasks: pool refills, the reclaim queue,
    /// status composition. Not started by [`Service::open`], so tools that
    /// open storage offline do not talk to other servers.
    pub fn start_background(&self) {
        self.cluster.start_background();
    }
}
