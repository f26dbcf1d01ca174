//! The RFS wire protocol: one TCP stream per client process, pipelined.
//!
//! After connecting, the client sends [`ClientHello`]; the gateway answers
//! [`ServerHello`] with a fresh nonce; the client proves the file-system
//! key with [`AuthProof`] (HMAC over the nonce and the identity it claims,
//! `weft_net::auth::client_message` with [`GATEWAY_AUTH_ID`]); the gateway
//! answers [`AuthReply`]. Then the client sends [`Request`]s, each with an
//! id, without waiting; the gateway performs them in order and answers
//! each with a [`Reply`] carrying the same id.
//!
//! Every message is one frame: `u32` header length, `u64` data length
//! (little-endian), the postcard-encoded header, then the raw data bytes
//! (a write's payload, a read's result). Headers are bounded by
//! `RFS_HEADER_BYTES_MAX`, data by `RFS_DATA_BYTES_MAX` (clients split
//! larger accesses).

use std::io::{Read, Write};

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use weft_proto::limits::{RFS_DATA_BYTES_MAX, RFS_HEADER_BYTES_MAX};
use weft_proto::message::Credentials;
use weft_proto::ErrorCode;

/// Protocol version in the hellos; a mismatch ends the connection.
pub const PROTOCOL_VERSION: u32 = 1;

/// The "server id" a gateway's key proofs cover (no Weft server has it),
/// so a proof for a gateway is worth nothing at a Weft server and back.
pub const GATEWAY_AUTH_ID: u32 = u32::MAX - 1;

/// Open flags of [`Body::Open`].
pub mod open_flags {
    /// Create the file if missing.
    pub const CREATE: u32 = 1;
    /// With `CREATE`: fail if it exists.
    pub const EXCL: u32 = 2;
    /// Open for reading.
    pub const READ: u32 = 4;
    /// Open for writing.
    pub const WRITE: u32 = 8;
}

/// First frame of a client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientHello {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
}

/// The gateway's answer to [`ClientHello`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerHello {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// Fresh random bytes the proof must cover.
    pub nonce: Vec<u8>,
}

/// The client's proof: the identity it claims and the key MAC over it
/// (`None`: the client has no key).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuthProof {
    /// Remote uid, gid and groups (mapped by the gateway).
    pub cred: Credentials,
    /// HMAC-SHA-256 under the file-system key.
    pub mac: Option<Vec<u8>>,
}

/// The gateway's verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuthReply {
    /// `Access` when the proof is missing or wrong, or the uid is not mapped.
    pub result: Result<(), ErrorCode>,
}

/// A file view as sent once per `MPI_File_set_view`: displacement, etype
/// size and the file type's dataloop encoding (`Dataloop::encode`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireView {
    /// Byte offset of the first tile.
    pub displacement: i64,
    /// Bytes per etype.
    pub etype_bytes: u64,
    /// The encoded file type.
    pub file_type: Vec<u8>,
}

/// Where an access's bytes go in the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum At {
    /// Through the file's current view, from this byte of its stream.
    Stream {
        /// Byte offset in the view's data stream.
        view_offset: u64,
    },
    /// Absolute file regions `(offset, length)`, one after the other
    /// (collective windows). Reads return every byte, zeros past EOF.
    Regions(Vec<(u64, u64)>),
}

impl At {
    /// Bytes of the first `len` stream bytes' access starting `skip` bytes in.
    pub fn split(&self, skip: u64, len: u64) -> At {
        match self {
            At::Stream { view_offset } => At::Stream { view_offset: view_offset + skip },
            At::Regions(regions) => {
                let mut out = Vec::new();
                let (mut pos, end) = (0u64, skip + len);
                for &(offset, length) in regions {
                    let (lo, hi) = (pos.max(skip), (pos + length).min(end));
                    if lo < hi {
                        out.push((offset + (lo - pos), hi - lo));
                    }
                    pos += length;
                    if pos >= end {
                        break;
                    }
                }
                At::Regions(out)
            }
        }
    }
}

