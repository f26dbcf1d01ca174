//! Hostile and malformed input: the server answers with an error or drops
//! that one connection, never panics, and keeps serving everyone else.

mod raw;

use std::io::Write;

use raw::Raw;
use weft_proto::frame::Frame;
use weft_proto::limits::{PROTOCOL_VERSION, WRITE_WINDOW_CHUNKS};
use weft_proto::message::{self, Reply, Request};
use weft_proto::{ErrorCode, Handle};
use weft_testkit::{Cluster, ClusterOptions};

fn still_serving(cluster: &Cluster) {
    let client = cluster.client();
    client.mkdir_all("/alive", 0o755).unwrap();
    assert!(client.stat("/alive").is_ok());
    let mut raw = Raw::connect(cluster).hello();
    assert_eq!(raw.request(&Request::Ping), Ok(Reply::Done));
}

#[test]
fn malformed_frames_close_only_that_connection() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    // Garbage instead of a frame.
    let mut raw = Raw::connect(&cluster);
    raw.stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(raw.closed());
    // A header declaring an oversized body.
    let mut raw = Raw::connect(&cluster).hello();
    let mut header = Frame::request(9, vec![], vec![]).header.encode();
    header[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    raw.stream.write_all(&header).unwrap();
    assert!(raw.closed());
    // An unknown frame kind.
    let mut raw = Raw::connect(&cluster).hello();
    let mut header = Frame::request(9, vec![], vec![]).header.encode();
    header[6] = 77;
    raw.stream.write_all(&header).unwrap();
    assert!(raw.closed());
    // A frame cut short, then the peer goes away.
    let mut raw = Raw::connect(&cluster).hello();
    let frame = Frame::request(5, message::encode(&Request::Ping), vec![]);
    raw.stream.write_all(&frame.header.encode()).unwrap();
    raw.stream.write_all(&frame.body[..frame.body.len() / 2]).unwrap();
    drop(raw);
    // A reply frame sent by a client.
    let mut raw = Raw::connect(&cluster).hello();
    raw.send_frame(&Frame::reply(3, message::encode(&Ok::<Reply, ErrorCode>(Reply::Done))));
    assert!(raw.closed());
    assert!(cluster.is_running(0));
    still_serving(&cluster);
}

#[test]
fn protocol_version_is_checked() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let mut raw = Raw::connect(&cluster);
    assert_eq!(
        raw.request(&Request::Hello { protocol_version: PROTOCOL_VERSION + 1 }),
        Err(ErrorCode::VersionMismatch)
    );
    assert!(raw.closed());
    let mut raw = Raw::connect(&cluster);
    let mut frame = Frame::request(1, message::encode(&Request::Hello { protocol_version: PROTOCOL_VERSION }), vec![]);
    frame.header.protocol_version = PROTOCOL_VERSION + 7;
    raw.send_frame(&frame);
    assert_eq!(raw.reply_for(1), Err(ErrorCode::VersionMismatch));
    assert!(raw.closed());
    // A server of another protocol version is refused as a peer.
    let mut raw = Raw::connect(&cluster);
    assert_eq!(
        raw.request(&Request::PeerHello { protocol_version: PROTOCOL_VERSION + 1, server_id: 9 }),
        Err(ErrorCode::VersionMismatch)
    );
    assert!(raw.closed());
    let refusal =
        format!("refused: server 9 speaks protocol version {}; this server speaks version", PROTOCOL_VERSION + 1);
    assert!(cluster.logs().contains(&refusal), "{}", cluster.logs());
    // A request before hello.
    let mut raw = Raw::connect(&cluster);
    assert_eq!(raw.request(&Request::Ping), Err(ErrorCode::Protocol));
    assert!(raw.closed());
    assert!(cluster.is_running(0));
    still_serving(&cluster);
}

