//! Authentication against real servers: a connection that does not prove
//! itself is refused and closed; a client cannot act as another uid or
//! pose as a peer; peer-only requests from clients are refused; a uid-1000
//! process cannot read another user's 0600 file through the CLI — in key
//! mode (it cannot read the key) and in MUNGE mode (its own munged, own
//! key and socket), also when a preloaded shim makes `getuid()` and
//! `geteuid()` lie (the server takes the uid from the MUNGE credential);
//! nor by sending data requests by datafile handle itself: in MUNGE mode
//! those need a capability from the file's metadata server. Lock owner
//! ids are bound to the connection's uid: another uid naming the same id
//! can neither release, fence with nor contend as the first one's owner.

mod raw;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use raw::Raw;
use weft_net::auth::{key_mac, peer_message};
use weft_proto::access::{READ, WRITE};
use weft_proto::frame::Frame;
use weft_proto::limits::{AUTH_FRAME_BYTES_MAX, PROTOCOL_VERSION};
use weft_proto::message::{
    Capability, CollectiveOp, Credentials, Fence, LockDescription, NewObject, Proof, Reply, Request,
};
use weft_proto::{ErrorCode, Handle};
use weft_testkit::{weft_bin, Cluster, ClusterOptions};

fn user(uid: u32) -> Credentials {
    Credentials { uid, gid: uid, groups: vec![] }
}

fn hello() -> Request {
    Request::Hello { protocol_version: PROTOCOL_VERSION }
}

#[test]
fn unauthenticated_connections_are_refused() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    // A request in place of the proof.
    let mut raw = Raw::connect(&cluster);
    raw.greet(&hello());
    assert_eq!(raw.request(&Request::Ping), Err(ErrorCode::Access));
    assert!(raw.closed());
    // No proof at all, and a MAC under another key.
    for proof in [
        Proof::None,
        Proof::Key { cred: user(0), mac: vec![0; 32] },
        Proof::Key { cred: user(0), mac: key_mac(b"not the file system key, 32 bytes+", b"x") },
    ] {
        let mut raw = Raw::connect(&cluster);
        raw.greet(&hello());
        assert_eq!(raw.request(&Request::Authenticate { proof }), Err(ErrorCode::Access));
        assert!(raw.closed());
    }
    // A proof made for another connection's nonce is worth nothing here.
    let mut first = Raw::connect(&cluster);
    let (server_id, nonce) = first.greet(&hello());
    let key = weft_config::load_key(cluster.config.auth.key_file.as_deref().unwrap()).unwrap();
    let cred = user(0);
    let mac = key_mac(&key, &weft_net::auth::client_message(server_id, &nonce, &cred));
    let mut second = Raw::connect(&cluster);
    second.greet(&hello());
    assert_eq!(second.request(&Request::Authenticate { proof: Proof::Key { cred, mac } }), Err(ErrorCode::Access));
    assert!(second.closed());
    // Before authentication a frame may hold a few KiB only.
    let mut raw = Raw::connect(&cluster);
    raw.send_frame(&Frame::request(1, vec![0u8; AUTH_FRAME_BYTES_MAX as usize], vec![]));
    assert!(raw.closed());
    // And a silent connection is closed (the server's admission deadline
    // is far shorter than this socket's read timeout).
    let mut raw = Raw::connect(&cluster);
    raw.stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut byte = [0u8; 1];
    match std::io::Read::read(&mut raw.stream, &mut byte) {
        Ok(0) => {}
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("a silent connection was not closed: {other:?}"),
    }
    assert!(cluster.is_running(0));
    assert_eq!(Raw::connect(&cluster).hello().request(&Request::Ping), Ok(Reply::Done));
}

