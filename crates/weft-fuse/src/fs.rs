//! The [`fuser::Filesystem`] implementation.
//!
//! Every request handler does the same three steps: collect the arguments
//! (copying borrowed ones such as names and write data), take a client view
//! acting as the calling user, and spawn a task on the mount's runtime that
//! runs the weft operation and answers the kernel. The handler returns at
//! once, so the FUSE reader thread never waits on a server and many
//! requests — several reads and writes of one file included — are in flight.
//!
//! Readdir offsets: 0 is the start, 1 follows `.`, 2 follows `..`, and the
//! offset after a real entry is its weft sequence number plus
//! [`DOT_OFFSETS`], so the kernel can resume a listing anywhere.

use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner,
    Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use weft_client::{Client, CreateOptions, Stat};
use weft_proto::access::{self, Ownership};
use weft_proto::message::{AttrChanges, Credentials, ObjectKind, TimeSet};
use weft_proto::{limits, ErrorCode, Handle, WeftResult};

use crate::attr::{self, handle_of, ino_of, GENERATION};
use crate::errno;
use crate::locks::{self, Kind, PosixLocks, Refused};
use crate::open_files::OpenFiles;
use crate::options::MountOptions;

/// Offsets taken by `.` and `..` before the real entries.
pub const DOT_OFFSETS: u64 = 3;
/// Entries asked of the server per readdir call (one batched page).
const READDIR_PAGE_ENTRIES: u32 = 128;
/// Largest write the kernel may send (1 MiB, as the servers' chunk size).
pub const WRITE_BYTES_MAX: u32 = 1 << 20;
/// Readahead asked of the kernel, so sequential reads arrive in large requests.
pub const READAHEAD_BYTES_MAX: u32 = 1 << 20;
/// Background requests (readahead, writeback) the kernel may keep in flight.
const BACKGROUND_REQUESTS_MAX: u16 = 64;
/// `FMODE_EXEC` in open flags: the kernel opening a binary to execute it.
const FMODE_EXEC: i32 = 0x20;

/// A Weft file system served through FUSE.
pub struct WeftFs {
    inner: Arc<Inner>,
    runtime: tokio::runtime::Handle,
}

/// State shared by all request tasks.
struct Inner {
    client: Client,
    options: MountOptions,
    files: OpenFiles,
    /// fcntl locks held through this mount.
    locks: Arc<PosixLocks>,
    /// Sends invalidations to the kernel; set once the session exists.
    kernel: Arc<OnceLock<Notifier>>,
}

impl WeftFs {
    /// A file system answering requests with `client` on `runtime`.
    pub fn new(client: Client, options: MountOptions, runtime: tokio::runtime::Handle) -> WeftFs {
        let locks = Arc::new(PosixLocks::default());
        runtime.spawn(locks.clone().renew_forever(client.clone()));
        let inner = Inner { client, options, files: OpenFiles::default(), locks, kernel: Arc::default() };
        WeftFs { inner: Arc::new(inner), runtime }
    }

    /// Where the mount puts the session's [`Notifier`] once the session
    /// exists; until then opens cannot drop cached attributes, so set it
    /// before the session serves requests.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.inner.kernel.clone()
    }

    /// Runs `work` as a task; it answers the kernel itself.
    fn spawn<F, Fut>(&self, work: F)
    where
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.runtime.spawn(work(self.inner.clone()));
    }

    /// A client acting as the caller of `req`.
    fn user(&self, req: &Request) -> Client {
        self.inner.client.as_user(credentials(req))
    }
}

/// The caller's uid and gid, with supplementary groups read from
/// `/proc/<pid>/status` (empty if the process is gone).
fn credentials(req: &Request) -> Credentials {
    Credentials { uid: req.uid(), gid: req.gid(), groups: supplementary_groups(req.pid()) }
}

