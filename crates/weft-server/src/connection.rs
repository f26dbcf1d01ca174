//! One client (or peer) connection: a reader loop and a writer task.
//!
//! The reader never blocks on a slow request: each request runs in its own
//! task, bulk chunks of a write go to that request's bounded channel, and
//! the writer task owns the socket's write half, so two peers can never
//! deadlock both blocked in `write()`.
//!
//! Flow control: a writer may have at most `WRITE_WINDOW_CHUNKS` chunks of
//! one request unacknowledged (the request frame's own payload counts as
//! one); the server grants one credit per chunk it has stored. A peer that
//! overruns its window is closed. Requests beyond `REQUESTS_INFLIGHT_MAX`
//! are answered `Busy`. Data frames for requests that already finished
//! (e.g. failed early) are discarded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use weft_proto::frame::{read_frame, write_frame, Frame, FrameKind};
use weft_proto::limits::{self, CHUNK_BYTES_MAX, PROTOCOL_VERSION, REQUESTS_INFLIGHT_MAX, WRITE_WINDOW_CHUNKS};
use weft_proto::message::{self, Reply, ReplyResult, Request};
use weft_proto::{ErrorCode, Handle, WeftResult};

use crate::service::Service;

/// Frames queued for the writer task before request tasks wait.
const OUTGOING_FRAMES_MAX: usize = 64;

type Uploads = Arc<Mutex<HashMap<u64, mpsc::Sender<Frame>>>>;

