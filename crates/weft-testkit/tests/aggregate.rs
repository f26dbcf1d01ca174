//! Aggregate (server-driven) namespace operations against real servers:
//! one client request each, tree collectives, races, crashes, a data
//! server down.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use weft_client::{BlockingClient, ClientOptions, CreateOptions, ErrorCode};
use weft_proto::message::{CollectiveGroup, CollectiveOp, CollectivePart, Reply, Request};
use weft_proto::Handle;
use weft_testkit::{fsck, Cluster, ClusterOptions, FsckReport};

fn requests(c: &BlockingClient, f: &dyn Fn()) -> u64 {
    let before = c.counters();
    f();
    c.counters().since(&before).total_requests()
}

fn exclusive() -> CreateOptions {
    CreateOptions { exclusive: true, ..Default::default() }
}

fn driven(cluster: &Cluster) -> BlockingClient {
    cluster.client_with(ClientOptions { client_driven: true, ..ClientOptions::default() })
}

#[test]
fn one_request_per_operation_whatever_the_width() {
    for servers in [1u32, 2, 4, 8] {
        let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
        let c = cluster.client();
        let n = servers as u64;
        let file = std::cell::RefCell::new(None);
        assert_eq!(
            requests(&c, &|| *file.borrow_mut() = Some(c.create("/f", exclusive()).unwrap())),
            1,
            "create, P={n}"
        );
        let handle = file.borrow().as_ref().unwrap().handle;
        assert_eq!(file.borrow().as_ref().unwrap().layout.datafiles.len() as u64, n, "full stripe, P={n}");
        assert_eq!(requests(&c, &|| drop(c.block_on(c.client().stat_handle(handle)).unwrap())), 1, "stat, P={n}");
        assert_eq!(requests(&c, &|| c.rename("/f", "/g").unwrap()), 1, "rename, P={n}");
        assert_eq!(requests(&c, &|| c.unlink("/g").unwrap()), 1, "remove, P={n}");
        assert_eq!(
            requests(&c, &|| {
                c.mkdir("/d", 0o755).unwrap();
            }),
            1,
            "mkdir, P={n}"
        );
        assert_eq!(requests(&c, &|| c.rmdir("/d").unwrap()), 1, "rmdir, P={n}");
        assert_eq!(requests(&c, &|| drop(c.statfs().unwrap())), 1, "statfs, P={n}");
        assert_eq!(c.statfs().unwrap().servers.len() as u64, n);
        // The client-driven path, same cluster, for comparison.
        let d = driven(&cluster);
        let file = std::cell::RefCell::new(None);
        assert_eq!(requests(&d, &|| *file.borrow_mut() = Some(d.create("/f", exclusive()).unwrap())), n + 4);
        let handle = file.borrow().as_ref().unwrap().handle;
        assert_eq!(requests(&d, &|| drop(d.block_on(d.client().stat_handle(handle)).unwrap())), 1 + n);
        assert_eq!(requests(&d, &|| d.unlink("/f").unwrap()), n + 3);
        assert_eq!(
            requests(&d, &|| {
                d.mkdir("/d", 0o755).unwrap();
            }),
            3
        );
        assert_eq!(requests(&d, &|| d.rmdir("/d").unwrap()), 4);
        assert_eq!(requests(&d, &|| drop(d.statfs().unwrap())), n);
    }
}