fn supplementary_groups(pid: u32) -> Vec<u32> {
    if pid == 0 {
        return Vec::new();
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("");
    line.split_whitespace().filter_map(|g| g.parse().ok()).collect()
}

/// A directory entry name as Weft wants it (UTF-8, valid length).
fn name_of(name: &OsStr) -> WeftResult<String> {
    let name = name.to_str().ok_or(ErrorCode::Invalid)?;
    if name.len() > limits::NAME_BYTES_MAX {
        return Err(ErrorCode::NameTooLong);
    }
    Ok(name.to_string())
}

fn time_set(time: TimeOrNow) -> TimeSet {
    match time {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(at) => TimeSet::At(attr::nanoseconds(at)),
    }
}

/// READ/WRITE/EXEC bits wanted by an access mask.
fn wanted_bits(mask: AccessFlags) -> u32 {
    let mut wanted = 0;
    if mask.contains(AccessFlags::R_OK) {
        wanted |= access::READ;
    }
    if mask.contains(AccessFlags::W_OK) {
        wanted |= access::WRITE;
    }
    if mask.contains(AccessFlags::X_OK) {
        wanted |= access::EXEC;
    }
    wanted
}

/// READ/WRITE bits an open with `flags` needs.
fn open_bits(flags: i32) -> u32 {
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => access::WRITE,
        libc::O_RDWR => access::READ | access::WRITE,
        _ => access::READ,
    }
}

impl Inner {
    /// How long the kernel may keep attributes of an object of this kind.
    fn attr_ttl(&self, kind: ObjectKind) -> Duration {
        match kind {
            ObjectKind::Metafile | ObjectKind::Datafile => self.options.attr_ttl,
            _ => self.options.entry_ttl,
        }
    }

    /// Answers an entry request (lookup, mkdir, symlink, mknod).
    fn reply_entry(&self, reply: ReplyEntry, result: WeftResult<Stat>) {
        match result {
            Ok(stat) => {
                let ttl = self.attr_ttl(stat.kind);
                reply.entry_with_ttls(&ttl, &self.options.entry_ttl, &attr::file_attr(&stat), GENERATION)
            }
            Err(code) => reply.error(errno::of(code)),
        }
    }

    fn open_flags(&self, append: bool) -> FopenFlags {
        // Appends go to the servers' end of file, which the page cache cannot
        // know, so an append handle bypasses it.
        if self.options.direct_io || append {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }

    /// One request when the object lives on its directory's server (every
    /// file's metafile does), two otherwise. A missing name is an error
    /// reply, never a negative entry: the kernel asks again next time, so
    /// a file another mount creates is found at once.
    async fn lookup(&self, client: &Client, parent: Handle, name: WeftResult<String>) -> WeftResult<Stat> {
        match client.lstat_in(parent, &name?).await {
            Err(ErrorCode::Stale) => Err(ErrorCode::NoEntry), // removed between the two steps
            other => other,
        }
    }

    async fn setattr(&self, client: &Client, handle: Handle, request: SetAttr) -> WeftResult<Stat> {
        if let Some(size) = request.size {
            let open = request.fh.and_then(|fh| self.files.get(fh));
            let file = match open {
                Some(open) => open.file.clone(),
                None => client.open_handle(handle).await?,
            };
            client.truncate_file(&file, size).await?;
        }
        let changes = AttrChanges {
            mode: request.mode.map(|m| m & 0o7777),
            uid: request.uid,
            gid: request.gid,
            atime: request.atime.map(time_set),
            mtime: request.mtime.map(time_set),
            ..AttrChanges::default()
        };
        if changes != AttrChanges::default() {
            client.setattr_handle(handle, changes).await?;
        }
        client.stat_handle(handle).await
    }

    /// Opens a file: checks its kind (and mode bits when the kernel does not),
    /// registers it, and returns the FUSE handle and open flags.
    async fn open(&self, client: &Client, handle: Handle, flags: i32) -> WeftResult<(u64, FopenFlags)> {
        let attrs = client.getattr_raw(handle).await?;
        let layout = match (attrs.kind, attrs.layout.clone()) {
            (ObjectKind::Metafile, Some(layout)) => layout,
            (ObjectKind::Directory, _) => return Err(ErrorCode::IsDir),
            _ => return Err(ErrorCode::Invalid),
        };
        if !self.options.default_permissions && flags & FMODE_EXEC == 0 {
            let ownership = Ownership { kind: attrs.kind, mode: attrs.mode, uid: attrs.uid, gid: attrs.gid };
            access::check(client.credentials(), ownership, open_bits(flags))?;
        }
        let append = flags & libc::O_APPEND != 0;
        let fh = self.files.insert(weft_client::File { handle, layout }, append);
        self.forget_cached_attributes(handle);
        Ok((fh, self.open_flags(append)))
    }

    /// Close-to-open: drops the kernel's cached attributes of a file being
    /// opened, before the open is answered, so the opener's first `fstat`
    /// or read past the old end of file asks for the current size. (Its
    /// cached pages are dropped by the open itself: no `keep_cache`.)
    /// Needed only when attributes are cached at all.
    fn forget_cached_attributes(&self, handle: Handle) {
        if self.options.attr_ttl.is_zero() {
            return;
        }
        if let Some(kernel) = self.kernel.get() {
            // A negative offset: attributes only, no page range.
            if let Err(err) = kernel.inval_inode(ino_of(handle), -1, 0) {
                tracing::warn!("invalidating attributes of {handle:?}: {err}");
            }
        }
    }

    async fn create(
        &self,
        client: &Client,
        parent: Handle,
        name: WeftResult<String>,
        mode: u32,
        flags: i32,
    ) -> WeftResult<(Stat, u64, FopenFlags)> {
        let name = name?;
        let options = CreateOptions { mode: Some(mode & 0o7777), ..CreateOptions::default() };
        let (file, stat) = match client.create_new_in(parent, &name, options).await {
            Ok(created) => created,
            // Created by another client since the kernel's lookup: open it,
            // as open(2) without O_EXCL does (the rare, slower path).
            Err(ErrorCode::Exists) if flags & libc::O_EXCL == 0 => {
                let file = client.open_in(parent, &name).await?;
                let stat = client.stat_handle(file.handle).await?;
                (file, stat)
            }
            Err(code) => return Err(code),
        };
        let append = flags & libc::O_APPEND != 0;
        let fh = self.files.insert(file, append);
        Ok((stat, fh, self.open_flags(append)))
    }

    async fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let open = self.files.get(fh).ok_or(errno::BAD_HANDLE)?;
        let mut buffer = vec![0u8; size as usize];
        let count = self.client.read_at(&open.file, offset, &mut buffer).await.map_err(errno::of)?;
        buffer.truncate(count);
        Ok(buffer)
    }

