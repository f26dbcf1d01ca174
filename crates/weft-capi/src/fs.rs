//! Connections: `weft_connect`, `weft_disconnect`, file-system space
//! (`weft_statfs`, `weft_statfs_servers`) and `weft_strerror`.
//!
//! A connection owns a [`BlockingClient`] (a client with its own small
//! runtime). Open files and directory streams hold clones of it, so they
//! stay usable after `weft_disconnect`; the runtime stops when the last of
//! them is closed.

use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};

use weft_client::{BlockingClient, ClientOptions};
use weft_config::Config;

use crate::boundary::{self, out_arg, string_arg};
use crate::error::{self, CapiError, CapiResult};
use crate::registry::{self, Object, Registered};
use crate::types::{weft_fs_t, weft_server_statfs, weft_statfs};

/// Worker threads of each connection's runtime: the client is I/O bound
/// and each call blocks its caller, so two workers keep every request of
/// one striped access in flight without competing with the application.
const RUNTIME_THREADS: usize = 2;

/// The environment variable naming the configuration when none is given.
pub const CONFIG_ENV: &str = "WEFT_CONFIG";

/// State of one `weft_fs_t`.
pub(crate) struct FsState {
    pub(crate) client: BlockingClient,
}

impl Registered for FsState {
    type Opaque = weft_fs_t;
    fn wrap(state: std::sync::Arc<Self>) -> Object {
        Object::Fs(state)
    }
    fn unwrap(object: &Object) -> Option<&std::sync::Arc<Self>> {
        match object {
            Object::Fs(state) => Some(state),
            Object::File(_) | Object::Dir(_) | Object::Type(_) => None,
        }
    }
}

/// The configuration path: the argument, else `$WEFT_CONFIG`.
fn config_path(given: Option<&str>) -> CapiResult<PathBuf> {
    match given {
        Some(path) => Ok(PathBuf::from(path)),
        None => std::env::var_os(CONFIG_ENV).map(PathBuf::from).ok_or(CapiError::ConfigPathMissing),
    }
}

fn connect(path: &Path) -> CapiResult<FsState> {
    let config = Config::load(path).map_err(|e| CapiError::from(&e))?;
    let client = BlockingClient::new(config, ClientOptions::default(), RUNTIME_THREADS)?;
    Ok(FsState { client })
}

/// Connects to the file system described by a configuration file.
///
/// `config_path` NULL means `$WEFT_CONFIG`. Servers are contacted lazily,
/// by the first operation. On success `*out` is a new handle to release
/// with [`weft_disconnect`].
///
/// # Safety
/// `config_path` is NULL or a NUL-terminated string; `out` is NULL or
/// points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_connect(config_path: *const c_char, out: *mut *mut weft_fs_t) -> c_int {
    boundary::status(|| {
        // SAFETY: per this function's contract.
        let mut out = unsafe { out_arg(out)? };
        out.set(std::ptr::null_mut());
        // SAFETY: per this function's contract.
        let given = if config_path.is_null() { None } else { Some(unsafe { string_arg(config_path)? }) };
        let state = connect(&self::config_path(given)?)?;
        out.set(registry::register(state));
        Ok(())
    })
}

/// Releases a connection. Files and directory streams opened through it
/// stay valid until closed.
///
/// # Safety
/// Any pointer value is accepted; a value that is not a live connection
/// gives `-EBADF` (NULL gives `-EINVAL`).
#[no_mangle]
pub unsafe extern "C" fn weft_disconnect(fs: *mut weft_fs_t) -> c_int {
    boundary::status(|| registry::unregister::<FsState>(fs).map(drop))
}

/// Fills `out` with the space of the whole file system (one request per
/// server).
///
/// # Safety
/// `out` is NULL or points to writable storage for one `weft_statfs`.
#[no_mangle]
pub unsafe extern "C" fn weft_statfs(fs: *mut weft_fs_t, out: *mut weft_statfs) -> c_int {
    boundary::status(|| {
        let state = registry::lookup::<FsState>(fs)?;
        // SAFETY: per this function's contract.
        let mut out = unsafe { out_arg(out)? };
        out.set(weft_statfs::from(&state.client.statfs()?));
        Ok(())
    })
}

/// Fills up to `capacity` entries of `out` with the space of each server,
/// in server id order, and returns the number of servers (which may exceed
/// `capacity`; call with `capacity` 0 and `out` NULL to size the array).
///
/// # Safety
/// `out` is NULL (only if `capacity` is 0) or points to `capacity`
/// writable `weft_server_statfs`.
#[no_mangle]
pub unsafe extern "C" fn weft_statfs_servers(
    fs: *mut weft_fs_t,
    out: *mut weft_server_statfs,
    capacity: usize,
) -> libc::ssize_t {
    boundary::count(|| {
        let state = registry::lookup::<FsState>(fs)?;
        if capacity > 0 && out.is_null() {
            return Err(CapiError::NullPointer);
        }
        if capacity > 0 && !out.is_aligned() {
            return Err(CapiError::MisalignedPointer);
        }
        let status = state.client.statfs()?;
        for (index, server) in status.servers.iter().take(capacity).enumerate() {
            // SAFETY: index < capacity, and `out` has `capacity` aligned
            // writable elements per this function's contract. `write`
            // does not read the possibly uninitialised old value.
            unsafe { out.add(index).write(weft_server_statfs::from(server)) };
        }
        Ok(status.servers.len())
    })
}

/// A static, NUL-terminated description of an errno. Accepts `err` with
/// either sign, so the return value of any call can be passed directly.
/// Never returns NULL.
#[no_mangle]
pub extern "C" fn weft_strerror(err: c_int) -> *const c_char {
    let message = std::panic::catch_unwind(|| error::message_of_errno(err.checked_abs().unwrap_or(-1)));
    message.unwrap_or(c"unknown error").as_ptr()
}