#[test]
fn forged_uids_are_refused() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let root = cluster.client();
    root.mkdir("/home", 0o777).unwrap();
    // A key holder authenticated as uid 1000 (key mode trusts key holders
    // to claim their own uid) may act only as 1000.
    let mut alice = Raw::connect(&cluster).hello_as(user(1000));
    let lookup = |cred| Request::Lookup { cred, parent: Handle::ROOT, name: "home".into() };
    assert!(matches!(alice.request(&lookup(user(1000))), Ok(Reply::Entry { .. })));
    assert_eq!(alice.request(&lookup(user(0))), Err(ErrorCode::Perm), "forged uid");
    assert_eq!(alice.request(&lookup(Credentials { groups: vec![0], ..user(1000) })), Err(ErrorCode::Perm));
    let create = |cred| Request::CreateFile {
        cred,
        parent: Handle::ROOT,
        name: "stolen".into(),
        mode: 0o644,
        strip_bytes: None,
        stripe_count: None,
        exclusive: true,
    };
    assert_eq!(alice.request(&create(user(0))), Err(ErrorCode::Perm));
    assert_eq!(alice.request(&create(user(1000))), Err(ErrorCode::Access), "as herself: mode bits of /");
    assert_eq!(root.stat("/stolen").unwrap_err(), ErrorCode::NoEntry);
    // The connection stays usable after refusals.
    assert_eq!(alice.request(&Request::Ping), Ok(Reply::Done));
    assert_eq!(root.stat("/").unwrap().kind, weft_proto::message::ObjectKind::Directory);
}

#[test]
fn a_client_cannot_pose_as_a_peer() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let key = weft_config::load_key(cluster.config.auth.key_file.as_deref().unwrap()).unwrap();
    let peer_hello = Request::PeerHello { protocol_version: PROTOCOL_VERSION, server_id: 1 };
    // A client's proof on a peer greeting, and a peer MAC under another key.
    let mut raw = Raw::connect(&cluster);
    let (server_id, nonce) = raw.greet(&peer_hello);
    let cred = user(0);
    let mac = key_mac(&key, &weft_net::auth::client_message(server_id, &nonce, &cred));
    assert_eq!(raw.request(&Request::Authenticate { proof: Proof::Key { cred, mac } }), Err(ErrorCode::Access));
    assert!(raw.closed());
    let mut raw = Raw::connect(&cluster);
    let (server_id, nonce) = raw.greet(&peer_hello);
    let mac = key_mac(b"a guessed key that is 32 bytes long.", &peer_message(server_id, &nonce, 1));
    assert_eq!(raw.request(&Request::Authenticate { proof: Proof::Peer { mac } }), Err(ErrorCode::Access));
    assert!(raw.closed());
    // With the key it is a peer.
    let mut raw = Raw::connect(&cluster);
    let (server_id, nonce) = raw.greet(&peer_hello);
    let mac = key_mac(&key, &peer_message(server_id, &nonce, 1));
    assert_eq!(raw.request(&Request::Authenticate { proof: Proof::Peer { mac } }), Ok(Reply::Done));
    assert!(matches!(raw.request(&Request::ScanObjects { after: 0, max: 10 }), Ok(Reply::Objects(_))));
}

