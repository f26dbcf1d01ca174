//! Plain paths on a Weft FUSE mount (issue 23 item 4): which file of which
//! Weft file system a local path names, so that `MPI_File_open` of
//! `/mnt/weft/x` opens the Weft file `/x` natively instead of going through
//! the MPI library's own MPI-IO over FUSE.
//!
//! A path is on a Weft mount when the mount holding it (the longest mount
//! point in `/proc/self/mountinfo` above the path, parent directory
//! resolved with `realpath`) is a FUSE mount (type `fuse`, or `fuse.weft`
//! where the subtype is recorded; fuser's own mount as root drops it) whose
//! source begins with `weft:` — what `weft mount` sets:
//! `weft:NAME@CONFIG`, `CONFIG` being the absolute path of the
//! configuration the mount was made with (`weft:NAME` from mounts that do
//! not record it). The process's client then needs the same file system:
//!
//! - no `WEFT_CONFIG` and a recorded `CONFIG`: the client is started with
//!   `CONFIG` (the first such mount's, for the life of the process);
//! - `WEFT_CONFIG` (or an adopted `CONFIG`) and a recorded `CONFIG`: both
//!   must be the same file or load to equal configurations;
//! - `WEFT_CONFIG` and no recorded `CONFIG`: its file-system name must be
//!   `NAME`.
//!
//! Otherwise the path stays with the MPI library, and one line on stderr
//! per process says why. `WEFT_MPIIO_MOUNT_PATHS=0` (or `off`, `no`,
//! `false`) turns the detection off. Names with a prefix (`ufs:`, `nfs:`,
//! ... — anything up to a `:` before the first `/`) are never resolved.
//!
//! Coherence with the mount: native writes go straight to the servers; the
//! mount drops a file's cached pages and attributes when the file is opened
//! through it (close-to-open). So that `stat` through this node's mount is
//! current at once too, [`refresh`] opens and closes the local path through
//! the kernel after a native close or sync of a file opened by mount path.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// The environment switch; `0`, `off`, `no` or `false` turns detection off.
pub const SWITCH: &str = "WEFT_MPIIO_MOUNT_PATHS";

/// The file-system types of a Weft mount: `fuse`, or `fuse.weft` when the
/// mount records `weft mount`'s `Subtype("weft")`.
const FSTYPES: [&str; 2] = ["fuse", "fuse.weft"];

/// A local path resolved to a Weft file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The file's path inside Weft (`/dir/file`).
    pub weft_path: String,
    /// The canonical local path (mount point joined with the rest).
    pub local: PathBuf,
}

/// One line of `/proc/self/mountinfo`, the fields used here.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    root: String,
    mount_point: PathBuf,
    fstype: String,
    source: String,
}

/// The configuration adopted from a mount when `WEFT_CONFIG` is unset.
static ADOPTED: Mutex<Option<PathBuf>> = Mutex::new(None);
/// Local paths of open files opened by mount path, by file id.
static LOCAL_PATHS: Mutex<Option<HashMap<u64, PathBuf>>> = Mutex::new(None);
/// Reasons already reported on stderr (one line per reason per process).
static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether detection is on (the environment switch).
pub fn enabled() -> bool {
    match std::env::var(SWITCH) {
        Ok(value) => !matches!(value.trim().to_ascii_lowercase().as_str(), "0" | "off" | "no" | "false"),
        Err(_) => true,
    }
}

/// The configuration the process's client uses when `WEFT_CONFIG` is unset.
pub fn adopted_config() -> Option<PathBuf> {
    ADOPTED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn warn_once(reason: String) {
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if !warned.contains(&reason) {
        eprintln!("libweft_mpiio: {reason}");
        warned.push(reason);
    }
}

/// Undoes mountinfo's octal escapes (`\040` space, `\011` tab, `\012`
/// newline, `\134` backslash).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let value = bytes[i + 1..i + 4].iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text; malformed lines are skipped.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let separator = fields.iter().position(|f| *f == "-")?;
            if separator < 6 {
                return None;
            }
            Some(MountEntry {
                root: unescape(fields[3]),
                mount_point: PathBuf::from(unescape(fields[4])),
                fstype: unescape(fields.get(separator + 1)?),
                source: unescape(fields.get(separator + 2)?),
            })
        })
        .collect()
}

/// The mount holding `path` (absolute, canonical): the longest mount point
/// above it, the last of equal ones (mounts stacked on one point).
fn holding_mount<'a>(mounts: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    let mut best: Option<&MountEntry> = None;
    for entry in mounts {
        if path.starts_with(&entry.mount_point)
            && best.map_or(true, |b| entry.mount_point.components().count() >= b.mount_point.components().count())
        {
            best = Some(entry);
        }
    }
    best
}

