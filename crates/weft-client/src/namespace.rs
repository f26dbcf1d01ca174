//! Client-driven namespace operations: each multi-step operation is a
//! sequence of single-server requests, ordered so that a name is never
//! visible before its object is complete (create enters the name last,
//! remove drops it first). A client that dies midway can strand unnamed
//! objects; the server-driven path of a later design removes that window.
//!
//! By default (`ClientOptions::client_driven` false) each of create,
//! unlink, mkdir, rmdir and rename is instead ONE request to the parent
//! directory's server, which does the work itself (`weft-server::aggregate`).
//!
//! Client-driven request counts (N = stripe count): create N+4 in 4 serial phases
//! (parent check; metafile and datafiles; layout; name), unlink N+3 in 3
//! (name; metafile attributes; all objects), mkdir 3, rmdir 4 (lookup,
//! parent check, object, name), stat of a file 2 + servers holding its
//! datafiles.

use futures::future::join_all;
use weft_proto::message::{
    AttrChanges, DirEntry, FileLayout, NewObject, ObjectKind, Reply, ReplyResult, Request, TimeSet,
};
use weft_proto::{message, Distribution, ErrorCode, Handle, WeftResult};

use crate::client::{Client, Stat};
use crate::io::File;

/// Options for creating a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct CreateOptions {
    /// Permission bits (default 0o644).
    pub mode: Option<u32>,
    /// Strip size; default from the directory, then the configuration.
    pub strip_bytes: Option<u64>,
    /// Stripe count; default from the directory, then the configuration.
    pub stripe_count: Option<u32>,
    /// Fail with `Exists` if the name exists (otherwise open it).
    pub exclusive: bool,
}

/// A directory entry with its attributes.
#[derive(Clone, Debug)]
pub struct EntryPlus {
    /// The entry.
    pub entry: DirEntry,
    /// Its attributes, if they could be read.
    pub stat: WeftResult<Stat>,
}

fn expect_handle(reply: Reply) -> WeftResult<Handle> {
    match reply {
        Reply::Handle(handle) => Ok(handle),
        _ => Err(ErrorCode::Protocol),
    }
}

impl Client {
    fn primary_target(&self, server_id: u32) -> WeftResult<u16> {
        self.config().primary_target(server_id).ok_or(ErrorCode::Invalid)
    }

    async fn create_object(&self, server_id: u32, mode: u32, object: NewObject) -> WeftResult<Handle> {
        let target_id = self.primary_target(server_id)?;
        let request = Request::CreateObject { cred: self.cred(), target_id, mode, object };
        expect_handle(self.call(server_id, request).await?)
    }

    /// Best-effort removal of objects after a failed multi-step operation.
    async fn discard(&self, handles: &[Handle]) {
        join_all(handles.iter().map(|h| self.call_at(*h, Request::RemoveObject { handle: *h }))).await;
    }

    fn choose_distribution(
        &self,
        options: &CreateOptions,
        parent: &weft_proto::message::Attributes,
    ) -> WeftResult<Distribution> {
        let config_default = self.config().default_distribution();
        let dir_default = parent.default_distribution.unwrap_or(config_default);
        let data_servers = self.config().data_servers().len() as u32;
        let distribution = Distribution {
            strip_bytes: options.strip_bytes.unwrap_or(dir_default.strip_bytes),
            stripe_count: options.stripe_count.unwrap_or(dir_default.stripe_count).min(data_servers),
        };
        distribution.validate()?;
        Ok(distribution)
    }

