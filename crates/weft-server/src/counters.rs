//! Server-side I/O counters: requests and data bytes per request kind,
//! datafile syscalls, noncontiguous pieces walked and sieving done.
//!
//! Read through `Request::Counters`, so tests and benchmarks can show what a
//! server did for an access (for example that 8-byte regions did not cost a
//! syscall each). Counts only grow; readers subtract snapshots.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use weft_proto::message::{KindTally, ServerCounters};

/// The counters of one server.
#[derive(Debug, Default)]
pub struct Counters {
    kinds: Mutex<BTreeMap<&'static str, (u64, u64)>>,
    syscalls: AtomicU64,
    regions_visited: AtomicU64,
    sieve_spans: AtomicU64,
    sieve_bytes: AtomicU64,
    collective_forwards: AtomicU64,
    collective_depth_max: AtomicU64,
}

impl Counters {
    /// Counts one request of `kind`.
    pub fn request(&self, kind: &'static str) {
        self.kinds.lock().expect("counters lock").entry(kind).or_default().0 += 1;
    }

    /// Adds data bytes moved by a request of `kind`.
    pub fn bytes(&self, kind: &'static str, bytes: u64) {
        self.kinds.lock().expect("counters lock").entry(kind).or_default().1 += bytes;
    }

    /// Counts `n` datafile `pread`/`pwrite` calls.
    pub fn syscalls(&self, n: u64) {
        self.syscalls.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` noncontiguous pieces walked.
    pub fn regions(&self, n: u64) {
        self.regions_visited.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one sieved span of `bytes`.
    pub fn sieve(&self, bytes: u64) {
        self.sieve_spans.fetch_add(1, Ordering::Relaxed);
        self.sieve_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts one collective forwarded at forwarding step `round`.
    pub fn forward(&self, round: u32) {
        self.collective_forwards.fetch_add(1, Ordering::Relaxed);
        self.collective_depth_max.fetch_max(round as u64, Ordering::Relaxed);
    }

    /// Notes that this server took part in a collective at step `round`.
    pub fn reached(&self, round: u32) {
        self.collective_depth_max.fetch_max(round as u64, Ordering::Relaxed);
    }

    /// A copy for the wire.
    pub fn snapshot(&self) -> ServerCounters {
        let kinds = self.kinds.lock().expect("counters lock");
        ServerCounters {
            kinds: kinds
                .iter()
                .map(|(kind, (requests, bytes))| KindTally { kind: kind.to_string(), requests: *requests, bytes: *bytes })
                .collect(),
            syscalls: self.syscalls.load(Ordering::Relaxed),
            regions_visited: self.regions_visited.load(Ordering::Relaxed),
            sieve_spans: self.sieve_spans.load(Ordering::Relaxed),
            sieve_bytes: self.sieve_bytes.load(Ordering::Relaxed),
            collective_forwards: self.collective_forwards.load(Ordering::Relaxed),
            collective_depth_max: self.collective_depth_max.load(Ordering::Relaxed),
        }
    }
}
