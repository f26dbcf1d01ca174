//! The async client: shared connection pool, credentials, request routing,
//! and attribute retrieval. Namespace operations live in
//! [`crate::namespace`], path resolution in [`crate::path`], file I/O in
//! [`crate::io`]; all are methods of [`Client`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once, OnceLock};

use futures::future::join_all;
use weft_config::Config;
use weft_proto::message::{
    Attributes, Credentials, DatafileStat, FileLayout, ObjectKind, Reply, ReplyResult, Request, ServerStatus,
};
use weft_proto::{ErrorCode, Handle, WeftResult};

use weft_net::counters::Snapshot;
use weft_net::faults::FaultConfig;
use weft_net::pool::{Pool, Timeouts};
use weft_net::transport::Bulk;

/// How a client is set up.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Identity sent with namespace requests.
    pub credentials: Credentials,
    /// Connect and request timeouts.
    pub timeouts: Timeouts,
    /// Injected faults (tests and benchmarks only; off unless
    /// [`set_process_faults`] was called).
    pub faults: FaultConfig,
    /// Use the client-driven multi-step namespace operations instead of
    /// the servers' aggregate ones (one request each). Default: false, or
    /// `WEFT_CLIENT_DRIVEN=1` in the environment.
    pub client_driven: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            credentials: process_credentials(),
            timeouts: Timeouts::default(),
            faults: process_faults(),
            client_driven: std::env::var("WEFT_CLIENT_DRIVEN").is_ok_and(|v| v == "1"),
        }
    }
}

/// Faults injected by every client of this process made with default
/// options; set only by [`set_process_faults`].
static PROCESS_FAULTS: OnceLock<FaultConfig> = OnceLock::new();

/// Makes every client this process creates with default options inject
/// `faults`: the explicit switch behind `weft --faults SPEC` (tests and
/// benchmarks). Libraries (the mount, the C API, MPI-IO) never call it, so
/// a production client injects faults only when its program asks. Only the
/// first call counts; returns whether this one did.
pub fn set_process_faults(faults: FaultConfig) -> bool {
    PROCESS_FAULTS.set(faults).is_ok()
}

/// The faults [`set_process_faults`] set (none by default). `WEFT_FAULTS`
/// in the environment is not obeyed: a client that sees it says so once.
pub fn process_faults() -> FaultConfig {
    static WARNED: Once = Once::new();
    if std::env::var_os("WEFT_FAULTS").is_some() {
        WARNED.call_once(|| {
            tracing::warn!("WEFT_FAULTS is ignored: fault injection is enabled only by `weft --faults SPEC` or the API")
        });
    }
    PROCESS_FAULTS.get().cloned().unwrap_or_default()
}

pub use weft_net::auth::process_credentials;

/// State shared by every view of one client.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) pool: Pool,
    pub(crate) placement: AtomicU32,
    pub(crate) client_driven: bool,
    /// Capabilities held, when data requests need them.
    pub(crate) capabilities: Option<crate::capabilities::Cache>,
}

/// A Weft client. Cheap to clone; clones share connections and counters.
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
    pub(crate) credentials: Arc<Credentials>,
}

/// Attributes of an object as a user sees them (sizes gathered from datafiles).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Handle.
    pub handle: Handle,
    /// Kind (metafile = regular file).
    pub kind: ObjectKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Logical size (files), target length (symlinks), entry count (directories).
    pub size: u64,
    /// Access time (ns).
    pub atime_ns: i64,
    /// Modification time (ns).
    pub mtime_ns: i64,
    /// Change time (ns).
    pub ctime_ns: i64,
    /// Layout of a file.
    pub layout: Option<FileLayout>,
    /// Target of a symlink.
    pub symlink_target: Option<String>,
    /// Parent of a directory.
    pub parent: Option<Handle>,
    /// Device number of a device node (0 otherwise).
    pub rdev: u64,
}

