//! A hand-driven connection for tests that speak the protocol frame by
//! frame (hostile input, authentication).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use weft_net::auth::{client_message, key_mac};
use weft_proto::frame::{Frame, FrameHeader, FrameKind};
use weft_proto::limits::{FRAME_HEADER_BYTES, PROTOCOL_VERSION};
use weft_proto::message::{self, Credentials, Proof, Reply, ReplyResult, Request};
use weft_testkit::Cluster;

/// A hand-driven connection to one server.
pub struct Raw {
    /// The socket.
    pub stream: TcpStream,
    next_id: u64,
    key: Option<Vec<u8>>,
}

impl Raw {
    /// Connects to server 0 of `cluster` (not yet greeted).
    pub fn connect(cluster: &Cluster) -> Raw {
        Raw::connect_to(cluster, 0)
    }

    /// Connects to server `id` of `cluster` (not yet greeted).
    pub fn connect_to(cluster: &Cluster, id: u32) -> Raw {
        let stream = TcpStream::connect(cluster.address(id)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let key = cluster.config.auth.key_file.as_deref().map(|path| weft_config::load_key(path).unwrap());
        Raw { stream, next_id: 1, key }
    }

    /// Sends one frame.
    pub fn send_frame(&mut self, frame: &Frame) {
        let mut bytes = frame.header.encode().to_vec();
        bytes.extend_from_slice(&frame.body);
        bytes.extend_from_slice(&frame.payload);
        self.stream.write_all(&bytes).unwrap();
    }

    /// Sends a request and waits for its reply.
    pub fn request(&mut self, request: &Request) -> ReplyResult {
        let id = self.next_id;
        self.next_id += 1;
        self.send_frame(&Frame::request(id, message::encode(request), vec![]));
        self.reply_for(id)
    }

    /// Waits for the reply to request `id`.
    pub fn reply_for(&mut self, id: u64) -> ReplyResult {
        loop {
            let (header, body) = self.read_frame().expect("connection open");
            if header.kind == FrameKind::Reply && header.request_id == id {
                return message::decode::<ReplyResult>(&body).unwrap();
            }
        }
    }

    /// Reads one frame (`None` once closed).
    pub fn read_frame(&mut self) -> Option<(FrameHeader, Vec<u8>)> {
        let mut fixed = [0u8; FRAME_HEADER_BYTES];
        self.stream.read_exact(&mut fixed).ok()?;
        let header = FrameHeader::decode(&fixed).unwrap();
        let mut body = vec![0u8; header.header_len as usize + header.payload_len as usize];
        self.stream.read_exact(&mut body).ok()?;
        body.truncate(header.header_len as usize);
        Some((header, body))
    }

    /// Says hello; returns the server id and nonce of the reply.
    pub fn greet(&mut self, greeting: &Request) -> (u32, Vec<u8>) {
        match self.request(greeting) {
            Ok(Reply::Hello { server_id, nonce, .. }) => (server_id, nonce),
            other => panic!("hello: {other:?}"),
        }
    }

    /// Says hello and authenticates with the key as `cred`.
    pub fn hello_as(mut self, cred: Credentials) -> Raw {
        let (server_id, nonce) = self.greet(&Request::Hello { protocol_version: PROTOCOL_VERSION });
        let key = self.key.clone().expect("key file");
        let mac = key_mac(&key, &client_message(server_id, &nonce, &cred));
        assert_eq!(self.request(&Request::Authenticate { proof: Proof::Key { cred, mac } }), Ok(Reply::Done));
        self
    }

    /// Says hello and authenticates with the key as this process.
    pub fn hello(self) -> Raw {
        self.hello_as(weft_net::auth::process_credentials())
    }

    /// True if the server closed the connection (EOF or reset).
    pub fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        loop {
            match self.stream.read(&mut byte) {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue, // drain an error reply first
            }
        }
    }
}
