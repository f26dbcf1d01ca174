//! The client's fault-injection layer against real servers: a failed
//! request, a dropped connection and added delay, each followed by normal
//! service (reconnect without any action by the caller).

use std::time::Instant;

use weft_client::faults::FaultConfig;
use weft_client::{CreateOptions, ErrorCode};
use weft_testkit::{Cluster, ClusterOptions};

#[test]
fn failed_nth_request_then_normal_service() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/d", 0o755).unwrap();
    c.client().set_faults(FaultConfig { fail_nth: Some(1), ..Default::default() });
    assert_eq!(c.stat("/d").unwrap_err(), ErrorCode::Unreachable);
    assert!(c.stat("/d").is_ok(), "only the first request fails");
}

#[test]
fn dropped_connection_is_reopened() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let c = cluster.client();
    let f = c.create("/f", CreateOptions::default()).unwrap();
    c.write_at(&f, 0, b"before").unwrap();
    c.client().set_faults(FaultConfig { drop_after: Some(0), ..Default::default() });
    assert_eq!(c.stat("/f").unwrap_err(), ErrorCode::Unreachable);
    c.client().set_faults(FaultConfig::default());
    let mut buf = [0u8; 6];
    assert_eq!(c.read_at(&f, 0, &mut buf).unwrap(), 6, "a new connection serves the next request");
    assert_eq!(&buf, b"before");
}

#[test]
fn added_delay_applies_to_every_message() {
    let cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/d", 0o755).unwrap();
    c.client().set_faults(FaultConfig { delay: std::time::Duration::from_millis(50), ..Default::default() });
    let before = c.counters();
    let start = Instant::now();
    c.stat("/d").unwrap();
    let requests = c.counters().since(&before).total_requests();
    // Each request waits twice (before sending, after the reply). This is a
    // lower bound implied by the delay, not a performance assertion.
    assert!(start.elapsed() >= std::time::Duration::from_millis(100 * requests));
    assert_eq!(FaultConfig::parse("delay_ms=50").unwrap().delay, std::time::Duration::from_millis(50));
}
