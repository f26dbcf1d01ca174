//! Path-based operations: resolve, then call the handle-based operation.

use weft_proto::message::{AttrChanges, DirEntry, ObjectKind, TimeSet};
use weft_proto::{Distribution, ErrorCode, Handle, WeftResult};

use crate::client::{Client, Stat};
use crate::io::File;
use crate::namespace::CreateOptions;

/// Entries per readdir page when listing a whole directory.
const LIST_PAGE_ENTRIES: u32 = 1024;

impl Client {
    /// Attributes of a path, following a final symlink.
    pub async fn stat(&self, path: &str) -> WeftResult<Stat> {
        self.stat_path(path, true).await
    }

    /// Attributes of a path, not following a final symlink.
    pub async fn lstat(&self, path: &str) -> WeftResult<Stat> {
        self.stat_path(path, false).await
    }

    /// Resolves the parent, then looks up and stats the last component in
    /// one request (`StatEntry`); a final symlink to follow, a final `..`
    /// and the root take the component-by-component way.
    async fn stat_path(&self, path: &str, follow: bool) -> WeftResult<Stat> {
        let last = crate::path::components(path)?.pop();
        if !self.client_driven() && last.is_some_and(|name| name != "..") {
            let (parent, name) = self.resolve_parent(path).await?;
            match self.stat_entry(parent, &name).await? {
                Ok(stat) => return Ok(stat),
                Err((handle, kind)) if kind != ObjectKind::Symlink || !follow => return self.stat_handle(handle).await,
                Err(_) => {}
            }
        }
        let (handle, _) = self.resolve(path, follow).await?;
        self.stat_handle(handle).await
    }

    /// Creates a file (see [`CreateOptions`]).
    pub async fn create(&self, path: &str, options: CreateOptions) -> WeftResult<File> {
        let (parent, name) = self.resolve_parent(path).await?;
        self.create_in(parent, &name, options).await
    }

    /// Opens an existing file, checking `wanted` access bits (see [`crate::access`]).
    pub async fn open(&self, path: &str, wanted: u32) -> WeftResult<File> {
        let (handle, kind) = self.resolve(path, true).await?;
        match kind {
            ObjectKind::Directory => return Err(ErrorCode::IsDir),
            ObjectKind::Metafile => {}
            _ => return Err(ErrorCode::Invalid),
        }
        let attrs = self.getattr_raw(handle).await?;
        crate::access::check(&self.credentials, &attrs, wanted)?;
        let layout = attrs.layout.ok_or(ErrorCode::Io)?;
        Ok(File { handle, layout })
    }

    /// Creates a directory.
    pub async fn mkdir(&self, path: &str, mode: u32) -> WeftResult<Handle> {
        let (parent, name) = self.resolve_parent(path).await?;
        self.mkdir_in(parent, &name, mode).await
    }

    /// Creates a directory and its missing parents; existing directories are fine.
    pub async fn mkdir_all(&self, path: &str, mode: u32) -> WeftResult<Handle> {
        let mut current = Handle::ROOT;
        for name in crate::path::components(path)? {
            current = match self.lookup(current, &name).await {
                Ok((handle, ObjectKind::Directory)) => handle,
                Ok(_) => return Err(ErrorCode::NotDir),
                Err(ErrorCode::NoEntry) => match self.mkdir_in(current, &name, mode).await {
                    Ok(handle) => handle,
                    Err(ErrorCode::Exists) => self.lookup(current, &name).await?.0,
                    Err(code) => return Err(code),
                },
                Err(code) => return Err(code),
            };
        }
        Ok(current)
    }

    /// Removes an empty directory.
    pub async fn rmdir(&self, path: &str) -> WeftResult<()> {
        let (parent, name) = self.resolve_parent(path).await?;
        self.rmdir_in(parent, &name).await
    }

    /// Removes a file or symlink.
    pub async fn unlink(&self, path: &str) -> WeftResult<()> {
        let (parent, name) = self.resolve_parent(path).await?;
        self.unlink_in(parent, &name).await
    }

    /// Renames a path.
    pub async fn rename(&self, from: &str, to: &str) -> WeftResult<()> {
        let (old_parent, old_name) = self.resolve_parent(from).await?;
        let (new_parent, new_name) = self.resolve_parent(to).await?;
        self.rename_in(old_parent, &old_name, new_parent, &new_name).await
    }

    /// Creates a symlink at `path` pointing at `target`.
    pub async fn symlink(&self, target: &str, path: &str) -> WeftResult<Handle> {
        let (parent, name) = self.resolve_parent(path).await?;
        self.symlink_in(parent, &name, target).await
    }

    /// The target of a symlink.
    pub async fn readlink(&self, path: &str) -> WeftResult<String> {
        let (handle, kind) = self.resolve(path, false).await?;
        if kind != ObjectKind::Symlink {
            return Err(ErrorCode::Invalid);
        }
        self.readlink_handle(handle).await
    }

    /// Every entry of a directory, page by page.
    pub async fn readdir(&self, path: &str) -> WeftResult<Vec<DirEntry>> {
        let (dir, kind) = self.resolve(path, true).await?;
        if kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        let mut all = Vec::new();
        let mut cookie = 0;
        loop {
            let (entries, end) = self.readdir_page(dir, cookie, LIST_PAGE_ENTRIES).await?;
            if let Some(last) = entries.last() {
                cookie = last.sequence;
            }
            let empty = entries.is_empty();
            all.extend(entries);
            if end || empty {
                return Ok(all);
            }
        }
    }

    /// Sets the size of a file.
    pub async fn truncate(&self, path: &str, size: u64) -> WeftResult<()> {
        let file = self.open(path, crate::access::WRITE).await?;
        self.truncate_file(&file, size).await
    }

    /// Changes permission bits.
    pub async fn chmod(&self, path: &str, mode: u32) -> WeftResult<()> {
        let (handle, _) = self.resolve(path, true).await?;
        self.setattr_handle(handle, AttrChanges { mode: Some(mode), ..AttrChanges::default() }).await
    }

    /// Changes owner and/or group.
    pub async fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> WeftResult<()> {
        let (handle, _) = self.resolve(path, true).await?;
        self.setattr_handle(handle, AttrChanges { uid, gid, ..AttrChanges::default() }).await
    }

    /// Sets access and modification times.
    pub async fn utimens(&self, path: &str, atime: Option<TimeSet>, mtime: Option<TimeSet>) -> WeftResult<()> {
        let (handle, _) = self.resolve(path, true).await?;
        self.setattr_handle(handle, AttrChanges { atime, mtime, ..AttrChanges::default() }).await
    }

    /// Sets the striping new files in a directory inherit.
    pub async fn set_default_distribution(&self, path: &str, distribution: Distribution) -> WeftResult<()> {
        let (handle, kind) = self.resolve(path, true).await?;
        if kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        let changes = AttrChanges { default_distribution: Some(distribution), ..AttrChanges::default() };
        self.setattr_handle(handle, changes).await
    }
}
