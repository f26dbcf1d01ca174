//! Exact file sizes without a gather per stat.
//!
//! A metafile created by the aggregate create keeps each datafile's
//! *settled* stat (local size and data mtime, [`SizeTracking::Metafile`]);
//! its server keeps a `growing` row (datafile → mark generation) for every
//! datafile that may have changed since. The invariant (docs/FORMAT.md,
//! "Size tracking"): a datafile without a `growing` row has exactly its
//! settled stat. So a stat of a file nobody is writing is answered from
//! the metafile's record alone, and only the growing datafiles are asked.
//!
//! Where the code is: [`Growth`] (in [`crate::storage::Storage`]) and the
//! transactions here; the mark in [`crate::metadata::Metadata::begin_change`];
//! the settle in [`crate::cluster::Cluster::datafile_stats_of`]
//! ([`crate::aggregate`]).
//!
//! Data server side ([`Growth`], in memory): before a write or truncate
//! changes a datafile that is not *marked* here, the data server sends
//! `MarkGrowing` to the datafile's metadata server
//! ([`SizeTracking::Datafile`]) and waits for it to be durable; the mark
//! then covers every change until a settle finds the datafile idle (no
//! change in flight, none within [`QUIET`]) and the data server forgets
//! it. One small request per quiet-to-busy transition, not per write.
//!
//! Metadata server side: a stat reads the record and the growing rows in
//! one read transaction, asks the growing datafiles' servers with one
//! `SettleSizes` collective, and for every datafile found idle whose row
//! still has the generation read before asking, stores the answered stat
//! as settled and deletes the row in one transaction. A mark committed
//! after the read changed the generation (or recreated the row), so a
//! change racing the settle is never lost.
//!
//! The mark is made under the datafile's shared scheduler guard (a peer
//! call under a guard, unlike elsewhere): `MarkGrowing` takes no guard and
//! makes no peer call, so no cycle can form, and a reclaim (exclusive)
//! cannot remove the datafile between its mark and its change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_proto::message::{DatafileStat, ObjectKind, Reply};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::store::{HandleTable, ObjectRecord, Reader, SizeTracking, Writer};

/// A datafile with no change for this long (and none in flight) is idle:
/// a settle may take its stat and drop its mark. Shorter means fewer stats
/// gather after writers stop; longer means fewer re-marks when stats and
/// writes interleave.
pub const QUIET: Duration = Duration::from_millis(500);

/// Datafiles tracked in memory beyond which idle entries are dropped
/// (dropping one only costs its next change a mark).
const TRACKED_MAX: usize = 65_536;

/// Data server: the datafiles being changed here, in memory.
#[derive(Default)]
pub struct Growth {
    active: Mutex<HashMap<Handle, Activity>>,
}

struct Activity {
    /// Changes in flight (marked or waiting for their mark).
    inflight: u32,
    /// A `MarkGrowing` for it has been committed since it was last idle.
    marked: bool,
    /// When the last change ended.
    last_end: Instant,
}

/// Held while a change of one datafile is in flight.
pub struct ChangeGuard {
    growth: Arc<Growth>,
    handle: Handle,
}

impl Drop for ChangeGuard {
    fn drop(&mut self) {
        let mut active = self.growth.active.lock().expect("growth lock");
        if let Some(activity) = active.get_mut(&self.handle) {
            activity.inflight -= 1;
            activity.last_end = Instant::now();
        }
    }
}

impl Growth {
    /// Counts a change of `handle` in; true when it must be marked first.
    pub(crate) fn enter(self: &Arc<Self>, handle: Handle) -> (ChangeGuard, bool) {
        let mut active = self.active.lock().expect("growth lock");
        if active.len() >= TRACKED_MAX {
            active.retain(|_, a| a.inflight > 0 || a.last_end.elapsed() < QUIET);
        }
        let activity =
            active.entry(handle).or_insert(Activity { inflight: 0, marked: false, last_end: Instant::now() });
        activity.inflight += 1;
        (ChangeGuard { growth: self.clone(), handle }, !activity.marked)
    }

    pub(crate) fn set_marked(&self, handle: Handle) {
        if let Some(activity) = self.active.lock().expect("growth lock").get_mut(&handle) {
            activity.marked = true;
        }
    }

    /// Whether `handle` is idle; an idle datafile is forgotten, so its next
    /// change is marked again.
    pub(crate) fn take_idle(&self, handle: Handle) -> bool {
        let mut active = self.active.lock().expect("growth lock");
        match active.get(&handle) {
            None => true,
            Some(a) if a.inflight == 0 && a.last_end.elapsed() >= QUIET => {
                active.remove(&handle);
                true
            }
            Some(_) => false,
        }
    }
}

/// What a metafile's server read about its datafiles, in one transaction.
pub struct Tracked {
    /// Settled stats in layout order (`None`: not tracked, always gathered).
    pub(crate) settled: Option<Vec<DatafileStat>>,
    /// Per datafile, the generation of its `growing` row.
    pub(crate) marks: Vec<Option<u32>>,
}

