//! One pipelined connection to one server.
//!
//! A writer task owns the socket's write half and a reader task the read
//! half. Each request registers a channel under its request id; the reader
//! routes every reply, data and credit frame to it. The channel holds at
//! most `DOWNLOAD_WINDOW_FRAMES` frames: a reader that finds it full waits,
//! leaving the rest in the socket (flow control for downloads). Many requests are in
//! flight at once (bounded by `REQUESTS_INFLIGHT_MAX`); a large transfer is
//! split into chunks and never holds up small requests for long.
//!
//! Sending: a frame is written straight from the calling task when nothing
//! is queued and the socket takes it whole (a non-blocking vectored write
//! under a lock, no await, so dropping a call never leaves half a frame);
//! otherwise the frame (or the rest of it) is queued, in order, for the
//! writer task, which waits for the socket. A small request thus costs no
//! hand-over to another thread on the way out.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::io::IoSlice;
use std::os::fd::AsRawFd;

use tokio::io::BufReader;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use weft_proto::frame::{read_frame, Frame, FrameKind};
use weft_proto::limits::{
    CHUNK_BYTES_MAX, DOWNLOAD_WINDOW_FRAMES, PROTOCOL_VERSION, REQUESTS_INFLIGHT_MAX, WRITE_WINDOW_CHUNKS,
};

use crate::auth::Authenticator;
use weft_proto::message::{self, Reply, ReplyResult, Request};
use weft_proto::{ErrorCode, WeftResult};

type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Frame>>>>;

/// The sending side: the socket's write half and what is queued for the writer task.
struct Outbound {
    half: OwnedWriteHalf,
    /// Frames queued for the writer task and not yet fully written. Frames
    /// are written inline only while this is 0, and queued only under this
    /// lock, so bytes go out in queue order and frames never interleave.
    backlog: Mutex<usize>,
}

