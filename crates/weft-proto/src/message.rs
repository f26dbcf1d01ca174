//! Request and reply bodies: the encoded header that follows the fixed frame
//! header. Bulk data (file bytes) never appears here; it travels as frame
//! payload (see [`crate::frame`]).
//!
//! Each multi-step namespace operation is a sequence of these single-server
//! requests, so that a later design can move the sequence into the servers
//! without changing a step.

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, WeftResult};
use crate::handle::Handle;
use crate::layout::Distribution;

/// Who is asking: checked against mode bits by the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// The superuser.
    pub fn root() -> Credentials {
        Credentials { uid: 0, gid: 0, groups: Vec::new() }
    }

    /// Whether the caller is in group `gid`.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// The kind of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKind {
    /// A file's metadata object (attributes, distribution, datafiles).
    Metafile,
    /// One stripe of a file's bytes.
    Datafile,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe (FIFO): a metadata object only; its I/O is the kernel's.
    Fifo,
    /// A UNIX-domain socket's name: a metadata object only.
    Socket,
    /// A block device node (`rdev` names the device); the mount is `nodev`.
    BlockDevice,
    /// A character device node (`rdev` names the device); the mount is `nodev`.
    CharDevice,
}

impl ObjectKind {
    /// Whether this is a special file (FIFO, socket, device node): a
    /// metadata object with no bytes of its own.
    pub fn is_special(self) -> bool {
        matches!(self, ObjectKind::Fifo | ObjectKind::Socket | ObjectKind::BlockDevice | ObjectKind::CharDevice)
    }
}

/// A point in time, nanoseconds since the Unix epoch.
pub type TimeNs = i64;

/// Attributes of an object, as stored on its server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attributes {
    /// The object's handle.
    pub handle: Handle,
    /// What the object is.
    pub kind: ObjectKind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime_ns: TimeNs,
    /// Last data modification.
    pub mtime_ns: TimeNs,
    /// Last attribute change.
    pub ctime_ns: TimeNs,
    /// Metafile: its distribution and datafiles (empty until the layout is set).
    pub layout: Option<FileLayout>,
    /// Directory: the striping new files inherit, if set.
    pub default_distribution: Option<Distribution>,
    /// Directory: number of entries.
    pub entry_count: u64,
    /// Symlink: the target.
    pub symlink_target: Option<String>,
    /// Datafile: local size in bytes.
    pub local_size: u64,
    /// Directory: its parent (the root names itself).
    pub parent: Option<Handle>,
    /// Device node: the device number (Linux `dev_t` encoding); 0 otherwise.
    pub rdev: u64,
}

/// Size and modification time of one datafile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatafileStat {
    /// Local size in bytes.
    pub local_size: u64,
    /// Last modification of its bytes (0 if never written).
    pub mtime_ns: TimeNs,
}

/// Where a file's bytes live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLayout {
    /// Strip size and stripe count.
    pub distribution: Distribution,
    /// One datafile per stripe, in stripe order.
    pub datafiles: Vec<Handle>,
}

/// What to create with [`Request::CreateObject`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewObject {
    /// A metafile without a layout yet.
    Metafile,
    /// A datafile (a record only, until its first write).
    Datafile,
    /// A directory, with optional default striping for new files.
    Directory {
        /// Striping new files inherit.
        default_distribution: Option<Distribution>,
        /// The directory it will be entered in.
        parent: Handle,
    },
    /// A symbolic link.
    Symlink {
        /// Link target.
        target: String,
    },
    /// A special file (`kind` is one for which [`ObjectKind::is_special`] holds).
    Special {
        /// FIFO, socket, block or character device.
        kind: ObjectKind,
        /// Device number (device nodes; 0 for FIFOs and sockets).
        rdev: u64,
    },
}

/// Attribute changes; `None` leaves a field alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrChanges {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New access time.
    pub atime: Option<TimeSet>,
    /// New modification time.
    pub mtime: Option<TimeSet>,
    /// New default striping (directories).
    pub default_distribution: Option<Distribution>,
    /// New parent (directories moved by a rename).
    pub parent: Option<Handle>,
}

/// A time to set: the server's clock, or a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeSet {
    /// The server's current time.
    Now,
    /// This time.
    At(TimeNs),
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// Entry name.
    pub name: String,
    /// Object it names.
    pub handle: Handle,
    /// Kind of that object.
    pub kind: ObjectKind,
    /// Insertion sequence number: the readdir cookie after this entry.
    pub sequence: u64,
}

