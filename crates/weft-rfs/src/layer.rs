//! The data path under MPI-IO as a chain of layers: one open file of a
//! layer takes packed write data (views already serialized), answers
//! reads, sizes, syncs and closes. Layers here: the remote file
//! ([`crate::client::RemoteFile`], `rfs:` names), [`Discard`] (the
//! paper's PEAK: accepts and drops writes, no network, no storage), and
//! ABT ([`crate::abt::AbtFile`]), which stacks over any layer. (`weft:`
//! names keep weft-mpiio's own Weft path.)

use std::sync::Arc;

use weft_proto::ErrorCode;

use crate::client::Ticket;
use crate::wire::{At, WireView};

/// A write sent and maybe not yet acknowledged.
pub enum Pending {
    /// Already complete.
    Done,
    /// Waiting for these replies.
    Tickets(Vec<Ticket>),
}

impl Pending {
    /// Waits for every reply; the first error wins.
    pub fn wait(self) -> Result<(), ErrorCode> {
        match self {
            Pending::Done => Ok(()),
            Pending::Tickets(tickets) => {
                let mut result = Ok(());
                for ticket in tickets {
                    if let Err(code) = ticket.wait() {
                        result = result.and(Err(code));
                    }
                }
                result
            }
        }
    }
}

/// One open file of a layer.
pub trait Layer: Send + Sync {
    /// Writes the bytes of `parts` (back to back) at `at` through `view`;
    /// the data is on its way (or stored) when this returns, its outcome
    /// in the [`Pending`].
    fn write(&self, view: &Arc<WireView>, at: &At, parts: &[&[u8]]) -> Result<Pending, ErrorCode>;
    /// Reads `len` bytes (stream accesses: only those before end of file).
    fn read(&self, view: &Arc<WireView>, at: &At, len: u64) -> Result<Vec<u8>, ErrorCode>;
    /// Size in bytes.
    fn size(&self) -> Result<u64, ErrorCode>;
    /// Sets the size.
    fn set_size(&self, size: u64) -> Result<(), ErrorCode>;
    /// Makes written data durable.
    fn sync(&self) -> Result<(), ErrorCode>;
    /// Closes; later calls are errors.
    fn close(&self) -> Result<(), ErrorCode>;
    /// Waits until this process's buffered writes of the file have been
    /// performed (write-behind layers; others have none).
    fn flush(&self) -> Result<(), ErrorCode> {
        Ok(())
    }
}

/// Accepts and drops every write; reads find an empty file.
pub struct Discard;

impl Layer for Discard {
    fn write(&self, _: &Arc<WireView>, _: &At, _: &[&[u8]]) -> Result<Pending, ErrorCode> {
        Ok(Pending::Done)
    }

    fn read(&self, _: &Arc<WireView>, at: &At, len: u64) -> Result<Vec<u8>, ErrorCode> {
        Ok(match at {
            At::Stream { .. } => Vec::new(),
            At::Regions(_) => vec![0; len as usize],
        })
    }

    fn size(&self) -> Result<u64, ErrorCode> {
        Ok(0)
    }

    fn set_size(&self, _: u64) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn sync(&self) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn close(&self) -> Result<(), ErrorCode> {
        Ok(())
    }
}
