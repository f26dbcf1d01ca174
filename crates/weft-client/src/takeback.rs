//! Taking back the growth of a write that failed part-way (issue 21).
//!
//! A write spread over several datafiles goes to all of them at once; when
//! some refuse (a full disk answers `NoSpace` and stores nothing) and
//! others store their part, the stored parts may lie past the file's old
//! end, so the file would look up to one call larger than anything it was
//! acknowledged for. Each stored part's reply says the datafile's local
//! size before the write; with the current sizes of the other datafiles
//! that gives the file's size before the call, and every stored part that
//! grew its datafile past what that size (or the part's own start) needs
//! is trimmed back with `TrimDatafile`, which acts only if the datafile
//! still ends where this write left it, so a later writer's bytes are never
//! cut. What stays: bytes the failed call overwrote inside the old size,
//! and a hole up to the call's offset where it began past the old end.

use std::collections::BTreeMap;

use futures::future::join_all;
use weft_proto::message::{Reply, Request};
use weft_proto::WeftResult;

use crate::capabilities::capable;
use crate::client::Client;
use crate::io::File;

/// One datafile's part of a write that its server stored.
pub(crate) struct StoredPart {
    /// Index of the datafile in the layout.
    pub index: usize,
    /// The part's local range.
    pub start: u64,
    /// End of that range.
    pub end: u64,
    /// The datafile's local size before the write (from the reply).
    pub before: u64,
}

impl Client {
    /// Trims what `stored` grew past the file's size before the call; best
    /// effort (the caller reports the write's own error either way).
    pub(crate) async fn take_back_growth(&self, file: &File, stored: &[StoredPart]) -> WeftResult<()> {
        let d = file.layout.distribution;
        let mut locals: BTreeMap<usize, u64> = stored.iter().map(|part| (part.index, part.before)).collect();
        let others: Vec<_> = file
            .layout
            .datafiles
            .iter()
            .enumerate()
            .filter(|(i, _)| !locals.contains_key(i))
            .map(|(_, handle)| *handle)
            .collect();
        let sizes = self.datafile_stats(&others).await?;
        for (i, handle) in file.layout.datafiles.iter().enumerate() {
            if let Some(stat) = sizes.get(handle) {
                locals.insert(i, stat.local_size);
            }
        }
        let all: Vec<u64> = (0..file.layout.datafiles.len()).map(|i| locals.get(&i).copied().unwrap_or(0)).collect();
        let size_before = d.file_size(&all);
        let capability = &self.capability(file, weft_proto::access::WRITE).await?;
        let trims = stored.iter().filter_map(|part| {
            let keep = d.local_size(part.index as u32, size_before).max(part.before).max(part.start);
            (keep < part.end).then(|| {
                let handle = file.layout.datafiles[part.index];
                async move {
                    let request =
                        capable(capability, Request::TrimDatafile { handle, if_size: part.end, local_size: keep });
                    self.call(self.server_of(handle)?, request).await
                }
            })
        });
        for result in join_all(trims).await {
            match result? {
                Reply::Io { .. } => {}
                _ => return Err(weft_proto::ErrorCode::Protocol),
            }
        }
        Ok(())
    }
}