/// Makes the cluster's configuration readable by other users (not the key).
fn open_config_to_everyone(cluster: &Cluster) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(cluster.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&cluster.config_path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// Runs `weft ARGS` as uid and gid 1000 (no supplementary groups), with
/// `preload` in `LD_PRELOAD` if given.
fn weft_as_1000(cluster: &Cluster, args: &[&str], preload: Option<&Path>) -> Output {
    let mut command = Command::new("setpriv");
    command.args(["--reuid=1000", "--regid=1000", "--clear-groups"]).arg(weft_bin()).args(args);
    command.env("WEFT_CONFIG", &cluster.config_path).current_dir("/");
    if let Some(shim) = preload {
        command.env("LD_PRELOAD", shim);
    }
    command.output().expect("run setpriv weft")
}

/// Creates `/secret` (root's, 0600) and `/mine` (uid 1000's, 0600).
fn make_files(cluster: &Cluster) {
    let root = cluster.client();
    let secret =
        root.create("/secret", weft_client::CreateOptions { mode: Some(0o600), ..Default::default() }).unwrap();
    root.write_at(&secret, 0, b"root only").unwrap();
    let mine = root.create("/mine", weft_client::CreateOptions { mode: Some(0o600), ..Default::default() }).unwrap();
    root.write_at(&mine, 0, b"user 1000").unwrap();
    root.chown("/mine", Some(1000), Some(1000)).unwrap();
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn key_mode_refuses_a_process_that_cannot_read_the_key() {
    let cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    make_files(&cluster);
    open_config_to_everyone(&cluster);
    for path in ["weft:/secret", "weft:/mine"] {
        let output = weft_as_1000(&cluster, &["cat", path], None);
        assert!(!output.status.success(), "{path}: {}", stdout(&output));
        assert!(!stdout(&output).contains("root only"));
        assert!(stderr(&output).to_lowercase().contains("permission denied"), "{}", stderr(&output));
    }
}

/// A munged of the test's own (own key, socket, pid and log files),
/// killed by its PID on drop.
struct Munged {
    child: Child,
    /// The socket path is per test process, so tests that run munged take
    /// turns (held until this guard's munged is stopped).
    _serial: std::sync::MutexGuard<'static, ()>,
}

static MUNGED_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The munged socket of this test process (a `tune` function cannot capture).
fn munge_dir() -> PathBuf {
    std::env::temp_dir().join(format!("weft-auth-munge-{}", std::process::id()))
}

impl Munged {
    fn start() -> Munged {
        use std::os::unix::fs::PermissionsExt;
        let serial = MUNGED_SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = munge_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        getrandom_bytes(&mut bytes);
        let mut file = std::fs::File::create(&key).unwrap();
        file.write_all(&bytes).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let child = weft_testkit::command_dying_with_parent(Path::new("/usr/sbin/munged"))
            .arg("--foreground")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--log-file={}", dir.join("log").display()))
            .arg(format!("--seed-file={}", dir.join("seed").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start munged (Debian package `munge`; scripts/deps.sh installs it)");
        let munged = Munged { child, _serial: serial };
        let start = Instant::now();
        while !dir.join("sock").exists() {
            assert!(start.elapsed() < Duration::from_secs(20), "munged did not create its socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        munged
    }
}

impl Drop for Munged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(munge_dir());
    }
}

fn getrandom_bytes(bytes: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom").unwrap().read_exact(bytes).unwrap();
}

fn munge_mode(config: &mut weft_config::Config) {
    config.auth.mode = weft_config::AuthMode::Munge;
    config.auth.munge_socket = Some(munge_dir().join("sock"));
}

/// `getuid()` and `geteuid()` answer 0: a process lying to its own client library.
const LYING_SHIM: &str =
    "#include <sys/types.h>\nuid_t getuid(void) { return 0; }\nuid_t geteuid(void) { return 0; }\n\
gid_t getgid(void) { return 0; }\ngid_t getegid(void) { return 0; }\n";

fn build_shim(dir: &Path) -> PathBuf {
    let source = dir.join("lying_uid.c");
    std::fs::write(&source, LYING_SHIM).unwrap();
    let shim = dir.join("lying_uid.so");
    let status = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&shim).arg(&source).status().unwrap();
    assert!(status.success(), "cc of the shim");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    shim
}

/// A raw connection authenticated with a MUNGE credential made by uid 1000.
fn munge_connection_as_1000(cluster: &Cluster) -> Raw {
    munge_connection_as_1000_to(cluster, 0)
}

/// As [`munge_connection_as_1000`], to server `id`.
fn munge_connection_as_1000_to(cluster: &Cluster, id: u32) -> Raw {
    let mut raw = Raw::connect_to(cluster, id);
    let (server_id, nonce) = raw.greet(&hello());
    let payload = weft_net::auth::munge_payload(server_id, &nonce);
    let output = Command::new("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--clear-groups", "munge", "--socket"])
        .arg(munge_dir().join("sock"))
        .args(["--string", &payload])
        .output()
        .expect("run munge as 1000");
    assert!(output.status.success(), "munge: {}", stderr(&output));
    let credential = stdout(&output).trim().to_string();
    assert_eq!(raw.request(&Request::Authenticate { proof: Proof::Munge { credential } }), Ok(Reply::Done));
    raw
}

#[test]
fn munge_binds_a_connection_to_the_real_uid() {
    let munged = Munged::start();
    let cluster = Cluster::start(ClusterOptions { servers: 2, tune: Some(munge_mode), ..Default::default() });
    make_files(&cluster);
    open_config_to_everyone(&cluster);
    // uid 1000 reads its own file, not root's.
    let output = weft_as_1000(&cluster, &["cat", "weft:/mine"], None);
    assert!(output.status.success(), "{}\n{}", stderr(&output), cluster.logs());
    assert_eq!(stdout(&output), "user 1000");
    let output = weft_as_1000(&cluster, &["cat", "weft:/secret"], None);
    assert!(!output.status.success());
    assert!(stderr(&output).to_lowercase().contains("permission denied"), "{}", stderr(&output));
    // Lying about its uid to its own client library: the library sends
    // uid 0 in every request, the server knows the connection is uid 1000.
    let shim = build_shim(cluster.dir.path());
    let output = weft_as_1000(&cluster, &["cat", "weft:/secret"], Some(&shim));
    assert!(!output.status.success(), "the liar read: {}", stdout(&output));
    assert!(!stdout(&output).contains("root only"));
    assert!(stderr(&output).to_lowercase().contains("not permitted"), "{}", stderr(&output));
    // A uid-1000 MUNGE connection may act only as 1000 and may not send
    // what only peers send.
    let mut alice = munge_connection_as_1000(&cluster);
    let lookup = |cred| Request::Lookup { cred, parent: Handle::ROOT, name: "mine".into() };
    assert!(matches!(alice.request(&lookup(user(1000))), Ok(Reply::Entry { .. })));
    assert_eq!(alice.request(&lookup(user(0))), Err(ErrorCode::Perm), "forged uid");
    let peer_only = [
        Request::ScanObjects { after: 0, max: 10 },
        Request::ScanHandleRows { table: 1, after: 0, max: 10 },
        Request::ReserveDatafiles { metadata_server: 1, count: 1 },
        Request::ListReserved { metadata_server: 1 },
        Request::ClaimReserved { metadata_server: 1, handles: vec![] },
        Request::ExchangeStatus { entries: vec![] },
        Request::MarkGrowing { datafiles: vec![] },
        Request::RemoveObject { handle: Handle::ROOT },
        Request::SetLayout {
            handle: Handle::ROOT,
            layout: weft_proto::message::FileLayout {
                distribution: weft_proto::Distribution { strip_bytes: 65536, stripe_count: 1 },
                datafiles: vec![],
            },
        },
        Request::CreateObject { cred: user(1000), target_id: 0, mode: 0o644, object: NewObject::Datafile },
        Request::RemoveDirent { cred: user(1000), parent: Handle::ROOT, name: "mine".into(), expect_directory: None },
        Request::Collective { operation: CollectiveOp::RemoveObjects, groups: vec![], fanout: 0, round: 0 },
        Request::Collective { operation: CollectiveOp::SettleSizes, groups: vec![], fanout: 0, round: 0 },
    ];
    for request in &peer_only {
        assert_eq!(alice.request(request), Err(ErrorCode::Perm), "{request:?}");
    }
    assert_eq!(alice.request(&Request::Ping), Ok(Reply::Done));
    assert_eq!(cluster.client().stat("/mine").unwrap().size, 9, "nothing was removed");
    // A MUNGE credential made for another nonce is refused.
    let mut raw = Raw::connect(&cluster);
    let (server_id, _nonce) = raw.greet(&hello());
    let payload = weft_net::auth::munge_payload(server_id, &[0u8; 32]);
    let credential = weft_net::auth::munge_encode(Some(&munge_dir().join("sock")), &payload).unwrap();
    assert_eq!(raw.request(&Request::Authenticate { proof: Proof::Munge { credential } }), Err(ErrorCode::Access));
    drop(munged);
}

/// The first datafile of `path` (holding its first strip) and its server.
fn first_datafile(cluster: &Cluster, path: &str) -> (Handle, Handle, u32) {
    let file = cluster.client().open(path, 0).unwrap();
    let datafile = file.layout.datafiles[0];
    (file.handle, datafile, cluster.config.server_of_handle(datafile).unwrap())
}

#[test]
fn data_requests_by_handle_need_a_capability_in_munge_mode() {
    let munged = Munged::start();
    let cluster = Cluster::start(ClusterOptions { servers: 2, tune: Some(munge_mode), ..Default::default() });
    make_files(&cluster);
    open_config_to_everyone(&cluster);
    let (secret, secret_data, server) = first_datafile(&cluster, "/secret");
    let (mine, mine_data, mine_server) = first_datafile(&cluster, "/mine");
    // uid 1000 forges data requests for root's 0600 file by its datafile handle.
    let mut alice = munge_connection_as_1000_to(&cluster, server);
    let forged = [
        Request::Read { handle: secret_data, offset: 0, length: 9 },
        Request::ReadList { handle: secret_data, regions: vec![(0, 9)], total_length: 9 },
        Request::Write { handle: secret_data, offset: 0, length: 0 },
        Request::TruncateDatafile { handle: secret_data, local_size: 0 },
    ];
    for request in &forged {
        assert_eq!(alice.request(request), Err(ErrorCode::Access), "{request:?}");
    }
    // Its metadata server issues no capability for it.
    let mut alice_meta = munge_connection_as_1000_to(&cluster, cluster.config.server_of_handle(secret).unwrap());
    for rights in [READ, WRITE] {
        let issue = Request::IssueCapability { cred: user(1000), handle: secret, rights };
        assert_eq!(alice_meta.request(&issue), Err(ErrorCode::Access));
    }
    // A made-up capability, and a real one for another file, another
    // right or another uid, are refused.
    let made_up = Capability {
        datafiles: vec![secret_data],
        uid: 1000,
        rights: READ | WRITE,
        expires_ms: u64::MAX,
        mac: vec![7; 32],
    };
    let read = |capability: &Capability, handle| Request::Capable {
        capability: capability.clone(),
        request: Box::new(Request::Read { handle, offset: 0, length: 9 }),
    };
    assert_eq!(alice.request(&read(&made_up, secret_data)), Err(ErrorCode::Access), "made up");
    let mut alice_mine = munge_connection_as_1000_to(&cluster, cluster.config.server_of_handle(mine).unwrap());
    let Ok(Reply::Capability(mine_read)) =
        alice_mine.request(&Request::IssueCapability { cred: user(1000), handle: mine, rights: READ })
    else {
        panic!("uid 1000 may read its own file")
    };
    assert_eq!(mine_read.uid, 1000);
    assert_eq!(alice.request(&read(&mine_read, secret_data)), Err(ErrorCode::Access), "another file");
    let mut alice_on_mine = munge_connection_as_1000_to(&cluster, mine_server);
    let truncate = Request::Capable {
        capability: mine_read.clone(),
        request: Box::new(Request::TruncateDatafile { handle: mine_data, local_size: 0 }),
    };
    assert_eq!(alice_on_mine.request(&truncate), Err(ErrorCode::Access), "a read capability to truncate");
    assert!(matches!(alice_on_mine.request(&read(&mine_read, mine_data)), Ok(Reply::Io { bytes: 9, .. })));
    let misplaced = Request::Capable {
        capability: mine_read.clone(),
        request: Box::new(Request::Lookup { cred: user(1000), parent: Handle::ROOT, name: "mine".into() }),
    };
    assert_eq!(alice_on_mine.request(&misplaced), Err(ErrorCode::Protocol));
    // Root's capability for the file, presented on uid 1000's connection.
    let root_capability = {
        let mut root = Raw::connect_to(&cluster, cluster.config.server_of_handle(secret).unwrap()).hello();
        let Ok(Reply::Capability(capability)) =
            root.request(&Request::IssueCapability { cred: user(0), handle: secret, rights: READ })
        else {
            panic!("root may read")
        };
        capability
    };
    assert_eq!(alice.request(&read(&root_capability, secret_data)), Err(ErrorCode::Access), "another uid");
    // Nothing changed; the normal path works for uid 1000 (the CLI reads,
    // creates, truncates and writes its own file through capabilities).
    let root = cluster.client();
    let file = root.open("/secret", 0).unwrap();
    let mut buf = [0u8; 9];
    assert_eq!(root.read_at(&file, 0, &mut buf).unwrap(), 9);
    assert_eq!(&buf, b"root only");
    let local = cluster.dir.path().join("new-mine");
    std::fs::write(&local, b"rewritten by 1000").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o644)).unwrap();
    root.mkdir("/u", 0o755).unwrap();
    root.chown("/u", Some(1000), Some(1000)).unwrap();
    for _ in 0..2 {
        // Created, then rewritten (truncated first) by uid 1000.
        let output = weft_as_1000(&cluster, &["cp", local.to_str().unwrap(), "weft:/u/new"], None);
        assert!(output.status.success(), "{}\n{}", stderr(&output), cluster.logs());
        let output = weft_as_1000(&cluster, &["cat", "weft:/u/new"], None);
        assert_eq!(stdout(&output), "rewritten by 1000", "{}", stderr(&output));
    }
    let output = weft_as_1000(&cluster, &["cp", local.to_str().unwrap(), "weft:/secret"], None);
    assert!(!output.status.success());
    assert_eq!(root.read_at(&file, 0, &mut buf).unwrap(), 9);
    assert_eq!(&buf, b"root only");
    drop(munged);
}