/// Space and object counts of one server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// Server id.
    pub server_id: u32,
    /// Total bytes of the storage file system.
    pub bytes_total: u64,
    /// Free bytes.
    pub bytes_free: u64,
    /// Objects stored.
    pub objects: u64,
    /// Object ids still available.
    pub object_ids_free: u64,
    /// Seconds since the server started.
    pub uptime_s: u64,
    /// In a composed status table: no news from this server within the
    /// grace time (its other fields are the last known values).
    pub down: bool,
    /// Which file system holds the server's storage: equal for servers
    /// whose storage shares one file system (same machine, same device),
    /// so statfs counts that file system once. A server with a capacity
    /// limit has a device of its own.
    pub storage_device: u64,
}

/// A request. The variant order is part of the wire format: append only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// First request on a connection: checks protocol versions.
    Hello {
        /// The sender's protocol version.
        protocol_version: u16,
    },
    /// Liveness check.
    Ping,
    /// Finds `name` in directory `parent`.
    Lookup {
        /// Caller.
        cred: Credentials,
        /// Directory handle.
        parent: Handle,
        /// Entry name.
        name: String,
    },
    /// Attributes of one object.
    GetAttr {
        /// Object.
        handle: Handle,
    },
    /// Attributes of many objects on this server (listing).
    GetAttrBatch {
        /// Objects.
        handles: Vec<Handle>,
    },
    /// Local sizes of datafiles on this server.
    DatafileSizes {
        /// Datafiles.
        handles: Vec<Handle>,
    },
    /// Creates an unnamed object on this server.
    CreateObject {
        /// Caller (owner of the new object).
        cred: Credentials,
        /// Which target of the server.
        target_id: u16,
        /// Permission bits.
        mode: u32,
        /// What to create.
        object: NewObject,
    },
    /// Stores the distribution and datafile handles of a metafile.
    SetLayout {
        /// Metafile.
        handle: Handle,
        /// Layout.
        layout: FileLayout,
    },
    /// Changes attributes.
    SetAttr {
        /// Caller.
        cred: Credentials,
        /// Object.
        handle: Handle,
        /// Changes.
        changes: AttrChanges,
    },
    /// Sets a datafile's local size (truncate or extend).
    TruncateDatafile {
        /// Datafile.
        handle: Handle,
        /// New local size.
        local_size: u64,
    },
    /// Adds a directory entry.
    CreateDirent {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// Object the entry names.
        target: Handle,
        /// Kind of that object.
        kind: ObjectKind,
    },
    /// Removes a directory entry, returning what it named.
    RemoveDirent {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// Refuse unless the entry names this kind (directory vs. not).
        expect_directory: Option<bool>,
    },
    /// Removes an object (a directory only if empty).
    RemoveObject {
        /// Object.
        handle: Handle,
    },
    /// Lists a directory from a cookie (0 = start).
    ReadDir {
        /// Caller.
        cred: Credentials,
        /// Directory.
        dir: Handle,
        /// Last sequence number already seen.
        cookie: u64,
        /// Most entries to return.
        max_entries: u32,
    },
    /// Renames within one server (both parents on it).
    Rename {
        /// Caller.
        cred: Credentials,
        /// Source directory.
        old_parent: Handle,
        /// Source name.
        old_name: String,
        /// Destination directory.
        new_parent: Handle,
        /// Destination name.
        new_name: String,
    },
    /// Status of this server (space, objects).
    StatFs,
    /// Reads `[offset, offset + length)` of a datafile; data follows as chunks.
    Read {
        /// Datafile.
        handle: Handle,
        /// Local offset.
        offset: u64,
        /// Bytes wanted.
        length: u64,
    },
    /// Writes `length` bytes at `offset` of a datafile; data follows as chunks.
    Write {
        /// Datafile.
        handle: Handle,
        /// Local offset.
        offset: u64,
        /// Bytes that will follow.
        length: u64,
    },
    /// Makes datafiles durable.
    Fsync {
        /// Datafiles on this server.
        handles: Vec<Handle>,
    },
    /// Replaces or adds a directory entry pointing at `target`
    /// (cross-server rename step); returns what it replaced.
    ReplaceDirent {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// New target.
        target: Handle,
        /// Kind of the target.
        kind: ObjectKind,
    },
    /// List I/O read: `regions` (datafile-local `(offset, length)`, in stream
    /// order) of one datafile; data follows packed in list order, each chunk's
    /// `aux` being its offset in that packed stream. Bytes past the local end
    /// read as zeros.
    ReadList {
        /// Datafile.
        handle: Handle,
        /// Local regions, at most `limits::LIST_REGIONS_MAX`.
        regions: Vec<(u64, u64)>,
        /// Sum of the region lengths.
        total_length: u64,
    },
    /// List I/O write: as [`Request::ReadList`], the data chunks carrying the
    /// bytes of the regions packed in list order.
    WriteList {
        /// Datafile.
        handle: Handle,
        /// Local regions, at most `limits::LIST_REGIONS_MAX`.
        regions: Vec<(u64, u64)>,
        /// Sum of the region lengths.
        total_length: u64,
    },
    /// Datatype I/O read: the server walks the access and sends the bytes it
    /// stores, packed in stream order (see [`DatatypeAccess`]).
    ReadDatatype {
        /// The access.
        access: DatatypeAccess,
    },
    /// Datatype I/O write: the client sends the bytes this server stores,
    /// packed in stream order; the server walks the access in lockstep.
    WriteDatatype {
        /// The access.
        access: DatatypeAccess,
        /// Bytes of the access this server stores (the upload length).
        packed_length: u64,
    },
    /// This server's I/O counters.
    Counters,
    // ---- Server-to-server and aggregate requests (appended; see ARCHITECTURE.md). ----
    /// First request on a connection from another server: like `Hello`,
    /// and marks the connection as a peer's (admitted separately).
    PeerHello {
        /// The sender's protocol version.
        protocol_version: u16,
        /// The sending server.
        server_id: u32,
    },
    /// A tree collective: the receiver does the share of `groups[0]` (its
    /// own) and forwards the rest along a k-nomial tree (see `weft-server::tree`).
    Collective {
        /// What each server does with its handles.
        operation: CollectiveOp,
        /// Handles per server; the first group is the receiver's.
        groups: Vec<CollectiveGroup>,
        /// Fan-out k (0 = the server's configured default).
        fanout: u32,
        /// Forwarding step at which this message was sent (0 at the root).
        round: u32,
    },
    /// Aggregate create: name check, metafile and datafiles in one
    /// transaction on the parent's server. Replies `Attributes`.
    CreateFile {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// Permission bits.
        mode: u32,
        /// Strip size (default: directory, then configuration).
        strip_bytes: Option<u64>,
        /// Stripe count (default: directory, then configuration).
        stripe_count: Option<u32>,
        /// Fail with `Exists` if the name exists (else reply its attributes).
        exclusive: bool,
    },
    /// Attributes with datafile sizes gathered along the tree. Replies `Stat`.
    StatFile {
        /// Object (any kind).
        handle: Handle,
    },
    /// Aggregate unlink/rmdir on the parent's server.
    RemoveEntry {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// Refuse unless the entry names this kind (directory vs. not).
        expect_directory: Option<bool>,
    },
    /// Aggregate mkdir on the parent's server. Replies `Handle`.
    MakeDirectory {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
        /// Permission bits.
        mode: u32,
    },
    /// Aggregate rename, sent to the source parent's server.
    RenameEntry {
        /// Caller.
        cred: Credentials,
        /// Source directory.
        old_parent: Handle,
        /// Source name.
        old_name: String,
        /// Destination directory.
        new_parent: Handle,
        /// Destination name.
        new_name: String,
    },
    /// Status of every server, answered by one server. Replies `StatusTable`.
    StatFsAll,
    /// Data server: durably creates `count` datafiles reserved for
    /// `metadata_server`'s precreate pool. Replies `Handles`.
    ReserveDatafiles {
        /// The metadata server the handles are for.
        metadata_server: u32,
        /// How many.
        count: u32,
    },
    /// Data server: datafiles still reserved for `metadata_server`. Replies `Handles`.
    ListReserved {
        /// The metadata server.
        metadata_server: u32,
    },
    /// Data server: these reserved datafiles are now used by files of
    /// `metadata_server`; forget their reservation.
    ClaimReserved {
        /// The metadata server.
        metadata_server: u32,
        /// Datafiles it used.
        handles: Vec<Handle>,
    },
    /// One recursive-doubling step of status composition: the sender's
    /// table; the reply is the receiver's table (`StatusEntries`).
    ExchangeStatus {
        /// The sender's known statuses.
        entries: Vec<StatusEntry>,
    },
    /// Consistency check: a page of this server's objects with handles
    /// above `after`. Replies `Objects`.
    ScanObjects {
        /// Last handle already seen (0 = start).
        after: u64,
        /// Most objects to return (≤ `limits::BATCH_HANDLES_MAX`).
        max: u32,
    },
    /// Consistency check: a page of one bookkeeping table (1 pool,
    /// 2 pool_used, 3 reserved, 4 reclaim). Replies `HandleRows`.
    ScanHandleRows {
        /// Table tag.
        table: u8,
        /// Last handle already seen (0 = start).
        after: u64,
        /// Most rows (≤ `limits::BATCH_HANDLES_MAX`).
        max: u32,
    },
    // ---- Sessions, shared file pointers, byte-range locks (appended; see `crate::session`). ----
    /// Opens a session on a file whose metafile this server stores.
    /// Replies `Session`.
    SessionOpen {
        /// The file's metafile.
        handle: Handle,
        /// Wanted lease (0 = default; clamped to the limits of `crate::session`).
        lease_ms: u32,
    },
    /// Renews a session's lease. Replies `Done`.
    SessionRenew {
        /// Session id.
        session: u64,
    },
    /// Ends a session: its locks are released, its pointer forgotten. Replies `Done`.
    SessionClose {
        /// Session id.
        session: u64,
    },
    /// Adds `delta` to the session's shared pointer. Replies `Pointer` with the old value.
    PointerFetchAdd {
        /// Session id.
        session: u64,
        /// Amount to add.
        delta: u64,
    },
    /// Sets the session's shared pointer. Replies `Pointer` with the old value.
    PointerSet {
        /// Session id.
        session: u64,
        /// New value.
        value: u64,
    },
    /// Reads the session's shared pointer. Replies `Pointer`.
    PointerGet {
        /// Session id.
        session: u64,
    },
    /// Locks byte ranges of the session's file, shared or exclusive; waits
    /// (first come, first served among conflicting requests) up to
    /// `wait_ms`, then fails with `TimedOut`. Replies `Lock`.
    LockAcquire {
        /// Session id (the owner of the lock).
        session: u64,
        /// `(offset, length)` ranges; every length > 0.
        ranges: Vec<(u64, u64)>,
        /// Exclusive (writers) or shared (readers).
        exclusive: bool,
        /// Longest wait (clamped to `limits::LOCK_WAIT_MS_MAX`; 0 = fail at once).
        wait_ms: u32,
    },
    /// Releases a lock taken through this session. Replies `Done`.
    LockRelease {
        /// Session id.
        session: u64,
        /// Lock id from the `Lock` reply.
        lock: u64,
    },
    /// Lookup and aggregate stat in one request, at the parent's server:
    /// replies `Stat` when the entry names a file or directory stored
    /// there (the permission check of `Lookup`, then what `StatFile`
    /// answers), else `Entry` (a symlink, or an object on another server)
    /// for the client to continue from.
    StatEntry {
        /// Caller.
        cred: Credentials,
        /// Directory.
        parent: Handle,
        /// Entry name.
        name: String,
    },
    /// Data server → the server keeping these datafiles' size marks
    /// (`weft-server::growth`): the datafiles are about to change. The
    /// receiver durably records each as *growing* (bumping its mark
    /// generation) before it replies `Done`; only then may the data
    /// server change their bytes.
    MarkGrowing {
        /// Datafiles (≤ `BATCH_HANDLES_MAX`).
        datafiles: Vec<Handle>,
    },
    // ---- Byte-range locks at the data servers (appended; see `weft-server::locks`). ----
    /// Data server: a new lock request on the bytes of one datafile
    /// stored here. The server grants the request's pieces in increasing
    /// file offset, stopping at the first conflict or at the first piece
    /// at or past `until`; with `block`, it waits (up to `wait_ms`) until
    /// every piece below `until` is granted. Replies `LockGrant`.
    DlmAcquire {
        /// The lock owner (a client's id, unique per client: it owns the lease).
        owner: u64,
        /// Lease of the owner (0 = default; clamped like a session's).
        lease_ms: u32,
        /// Exclusive (writers) or shared (readers).
        exclusive: bool,
        /// What to lock.
        lock: LockDescription,
        /// Grant only pieces starting below this file offset (`u64::MAX`: all; 0: none, just register).
        until: u64,
        /// Wait until every piece below `until` is granted.
        block: bool,
        /// Longest wait with `block` (clamped to `limits::LOCK_WAIT_MS_MAX`).
        wait_ms: u32,
    },
    /// Data server: grants more of an existing lock request, as `DlmAcquire`. Replies `LockGrant`.
    DlmContinue {
        /// The lock owner.
        owner: u64,
        /// Request number from a `LockGrant` reply.
        request: u64,
        /// Grant only pieces starting below this file offset.
        until: u64,
        /// Wait until every piece below `until` is granted.
        block: bool,
        /// Longest wait with `block`.
        wait_ms: u32,
    },
    /// Data server: releases the granted pieces of a lock request that
    /// start at or past file offset `from` (`None`: the whole request,
    /// which is then forgotten). Replies `LockGrant` with what remains.
    DlmRelease {
        /// The lock owner.
        owner: u64,
        /// Request number.
        request: u64,
        /// First file offset released (`None`: all, and forget the request).
        from: Option<u64>,
    },
    /// Data server: renews an owner's lease. Replies `Done`.
    DlmRenew {
        /// The lock owner.
        owner: u64,
    },
    /// A data write under locks: the server runs `request` (a `Write`,
    /// `WriteList` or `WriteDatatype`) only if every lock request of
    /// `fence` is still wholly granted, exclusive, on that datafile, to
    /// that owner, since the server start `fence.epoch`; else `Stale`.
    Fenced {
        /// The locks the write is made under.
        fence: Fence,
        /// The write.
        request: Box<Request>,
    },
    // ---- Authentication (appended; see `weft-server::auth`). ----
    /// Second request on every connection, answering the nonce of the
    /// `Hello` reply: proves who the sender is. Replies `Done`; on failure
    /// the server answers `Access` and closes.
    Authenticate {
        /// The proof.
        proof: Proof,
    },
    // ---- Capabilities (appended; see `weft-server::capability`). ----
    /// Metadata server of metafile `handle`: checks that `cred` may access
    /// the file with `rights` (`access::READ` / `access::WRITE` bits) and
    /// replies `Capability`, which the file's data servers accept for
    /// data requests by datafile handle.
    IssueCapability {
        /// Who asks.
        cred: Credentials,
        /// The metafile.
        handle: Handle,
        /// `access::READ` and/or `access::WRITE`.
        rights: u32,
    },
    /// A data request by datafile handle (`Read`, `Write`, `ReadList`,
    /// `WriteList`, `ReadDatatype`, `WriteDatatype`, `TruncateDatafile`, or
    /// a `Fenced` write) with the capability that allows it.
    Capable {
        /// Issued by the file's metadata server.
        capability: Capability,
        /// The data request.
        request: Box<Request>,
    },
    /// Takes back the growth of a datafile that a client's write stored
    /// while the same call failed on another datafile (issue 21): sets the
    /// local size to `local_size` only if it is now exactly `if_size` (the
    /// end of that write, so no one has written past it since) and
    /// `local_size < if_size`; otherwise changes nothing. Replies `Io` with
    /// the local size afterwards.
    TrimDatafile {
        /// Datafile.
        handle: Handle,
        /// The local size the trim expects (the failed call's end).
        if_size: u64,
        /// New local size.
        local_size: u64,
    },
}

