//! Frames: the unit of everything on a Weft connection.
//!
//! Wire layout of the fixed 32-byte header (all little-endian):
//!
//! ```text
//! offset size field
//!      0    4 magic             "WEFT"
//!      4    2 protocol_version  limits::PROTOCOL_VERSION
//!      6    1 kind              1 request, 2 reply, 3 data, 4 credit
//!      7    1 flags             reserved, must be 0
//!      8    8 request_id        chosen by the requester, echoed in replies
//!     16    4 header_len        bytes of encoded message that follow
//!     20    4 payload_len       bytes of raw bulk payload after the message
//!     24    8 aux               data: stream offset of the payload;
//!                               credit: chunks granted; otherwise 0
//! ```
//!
//! A request or reply frame carries a postcard-encoded [`crate::message`]
//! body; a data frame carries only payload; a credit frame carries neither.
//! Lengths are checked against [`crate::limits`] before anything is allocated.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::limits::{FRAME_HEADER_BYTES, FRAME_MAGIC, FRAME_PAYLOAD_BYTES_MAX, HEADER_BYTES_MAX, PROTOCOL_VERSION};

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// A request body (and optionally the first bulk chunk).
    Request = 1,
    /// A reply body.
    Reply = 2,
    /// A bulk chunk of an in-flight request.
    Data = 3,
    /// Permission to send more chunks of an in-flight request.
    Credit = 4,
}

impl FrameKind {
    fn from_u8(value: u8) -> Option<FrameKind> {
        match value {
            1 => Some(FrameKind::Request),
            2 => Some(FrameKind::Reply),
            3 => Some(FrameKind::Data),
            4 => Some(FrameKind::Credit),
            _ => None,
        }
    }
}

/// The fixed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Protocol version of the sender.
    pub protocol_version: u16,
    /// Kind.
    pub kind: FrameKind,
    /// Request this frame belongs to.
    pub request_id: u64,
    /// Encoded message bytes.
    pub header_len: u32,
    /// Bulk payload bytes.
    pub payload_len: u32,
    /// Stream offset (data) or credit count (credit).
    pub aux: u64,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed or closed mid-frame.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The frame does not start with the magic number.
    #[error("bad magic {0:#x}")]
    BadMagic(u32),
    /// Unknown frame kind.
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    /// Reserved flags set.
    #[error("reserved flags set: {0:#x}")]
    BadFlags(u8),
    /// A length exceeds the limits.
    #[error("frame too large: header {header_len} payload {payload_len}")]
    TooLarge {
        /// Declared message length.
        header_len: u32,
        /// Declared payload length.
        payload_len: u32,
    },
}

impl FrameHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; FRAME_HEADER_BYTES] {
        let mut out = [0u8; FRAME_HEADER_BYTES];
        out[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&self.protocol_version.to_le_bytes());
        out[6] = self.kind as u8;
        out[7] = 0;
        out[8..16].copy_from_slice(&self.request_id.to_le_bytes());
        out[16..20].copy_from_slice(&self.header_len.to_le_bytes());
        out[20..24].copy_from_slice(&self.payload_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.aux.to_le_bytes());
        out
    }

    /// Decodes and validates a header. The protocol version is returned as
    /// read; the hello handler decides what to do with a mismatch.
    pub fn decode(bytes: &[u8; FRAME_HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let magic = u32_at(0);
        if magic != FRAME_MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let kind = FrameKind::from_u8(bytes[6]).ok_or(FrameError::BadKind(bytes[6]))?;
        if bytes[7] != 0 {
            return Err(FrameError::BadFlags(bytes[7]));
        }
        let header = FrameHeader {
            protocol_version: u16::from_le_bytes([bytes[4], bytes[5]]),
            kind,
            request_id: u64_at(8),
            header_len: u32_at(16),
            payload_len: u32_at(20),
            aux: u64_at(24),
        };
        if header.header_len > HEADER_BYTES_MAX || header.payload_len > FRAME_PAYLOAD_BYTES_MAX {
            return Err(FrameError::TooLarge { header_len: header.header_len, payload_len: header.payload_len });
        }
        Ok(header)
    }
}

