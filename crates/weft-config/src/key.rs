//! The file-system key file: creating one (random, owner-only) and loading
//! one, refusing a file that anyone but its owner may read or write.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use weft_proto::limits::AUTH_KEY_BYTES_MIN;

/// Creates a key file at `path` (mode 0600, 64 random bytes written as
/// hex) unless one exists; returns whether it created one. The parent
/// directory is created if missing.
pub fn create_key(path: &Path) -> Result<bool, String> {
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(named)?;
    }
    let mut bytes = [0u8; 64];
    getrandom::fill(&mut bytes).map_err(|e| format!("random key: {e}"))?;
    let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(err) => return Err(named(err)),
    };
    file.write_all(format!("{text}\n").as_bytes()).map_err(named)?;
    file.sync_all().map_err(named)?;
    Ok(true)
}

/// Loads the key at `path`: its bytes (surrounding whitespace trimmed).
/// Refused when the file is readable or writable by group or others,
/// shorter than `AUTH_KEY_BYTES_MIN`, or not a regular file. The error
/// says which; an unreadable file gives the OS error (`EACCES`).
pub fn load_key(path: &Path) -> Result<Vec<u8>, KeyError> {
    let named = |e: std::io::Error| KeyError::Unreadable(format!("{}: {e}", path.display()), e.kind());
    let file = std::fs::File::open(path).map_err(named)?;
    let meta = file.metadata().map_err(named)?;
    if !meta.is_file() {
        return Err(KeyError::Unsafe(format!("{}: not a regular file", path.display())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(KeyError::Unsafe(format!(
            "{}: mode {:o} lets others read or write the key (chmod 600)",
            path.display(),
            meta.mode() & 0o777
        )));
    }
    let mut bytes = Vec::new();
    file.take(64 * 1024).read_to_end(&mut bytes).map_err(named)?;
    let key = bytes.trim_ascii().to_vec();
    if key.len() < AUTH_KEY_BYTES_MIN {
        return Err(KeyError::Unsafe(format!(
            "{}: a key needs at least {AUTH_KEY_BYTES_MIN} bytes, this one has {}",
            path.display(),
            key.len()
        )));
    }
    Ok(key)
}

/// Why a key could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The file could not be opened or read (e.g. no permission).
    #[error("{0}")]
    Unreadable(String, std::io::ErrorKind),
    /// The file is unsafe or malformed.
    #[error("{0}")]
    Unsafe(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_key_loads_and_group_readable_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/weft.key");
        assert!(create_key(&path).unwrap());
        assert!(!create_key(&path).unwrap(), "an existing key is kept");
        let key = load_key(&path).unwrap();
        assert_eq!(key.len(), 128);
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        assert!(matches!(load_key(&path), Err(KeyError::Unsafe(m)) if m.contains("chmod 600")));
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        std::fs::write(&path, "short\n").unwrap();
        assert!(matches!(load_key(&path), Err(KeyError::Unsafe(_))));
        assert!(matches!(load_key(&dir.path().join("none")), Err(KeyError::Unreadable(..))));
    }
}
