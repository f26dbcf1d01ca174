//! Namespace operations against real servers: every operation and its error cases.

use weft_client::{ClientOptions, CreateOptions, ErrorCode};
use weft_proto::message::{Credentials, ObjectKind};
use weft_testkit::{Cluster, ClusterOptions};

fn user(uid: u32) -> ClientOptions {
    ClientOptions { credentials: Credentials { uid, gid: uid, groups: vec![] }, ..ClientOptions::default() }
}

#[test]
fn create_lookup_stat_remove() {
    let cluster = Cluster::start(ClusterOptions::default());
    let c = cluster.client();
    c.mkdir("/d", 0o755).unwrap();
    let file = c.create("/d/f", CreateOptions { exclusive: true, ..Default::default() }).unwrap();
    assert_eq!(file.layout.distribution.stripe_count, 4);
    assert_eq!(
        c.create("/d/f", CreateOptions { exclusive: true, ..Default::default() }).unwrap_err(),
        ErrorCode::Exists
    );
    // Non-exclusive create opens the existing file.
    assert_eq!(c.create("/d/f", CreateOptions::default()).unwrap().handle, file.handle);
    let stat = c.stat("/d/f").unwrap();
    assert_eq!((stat.kind, stat.size, stat.mode), (ObjectKind::Metafile, 0, 0o644));
    assert_eq!(c.stat("/d/missing").unwrap_err(), ErrorCode::NoEntry);
    assert_eq!(c.stat("/missing/f").unwrap_err(), ErrorCode::NoEntry);
    assert_eq!(c.stat("/d/f/x").unwrap_err(), ErrorCode::NotDir);
    assert_eq!(c.create("/d/f/x", CreateOptions::default()).unwrap_err(), ErrorCode::NotDir);
    assert_eq!(c.rmdir("/d/f").unwrap_err(), ErrorCode::NotDir);
    assert_eq!(c.unlink("/d").unwrap_err(), ErrorCode::IsDir);
    assert_eq!(c.rmdir("/d").unwrap_err(), ErrorCode::NotEmpty);
    c.unlink("/d/f").unwrap();
    assert_eq!(c.unlink("/d/f").unwrap_err(), ErrorCode::NoEntry);
    c.rmdir("/d").unwrap();
    assert_eq!(c.rmdir("/d").unwrap_err(), ErrorCode::NoEntry);
    assert!(c.readdir("/").unwrap().is_empty());
}

#[test]
fn names_are_validated() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let c = cluster.client();
    let long = format!("/{}", "n".repeat(256));
    assert_eq!(c.mkdir(&long, 0o755).unwrap_err(), ErrorCode::NameTooLong);
    assert_eq!(c.create(&long, CreateOptions::default()).unwrap_err(), ErrorCode::NameTooLong);
    assert_eq!(c.mkdir("/", 0o755).unwrap_err(), ErrorCode::Invalid);
    assert_eq!(c.mkdir("/a/..", 0o755).unwrap_err(), ErrorCode::Invalid);
    let ok = format!("/{}", "n".repeat(255));
    c.mkdir(&ok, 0o755).unwrap();
    assert_eq!(c.mkdir(&ok, 0o755).unwrap_err(), ErrorCode::Exists);
}

#[test]
fn symlinks_resolve_and_loop() {
    let cluster = Cluster::start(ClusterOptions { servers: 3, ..Default::default() });
    let c = cluster.client();
    c.mkdir_all("/a/b", 0o755).unwrap();
    let f = c.create("/a/b/file", CreateOptions::default()).unwrap();
    c.write_at(&f, 0, b"hello").unwrap();
    c.symlink("/a/b", "/abs").unwrap();
    c.symlink("b/file", "/a/rel").unwrap();
    c.symlink("../a/b/../b", "/a/dots").unwrap();
    assert_eq!(c.readlink("/abs").unwrap(), "/a/b");
    assert_eq!(c.stat("/abs/file").unwrap().size, 5);
    assert_eq!(c.stat("/a/rel").unwrap().size, 5);
    assert_eq!(c.stat("/a/dots/file").unwrap().size, 5);
    assert_eq!(c.lstat("/a/rel").unwrap().kind, ObjectKind::Symlink);
    c.symlink("/loop2", "/loop1").unwrap();
    c.symlink("/loop1", "/loop2").unwrap();
    assert_eq!(c.stat("/loop1").unwrap_err(), ErrorCode::Loop);
    assert_eq!(c.stat("/loop1/x").unwrap_err(), ErrorCode::Loop);
    c.symlink("self", "/self").unwrap();
    assert_eq!(c.stat("/self").unwrap_err(), ErrorCode::Loop);
    assert_eq!(c.symlink("x", "/abs").unwrap_err(), ErrorCode::Exists);
    assert_eq!(c.readlink("/a").unwrap_err(), ErrorCode::Invalid);
    c.unlink("/abs").unwrap();
    assert_eq!(c.stat("/a/b/file").unwrap().size, 5, "removing a symlink leaves its target");
}