    /// Creates file `name` in `parent`: one request (aggregate), or N+4
    /// client-driven. With `exclusive` unset, an existing file is opened instead.
    pub async fn create_in(&self, parent: Handle, name: &str, options: CreateOptions) -> WeftResult<File> {
        message::validate_name(name)?;
        if !self.client_driven() {
            return self.create_aggregate(parent, name, options).await;
        }
        let parent_attrs = self.getattr_raw(parent).await?;
        if parent_attrs.kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        let distribution = self.choose_distribution(&options, &parent_attrs)?;
        let mode = options.mode.unwrap_or(0o644);
        let metadata_server = self.server_of(parent)?;
        let data_servers = self.config().data_servers();
        let start = self.place(&data_servers);
        let chosen: Vec<u32> =
            (0..distribution.stripe_count as usize).map(|i| data_servers[(start + i) % data_servers.len()]).collect();
        // The metafile and the datafiles are independent objects: one phase.
        let (metafile, created) = futures::join!(
            self.create_object(metadata_server, mode, NewObject::Metafile),
            join_all(chosen.iter().map(|s| self.create_object(*s, mode, NewObject::Datafile)))
        );
        let datafiles: Vec<Handle> = created.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
        let metafile = match metafile {
            Ok(metafile) if datafiles.len() == chosen.len() => metafile,
            _ => {
                let mut orphans = datafiles.clone();
                orphans.extend(metafile.as_ref().ok());
                self.discard(&orphans).await;
                let error = metafile.err().or_else(|| created.into_iter().find_map(|r| r.err()));
                return Err(error.unwrap_or(ErrorCode::Io));
            }
        };
        let layout = FileLayout { distribution, datafiles: datafiles.clone() };
        let steps = async {
            self.call_at(metafile, Request::SetLayout { handle: metafile, layout: layout.clone() }).await?;
            let dirent = Request::CreateDirent {
                cred: self.cred(),
                parent,
                name: name.to_string(),
                target: metafile,
                kind: ObjectKind::Metafile,
            };
            self.call_at(parent, dirent).await
        };
        if let Err(code) = steps.await {
            let mut orphans = datafiles;
            orphans.push(metafile);
            self.discard(&orphans).await;
            if code == ErrorCode::Exists && !options.exclusive {
                return self.open_in(parent, name).await;
            }
            return Err(code);
        }
        Ok(File { handle: metafile, layout })
    }

    /// Creates a new file (`Exists` if the name is taken) and returns it
    /// with its attributes: one request (aggregate), whose reply carries
    /// them (size 0, nothing is written yet); client-driven, N+4 and a stat.
    pub async fn create_new_in(&self, parent: Handle, name: &str, options: CreateOptions) -> WeftResult<(File, Stat)> {
        let options = CreateOptions { exclusive: true, ..options };
        if self.client_driven() {
            let file = self.create_in(parent, name, options).await?;
            let stat = self.stat_handle(file.handle).await?;
            return Ok((file, stat));
        }
        message::validate_name(name)?;
        match self.create_file_request(parent, name, options).await? {
            Reply::Attributes(attrs) => {
                let layout = attrs.layout.clone().ok_or(ErrorCode::Protocol)?;
                let file = File { handle: attrs.handle, layout };
                Ok((file, crate::client::to_stat(attrs, &Default::default())))
            }
            _ => Err(ErrorCode::Protocol),
        }
    }

    async fn create_file_request(&self, parent: Handle, name: &str, options: CreateOptions) -> ReplyResult {
        let request = Request::CreateFile {
            cred: self.cred(),
            parent,
            name: name.to_string(),
            mode: options.mode.unwrap_or(0o644),
            strip_bytes: options.strip_bytes,
            stripe_count: options.stripe_count,
            exclusive: options.exclusive,
        };
        self.call_at(parent, request).await
    }

    async fn create_aggregate(&self, parent: Handle, name: &str, options: CreateOptions) -> WeftResult<File> {
        match self.create_file_request(parent, name, options).await {
            Ok(Reply::Attributes(attrs)) => match attrs.layout {
                Some(layout) => Ok(File { handle: attrs.handle, layout }),
                None => Err(ErrorCode::Protocol),
            },
            Ok(_) => Err(ErrorCode::Protocol),
            // The name exists but is not a metafile the server can open.
            Err(ErrorCode::Exists) if !options.exclusive => self.open_in(parent, name).await,
            Err(code) => Err(code),
        }
    }

    /// Opens an existing file in `parent`.
    pub async fn open_in(&self, parent: Handle, name: &str) -> WeftResult<File> {
        let (handle, kind) = self.lookup(parent, name).await?;
        match kind {
            ObjectKind::Metafile => self.open_handle(handle).await,
            ObjectKind::Directory => Err(ErrorCode::IsDir),
            _ => Err(ErrorCode::Invalid),
        }
    }

    /// Opens a file by handle (reads its layout).
    pub async fn open_handle(&self, handle: Handle) -> WeftResult<File> {
        let attrs = self.getattr_raw(handle).await?;
        match (attrs.kind, attrs.layout) {
            (ObjectKind::Metafile, Some(layout)) => Ok(File { handle, layout }),
            (ObjectKind::Directory, _) => Err(ErrorCode::IsDir),
            _ => Err(ErrorCode::Invalid),
        }
    }

