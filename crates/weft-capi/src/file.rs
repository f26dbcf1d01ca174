//! Open files: `weft_open`, `weft_create`, `weft_pread`, `weft_pwrite`,
//! `weft_fsync`, `weft_ftruncate`, `weft_fstat` and `weft_close`.
//!
//! Servers keep no open state, so an open file is the file's handle and
//! layout plus the decoded open flags. After a write, fsync or truncate
//! through a file fails, the file's contents are unknown, so further
//! writes, fsyncs and truncates through it fail with `EIO` (reads still
//! work): a caller cannot mistake a later success for durability of the
//! failed data.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use weft_client::{BlockingClient, CreateOptions, File, IoMethod};
use weft_proto::{limits, ErrorCode, WeftResult};

use crate::boundary::{self, input_bytes, out_arg, output_bytes, string_arg};
use crate::error::{CapiError, CapiResult};
use crate::flags::OpenFlags;
use crate::fs::FsState;
use crate::registry::{self, Object, Registered};
use crate::types::{weft_file_t, weft_fs_t, weft_stat};

/// State of one `weft_file_t`.
pub(crate) struct FileState {
    pub(crate) client: BlockingClient,
    pub(crate) file: File,
    flags: OpenFlags,
    write_failed: AtomicBool,
    /// The method of noncontiguous I/O chosen with `weft_set_io_method`;
    /// `None` means each call's natural one.
    pub(crate) io_method: Mutex<Option<IoMethod>>,
}

impl Registered for FileState {
    type Opaque = weft_file_t;
    fn wrap(state: Arc<Self>) -> Object {
        Object::File(state)
    }
    fn unwrap(object: &Object) -> Option<&Arc<Self>> {
        match object {
            Object::File(state) => Some(state),
            Object::Fs(_) | Object::Dir(_) | Object::Type(_) => None,
        }
    }
}

impl FileState {
    pub(crate) fn check_readable(&self) -> CapiResult<()> {
        if self.flags.read {
            Ok(())
        } else {
            Err(CapiError::NotOpenForReading)
        }
    }

    fn check_writable(&self) -> CapiResult<()> {
        if !self.flags.write {
            return Err(CapiError::NotOpenForWriting);
        }
        if self.write_failed.load(Ordering::Acquire) {
            return Err(CapiError::PreviousWriteFailed);
        }
        Ok(())
    }

    /// Passes `result` through, remembering a failure of a changing call.
    fn record<T>(&self, result: WeftResult<T>) -> CapiResult<T> {
        if result.is_err() {
            self.write_failed.store(true, Ordering::Release);
        }
        Ok(result?)
    }

    /// A noncontiguous write through `write`, which moves the bytes: it
    /// is refused with `O_APPEND` (the access names its offsets), marks
    /// the file failed if it fails, and is followed by an fsync with
    /// `O_SYNC`. Range checks belong before this call, so that refused
    /// arguments do not mark the file failed.
    pub(crate) fn write_noncontig(
        &self,
        write: impl FnOnce(&BlockingClient, &File) -> WeftResult<()>,
    ) -> CapiResult<()> {
        self.check_writable()?;
        if self.flags.append {
            return Err(CapiError::AppendNoncontiguous);
        }
        self.record(write(&self.client, &self.file))?;
        if self.flags.sync {
            self.record(self.client.fsync(&self.file))?;
        }
        Ok(())
    }

    fn write(&self, data: &[u8], offset: u64) -> CapiResult<usize> {
        self.check_writable()?;
        let offset = if self.flags.append { self.client.file_size(&self.file)? } else { offset };
        // Out-of-range writes fail before any byte moves; they must not
        // mark the file as failed.
        if offset.checked_add(data.len() as u64).is_none_or(|end| end > limits::FILE_BYTES_MAX) {
            return Err(ErrorCode::TooBig.into());
        }
        self.record(self.client.write_at(&self.file, offset, data))?;
        if self.flags.sync {
            self.record(self.client.fsync(&self.file))?;
        }
        Ok(data.len())
    }
}

/// Opens `path`, creating it per `flags`; returns the file and whether it
/// was created by this call.
fn open_or_create(
    client: &BlockingClient,
    path: &str,
    flags: &OpenFlags,
    options: CreateOptions,
) -> WeftResult<(File, bool)> {
    let wanted = flags.wanted_access();
    let exclusive = CreateOptions { exclusive: true, ..options };
    if !flags.create {
        return client.open(path, wanted).map(|file| (file, false));
    }
    if flags.exclusive {
        return client.create(path, exclusive).map(|file| (file, true));
    }
    match client.open(path, wanted) {
        Err(ErrorCode::NoEntry) => {}
        other => return other.map(|file| (file, false)),
    }
    match client.create(path, exclusive) {
        // Another client created it between our open and create.
        Err(ErrorCode::Exists) => client.open(path, wanted).map(|file| (file, false)),
        other => other.map(|file| (file, true)),
    }
}

/// The shared body of `weft_open` and `weft_create`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or points to
/// writable storage for one pointer.
unsafe fn open_file(
    fs: *mut weft_fs_t,
    path: *const c_char,
    flags: c_int,
    options: CreateOptions,
    out: *mut *mut weft_file_t,
) -> CapiResult<()> {
    // SAFETY: per this function's contract.
    let mut out = unsafe { out_arg(out)? };
    out.set(std::ptr::null_mut());
    let fs = registry::lookup::<FsState>(fs)?;
    // SAFETY: per this function's contract.
    let path = unsafe { string_arg(path)? };
    let flags = OpenFlags::parse(flags)?;
    let (file, created) = open_or_create(&fs.client, path, &flags, options)?;
    if flags.truncate && !created {
        fs.client.truncate_file(&file, 0)?;
    }
    let state = FileState {
        client: fs.client.clone(),
        file,
        flags,
        write_failed: AtomicBool::new(false),
        io_method: Mutex::new(None),
    };
    out.set(registry::register(state));
    Ok(())
}

