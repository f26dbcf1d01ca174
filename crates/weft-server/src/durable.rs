//! Making names durable: the crash model (docs/FORMAT.md, "Crash model")
//! says a new directory entry survives power loss only once its directory
//! has been fsynced, so every file or directory the server creates and
//! relies on is followed by [`sync_dir`] of its parent.

use std::io;
use std::path::Path;

/// Fsyncs the directory `dir`, making the names created in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(test)]
    SYNCED.lock().expect("synced directories").push(dir.to_path_buf());
    Ok(())
}

/// Directories fsynced so far (tests check that the names they rely on were made durable).
#[cfg(test)]
pub static SYNCED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How many times `dir` was fsynced.
#[cfg(test)]
pub fn synced_count(dir: &Path) -> usize {
    SYNCED.lock().expect("synced directories").iter().filter(|d| d.as_path() == dir).count()
}

/// Creates `dir` and any missing parents, fsyncing the parent of each
/// directory created, so the whole path is durable.
pub fn create_dir_all_durable(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() {
            create_dir_all_durable(parent)?;
        }
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(err) => return Err(err),
    }
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => sync_dir(Path::new(".")),
    }
}