/// Whether `name` carries an MPI-IO prefix (`ufs:`, `weft:`, ...): a `:`
/// before the first `/`.
fn has_prefix(name: &str) -> bool {
    match (name.find(':'), name.find('/')) {
        (Some(colon), Some(slash)) => colon < slash,
        (Some(_), None) => true,
        _ => false,
    }
}

/// The canonical absolute form of `name` (its parent directory through
/// `realpath`; the file itself need not exist, or is resolved too if it
/// does, following a symbolic link).
fn canonical(name: &str) -> Option<PathBuf> {
    let path = Path::new(name);
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    if let Ok(full) = absolute.canonicalize() {
        return Some(full);
    }
    let leaf = match absolute.components().next_back()? {
        Component::Normal(leaf) => leaf.to_os_string(),
        _ => return None,
    };
    Some(absolute.parent()?.canonicalize().ok()?.join(leaf))
}

/// The Weft path of `local` on `mount`: the mount's root joined with the
/// part of `local` below the mount point.
fn weft_path_on(mount: &MountEntry, local: &Path) -> Option<String> {
    let rest = local.strip_prefix(&mount.mount_point).ok()?;
    let mut weft = mount.root.trim_end_matches('/').to_string();
    for component in rest.components() {
        match component {
            Component::Normal(part) => {
                weft.push('/');
                weft.push_str(part.to_str()?);
            }
            _ => return None,
        }
    }
    if weft.is_empty() {
        weft.push('/');
    }
    Some(weft)
}

/// Splits a mount source `weft:NAME[@CONFIG]`.
fn split_source(source: &str) -> Option<(&str, Option<&Path>)> {
    let rest = source.strip_prefix("weft:")?;
    match rest.find("@/") {
        Some(at) => Some((&rest[..at], Some(Path::new(&rest[at + 1..])))),
        None => Some((rest, None)),
    }
}

fn same_config(a: &Path, b: &Path) -> bool {
    if a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(x, y)| x == y) {
        return true;
    }
    match (weft_config::Config::load(a), weft_config::Config::load(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Decides whether the process's client serves the file system a mount
/// with `source` shows, adopting the mount's configuration if the process
/// has none. Reports why not, once.
fn client_serves(source: &str, mount_point: &Path) -> bool {
    let Some((name, recorded)) = split_source(source) else { return false };
    let mut adopted = ADOPTED.lock().unwrap_or_else(|p| p.into_inner());
    let own = std::env::var_os("WEFT_CONFIG").map(PathBuf::from).or_else(|| adopted.clone());
    let served = match (&own, recorded) {
        (None, Some(recorded)) => {
            *adopted = Some(recorded.to_path_buf());
            return true;
        }
        (None, None) => Err("no WEFT_CONFIG and the mount records no configuration".to_string()),
        (Some(own), Some(recorded)) => {
            if same_config(own, recorded) {
                Ok(())
            } else {
                Err(format!("its configuration {} is not this process's {}", recorded.display(), own.display()))
            }
        }
        (Some(own), None) => match weft_config::Config::load(own) {
            Ok(config) if config.filesystem.name == name => Ok(()),
            Ok(config) => Err(format!("it shows file system `{name}`, WEFT_CONFIG names `{}`", config.filesystem.name)),
            Err(err) => Err(format!("WEFT_CONFIG {}: {err}", own.display())),
        },
    };
    drop(adopted);
    match served {
        Ok(()) => true,
        Err(reason) => {
            warn_once(format!(
                "{} is a Weft mount, but {reason}: its files go through the MPI library's own MPI-IO",
                mount_point.display()
            ));
            false
        }
    }
}

/// Resolves `name` to a Weft file if it lies on a Weft mount this process's
/// client can serve (see the module comment); `None` otherwise, and always
/// when the switch is off.
pub fn resolve(name: &str) -> Option<Resolved> {
    if !enabled() || name.is_empty() || has_prefix(name) {
        return None;
    }
    let local = canonical(name)?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mounts = parse_mountinfo(&table);
    let mount = holding_mount(&mounts, &local)?;
    if !FSTYPES.contains(&mount.fstype.as_str()) || !mount.source.starts_with("weft:") {
        return None;
    }
    let weft_path = weft_path_on(mount, &local)?;
    if !client_serves(&mount.source, &mount.mount_point) {
        return None;
    }
    Some(Resolved { weft_path, local })
}

/// Remembers that file `id` was opened by the mount path `local`.
pub fn remember(id: u64, local: PathBuf) {
    LOCAL_PATHS.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(HashMap::new).insert(id, local);
}

/// After a native sync or close of file `id` (`forget` at close): if it was
/// opened by mount path, opens and closes that path through the kernel, so
/// this node's mount drops its cached attributes and pages of the file.
/// Best effort: a file that cannot be opened (removed, no read permission)
/// keeps the mount's usual close-to-open rule.
pub fn refresh(id: u64, forget: bool) {
    let local = {
        let mut table = LOCAL_PATHS.lock().unwrap_or_else(|p| p.into_inner());
        let Some(map) = table.as_mut() else { return };
        if forget {
            map.remove(&id)
        } else {
            map.get(&id).cloned()
        }
    };
    if let Some(local) = local {
        drop(std::fs::File::open(local));
    }
}

/// C ABI: whether detection is on (1) or off (0). The C layer skips the
/// ranks' agreement step when it is off.
#[no_mangle]
pub extern "C" fn weft_mpiio_mount_enabled() -> c_int {
    c_int::from(enabled())
}

/// C ABI: resolves `name`; 1 with the Weft path (NUL-terminated) in
/// `weft_path` (`cap` bytes) if it lies on a Weft mount this process
/// serves, else 0 (also for a path that does not fit).
///
/// # Safety
/// `name` is NULL or a C string; `weft_path` has `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_mount_resolve(name: *const c_char, weft_path: *mut c_char, cap: usize) -> c_int {
    if name.is_null() || weft_path.is_null() {
        return 0;
    }
    // SAFETY: per this function's contract.
    let Ok(name) = unsafe { CStr::from_ptr(name) }.to_str() else { return 0 };
    let found = catch_unwind(AssertUnwindSafe(|| resolve(name))).ok().flatten();
    let Some(found) = found else { return 0 };
    let bytes = found.weft_path.as_bytes();
    if bytes.len() >= cap || bytes.contains(&0) {
        return 0;
    }
    // SAFETY: `weft_path` has `cap` > `bytes.len()` writable bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), weft_path.cast::<u8>(), bytes.len());
        *weft_path.add(bytes.len()) = 0;
    }
    1
}

