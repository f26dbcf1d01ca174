//! One client (or peer) connection: framing, flow control and admission;
//! a reader loop and a writer task. What a request means is
//! [`crate::dispatch`]'s business: each admitted request runs as its own
//! future (first step inline, then its own task if it waits), which calls
//! the dispatcher with a [`Link`] to this connection.
//!
//! The reader never blocks on a slow request: a request's first step runs
//! in the reader (most finish there), and one that has to wait continues in
//! its own task; bulk chunks of a write go to that request's bounded channel, and
//! the writer task owns the socket's write half, so two peers can never
//! deadlock both blocked in `write()`.
//!
//! Admission: before anything else a connection must authenticate
//! ([`crate::auth`]): a `Hello` (or `PeerHello`), answered with a fresh
//! nonce, then an `Authenticate` proof, each frame at most
//! `AUTH_FRAME_BYTES_MAX` bytes and both within `AUTH_TIMEOUT_MS` of the
//! accept; otherwise the connection is closed. The identity it proves is
//! fixed for the connection; every later request is checked against it
//! ([`crate::auth::admit`]) before its task is spawned, and the lock owner
//! ids it names are bound to its uid ([`crate::auth::bind_owner`]). At most
//! `UNAUTHENTICATED_CONNECTIONS_MAX` connections wait to authenticate at
//! once; more are closed at accept. A request whose client stops taking
//! or sending its data for `link::DATA_STALL_MS` fails ([`crate::link`]).
//!
//! Flow control: a writer may have at most `WRITE_WINDOW_CHUNKS` chunks of
//! one request unacknowledged (the request frame's own payload counts as
//! one); the server grants one credit per chunk it has stored. A peer that
//! overruns its window is closed. Requests beyond `REQUESTS_INFLIGHT_MAX`
//! are answered `Busy`. Data frames for requests that already finished
//! (e.g. failed early) are discarded.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use weft_proto::frame::{read_frame, read_frame_at_most, write_frame, Frame, FrameKind};
use weft_proto::limits::{self, PROTOCOL_VERSION, REQUESTS_INFLIGHT_MAX, WRITE_WINDOW_CHUNKS};
use weft_proto::message::{self, Reply, ReplyResult, Request};
use weft_proto::ErrorCode;

use crate::auth::{Auth, Greeting, Identity};
use crate::link::Link;
use crate::service::Service;

/// Frames queued for the writer task before request tasks wait.
const OUTGOING_FRAMES_MAX: usize = 64;

type Uploads = Arc<Mutex<HashMap<u64, mpsc::Sender<Frame>>>>;

type Reader = BufReader<tokio::net::tcp::OwnedReadHalf>;

/// Serves one connection until the peer closes it or violates the
/// protocol; it must authenticate with `auth` first.
pub async fn serve(stream: TcpStream, service: Arc<Service>, auth: Arc<Auth>) {
    let Some(slot) = auth.unauthenticated_slot() else {
        return; // too many connections waiting to authenticate: closed
    };
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let (read_half, write_half) = stream.into_split();
    let (outgoing, outgoing_rx) = mpsc::channel(OUTGOING_FRAMES_MAX);
    let writer = tokio::spawn(write_loop(write_half, outgoing_rx));
    let mut reader = BufReader::with_capacity(256 * 1024, read_half);
    let mut connection = Connection {
        service,
        outgoing,
        uploads: Arc::default(),
        inflight: Arc::new(AtomicU32::new(0)),
        identity: Identity::Anyone,
    };
    let deadline = std::time::Duration::from_millis(limits::AUTH_TIMEOUT_MS as u64);
    let admitted = match tokio::time::timeout(deadline, connection.authenticate(&mut reader, &auth)).await {
        Ok(admitted) => admitted,
        Err(_) => Err(format!("not authenticated within {} ms", limits::AUTH_TIMEOUT_MS)),
    };
    drop(slot);
    let result = match admitted {
        Ok(Some(inflight_max)) => connection.read_loop(&mut reader, inflight_max).await,
        Ok(None) => Ok(()),
        Err(reason) => Err(reason),
    };
    if let Err(reason) = result {
        tracing::warn!("closing connection from {peer}: {reason}");
    }
    drop(connection);
    let _ = writer.await;
}

struct Connection {
    service: Arc<Service>,
    outgoing: mpsc::Sender<Frame>,
    uploads: Uploads,
    inflight: Arc<AtomicU32>,
    /// Who the connection proved to be (set once, by `authenticate`).
    identity: Identity,
}

