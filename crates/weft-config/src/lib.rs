//! One TOML file describes a whole Weft file system: its identity, the
//! servers and the targets they host, the default distribution, durability
//! and thread counts. This crate parses it (errors name file, line and
//! field), validates it, routes handles to servers, and generates new ones.
#![warn(missing_docs)]

mod key;

pub use key::{create_key, load_key, KeyError};

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_proto::{Distribution, Handle};

/// A whole file-system configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Identity of the file system.
    pub filesystem: FilesystemSection,
    /// Default distribution of new files.
    #[serde(default)]
    pub distribution: DistributionSection,
    /// Durability settings.
    #[serde(default)]
    pub durability: DurabilitySection,
    /// Thread counts.
    #[serde(default)]
    pub threads: ThreadsSection,
    /// Server-to-server cooperation: trees, status exchange, pools.
    #[serde(default)]
    pub collectives: CollectivesSection,
    /// Authentication of clients and servers.
    #[serde(default)]
    pub auth: AuthSection,
    /// The servers.
    #[serde(rename = "server")]
    pub servers: Vec<ServerSection>,
    /// The targets (storage locations) and the server hosting each.
    #[serde(rename = "target", default)]
    pub targets: Vec<TargetSection>,
}

/// `[filesystem]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemSection {
    /// Human-readable name.
    pub name: String,
    /// Numeric id.
    pub id: u32,
}

/// `[distribution]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributionSection {
    /// Strip size in bytes.
    #[serde(default = "default_strip_bytes")]
    pub strip_bytes: u64,
    /// Data servers per file; 0 means all of them.
    #[serde(default)]
    pub stripe_count: u32,
}

fn default_strip_bytes() -> u64 {
    64 * 1024
}

impl Default for DistributionSection {
    fn default() -> Self {
        DistributionSection { strip_bytes: default_strip_bytes(), stripe_count: 0 }
    }
}

/// When metadata reaches stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataSync {
    /// Every namespace change is durable before its reply (group commit).
    Commit,
    /// No fsync of metadata: a crash may lose acknowledged changes. For
    /// job-scoped scratch file systems only.
    None,
}

/// `[durability]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurabilitySection {
    /// Metadata durability.
    #[serde(default = "default_metadata_sync")]
    pub metadata_sync: MetadataSync,
    /// Most operations one group commit takes from the queue.
    #[serde(default = "default_commit_batch")]
    pub commit_batch_max: u32,
    /// Space each server keeps allocated (real blocks) on its storage file
    /// system for its metadata: half for the write-ahead log, half as
    /// headroom behind the key/value store, so removes, truncates, renames
    /// and setattrs still commit on a full disk (see ARCHITECTURE.md, "A
    /// full disk"). Data writes and creates are refused with ENOSPC before
    /// they would need it.
    #[serde(default = "default_metadata_reserve")]
    pub metadata_reserve_bytes: u64,
}

fn default_metadata_sync() -> MetadataSync {
    MetadataSync::Commit
}

fn default_commit_batch() -> u32 {
    512
}

fn default_metadata_reserve() -> u64 {
    weft_proto::limits::METADATA_RESERVE_BYTES_DEFAULT
}

impl Default for DurabilitySection {
    fn default() -> Self {
        DurabilitySection {
            metadata_sync: default_metadata_sync(),
            commit_batch_max: default_commit_batch(),
            metadata_reserve_bytes: default_metadata_reserve(),
        }
    }
}

/// `[threads]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadsSection {
    /// Async network worker threads per server.
    #[serde(default = "default_network_threads")]
    pub network: u32,
    /// Threads doing positioned file I/O per server.
    #[serde(default = "default_io_threads")]
    pub io: u32,
}

fn default_network_threads() -> u32 {
    2
}

fn default_io_threads() -> u32 {
    8
}

impl Default for ThreadsSection {
    fn default() -> Self {
        ThreadsSection { network: default_network_threads(), io: default_io_threads() }
    }
}

/// `[collectives]`: how servers cooperate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectivesSection {
    /// Fan-out degree k of server trees (a collective over P servers takes
    /// ⌈log_k P⌉ forwarding steps).
    #[serde(default = "default_tree_fanout")]
    pub tree_fanout: u32,
    /// Period of the status exchange (recursive doubling), milliseconds.
    #[serde(default = "default_status_period_ms")]
    pub status_period_ms: u64,
    /// A server whose status has not advanced for this long is reported
    /// down, milliseconds.
    #[serde(default = "default_status_grace_ms")]
    pub status_grace_ms: u64,
    /// Datafile handles one precreate-pool refill reserves on a data server
    /// (a pool is refilled when it holds fewer than this many).
    #[serde(default = "default_pool_batch")]
    pub pool_batch: u32,
}