impl Outbound {
    /// Writes as much of `frame` from byte `done` as the socket takes now,
    /// without waiting; returns the bytes of the frame written so far.
    fn write_now(&self, frame: &Frame, header: &[u8], mut done: usize) -> std::io::Result<usize> {
        let parts: [&[u8]; 3] = [header, &frame.body, &frame.payload];
        let total: usize = parts.iter().map(|p| p.len()).sum();
        while done < total {
            let mut skip = done;
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(3);
            for part in parts {
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                slices.push(IoSlice::new(&part[skip..]));
                skip = 0;
            }
            match self.half.try_write_vectored(&slices) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(done),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

fn frame_bytes(frame: &Frame) -> usize {
    weft_proto::limits::FRAME_HEADER_BYTES + frame.body.len() + frame.payload.len()
}

/// A live connection.
pub struct Connection {
    out: Arc<Outbound>,
    /// To the writer task: a frame and how many of its bytes are already written.
    outgoing: mpsc::UnboundedSender<(Frame, usize)>,
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
    /// Upload `length` bytes produced one chunk at a time, in stream order:
    /// `fill(stream_offset, chunk)` fills each chunk as it is sent, so the
    /// caller never holds more than the chunks in flight (a write gathered
    /// straight from the user's memory layout).
    UploadWith {
        /// Bytes of the whole upload.
        length: u64,
        /// Fills the chunk at `stream_offset`.
        fill: &'a mut (dyn FnMut(u64, &mut [u8]) -> WeftResult<()> + Send),
    },
    /// Deliver downloaded chunks to this sink: `(stream_offset, bytes)`.
    Download(&'a mut (dyn FnMut(u64, &[u8]) -> WeftResult<()> + Send)),
}

impl Bulk<'_> {
    /// Bytes this bulk uploads.
    pub fn upload_len(&self) -> usize {
        match self {
            Bulk::Upload(data) => data.len(),
            Bulk::UploadWith { length, .. } => *length as usize,
            _ => 0,
        }
    }

    /// Upload bytes `[from, to)` as a frame payload.
    fn chunk(&mut self, from: usize, to: usize) -> WeftResult<Vec<u8>> {
        match self {
            Bulk::Upload(data) => Ok(data[from..to].to_vec()),
            Bulk::UploadWith { fill, .. } => {
                let mut chunk = vec![0u8; to - from];
                if !chunk.is_empty() {
                    fill(from as u64, &mut chunk)?;
                }
                Ok(chunk)
            }
            _ => Ok(Vec::new()),
        }
    }
}

impl Connection {
    /// Connects, greets with `greeting` (`Hello` or, from a server,
    /// `PeerHello`), authenticates with `auth` (the proof covers the nonce
    /// of the server's hello reply), and starts the reader and writer tasks.
    /// A refused proof is `Access` (or the server's code).
    pub async fn open_with(
        address: SocketAddr,
        timeout: Duration,
        greeting: Request,
        auth: &Authenticator,
    ) -> WeftResult<Arc<Connection>> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| ErrorCode::TimedOut)?
            .map_err(|_| ErrorCode::Unreachable)?;
        let _ = stream.set_nodelay(true);
        let (read_half, write_half) = stream.into_split();
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let out = Arc::new(Outbound { half: write_half, backlog: Mutex::new(0) });
        tokio::spawn(write_loop(out.clone(), outgoing_rx, closed.clone()));
        tokio::spawn(read_loop(BufReader::with_capacity(256 * 1024, read_half), pending.clone(), closed.clone()));
        let connection = Arc::new(Connection {
            out,
            outgoing,
            pending,
            next_request_id: AtomicU64::new(1),
            slots: Semaphore::new(REQUESTS_INFLIGHT_MAX as usize),
            closed,
            timeout,
        });
        let Reply::Hello { protocol_version, server_id, nonce } = connection.call(greeting, Bulk::None).await? else {
            return Err(ErrorCode::Protocol);
        };
        if protocol_version != PROTOCOL_VERSION {
            // A server of another protocol version (it should have refused us first).
            connection.close();
            return Err(ErrorCode::VersionMismatch);
        }
        let proof = auth.proof(server_id, &nonce).await?;
        match connection.call(Request::Authenticate { proof }, Bulk::None).await? {
            Reply::Done => Ok(connection),
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
        let _ = self.outgoing.send((Frame::credit(u64::MAX, u64::MAX), 0)); // wakes the writer
    }

    /// Sends a request with its bulk data and waits for the reply.
    pub async fn call(&self, request: Request, mut bulk: Bulk<'_>) -> ReplyResult {
        if self.is_closed() {
            return Err(ErrorCode::Unreachable);
        }
        let _slot = self.slots.acquire().await.map_err(|_| ErrorCode::Unreachable)?;
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (events_tx, mut events) = mpsc::channel(DOWNLOAD_WINDOW_FRAMES as usize);
        self.pending.lock().expect("pending lock").insert(request_id, events_tx);
        let _unregister = Unregister { pending: &self.pending, request_id };
        let upload_len = bulk.upload_len();
        let first = upload_len.min(CHUNK_BYTES_MAX as usize);
        let frame = Frame::request(request_id, message::encode(&request), bulk.chunk(0, first)?);
        self.send(frame).await?;
        let mut sent = first;
        let mut credits = WRITE_WINDOW_CHUNKS as u64 - 1;
        loop {
            while credits > 0 && sent < upload_len {
                let end = (sent + CHUNK_BYTES_MAX as usize).min(upload_len);
                let chunk = match bulk.chunk(sent, end) {
                    Ok(chunk) => chunk,
                    Err(e) => {
                        // The server holds a half-sent request: drop the
                        // connection rather than leave it waiting.
                        self.close();
                        return Err(e);
                    }
                };
                self.send(Frame::data(request_id, sent as u64, chunk)).await?;
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

    /// Writes `frame` now if the socket takes it whole and nothing is
    /// queued; otherwise queues (the rest of) it for the writer task.
    /// Never waits, so a dropped call never leaves a partial frame.
    async fn send(&self, frame: Frame) -> WeftResult<()> {
        if self.is_closed() {
            return Err(ErrorCode::Unreachable);
        }
        let mut backlog = self.out.backlog.lock().expect("backlog lock");
        let mut done = 0;
        if *backlog == 0 {
            let header = frame.header.encode();
            match self.out.write_now(&frame, &header, 0) {
                Ok(n) if n == frame_bytes(&frame) => return Ok(()),
                Ok(n) => done = n,
                Err(_) => {
                    drop(backlog);
                    self.close();
                    return Err(ErrorCode::Unreachable);
                }
            }
        }
        self.outgoing.send((frame, done)).map_err(|_| ErrorCode::Unreachable)?;
        *backlog += 1;
        Ok(())
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

async fn write_loop(out: Arc<Outbound>, mut frames: mpsc::UnboundedReceiver<(Frame, usize)>, closed: Arc<AtomicBool>) {
    'outer: while let Some((frame, mut done)) = frames.recv().await {
        let header = frame.header.encode();
        let total = frame_bytes(&frame);
        loop {
            if closed.load(Ordering::Acquire) {
                break 'outer;
            }
            {
                let mut backlog = out.backlog.lock().expect("backlog lock");
                match out.write_now(&frame, &header, done) {
                    Ok(n) => done = n,
                    Err(_) => break 'outer,
                }
                if done == total {
                    *backlog -= 1;
                    break;
                }
            }
            if out.half.writable().await.is_err() {
                break 'outer;
            }
        }
    }
    closed.store(true, Ordering::Release);
    // SAFETY: shutting down the write side of a socket this task's `out` keeps open.
    unsafe { libc::shutdown(out.half.as_ref().as_raw_fd(), libc::SHUT_WR) };
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
        let request_id = frame.header.request_id;
        let is_reply = frame.header.kind == FrameKind::Reply;
        let events = pending.lock().expect("pending lock").get(&request_id).cloned();
        if let Some(events) = events {
            // Bounded: a request whose consumer lags holds up the socket
            // (and TCP the server) once DOWNLOAD_WINDOW_FRAMES wait, so a
            // large read never piles up in memory. A request that went
            // away has dropped its receiver: the send fails at once.
            let _ = events.send(frame).await;
        }
        if is_reply {
            pending.lock().expect("pending lock").remove(&request_id);
        }
    }
    closed.store(true, Ordering::Release);
    // Dropping the senders wakes every waiting request with `Unreachable`.
    pending.lock().expect("pending lock").clear();
}