/// What a file's metadata server vouches: uid `uid` may use the file's
/// datafiles with `rights` until `expires_ms` (Unix time, milliseconds).
/// `mac` is an HMAC-SHA-256 under the file-system key over the rest
/// (`weft_net::auth::capability_message`), so a data server checks it
/// without a round trip.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// The file's datafiles.
    pub datafiles: Vec<Handle>,
    /// Whose it is.
    pub uid: u32,
    /// `access::READ` and/or `access::WRITE`.
    pub rights: u32,
    /// Unix time in milliseconds after which it is refused.
    pub expires_ms: u64,
    /// The MAC.
    pub mac: Vec<u8>,
}

/// What a data server locks for one lock request: pieces of one datafile
/// stored there. Pieces are granted in increasing *file* offset (the
/// order the client protocols rely on across servers); conflicts are
/// decided on exact datafile bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockDescription {
    /// POSIX and list locks: datafile-local `(offset, length)` ranges of
    /// stripe `stripe_index` under `distribution` (≤ `limits::LOCK_RANGES_MAX`).
    Ranges {
        /// Datafile.
        handle: Handle,
        /// The file's striping.
        distribution: Distribution,
        /// Which stripe the datafile is.
        stripe_index: u32,
        /// Local ranges, every length > 0.
        ranges: Vec<(u64, u64)>,
    },
    /// Datatype locks: the access a datatype request carries; the server
    /// walks only its own pieces.
    Datatype(DatatypeAccess),
}

