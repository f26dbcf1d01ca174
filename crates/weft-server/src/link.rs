//! What a request handler may do with its connection, and nothing more:
//! stream data frames out, take uploaded chunks in order, grant credits.
//!
//! [`crate::connection`] owns the socket, framing and flow control; it
//! builds a `Link` per request and hands it to [`crate::dispatch`]. A
//! handler never sees the socket, so handlers can be driven from a test
//! with two channels.

use std::time::Duration;

use tokio::sync::mpsc;
use weft_proto::frame::Frame;
use weft_proto::{limits, ErrorCode, WeftResult};

/// Longest a request waits for its client (or peer) to take the next data
/// chunk of a read or send the next chunk of a write; past it the request
/// fails with `TimedOut`, releasing what it holds (a stopped client must
/// not stall others). Shorter than the time a client waits for a frame
/// (today its connect timeout: `weft-net`'s connections wait
/// `CONNECT_TIMEOUT_MS_DEFAULT` for each frame of a request), so a request
/// queued behind a stalled one still gets its answer. Server-side only.
pub const DATA_STALL_MS: u32 = 3_000;
const _: () = assert!(DATA_STALL_MS + 1_000 < limits::CONNECT_TIMEOUT_MS_DEFAULT);

fn stall() -> Duration {
    Duration::from_millis(DATA_STALL_MS as u64)
}

/// One request's view of its connection.
pub struct Link {
    request_id: u64,
    outgoing: mpsc::Sender<Frame>,
    upload: Option<Upload>,
}

/// The data chunks a write-kind request streams to the server.
struct Upload {
    /// The request frame's own payload (stream offset 0), until taken.
    first: Option<Vec<u8>>,
    /// Later chunks, in arrival order, from the connection's reader.
    chunks: mpsc::Receiver<Frame>,
}

impl Link {
    /// A link for `request_id`; `chunks` is `Some` for requests that upload
    /// data (their first chunk is `first_chunk`).
    pub fn new(
        request_id: u64,
        outgoing: mpsc::Sender<Frame>,
        first_chunk: Vec<u8>,
        chunks: Option<mpsc::Receiver<Frame>>,
    ) -> Link {
        let upload = chunks.map(|chunks| Upload { first: Some(first_chunk), chunks });
        Link { request_id, outgoing, upload }
    }

    /// Sends `bytes` as a data frame at `stream_offset` of the reply stream.
    /// `TimedOut` if the peer takes nothing for [`DATA_STALL_MS`]
    /// (a stopped client must not hold the request, and the guards it
    /// holds, forever).
    pub async fn send_data(&self, stream_offset: u64, bytes: Vec<u8>) -> WeftResult<()> {
        let send = self.outgoing.send(Frame::data(self.request_id, stream_offset, bytes));
        match tokio::time::timeout(stall(), send).await {
            Ok(sent) => sent.map_err(|_| ErrorCode::Unreachable),
            Err(_) => Err(ErrorCode::TimedOut),
        }
    }

    /// The next uploaded chunk: its offset in the request's data stream and
    /// its bytes. `Protocol` if the request uploads nothing; `Unreachable`
    /// if the connection ended first; `TimedOut` if nothing comes for
    /// [`DATA_STALL_MS`].
    pub async fn next_chunk(&mut self) -> WeftResult<(u64, Vec<u8>)> {
        let upload = self.upload.as_mut().ok_or(ErrorCode::Protocol)?;
        if let Some(first) = upload.first.take() {
            return Ok((0, first));
        }
        let frame = tokio::time::timeout(stall(), upload.chunks.recv())
            .await
            .map_err(|_| ErrorCode::TimedOut)?
            .ok_or(ErrorCode::Unreachable)?;
        Ok((frame.header.aux, frame.payload))
    }

    /// Grants the peer one more chunk of its write window (one chunk stored).
    pub async fn grant_credit(&self) {
        let _ = self.outgoing.send(Frame::credit(self.request_id, 1)).await;
    }
}
