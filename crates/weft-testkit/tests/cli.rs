//! The `weft` command end to end: genconfig errors, up, ping, cp in and
//! out, ls, mkdir, layout, stat, statfs, rm, down; `bench rpc`'s report;
//! `bench io` and `bench hpio` check what they read.

use std::path::Path;
use std::process::{Command, Output};

use weft_testkit::{weft_bin, Cluster, ClusterOptions};

fn weft(args: &[&str], config: Option<&Path>) -> Output {
    let mut command = Command::new(weft_bin());
    command.args(args);
    match config {
        Some(path) => command.env("WEFT_CONFIG", path),
        None => command.env_remove("WEFT_CONFIG"),
    };
    command.output().expect("run weft")
}

fn ok(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "weft failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// Stops the file system a test brought up, also when the test fails.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = weft(&["down", "--dir", self.0.to_str().unwrap()], None);
    }
}

#[test]
fn up_copy_list_remove_down() {
    let dir = tempfile::tempdir().unwrap();
    let fs_dir = dir.path().join("fs");
    let host = format!("127.{}.{}.{}", 100 + std::process::id() % 100, std::process::id() % 250, 7);
    let up = ok(weft(
        &["up", "--dir", fs_dir.to_str().unwrap(), "--servers", "3", "--host", &host, "--base-port", "7300"],
        None,
    ));
    let _down = Down(&fs_dir);
    let config = fs_dir.join("weft.toml");
    let mountpoint = fs_dir.join("mnt");
    assert_eq!(
        up.lines().collect::<Vec<_>>(),
        vec![format!("export WEFT_CONFIG={}", config.display()), format!("mounted at {}", mountpoint.display())]
    );
    // The mount shows what the CLI writes, and the other way round.
    std::fs::write(mountpoint.join("via-mount"), b"posix").unwrap();
    let cfg = Some(config.as_path());
    assert_eq!(ok(weft(&["ping"], cfg)).lines().filter(|l| l.contains(" ok ")).count(), 3);
    // A second `up` in the same directory refuses.
    assert!(!weft(&["up", "--dir", fs_dir.to_str().unwrap(), "--host", &host, "--base-port", "7300"], None)
        .status
        .success());

    let source = dir.path().join("in.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&source, &data).unwrap();
    ok(weft(&["mkdir", "-p", "weft:/a/b"], cfg));
    ok(weft(&["cp", source.to_str().unwrap(), "weft:/a/b/data", "--strip-size", "100000", "--stripe-count", "2"], cfg));
    let listing = ok(weft(&["ls", "-l", "weft:/a/b"], cfg));
    assert!(listing.contains(" 3000000 data"), "{listing}");
    let layout = ok(weft(&["layout", "weft:/a/b/data"], cfg));
    assert!(layout.contains("strip_size: 100000") && layout.contains("stripe_count: 2"), "{layout}");
    assert_eq!(layout.lines().filter(|l| l.starts_with("stripe ")).count(), 2);
    ok(weft(&["cp", "weft:/a/b/data", "weft:/a/copy"], cfg));
    let back = dir.path().join("out.bin");
    ok(weft(&["cp", "weft:/a/copy", back.to_str().unwrap()], cfg));
    assert!(std::fs::read(&back).unwrap() == data);
    assert!(ok(weft(&["stat", "weft:/a/copy"], cfg)).contains("size: 3000000"));
    assert!(ok(weft(&["statfs"], cfg)).contains("total"));
    // rm without -r refuses a directory; with -r removes the tree.
    assert!(!weft(&["rm", "weft:/a"], cfg).status.success());
    ok(weft(&["rm", "-r", "weft:/a"], cfg));
    assert_eq!(ok(weft(&["cat", "weft:/via-mount"], cfg)), "posix");
    ok(weft(&["rm", "weft:/via-mount"], cfg));
    assert_eq!(ok(weft(&["ls", "weft:/"], cfg)).trim(), "");
    assert!(std::fs::read_dir(&mountpoint).unwrap().next().is_none());
    let missing = weft(&["stat", "weft:/a"], cfg);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such file"));
    ok(weft(&["down", "--dir", fs_dir.to_str().unwrap()], None));
    assert!(!weft(&["ping"], cfg).status.success());
    assert!(!weft_fuse_is_mounted(&mountpoint), "weft down leaves no mount");
}

#[test]
fn commands_without_config_or_with_bad_config_explain() {
    let out = weft(&["ls", "weft:/"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("WEFT_CONFIG"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let root = dir.path().join("root");
    let args = ["genconfig", "--servers", "2", "--root", root.to_str().unwrap(), "-o", path.to_str().unwrap()];
    ok(weft(&args, None));
    // genconfig also made the key the configuration names, readable by its owner only.
    let key = std::fs::metadata(root.join("weft.key")).expect("key file");
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777, 0o600);
    let text = std::fs::read_to_string(&path).unwrap().replacen("127.0.0.1:7102", "not-an-address", 1);
    std::fs::write(&path, text).unwrap();
    let out = weft(&["ping"], Some(&path));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("bad.toml:") && stderr.contains("server[1].address"), "{stderr}");
}

/// `weft bench rpc --json` with small counts: one line per phase, every
/// operation done, exactly one request per operation, server CPU found from
/// the servers' command lines, the benchmark file removed. No timing checks.
#[test]
fn bench_rpc_reports_every_phase() {
    let cluster = Cluster::start(ClusterOptions::default());
    let cfg = Some(cluster.config_path.as_path());
    let args =
        ["bench", "rpc", "--json", "--count", "300", "--io-count", "100", "--inflight", "8", "--seconds-max", "120"];
    let out = ok(weft(&args, cfg));
    let records: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let phases: Vec<(String, String, u64)> = records
        .iter()
        .map(|r| {
            (r["method"].as_str().unwrap().into(), r["phase"].as_str().unwrap().into(), r["inflight"].as_u64().unwrap())
        })
        .collect();
    let expected = [("tcp_echo", "echo", 1), ("weft", "ping", 1), ("weft", "write_4k", 1), ("weft", "write_4k", 8)]
        .into_iter()
        .chain([("weft", "read_4k", 1), ("weft", "read_4k", 8)]);
    assert_eq!(phases, expected.map(|(m, p, i)| (m.to_string(), p.to_string(), i)).collect::<Vec<_>>(), "{out}");
    for r in &records {
        assert_eq!(r["bench"], "rpc");
        assert_eq!(r["servers"], 4);
        let ops = if r["phase"] == "echo" || r["phase"] == "ping" { 300 } else { 100 };
        assert_eq!(r["ops"], ops, "{r}");
        if r["method"] == "weft" {
            assert_eq!(r["requests"], ops, "one request per operation: {r}");
        }
        for field in ["seconds", "ops_per_s", "latency_us_p50", "latency_us_p99", "client_cpu_us_per_op"] {
            assert!(r[field].as_f64().is_some_and(|v| v >= 0.0), "{field} in {r}");
        }
        assert!(r["latency_us_p50"].as_f64() <= r["latency_us_p99"].as_f64(), "{r}");
        assert!(r["server_cpu_us_per_op"].as_f64().is_some_and(|v| v >= 0.0), "server CPU in {r}");
    }
    assert_eq!(records[0]["message_bytes"], records[1]["request_bytes"], "the echo moves a Ping frame's bytes");
    assert!(records[0]["weft_servers_idle_cpu_ms_per_s"].as_f64().is_some(), "{}", records[0]);
    assert!(records[1]["ratio_to_echo_p50"].as_f64().is_some(), "{}", records[1]);
    assert!(!ok(weft(&["ls", "weft:/"], cfg)).contains("bench-rpc"), "the benchmark file is removed");
}

/// `weft bench io` and `weft bench hpio` check every byte they read: the
/// reads of a good run are reported verified; a file whose bytes changed
/// after the benchmark wrote it (overwritten with other data by `weft cp`)
/// fails `bench io --phases read` with the offset of the first wrong byte.
/// `bench md`'s remove phase ends with the removed files reclaimed.
#[test]
fn bench_reads_are_checked_and_a_corrupted_read_is_reported() {
    let cluster = Cluster::start(ClusterOptions::default());
    let cfg = Some(cluster.config_path.as_path());
    let io = ["bench", "io", "--json", "--procs", "2", "--size-per-proc", "1M", "--pattern", "shared"];
    let out = ok(weft(&[&io[..], &["--phases", "write", "--keep"]].concat(), cfg));
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!((last["phase"].as_str(), last["verified"].as_bool()), (Some("write"), Some(false)), "{out}");
    let out = ok(weft(&[&io[..], &["--phases", "read", "--keep"]].concat(), cfg));
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!((last["phase"].as_str(), last["verified"].as_bool()), (Some("read"), Some(true)), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    std::fs::write(&other, vec![0x5a; 2 << 20]).unwrap();
    ok(weft(&["cp", other.to_str().unwrap(), "weft:/bench-io/shared"], cfg));
    let out = weft(&[&io[..], &["--phases", "read"]].concat(), cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a corrupted read must fail the benchmark");
    assert!(stderr.contains("/bench-io/shared: byte at offset 0 is 0x5a, the benchmark wrote"), "{stderr}");

    let hpio = ["bench", "hpio", "--json", "--procs", "2", "--region-count", "256", "--methods", "list,datatype"];
    let out = ok(weft(&hpio, cfg));
    let reads: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["op"] == "read")
        .collect();
    assert_eq!(reads.len(), 8, "4 cases x 2 methods: {out}");
    assert!(reads.iter().all(|r| r["verified"] == true), "{out}");

    ok(weft(&["bench", "md", "--json", "--procs", "2", "--files", "20", "--phases", "create,remove"], cfg));
    let fsck: serde_json::Value = serde_json::from_str(ok(weft(&["fsck", "--json"], cfg)).trim()).unwrap();
    assert_eq!((fsck["problems"].as_u64(), fsck["reclaim_queued"].as_u64()), (Some(0), Some(0)), "{fsck}");
}

fn weft_fuse_is_mounted(path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table.lines().any(|line| line.split(' ').nth(4) == Some(path.to_str().unwrap()))
}
