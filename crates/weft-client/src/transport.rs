//! One pipelined connection to one server.
//!
//! A writer task owns the socket's write half and a reader task the read
//! half. Each request registers a channel under its request id; the reader
//! routes every reply, data and credit frame to it. Many requests are in
//! flight at once (bounded by `REQUESTS_INFLIGHT_MAX`); a large transfer is
//! split into chunks and never holds up small requests for long.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use weft_proto::frame::{read_frame, write_frame, Frame, FrameKind};
use weft_proto::limits::{CHUNK_BYTES_MAX, PROTOCOL_VERSION, REQUESTS_INFLIGHT_MAX, WRITE_WINDOW_CHUNKS};
use weft_proto::message::{self, Reply, ReplyResult, Request};
use weft_proto::{ErrorCode, WeftResult};

type Pending = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Frame>>>>;

/// A live connection.
pub struct Connection {
    outgoing: mpsc::Sender<Frame>,
    pending: Pending,
    next_request_id: AtomicU64,
    slots: Semaphore,
    closed: Arc<AtomicBool>,
    timeout: Duration,
}

/// Where the bulk data of a request comes from or goes to.
pub enum Bulk<'a> {
    /// No bulk data.
    None,
    /// Upload these bytes (a write).
    Upload(&'a [u8]),
    /// Deliver downloaded chunks to this sink: `(stream_offset, bytes)`.
    Download(&'a mut (dyn FnMut(u64, &[u8]) -> WeftResult<()> + Send)),
}

impl Connection {
    /// Connects, says hello, and starts the reader and writer tasks.
    pub async fn open(address: SocketAddr, timeout: Duration) -> WeftResult<Arc<Connection>> {
        Connection::open_with(address, timeout, Request::Hello { protocol_version: PROTOCOL_VERSION }).await
    }

    /// As [`Connection::open`], greeting with `greeting` (`Hello` or, from
    /// a server, `PeerHello`).
    pub async fn open_with(address: SocketAddr, timeout: Duration, greeting: Request) -> WeftResult<Arc<Connection>> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| ErrorCode::TimedOut)?
            .map_err(|_| ErrorCode::Unreachable)?;
        let _ = stream.set_nodelay(true);
        let (read_half, write_half) = stream.into_split();
        let (outgoing, outgoing_rx) = mpsc::channel(64);
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        tokio::spawn(write_loop(write_half, outgoing_rx, closed.clone()));
        tokio::spawn(read_loop(BufReader::with_capacity(256 * 1024, read_half), pending.clone(), closed.clone()));
        let connection = Arc::new(Connection {
            outgoing,
            pending,
            next_request_id: AtomicU64::new(1),
            slots: Semaphore::new(REQUESTS_INFLIGHT_MAX as usize),
            closed,
            timeout,
        });
        match connection.call(greeting, Bulk::None).await? {
            Reply::Hello { .. } => Ok(connection),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Whether the connection has failed or closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the connection (fault injection, shutdown).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending.lock().expect("pending lock").clear();
        let _ = self.outgoing.try_send(Frame::credit(u64::MAX, u64::MAX)); // wakes the writer
    }

    /// Sends a request with its bulk data and waits for the reply.
    pub async fn call(&self, request: Request, mut bulk: Bulk<'_>) -> ReplyResult {
        if self.is_closed() {
            return Err(ErrorCode::Unreachable);
        }
        let _slot = self.slots.acquire().await.map_err(|_| ErrorCode::Unreachable)?;
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (events_tx, mut events) = mpsc::unbounded_channel();
        self.pending.lock().expect("pending lock").insert(request_id, events_tx);
        let _unregister = Unregister { pending: &self.pending, request_id };
        let upload = match &bulk {
            Bulk::Upload(data) => *data,
            _ => &[],
        };
        let first = upload.len().min(CHUNK_BYTES_MAX as usize);
        let frame = Frame::request(request_id, message::encode(&request), upload[..first].to_vec());
        self.send(frame).await?;
        let mut sent = first;
        let mut credits = WRITE_WINDOW_CHUNKS as u64 - 1;
        loop {
            while credits > 0 && sent < upload.len() {
                let end = (sent + CHUNK_BYTES_MAX as usize).min(upload.len());
                self.send(Frame::data(request_id, sent as u64, upload[sent..end].to_vec())).await?;
                sent = end;
                credits -= 1;
            }
            let frame = tokio::time::timeout(self.timeout, events.recv())
                .await
                .map_err(|_| ErrorCode::TimedOut)?
                .ok_or(ErrorCode::Unreachable)?;
            match frame.header.kind {
                FrameKind::Reply => return message::decode::<ReplyResult>(&frame.body)?,
                FrameKind::Credit => credits += frame.header.aux.min(WRITE_WINDOW_CHUNKS as u64),
                FrameKind::Data => match &mut bulk {
                    Bulk::Download(sink) => sink(frame.header.aux, &frame.payload)?,
                    _ => return Err(ErrorCode::Protocol),
                },
                FrameKind::Request => return Err(ErrorCode::Protocol),
            }
        }
    }

    async fn send(&self, frame: Frame) -> WeftResult<()> {
        self.outgoing.send(frame).await.map_err(|_| ErrorCode::Unreachable)
    }
}

struct Unregister<'a> {
    pending: &'a Pending,
    request_id: u64,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.pending.lock().expect("pending lock").remove(&self.request_id);
    }
}

async fn write_loop(write_half: tokio::net::tcp::OwnedWriteHalf, mut frames: mpsc::Receiver<Frame>, closed: Arc<AtomicBool>) {
    let mut writer = BufWriter::with_capacity(256 * 1024, write_half);
    'outer: while let Some(frame) = frames.recv().await {
        let mut next = Some(frame);
        while let Some(frame) = next.take() {
            if closed.load(Ordering::Acquire) || write_frame(&mut writer, &frame).await.is_err() {
                break 'outer;
            }
            next = frames.try_recv().ok();
        }
        if writer.flush().await.is_err() {
            break;
        }
    }
    closed.store(true, Ordering::Release);
    let _ = writer.shutdown().await;
}

async fn read_loop(mut reader: BufReader<tokio::net::tcp::OwnedReadHalf>, pending: Pending, closed: Arc<AtomicBool>) {
    loop {
        if closed.load(Ordering::Acquire) {
            break;
        }
        let frame = match read_frame(&mut reader).await {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(_) => break,
        };
        let mut pending = pending.lock().expect("pending lock");
        let request_id = frame.header.request_id;
        let is_reply = frame.header.kind == FrameKind::Reply;
        if let Some(events) = pending.get(&request_id) {
            let _ = events.send(frame);
        }
        if is_reply {
            pending.remove(&request_id);
        }
    }
    closed.store(true, Ordering::Release);
    // Dropping the senders wakes every waiting request with `Unreachable`.
    pending.lock().expect("pending lock").clear();
}
