//! Durability across restarts: a clean SIGTERM of every server, and a
//! kill -9 of one server in the middle of a create/write storm. Every
//! acknowledged operation, and every byte that was synced, must be there
//! afterwards, and no handle may ever be issued twice.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use weft_client::{CreateOptions, ErrorCode, Handle};
use weft_testkit::{Cluster, ClusterOptions};

fn content(i: u64) -> Vec<u8> {
    (0..10_000u64).map(|k| ((k * 7 + i * 13) % 251) as u8).collect()
}

fn handles_of(stat: &weft_client::Stat) -> Vec<Handle> {
    let mut all = vec![stat.handle];
    if let Some(layout) = &stat.layout {
        all.extend(&layout.datafiles);
    }
    all
}

#[test]
fn everything_survives_sigterm_of_all_servers() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 3, strip_bytes: 1024, ..Default::default() });
    let c = cluster.client();
    c.mkdir_all("/keep/deep", 0o750).unwrap();
    c.symlink("/keep/deep", "/link").unwrap();
    let mut before = Vec::new();
    for i in 0..20u64 {
        let f = c.create(&format!("/keep/deep/f{i}"), CreateOptions::default()).unwrap();
        c.write_at(&f, i * 100, &content(i)).unwrap();
        c.fsync(&f).unwrap();
        before.push(c.stat(&format!("/keep/deep/f{i}")).unwrap());
    }
    c.rename("/keep/deep/f0", "/keep/renamed").unwrap();
    c.unlink("/keep/deep/f1").unwrap();
    drop(c);
    for id in 0..3 {
        cluster.terminate(id);
    }
    for id in 0..3 {
        cluster.restart(id);
    }
    let c = cluster.client();
    assert_eq!(c.stat("/keep/deep").unwrap().mode, 0o750);
    assert_eq!(c.readlink("/link").unwrap(), "/keep/deep");
    assert_eq!(c.stat("/keep/deep/f1").unwrap_err(), ErrorCode::NoEntry);
    assert_eq!(c.stat("/keep/renamed").unwrap().handle, before[0].handle);
    for i in 2..20u64 {
        let stat = c.stat(&format!("/link/f{i}")).unwrap();
        assert_eq!(stat.handle, before[i as usize].handle);
        let f = c.open(&format!("/keep/deep/f{i}"), 4).unwrap();
        let mut buf = vec![0u8; 10_000];
        assert_eq!(c.read_at(&f, i * 100, &mut buf).unwrap(), 10_000);
        assert!(buf == content(i), "file {i} contents");
    }
    // New objects never reuse old handles.
    let used: HashSet<Handle> = before.iter().flat_map(handles_of).collect();
    for i in 0..10 {
        let f = c.create(&format!("/after{i}"), CreateOptions::default()).unwrap();
        let stat = c.stat(&format!("/after{i}")).unwrap();
        for handle in handles_of(&stat) {
            assert!(!used.contains(&handle), "handle {handle} issued twice");
        }
        drop(f);
    }
}

#[test]
fn kill_9_during_create_and_write_storm() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 4, strip_bytes: 4096, ..Default::default() });
    let victim = 2;
    let acknowledged: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());
    let handles: Mutex<Vec<Handle>> = Mutex::new(Vec::new());
    let killed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for worker in 0..4u64 {
            let (acknowledged, handles, killed, cluster) = (&acknowledged, &handles, &killed, &cluster);
            scope.spawn(move || {
                let c = cluster.client();
                c.mkdir_all(&format!("/w{worker}"), 0o755).unwrap();
                let mut failures_after_kill = 0;
                for i in 0..400u64 {
                    if killed.load(Ordering::SeqCst) && failures_after_kill > 20 {
                        break;
                    }
                    let path = format!("/w{worker}/f{i}");
                    let id = worker * 1000 + i;
                    let result = (|| {
                        let f = c.create(&path, CreateOptions { exclusive: true, ..Default::default() })?;
                        c.write_at(&f, 0, &content(id))?;
                        c.fsync(&f)?;
                        let stat = c.stat(&path)?;
                        Ok::<_, ErrorCode>(handles_of(&stat))
                    })();
                    match result {
                        Ok(objects) => {
                            acknowledged.lock().unwrap().push((path, id));
                            handles.lock().unwrap().extend(objects);
                        }
                        Err(_) if killed.load(Ordering::SeqCst) => failures_after_kill += 1,
                        Err(code) => panic!("{path}: {code} before any server was killed"),
                    }
                }
            });
        }
        // Let the storm run, then kill one server.
        while acknowledged.lock().unwrap().len() < 150 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = cluster.pid(victim).unwrap();
        // SAFETY: killing a server process this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        killed.store(true, Ordering::SeqCst);
    });
    cluster.kill(victim); // reap
    cluster.restart(victim);
    let c = cluster.client();
    let acknowledged = acknowledged.into_inner().unwrap();
    assert!(acknowledged.len() >= 150);
    for (path, id) in &acknowledged {
        let f = c.open(path, 4).unwrap_or_else(|e| panic!("{path}: {e} after restart"));
        let mut buf = vec![0u8; 10_000];
        assert_eq!(c.read_at(&f, 0, &mut buf).unwrap(), 10_000, "{path}");
        assert!(buf == content(*id), "{path}: synced bytes lost");
    }
    let mut seen = HashSet::new();
    for handle in handles.into_inner().unwrap() {
        assert!(seen.insert(handle), "handle {handle} issued twice");
    }
    // Creating after the restart, on every server, never reuses a handle.
    for i in 0..40 {
        c.create(&format!("/post{i}"), CreateOptions::default()).unwrap();
        for handle in handles_of(&c.stat(&format!("/post{i}")).unwrap()) {
            assert!(seen.insert(handle), "handle {handle} reissued after restart");
        }
    }
}

#[test]
fn acknowledged_changes_survive_kill_9_of_every_server() {
    // Kill -9 right after the acknowledgements: the changes are only in the
    // servers' write-ahead logs (no checkpoint yet) and must be replayed.
    let mut cluster = Cluster::start(ClusterOptions { servers: 3, ..Default::default() });
    let c = cluster.client();
    c.mkdir("/k", 0o755).unwrap();
    for i in 0..200 {
        c.create(&format!("/k/f{i}"), CreateOptions { exclusive: true, ..Default::default() }).unwrap();
    }
    for i in 0..50 {
        c.unlink(&format!("/k/f{i}")).unwrap();
    }
    c.rename("/k/f199", "/k/renamed").unwrap();
    drop(c);
    for id in 0..3 {
        cluster.kill(id);
    }
    for id in 0..3 {
        cluster.restart(id);
    }
    let c = cluster.client();
    let mut names: Vec<String> = c.readdir("/k").unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    let mut expected: Vec<String> = (50..199).map(|i| format!("f{i}")).chain(["renamed".to_string()]).collect();
    expected.sort();
    assert_eq!(names, expected);
    for name in &expected {
        assert_eq!(c.stat(&format!("/k/{name}")).unwrap().size, 0);
    }
}