impl LockDescription {
    /// The datafile locked.
    pub fn handle(&self) -> Handle {
        match self {
            LockDescription::Ranges { handle, .. } => *handle,
            LockDescription::Datatype(access) => access.handle,
        }
    }
}

/// The locks a fenced write is made under, at one data server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    /// The lock owner.
    pub owner: u64,
    /// The data server's start epoch (from `LockGrant`).
    pub epoch: u64,
    /// Lock request numbers at that server.
    pub requests: Vec<u64>,
}

/// How a connection proves who opened it ([`Request::Authenticate`]).
/// Every proof is bound to the server's nonce of this connection, so a
/// recorded proof is worth nothing on another connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proof {
    /// Nothing (accepted only by a server configured `auth.mode = "none"`).
    None,
    /// A holder of the file-system key acting as `cred`: `mac` is
    /// HMAC-SHA-256 under the key over the nonce, the server and `cred`.
    Key {
        /// The identity claimed.
        cred: Credentials,
        /// The MAC.
        mac: Vec<u8>,
    },
    /// Another server (the connection greeted with `PeerHello`): `mac` is
    /// HMAC-SHA-256 under the key over the nonce and both server ids.
    Peer {
        /// The MAC.
        mac: Vec<u8>,
    },
    /// A MUNGE credential whose payload names the nonce and the server;
    /// the server decodes it with its munged (uid and primary gid).
    Munge {
        /// The credential as `munge` prints it.
        credential: String,
    },
}

