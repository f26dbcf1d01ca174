//! Request counters: requests and bytes per server and per operation kind,
//! readable from the API so tests and benchmarks can show exactly what went
//! over the wire.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Requests and bulk bytes of one (server, kind) pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests sent.
    pub requests: u64,
    /// Bulk bytes moved (both directions).
    pub bytes: u64,
}

/// Counters of one client.
#[derive(Debug, Default)]
pub struct Counters {
    tallies: Mutex<BTreeMap<(u32, &'static str), Tally>>,
}

/// A copy of the counters at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// (server id, request kind) → tally.
    pub tallies: BTreeMap<(u32, &'static str), Tally>,
}

impl Counters {
    /// Records one request.
    pub fn record(&self, server_id: u32, kind: &'static str, bytes: u64) {
        let mut tallies = self.tallies.lock().expect("counters lock");
        let tally = tallies.entry((server_id, kind)).or_default();
        tally.requests += 1;
        tally.bytes += bytes;
    }

    /// Adds bulk bytes to a tally without counting a request.
    pub fn record_bytes(&self, server_id: u32, kind: &'static str, bytes: u64) {
        let mut tallies = self.tallies.lock().expect("counters lock");
        tallies.entry((server_id, kind)).or_default().bytes += bytes;
    }

    /// Copies the counters.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { tallies: self.tallies.lock().expect("counters lock").clone() }
    }

    /// Zeroes the counters.
    pub fn reset(&self) {
        self.tallies.lock().expect("counters lock").clear();
    }
}

impl Snapshot {
    /// All requests.
    pub fn total_requests(&self) -> u64 {
        self.tallies.values().map(|t| t.requests).sum()
    }

    /// Requests of one kind over all servers.
    pub fn requests_of(&self, kind: &str) -> u64 {
        self.tallies.iter().filter(|((_, k), _)| *k == kind).map(|(_, t)| t.requests).sum()
    }

    /// Requests to one server.
    pub fn requests_to(&self, server_id: u32) -> u64 {
        self.tallies.iter().filter(|((s, _), _)| *s == server_id).map(|(_, t)| t.requests).sum()
    }

    /// The difference `self - earlier`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut tallies = BTreeMap::new();
        for (key, tally) in &self.tallies {
            let before = earlier.tallies.get(key).copied().unwrap_or_default();
            let diff = Tally { requests: tally.requests - before.requests, bytes: tally.bytes - before.bytes };
            if diff != Tally::default() {
                tallies.insert(*key, diff);
            }
        }
        Snapshot { tallies }
    }
}