#[test]
fn lock_owner_ids_are_bound_to_the_connections_uid() {
    let cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let file = cluster.client().create("/locked", weft_client::CreateOptions::default()).unwrap();
    let datafile = file.layout.datafiles[0];
    let lock = |owner| Request::DlmAcquire {
        owner,
        lease_ms: 0,
        exclusive: true,
        lock: LockDescription::Ranges {
            handle: datafile,
            distribution: file.layout.distribution,
            stripe_index: 0,
            ranges: vec![(0, 100)],
        },
        until: u64::MAX,
        block: false,
        wait_ms: 0,
    };
    let fenced =
        |fence| Request::Fenced { fence, request: Box::new(Request::Write { handle: datafile, offset: 0, length: 0 }) };
    const OWNER: u64 = 0x1234_5677;
    // Key mode: key holders authenticate as the uid they claim.
    let mut alice = Raw::connect(&cluster).hello_as(user(1000));
    let mut mallory = Raw::connect(&cluster).hello_as(user(2000));
    let Ok(Reply::LockGrant { request, next: u64::MAX, epoch, .. }) = alice.request(&lock(OWNER)) else {
        panic!("alice locks bytes 0..100")
    };
    let alice_fence = Fence { owner: OWNER, epoch, requests: vec![request] };
    // Mallory names alice's owner id: to release her lock, to write under
    // her fence, and to take the bytes as if it were the same owner.
    let _ = mallory.request(&Request::DlmRelease { owner: OWNER, request, from: None });
    let _ = mallory.request(&Request::DlmRenew { owner: OWNER });
    assert_eq!(mallory.request(&fenced(alice_fence.clone())), Err(ErrorCode::Stale), "another uid's fence");
    let Ok(Reply::LockGrant { request: mallory_request, next, .. }) = mallory.request(&lock(OWNER)) else {
        panic!("mallory's acquire is answered")
    };
    assert_eq!(next, 0, "alice's lock still excludes mallory, whatever id it names");
    assert!(matches!(alice.request(&fenced(alice_fence.clone())), Ok(Reply::Io { .. })), "alice still holds it");
    // Alice's id is hers on any of her connections.
    let mut alice_again = Raw::connect(&cluster).hello_as(user(1000));
    assert!(alice_again.request(&Request::DlmRelease { owner: OWNER, request, from: None }).is_ok());
    assert_eq!(alice.request(&fenced(alice_fence)), Err(ErrorCode::Stale), "released");
    assert!(mallory.request(&Request::DlmRelease { owner: OWNER, request: mallory_request, from: None }).is_ok());
    let Ok(Reply::LockGrant { next: u64::MAX, .. }) = mallory.request(&lock(0x999)) else {
        panic!("the bytes are free once alice released them")
    };
}