/// What a consistency check needs of one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSummary {
    /// Handle.
    pub handle: Handle,
    /// Kind.
    pub kind: ObjectKind,
    /// Metafile: its datafiles.
    pub datafiles: Vec<Handle>,
    /// Directory: its parent.
    pub parent: Option<Handle>,
}

/// One row of the composed status table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusEntry {
    /// The status.
    pub status: ServerStatus,
    /// When its server produced it (ns since the epoch, its own clock):
    /// newer replaces older.
    pub produced_ns: i64,
}

/// What a [`Request::Collective`] asks of each server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CollectiveOp {
    /// Nothing (tests: tree shape and depth).
    Ping,
    /// Local sizes of the listed datafiles.
    DatafileSizes,
    /// Remove the listed objects (reclaim): metafiles queue their
    /// datafiles on that server; missing objects count as removed.
    RemoveObjects,
    /// The server's status.
    Status,
    /// The server's counters.
    Counters,
    /// Local stats of the listed datafiles, each with whether it is idle
    /// (no change in flight or within the quiet period); an idle datafile
    /// must be marked again before its next change (`weft-server::growth`).
    SettleSizes,
}

/// The handles one server works on in a collective.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveGroup {
    /// Server.
    pub server_id: u32,
    /// Its handles.
    pub handles: Vec<Handle>,
}