/// A whole frame in memory.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Fixed header.
    pub header: FrameHeader,
    /// Encoded message (request or reply body).
    pub body: Vec<u8>,
    /// Raw bulk payload.
    pub payload: Vec<u8>,
}

impl Frame {
    fn new(kind: FrameKind, request_id: u64, body: Vec<u8>, payload: Vec<u8>, aux: u64) -> Frame {
        let header = FrameHeader {
            protocol_version: PROTOCOL_VERSION,
            kind,
            request_id,
            header_len: body.len() as u32,
            payload_len: payload.len() as u32,
            aux,
        };
        Frame { header, body, payload }
    }

    /// A request frame, with an optional first bulk chunk.
    pub fn request(request_id: u64, body: Vec<u8>, payload: Vec<u8>) -> Frame {
        Frame::new(FrameKind::Request, request_id, body, payload, 0)
    }

    /// A reply frame.
    pub fn reply(request_id: u64, body: Vec<u8>) -> Frame {
        Frame::new(FrameKind::Reply, request_id, body, Vec::new(), 0)
    }

    /// A bulk chunk starting at `stream_offset` of the request's data stream.
    pub fn data(request_id: u64, stream_offset: u64, payload: Vec<u8>) -> Frame {
        Frame::new(FrameKind::Data, request_id, Vec::new(), payload, stream_offset)
    }

    /// A grant of `chunks` more chunks for a request.
    pub fn credit(request_id: u64, chunks: u64) -> Frame {
        Frame::new(FrameKind::Credit, request_id, Vec::new(), Vec::new(), chunks)
    }
}

/// Reads one frame. `Ok(None)` means the peer closed cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Option<Frame>, FrameError> {
    read_frame_at_most(reader, u64::MAX).await
}

/// As [`read_frame`], refusing (before reading further) a frame whose
/// header, body and payload together exceed `max_bytes` (a connection not
/// yet authenticated: `limits::AUTH_FRAME_BYTES_MAX`).
pub async fn read_frame_at_most<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: u64,
) -> Result<Option<Frame>, FrameError> {
    let mut fixed = [0u8; FRAME_HEADER_BYTES];
    match reader.read_exact(&mut fixed[..1]).await {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    reader.read_exact(&mut fixed[1..]).await?;
    let header = FrameHeader::decode(&fixed)?;
    if FRAME_HEADER_BYTES as u64 + header.header_len as u64 + header.payload_len as u64 > max_bytes {
        return Err(FrameError::TooLarge { header_len: header.header_len, payload_len: header.payload_len });
    }
    let mut body = vec![0u8; header.header_len as usize];
    reader.read_exact(&mut body).await?;
    let mut payload = vec![0u8; header.payload_len as usize];
    reader.read_exact(&mut payload).await?;
    Ok(Some(Frame { header, body, payload }))
}

/// Writes one frame (without flushing).
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, frame: &Frame) -> std::io::Result<()> {
    writer.write_all(&frame.header.encode()).await?;
    writer.write_all(&frame.body).await?;
    writer.write_all(&frame.payload).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let frame = Frame::data(42, 7, vec![1, 2, 3]);
        let decoded = FrameHeader::decode(&frame.header.encode()).unwrap();
        assert_eq!(decoded, frame.header);
    }

    #[test]
    fn rejects_bad_headers() {
        let mut bytes = Frame::reply(1, vec![]).header.encode();
        bytes[0] = 0;
        assert!(matches!(FrameHeader::decode(&bytes), Err(FrameError::BadMagic(_))));
        let mut bytes = Frame::reply(1, vec![]).header.encode();
        bytes[6] = 9;
        assert!(matches!(FrameHeader::decode(&bytes), Err(FrameError::BadKind(9))));
        let mut bytes = Frame::reply(1, vec![]).header.encode();
        bytes[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(FrameHeader::decode(&bytes), Err(FrameError::TooLarge { .. })));
    }

    #[tokio::test]
    async fn truncated_frame_is_io_error() {
        let frame = Frame::request(3, vec![1, 2, 3, 4], vec![]);
        let mut bytes = frame.header.encode().to_vec();
        bytes.extend_from_slice(&[1, 2]);
        let mut reader = &bytes[..];
        assert!(matches!(read_frame(&mut reader).await, Err(FrameError::Io(_))));
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty).await.unwrap().is_none());
    }
}