    /// Creates directory `name` in `parent`: one request (aggregate), or 3
    /// client-driven (parent check, object, entry).
    pub async fn mkdir_in(&self, parent: Handle, name: &str, mode: u32) -> WeftResult<Handle> {
        message::validate_name(name)?;
        if !self.client_driven() {
            let request = Request::MakeDirectory { cred: self.cred(), parent, name: name.to_string(), mode };
            return expect_handle(self.call_at(parent, request).await?);
        }
        let parent_attrs = self.getattr_raw(parent).await?;
        if parent_attrs.kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        let metadata_servers = self.config().metadata_servers();
        let server = metadata_servers[self.place(&metadata_servers)];
        let object = NewObject::Directory { default_distribution: parent_attrs.default_distribution, parent };
        let dir = self.create_object(server, mode, object).await?;
        let dirent = Request::CreateDirent {
            cred: self.cred(),
            parent,
            name: name.to_string(),
            target: dir,
            kind: ObjectKind::Directory,
        };
        if let Err(code) = self.call_at(parent, dirent).await {
            self.discard(&[dir]).await;
            return Err(code);
        }
        Ok(dir)
    }

    /// Creates symlink `name` in `parent` pointing at `target`.
    pub async fn symlink_in(&self, parent: Handle, name: &str, target: &str) -> WeftResult<Handle> {
        message::validate_name(name)?;
        let server = self.server_of(parent)?;
        let link = self.create_object(server, 0o777, NewObject::Symlink { target: target.to_string() }).await?;
        let dirent = Request::CreateDirent {
            cred: self.cred(),
            parent,
            name: name.to_string(),
            target: link,
            kind: ObjectKind::Symlink,
        };
        if let Err(code) = self.call_at(parent, dirent).await {
            self.discard(&[link]).await;
            return Err(code);
        }
        Ok(link)
    }

    /// Creates special file `name` in `parent` (FIFO, socket or device
    /// node, per `kind`): an object on the directory's server, then its entry.
    pub async fn mknod_in(
        &self,
        parent: Handle,
        name: &str,
        kind: ObjectKind,
        mode: u32,
        rdev: u64,
    ) -> WeftResult<Handle> {
        message::validate_name(name)?;
        if !kind.is_special() {
            return Err(ErrorCode::Invalid);
        }
        let server = self.server_of(parent)?;
        let node = self.create_object(server, mode, NewObject::Special { kind, rdev }).await?;
        let dirent = Request::CreateDirent { cred: self.cred(), parent, name: name.to_string(), target: node, kind };
        if let Err(code) = self.call_at(parent, dirent).await {
            self.discard(&[node]).await;
            return Err(code);
        }
        Ok(node)
    }

    /// Removes the objects behind a name that is already gone.
    async fn destroy(&self, handle: Handle, kind: ObjectKind) -> WeftResult<()> {
        // The name is already gone: the metafile and its datafiles go in one phase.
        let mut objects = vec![handle];
        if kind == ObjectKind::Metafile {
            objects.extend(self.getattr_raw(handle).await?.layout.map(|l| l.datafiles).unwrap_or_default());
        }
        let removed = join_all(objects.iter().map(|h| self.call_at(*h, Request::RemoveObject { handle: *h }))).await;
        // An object already gone (a retried or racing removal) is not an error.
        removed.into_iter().filter(|r| *r != Err(ErrorCode::Stale)).try_for_each(|r| r.map(|_| ()))
    }

    /// Removes a non-directory entry and its objects: one request
    /// (aggregate; datafiles are reclaimed by the servers), or N+3 client-driven.
    pub async fn unlink_in(&self, parent: Handle, name: &str) -> WeftResult<()> {
        if !self.client_driven() {
            let request = Request::RemoveEntry {
                cred: self.cred(),
                parent,
                name: name.to_string(),
                expect_directory: Some(false),
            };
            return self.call_at(parent, request).await.map(|_| ());
        }
        let request =
            Request::RemoveDirent { cred: self.cred(), parent, name: name.to_string(), expect_directory: Some(false) };
        let (handle, kind) = match self.call_at(parent, request).await? {
            Reply::Removed { handle, kind } => (handle, kind),
            _ => return Err(ErrorCode::Protocol),
        };
        self.destroy(handle, kind).await
    }