/// One server's share of a collective's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CollectivePart {
    /// Nothing to report.
    Done,
    /// Sizes, one per handle of the group.
    Sizes(Vec<WeftResult<DatafileStat>>),
    /// Removal results, one per handle of the group.
    Removed(Vec<WeftResult<()>>),
    /// Status.
    Status(ServerStatus),
    /// Counters.
    Counters(ServerCounters),
    /// Settle answers, one per handle of the group.
    Settle(Vec<WeftResult<SettleStat>>),
}

/// A datafile's stat as a settle sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleStat {
    /// Local size and data mtime.
    pub stat: DatafileStat,
    /// No change in flight or within the quiet period; the data server
    /// has forgotten the datafile's mark, so its next change marks again.
    pub idle: bool,
}

/// The reduced result of a collective: one entry per server, in the order
/// of the request's groups; a failing hop is named by its `server_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveResult {
    /// Per server.
    pub parts: Vec<(u32, WeftResult<CollectivePart>)>,
    /// Deepest forwarding step reached below (and including) the receiver.
    pub depth: u32,
}

/// One datatype access, as sent to each server holding any of its bytes.
///
/// The file type (`dataloop`, encoded by `weft_dataloop::Dataloop::encode`)
/// is tiled `count` times from byte `displacement` of the file; the access
/// is stream bytes `[stream_start, stream_start + stream_length)` of that
/// tiling. The receiving server keeps only the bytes of stripe
/// `stripe_index` under `distribution`, in stream order: that sequence is
/// the per-server packed stream the data chunks carry (`aux` = offset in it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatatypeAccess {
    /// Datafile (stripe `stripe_index` of the file).
    pub handle: Handle,
    /// Encoded file type.
    pub dataloop: Vec<u8>,
    /// Repetitions of the file type.
    pub count: u64,
    /// File offset of the first repetition (may be negative if the type's lower bound compensates).
    pub displacement: i64,
    /// First stream byte of the access.
    pub stream_start: u64,
    /// Stream bytes of the access (all servers together).
    pub stream_length: u64,
    /// The file's striping.
    pub distribution: Distribution,
    /// Which stripe the datafile is.
    pub stripe_index: u32,
}

/// Requests and bytes of one request kind on a server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindTally {
    /// Request kind ([`Request::kind_name`]).
    pub kind: String,
    /// Requests served.
    pub requests: u64,
    /// Data bytes moved.
    pub bytes: u64,
    /// Service-time histogram (from the request's arrival to its reply
    /// being queued): entry i counts requests that took less than 2^i µs
    /// and at least 2^(i-1) µs (entry 0: under 1 µs); the last entry also
    /// holds everything slower. [`LATENCY_BUCKETS`] entries.
    pub latency_log2_us: Vec<u64>,
}

/// Entries of [`KindTally::latency_log2_us`] (the last is ≥ 2^22 µs ≈ 4 s).
pub const LATENCY_BUCKETS: usize = 24;

impl KindTally {
    /// The service time below which `quantile` (0..=1) of the requests
    /// fall, as the upper bound of its histogram bucket in µs (None if the
    /// histogram is empty).
    pub fn latency_quantile_us(&self, quantile: f64) -> Option<u64> {
        let total: u64 = self.latency_log2_us.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * quantile.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in self.latency_log2_us.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(1u64 << bucket);
            }
        }
        Some(1u64 << (self.latency_log2_us.len() - 1))
    }
}

