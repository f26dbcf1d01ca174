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
//! Each row names the file system the server's storage lives on
//! ([`storage_device`]), so statfs can count a disk that several servers
//! share once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_config::Config;
use weft_proto::message::{Reply, Request, ServerStatus, StatusEntry};

use crate::service::{now_ns, Service};

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

impl Service {
    /// The composed status table, once it knows every server.
    pub fn composed_status(&self) -> Option<Vec<ServerStatus>> {
        self.status_table.composed()
    }

    /// The composed table as statfs answers it: the free space of this
    /// server's own storage file system is measured now, not taken from
    /// rows up to a period old. It replaces the free bytes of every row
    /// naming the same device, except rows at 0 (a server whose metadata
    /// reserve is short refuses writes until its own row says otherwise).
    ///
    /// Why: a row produced just before a fill still shows the space the
    /// fill took, and one produced before a remove does not show what the
    /// remove gave back; the client counts a shared device by its least
    /// free row, so a stale row could report space that is gone (seen: a
    /// fill and the removal after it within one status period). With the
    /// answering server's device measured at the request, statfs is exact
    /// for the disk it shares and at most about a period old for others.
    pub fn composed_status_now(&self) -> Option<Vec<ServerStatus>> {
        let mut table = self.status_table.composed()?;
        if self.bytestreams.capacity().is_some() {
            // Free space is limit − measured usage, measured once per period.
            return Some(table);
        }
        let storage = &self.config.server(self.server_id)?.storage;
        let Ok((total, free)) = crate::service::statvfs(storage) else { return Some(table) };
        let own_free = if self.store.headroom().short() { 0 } else { free };
        let Some(device) = table.iter().find(|s| s.server_id == self.server_id).map(|s| s.storage_device) else {
            return Some(table);
        };
        for row in table.iter_mut().filter(|row| row.storage_device == device) {
            row.bytes_total = total;
            if row.server_id == self.server_id || row.bytes_free > 0 {
                row.bytes_free = if row.server_id == self.server_id { own_free } else { free };
            }
        }
        Some(table)
    }

    /// Free bytes of `server` from the composed table.
    pub fn free_bytes_known(&self, server: u32) -> Option<u64> {
        self.status_table.free_bytes(server)
    }

    /// Whether `server` should be skipped: reported down by status
    /// composition, or the last peer call could not reach it.
    pub fn is_down(&self, server: u32) -> bool {
        server != self.server_id && (self.peers.unreachable(server) || self.status_table.is_down(server))
    }

    /// Answers an exchange step: merges the sender's rows, replies with ours.
    pub fn exchange_status(&self, entries: Vec<StatusEntry>) -> Reply {
        self.status_table.merge(entries);
        Reply::StatusEntries(self.status_table.entries())
    }

    /// One period: own row, then the recursive-doubling steps.
    pub async fn status_round(self: &Arc<Self>) {
        if let Ok(status) = self.status().await {
            self.status_table.merge(vec![StatusEntry { status, produced_ns: now_ns() }]);
        }
        let servers = self.status_table.servers.clone();
        let Some(index) = servers.iter().position(|s| *s == self.server_id) else { return };
        let steps = usize::BITS - (servers.len().max(1) - 1).leading_zeros();
        let step_deadline = self.status_table.period / steps.max(1);
        for step in 0..steps {
            let partner = index ^ (1 << step);
            let Some(partner) = servers.get(partner).copied() else { continue };
            let request = Request::ExchangeStatus { entries: self.status_table.entries() };
            if let Ok(Reply::StatusEntries(entries)) = self.peers.call_within(partner, request, step_deadline).await {
                self.status_table.merge(entries);
            }
        }
    }

    /// Starts status composition.
    pub fn start_status(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                let period = this.status_table.period;
                let started = tokio::time::Instant::now();
                this.status_round().await;
                drop(this);
                tokio::time::sleep_until(started + period).await;
            }
        });
    }
}