#[test]
fn stat_by_path_looks_up_and_stats_the_last_component_in_one_request() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/d", 0o755).unwrap();
    let file = c.create("/d/f", exclusive()).unwrap();
    c.write_at(&file, 100_000, b"x").unwrap();
    c.symlink("f", "/d/l").unwrap();
    c.symlink("/nowhere", "/d/dangling").unwrap();
    // One lookup for `d`, then one request for the entry and its sizes.
    let stat = std::cell::RefCell::new(None);
    assert_eq!(requests(&c, &|| *stat.borrow_mut() = Some(c.stat("/d/f").unwrap())), 2);
    let stat = stat.into_inner().unwrap();
    assert_eq!(stat.size, 100_001);
    assert_eq!(stat, c.block_on(c.client().stat_handle(file.handle)).unwrap());
    let dir = c.stat("/d").unwrap();
    assert_eq!(c.block_on(c.client().lstat_in(dir.handle, "f")).unwrap(), stat);
    // Symlinks: stat follows (relative target), lstat does not.
    assert_eq!(c.stat("/d/l").unwrap(), stat);
    let link = c.lstat("/d/l").unwrap();
    assert_eq!(link.kind, weft_proto::message::ObjectKind::Symlink);
    assert_eq!(link.size, 1);
    assert_eq!(c.stat("/d/dangling"), Err(ErrorCode::NoEntry));
    assert_eq!(c.stat("/d/missing"), Err(ErrorCode::NoEntry));
    assert_eq!(c.stat("/d/f/x"), Err(ErrorCode::NotDir));
    assert_eq!(c.stat("/d/..").unwrap().handle, Handle::ROOT);
    // Directories, wherever they were placed, and the same answers client-driven.
    for i in 0..8 {
        c.mkdir(&format!("/d/sub{i}"), 0o755).unwrap();
        c.create(&format!("/d/sub{i}/g"), exclusive()).unwrap();
    }
    let d = driven(&cluster);
    for i in 0..8 {
        assert_eq!(c.stat(&format!("/d/sub{i}")).unwrap(), d.stat(&format!("/d/sub{i}")).unwrap());
        assert_eq!(c.stat(&format!("/d/sub{i}/g")).unwrap(), d.stat(&format!("/d/sub{i}/g")).unwrap());
    }
    assert_eq!(c.stat("/d/f").unwrap(), d.stat("/d/f").unwrap());
    // Permission to search the parent is checked as a lookup does.
    c.chmod("/d", 0o700).unwrap();
    let other =
        cluster.client().client().as_user(weft_proto::message::Credentials { uid: 4242, gid: 4242, groups: vec![] });
    assert_eq!(c.block_on(other.stat("/d/f")), Err(ErrorCode::Access));
}

fn collective(c: &BlockingClient, root: u32, order: &[u32], fanout: u32) -> weft_proto::message::CollectiveResult {
    let groups = order.iter().map(|s| CollectiveGroup { server_id: *s, handles: vec![] }).collect();
    let request = Request::Collective { operation: CollectiveOp::Ping, groups, fanout, round: 0 };
    match c.block_on(c.client().call(root, request)).unwrap() {
        Reply::Collective(result) => result,
        other => panic!("unexpected reply {other:?}"),
    }
}

fn depth_max_counter(c: &BlockingClient, servers: u32) -> u64 {
    (0..servers)
        .map(|id| match c.block_on(c.client().call(id, Request::Counters)).unwrap() {
            Reply::Counters(counters) => counters.collective_depth_max,
            other => panic!("unexpected reply {other:?}"),
        })
        .max()
        .unwrap()
}

#[test]
fn tree_depth_is_ceil_log_k_of_servers() {
    let cluster = Cluster::start(ClusterOptions { servers: 8, ..Default::default() });
    let c = cluster.client();
    let all: Vec<u32> = (0..8).collect();
    // k = 3 first: 8 servers need ⌈log₃ 8⌉ = 2 steps.
    let result = collective(&c, 0, &all, 3);
    assert_eq!(result.depth, 2);
    assert_eq!(result.parts.iter().map(|(s, _)| *s).collect::<Vec<_>>(), all);
    assert!(result.parts.iter().all(|(_, p)| *p == Ok(CollectivePart::Done)));
    assert_eq!(depth_max_counter(&c, 8), 2, "server counters");
    // k = 2: ⌈log₂ 8⌉ = 3; ⌈log₂ 5⌉ = 3; ⌈log₂ 4⌉ = 2; ⌈log₄ 8⌉ = 2.
    assert_eq!(collective(&c, 0, &all, 2).depth, 3);
    assert_eq!(depth_max_counter(&c, 8), 3, "server counters");
    assert_eq!(collective(&c, 0, &all[..5], 2).depth, 3);
    assert_eq!(collective(&c, 0, &all[..4], 2).depth, 2);
    assert_eq!(collective(&c, 0, &all, 4).depth, 2);
}

fn fanout_eight(config: &mut weft_config::Config) {
    config.collectives.tree_fanout = 8;
}