fn default_tree_fanout() -> u32 {
    2
}

fn default_status_period_ms() -> u64 {
    500
}

fn default_status_grace_ms() -> u64 {
    3000
}

fn default_pool_batch() -> u32 {
    256
}

impl Default for CollectivesSection {
    fn default() -> Self {
        CollectivesSection {
            tree_fanout: default_tree_fanout(),
            status_period_ms: default_status_period_ms(),
            status_grace_ms: default_status_grace_ms(),
            pool_batch: default_pool_batch(),
        }
    }
}

/// How connections prove who opened them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Servers and clients prove knowledge of the file-system key: a
    /// client that can read the key file may act as any user, so the key
    /// suits single-user or job-scoped file systems.
    Key,
    /// Servers use the key; clients present a MUNGE credential, which binds
    /// each connection to the uid and gid of the process that opened it.
    /// Holders of the key are still accepted (administration, root FUSE
    /// daemons).
    Munge,
    /// No authentication at all: any process reaching a port may do
    /// anything. Only when configured explicitly; servers log a warning.
    None,
}

/// `[auth]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// The mode.
    #[serde(default = "default_auth_mode")]
    pub mode: AuthMode,
    /// The file-system key: a file readable by its owner only (0600), at
    /// least `AUTH_KEY_BYTES_MIN` bytes. Required unless `mode = "none"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// Uids whose connections may send requests on behalf of other users
    /// (a root FUSE daemon with `allow_other` runs as 0, which is always
    /// allowed; a gateway). Connections of other uids must carry their own
    /// uid in every request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_uids: Vec<u32>,
    /// MUNGE mode: the munged socket (default: munge's own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub munge_socket: Option<PathBuf>,
}

fn default_auth_mode() -> AuthMode {
    AuthMode::Key
}

impl Default for AuthSection {
    fn default() -> Self {
        AuthSection { mode: default_auth_mode(), key_file: None, proxy_uids: Vec::new(), munge_socket: None }
    }
}

/// What a server does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Holds directories and metafiles.
    Metadata,
    /// Holds datafiles.
    Data,
}

/// One `[[server]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Server id (0-based, unique).
    pub id: u32,
    /// Listen address, e.g. `127.0.0.1:7101`.
    pub address: String,
    /// Roles.
    #[serde(default = "default_roles")]
    pub roles: Vec<Role>,
    /// Storage directory.
    pub storage: PathBuf,
    /// Capacity limit in bytes of this server's datafiles: when set, the
    /// server reports it as its total space (free = limit − bytes its
    /// datafiles occupy), placement weighs it, and writes fail with ENOSPC
    /// once the limit is reached. Unset: the local file system's space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
}

fn default_roles() -> Vec<Role> {
    vec![Role::Metadata, Role::Data]
}

/// One `[[target]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    /// Target id: the top 16 bits of the handles stored there.
    pub id: u16,
    /// Server hosting it.
    pub server: u32,
}