/// Space of the whole file system and of each server.
///
/// Servers whose storage shares one file system (same `storage_device`)
/// count it once in the totals: its total, and its free bytes as the
/// least any of them reports (the space a writer can still use there,
/// net of every server's metadata reserve). Servers on file systems of
/// their own add up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsStatus {
    /// Per server, in id order.
    pub servers: Vec<ServerStatus>,
    /// Sum of total bytes, each file system once.
    pub bytes_total: u64,
    /// Sum of free bytes, each file system once.
    pub bytes_free: u64,
    /// Sum of stored objects.
    pub objects: u64,
}

/// Total and free bytes over `servers`, each storage device once (see [`FsStatus`]).
pub fn space_counting_each_device_once(servers: &[ServerStatus]) -> (u64, u64) {
    let mut devices: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for server in servers {
        let (total, free) = devices.entry(server.storage_device).or_insert((0, u64::MAX));
        *total = (*total).max(server.bytes_total);
        *free = (*free).min(server.bytes_free);
    }
    devices.values().fold((0, 0), |(total, free), (t, f)| (total + t, free + f))
}

impl Client {
    /// Creates a client for the file system described by `config`. Connects lazily.
    pub fn new(config: Config, options: ClientOptions) -> WeftResult<Client> {
        let pool = Pool::new(&config, options.timeouts)?;
        pool.faults.set(options.faults);
        let seed = std::process::id().wrapping_mul(2654435761);
        let capabilities = crate::capabilities::cache_for(&config);
        let shared = Arc::new(Shared {
            config,
            pool,
            placement: AtomicU32::new(seed),
            client_driven: options.client_driven,
            capabilities,
        });
        Ok(Client { shared, credentials: Arc::new(options.credentials) })
    }