/// Serves one connection until the peer closes it or violates the protocol.
pub async fn serve(stream: TcpStream, service: Arc<Service>) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let (read_half, write_half) = stream.into_split();
    let (outgoing, outgoing_rx) = mpsc::channel(OUTGOING_FRAMES_MAX);
    let writer = tokio::spawn(write_loop(write_half, outgoing_rx));
    let mut reader = BufReader::with_capacity(256 * 1024, read_half);
    let connection = Connection { service, outgoing, uploads: Arc::default(), inflight: Arc::new(AtomicU32::new(0)) };
    if let Err(reason) = connection.read_loop(&mut reader).await {
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

    async fn read_loop(&self, reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Result<(), String> {
        let mut greeted = false;
        let mut inflight_max = REQUESTS_INFLIGHT_MAX;
        loop {
            let frame = match read_frame(reader).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(err) => return Err(err.to_string()),
            };
            let request_id = frame.header.request_id;
            if frame.header.protocol_version != PROTOCOL_VERSION {
                self.send_reply(request_id, Err(ErrorCode::VersionMismatch)).await;
                return Err(format!("protocol version {}", frame.header.protocol_version));
            }
            match frame.header.kind {
                FrameKind::Request if !greeted => {
                    inflight_max = self.greet(frame).await?;
                    greeted = true;
                }
                FrameKind::Request => self.dispatch(frame, inflight_max).await,
                FrameKind::Data => self.accept_chunk(frame)?,
                FrameKind::Credit | FrameKind::Reply => return Err("unexpected frame kind from client".into()),
            }
        }
    }

    /// Answers the greeting; returns the connection's in-flight limit
    /// (peers, greeting with `PeerHello`, are admitted apart from clients).
    async fn greet(&self, frame: Frame) -> Result<u32, String> {
        let request_id = frame.header.request_id;
        let reply = Reply::Hello { protocol_version: PROTOCOL_VERSION, server_id: self.service.server_id };
        match message::decode::<Request>(&frame.body) {
            Ok(Request::Hello { protocol_version }) if protocol_version == PROTOCOL_VERSION => {
                self.send_reply(request_id, Ok(reply)).await;
                Ok(REQUESTS_INFLIGHT_MAX)
            }
            Ok(Request::PeerHello { protocol_version, .. }) if protocol_version == PROTOCOL_VERSION => {
                self.send_reply(request_id, Ok(reply)).await;
                Ok(limits::PEER_REQUESTS_INFLIGHT_MAX)
            }
            Ok(Request::Hello { protocol_version }) | Ok(Request::PeerHello { protocol_version, .. }) => {
                self.send_reply(request_id, Err(ErrorCode::VersionMismatch)).await;
                Err(format!("hello with protocol version {protocol_version}"))
            }
            _ => {
                self.send_reply(request_id, Err(ErrorCode::Protocol)).await;
                Err("first request was not hello".into())
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
        self.service.counters.request(request.kind_name());
        let is_write =
            matches!(request, Request::Write { .. } | Request::WriteList { .. } | Request::WriteDatatype { .. });
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
        tokio::spawn(task.run(request, frame.payload, chunks));
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
        let link =
            crate::noncontig::Link { service: &self.service, outgoing: &self.outgoing, request_id: self.request_id };
        let reply = match (request, chunks) {
            (Request::ReadList { handle, regions, total_length }, _) => {
                link.read_list(handle, regions, total_length).await
            }
            (Request::WriteList { handle, regions, total_length }, Some(chunks)) => {
                link.write_list(handle, regions, total_length, first_chunk, chunks).await
            }
            (Request::ReadDatatype { access }, _) => link.read_datatype(access).await,
            (Request::WriteDatatype { access, packed_length }, Some(chunks)) => {
                link.write_datatype(access, packed_length, first_chunk, chunks).await
            }
            (Request::Write { handle, offset, length }, Some(chunks)) => {
                self.write(handle, offset, length, first_chunk, chunks).await
            }
            (Request::Read { handle, offset, length }, _) => self.read(handle, offset, length).await,
            (request, _) => self.service.handle(request).await,
        };
        if let Ok(Reply::Io { bytes, .. }) = &reply {
            self.service.counters.bytes(kind, *bytes);
        }
        self.uploads.lock().expect("uploads lock").remove(&self.request_id);
        self.service.counters.latency(kind, self.arrived.elapsed());
        // The slot is free before the reply can reach the client, so a
        // client that keeps exactly the limit in flight is never refused.
        self.inflight.fetch_sub(1, Ordering::AcqRel);
        let _ = self.outgoing.send(reply_frame(self.request_id, &reply)).await;
    }

    async fn write(
        &self,
        handle: Handle,
        offset: u64,
        length: u64,
        first_chunk: Vec<u8>,
        mut chunks: mpsc::Receiver<Frame>,
    ) -> ReplyResult {
        check_range(offset, length)?;
        let _guard = self.service.scheduler.shared(handle).await;
        self.service.check_datafile(handle).await?;
        let mut received = 0u64;
        let mut local_size = None;
        let mut next = Some((0u64, first_chunk));
        while received < length {
            let (stream_offset, payload) = match next.take() {
                Some(chunk) => chunk,
                None => {
                    let frame = chunks.recv().await.ok_or(ErrorCode::Unreachable)?;
                    (frame.header.aux, frame.payload)
                }
            };
            if payload.is_empty() && length > 0 {
                continue;
            }
            let end = stream_offset.checked_add(payload.len() as u64).ok_or(ErrorCode::Protocol)?;
            if end > length {
                return Err(ErrorCode::Protocol);
            }
            received += payload.len() as u64;
            let last = received == length;
            local_size = self.store_chunk(handle, offset + stream_offset, payload, last).await?;
            let _ = self.outgoing.send(Frame::credit(self.request_id, 1)).await;
        }
        let local_size = match local_size {
            Some(size) => size,
            None => self.local_size(handle).await?,
        };
        Ok(Reply::Io { bytes: length, local_size })
    }

    /// Writes one chunk on the blocking pool; with `then_size`, also
    /// returns the datafile's local size in the same hand-off (the last
    /// chunk of a request, saving the reply its own trip to the pool).
    async fn store_chunk(
        &self,
        handle: Handle,
        offset: u64,
        payload: Vec<u8>,
        then_size: bool,
    ) -> WeftResult<Option<u64>> {
        let service = self.service.clone();
        tokio::task::spawn_blocking(move || {
            // Shared: excludes only overlapping sieving read-modify-writes (see crate::ranges).
            let end = offset.saturating_add(payload.len() as u64);
            let _range = service.ranges.lock(handle, offset, end, crate::ranges::RangeMode::Shared);
            service.counters.syscalls(1);
            service.bytestreams.write_at(handle, offset, &payload)?;
            if then_size {
                Ok(Some(service.bytestreams.stat(handle)?.0))
            } else {
                Ok(None)
            }
        })
        .await
        .map_err(|_| ErrorCode::Io)?
    }

    async fn local_size(&self, handle: Handle) -> WeftResult<u64> {
        let service = self.service.clone();
        let (size, _) = tokio::task::spawn_blocking(move || service.bytestreams.stat(handle))
            .await
            .map_err(|_| ErrorCode::Io)??;
        Ok(size)
    }

    async fn read(&self, handle: Handle, offset: u64, length: u64) -> ReplyResult {
        check_range(offset, length)?;
        let _guard = self.service.scheduler.shared(handle).await;
        self.service.check_datafile(handle).await?;
        let mut done = 0u64;
        let mut local_size = None;
        while done < length {
            let want = (length - done).min(CHUNK_BYTES_MAX as u64) as usize;
            let service = self.service.clone();
            let at = offset + done;
            let last = done + want as u64 == length;
            // The local size comes with the last (or a short) chunk, in the
            // same trip to the blocking pool.
            let (chunk, size) = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; want];
                service.counters.syscalls(1);
                let n = service.bytestreams.read_at(handle, at, &mut buf)?;
                buf.truncate(n);
                let size = if last || n < want { Some(service.bytestreams.stat(handle)?.0) } else { None };
                Ok::<_, ErrorCode>((buf, size))
            })
            .await
            .map_err(|_| ErrorCode::Io)??;
            local_size = size;
            let got = chunk.len();
            if got > 0 {
                self.outgoing
                    .send(Frame::data(self.request_id, done, chunk))
                    .await
                    .map_err(|_| ErrorCode::Unreachable)?;
            }
            done += got as u64;
            if got < want {
                break;
            }
        }
        let local_size = match local_size {
            Some(size) => size,
            None => self.local_size(handle).await?,
        };
        Ok(Reply::Io { bytes: done, local_size })
    }
}

fn check_range(offset: u64, length: u64) -> WeftResult<()> {
    if length > limits::IO_BYTES_MAX {
        return Err(ErrorCode::Invalid);
    }
    match offset.checked_add(length) {
        Some(end) if end <= limits::FILE_BYTES_MAX => Ok(()),
        _ => Err(ErrorCode::TooBig),
    }
}