#[test]
fn rename_rules() {
    let cluster = Cluster::start(ClusterOptions::default());
    let c = cluster.client();
    c.mkdir_all("/x/y", 0o755).unwrap();
    c.mkdir("/z", 0o755).unwrap();
    let f = c.create("/x/f", CreateOptions::default()).unwrap();
    c.write_at(&f, 0, b"data").unwrap();
    let g = c.create("/z/g", CreateOptions::default()).unwrap();
    c.write_at(&g, 0, b"other").unwrap();
    // Across directories (maybe across servers), replacing a file.
    c.rename("/x/f", "/z/g").unwrap();
    assert_eq!(c.stat("/x/f").unwrap_err(), ErrorCode::NoEntry);
    assert_eq!(c.stat("/z/g").unwrap().size, 4);
    // File over directory, directory over file.
    assert_eq!(c.rename("/z/g", "/x/y").unwrap_err(), ErrorCode::IsDir);
    assert_eq!(c.rename("/x/y", "/z/g").unwrap_err(), ErrorCode::NotDir);
    // Directory into itself.
    assert_eq!(c.rename("/x", "/x/y/inside").unwrap_err(), ErrorCode::Invalid);
    // Directory over a non-empty directory.
    c.mkdir("/z/full", 0o755).unwrap();
    c.mkdir("/z/full/child", 0o755).unwrap();
    assert_eq!(c.rename("/x/y", "/z/full").unwrap_err(), ErrorCode::NotEmpty);
    // Directory over an empty directory, then the moved one is usable.
    c.mkdir("/z/empty", 0o755).unwrap();
    c.rename("/x/y", "/z/empty").unwrap();
    c.create("/z/empty/new", CreateOptions::default()).unwrap();
    assert_eq!(c.readdir("/x").unwrap().len(), 0);
    // Moved directory knows its new parent: moving its ancestor under it fails.
    assert_eq!(c.rename("/z", "/z/empty/deeper").unwrap_err(), ErrorCode::Invalid);
    assert_eq!(c.rename("/nope", "/z/q").unwrap_err(), ErrorCode::NoEntry);
    // Same name: no-op.
    c.rename("/z/g", "/z/g").unwrap();
    assert_eq!(c.stat("/z/g").unwrap().size, 4);
}

#[test]
fn permissions_for_non_root() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let root = cluster.client();
    root.mkdir("/private", 0o700).unwrap();
    root.mkdir("/shared", 0o777).unwrap();
    root.create("/private/secret", CreateOptions::default()).unwrap();
    let f = root.create("/readonly", CreateOptions { mode: Some(0o644), ..Default::default() }).unwrap();
    root.write_at(&f, 0, b"x").unwrap();
    let alice = cluster.client_with(user(1000));
    assert_eq!(alice.stat("/private/secret").unwrap_err(), ErrorCode::Access);
    assert_eq!(alice.readdir("/private").unwrap_err(), ErrorCode::Access);
    assert_eq!(alice.create("/private/mine", CreateOptions::default()).unwrap_err(), ErrorCode::Access);
    assert_eq!(alice.mkdir("/top", 0o755).unwrap_err(), ErrorCode::Access);
    assert_eq!(alice.open("/readonly", 2).unwrap_err(), ErrorCode::Access);
    assert!(alice.open("/readonly", 4).is_ok());
    assert_eq!(alice.chmod("/readonly", 0o777).unwrap_err(), ErrorCode::Perm);
    assert_eq!(alice.chown("/readonly", Some(1000), None).unwrap_err(), ErrorCode::Perm);
    assert_eq!(alice.unlink("/readonly").unwrap_err(), ErrorCode::Access);
    // In a world-writable directory alice creates and owns her file.
    let mine = alice.create("/shared/mine", CreateOptions::default()).unwrap();
    alice.write_at(&mine, 0, b"abc").unwrap();
    let stat = root.stat("/shared/mine").unwrap();
    assert_eq!((stat.uid, stat.gid, stat.size), (1000, 1000, 3));
    alice.chmod("/shared/mine", 0o600).unwrap();
    let bob = cluster.client_with(user(2000));
    assert_eq!(bob.open("/shared/mine", 4).unwrap_err(), ErrorCode::Access);
    root.chown("/shared/mine", Some(2000), Some(2000)).unwrap();
    assert!(bob.open("/shared/mine", 4 | 2).is_ok());
}