/// What a request asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Body {
    /// Opens (or creates) `path`; answers [`Answer::Opened`].
    Open {
        /// Path under the gateway's root.
        path: String,
        /// [`open_flags`].
        flags: u32,
    },
    /// Writes the frame's data; `view` is piggybacked after a set_view.
    Write {
        /// File handle from `Opened`.
        fh: u64,
        /// A new view for this and later accesses.
        view: Option<WireView>,
        /// Where.
        at: At,
    },
    /// Reads `len` bytes; answers [`Answer::Data`] (stream reads: only
    /// the bytes before end of file).
    Read {
        /// File handle.
        fh: u64,
        /// A new view.
        view: Option<WireView>,
        /// Where.
        at: At,
        /// Bytes wanted.
        len: u64,
    },
    /// File size; answers [`Answer::Size`].
    Size {
        /// File handle.
        fh: u64,
    },
    /// Sets the file size.
    SetSize {
        /// File handle.
        fh: u64,
        /// New size in bytes.
        size: u64,
    },
    /// Makes the file's data durable.
    Sync {
        /// File handle.
        fh: u64,
    },
    /// Forgets the handle.
    Close {
        /// File handle.
        fh: u64,
    },
    /// Removes `path`.
    Delete {
        /// Path under the gateway's root.
        path: String,
    },
    /// The shared file pointer of `path` (kept by the gateway for every
    /// client of that path); answers [`Answer::Size`] with the old value.
    Shared {
        /// Path under the gateway's root.
        path: String,
        /// What to do with it.
        op: SharedOp,
    },
}

/// Operations on a shared file pointer (etypes of the current view).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SharedOp {
    /// Adds this many; the old value is returned.
    FetchAdd(u64),
    /// Reads it.
    Get,
    /// Sets it.
    Set(u64),
}

/// One request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// Chosen by the client, echoed in the reply.
    pub id: u64,
    /// What to do.
    pub body: Body,
}

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    /// Done, nothing to return.
    Done,
    /// The new file handle.
    Opened {
        /// File handle for later requests on this connection.
        fh: u64,
    },
    /// The frame's data holds the bytes read.
    Data,
    /// File size in bytes.
    Size(u64),
}

/// One reply.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reply {
    /// The request's id.
    pub id: u64,
    /// Its outcome.
    pub result: Result<Answer, ErrorCode>,
}

/// Writes one frame: `header`, then the data `parts` back to back.
pub fn write_frame<T: Serialize>(out: &mut impl Write, header: &T, parts: &[&[u8]]) -> std::io::Result<()> {
    let head = postcard::to_allocvec(header).map_err(|e| std::io::Error::other(e.to_string()))?;
    let data_len: u64 = parts.iter().map(|p| p.len() as u64).sum();
    if head.len() > RFS_HEADER_BYTES_MAX as usize || data_len > RFS_DATA_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "rfs frame too large"));
    }
    let mut prefix = [0u8; 12];
    prefix[..4].copy_from_slice(&(head.len() as u32).to_le_bytes());
    prefix[4..].copy_from_slice(&data_len.to_le_bytes());
    out.write_all(&prefix)?;
    out.write_all(&head)?;
    for part in parts {
        out.write_all(part)?;
    }
    Ok(())
}

/// Reads one frame: its header and data. Oversized or malformed frames
/// are `InvalidData` errors (the connection is then closed).
pub fn read_frame<T: DeserializeOwned>(input: &mut impl Read) -> std::io::Result<(T, Vec<u8>)> {
    let mut prefix = [0u8; 12];
    input.read_exact(&mut prefix)?;
    let head_len = u32::from_le_bytes(prefix[..4].try_into().expect("4 bytes"));
    let data_len = u64::from_le_bytes(prefix[4..].try_into().expect("8 bytes"));
    if head_len > RFS_HEADER_BYTES_MAX || data_len > RFS_DATA_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "rfs frame too large"));
    }
    let mut head = vec![0u8; head_len as usize];
    input.read_exact(&mut head)?;
    let header = postcard::from_bytes(&head).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut data = vec![0u8; data_len as usize];
    input.read_exact(&mut data)?;
    Ok((header, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let request = Request { id: 7, body: Body::Write { fh: 3, view: None, at: At::Stream { view_offset: 9 } } };
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &request, &[b"ab", b"cd"]).unwrap();
        let (back, data): (Request, Vec<u8>) = read_frame(&mut bytes.as_slice()).unwrap();
        assert_eq!((back.id, back.body, data), (7, request.body, b"abcd".to_vec()));
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut bytes = vec![0u8; 12];
        bytes[..4].copy_from_slice(&(RFS_HEADER_BYTES_MAX + 1).to_le_bytes());
        let err = read_frame::<Request>(&mut bytes.as_slice()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }

    #[test]
    fn region_accesses_split_at_stream_offsets() {
        let at = At::Regions(vec![(100, 10), (200, 10)]);
        assert_eq!(at.split(5, 10), At::Regions(vec![(105, 5), (200, 5)]));
        assert_eq!(at.split(10, 10), At::Regions(vec![(200, 10)]));
        assert_eq!(At::Stream { view_offset: 4 }.split(6, 1), At::Stream { view_offset: 10 });
    }
}