    /// A view of this client acting as another user (shares connections).
    pub fn as_user(&self, credentials: Credentials) -> Client {
        Client { shared: self.shared.clone(), credentials: Arc::new(credentials) }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The credentials this view sends.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// A copy of the request counters.
    pub fn counters(&self) -> Snapshot {
        self.shared.pool.counters.snapshot()
    }

    /// Zeroes the request counters.
    pub fn reset_counters(&self) {
        self.shared.pool.counters.reset()
    }

    /// Changes the injected faults (tests).
    pub fn set_faults(&self, faults: FaultConfig) {
        self.shared.pool.faults.set(faults)
    }

    pub(crate) fn cred(&self) -> Credentials {
        (*self.credentials).clone()
    }

    /// The server storing `handle`.
    pub fn server_of(&self, handle: Handle) -> WeftResult<u32> {
        self.shared.config.server_of_handle(handle).ok_or(ErrorCode::Stale)
    }

    /// Sends one request to one server.
    pub async fn call(&self, server_id: u32, request: Request) -> ReplyResult {
        self.shared.pool.call(server_id, request, Bulk::None).await
    }

    pub(crate) async fn call_bulk(&self, server_id: u32, request: Request, bulk: Bulk<'_>) -> ReplyResult {
        self.shared.pool.call(server_id, request, bulk).await
    }

    /// Sends one request to the server storing `handle`.
    pub(crate) async fn call_at(&self, handle: Handle, request: Request) -> ReplyResult {
        self.call(self.server_of(handle)?, request).await
    }

    /// Checks every server answers; returns per-server results.
    pub async fn ping_all(&self) -> Vec<(u32, WeftResult<std::time::Duration>)> {
        let ids: Vec<u32> = (0..self.shared.pool.server_count()).collect();
        join_all(ids.into_iter().map(|id| async move {
            let start = std::time::Instant::now();
            let result = self.call(id, Request::Ping).await.map(|_| start.elapsed());
            (id, result)
        }))
        .await
    }

    /// Raw attributes of one object (one request, no size gathering).
    pub async fn getattr_raw(&self, handle: Handle) -> WeftResult<Attributes> {
        match self.call_at(handle, Request::GetAttr { handle }).await? {
            Reply::Attributes(attrs) => Ok(attrs),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Whether namespace operations use the client-driven path.
    pub fn client_driven(&self) -> bool {
        self.shared.client_driven
    }

    /// Attributes with the logical size of a file: one request (the
    /// object's server gathers the sizes), or client-driven 1 + one per
    /// data server.
    pub async fn stat_handle(&self, handle: Handle) -> WeftResult<Stat> {
        if !self.shared.client_driven {
            return match self.call_at(handle, Request::StatFile { handle }).await? {
                Reply::Stat { attributes, sizes } => stat_from_reply(attributes, sizes),
                _ => Err(ErrorCode::Protocol),
            };
        }
        let attrs = self.getattr_raw(handle).await?;
        let mut stats = self.stats_from_attributes(vec![attrs]).await?;
        Ok(stats.remove(0))
    }

    /// Attributes of entry `name` of `parent`, not following a symlink:
    /// one request when the object is stored on the parent's server (the
    /// parent's server looks the name up and stats it, `StatEntry`); two
    /// otherwise. Client-driven: a lookup, then [`Client::stat_handle`].
    pub async fn lstat_in(&self, parent: Handle, name: &str) -> WeftResult<Stat> {
        match self.stat_entry(parent, name).await? {
            Ok(stat) => Ok(stat),
            Err((handle, _)) => self.stat_handle(handle).await,
        }
    }

    /// One `StatEntry` request (aggregate) or a lookup (client-driven):
    /// the stat, or the entry when the caller must continue from it.
    pub(crate) async fn stat_entry(
        &self,
        parent: Handle,
        name: &str,
    ) -> WeftResult<Result<Stat, (Handle, ObjectKind)>> {
        weft_proto::message::validate_name(name)?;
        if self.shared.client_driven {
            return Ok(Err(self.lookup(parent, name).await?));
        }
        let request = Request::StatEntry { cred: self.cred(), parent, name: name.to_string() };
        match self.call_at(parent, request).await? {
            Reply::Stat { attributes, sizes } => Ok(Ok(stat_from_reply(attributes, sizes)?)),
            Reply::Entry { handle, kind } => Ok(Err((handle, kind))),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Local sizes of datafiles, batched per server, one request per server.
    pub(crate) async fn datafile_stats(&self, handles: &[Handle]) -> WeftResult<BTreeMap<Handle, DatafileStat>> {
        let mut by_server: BTreeMap<u32, Vec<Handle>> = BTreeMap::new();
        for handle in handles {
            by_server.entry(self.server_of(*handle)?).or_default().push(*handle);
        }
        let replies = join_all(by_server.into_iter().map(|(server, handles)| async move {
            let reply = self.call(server, Request::DatafileSizes { handles: handles.clone() }).await;
            (handles, reply)
        }))
        .await;
        let mut out = BTreeMap::new();
        for (handles, reply) in replies {
            match reply? {
                Reply::Sizes(sizes) if sizes.len() == handles.len() => {
                    for (handle, stat) in handles.into_iter().zip(sizes) {
                        out.insert(handle, stat?);
                    }
                }
                _ => return Err(ErrorCode::Protocol),
            }
        }
        Ok(out)
    }

    /// Turns raw attributes into user-visible stats, gathering file sizes
    /// with one batched request per data server for all files together.
    pub(crate) async fn stats_from_attributes(&self, all: Vec<Attributes>) -> WeftResult<Vec<Stat>> {
        let datafiles: Vec<Handle> =
            all.iter().filter_map(|a| a.layout.as_ref()).flat_map(|l| l.datafiles.iter().copied()).collect();
        let sizes = if datafiles.is_empty() { BTreeMap::new() } else { self.datafile_stats(&datafiles).await? };
        Ok(all.into_iter().map(|attrs| to_stat(attrs, &sizes)).collect())
    }

    /// Space of every server: one request to one server (which answers
    /// from its composed status table), or client-driven one per server.
    pub async fn statfs(&self) -> WeftResult<FsStatus> {
        let servers = if self.shared.client_driven { self.statfs_each().await? } else { self.statfs_one().await? };
        let (bytes_total, bytes_free) = space_counting_each_device_once(&servers);
        Ok(FsStatus { bytes_total, bytes_free, objects: servers.iter().map(|s| s.objects).sum(), servers })
    }

    async fn statfs_one(&self) -> WeftResult<Vec<ServerStatus>> {
        let count = self.shared.pool.server_count();
        let first = self.shared.placement.fetch_add(1, Ordering::Relaxed) % count.max(1);
        let mut last = ErrorCode::Unreachable;
        // Any server can answer; try the next one if the chosen one is down.
        for offset in 0..count {
            match self.call((first + offset) % count, Request::StatFsAll).await {
                Ok(Reply::StatusTable(servers)) => return Ok(servers),
                Ok(_) => return Err(ErrorCode::Protocol),
                Err(code) => last = code,
            }
        }
        Err(last)
    }

    async fn statfs_each(&self) -> WeftResult<Vec<ServerStatus>> {
        let ids: Vec<u32> = (0..self.shared.pool.server_count()).collect();
        let replies = join_all(ids.into_iter().map(|id| self.call(id, Request::StatFs))).await;
        let mut servers = Vec::new();
        for reply in replies {
            match reply? {
                Reply::Status(status) => servers.push(status),
                _ => return Err(ErrorCode::Protocol),
            }
        }
        Ok(servers)
    }

    /// Picks the next server of `candidates` for placement (rotating from a
    /// per-process random start).
    pub(crate) fn place(&self, candidates: &[u32]) -> usize {
        let turn = self.shared.placement.fetch_add(1, Ordering::Relaxed);
        turn as usize % candidates.len()
    }
}

/// A `Stat` reply (attributes and one size per datafile, in layout order).
fn stat_from_reply(attributes: Attributes, sizes: Vec<DatafileStat>) -> WeftResult<Stat> {
    let datafiles = attributes.layout.as_ref().map(|l| l.datafiles.clone()).unwrap_or_default();
    if datafiles.len() != sizes.len() {
        return Err(ErrorCode::Protocol);
    }
    Ok(to_stat(attributes, &datafiles.into_iter().zip(sizes).collect()))
}

pub(crate) fn to_stat(attrs: Attributes, sizes: &BTreeMap<Handle, DatafileStat>) -> Stat {
    let mut mtime_ns = attrs.mtime_ns;
    let size = match (&attrs.layout, attrs.kind) {
        (Some(layout), _) => {
            let stats: Vec<DatafileStat> = layout
                .datafiles
                .iter()
                .map(|h| sizes.get(h).copied().unwrap_or(DatafileStat { local_size: 0, mtime_ns: 0 }))
                .collect();
            // Data written after the last attribute change moves mtime;
            // otherwise the metafile's mtime stands, so an explicit
            // utimens to an older time (tar, cp -p, rsync -t) sticks.
            let data_mtime_ns = stats.iter().map(|s| s.mtime_ns).max().unwrap_or(0);
            if data_mtime_ns > attrs.ctime_ns {
                mtime_ns = data_mtime_ns;
            }
            let locals: Vec<u64> = stats.iter().map(|s| s.local_size).collect();
            layout.distribution.file_size(&locals)
        }
        (None, ObjectKind::Symlink) => attrs.symlink_target.as_ref().map_or(0, |t| t.len() as u64),
        (None, ObjectKind::Directory) => attrs.entry_count,
        (None, _) => attrs.local_size,
    };
    Stat {
        handle: attrs.handle,
        kind: attrs.kind,
        mode: attrs.mode,
        uid: attrs.uid,
        gid: attrs.gid,
        size,
        atime_ns: attrs.atime_ns,
        mtime_ns,
        ctime_ns: attrs.ctime_ns.max(mtime_ns),
        layout: attrs.layout,
        symlink_target: attrs.symlink_target,
        parent: attrs.parent,
        rdev: attrs.rdev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server_id: u32, storage_device: u64, bytes_total: u64, bytes_free: u64) -> ServerStatus {
        ServerStatus { server_id, storage_device, bytes_total, bytes_free, ..Default::default() }
    }

    #[test]
    fn a_shared_disk_counts_once_and_separate_disks_add_up() {
        // Servers 0-2 share device 7 (rows taken a moment apart); server 3 has its own disk.
        let servers = [row(0, 7, 100, 40), row(1, 7, 100, 38), row(2, 7, 100, 41), row(3, 9, 50, 10)];
        assert_eq!(space_counting_each_device_once(&servers), (150, 48));
        assert_eq!(space_counting_each_device_once(&[]), (0, 0));
    }
}
