//! Path resolution: one lookup per component, symlinks followed up to
//! `SYMLINK_FOLLOW_MAX` times (then `Loop`), `..` by the directories
//! actually traversed. Paths are absolute inside Weft; a leading
//! `weft:` is accepted and stripped.

use weft_proto::message::{ObjectKind, Reply, Request};
use weft_proto::{limits, message, ErrorCode, Handle, WeftResult};

use crate::client::Client;

/// Splits a Weft path into its components (dropping empty and `.` ones).
pub fn components(path: &str) -> WeftResult<Vec<String>> {
    let path = path.strip_prefix("weft:").unwrap_or(path);
    if path.len() > limits::PATH_BYTES_MAX {
        return Err(ErrorCode::NameTooLong);
    }
    let parts: Vec<String> = path.split('/').filter(|c| !c.is_empty() && *c != ".").map(str::to_string).collect();
    for part in &parts {
        if part.len() > limits::NAME_BYTES_MAX {
            return Err(ErrorCode::NameTooLong);
        }
    }
    Ok(parts)
}

impl Client {
    /// Finds `name` in directory `parent` (one request).
    pub async fn lookup(&self, parent: Handle, name: &str) -> WeftResult<(Handle, ObjectKind)> {
        let request = Request::Lookup { cred: self.cred(), parent, name: name.to_string() };
        match self.call_at(parent, request).await? {
            Reply::Entry { handle, kind } => Ok((handle, kind)),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Resolves a path to a handle. `follow_last` follows a final symlink.
    pub async fn resolve(&self, path: &str, follow_last: bool) -> WeftResult<(Handle, ObjectKind)> {
        let mut pending: Vec<String> = components(path)?;
        pending.reverse(); // a stack: next component at the end
        let mut trail: Vec<Handle> = vec![Handle::ROOT];
        let mut current = (Handle::ROOT, ObjectKind::Directory);
        let mut follows = 0u32;
        while let Some(name) = pending.pop() {
            if current.1 != ObjectKind::Directory {
                return Err(ErrorCode::NotDir);
            }
            if name == ".." {
                if trail.len() > 1 {
                    trail.pop();
                }
                current = (*trail.last().expect("trail keeps the root"), ObjectKind::Directory);
                continue;
            }
            let parent = current.0;
            let found = self.lookup(parent, &name).await?;
            let is_last = pending.is_empty();
            if found.1 == ObjectKind::Symlink && (!is_last || follow_last) {
                follows += 1;
                if follows > limits::SYMLINK_FOLLOW_MAX {
                    return Err(ErrorCode::Loop);
                }
                let target = self.readlink_handle(found.0).await?;
                let mut spliced = components(&target)?;
                spliced.reverse();
                pending.extend(spliced);
                if target.strip_prefix("weft:").unwrap_or(&target).starts_with('/') {
                    trail.truncate(1);
                    current = (Handle::ROOT, ObjectKind::Directory);
                }
                continue;
            }
            current = found;
            if found.1 == ObjectKind::Directory {
                trail.push(found.0);
            }
        }
        Ok(current)
    }

    /// Resolves all but the last component; returns the parent directory and the last name.
    pub async fn resolve_parent(&self, path: &str) -> WeftResult<(Handle, String)> {
        let mut parts = components(path)?;
        let name = parts.pop().ok_or(ErrorCode::Invalid)?;
        if name == ".." {
            return Err(ErrorCode::Invalid);
        }
        message::validate_name(&name)?;
        let parent_path = format!("/{}", parts.join("/"));
        let (parent, kind) = self.resolve(&parent_path, true).await?;
        if kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        Ok((parent, name))
    }

    /// The target of a symlink handle.
    pub async fn readlink_handle(&self, handle: Handle) -> WeftResult<String> {
        let attrs = self.getattr_raw(handle).await?;
        attrs.symlink_target.ok_or(ErrorCode::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_paths() {
        assert_eq!(components("weft:/a//b/./c").unwrap(), vec!["a", "b", "c"]);
        assert!(components("/").unwrap().is_empty());
        assert_eq!(components(&format!("/{}", "x".repeat(300))), Err(ErrorCode::NameTooLong));
    }
}
