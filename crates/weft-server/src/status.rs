//! Status composition: every server learns every server's status (space,
//! objects, uptime) by recursive doubling, so statfs and placement are
//! answered locally.
//!
//! Each period (`[collectives] status_period_ms`, default 500 ms; the
//! environment variable `WEFT_STATUS_PERIOD_MS` overrides it) a server refreshes
//! its own row and runs ⌈log₂P⌉ exchange steps: in step r it swaps its whole
//! table with the server whose index differs in bit r (skipped when that
//! index does not exist). Rows are merged by their producer's timestamp,
//! so after one period every row is at most one period old. A partner that
//! does not answer within its step's deadline is skipped for that round
//! (its last values stay). A server whose row has not advanced for the
//! grace time (`status_grace_ms`, default 3 s; `WEFT_STATUS_GRACE_MS`
//! overrides) is reported down, and
//! up again as soon as a newer row arrives.
//!
//! The exchange rounds run in [`crate::cluster::Cluster::status_round`];
//! this module holds the table they fill.
//!
//! Each row names the file system the server's storage lives on
//! ([`storage_device`]), so statfs can count a disk that several servers
//! share once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_config::Config;
use weft_proto::message::{ServerStatus, StatusEntry};

struct Row {
    entry: StatusEntry,
    advanced: Instant,
}

/// The composed table of one server.
pub struct StatusTable {
    rows: Mutex<BTreeMap<u32, Row>>,
    servers: Vec<u32>,
    /// Exchange period.
    pub period: Duration,
    /// Time without news after which a server is reported down.
    pub grace: Duration,
    started: Instant,
}

/// The `storage_device` of a status row: a hash of this machine's boot id
/// and the device number of `storage`, so servers on one machine whose
/// storage shares a file system report the same value and servers on
/// different machines (or file systems) different ones. A server with a
/// capacity limit owns its share alone: its id goes into the hash.
pub fn storage_device(storage: &std::path::Path, capacity: Option<u64>, server_id: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let boot_id = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let device = std::fs::metadata(storage).map(|meta| meta.dev()).unwrap_or(u64::MAX);
    let own = capacity.map(|_| server_id as u64 + 1).unwrap_or(0);
    // FNV-1a, 64 bit: stable across builds and processes (unlike std's hasher).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in boot_id.iter().chain(&device.to_le_bytes()).chain(&own.to_le_bytes()) {
        hash = (hash ^ *byte as u64).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// `name` from the environment if set and valid, else `default` milliseconds.
fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

impl StatusTable {
    /// An empty table for the servers of `config`.
    pub fn new(config: &Config) -> StatusTable {
        let mut servers: Vec<u32> = config.servers.iter().map(|s| s.id).collect();
        servers.sort_unstable();
        StatusTable {
            rows: Mutex::new(BTreeMap::new()),
            servers,
            period: env_ms("WEFT_STATUS_PERIOD_MS", config.collectives.status_period_ms),
            grace: env_ms("WEFT_STATUS_GRACE_MS", config.collectives.status_grace_ms).max(Duration::from_millis(100)),
            started: Instant::now(),
        }
    }

    /// Merges rows: a newer row (by producer time) replaces an older one.
    pub fn merge(&self, entries: Vec<StatusEntry>) {
        let mut rows = self.rows.lock().expect("status lock");
        for entry in entries {
            let server = entry.status.server_id;
            if !self.servers.contains(&server) {
                continue;
            }
            let newer = rows.get(&server).is_none_or(|row| row.entry.produced_ns < entry.produced_ns);
            if newer {
                rows.insert(server, Row { entry, advanced: Instant::now() });
            }
        }
    }

    /// All rows.
    pub fn entries(&self) -> Vec<StatusEntry> {
        self.rows.lock().expect("status lock").values().map(|row| row.entry.clone()).collect()
    }

    /// Whether `server` is reported down (no news within the grace time).
    pub fn is_down(&self, server: u32) -> bool {
        match self.rows.lock().expect("status lock").get(&server) {
            Some(row) => row.advanced.elapsed() > self.grace,
            None => self.started.elapsed() > self.grace,
        }
    }

    /// The servers of the configuration, in id order.
    pub fn servers(&self) -> &[u32] {
        &self.servers
    }

    /// Free bytes of `server`, if known.
    pub fn free_bytes(&self, server: u32) -> Option<u64> {
        self.rows.lock().expect("status lock").get(&server).map(|row| row.entry.status.bytes_free)
    }

    /// Every server's last known status, if every server is known.
    pub fn composed(&self) -> Option<Vec<ServerStatus>> {
        let rows = self.rows.lock().expect("status lock");
        if rows.len() != self.servers.len() {
            return None;
        }
        let rows = rows.values().map(|row| {
            let mut status = row.entry.status.clone();
            status.down = row.advanced.elapsed() > self.grace;
            status
        });
        Some(rows.collect())
    }
}