    /// Writes `data`; `page_writeback` marks the kernel flushing cached
    /// pages (write-back cache), which it may do through any open of the
    /// file, an `O_APPEND` one included: those go where the pages belong.
    async fn write(&self, fh: u64, offset: u64, data: &[u8], page_writeback: bool) -> Result<u32, Errno> {
        let open = self.files.get(fh).ok_or(errno::BAD_HANDLE)?;
        if let Some(code) = open.error() {
            return Err(errno::of(code));
        }
        let result = async {
            // Not atomic across clients: two mounts appending at once may
            // both write at the same end of file.
            let append = open.append && !page_writeback;
            let offset = if append { self.client.file_size(&open.file).await? } else { offset };
            self.client.write_at(&open.file, offset, data).await
        };
        match result.await {
            Ok(()) => Ok(data.len() as u32),
            Err(code) => {
                open.fail(code);
                Err(errno::of(code))
            }
        }
    }

    async fn fsync(&self, fh: u64) -> Result<(), Errno> {
        let open = self.files.get(fh).ok_or(errno::BAD_HANDLE)?;
        if let Some(code) = open.error() {
            return Err(errno::of(code));
        }
        self.client.fsync(&open.file).await.map_err(|code| {
            open.fail(code);
            errno::of(code)
        })
    }