/// A configuration error, naming where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// File.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or a field of the wrong type, missing or unknown.
    #[error("{file}: {message}")]
    Parse {
        /// File.
        file: String,
        /// Parser message (includes line and column).
        message: String,
    },
    /// A field has a value that makes no sense.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Invalid {
        /// File.
        file: String,
        /// 1-based line, 0 if unknown.
        line: usize,
        /// Dotted field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { file: file.clone(), source })?;
        Config::parse(&text, &file)
    }

    /// Parses and validates configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text)
            .map_err(|err| ConfigError::Parse { file: file.to_string(), message: err.to_string() })?;
        let config = config.with_default_targets();
        config.validate().map_err(|(field, message)| ConfigError::Invalid {
            file: file.to_string(),
            line: locate_field(text, &field),
            field,
            message,
        })?;
        Ok(config)
    }

    fn with_default_targets(mut self) -> Config {
        if self.targets.is_empty() {
            self.targets = self.servers.iter().map(|s| TargetSection { id: s.id as u16, server: s.id }).collect();
        }
        self
    }

    /// Checks cross-field rules; the error names a dotted field path.
    fn validate(&self) -> Result<(), (String, String)> {
        if self.servers.is_empty() {
            return Err(("server".into(), "at least one [[server]] is required".into()));
        }
        let mut ids = HashSet::new();
        for (index, server) in self.servers.iter().enumerate() {
            let field = |name: &str| format!("server[{index}].{name}");
            if !ids.insert(server.id) {
                return Err((field("id"), format!("duplicate server id {}", server.id)));
            }
            if server.id as usize >= self.servers.len() {
                return Err((field("id"), "server ids must be 0..N-1".into()));
            }
            if server.address.parse::<SocketAddr>().is_err() {
                return Err((field("address"), format!("`{}` is not an ip:port address", server.address)));
            }
            if server.roles.is_empty() {
                return Err((field("roles"), "a server needs at least one role".into()));
            }
        }
        let mut target_ids = HashSet::new();
        for (index, target) in self.targets.iter().enumerate() {
            if !target_ids.insert(target.id) {
                return Err((format!("target[{index}].id"), format!("duplicate target id {}", target.id)));
            }
            if !ids.contains(&target.server) {
                return Err((format!("target[{index}].server"), format!("no server with id {}", target.server)));
            }
        }
        if !target_ids.contains(&0) {
            return Err(("target".into(), "target 0 (which holds the root directory) must exist".into()));
        }
        if self.data_servers().is_empty() {
            return Err(("server.roles".into(), "no server has the data role".into()));
        }
        if self.metadata_servers().is_empty() {
            return Err(("server.roles".into(), "no server has the metadata role".into()));
        }
        let d = &self.distribution;
        if !(weft_proto::limits::STRIP_BYTES_MIN..=weft_proto::limits::STRIP_BYTES_MAX).contains(&d.strip_bytes) {
            return Err(("distribution.strip_bytes".into(), "out of range".into()));
        }
        if d.stripe_count as usize > self.data_servers().len() {
            return Err(("distribution.stripe_count".into(), "more than the number of data servers".into()));
        }
        let c = &self.collectives;
        if !(2..=weft_proto::limits::TREE_FANOUT_MAX).contains(&c.tree_fanout) {
            return Err((
                "collectives.tree_fanout".into(),
                format!("must be 2..={}", weft_proto::limits::TREE_FANOUT_MAX),
            ));
        }
        if c.status_period_ms < 10 {
            return Err(("collectives.status_period_ms".into(), "must be at least 10".into()));
        }
        if c.status_grace_ms < 2 * c.status_period_ms {
            return Err(("collectives.status_grace_ms".into(), "must be at least twice status_period_ms".into()));
        }
        if !(1..=65_536).contains(&c.pool_batch) {
            return Err(("collectives.pool_batch".into(), "must be 1..=65536".into()));
        }
        let reserve = self.durability.metadata_reserve_bytes;
        let reserve_range =
            weft_proto::limits::METADATA_RESERVE_BYTES_MIN..=weft_proto::limits::METADATA_RESERVE_BYTES_MAX;
        if !reserve_range.contains(&reserve) {
            return Err((
                "durability.metadata_reserve_bytes".into(),
                format!("must be {}..={}", reserve_range.start(), reserve_range.end()),
            ));
        }
        if self.auth.mode != AuthMode::None && self.auth.key_file.is_none() {
            return Err((
                "auth.key_file".into(),
                "a key file is required (`weft genconfig` makes one); mode = \"none\" runs without authentication"
                    .into(),
            ));
        }
        if self.threads.network == 0 || self.threads.io == 0 {
            return Err(("threads".into(), "thread counts must be at least 1".into()));
        }
        Ok(())
    }

    /// The server with this id.
    pub fn server(&self, id: u32) -> Option<&ServerSection> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// The server hosting a target.
    pub fn server_of_target(&self, target_id: u16) -> Option<u32> {
        self.targets.iter().find(|t| t.id == target_id).map(|t| t.server)
    }

    /// The server storing an object.
    pub fn server_of_handle(&self, handle: Handle) -> Option<u32> {
        self.server_of_target(handle.target_id())
    }

    /// Targets hosted by a server, in id order.
    pub fn targets_of_server(&self, server_id: u32) -> Vec<u16> {
        let mut ids: Vec<u16> = self.targets.iter().filter(|t| t.server == server_id).map(|t| t.id).collect();
        ids.sort_unstable();
        ids
    }

    /// The first target of a server (where it creates new objects).
    pub fn primary_target(&self, server_id: u32) -> Option<u16> {
        self.targets_of_server(server_id).first().copied()
    }

    /// Servers with the data role, in id order.
    pub fn data_servers(&self) -> Vec<u32> {
        self.servers_with(Role::Data)
    }

    /// Servers with the metadata role, in id order.
    pub fn metadata_servers(&self) -> Vec<u32> {
        self.servers_with(Role::Metadata)
    }

    fn servers_with(&self, role: Role) -> Vec<u32> {
        let mut ids: Vec<u32> = self.servers.iter().filter(|s| s.roles.contains(&role)).map(|s| s.id).collect();
        ids.sort_unstable();
        ids
    }

    /// The default distribution, resolving `stripe_count = 0` to all data servers.
    pub fn default_distribution(&self) -> Distribution {
        let count = match self.distribution.stripe_count {
            0 => self.data_servers().len() as u32,
            n => n,
        };
        Distribution { strip_bytes: self.distribution.strip_bytes, stripe_count: count }
    }

    /// Serializes to TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serializes")
    }
}

