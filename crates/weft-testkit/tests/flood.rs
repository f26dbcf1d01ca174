//! Floods and stopped clients against a real server: connections that do
//! not authenticate are bounded (`UNAUTHENTICATED_CONNECTIONS_MAX`; more are
//! closed at once) while authenticated clients keep being served; a client
//! that stops taking its data (a connection that stops reading, a `weft`
//! process stopped with SIGSTOP) does not stall others: its request fails
//! after `DATA_STALL_MS` and releases the datafile, so a truncate waiting
//! for it completes.

mod raw;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use raw::Raw;
use weft_proto::frame::Frame;
use weft_proto::limits::{PROTOCOL_VERSION, UNAUTHENTICATED_CONNECTIONS_MAX};
use weft_proto::message::{self, Reply, Request};
use weft_testkit::{command_dying_with_parent, weft_bin, Cluster, ClusterOptions};

#[test]
fn unauthenticated_connections_are_bounded_and_authenticated_clients_are_served() {
    let cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let client = cluster.client();
    let file = client.create("/f", weft_client::CreateOptions::default()).unwrap();
    client.write_at(&file, 0, b"served").unwrap();
    let mut authenticated = Raw::connect(&cluster).hello();
    // Connections that never authenticate: twice the bound, all connected
    // before any says hello.
    let flood_size = 2 * UNAUTHENTICATED_CONNECTIONS_MAX;
    let mut flood: Vec<Raw> = (0..flood_size).map(|_| Raw::connect(&cluster)).collect();
    let (mut greeted, mut closed) = (0, 0);
    for raw in &mut flood {
        let hello = Request::Hello { protocol_version: PROTOCOL_VERSION };
        raw.send_frame(&Frame::request(1, message::encode(&hello), vec![]));
        match raw.read_frame() {
            Some(_) => greeted += 1,
            None => closed += 1,
        }
    }
    assert_eq!(greeted + closed, flood_size);
    assert!(greeted <= UNAUTHENTICATED_CONNECTIONS_MAX, "{greeted} unauthenticated connections kept");
    assert!(closed >= flood_size - UNAUTHENTICATED_CONNECTIONS_MAX, "{closed} closed");
    // Meanwhile authenticated connections are served.
    assert_eq!(authenticated.request(&Request::Ping), Ok(Reply::Done));
    let mut buf = [0u8; 6];
    assert_eq!(client.read_at(&file, 0, &mut buf).unwrap(), 6);
    assert_eq!(&buf, b"served");
    // Once the flood ends, new clients connect.
    drop(flood);
    let fresh = cluster.client();
    let start = Instant::now();
    loop {
        // The server notices the closed flood connections as it reads them.
        match fresh.read_at(&file, 0, &mut buf) {
            Ok(6) => break,
            other => assert!(start.elapsed() < Duration::from_secs(30), "no new client served: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(&buf, b"served");
}

#[test]
fn a_client_that_stops_taking_its_data_does_not_stall_others() {
    let cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let client = cluster.client();
    let big = client.create("/big", weft_client::CreateOptions::default()).unwrap();
    client.truncate_file(&big, 1 << 30).unwrap(); // 1 GiB of holes, read as zeros
    let other = client.create("/other", weft_client::CreateOptions::default()).unwrap();
    client.write_at(&other, 0, b"other").unwrap();
    // A connection that asks for 512 MiB and never reads: the server's
    // reply stream fills the socket and its queue, then waits.
    let mut stalled = Raw::connect(&cluster).hello();
    let datafile = big.layout.datafiles[0];
    let read = Request::Read { handle: datafile, offset: 0, length: 512 << 20 };
    stalled.send_frame(&Frame::request(7, message::encode(&read), vec![]));
    // A `weft cat` of the same file, stopped while it reads.
    let mut cat = command_dying_with_parent(&weft_bin())
        .args(["cat", "weft:/big"])
        .env("WEFT_CONFIG", &cluster.config_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn weft cat");
    std::thread::sleep(Duration::from_millis(500));
    let pid = cat.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    // Others are served: another file reads, and the truncate of the
    // stalled file (it waits for the readers to let go of the datafile)
    // completes within the client's request timeout.
    let mut buf = [0u8; 5];
    assert_eq!(client.read_at(&other, 0, &mut buf).unwrap(), 5);
    assert_eq!(&buf, b"other");
    let start = Instant::now();
    let truncated = client.truncate_file(&big, 4096);
    assert!(truncated.is_ok(), "{truncated:?} after {:?}\n{}", start.elapsed(), cluster.logs());
    assert_eq!(client.stat("/big").unwrap().size, 4096);
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    let _ = cat.kill();
    let _ = cat.wait();
    // The stalled request ended with an error reply (TimedOut), or the
    // connection was closed.
    drop(stalled);
}