    /// Removes an empty directory: the emptiness check and removal of the
    /// directory object are one step on its server; the entry goes next.
    pub async fn rmdir_in(&self, parent: Handle, name: &str) -> WeftResult<()> {
        message::validate_name(name)?;
        if !self.client_driven() {
            let request = Request::RemoveEntry {
                cred: self.cred(),
                parent,
                name: name.to_string(),
                expect_directory: Some(true),
            };
            return self.call_at(parent, request).await.map(|_| ());
        }
        let (handle, kind) = self.lookup(parent, name).await?;
        if kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        let parent_attrs = self.getattr_raw(parent).await?;
        crate::access::check(&self.credentials, &parent_attrs, crate::access::WRITE | crate::access::EXEC)?;
        self.call_at(handle, Request::RemoveObject { handle }).await?;
        let request =
            Request::RemoveDirent { cred: self.cred(), parent, name: name.to_string(), expect_directory: Some(true) };
        self.call_at(parent, request).await.map(|_| ())
    }

    /// One page of a directory listing after `cookie` (one request).
    pub async fn readdir_page(&self, dir: Handle, cookie: u64, max_entries: u32) -> WeftResult<(Vec<DirEntry>, bool)> {
        let request = Request::ReadDir { cred: self.cred(), dir, cookie, max_entries };
        match self.call_at(dir, request).await? {
            Reply::DirPage { entries, end } => Ok((entries, end)),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// One page with attributes: 1 readdir + one batched getattr per server
    /// + one batched size request per data server, whatever the page size.
    pub async fn readdir_plus_page(
        &self,
        dir: Handle,
        cookie: u64,
        max_entries: u32,
    ) -> WeftResult<(Vec<EntryPlus>, bool)> {
        let (entries, end) = self.readdir_page(dir, cookie, max_entries).await?;
        let handles: Vec<Handle> = entries.iter().map(|e| e.handle).collect();
        let attrs = self.getattr_batch(&handles).await?;
        let (found, missing): (Vec<_>, Vec<_>) = attrs.into_iter().enumerate().partition(|(_, a)| a.is_ok());
        let found_attrs: Vec<_> = found.iter().map(|(_, a)| a.clone().expect("partitioned ok")).collect();
        let stats = self.stats_from_attributes(found_attrs).await?;
        let mut results: Vec<Option<WeftResult<Stat>>> = vec![None; entries.len()];
        for ((index, _), stat) in found.into_iter().zip(stats) {
            results[index] = Some(Ok(stat));
        }
        for (index, attr) in missing {
            results[index] = Some(Err(attr.err().unwrap_or(ErrorCode::Io)));
        }
        let plus = entries
            .into_iter()
            .zip(results)
            .map(|(entry, stat)| EntryPlus { entry, stat: stat.unwrap_or(Err(ErrorCode::Io)) })
            .collect();
        Ok((plus, end))
    }

    /// Attributes of many handles, one request per server.
    pub async fn getattr_batch(
        &self,
        handles: &[Handle],
    ) -> WeftResult<Vec<WeftResult<weft_proto::message::Attributes>>> {
        let mut by_server: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (index, handle) in handles.iter().enumerate() {
            by_server.entry(self.server_of(*handle)?).or_default().push(index);
        }
        let replies = join_all(by_server.into_iter().map(|(server, indexes)| async move {
            let batch: Vec<Handle> = indexes.iter().map(|i| handles[*i]).collect();
            (indexes, self.call(server, Request::GetAttrBatch { handles: batch }).await)
        }))
        .await;
        let mut out: Vec<WeftResult<_>> = vec![Err(ErrorCode::Io); handles.len()];
        for (indexes, reply) in replies {
            match reply? {
                Reply::AttributesBatch(attrs) if attrs.len() == indexes.len() => {
                    for (index, attr) in indexes.into_iter().zip(attrs) {
                        out[index] = attr;
                    }
                }
                _ => return Err(ErrorCode::Protocol),
            }
        }
        Ok(out)
    }

    /// Changes attributes of an object (one request).
    pub async fn setattr_handle(&self, handle: Handle, changes: AttrChanges) -> WeftResult<()> {
        self.call_at(handle, Request::SetAttr { cred: self.cred(), handle, changes }).await.map(|_| ())
    }

    /// Is `candidate` the directory `dir` or below it? Walks parent pointers.
    async fn is_within(&self, candidate: Handle, dir: Handle) -> WeftResult<bool> {
        let parent_of = |handle| async move { self.getattr_raw(handle).await?.parent.ok_or(ErrorCode::Io).map(Some) };
        weft_proto::ancestry::is_within(candidate, dir, parent_of).await
    }

    /// Renames `old_parent/old_name` to `new_parent/new_name`, replacing a
    /// compatible destination. One request when both parents share a server.
    pub async fn rename_in(
        &self,
        old_parent: Handle,
        old_name: &str,
        new_parent: Handle,
        new_name: &str,
    ) -> WeftResult<()> {
        message::validate_name(old_name)?;
        message::validate_name(new_name)?;
        if !self.client_driven() {
            let request = Request::RenameEntry {
                cred: self.cred(),
                old_parent,
                old_name: old_name.to_string(),
                new_parent,
                new_name: new_name.to_string(),
            };
            return self.call_at(old_parent, request).await.map(|_| ());
        }
        let (source, kind) = self.lookup(old_parent, old_name).await?;
        if kind == ObjectKind::Directory && old_parent != new_parent && self.is_within(new_parent, source).await? {
            return Err(ErrorCode::Invalid);
        }
        if let Ok((existing, ObjectKind::Directory)) = self.lookup(new_parent, new_name).await {
            if existing != source && kind == ObjectKind::Directory && self.getattr_raw(existing).await?.entry_count > 0
            {
                return Err(ErrorCode::NotEmpty);
            }
        }
        let replaced = if self.server_of(old_parent)? == self.server_of(new_parent)? {
            let request = Request::Rename {
                cred: self.cred(),
                old_parent,
                old_name: old_name.to_string(),
                new_parent,
                new_name: new_name.to_string(),
            };
            self.call_at(old_parent, request).await?
        } else {
            self.rename_across(old_parent, old_name, new_parent, new_name, source, kind).await?
        };
        if let Reply::Replaced(Some((old, old_kind))) = replaced {
            self.destroy(old, old_kind).await?;
        }
        Ok(())
    }

    async fn rename_across(
        &self,
        old_parent: Handle,
        old_name: &str,
        new_parent: Handle,
        new_name: &str,
        source: Handle,
        kind: ObjectKind,
    ) -> WeftResult<Reply> {
        let old_attrs = self.getattr_raw(old_parent).await?;
        crate::access::check(&self.credentials, &old_attrs, crate::access::WRITE | crate::access::EXEC)?;
        let replace = Request::ReplaceDirent {
            cred: self.cred(),
            parent: new_parent,
            name: new_name.to_string(),
            target: source,
            kind,
        };
        let replaced = self.call_at(new_parent, replace).await?;
        let remove = Request::RemoveDirent {
            cred: self.cred(),
            parent: old_parent,
            name: old_name.to_string(),
            expect_directory: None,
        };
        self.call_at(old_parent, remove).await?;
        if kind == ObjectKind::Directory {
            let changes = AttrChanges { parent: Some(new_parent), ..AttrChanges::default() };
            self.call_at(source, Request::SetAttr { cred: self.cred(), handle: source, changes }).await?;
        }
        Ok(replaced)
    }

    /// Sets the size of a file: every datafile to its share of `size`, then
    /// the metafile's modification time.
    pub async fn truncate_file(&self, file: &File, size: u64) -> WeftResult<()> {
        if size > weft_proto::limits::FILE_BYTES_MAX {
            return Err(ErrorCode::TooBig);
        }
        // The time change first: it also checks write permission.
        let changes = AttrChanges { mtime: Some(TimeSet::Now), ..AttrChanges::default() };
        self.call_at(file.handle, Request::SetAttr { cred: self.cred(), handle: file.handle, changes }).await?;
        let capability = self.capability(file, weft_proto::access::WRITE).await?;
        let distribution = file.layout.distribution;
        let results = join_all(file.layout.datafiles.iter().enumerate().map(|(i, h)| {
            let local_size = distribution.local_size(i as u32, size);
            let request =
                crate::capabilities::capable(&capability, Request::TruncateDatafile { handle: *h, local_size });
            self.call_at(*h, request)
        }))
        .await;
        results.into_iter().try_for_each(|r| r.map(|_| ()))
    }
}