    async fn rename(
        &self,
        client: &Client,
        from: (Handle, WeftResult<String>),
        to: (Handle, WeftResult<String>),
        flags: RenameFlags,
    ) -> WeftResult<()> {
        let (old_parent, old_name) = (from.0, from.1?);
        let (new_parent, new_name) = (to.0, to.1?);
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            match client.lookup(new_parent, &new_name).await {
                Ok(_) => return Err(ErrorCode::Exists),
                Err(ErrorCode::NoEntry) => {}
                Err(code) => return Err(code),
            }
        }
        client.rename_in(old_parent, &old_name, new_parent, &new_name).await
    }

    async fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let open = self.files.get(fh).ok_or(errno::BAD_HANDLE)?;
        match mode {
            0 => {
                let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
                let size = self.client.file_size(&open.file).await.map_err(errno::of)?;
                if end > size {
                    self.client.truncate_file(&open.file, end).await.map_err(errno::of)?;
                }
                Ok(())
            }
            libc::FALLOC_FL_KEEP_SIZE => Ok(()),
            _ => Err(errno::FALLOCATE_MODE),
        }
    }

    async fn access(&self, client: &Client, handle: Handle, mask: AccessFlags) -> WeftResult<()> {
        let attrs = client.getattr_raw(handle).await?;
        let wanted = wanted_bits(mask);
        if wanted == 0 {
            return Ok(());
        }
        let ownership = Ownership { kind: attrs.kind, mode: attrs.mode, uid: attrs.uid, gid: attrs.gid };
        access::check(client.credentials(), ownership, wanted)
    }

    async fn statfs(&self) -> WeftResult<[u64; 5]> {
        let status = self.client.statfs().await?;
        let block = u64::from(STATFS_BLOCK_BYTES);
        let ids_free: u64 = status.servers.iter().map(|s| s.object_ids_free).fold(0u64, u64::saturating_add);
        Ok([
            status.bytes_total / block,
            status.bytes_free / block,
            status.bytes_free / block,
            status.objects.saturating_add(ids_free),
            ids_free,
        ])
    }

    /// The parent of a directory (for `..`); the root is its own parent.
    async fn parent_of(&self, client: &Client, dir: Handle) -> WeftResult<Handle> {
        if dir == Handle::ROOT {
            return Ok(Handle::ROOT);
        }
        Ok(client.getattr_raw(dir).await?.parent.unwrap_or(Handle::ROOT))
    }

    async fn readdir(&self, client: &Client, dir: Handle, offset: u64, mut reply: ReplyDirectory) {
        if offset == 0 && reply.add(ino_of(dir), 1, FileType::Directory, ".") {
            return reply.ok();
        }
        if offset <= 1 {
            let parent = match self.parent_of(client, dir).await {
                Ok(parent) => parent,
                Err(code) => return reply.error(errno::of(code)),
            };
            if reply.add(ino_of(parent), 2, FileType::Directory, "..") {
                return reply.ok();
            }
        }
        let cookie = offset.saturating_sub(DOT_OFFSETS);
        let (entries, _) = match client.readdir_page(dir, cookie, READDIR_PAGE_ENTRIES).await {
            Ok(page) => page,
            Err(code) => return reply.error(errno::of(code)),
        };
        for entry in entries {
            let next = entry.sequence + DOT_OFFSETS;
            if reply.add(ino_of(entry.handle), next, attr::file_type(entry.kind), &entry.name) {
                break;
            }
        }
        reply.ok()
    }

    /// As `readdir`, with attributes (a review with `duplicates` pairs the
    /// two): fuser's two reply types share no trait to add an entry
    /// through, so the `.`/`..`/page steps are written once for each.
    async fn readdirplus(&self, client: &Client, dir: Handle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let zero = Duration::ZERO;
        if offset == 0 && reply.add(ino_of(dir), 1, ".", &zero, &attr::dot_attr(dir), GENERATION) {
            return reply.ok();
        }
        if offset <= 1 {
            let parent = match self.parent_of(client, dir).await {
                Ok(parent) => parent,
                Err(code) => return reply.error(errno::of(code)),
            };
            if reply.add(ino_of(parent), 2, "..", &zero, &attr::dot_attr(parent), GENERATION) {
                return reply.ok();
            }
        }
        let cookie = offset.saturating_sub(DOT_OFFSETS);
        let (entries, _) = match client.readdir_plus_page(dir, cookie, READDIR_PAGE_ENTRIES).await {
            Ok(page) => page,
            Err(code) => return reply.error(errno::of(code)),
        };
        for plus in entries {
            let next = plus.entry.sequence + DOT_OFFSETS;
            // An entry whose object vanished since the listing is skipped.
            let Ok(stat) = plus.stat else { continue };
            // One TTL serves entry and attributes here: the shorter one.
            let ttl = self.attr_ttl(stat.kind).min(self.options.entry_ttl);
            if reply.add(ino_of(stat.handle), next, &plus.entry.name, &ttl, &attr::file_attr(&stat), GENERATION) {
                break;
            }
        }
        reply.ok()
    }
}

/// Block size reported by statfs.
const STATFS_BLOCK_BYTES: u32 = 4096;

/// The attribute changes of one setattr call.
struct SetAttr {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
    fh: Option<u64>,
}

fn reply_empty(reply: ReplyEmpty, result: WeftResult<()>) {
    match result {
        Ok(()) => reply.ok(),
        Err(code) => reply.error(errno::of(code)),
    }
}