/// Reads the size tracking of metafile `record` (anything else: nothing to track).
pub fn tracked(r: &Reader, record: &ObjectRecord) -> WeftResult<Tracked> {
    let datafiles = record.layout.as_ref().map(|l| l.datafiles.as_slice()).unwrap_or_default();
    let settled = match &record.tracking {
        Some(SizeTracking::Metafile(stats)) if stats.len() == datafiles.len() => Some(stats.clone()),
        _ => None,
    };
    let marks = match settled {
        Some(_) => r.handle_rows_of(HandleTable::Growing, datafiles)?,
        None => Vec::new(),
    };
    Ok(Tracked { settled, marks })
}

/// Records `datafiles` as growing (in the committer): each row's generation moves on.
pub fn mark_txn(w: &Writer<'_>, datafiles: &[Handle]) -> WeftResult<Reply> {
    if datafiles.len() > limits::BATCH_HANDLES_MAX as usize {
        return Err(ErrorCode::Invalid);
    }
    for datafile in datafiles {
        let generation = w.handle_row(HandleTable::Growing, *datafile)?.unwrap_or(0).wrapping_add(1);
        w.put_handle_row(HandleTable::Growing, *datafile, generation)?;
    }
    Ok(Reply::Done)
}

/// Data server, claiming a reservation (in the committer): a datafile
/// reserved before records named their server learns it from the claim.
pub fn adopt_legacy_datafile(w: &Writer<'_>, handle: Handle, metadata_server: u32) -> WeftResult<()> {
    let mut record = match w.object(handle) {
        Err(ErrorCode::Stale) => return Ok(()),
        other => other?,
    };
    if record.kind == ObjectKind::Datafile && record.tracking.is_none() {
        record.tracking = Some(SizeTracking::Datafile(metadata_server));
        w.put_object(handle, &record)?;
    }
    Ok(())
}

/// The record of a new metafile's tracking: every datafile empty and settled.
pub fn fresh_metafile(datafiles: usize) -> SizeTracking {
    SizeTracking::Metafile(vec![DatafileStat { local_size: 0, mtime_ns: 0 }; datafiles])
}

/// Stores the stats of idle datafiles as settled and drops their rows,
/// for each only if its row still has the generation read before asking.
pub(crate) fn settle_txn(
    w: &Writer<'_>,
    metafile: Handle,
    settled: &[(usize, Handle, u32, DatafileStat)],
) -> WeftResult<Reply> {
    let mut record = match w.object(metafile) {
        // Removed since the stat read it: nothing to settle.
        Err(ErrorCode::Stale) => return Ok(Reply::Done),
        other => other?,
    };
    let datafiles = record.layout.as_ref().map(|l| l.datafiles.clone()).unwrap_or_default();
    let Some(SizeTracking::Metafile(stats)) = record.tracking.as_mut() else { return Ok(Reply::Done) };
    let mut changed = false;
    for (index, datafile, generation, stat) in settled {
        let same_file = datafiles.get(*index) == Some(datafile) && *index < stats.len();
        if same_file && w.handle_row(HandleTable::Growing, *datafile)? == Some(*generation) {
            stats[*index] = *stat;
            w.delete_handle_row(HandleTable::Growing, *datafile)?;
            changed = true;
        }
    }
    if changed {
        w.put_object(metafile, &record)?;
    }
    Ok(Reply::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datafile_is_marked_once_and_never_idle_while_changing() {
        let growth = Arc::new(Growth::default());
        let d = Handle::new(1, 20).unwrap();
        assert!(growth.take_idle(d), "never changed here: idle");
        let (first, unmarked) = growth.enter(d);
        assert!(unmarked, "the first change marks");
        growth.set_marked(d);
        let (second, unmarked) = growth.enter(d);
        assert!(!unmarked, "later changes ride on the mark");
        drop(first);
        assert!(!growth.take_idle(d), "a change in flight");
        drop(second);
        assert!(!growth.take_idle(d), "a change ended within the quiet period");
        // Forgotten (as a settle that found it idle would): marks again.
        growth.active.lock().unwrap().remove(&d);
        assert!(growth.enter(d).1);
    }

    #[test]
    fn records_written_before_tracking_decode_without_it() {
        let record = ObjectRecord::new(ObjectKind::Metafile, 0o644, 1, 2, 3);
        let bytes = record.encode();
        assert_eq!(bytes.last(), Some(&0u8), "`None` is the last byte");
        assert_eq!(ObjectRecord::decode(&bytes[..bytes.len() - 1]).unwrap(), record);
        let mut tracked = record.clone();
        tracked.tracking = Some(fresh_metafile(2));
        assert_eq!(ObjectRecord::decode(&tracked.encode()).unwrap(), tracked);
    }
}