/// A server's I/O counters since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerCounters {
    /// Per request kind.
    pub kinds: Vec<KindTally>,
    /// `pread`/`pwrite` calls on datafiles.
    pub syscalls: u64,
    /// Noncontiguous pieces walked (list entries and datatype pieces).
    pub regions_visited: u64,
    /// Covering spans read (or read-modified-written) by data sieving.
    pub sieve_spans: u64,
    /// Bytes of those spans.
    pub sieve_bytes: u64,
    /// Collectives forwarded to other servers.
    pub collective_forwards: u64,
    /// Deepest forwarding step of any collective this server took part in.
    pub collective_depth_max: u64,
}

impl Request {
    /// A short name for counters and logs.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Ping => "ping",
            Request::Lookup { .. } => "lookup",
            Request::GetAttr { .. } => "getattr",
            Request::GetAttrBatch { .. } => "getattr_batch",
            Request::DatafileSizes { .. } => "datafile_sizes",
            Request::CreateObject { .. } => "create_object",
            Request::SetLayout { .. } => "set_layout",
            Request::SetAttr { .. } => "setattr",
            Request::TruncateDatafile { .. } => "truncate_datafile",
            Request::TrimDatafile { .. } => "trim_datafile",
            Request::CreateDirent { .. } => "create_dirent",
            Request::RemoveDirent { .. } => "remove_dirent",
            Request::RemoveObject { .. } => "remove_object",
            Request::ReadDir { .. } => "readdir",
            Request::Rename { .. } => "rename",
            Request::StatFs => "statfs",
            Request::Read { .. } => "read",
            Request::Write { .. } => "write",
            Request::Fsync { .. } => "fsync",
            Request::ReplaceDirent { .. } => "replace_dirent",
            Request::ReadList { .. } => "read_list",
            Request::WriteList { .. } => "write_list",
            Request::ReadDatatype { .. } => "read_datatype",
            Request::WriteDatatype { .. } => "write_datatype",
            Request::Counters => "counters",
            Request::PeerHello { .. } => "peer_hello",
            Request::Collective { .. } => "collective",
            Request::CreateFile { .. } => "create_file",
            Request::StatFile { .. } => "stat_file",
            Request::RemoveEntry { .. } => "remove_entry",
            Request::MakeDirectory { .. } => "make_directory",
            Request::RenameEntry { .. } => "rename_entry",
            Request::StatFsAll => "statfs_all",
            Request::ReserveDatafiles { .. } => "reserve_datafiles",
            Request::ListReserved { .. } => "list_reserved",
            Request::ClaimReserved { .. } => "claim_reserved",
            Request::ExchangeStatus { .. } => "exchange_status",
            Request::ScanObjects { .. } => "scan_objects",
            Request::ScanHandleRows { .. } => "scan_handle_rows",
            Request::SessionOpen { .. } => "session_open",
            Request::SessionRenew { .. } => "session_renew",
            Request::SessionClose { .. } => "session_close",
            Request::PointerFetchAdd { .. } => "pointer_fetch_add",
            Request::PointerSet { .. } => "pointer_set",
            Request::PointerGet { .. } => "pointer_get",
            Request::LockAcquire { .. } => "lock_acquire",
            Request::LockRelease { .. } => "lock_release",
            Request::StatEntry { .. } => "stat_entry",
            Request::MarkGrowing { .. } => "mark_growing",
            Request::DlmAcquire { .. } => "dlm_acquire",
            Request::DlmContinue { .. } => "dlm_continue",
            Request::DlmRelease { .. } => "dlm_release",
            Request::DlmRenew { .. } => "dlm_renew",
            Request::Fenced { .. } => "fenced",
            Request::IssueCapability { .. } => "issue_capability",
            Request::Capable { .. } => "capable",
            Request::Authenticate { .. } => "authenticate",
        }
    }
}