async fn write_loop(write_half: OwnedWriteHalf, mut frames: mpsc::Receiver<Frame>) {
    let mut writer = BufWriter::with_capacity(256 * 1024, write_half);
    while let Some(frame) = frames.recv().await {
        if write_frame(&mut writer, &frame).await.is_err() {
            return;
        }
        while let Ok(frame) = frames.try_recv() {
            if write_frame(&mut writer, &frame).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}

fn reply_frame(request_id: u64, reply: &ReplyResult) -> Frame {
    Frame::reply(request_id, message::encode(reply))
}

impl Connection {
    async fn send_reply(&self, request_id: u64, reply: ReplyResult) {
        let _ = self.outgoing.send(reply_frame(request_id, &reply)).await;
    }

    /// One request frame of an unauthenticated connection (bounded);
    /// `None` if the peer closed.
    async fn greeting_frame(&self, reader: &mut Reader) -> Result<Option<Frame>, String> {
        let frame = match read_frame_at_most(reader, limits::AUTH_FRAME_BYTES_MAX as u64).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(None),
            Err(err) => return Err(format!("before authentication: {err}")),
        };
        if frame.header.protocol_version != PROTOCOL_VERSION {
            self.send_reply(frame.header.request_id, Err(ErrorCode::VersionMismatch)).await;
            return Err(format!(
                "refused: a frame of protocol version {}; this server speaks version {PROTOCOL_VERSION}",
                frame.header.protocol_version
            ));
        }
        if frame.header.kind != FrameKind::Request || !frame.payload.is_empty() {
            self.send_reply(frame.header.request_id, Err(ErrorCode::Protocol)).await;
            return Err("before authentication: not a request frame".into());
        }
        Ok(Some(frame))
    }

    /// The greeting (`Hello` or `PeerHello`, answered with a nonce) and
    /// the proof; binds the connection to the proven identity. Returns its
    /// in-flight limit (peers are admitted apart from clients), `None` if
    /// the peer closed first.
    async fn authenticate(&mut self, reader: &mut Reader, auth: &Auth) -> Result<Option<u32>, String> {
        let Some(frame) = self.greeting_frame(reader).await? else { return Ok(None) };
        let request_id = frame.header.request_id;
        let (greeting, inflight_max) = match message::decode::<Request>(&frame.body) {
            Ok(Request::Hello { protocol_version }) if protocol_version == PROTOCOL_VERSION => {
                (Greeting::Client, REQUESTS_INFLIGHT_MAX)
            }
            Ok(Request::PeerHello { protocol_version, server_id }) if protocol_version == PROTOCOL_VERSION => {
                (Greeting::Peer(server_id), limits::PEER_REQUESTS_INFLIGHT_MAX)
            }
            Ok(Request::Hello { protocol_version }) => {
                self.send_reply(request_id, Err(ErrorCode::VersionMismatch)).await;
                return Err(format!(
                    "refused: a client speaks protocol version {protocol_version}; this server speaks version \
                     {PROTOCOL_VERSION}"
                ));
            }
            Ok(Request::PeerHello { protocol_version, server_id }) => {
                self.send_reply(request_id, Err(ErrorCode::VersionMismatch)).await;
                return Err(format!(
                    "refused: server {server_id} speaks protocol version {protocol_version}; this server speaks \
                     version {PROTOCOL_VERSION}"
                ));
            }
            _ => {
                self.send_reply(request_id, Err(ErrorCode::Protocol)).await;
                return Err("first request was not hello".into());
            }
        };
        let nonce = weft_net::auth::new_nonce();
        let reply = Reply::Hello {
            protocol_version: PROTOCOL_VERSION,
            server_id: self.service.server_id,
            nonce: nonce.clone(),
        };
        self.send_reply(request_id, Ok(reply)).await;
        let Some(frame) = self.greeting_frame(reader).await? else { return Ok(None) };
        let request_id = frame.header.request_id;
        let Ok(Request::Authenticate { proof }) = message::decode::<Request>(&frame.body) else {
            self.send_reply(request_id, Err(ErrorCode::Access)).await;
            return Err("second request was not authenticate".into());
        };
        match auth.verify(greeting, &nonce, proof).await {
            Ok(identity) => {
                self.identity = identity;
                self.send_reply(request_id, Ok(Reply::Done)).await;
                Ok(Some(inflight_max))
            }
            Err(code) => {
                self.send_reply(request_id, Err(code)).await;
                Err(format!("authentication failed ({greeting:?})"))
            }
        }
    }

    async fn read_loop(&self, reader: &mut Reader, inflight_max: u32) -> Result<(), String> {
        loop {
            let frame = match read_frame(reader).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(err) => return Err(err.to_string()),
            };
            let request_id = frame.header.request_id;
            if frame.header.protocol_version != PROTOCOL_VERSION {
                self.send_reply(request_id, Err(ErrorCode::VersionMismatch)).await;
                return Err(format!(
                    "refused: a frame of protocol version {}; this server speaks version {PROTOCOL_VERSION}",
                    frame.header.protocol_version
                ));
            }
            match frame.header.kind {
                FrameKind::Request => self.dispatch(frame, inflight_max).await,
                FrameKind::Data => self.accept_chunk(frame)?,
                FrameKind::Credit | FrameKind::Reply => return Err("unexpected frame kind from client".into()),
            }
        }
    }

    fn accept_chunk(&self, frame: Frame) -> Result<(), String> {
        let uploads = self.uploads.lock().expect("uploads lock");
        let Some(channel) = uploads.get(&frame.header.request_id) else {
            return Ok(()); // the request already finished (e.g. failed early)
        };
        channel.try_send(frame).map_err(|_| "write window overrun".to_string())
    }

    async fn dispatch(&self, frame: Frame, inflight_max: u32) {
        let request_id = frame.header.request_id;
        let request = match message::decode::<Request>(&frame.body) {
            Ok(request) => request,
            Err(code) => return self.send_reply(request_id, Err(code)).await,
        };
        self.service.storage.counters.request(request.kind_name());
        if let Err(code) = crate::auth::admit(&self.identity, &request) {
            return self.send_reply(request_id, Err(code)).await;
        }
        let request = crate::auth::bind_owner(&self.identity, request);
        let is_write = request.carries_data();
        if !frame.payload.is_empty() && !is_write {
            return self.send_reply(request_id, Err(ErrorCode::Protocol)).await;
        }
        if self.inflight.fetch_add(1, Ordering::AcqRel) >= inflight_max {
            self.inflight.fetch_sub(1, Ordering::AcqRel);
            return self.send_reply(request_id, Err(ErrorCode::Busy)).await;
        }
        let task = RequestTask {
            service: self.service.clone(),
            outgoing: self.outgoing.clone(),
            uploads: self.uploads.clone(),
            inflight: self.inflight.clone(),
            request_id,
            arrived: std::time::Instant::now(),
        };
        let chunks = is_write.then(|| {
            let (sender, receiver) = mpsc::channel(WRITE_WINDOW_CHUNKS as usize);
            self.uploads.lock().expect("uploads lock").insert(request_id, sender);
            receiver
        });
        // Most requests (a stat of a quiet file, a cached read, a lookup)
        // finish without waiting: run the first step here and spawn a task
        // only for one that has to wait (the spawn and its wake-up cost
        // more than such a request). Nothing here blocks: a step that would
        // (the disk, the committer, a peer, a full reply queue, chunks
        // still to come) returns `Pending` and continues in its own task,
        // which polls it again with its own waker.
        let mut running = Box::pin(task.run(request, frame.payload, chunks));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        if running.as_mut().poll(&mut context).is_pending() {
            tokio::spawn(running);
        }
    }
}