/// Opens a file. `flags` are `<fcntl.h>` flags (see `weft.h` for the
/// accepted set); with `O_CREAT` a missing file is created with
/// permission bits `mode` and the default layout (directory default, then
/// configuration default).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or points to
/// writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_open(
    fs: *mut weft_fs_t,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    out: *mut *mut weft_file_t,
) -> c_int {
    let options = CreateOptions { mode: Some(mode & 0o7777), ..CreateOptions::default() };
    // SAFETY: per this function's contract.
    boundary::status(|| unsafe { open_file(fs, path, flags, options, out) })
}

/// Opens a file, creating it if missing (`O_CREAT` is implied) with
/// permission bits `mode`, strip size `strip_bytes` and `stripe_count`
/// datafiles; 0 for either means the default. The layout applies only if
/// this call creates the file. A stripe count above the number of data
/// servers is reduced to it.
///
/// # Safety
/// As for [`weft_open`].
#[no_mangle]
pub unsafe extern "C" fn weft_create(
    fs: *mut weft_fs_t,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    strip_bytes: u64,
    stripe_count: u32,
    out: *mut *mut weft_file_t,
) -> c_int {
    let options = CreateOptions {
        mode: Some(mode & 0o7777),
        strip_bytes: (strip_bytes != 0).then_some(strip_bytes),
        stripe_count: (stripe_count != 0).then_some(stripe_count),
        exclusive: false,
    };
    // SAFETY: per this function's contract.
    boundary::status(|| unsafe { open_file(fs, path, flags | libc::O_CREAT, options, out) })
}

/// Reads up to `count` bytes at `offset` into `buffer`. Returns the bytes
/// read: `count`, fewer only at the end of the file, 0 at or past it.
/// Holes read as zeros.
///
/// # Safety
/// `buffer` is NULL (only if `count` is 0) or points to `count` writable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_pread(
    file: *mut weft_file_t,
    buffer: *mut c_void,
    count: usize,
    offset: i64,
) -> libc::ssize_t {
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        state.check_readable()?;
        // SAFETY: per this function's contract.
        let buffer = unsafe { output_bytes(buffer, count)? };
        let offset = boundary::offset_arg(offset)?;
        Ok(state.client.read_at(&state.file, offset, buffer)?)
    })
}

/// Writes `count` bytes from `buffer` at `offset` (at the end of the file
/// if opened with `O_APPEND`, as Linux `pwrite` does; the end is read
/// first, so concurrent appenders may overlap). Returns `count`: a write
/// is complete or fails.
///
/// # Safety
/// `buffer` is NULL (only if `count` is 0) or points to `count` readable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_pwrite(
    file: *mut weft_file_t,
    buffer: *const c_void,
    count: usize,
    offset: i64,
) -> libc::ssize_t {
    boundary::count(|| {
        let state = registry::lookup::<FileState>(file)?;
        // SAFETY: per this function's contract.
        let data = unsafe { input_bytes(buffer, count)? };
        let offset = boundary::offset_arg(offset)?;
        state.write(data, offset)
    })
}

/// Makes the file's bytes durable on every server holding them.
///
/// # Safety
/// Any pointer value is accepted (see `weft_close`).
#[no_mangle]
pub unsafe extern "C" fn weft_fsync(file: *mut weft_file_t) -> c_int {
    boundary::status(|| {
        let state = registry::lookup::<FileState>(file)?;
        state.check_writable()?;
        state.record(state.client.fsync(&state.file))
    })
}

/// Sets the size of an open file (needs `O_WRONLY` or `O_RDWR`).
///
/// # Safety
/// Any pointer value is accepted (see `weft_close`).
#[no_mangle]
pub unsafe extern "C" fn weft_ftruncate(file: *mut weft_file_t, size: i64) -> c_int {
    boundary::status(|| {
        let state = registry::lookup::<FileState>(file)?;
        let size = boundary::offset_arg(size)?;
        state.check_writable()?;
        state.record(state.client.truncate_file(&state.file, size))
    })
}

/// Attributes of an open file.
///
/// # Safety
/// `out` is NULL or points to writable storage for one `weft_stat`.
#[no_mangle]
pub unsafe extern "C" fn weft_fstat(file: *mut weft_file_t, out: *mut weft_stat) -> c_int {
    boundary::status(|| {
        let state = registry::lookup::<FileState>(file)?;
        // SAFETY: per this function's contract.
        let mut out = unsafe { out_arg(out)? };
        let stat = state.client.block_on(state.client.client().stat_handle(state.file.handle))?;
        out.set(weft_stat::from(&stat));
        Ok(())
    })
}

/// Closes a file. Nothing is buffered, so closing neither flushes nor
/// syncs; call `weft_fsync` for durability.
///
/// # Safety
/// Any pointer value is accepted; a value that is not a live file gives
/// `-EBADF` (NULL gives `-EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn weft_close(file: *mut weft_file_t) -> c_int {
    boundary::status(|| registry::unregister::<FileState>(file).map(drop))
}