/// A successful reply body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Hello accepted.
    Hello {
        /// Server's protocol version.
        protocol_version: u16,
        /// Server id.
        server_id: u32,
        /// Fresh random bytes the `Authenticate` proof must cover.
        nonce: Vec<u8>,
    },
    /// Nothing to report.
    Done,
    /// A handle (lookup, create).
    Handle(Handle),
    /// A handle with its kind (lookup).
    Entry {
        /// Handle.
        handle: Handle,
        /// Kind.
        kind: ObjectKind,
    },
    /// Attributes.
    Attributes(Attributes),
    /// Batch of attributes, one per requested handle.
    AttributesBatch(Vec<WeftResult<Attributes>>),
    /// Local sizes, one per requested handle.
    Sizes(Vec<WeftResult<DatafileStat>>),
    /// A readdir page.
    DirPage {
        /// Entries.
        entries: Vec<DirEntry>,
        /// True when the directory has no entries after these.
        end: bool,
    },
    /// Removed entry.
    Removed {
        /// Handle the entry named.
        handle: Handle,
        /// Its kind.
        kind: ObjectKind,
    },
    /// Result of a rename or replace: the object an existing destination named.
    Replaced(Option<(Handle, ObjectKind)>),
    /// Server status.
    Status(ServerStatus),
    /// I/O done: bytes moved and the datafile's local size (afterwards;
    /// for a contiguous `Write`, before it).
    Io {
        /// Bytes read or written.
        bytes: u64,
        /// Local datafile size: after the request, except for a contiguous
        /// `Write`, whose reply gives it as it was before the write.
        local_size: u64,
    },
    /// A server's I/O counters.
    Counters(ServerCounters),
    /// A collective's reduced result.
    Collective(CollectiveResult),
    /// Attributes with the sizes of the datafiles, in layout order.
    Stat {
        /// Attributes.
        attributes: Attributes,
        /// One per datafile of the layout.
        sizes: Vec<DatafileStat>,
    },
    /// Status of every server, by server id.
    StatusTable(Vec<ServerStatus>),
    /// Handles (pool reservations).
    Handles(Vec<Handle>),
    /// A status table (status composition).
    StatusEntries(Vec<StatusEntry>),
    /// A page of objects (consistency check).
    Objects(Vec<ObjectSummary>),
    /// A page of a bookkeeping table: (handle, server id).
    HandleRows(Vec<(Handle, u32)>),
    /// An opened session (appended with the session requests).
    Session {
        /// Session id (unique per server start).
        session: u64,
        /// The lease granted.
        lease_ms: u32,
    },
    /// A shared file pointer value.
    Pointer(u64),
    /// A granted byte-range lock.
    Lock(u64),
    /// State of a data-server lock request (`DlmAcquire`, `DlmContinue`, `DlmRelease`).
    LockGrant {
        /// Request number (to continue, release, fence).
        request: u64,
        /// End (exclusive file offset) of the last granted piece; 0 if none.
        last: u64,
        /// File offset of the first piece not granted; `u64::MAX` once all are.
        next: u64,
        /// The server's start epoch (for fences).
        epoch: u64,
    },
    /// An issued capability.
    Capability(Capability),
}

impl Request {
    /// Whether data chunks follow the request (the writes, fenced or not).
    pub fn carries_data(&self) -> bool {
        match self {
            Request::Write { .. } | Request::WriteList { .. } | Request::WriteDatatype { .. } => true,
            Request::Fenced { request, .. } => {
                matches!(**request, Request::Write { .. } | Request::WriteList { .. } | Request::WriteDatatype { .. })
            }
            Request::Capable { request, .. } => request.carries_data(),
            _ => false,
        }
    }
}

/// A reply as carried on the wire.
pub type ReplyResult = Result<Reply, ErrorCode>;

/// Encodes a message header.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    // Encoding into a Vec cannot fail for these types.
    postcard::to_allocvec(message).expect("postcard encoding of an in-memory message")
}

/// Decodes a message header; any malformed input is a protocol error.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> WeftResult<T> {
    postcard::from_bytes(bytes).map_err(|_| ErrorCode::Protocol)
}

/// Checks a directory entry name: not empty, not `.`/`..`, no `/` or NUL.
pub fn validate_name(name: &str) -> WeftResult<()> {
    if name.len() > crate::limits::NAME_BYTES_MAX {
        return Err(ErrorCode::NameTooLong);
    }
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(ErrorCode::Invalid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip() {
        let r = Request::Lookup { cred: Credentials::root(), parent: Handle::ROOT, name: "a".into() };
        let bytes = encode(&r);
        assert_eq!(decode::<Request>(&bytes).unwrap(), r);
    }

    #[test]
    fn garbage_is_protocol_error() {
        assert_eq!(decode::<Request>(&[0xff, 0xff, 0xff]), Err(ErrorCode::Protocol));
        assert_eq!(decode::<Request>(&[]), Err(ErrorCode::Protocol));
    }

    #[test]
    fn names() {
        assert!(validate_name("ok").is_ok());
        assert_eq!(validate_name(""), Err(ErrorCode::Invalid));
        assert_eq!(validate_name(".."), Err(ErrorCode::Invalid));
        assert_eq!(validate_name("a/b"), Err(ErrorCode::Invalid));
        assert_eq!(validate_name(&"x".repeat(256)), Err(ErrorCode::NameTooLong));
    }
}