/// Asks for `value` and, if refused, for the nearest value the kernel offers.
fn negotiate<T: Copy>(value: T, mut set: impl FnMut(T) -> Result<T, T>) {
    if let Err(nearest) = set(value) {
        let _ = set(nearest);
    }
}

#[allow(clippy::too_many_arguments)]
impl Filesystem for WeftFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        negotiate(WRITE_BYTES_MAX, |v| config.set_max_write(v));
        negotiate(READAHEAD_BYTES_MAX, |v| config.set_max_readahead(v));
        negotiate(BACKGROUND_REQUESTS_MAX, |v| config.set_max_background(v));
        let _ = config.set_congestion_threshold(BACKGROUND_REQUESTS_MAX * 3 / 4);
        let wanted = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_POSIX_LOCKS
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ASYNC_DIO;
        let wanted = if self.inner.options.writeback_cache { wanted | InitFlags::FUSE_WRITEBACK_CACHE } else { wanted };
        if !config.capabilities().contains(wanted & InitFlags::FUSE_WRITEBACK_CACHE) {
            tracing::warn!("the kernel offers no writeback cache: writes go to the servers at once");
        }
        let _ = config.add_capabilities(wanted & config.capabilities());
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|fs| async move {
            let result = fs.lookup(&client, handle_of(parent), name).await;
            fs.reply_entry(reply, result)
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(|fs| async move {
            match fs.client.stat_handle(handle_of(ino)).await {
                Ok(stat) => reply.attr(&fs.attr_ttl(stat.kind), &attr::file_attr(&stat)),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let client = self.user(req);
        let request = SetAttr { mode, uid, gid, size, atime, mtime, fh: fh.map(|f| f.0) };
        self.spawn(|fs| async move {
            match fs.setattr(&client, handle_of(ino), request).await {
                Ok(stat) => reply.attr(&fs.attr_ttl(stat.kind), &attr::file_attr(&stat)),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(|fs| async move {
            match fs.client.readlink_handle(handle_of(ino)).await {
                Ok(target) => reply.data(target.as_bytes()),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let special = match mode & libc::S_IFMT {
            libc::S_IFREG => None,
            libc::S_IFIFO => Some(ObjectKind::Fifo),
            libc::S_IFSOCK => Some(ObjectKind::Socket),
            libc::S_IFBLK => Some(ObjectKind::BlockDevice),
            libc::S_IFCHR => Some(ObjectKind::CharDevice),
            _ => return reply.error(Errno::EINVAL),
        };
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|fs| async move {
            let result = async {
                if let Some(kind) = special {
                    let node = client.mknod_in(handle_of(parent), &name?, kind, mode & 0o7777, rdev.into()).await?;
                    return client.stat_handle(node).await;
                }
                let options = CreateOptions { mode: Some(mode & 0o7777), ..CreateOptions::default() };
                Ok(client.create_new_in(handle_of(parent), &name?, options).await?.1)
            };
            fs.reply_entry(reply, result.await)
        });
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|fs| async move {
            let result = async {
                let dir = client.mkdir_in(handle_of(parent), &name?, mode & 0o7777).await?;
                client.stat_handle(dir).await
            };
            fs.reply_entry(reply, result.await)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|_| async move {
            let result = async { client.unlink_in(handle_of(parent), &name?).await };
            reply_empty(reply, result.await)
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|_| async move {
            let result = async { client.rmdir_in(handle_of(parent), &name?).await };
            reply_empty(reply, result.await)
        });
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let (client, name) = (self.user(req), name_of(link_name));
        let target = target.to_str().map(str::to_string).ok_or(ErrorCode::Invalid);
        self.spawn(|fs| async move {
            let result = async {
                let link = client.symlink_in(handle_of(parent), &name?, &target?).await?;
                client.stat_handle(link).await
            };
            fs.reply_entry(reply, result.await)
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(errno::RENAME_FLAGS);
        }
        let client = self.user(req);
        let from = (handle_of(parent), name_of(name));
        let to = (handle_of(newparent), name_of(newname));
        self.spawn(|fs| async move { reply_empty(reply, fs.rename(&client, from, to, flags).await) });
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(errno::LINK);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let client = self.user(req);
        self.spawn(|fs| async move {
            match fs.open(&client, handle_of(ino), flags.0).await {
                Ok((fh, open_flags)) => reply.opened(FileHandle(fh), open_flags),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.spawn(|fs| async move {
            match fs.read(fh.0, offset, size).await {
                Ok(bytes) => reply.data(&bytes),
                Err(err) => reply.error(err),
            }
        });
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let data = data.to_vec();
        let page_writeback = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        self.spawn(|fs| async move {
            match fs.write(fh.0, offset, &data, page_writeback).await {
                Ok(count) => reply.written(count),
                Err(err) => reply.error(err),
            }
        });
    }

    fn flush(&self, _req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // Writes reach the servers before they are answered (with the
        // write-back cache, the kernel has written its dirty pages back
        // before it sends the flush), so close has nothing to push: it only
        // reports a write error not yet seen, and releases the closing
        // process's fcntl locks on the file (POSIX: any close does).
        let error = match self.inner.files.get(fh.0) {
            Some(open) => open.error().map(errno::of),
            None => Some(errno::BAD_HANDLE),
        };
        let answer = move |reply: ReplyEmpty| match error {
            Some(err) => reply.error(err),
            None => reply.ok(),
        };
        let file = handle_of(ino);
        if !self.inner.locks.holds(file, lock_owner.0) {
            return answer(reply);
        }
        self.spawn(|fs| async move {
            fs.locks.release_owner(&fs.client, file, lock_owner.0).await;
            answer(reply)
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.inner.files.remove(fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.spawn(|fs| async move {
            match fs.fsync(fh.0).await {
                Ok(()) => reply.ok(),
                Err(err) => reply.error(err),
            }
        });
    }

    fn readdir(&self, req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let client = self.user(req);
        self.spawn(|fs| async move { fs.readdir(&client, handle_of(ino), offset, reply).await });
    }

    fn readdirplus(&self, req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus) {
        let client = self.user(req);
        self.spawn(|fs| async move { fs.readdirplus(&client, handle_of(ino), offset, reply).await });
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Namespace changes are committed by the servers before they answer.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(|fs| async move {
            match fs.statfs().await {
                Ok([blocks, bfree, bavail, files, ffree]) => reply.statfs(
                    blocks,
                    bfree,
                    bavail,
                    files,
                    ffree,
                    STATFS_BLOCK_BYTES,
                    limits::NAME_BYTES_MAX as u32,
                    STATFS_BLOCK_BYTES,
                ),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(errno::XATTR);
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(errno::XATTR);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(errno::XATTR);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(errno::XATTR);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let client = self.user(req);
        self.spawn(|fs| async move { reply_empty(reply, fs.access(&client, handle_of(ino), mask).await) });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (client, name) = (self.user(req), name_of(name));
        self.spawn(|fs| async move {
            match fs.create(&client, handle_of(parent), name, mode, flags).await {
                Ok((stat, fh, open_flags)) => {
                    let ttl = fs.attr_ttl(stat.kind);
                    reply.created(&ttl, &attr::file_attr(&stat), GENERATION, FileHandle(fh), open_flags)
                }
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        let (Some(kind), Ok(range)) = (Kind::of(typ), locks::range_of(start, end)) else {
            return reply.error(Errno::EINVAL);
        };
        self.spawn(|fs| async move {
            match fs.locks.get(&fs.client, handle_of(ino), lock_owner.0, range, kind).await {
                Ok(Some(c)) => reply.locked(c.start, c.end, c.typ, c.pid),
                Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
                Err(code) => reply.error(errno::of(code)),
            }
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let (Some(kind), Ok(range)) = (Kind::of(typ), locks::range_of(start, end)) else {
            return reply.error(Errno::EINVAL);
        };
        // The thread waiting in F_SETLKW: its signals end the wait.
        let waiter = sleep.then(|| req.pid());
        self.spawn(|fs| async move {
            let result = fs.locks.set(&fs.client, (handle_of(ino), lock_owner.0), range, kind, waiter, pid).await;
            match result {
                Ok(()) => reply.ok(),
                Err(Refused::Conflict) => reply.error(Errno::EAGAIN),
                Err(Refused::Interrupted) => reply.error(Errno::EINTR),
                Err(Refused::Failed(code)) => reply.error(errno::of(code)),
            }
        });
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.spawn(|fs| async move {
            match fs.fallocate(fh.0, offset, length, mode).await {
                Ok(()) => reply.ok(),
                Err(err) => reply.error(err),
            }
        });
    }
}