#[test]
fn configured_fanout_is_the_default_of_every_tree() {
    let cluster = Cluster::start(ClusterOptions { servers: 8, tune: Some(fanout_eight), ..Default::default() });
    let c = cluster.client();
    let all: Vec<u32> = (0..8).collect();
    // A request that leaves the fan-out to the server: ⌈log₈ 8⌉ = 1 step.
    assert_eq!(collective(&c, 0, &all, 0).depth, 1);
    // The aggregate operations use it too: a stat of a file striped over
    // all 8 servers gathers the sizes in one step.
    let file = c.create("/wide", CreateOptions { stripe_count: Some(8), ..Default::default() }).unwrap();
    c.write_at(&file, 0, &vec![7u8; 8 * 65536]).unwrap();
    assert_eq!(c.stat("/wide").unwrap().size, 8 * 65536);
    assert_eq!(depth_max_counter(&c, 8), 1, "server counters");
}

#[test]
fn opposite_tree_operations_do_not_deadlock() {
    let cluster = Arc::new(Cluster::start(ClusterOptions { servers: 8, ..Default::default() }));
    let started = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let cluster = cluster.clone();
            std::thread::spawn(move || {
                let c = cluster.client();
                let mut order: Vec<u32> = (0..8).collect();
                if t % 2 == 1 {
                    order.reverse();
                }
                for _ in 0..100 {
                    let result = collective(&c, order[0], &order, 2);
                    assert!(result.parts.iter().all(|(_, p)| p.is_ok()));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn racing_creates_of_one_name_exactly_one_wins() {
    let cluster = Arc::new(Cluster::start(ClusterOptions { servers: 4, ..Default::default() }));
    for round in 0..5 {
        let barrier = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (cluster, barrier) = (cluster.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let c = cluster.client();
                    barrier.wait();
                    c.create(&format!("/race{round}"), exclusive()).map(|f| f.handle)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
        assert!(results.iter().filter(|r| r.is_err()).all(|r| *r == Err(ErrorCode::Exists)));
    }
    let c = cluster.client();
    assert_eq!(c.readdir("/").unwrap().len(), 5);
}

#[test]
fn rmdir_racing_creates_never_leaves_an_entry_behind() {
    let cluster = Arc::new(Cluster::start(ClusterOptions { servers: 4, ..Default::default() }));
    let c = cluster.client();
    for round in 0..20 {
        let dir = format!("/d{round}");
        c.mkdir(&dir, 0o755).unwrap();
        let barrier = Arc::new(Barrier::new(5));
        let creators: Vec<_> = (0..4)
            .map(|i| {
                let (cluster, barrier, dir) = (cluster.clone(), barrier.clone(), dir.clone());
                std::thread::spawn(move || {
                    let c = cluster.client();
                    barrier.wait();
                    c.create(&format!("{dir}/f{i}"), exclusive()).is_ok()
                })
            })
            .collect();
        barrier.wait();
        let removed = c.rmdir(&dir);
        let created: Vec<bool> = creators.into_iter().map(|t| t.join().unwrap()).collect();
        match removed {
            Ok(()) => {
                assert!(created.iter().all(|ok| !ok), "a create succeeded in a removed directory");
                assert_eq!(c.stat(&dir).unwrap_err(), ErrorCode::NoEntry);
            }
            Err(code) => {
                assert_eq!(code, ErrorCode::NotEmpty);
                assert!(created.iter().any(|ok| *ok));
                assert_eq!(c.readdir(&dir).unwrap().len(), created.iter().filter(|ok| **ok).count());
            }
        }
    }
}

fn all_datafiles(c: &BlockingClient, dir: &str) -> Vec<Handle> {
    let mut handles = Vec::new();
    for entry in c.readdir(dir).unwrap() {
        let stat = c.stat(&format!("{dir}/{}", entry.name)).unwrap();
        handles.extend(stat.layout.unwrap().datafiles);
    }
    handles
}

#[test]
fn killed_server_during_creates_never_issues_a_handle_twice() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/k", 0o755).unwrap();
    let mut created = 0;
    for round in 0..3u32 {
        let victim = 1 + round % 3;
        let stop = Instant::now() + Duration::from_millis(300 + 200 * round as u64);
        while Instant::now() < stop {
            if c.create(&format!("/k/f{created}"), exclusive()).is_ok() {
                created += 1;
            }
        }
        cluster.kill(victim);
        // Creates go on while it is down (its metafiles and pools unreachable).
        for _ in 0..50 {
            if c.create(&format!("/k/f{created}"), exclusive()).is_ok() {
                created += 1;
            }
        }
        cluster.restart(victim);
        cluster.wait_ready();
    }
    for _ in 0..300 {
        c.create(&format!("/k/f{created}"), exclusive()).unwrap();
        created += 1;
    }
    let handles = all_datafiles(&c, "/k");
    let unique: BTreeSet<Handle> = handles.iter().copied().collect();
    assert_eq!(unique.len(), handles.len(), "a datafile handle was issued twice");
    // Nothing leaked either: reservations made before a crash were adopted.
    let FsckReport { problems, stdout: report } = fsck(&cluster, false);
    assert_eq!(problems, 0, "{report}");
}

#[test]
fn data_server_down_create_skips_it_and_remove_reclaims_later() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    let before = c.create("/before", exclusive()).unwrap();
    assert_eq!(before.layout.datafiles.len(), 4);
    let on_victim: Vec<Handle> =
        before.layout.datafiles.iter().copied().filter(|h| c.client().server_of(*h).unwrap() == 3).collect();
    assert_eq!(on_victim.len(), 1);
    cluster.kill(3);
    // After the status grace (3 s) the servers report it down and skip it.
    std::thread::sleep(Duration::from_millis(3800));
    let after =
        c.create("/after", CreateOptions { exclusive: true, stripe_count: Some(4), ..Default::default() }).unwrap();
    assert_eq!(after.layout.datafiles.len(), 3, "the layout records the three stripes it got");
    assert!(after.layout.datafiles.iter().all(|h| c.client().server_of(*h).unwrap() != 3));
    assert_eq!(after.layout.distribution.stripe_count, 3);
    // Remove succeeds while server 3 is down; its datafile waits in the queue.
    c.unlink("/before").unwrap();
    cluster.restart(3);
    cluster.wait_ready();
    let victim = on_victim[0];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let gone = c.block_on(c.client().call(3, Request::GetAttr { handle: victim })) == Err(ErrorCode::Stale);
        if gone {
            break;
        }
        assert!(Instant::now() < deadline, "datafile on the returned server not reclaimed");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn fsck_is_clean_after_aggregate_work_and_finds_client_driven_orphans() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/w", 0o755).unwrap();
    for i in 0..200 {
        c.create(&format!("/w/f{i}"), exclusive()).unwrap();
    }
    for i in 0..100 {
        c.unlink(&format!("/w/f{i}")).unwrap();
    }
    c.mkdir("/w/sub", 0o755).unwrap();
    c.rename("/w/f150", "/w/sub/moved").unwrap();
    c.rename("/w/f151", "/w/f152").unwrap();
    let FsckReport { problems, stdout: report } = fsck(&cluster, false);
    assert_eq!(problems, 0, "{report}");
    // What a client-driven create that died after its first phase leaves.
    let request = Request::CreateObject {
        cred: weft_proto::message::Credentials::root(),
        target_id: cluster.config.primary_target(2).unwrap(),
        mode: 0o644,
        object: weft_proto::message::NewObject::Datafile,
    };
    let Reply::Handle(orphan) = c.block_on(c.client().call(2, request)).unwrap() else { panic!() };
    let FsckReport { problems, stdout: report } = fsck(&cluster, false);
    assert_eq!(problems, 1, "{report}");
    assert!(report.contains(&format!("{}", orphan.0)) || report.contains("Orphan"), "{report}");
    // The text mode's exit status says so too (the JSON mode's is checked by `fsck`).
    let text = std::process::Command::new(weft_testkit::weft_bin())
        .args(["fsck", "--config"])
        .arg(&cluster.config_path)
        .output()
        .expect("run weft fsck");
    let said = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(2), "text-mode fsck with a problem: {said}");
    assert!(said.contains("problems: 1 "), "{said}");
    // Repairing: the run that repairs still found a problem (exit 2); the next is clean (exit 0).
    let repaired = fsck(&cluster, true);
    assert_eq!(repaired.problems, 1, "{}", repaired.stdout);
    assert!(repaired.stdout.contains("\"repaired\":true"), "{}", repaired.stdout);
    let FsckReport { problems, stdout: report } = fsck(&cluster, false);
    assert_eq!(problems, 0, "{report}");
}

#[test]
fn stats_collects_every_server_through_one_tree_query() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    c.create("/s", exclusive()).unwrap();
    let output = std::process::Command::new(weft_testkit::weft_bin())
        .args(["stats", "--json", "--config"])
        .arg(&cluster.config_path)
        .output()
        .expect("run weft stats");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().map(|l| l["server"].as_u64().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert!(lines.iter().all(|l| l["counters"]["kinds"].is_array()));
    // (Each server's snapshot is taken while its forwards are in flight, so
    // the query's own forwards may or may not be counted in it.)
}

/// Child-process mode of `killed_clients_leave_nothing_for_fsck`: create and
/// remove files until killed (bounded in count in case nobody kills it).
fn churn_process() -> bool {
    let Ok(spec) = std::env::var("WEFT_TEST_CHURN") else { return false };
    let (config, round) = spec.split_once(',').unwrap();
    let config = weft_config::Config::load(std::path::Path::new(config)).unwrap();
    let c = BlockingClient::new(config, ClientOptions::default(), 1).unwrap();
    for i in 0..5_000 {
        let path = format!("/churn/r{round}-f{i}");
        c.create(&path, exclusive()).unwrap();
        if i % 2 == 0 {
            c.unlink(&path).unwrap();
        }
    }
    true
}

/// Kill -9 a client in the middle of creates and removes, at random times,
/// three rounds: the aggregate path leaves nothing for fsck. (Run with
/// `WEFT_CLIENT_DRIVEN=1` and this test fails: fsck finds the orphans the
/// client-driven path leaves — 3 and 11 in two tries here.)
#[test]
fn killed_clients_leave_nothing_for_fsck() {
    if churn_process() {
        return;
    }
    let cluster = Cluster::start(ClusterOptions { servers: 4, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/churn", 0o755).unwrap();
    let seed: u64 = std::env::var("WEFT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("seed {seed} (set WEFT_TEST_SEED to replay)");
    let mut state = seed | 1;
    for round in 0..3 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_millis(150 + state % 500);
        let mut child = weft_testkit::command_dying_with_parent(&std::env::current_exe().unwrap())
            .args(["--exact", "killed_clients_leave_nothing_for_fsck", "--nocapture"])
            .env("WEFT_TEST_CHURN", format!("{},{round}", cluster.config_path.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL, mid-operation
        child.wait().unwrap();
    }
    assert!(!c.readdir("/churn").unwrap().is_empty(), "the killed clients did some work");
    // Removed files' datafiles may still be queued for reclaim: fsck knows
    // the queue, so a busy file system is reported clean.
    let FsckReport { problems, stdout: report } = fsck(&cluster, false);
    assert_eq!(problems, 0, "seed {seed}: {report}");
}

/// The composed status table marks a killed server down after the grace
/// time, keeps answering statfs from the others, and marks it up again
/// once it is back. (The deadlines only bound the wait; nothing asserts
/// on how fast it happens.)
#[test]
fn status_table_marks_a_server_down_and_up_again() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 3, ..Default::default() });
    let c = cluster.client();
    let down_flags = |c: &BlockingClient| -> Option<Vec<bool>> {
        let status = c.statfs().ok()?;
        (status.servers.len() == 3).then(|| status.servers.iter().map(|s| s.down).collect())
    };
    let wait_for = |c: &BlockingClient, wanted: Vec<bool>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let flags = down_flags(c);
            if flags.as_ref() == Some(&wanted) {
                return;
            }
            assert!(Instant::now() < deadline, "status table never showed {wanted:?} (last {flags:?})");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(&c, vec![false, false, false]);
    cluster.kill(2);
    wait_for(&c, vec![false, false, true]);
    cluster.restart(2);
    wait_for(&c, vec![false, false, false]);
}

/// Capacity of servers 0 and 1 in `placement_prefers_the_emptier_servers`.
const SMALL_CAPACITY_BYTES: u64 = 1 << 20;
/// Capacity of servers 2 and 3: ten times as much, and small enough that
/// any test disk has it free (the free space a server reports is the
/// smaller of its limit's remainder and the disk's).
const LARGE_CAPACITY_BYTES: u64 = 10 << 20;

/// Servers 0 and 1 are limited to 1 MiB, servers 2 and 3 to 10 MiB.
fn unequal_capacities(config: &mut weft_config::Config) {
    for server in &mut config.servers {
        server.capacity_bytes = Some(if server.id < 2 { SMALL_CAPACITY_BYTES } else { LARGE_CAPACITY_BYTES });
    }
}

#[test]
fn placement_prefers_the_emptier_servers() {
    let cluster = Cluster::start(ClusterOptions { servers: 4, tune: Some(unequal_capacities), ..Default::default() });
    let c = cluster.client();
    // Wait until the composed status reports the configured capacities.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = c.statfs().unwrap();
        let totals: Vec<u64> = status.servers.iter().map(|s| s.bytes_total).collect();
        if totals.len() == 4 && totals.iter().filter(|t| **t == LARGE_CAPACITY_BYTES).count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "capacities not in the status table: {totals:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Placement reads each server's own composed table: give every server
    // a full exchange round after its first refresh.
    std::thread::sleep(Duration::from_millis(1500));
    let mut free: Vec<(u32, u64)> = c.statfs().unwrap().servers.iter().map(|s| (s.server_id, s.bytes_free)).collect();
    free.sort();
    let wanted = [SMALL_CAPACITY_BYTES, SMALL_CAPACITY_BYTES, LARGE_CAPACITY_BYTES, LARGE_CAPACITY_BYTES];
    assert_eq!(
        free.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        wanted,
        "free space is not the configured capacities (is the test disk nearly full?)"
    );
    // Expected share of the emptier pair: free space 10 MiB vs 1 MiB each,
    // so about 0.91 of first stripes and directories; the thresholds sit
    // many standard deviations below that.
    let mut emptier = 0;
    for i in 0..200 {
        let file = c
            .create(&format!("/f{i}"), CreateOptions { exclusive: true, stripe_count: Some(1), ..Default::default() })
            .unwrap();
        if c.client().server_of(file.layout.datafiles[0]).unwrap() >= 2 {
            emptier += 1;
        }
    }
    assert!(emptier >= 150, "first stripes on the emptier servers: {emptier} of 200");
    let mut emptier_dirs = 0;
    for i in 0..100 {
        let dir = c.mkdir(&format!("/d{i}"), 0o755).unwrap();
        if c.client().server_of(dir).unwrap() >= 2 {
            emptier_dirs += 1;
        }
    }
    assert!(emptier_dirs >= 70, "directories on the emptier servers: {emptier_dirs} of 100");
}

/// Server 0 may hold 256 KiB of datafiles.
fn tiny_server_zero(config: &mut weft_config::Config) {
    config.servers[0].capacity_bytes = Some(256 << 10);
}

#[test]
fn a_server_at_its_capacity_limit_refuses_writes_with_enospc() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, tune: Some(tiny_server_zero), ..Default::default() });
    let c = cluster.client();
    let file = c.create("/full", CreateOptions { stripe_count: Some(2), ..Default::default() }).unwrap();
    let zero_first = c.client().server_of(file.layout.datafiles[0]).unwrap() == 0;
    // 1 MiB over two servers with 64 KiB strips: 512 KiB lands on server 0.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    c.write_at(&file, 0, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    assert_eq!(c.read_at(&file, 0, &mut back).unwrap(), data.len());
    assert_eq!(back, data, "data written before the limit is intact");
    // Once server 0 has measured its usage, further writes to its strips fail.
    let strip: u64 = 64 << 10;
    let offset_on_zero = if zero_first { 0 } else { strip };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.write_at(&file, offset_on_zero, &data[offset_on_zero as usize..offset_on_zero as usize + 4096]) {
            Err(ErrorCode::NoSpace) => break,
            Ok(()) => assert!(Instant::now() < deadline, "server 0 never refused a write"),
            Err(other) => panic!("unexpected error {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its statfs row says it is full; the other server still takes writes.
    let zero = c.statfs().unwrap().servers.into_iter().find(|s| s.server_id == 0).unwrap();
    assert_eq!(zero.bytes_total, 256 << 10);
    assert_eq!(zero.bytes_free, 0);
    let other = (offset_on_zero + strip) as usize;
    c.write_at(&file, other as u64, &data[other..other + 4096]).unwrap();
    assert_eq!(c.read_at(&file, 0, &mut back).unwrap(), data.len());
    assert_eq!(back, data, "a refused write changed nothing");
}