/// C ABI: file `id` was opened by the mount path `name` (see [`refresh`]).
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn weft_mpiio_mount_remember(id: u64, name: *const c_char) {
    if name.is_null() {
        return;
    }
    // SAFETY: per this function's contract.
    let Ok(name) = unsafe { CStr::from_ptr(name) }.to_str() else { return };
    let _ = catch_unwind(|| {
        if let Some(local) = canonical(name) {
            remember(id, local);
        }
    });
}

/// C ABI: [`refresh`] after a native sync (`forget` 0) or close (1).
#[no_mangle]
pub extern "C" fn weft_mpiio_mount_refresh(id: u64, forget: c_int) {
    let _ = catch_unwind(|| refresh(id, forget != 0));
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 0:35 / /mnt/weft rw,nosuid,nodev shared:20 - fuse.weft weft:weft@/etc/weft/a\\040b.toml rw,user_id=0
41 22 0:36 /sub /mnt/with\\040space rw - fuse.weft weft:other rw
42 40 0:37 / /mnt/weft/inner rw - tmpfs tmpfs rw
";

    #[test]
    fn parses_and_finds_the_holding_mount() {
        let mounts = parse_mountinfo(TABLE);
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[1].source, "weft:weft@/etc/weft/a b.toml");
        assert_eq!(mounts[2].mount_point, PathBuf::from("/mnt/with space"));
        let on = holding_mount(&mounts, Path::new("/mnt/weft/d/f")).unwrap();
        assert_eq!(on.fstype, "fuse.weft");
        assert_eq!(weft_path_on(on, Path::new("/mnt/weft/d/f")).unwrap(), "/d/f");
        assert_eq!(weft_path_on(on, Path::new("/mnt/weft")).unwrap(), "/");
        assert_eq!(holding_mount(&mounts, Path::new("/mnt/weft/inner/f")).unwrap().fstype, "tmpfs");
        assert_eq!(holding_mount(&mounts, Path::new("/mnt/weftx/f")).unwrap().fstype, "ext4");
        let sub = holding_mount(&mounts, Path::new("/mnt/with space/f")).unwrap();
        assert_eq!(weft_path_on(sub, Path::new("/mnt/with space/f")).unwrap(), "/sub/f");
    }

    #[test]
    fn sources_and_prefixes() {
        assert_eq!(split_source("weft:fs@/a/b.toml"), Some(("fs", Some(Path::new("/a/b.toml")))));
        assert_eq!(split_source("weft:fs"), Some(("fs", None)));
        assert_eq!(split_source("tmpfs"), None);
        assert!(has_prefix("ufs:/a/b"));
        assert!(has_prefix("weft:/a"));
        assert!(!has_prefix("/a/b:c"));
        assert!(!has_prefix("rel/x"));
        assert_eq!(unescape("a\\040b\\134c"), "a b\\c");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
    }
}
