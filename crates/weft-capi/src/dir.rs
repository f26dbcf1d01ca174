//! Directory streams: `weft_opendir`, `weft_readdir`, `weft_closedir`.
//!
//! A stream fetches the directory one page at a time and remembers the
//! cookie of the last entry it saw, so a large directory never sits in
//! memory whole and entries added or removed while reading are seen or
//! not, but never twice. `.` and `..` are not listed.
//!
//! Its `Registered` impl has the same shape as `file.rs`'s and
//! `datatype.rs`'s (a review with `duplicates` pairs them): each names the
//! other handle kinds exhaustively, with no wildcard arm, so that a new
//! kind must be decided in every one; that is the point, so they stay.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};

use weft_client::BlockingClient;
use weft_proto::message::{DirEntry, ObjectKind};
use weft_proto::{ErrorCode, Handle};

use crate::boundary::{self, out_arg, string_arg};
use crate::error::CapiResult;
use crate::fs::FsState;
use crate::registry::{self, Object, Registered};
use crate::types::{weft_dir_t, weft_dirent, weft_fs_t};

/// Entries fetched per request: large enough that listing costs few round
/// trips, small enough that a page stays a few tens of KiB.
const PAGE_ENTRIES: u32 = 256;

/// Where a stream is in its directory.
struct Cursor {
    pending: VecDeque<DirEntry>,
    cookie: u64,
    end: bool,
}

/// State of one `weft_dir_t`.
pub(crate) struct DirState {
    client: BlockingClient,
    dir: Handle,
    cursor: Mutex<Cursor>,
}

impl Registered for DirState {
    type Opaque = weft_dir_t;
    fn wrap(state: Arc<Self>) -> Object {
        Object::Dir(state)
    }
    fn unwrap(object: &Object) -> Option<&Arc<Self>> {
        match object {
            Object::Dir(state) => Some(state),
            Object::Fs(_) | Object::File(_) | Object::Type(_) => None,
        }
    }
}

impl DirState {
    /// The next entry, fetching a page when the current one is used up.
    fn next(&self) -> CapiResult<Option<DirEntry>> {
        let mut cursor = self.cursor.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while cursor.pending.is_empty() && !cursor.end {
            let (entries, end) =
                self.client.block_on(self.client.client().readdir_page(self.dir, cursor.cookie, PAGE_ENTRIES))?;
            if let Some(last) = entries.last() {
                cursor.cookie = last.sequence;
            }
            cursor.end = end || entries.is_empty();
            cursor.pending.extend(entries);
        }
        Ok(cursor.pending.pop_front())
    }
}

fn open_stream(client: &BlockingClient, path: &str) -> CapiResult<DirState> {
    let (dir, kind) = client.block_on(client.client().resolve(path, true))?;
    if kind != ObjectKind::Directory {
        return Err(ErrorCode::NotDir.into());
    }
    let cursor = Cursor { pending: VecDeque::new(), cookie: 0, end: false };
    Ok(DirState { client: client.clone(), dir, cursor: Mutex::new(cursor) })
}

/// Opens a stream over the entries of the directory at `path`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or points to
/// writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_opendir(fs: *mut weft_fs_t, path: *const c_char, out: *mut *mut weft_dir_t) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let mut out = unsafe { out_arg(out)? };
        out.set(std::ptr::null_mut());
        let fs = registry::lookup::<FsState>(fs)?;
        // SAFETY: per this function's contract.
        let path = unsafe { string_arg(path)? };
        out.set(registry::register(open_stream(&fs.client, path)?));
        Ok(())
    })
}

/// Fills `entry` with the next entry. Returns 1 if it did, 0 at the end
/// of the directory, `-errno` on failure.
///
/// # Safety
/// `entry` is NULL or points to writable storage for one `weft_dirent`.
#[no_mangle]
pub unsafe extern "C" fn weft_readdir(dir: *mut weft_dir_t, entry: *mut weft_dirent) -> c_int {
    boundary::small_count(|| {
        let state = registry::lookup::<DirState>(dir)?;
        // SAFETY: per this function's contract.
        let mut entry = unsafe { out_arg(entry)? };
        match state.next()? {
            Some(next) => {
                entry.set(weft_dirent::from(&next));
                Ok(1)
            }
            None => Ok(0),
        }
    })
}

/// Closes a directory stream.
///
/// # Safety
/// Any pointer value is accepted; a value that is not a live stream gives
/// `-EBADF` (NULL gives `-EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn weft_closedir(dir: *mut weft_dir_t) -> c_int {
    boundary::status(|| registry::unregister::<DirState>(dir).map(drop))
}