/// Options of `weft genconfig`.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Number of servers.
    pub servers: u32,
    /// Host address.
    pub host: String,
    /// First port; server i listens on `base_port + i`.
    pub base_port: u16,
    /// Root directory; server i stores under `root/server-i`.
    pub root: PathBuf,
    /// Metadata durability.
    pub metadata_sync: MetadataSync,
}

/// Where [`generate`] names the key file: `weft.key` under the root.
pub fn default_key_file(root: &Path) -> PathBuf {
    root.join("weft.key")
}

/// Generates a configuration: every server both metadata and data, one
/// target each, key authentication with the key file
/// [`default_key_file`] (which the caller creates: [`create_key`]).
pub fn generate(options: &GenOptions) -> Config {
    let servers = (0..options.servers)
        .map(|id| ServerSection {
            id,
            address: format!("{}:{}", options.host, options.base_port as u32 + id),
            roles: default_roles(),
            storage: options.root.join(format!("server-{id}")),
            capacity_bytes: None,
        })
        .collect();
    let targets = (0..options.servers).map(|id| TargetSection { id: id as u16, server: id }).collect();
    Config {
        filesystem: FilesystemSection { name: "weft".into(), id: 1 },
        distribution: DistributionSection::default(),
        durability: DurabilitySection { metadata_sync: options.metadata_sync, ..DurabilitySection::default() },
        threads: ThreadsSection::default(),
        collectives: CollectivesSection::default(),
        auth: AuthSection { key_file: Some(default_key_file(&options.root)), ..AuthSection::default() },
        servers,
        targets,
    }
}

/// Finds the 1-based line of a dotted field like `server[2].address` (0 if unknown).
fn locate_field(text: &str, field: &str) -> usize {
    let (table, index, key) = split_field(field);
    let mut seen = 0usize;
    let mut inside = table.is_none();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(table) = table {
            if trimmed == format!("[[{table}]]") || trimmed == format!("[{table}]") {
                inside = index.is_none_or(|i| i == seen);
                seen += 1;
                continue;
            }
            if trimmed.starts_with('[') {
                inside = false;
            }
        }
        let key_matches = |k: &str| trimmed.starts_with(k) && trimmed[k.len()..].trim_start().starts_with('=');
        if inside && key.is_none_or(key_matches) {
            return number + 1;
        }
    }
    0
}