#[test]
fn setattr_and_truncate() {
    let cluster = Cluster::start(ClusterOptions { servers: 3, strip_bytes: 4096, ..Default::default() });
    let c = cluster.client();
    let f = c.create("/t", CreateOptions::default()).unwrap();
    c.write_at(&f, 0, &vec![7u8; 20_000]).unwrap();
    assert_eq!(c.stat("/t").unwrap().size, 20_000);
    c.truncate("/t", 5_000).unwrap();
    assert_eq!(c.stat("/t").unwrap().size, 5_000);
    c.truncate("/t", 100_000).unwrap();
    assert_eq!(c.stat("/t").unwrap().size, 100_000);
    let mut buf = vec![1u8; 100_000];
    assert_eq!(c.read_at(&f, 0, &mut buf).unwrap(), 100_000);
    assert!(buf[..5_000].iter().all(|b| *b == 7) && buf[5_000..].iter().all(|b| *b == 0));
    c.truncate("/t", 0).unwrap();
    assert_eq!(c.stat("/t").unwrap().size, 0);
    c.chmod("/t", 0o600).unwrap();
    c.chown("/t", Some(5), Some(6)).unwrap();
    use weft_proto::message::TimeSet;
    c.utimens("/t", Some(TimeSet::At(1_000_000_000)), Some(TimeSet::At(2_000_000_000))).unwrap();
    let stat = c.stat("/t").unwrap();
    assert_eq!(
        (stat.mode, stat.uid, stat.gid, stat.atime_ns, stat.mtime_ns),
        (0o600, 5, 6, 1_000_000_000, 2_000_000_000)
    );
    // An explicit older mtime sticks on a file with data, until data is written again.
    c.write_at(&f, 0, b"data").unwrap();
    c.utimens("/t", None, Some(TimeSet::At(3_000_000_000))).unwrap();
    assert_eq!(c.stat("/t").unwrap().mtime_ns, 3_000_000_000);
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.write_at(&f, 0, b"more").unwrap();
    assert!(c.stat("/t").unwrap().mtime_ns > 3_000_000_000);
}

#[test]
fn directory_default_striping_is_inherited() {
    let cluster = Cluster::start(ClusterOptions::default());
    let c = cluster.client();
    c.mkdir("/wide", 0o755).unwrap();
    let d = weft_proto::Distribution { strip_bytes: 1 << 20, stripe_count: 2 };
    c.set_default_distribution("/wide", d).unwrap();
    let f = c.create("/wide/f", CreateOptions::default()).unwrap();
    assert_eq!(f.layout.distribution, d);
    let g = c
        .create("/wide/g", CreateOptions { stripe_count: Some(3), strip_bytes: Some(1000), ..Default::default() })
        .unwrap();
    assert_eq!(g.layout.distribution.stripe_count, 3);
    assert_eq!(g.layout.distribution.strip_bytes, 1000);
    // Subdirectories inherit the default too.
    c.mkdir("/wide/sub", 0o755).unwrap();
    assert_eq!(c.create("/wide/sub/h", CreateOptions::default()).unwrap().layout.distribution, d);
    let bad = weft_proto::Distribution { strip_bytes: 0, stripe_count: 2 };
    assert_eq!(c.set_default_distribution("/wide", bad).unwrap_err(), ErrorCode::Invalid);
    assert_eq!(c.set_default_distribution("/wide/f", d).unwrap_err(), ErrorCode::NotDir);
}

#[test]
fn statfs_reports_every_server() {
    let cluster = Cluster::start(ClusterOptions { servers: 3, ..Default::default() });
    let c = cluster.client();
    c.create("/f", CreateOptions::default()).unwrap();
    let status = c.statfs().unwrap();
    assert_eq!(status.servers.iter().map(|s| s.server_id).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(status.bytes_total > 0 && status.bytes_free <= status.bytes_total);
    // Root + metafile + 3 datafiles (pool reservations not counted). The
    // aggregate statfs answers from the composed status table, which is
    // refreshed every 500 ms, so the count arrives within a few periods.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.statfs().unwrap().objects != 5 {
        assert!(std::time::Instant::now() < deadline, "objects: {}", c.statfs().unwrap().objects);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn request_counts_of_client_driven_operations() {
    for servers in [1u32, 2, 4] {
        let cluster = Cluster::start(ClusterOptions { servers, ..Default::default() });
        let c = cluster.client_with(ClientOptions { client_driven: true, ..ClientOptions::default() });
        let n = servers as u64;
        let count = |f: &dyn Fn()| {
            let before = c.counters();
            f();
            c.counters().since(&before).total_requests()
        };
        // Parent resolution of "/f" costs nothing (the root is known).
        assert_eq!(
            count(&|| drop(c.create("/f", CreateOptions { exclusive: true, ..Default::default() }).unwrap())),
            n + 4
        );
        assert_eq!(count(&|| drop(c.stat("/f").unwrap())), 2 + n, "lookup, getattr, one size request per data server");
        assert_eq!(count(&|| c.unlink("/f").unwrap()), n + 3);
        assert_eq!(
            count(&|| {
                c.mkdir("/d", 0o755).unwrap();
            }),
            3
        );
        assert_eq!(count(&|| c.rmdir("/d").unwrap()), 4, "lookup, parent getattr, remove object, remove entry");
        assert_eq!(count(&|| drop(c.statfs().unwrap())), n);
    }
}
