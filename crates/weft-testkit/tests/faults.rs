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

/// Runs `weft` against `cluster` with extra environment.
fn weft(cluster: &Cluster, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(weft_testkit::weft_bin());
    command.args(args).env("WEFT_CONFIG", &cluster.config_path).env_remove("WEFT_FAULTS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run weft")
}

#[test]
fn faults_are_injected_only_on_explicit_request() {
    let cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    cluster.client().mkdir("/d", 0o755).unwrap();
    // The environment is not obeyed: a production client is not made to fail by it.
    let output = weft(&cluster, &["stat", "weft:/d"], &[("WEFT_FAULTS", "fail_nth=1")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("WEFT_FAULTS is ignored"), "a set WEFT_FAULTS is reported: {stderr}");
    // The explicit option is.
    let output = weft(&cluster, &["--faults", "fail_nth=1", "stat", "weft:/d"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the first request fails");
    assert!(stderr.contains("injecting faults: fail_nth=1"), "{stderr}");
    assert!(stderr.contains(&ErrorCode::Unreachable.to_string()), "{stderr}");
    // A malformed specification is an error, not ignored.
    for bad in ["fail_nth=x", "bogus=1", "delay_ms"] {
        let output = weft(&cluster, &["--faults", bad, "stat", "weft:/d"], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "`{bad}` is refused: {stderr}");
        assert!(stderr.contains("--faults"), "{stderr}");
    }
    // Clients made with default options inject nothing.
    assert_eq!(weft_client::ClientOptions::default().faults, FaultConfig::default());
}