#[test]
fn bad_bodies_and_handles_get_error_replies() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 2, ..Default::default() });
    let client = cluster.client();
    let file = client.create("/f", Default::default()).unwrap();
    let mut raw = Raw::connect(&cluster).hello();
    // Undecodable body and an unknown request kind: error reply, connection stays.
    raw.send_frame(&Frame::request(100, vec![0xff, 0xff, 0xff, 0xff, 0x0f], vec![]));
    assert_eq!(raw.reply_for(100), Err(ErrorCode::Protocol));
    raw.send_frame(&Frame::request(101, vec![200, 1], vec![]));
    assert_eq!(raw.reply_for(101), Err(ErrorCode::Protocol));
    // Payload on a request that takes none.
    raw.send_frame(&Frame::request(102, message::encode(&Request::Ping), vec![1, 2, 3]));
    assert_eq!(raw.reply_for(102), Err(ErrorCode::Protocol));
    // Handles that name nothing, or something of the wrong kind, or another server's target.
    let missing = Handle::new(0, 999_999).unwrap();
    assert_eq!(raw.request(&Request::GetAttr { handle: missing }), Err(ErrorCode::Stale));
    assert_eq!(raw.request(&Request::GetAttr { handle: Handle::new(1, 20).unwrap() }), Err(ErrorCode::Stale));
    assert_eq!(raw.request(&Request::GetAttr { handle: Handle::new(77, 20).unwrap() }), Err(ErrorCode::Stale));
    assert_eq!(raw.request(&Request::Read { handle: Handle::ROOT, offset: 0, length: 10 }), Err(ErrorCode::Invalid));
    assert_eq!(raw.request(&Request::Read { handle: missing, offset: 0, length: 10 }), Err(ErrorCode::Stale));
    assert!(raw.request(&Request::Read { handle: file.handle, offset: u64::MAX - 5, length: 10 }).is_err());
    assert_eq!(raw.request(&Request::TruncateDatafile { handle: missing, local_size: 1 }), Err(ErrorCode::Stale));
    assert_eq!(raw.request(&Request::RemoveObject { handle: Handle::ROOT }), Err(ErrorCode::Busy));
    assert_eq!(raw.request(&Request::DatafileSizes { handles: vec![Handle::ROOT; 5000] }), Err(ErrorCode::Invalid));
    assert_eq!(raw.request(&Request::Ping), Ok(Reply::Done));
    assert!(cluster.is_running(0));
    still_serving(&cluster);
}

#[test]
fn write_window_overrun_closes_the_connection() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let client = cluster.client();
    client.create("/w", Default::default()).unwrap();
    let datafile = client.stat("/w").unwrap().layout.unwrap().datafiles[0];
    let mut raw = Raw::connect(&cluster).hello();
    let request = Request::Write { handle: datafile, offset: 0, length: 1 << 30 };
    raw.send_frame(&Frame::request(7, message::encode(&request), vec![0u8; 1024]));
    // Far more chunks than the window allows, without waiting for credit.
    let chunk = vec![0u8; 64];
    let mut closed_early = false;
    for i in 0..(WRITE_WINDOW_CHUNKS as u64 * 64) {
        let frame = Frame::data(7, 1024 + i * 64, chunk.clone());
        let mut bytes = frame.header.encode().to_vec();
        bytes.extend_from_slice(&frame.payload);
        if raw.stream.write_all(&bytes).is_err() {
            closed_early = true;
            break;
        }
    }
    assert!(closed_early || raw.closed());
    assert!(cluster.is_running(0));
    still_serving(&cluster);
}

#[test]
fn data_frames_for_unknown_requests_are_ignored() {
    let mut cluster = Cluster::start(ClusterOptions { servers: 1, ..Default::default() });
    let mut raw = Raw::connect(&cluster).hello();
    raw.send_frame(&Frame::data(12345, 0, vec![1; 100]));
    raw.send_frame(&Frame::credit(12345, 1)); // credit frames from a client are a violation
    assert!(raw.closed());
    let mut raw = Raw::connect(&cluster).hello();
    raw.send_frame(&Frame::data(12345, 0, vec![1; 100]));
    assert_eq!(raw.request(&Request::Ping), Ok(Reply::Done));
    assert!(cluster.is_running(0));
}
