//! The table behind FUSE file handles: each `open` or `create` gets a fresh
//! number naming the weft [`File`] (handle and layout, so I/O needs no
//! attribute request) and the first write error, which every later write,
//! `fsync` and `flush` (close) report: a failed write is never silently
//! lost, and nothing more is written after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use weft_client::File;
use weft_proto::ErrorCode;

/// One open file.
#[derive(Debug)]
pub struct OpenFile {
    /// The weft file.
    pub file: File,
    /// Opened with `O_APPEND`: every write goes to the current end of file.
    pub append: bool,
    error: Mutex<Option<ErrorCode>>,
}

impl OpenFile {
    /// The first write or fsync error, if any.
    pub fn error(&self) -> Option<ErrorCode> {
        *self.error.lock().expect("open file error lock")
    }

    /// Records an error; the first one stays.
    pub fn fail(&self, code: ErrorCode) {
        let mut slot = self.error.lock().expect("open file error lock");
        slot.get_or_insert(code);
    }
}

/// Open files by FUSE file handle.
#[derive(Debug, Default)]
pub struct OpenFiles {
    next: AtomicU64,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
}

impl OpenFiles {
    /// Registers a file; returns its handle (never 0).
    pub fn insert(&self, file: File, append: bool) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let open = Arc::new(OpenFile { file, append, error: Mutex::new(None) });
        let previous = self.files.lock().expect("open files lock").insert(fh, open);
        assert!(previous.is_none(), "file handle {fh} reused");
        fh
    }

    /// The open file behind `fh`.
    pub fn get(&self, fh: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().expect("open files lock").get(&fh).cloned()
    }

    /// Forgets `fh` (release).
    pub fn remove(&self, fh: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().expect("open files lock").remove(&fh)
    }

    /// Number of open files.
    pub fn len(&self) -> usize {
        self.files.lock().expect("open files lock").len()
    }

    /// Whether no file is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