fn split_field(field: &str) -> (Option<&str>, Option<usize>, Option<&str>) {
    let (head, key) = match field.split_once('.') {
        Some((head, key)) => (head, Some(key)),
        None => (field, None),
    };
    match head.split_once('[') {
        Some((table, rest)) => (Some(table), rest.trim_end_matches(']').parse().ok(), key),
        None => (Some(head), None, key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        generate(&GenOptions {
            servers: 3,
            host: "127.0.0.1".into(),
            base_port: 7100,
            root: "/tmp/w".into(),
            metadata_sync: MetadataSync::Commit,
        })
        .to_toml()
    }

    #[test]
    fn generated_config_round_trips() {
        let text = sample();
        let config = Config::parse(&text, "x.toml").unwrap();
        assert_eq!(config.servers.len(), 3);
        assert_eq!(config.server(2).unwrap().address, "127.0.0.1:7102");
        assert_eq!(config.default_distribution().stripe_count, 3);
        assert_eq!(config.server_of_handle(Handle::new(2, 99).unwrap()), Some(2));
    }

    #[test]
    fn bad_address_names_file_line_and_field() {
        let text = sample().replacen("127.0.0.1:7101", "nonsense", 1);
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        let line = text.lines().position(|l| l.contains("nonsense")).unwrap() + 1;
        assert!(err.starts_with(&format!("x.toml:{line}: field `server[1].address`")), "{err}");
    }

    #[test]
    fn unknown_field_is_reported_with_line() {
        let text = sample().replacen("[filesystem]", "[filesystem]\nbogus = 1", 1);
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(err.contains("x.toml") && err.contains("bogus") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn missing_root_target_rejected() {
        let text = sample().replace("id = 0\nserver = 0", "id = 9\nserver = 0");
        let err = Config::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(err.contains("target"), "{err}");
    }

    #[test]
    fn collectives_settings_parse_and_are_checked() {
        let defaults = Config::parse(&sample(), "x.toml").unwrap().collectives;
        assert_eq!(defaults, CollectivesSection::default());
        assert_eq!((defaults.tree_fanout, defaults.status_period_ms, defaults.status_grace_ms), (2, 500, 3000));
        let text = sample()
            .replace("tree_fanout = 2", "tree_fanout = 4")
            .replace("status_period_ms = 500", "status_period_ms = 200")
            .replace("status_grace_ms = 3000", "status_grace_ms = 1000")
            .replace("pool_batch = 256", "pool_batch = 64");
        let config = Config::parse(&text, "x.toml").unwrap();
        assert_eq!(config.collectives.tree_fanout, 4);
        assert_eq!(config.collectives.pool_batch, 64);
        let bad = text.replace("tree_fanout = 4", "tree_fanout = 1");
        let err = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(err.contains("collectives.tree_fanout"), "{err}");
        let bad = text.replace("status_grace_ms = 1000", "status_grace_ms = 300");
        let err = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(err.contains("collectives.status_grace_ms"), "{err}");
    }

    #[test]
    fn metadata_reserve_has_a_default_and_a_checked_range() {
        let config = Config::parse(&sample(), "x.toml").unwrap();
        assert_eq!(config.durability.metadata_reserve_bytes, weft_proto::limits::METADATA_RESERVE_BYTES_DEFAULT);
        let default_line = format!("metadata_reserve_bytes = {}", weft_proto::limits::METADATA_RESERVE_BYTES_DEFAULT);
        assert!(sample().contains(&default_line), "genconfig writes the reserve out");
        let with = |bytes: u64| sample().replace(&default_line, &format!("metadata_reserve_bytes = {bytes}"));
        let config = Config::parse(&with(8 << 20), "x.toml").unwrap();
        assert_eq!(config.durability.metadata_reserve_bytes, 8 << 20);
        let err = Config::parse(&with(1 << 20), "x.toml").unwrap_err().to_string();
        assert!(err.contains("durability.metadata_reserve_bytes"), "{err}");
    }

    #[test]
    fn auth_needs_a_key_file_unless_none() {
        let config = Config::parse(&sample(), "x.toml").unwrap();
        assert_eq!(config.auth.mode, AuthMode::Key);
        assert_eq!(config.auth.key_file.as_deref(), Some(Path::new("/tmp/w/weft.key")));
        let without = sample().replace("key_file = \"/tmp/w/weft.key\"", "");
        let err = Config::parse(&without, "x.toml").unwrap_err().to_string();
        assert!(err.contains("auth.key_file"), "{err}");
        let none = without.replace("mode = \"key\"", "mode = \"none\"");
        assert_eq!(Config::parse(&none, "x.toml").unwrap().auth.mode, AuthMode::None);
        let munge = sample().replace("mode = \"key\"", "mode = \"munge\"\nproxy_uids = [7]");
        let config = Config::parse(&munge, "x.toml").unwrap();
        assert_eq!((config.auth.mode, config.auth.proxy_uids), (AuthMode::Munge, vec![7]));
    }

    #[test]
    fn capacity_limit_is_optional_per_server() {
        let text = sample().replacen(
            "storage = \"/tmp/w/server-1\"",
            "storage = \"/tmp/w/server-1\"\ncapacity_bytes = 1048576",
            1,
        );
        let config = Config::parse(&text, "x.toml").unwrap();
        assert_eq!(config.server(1).unwrap().capacity_bytes, Some(1 << 20));
        assert_eq!(config.server(0).unwrap().capacity_bytes, None);
        assert!(Config::parse(&config.to_toml(), "y.toml").is_ok());
    }
}