/// One request being served.
struct RequestTask {
    service: Arc<Service>,
    outgoing: mpsc::Sender<Frame>,
    uploads: Uploads,
    inflight: Arc<AtomicU32>,
    request_id: u64,
    /// When the request was decoded (start of its service time).
    arrived: std::time::Instant,
}

impl RequestTask {
    async fn run(self, request: Request, first_chunk: Vec<u8>, chunks: Option<mpsc::Receiver<Frame>>) {
        let kind = request.kind_name();
        let uploading = chunks.is_some();
        let mut link = Link::new(self.request_id, self.outgoing.clone(), first_chunk, chunks);
        let reply = crate::dispatch::dispatch(&self.service, request, &mut link).await;
        drop(link);
        let bytes = match &reply {
            Ok(Reply::Io { bytes, .. }) => *bytes,
            _ => 0,
        };
        if uploading {
            self.uploads.lock().expect("uploads lock").remove(&self.request_id);
        }
        self.service.storage.counters.finished(kind, bytes, self.arrived.elapsed());
        // The slot is free before the reply can reach the client, so a
        // client that keeps exactly the limit in flight is never refused.
        self.inflight.fetch_sub(1, Ordering::AcqRel);
        let _ = self.outgoing.send(reply_frame(self.request_id, &reply)).await;
    }
}
