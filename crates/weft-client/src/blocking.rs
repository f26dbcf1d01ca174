//! A blocking facade over [`Client`] for callers without an async runtime
//! (the C API, the CLI, tests). It owns a small multi-threaded runtime and
//! runs each call to completion on it.

use std::sync::Arc;

use weft_config::Config;
use weft_proto::message::{DirEntry, TimeSet};
use weft_proto::{Distribution, Handle, WeftResult};

use crate::client::{Client, ClientOptions, FsStatus, Stat};
use crate::io::File;
use crate::namespace::CreateOptions;
use weft_net::counters::Snapshot;

/// A client with its own runtime.
#[derive(Clone)]
pub struct BlockingClient {
    runtime: Arc<tokio::runtime::Runtime>,
    client: Client,
}

macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident : $ty:ty)*) -> $ret:ty; )*) => {
        $( $(#[$doc])* pub fn $name(&self $(, $arg: $ty)*) -> $ret {
            self.runtime.block_on(self.client.$name($($arg),*))
        } )*
    };
}

impl BlockingClient {
    /// Creates a client with a runtime of `threads` worker threads.
    pub fn new(config: Config, options: ClientOptions, threads: usize) -> WeftResult<BlockingClient> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("weft-client")
            .enable_all()
            .build()
            .map_err(|e| weft_proto::ErrorCode::from_io(&e))?;
        let client = runtime.block_on(async { Client::new(config, options) })?;
        Ok(BlockingClient { runtime: Arc::new(runtime), client })
    }

    /// The async client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs any future on this client's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A copy of the request counters.
    pub fn counters(&self) -> Snapshot {
        self.client.counters()
    }

    forward! {
        /// See [`Client::stat`].
        fn stat(&self, path: &str) -> WeftResult<Stat>;
        /// See [`Client::lstat`].
        fn lstat(&self, path: &str) -> WeftResult<Stat>;
        /// See [`Client::create`].
        fn create(&self, path: &str, options: CreateOptions) -> WeftResult<File>;
        /// See [`Client::open`].
        fn open(&self, path: &str, wanted: u32) -> WeftResult<File>;
        /// See [`Client::mkdir`].
        fn mkdir(&self, path: &str, mode: u32) -> WeftResult<Handle>;
        /// See [`Client::mkdir_all`].
        fn mkdir_all(&self, path: &str, mode: u32) -> WeftResult<Handle>;
        /// See [`Client::rmdir`].
        fn rmdir(&self, path: &str) -> WeftResult<()>;
        /// See [`Client::unlink`].
        fn unlink(&self, path: &str) -> WeftResult<()>;
        /// See [`Client::rename`].
        fn rename(&self, from: &str, to: &str) -> WeftResult<()>;
        /// See [`Client::symlink`].
        fn symlink(&self, target: &str, path: &str) -> WeftResult<Handle>;
        /// See [`Client::readlink`].
        fn readlink(&self, path: &str) -> WeftResult<String>;
        /// See [`Client::readdir`].
        fn readdir(&self, path: &str) -> WeftResult<Vec<DirEntry>>;
        /// See [`Client::truncate`].
        fn truncate(&self, path: &str, size: u64) -> WeftResult<()>;
        /// See [`Client::chmod`].
        fn chmod(&self, path: &str, mode: u32) -> WeftResult<()>;
        /// See [`Client::chown`].
        fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> WeftResult<()>;
        /// See [`Client::utimens`].
        fn utimens(&self, path: &str, atime: Option<TimeSet>, mtime: Option<TimeSet>) -> WeftResult<()>;
        /// See [`Client::set_default_distribution`].
        fn set_default_distribution(&self, path: &str, distribution: Distribution) -> WeftResult<()>;
        /// See [`Client::statfs`].
        fn statfs(&self) -> WeftResult<FsStatus>;
        /// See [`Client::write_at`].
        fn write_at(&self, file: &File, offset: u64, data: &[u8]) -> WeftResult<()>;
        /// See [`Client::read_at`].
        fn read_at(&self, file: &File, offset: u64, buf: &mut [u8]) -> WeftResult<usize>;
        /// See [`Client::file_size`].
        fn file_size(&self, file: &File) -> WeftResult<u64>;
        /// See [`Client::fsync`].
        fn fsync(&self, file: &File) -> WeftResult<()>;
        /// See [`Client::truncate_file`].
        fn truncate_file(&self, file: &File, size: u64) -> WeftResult<()>;
    }
}
