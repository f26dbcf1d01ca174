//! Server-side counters: requests, data bytes and a service-time histogram
//! (log2 µs buckets) per request kind, datafile syscalls, noncontiguous
//! pieces walked, sieving done and collective forwarding.
//!
//! Read through `Request::Counters`, so tests and benchmarks can show what a
//! server did for an access (for example that 8-byte regions did not cost a
//! syscall each). Counts only grow; readers subtract snapshots.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use std::time::Duration;

use weft_proto::message::{KindTally, ServerCounters, LATENCY_BUCKETS};

/// Requests, bytes and latency histogram of one request kind.
#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    bytes: u64,
    latency: [u64; LATENCY_BUCKETS],
}

/// The histogram bucket of a service time (see `KindTally::latency_log2_us`).
pub fn latency_bucket(elapsed: Duration) -> usize {
    let micros = elapsed.as_micros().min(u64::MAX as u128) as u64;
    ((u64::BITS - micros.leading_zeros()) as usize).min(LATENCY_BUCKETS - 1)
}

/// The counters of one server.
#[derive(Debug, Default)]
pub struct Counters {
    kinds: Mutex<BTreeMap<&'static str, Tally>>,
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
        self.kinds.lock().expect("counters lock").entry(kind).or_default().requests += 1;
    }

    /// Adds data bytes moved by a request of `kind`.
    pub fn bytes(&self, kind: &'static str, bytes: u64) {
        self.kinds.lock().expect("counters lock").entry(kind).or_default().bytes += bytes;
    }

    /// Records the service time of one request of `kind`.
    pub fn latency(&self, kind: &'static str, elapsed: Duration) {
        self.finished(kind, 0, elapsed);
    }

    /// Records a finished request of `kind`: the data bytes it moved and
    /// its service time (one lock, as every request ends here).
    pub fn finished(&self, kind: &'static str, bytes: u64, elapsed: Duration) {
        let mut kinds = self.kinds.lock().expect("counters lock");
        let tally = kinds.entry(kind).or_default();
        tally.bytes += bytes;
        tally.latency[latency_bucket(elapsed)] += 1;
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
                .map(|(kind, tally)| KindTally {
                    kind: kind.to_string(),
                    requests: tally.requests,
                    bytes: tally.bytes,
                    latency_log2_us: tally.latency.to_vec(),
                })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2_microseconds() {
        assert_eq!(latency_bucket(Duration::from_nanos(500)), 0);
        assert_eq!(latency_bucket(Duration::from_micros(1)), 1);
        assert_eq!(latency_bucket(Duration::from_micros(3)), 2);
        assert_eq!(latency_bucket(Duration::from_micros(1000)), 10);
        assert_eq!(latency_bucket(Duration::from_secs(3600)), LATENCY_BUCKETS - 1);
        let counters = Counters::default();
        counters.request("stat");
        counters.latency("stat", Duration::from_micros(100));
        counters.latency("stat", Duration::from_micros(5000));
        let tally = counters.snapshot().kinds.remove(0);
        assert_eq!(tally.latency_log2_us.len(), LATENCY_BUCKETS);
        assert_eq!(tally.latency_log2_us.iter().sum::<u64>(), 2);
        assert_eq!(tally.latency_quantile_us(0.5), Some(128));
        assert_eq!(tally.latency_quantile_us(1.0), Some(8192));
    }
}
