//! The key/value half of a server's storage: objects, directory entries and
//! counters in one redb database (`meta.redb` in the storage directory).
//!
//! Tables (see docs/FORMAT.md for the record layouts):
//! - `objects`: handle → postcard [`ObjectRecord`]
//! - `dirents`: (directory handle, name) → (sequence, target handle, kind tag)
//! - `dirseq`: (directory handle, sequence) → name, the readdir order
//! - `counters`: name → u64 (object-id reservations per target)
//! - `format`: `"store"` → the store's format version ([`FORMAT_VERSION`]);
//!   a store of another version is refused at open ([`check_format`])
//!
//! The database lives on [`crate::reserve::StoreBackend`], which keeps the
//! store's headroom of the metadata reserve allocated. After a failed
//! write redb refuses everything ("previous I/O error"), so the committer
//! [`Store::reopen`]s it and replays the write-ahead log.
//!
//! Reads run on any thread with their own read transaction. Writes run only
//! inside the committer's write transaction ([`crate::committer`]), which
//! also logs them to the write-ahead log ([`crate::wal`]); every
//! write function checks all its preconditions before it changes anything,
//! so a failed operation leaves the shared transaction untouched.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    WriteTransaction,
};
use serde::{Deserialize, Serialize};
use weft_proto::message::{Attributes, DirEntry, FileLayout, ObjectKind, TimeNs};
use weft_proto::{Distribution, ErrorCode, Handle, WeftResult};

use crate::reserve::{Headroom, StoreBackend};
use crate::wal::Mutation;

/// Objects by handle.
pub const OBJECTS: TableDefinition<u64, &[u8]> = TableDefinition::new("objects");
/// Directory entries by (directory, name).
pub const DIRENTS: TableDefinition<(u64, &str), (u64, u64, u8)> = TableDefinition::new("dirents");
/// Directory entry names by (directory, insertion sequence).
pub const DIRSEQ: TableDefinition<(u64, u64), &str> = TableDefinition::new("dirseq");
/// Named counters.
pub const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
/// Metadata server: precreated datafiles it may use, handle → data server.
pub const POOL: TableDefinition<u64, u32> = TableDefinition::new("pool");
/// Metadata server: pool datafiles used by a file whose reservation the
/// data server has not yet forgotten (claim pending), handle → data server.
pub const POOL_USED: TableDefinition<u64, u32> = TableDefinition::new("pool_used");
/// Data server: datafiles reserved for a metadata server's pool and not
/// yet claimed, handle → metadata server.
pub const RESERVED: TableDefinition<u64, u32> = TableDefinition::new("reserved");
/// Objects to remove (the durable reclaim queue), handle → its server.
pub const RECLAIM: TableDefinition<u64, u32> = TableDefinition::new("reclaim");
/// Metadata server: datafiles that may differ from their metafile's
/// settled stats, handle → mark generation ([`crate::growth`]).
pub const GROWING: TableDefinition<u64, u32> = TableDefinition::new("growing");
/// Format versions: `"store"` → [`FORMAT_VERSION`].
pub const FORMAT: TableDefinition<&str, u32> = TableDefinition::new("format");
/// The store format (tables and record layouts) this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// What the `format` row says: `Ok(true)` when it must be written (a new
/// store, or one from before versions were recorded, which is version 1),
/// `Ok(false)` for this build's version, an explanation otherwise.
pub fn check_format(found: Option<u32>) -> Result<bool, String> {
    match found {
        None => Ok(true),
        Some(FORMAT_VERSION) => Ok(false),
        Some(version) => Err(format!(
            "store format version {version} is not known to this build (it reads version {FORMAT_VERSION}); \
             see docs/FORMAT.md, Upgrades"
        )),
    }
}

/// The handle-keyed bookkeeping tables (handle → server id; `Growing`:
/// handle → mark generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleTable {
    /// [`POOL`].
    Pool,
    /// [`POOL_USED`].
    PoolUsed,
    /// [`RESERVED`].
    Reserved,
    /// [`RECLAIM`].
    Reclaim,
    /// [`GROWING`].
    Growing,
}

impl HandleTable {
    /// The table's definition.
    pub fn definition(self) -> TableDefinition<'static, u64, u32> {
        match self {
            HandleTable::Pool => POOL,
            HandleTable::PoolUsed => POOL_USED,
            HandleTable::Reserved => RESERVED,
            HandleTable::Reclaim => RECLAIM,
            HandleTable::Growing => GROWING,
        }
    }

    /// Stable tag in the write-ahead log.
    pub fn tag(self) -> u8 {
        match self {
            HandleTable::Pool => 1,
            HandleTable::PoolUsed => 2,
            HandleTable::Reserved => 3,
            HandleTable::Reclaim => 4,
            HandleTable::Growing => 5,
        }
    }

    /// Inverse of [`HandleTable::tag`]; unknown tags are corruption.
    pub fn from_tag(tag: u8) -> WeftResult<HandleTable> {
        match tag {
            1 => Ok(HandleTable::Pool),
            2 => Ok(HandleTable::PoolUsed),
            3 => Ok(HandleTable::Reserved),
            4 => Ok(HandleTable::Reclaim),
            5 => Ok(HandleTable::Growing),
            _ => Err(ErrorCode::Io),
        }
    }
}

/// The handles of target `target_id`, as a key range.
pub fn target_range(target_id: u16) -> std::ops::Range<u64> {
    let low = (target_id as u64) << 48;
    low..low + (1u64 << 48)
}

/// The stored form of one object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Kind.
    pub kind: ObjectKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Access time.
    pub atime_ns: TimeNs,
    /// Modification time.
    pub mtime_ns: TimeNs,
    /// Change time.
    pub ctime_ns: TimeNs,
    /// Metafile layout.
    pub layout: Option<FileLayout>,
    /// Directory default striping.
    pub default_distribution: Option<Distribution>,
    /// Directory: next insertion sequence number.
    pub next_sequence: u64,
    /// Directory: entry count.
    pub entry_count: u64,
    /// Symlink target.
    pub symlink_target: Option<String>,
    /// Directory parent.
    pub parent: Option<Handle>,
    /// Size tracking ([`crate::growth`]); absent in records written
    /// before it (they decode as `None`).
    pub tracking: Option<SizeTracking>,
    /// Device node: its device number; 0 for every other kind. The last
    /// field, absent in records written before it (they decode as 0).
    pub rdev: u64,
}

/// What a record keeps for exact sizes without a gather per stat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SizeTracking {
    /// Metafile: each datafile's settled stat, in layout order. Exact for
    /// every datafile without a `growing` row (docs/FORMAT.md).
    Metafile(Vec<weft_proto::message::DatafileStat>),
    /// Datafile: the server that keeps its `growing` row (its metafile's).
    Datafile(u32),
}

impl ObjectRecord {
    /// A fresh record of `kind` owned by `uid:gid`.
    pub fn new(kind: ObjectKind, mode: u32, uid: u32, gid: u32, now: TimeNs) -> ObjectRecord {
        ObjectRecord {
            kind,
            mode: mode & 0o7777,
            uid,
            gid,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            layout: None,
            default_distribution: None,
            next_sequence: 1,
            entry_count: 0,
            symlink_target: None,
            parent: None,
            tracking: None,
            rdev: 0,
        }
    }

    /// Encodes for storage.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("record encodes")
    }

    /// Decodes a stored record; corruption is an I/O error.
    pub fn decode(bytes: &[u8]) -> WeftResult<ObjectRecord> {
        // Older records lack trailing fields: written before `rdev` existed,
        // the same bytes with it 0; before `tracking` too, with it `None`.
        let record: ObjectRecord = postcard::from_bytes(bytes)
            .or_else(|_| postcard::from_bytes(&[bytes, &[0u8]].concat()))
            .or_else(|_| postcard::from_bytes(&[bytes, &[0u8, 0u8]].concat()))
            .map_err(|_| ErrorCode::Io)?;
        if record.next_sequence == 0 {
            return Err(ErrorCode::Io);
        }
        Ok(record)
    }

    /// The wire attributes of this record.
    pub fn attributes(&self, handle: Handle, local_size: u64) -> Attributes {
        Attributes {
            handle,
            kind: self.kind,
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            atime_ns: self.atime_ns,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            layout: self.layout.clone(),
            default_distribution: self.default_distribution,
            entry_count: self.entry_count,
            symlink_target: self.symlink_target.clone(),
            local_size,
            parent: self.parent,
            rdev: self.rdev,
        }
    }
}

/// Stable one-byte tags for [`ObjectKind`] in the dirent table.
pub fn kind_tag(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Metafile => 1,
        ObjectKind::Datafile => 2,
        ObjectKind::Directory => 3,
        ObjectKind::Symlink => 4,
        ObjectKind::Fifo => 5,
        ObjectKind::Socket => 6,
        ObjectKind::BlockDevice => 7,
        ObjectKind::CharDevice => 8,
    }
}

/// Inverse of [`kind_tag`]; unknown tags are corruption.
pub fn kind_from_tag(tag: u8) -> WeftResult<ObjectKind> {
    match tag {
        1 => Ok(ObjectKind::Metafile),
        2 => Ok(ObjectKind::Datafile),
        3 => Ok(ObjectKind::Directory),
        4 => Ok(ObjectKind::Symlink),
        5 => Ok(ObjectKind::Fifo),
        6 => Ok(ObjectKind::Socket),
        7 => Ok(ObjectKind::BlockDevice),
        8 => Ok(ObjectKind::CharDevice),
        _ => Err(ErrorCode::Io),
    }
}

/// Maps a redb error to a code: a full file system is `NoSpace` (the
/// caller may free space and retry), anything else `Io`.
pub fn storage_error<E: Into<redb::Error>>(err: E) -> ErrorCode {
    let err: redb::Error = err.into();
    match &err {
        redb::Error::Io(io) if ErrorCode::from_io(io) == ErrorCode::NoSpace => {
            tracing::warn!("key/value store: {err}");
            ErrorCode::NoSpace
        }
        _ => {
            tracing::error!("key/value store: {err}");
            ErrorCode::Io
        }
    }
}

/// The opened database.
pub struct Store {
    /// `None` only while [`Store::reopen`] runs.
    db: RwLock<Option<Database>>,
    /// Opens the database (again, for [`Store::reopen`]).
    opener: Box<dyn Fn() -> WeftResult<Database> + Send + Sync>,
    headroom: Arc<Headroom>,
}

impl Store {
    /// Opens (or creates) the database and its tables, keeping
    /// `headroom_bytes` allocated behind it.
    pub fn open(dir: &Path, headroom_bytes: u64) -> WeftResult<Store> {
        crate::durable::create_dir_all_durable(dir).map_err(|e| ErrorCode::from_io(&e))?;
        let existed = dir.join("meta.redb").exists();
        let file = Self::open_file(dir)?;
        if !existed {
            // The new name is durable only once its directory is.
            crate::durable::sync_dir(dir).map_err(|e| ErrorCode::from_io(&e))?;
        }
        let headroom =
            Arc::new(Headroom::new(file.try_clone().map_err(|e| ErrorCode::from_io(&e))?, dir, headroom_bytes));
        headroom.top_up();
        let db = Self::open_database(StoreBackend::new(file, headroom.clone())?, &dir.join("meta.redb"))?;
        let (dir, for_reopen): (PathBuf, Arc<Headroom>) = (dir.to_path_buf(), headroom.clone());
        let opener = Box::new(move || {
            let backend = StoreBackend::new(Self::open_file(&dir)?, for_reopen.clone())?;
            Self::open_database(backend, &dir.join("meta.redb"))
        });
        Ok(Store { db: RwLock::new(Some(db)), opener, headroom })
    }

    /// Opens the database on the backend `open` returns (now, and again at
    /// every [`Store::reopen`]), with `headroom` as its reserve.
    pub fn open_on<B: redb::StorageBackend>(
        open: impl Fn() -> WeftResult<B> + Send + Sync + 'static,
        headroom: Arc<Headroom>,
    ) -> WeftResult<Store> {
        let opener = Box::new(move || Self::open_database(open()?, Path::new("(store on a test backend)")));
        let db = opener()?;
        Ok(Store { db: RwLock::new(Some(db)), opener, headroom })
    }

    fn open_file(dir: &Path) -> WeftResult<std::fs::File> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("meta.redb"))
            .map_err(|e| ErrorCode::from_io(&e))
    }

    fn open_database(backend: impl redb::StorageBackend, name: &Path) -> WeftResult<Database> {
        let db = Database::builder().create_with_backend(backend).map_err(storage_error)?;
        let txn = db.begin_write().map_err(storage_error)?;
        {
            let mut format = txn.open_table(FORMAT).map_err(storage_error)?;
            let found = format.get("store").map_err(storage_error)?.map(|v| v.value());
            match check_format(found) {
                Ok(true) => drop(format.insert("store", FORMAT_VERSION).map_err(storage_error)?),
                Ok(false) => {}
                Err(message) => {
                    tracing::error!("storage format: {}: {message}", name.display());
                    return Err(ErrorCode::VersionMismatch);
                }
            }
        }
        {
            txn.open_table(OBJECTS).map_err(storage_error)?;
            txn.open_table(DIRENTS).map_err(storage_error)?;
            txn.open_table(DIRSEQ).map_err(storage_error)?;
            txn.open_table(COUNTERS).map_err(storage_error)?;
            for table in [
                HandleTable::Pool,
                HandleTable::PoolUsed,
                HandleTable::Reserved,
                HandleTable::Reclaim,
                HandleTable::Growing,
            ] {
                txn.open_table(table.definition()).map_err(storage_error)?;
            }
        }
        txn.commit().map_err(storage_error)?;
        Ok(db)
    }

    /// Closes and opens the database again (committer only, with no write
    /// transaction live): what redb asks for after a failed write. It comes
    /// back at its last durable commit; the caller replays the log.
    pub fn reopen(&self) -> WeftResult<()> {
        let mut slot = self.db.write().expect("store lock");
        // The old database must be closed (its file locks released) first.
        drop(slot.take());
        *slot = Some((self.opener)()?);
        Ok(())
    }

    /// The store's headroom in the metadata reserve.
    pub fn headroom(&self) -> &Arc<Headroom> {
        &self.headroom
    }

    /// Starts a read transaction.
    pub fn read(&self) -> WeftResult<Reader> {
        let db = self.db.read().expect("store lock");
        let db = db.as_ref().ok_or(ErrorCode::Busy)?;
        Ok(Reader { txn: db.begin_read().map_err(storage_error)? })
    }

    /// Starts a write transaction (committer only).
    pub fn begin_write(&self) -> WeftResult<WriteTransaction> {
        let db = self.db.read().expect("store lock");
        db.as_ref().ok_or(ErrorCode::Busy)?.begin_write().map_err(storage_error)
    }
}

/// A consistent read-only view.
pub struct Reader {
    txn: ReadTransaction,
}

impl Reader {
    /// Loads an object; `Stale` if it does not exist.
    pub fn object(&self, handle: Handle) -> WeftResult<ObjectRecord> {
        let table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let value = table.get(handle.0).map_err(storage_error)?.ok_or(ErrorCode::Stale)?;
        ObjectRecord::decode(value.value())
    }

    /// Looks up a directory entry.
    pub fn dirent(&self, dir: Handle, name: &str) -> WeftResult<Option<(Handle, ObjectKind)>> {
        let table = self.txn.open_table(DIRENTS).map_err(storage_error)?;
        match table.get((dir.0, name)).map_err(storage_error)? {
            None => Ok(None),
            Some(value) => {
                let (_, target, tag) = value.value();
                Ok(Some((Handle(target), kind_from_tag(tag)?)))
            }
        }
    }

    /// Entries of `dir` with sequence > `cookie`, at most `max` of them, and
    /// whether the listing ended.
    pub fn dir_page(&self, dir: Handle, cookie: u64, max: u32) -> WeftResult<(Vec<DirEntry>, bool)> {
        let seq = self.txn.open_table(DIRSEQ).map_err(storage_error)?;
        let dirents = self.txn.open_table(DIRENTS).map_err(storage_error)?;
        let start = cookie.checked_add(1).ok_or(ErrorCode::Invalid)?;
        let mut entries = Vec::new();
        let mut range = seq.range((dir.0, start)..=(dir.0, u64::MAX)).map_err(storage_error)?;
        for item in range.by_ref() {
            let (key, name) = item.map_err(storage_error)?;
            let name = name.value().to_string();
            let (_, sequence) = key.value();
            let (_, target, tag) =
                dirents.get((dir.0, name.as_str())).map_err(storage_error)?.ok_or(ErrorCode::Io)?.value();
            entries.push(DirEntry { name, handle: Handle(target), kind: kind_from_tag(tag)?, sequence });
            if entries.len() as u32 >= max {
                break;
            }
        }
        let end = range.next().is_none();
        Ok((entries, end))
    }

    /// Number of stored objects.
    pub fn object_count(&self) -> WeftResult<u64> {
        let table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        table.len().map_err(storage_error)
    }

    /// A counter's value (0 if unset).
    pub fn counter(&self, name: &str) -> WeftResult<u64> {
        let table = self.txn.open_table(COUNTERS).map_err(storage_error)?;
        Ok(table.get(name).map_err(storage_error)?.map(|v| v.value()).unwrap_or(0))
    }

    /// Rows of a handle table with keys in `range`, at most `max`.
    pub fn handle_rows(
        &self,
        table: HandleTable,
        range: std::ops::Range<u64>,
        max: usize,
    ) -> WeftResult<Vec<(Handle, u32)>> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let mut rows = Vec::new();
        for item in table.range(range).map_err(storage_error)? {
            let (key, value) = item.map_err(storage_error)?;
            rows.push((Handle(key.value()), value.value()));
            if rows.len() >= max {
                break;
            }
        }
        Ok(rows)
    }

    /// Number of rows of a handle table with keys in `range`.
    pub fn handle_row_count(&self, table: HandleTable, range: std::ops::Range<u64>) -> WeftResult<u64> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let mut count = 0;
        for item in table.range(range).map_err(storage_error)? {
            item.map_err(storage_error)?;
            count += 1;
        }
        Ok(count)
    }

    /// The value of one row.
    pub fn handle_row(&self, table: HandleTable, handle: Handle) -> WeftResult<Option<u32>> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        Ok(table.get(handle.0).map_err(storage_error)?.map(|v| v.value()))
    }

    /// The values of the rows of `handles`, in order (one table open for all).
    pub fn handle_rows_of(&self, table: HandleTable, handles: &[Handle]) -> WeftResult<Vec<Option<u32>>> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        handles.iter().map(|h| Ok(table.get(h.0).map_err(storage_error)?.map(|v| v.value()))).collect()
    }

    /// Object records with handles above `after` (fsck), at most `max`.
    pub fn objects_after(&self, after: u64, max: usize) -> WeftResult<Vec<(Handle, ObjectRecord)>> {
        let table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let mut out = Vec::new();
        let Some(start) = after.checked_add(1) else { return Ok(out) };
        for item in table.range(start..).map_err(storage_error)? {
            let (key, value) = item.map_err(storage_error)?;
            out.push((Handle(key.value()), ObjectRecord::decode(value.value())?));
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
    }
}

/// Write helpers used inside the committer's transaction. Every change is
/// also recorded as a [`Mutation`] for the write-ahead log, and its prior
/// state as an [`Undo`] step, so one failed operation of a group-commit
/// batch can be taken back ([`Writer::rollback_to`]) without touching the
/// others (redb has no savepoints inside a dirty transaction).
pub struct Writer<'t> {
    txn: &'t WriteTransaction,
    log: RefCell<Vec<Mutation>>,
    undo: RefCell<Vec<Undo>>,
}

/// How to restore one row to what it was before a change.
enum Undo {
    /// An object row: its previous bytes, or absent.
    Object(u64, Option<Vec<u8>>),
    /// A directory entry row: its previous value, or absent.
    Dirent(u64, String, Option<(u64, u64, u8)>),
    /// A readdir-order row: its previous name, or absent.
    DirSeq(u64, u64, Option<String>),
    /// A handle-table row: its previous value, or absent.
    HandleRow(HandleTable, u64, Option<u32>),
}

/// A point in a [`Writer`]'s history to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct WriterMark {
    log: usize,
    undo: usize,
}

impl<'t> Writer<'t> {
    /// Wraps the committer's transaction.
    pub fn new(txn: &'t WriteTransaction) -> Writer<'t> {
        Writer { txn, log: RefCell::new(Vec::new()), undo: RefCell::new(Vec::new()) }
    }

    /// The current point, to roll back to if the next operation fails.
    pub fn mark(&self) -> WriterMark {
        WriterMark { log: self.log.borrow().len(), undo: self.undo.borrow().len() }
    }

    /// Restores every row changed since `mark` and forgets those changes
    /// (their mutations leave the log). Counters are not rolled back: they
    /// hold object-id reservations, which only grow, and the in-memory
    /// allocator may already hand out ids under a new reservation.
    pub fn rollback_to(&self, mark: WriterMark) -> WeftResult<()> {
        let steps: Vec<Undo> = self.undo.borrow_mut().drain(mark.undo..).collect();
        for step in steps.into_iter().rev() {
            match step {
                Undo::Object(handle, old) => {
                    let mut table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
                    match old {
                        Some(bytes) => drop(table.insert(handle, bytes.as_slice()).map_err(storage_error)?),
                        None => drop(table.remove(handle).map_err(storage_error)?),
                    }
                }
                Undo::Dirent(dir, name, old) => {
                    let mut table = self.txn.open_table(DIRENTS).map_err(storage_error)?;
                    match old {
                        Some(value) => drop(table.insert((dir, name.as_str()), value).map_err(storage_error)?),
                        None => drop(table.remove((dir, name.as_str())).map_err(storage_error)?),
                    }
                }
                Undo::DirSeq(dir, sequence, old) => {
                    let mut table = self.txn.open_table(DIRSEQ).map_err(storage_error)?;
                    match old {
                        Some(name) => drop(table.insert((dir, sequence), name.as_str()).map_err(storage_error)?),
                        None => drop(table.remove((dir, sequence)).map_err(storage_error)?),
                    }
                }
                Undo::HandleRow(which, handle, old) => {
                    let mut table = self.txn.open_table(which.definition()).map_err(storage_error)?;
                    match old {
                        Some(value) => drop(table.insert(handle, value).map_err(storage_error)?),
                        None => drop(table.remove(handle).map_err(storage_error)?),
                    }
                }
            }
        }
        let mut log = self.log.borrow_mut();
        // Counter mutations stay in the log (see above); the rest go.
        let kept: Vec<Mutation> = log.drain(mark.log..).filter(|m| matches!(m, Mutation::SetCounter(..))).collect();
        log.extend(kept);
        Ok(())
    }

    fn remember(&self, step: Undo) {
        self.undo.borrow_mut().push(step);
    }

    /// Whether any change has been made (and not rolled back).
    pub fn changed(&self) -> bool {
        !self.log.borrow().is_empty()
    }

    /// The changes made so far, in order.
    pub fn take_mutations(&self) -> Vec<Mutation> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    fn record(&self, mutation: Mutation) {
        self.log.borrow_mut().push(mutation);
    }

    /// Re-applies a logged change (write-ahead log replay).
    pub fn apply(&self, mutation: Mutation) -> WeftResult<()> {
        match mutation {
            Mutation::PutObject(handle, bytes) => {
                ObjectRecord::decode(&bytes)?;
                let mut table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
                table.insert(handle, bytes.as_slice()).map_err(storage_error)?;
            }
            Mutation::DeleteObject(handle) => {
                let mut table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
                table.remove(handle).map_err(storage_error)?;
            }
            Mutation::InsertDirent { dir, name, sequence, target, kind } => {
                kind_from_tag(kind)?;
                self.insert_dirent(Handle(dir), &name, sequence, Handle(target), kind_from_tag(kind)?)?;
            }
            Mutation::DeleteDirent { dir, name, sequence } => self.delete_dirent(Handle(dir), &name, sequence)?,
            Mutation::SetCounter(name, value) => self.set_counter(&name, value)?,
            Mutation::HandleRow { table, handle, value } => {
                let table = HandleTable::from_tag(table)?;
                match value {
                    Some(value) => self.put_handle_row(table, Handle(handle), value)?,
                    None => self.delete_handle_row(table, Handle(handle))?,
                }
            }
        }
        self.log.borrow_mut().clear();
        self.undo.borrow_mut().clear();
        Ok(())
    }

    /// Loads an object; `Stale` if absent.
    pub fn object(&self, handle: Handle) -> WeftResult<ObjectRecord> {
        let table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let value = table.get(handle.0).map_err(storage_error)?.ok_or(ErrorCode::Stale)?;
        ObjectRecord::decode(value.value())
    }

    /// Whether an object exists.
    pub fn exists(&self, handle: Handle) -> WeftResult<bool> {
        let table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let found = table.get(handle.0).map_err(storage_error)?.is_some();
        Ok(found)
    }

    /// Stores an object.
    pub fn put_object(&self, handle: Handle, record: &ObjectRecord) -> WeftResult<()> {
        let bytes = record.encode();
        let mut table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let old = table.insert(handle.0, bytes.as_slice()).map_err(storage_error)?.map(|v| v.value().to_vec());
        self.remember(Undo::Object(handle.0, old));
        self.record(Mutation::PutObject(handle.0, bytes));
        Ok(())
    }

    /// Deletes an object.
    pub fn delete_object(&self, handle: Handle) -> WeftResult<()> {
        let mut table = self.txn.open_table(OBJECTS).map_err(storage_error)?;
        let old = table.remove(handle.0).map_err(storage_error)?.map(|v| v.value().to_vec());
        self.remember(Undo::Object(handle.0, old));
        self.record(Mutation::DeleteObject(handle.0));
        Ok(())
    }

    /// Looks up a directory entry.
    pub fn dirent(&self, dir: Handle, name: &str) -> WeftResult<Option<(u64, Handle, ObjectKind)>> {
        let table = self.txn.open_table(DIRENTS).map_err(storage_error)?;
        let found = table.get((dir.0, name)).map_err(storage_error)?.map(|v| v.value());
        match found {
            None => Ok(None),
            Some((sequence, target, tag)) => Ok(Some((sequence, Handle(target), kind_from_tag(tag)?))),
        }
    }

    /// Inserts an entry with sequence number `sequence` (caller updated the directory record).
    pub fn insert_dirent(
        &self,
        dir: Handle,
        name: &str,
        sequence: u64,
        target: Handle,
        kind: ObjectKind,
    ) -> WeftResult<()> {
        let mut dirents = self.txn.open_table(DIRENTS).map_err(storage_error)?;
        let old = dirents
            .insert((dir.0, name), (sequence, target.0, kind_tag(kind)))
            .map_err(storage_error)?
            .map(|v| v.value());
        self.remember(Undo::Dirent(dir.0, name.to_string(), old));
        let mut seq = self.txn.open_table(DIRSEQ).map_err(storage_error)?;
        let old = seq.insert((dir.0, sequence), name).map_err(storage_error)?.map(|v| v.value().to_string());
        self.remember(Undo::DirSeq(dir.0, sequence, old));
        let kind = kind_tag(kind);
        self.record(Mutation::InsertDirent { dir: dir.0, name: name.to_string(), sequence, target: target.0, kind });
        Ok(())
    }

    /// Removes an entry known to exist with `sequence`.
    pub fn delete_dirent(&self, dir: Handle, name: &str, sequence: u64) -> WeftResult<()> {
        let mut dirents = self.txn.open_table(DIRENTS).map_err(storage_error)?;
        let old = dirents.remove((dir.0, name)).map_err(storage_error)?.map(|v| v.value());
        self.remember(Undo::Dirent(dir.0, name.to_string(), old));
        let mut seq = self.txn.open_table(DIRSEQ).map_err(storage_error)?;
        let old = seq.remove((dir.0, sequence)).map_err(storage_error)?.map(|v| v.value().to_string());
        self.remember(Undo::DirSeq(dir.0, sequence, old));
        self.record(Mutation::DeleteDirent { dir: dir.0, name: name.to_string(), sequence });
        Ok(())
    }

    /// A counter's value (0 if unset).
    pub fn counter(&self, name: &str) -> WeftResult<u64> {
        let table = self.txn.open_table(COUNTERS).map_err(storage_error)?;
        let value = table.get(name).map_err(storage_error)?.map(|v| v.value()).unwrap_or(0);
        Ok(value)
    }

    /// Sets a counter.
    pub fn set_counter(&self, name: &str, value: u64) -> WeftResult<()> {
        let mut table = self.txn.open_table(COUNTERS).map_err(storage_error)?;
        table.insert(name, value).map_err(storage_error)?;
        self.record(Mutation::SetCounter(name.to_string(), value));
        Ok(())
    }

    /// The value of one row of a handle table.
    pub fn handle_row(&self, table: HandleTable, handle: Handle) -> WeftResult<Option<u32>> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let value = table.get(handle.0).map_err(storage_error)?.map(|v| v.value());
        Ok(value)
    }

    /// The first row of a handle table with a key in `range`.
    pub fn first_handle_row(
        &self,
        table: HandleTable,
        range: std::ops::Range<u64>,
    ) -> WeftResult<Option<(Handle, u32)>> {
        let table = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let mut rows = table.range(range).map_err(storage_error)?;
        let first = match rows.next() {
            None => None,
            Some(item) => {
                let (key, value) = item.map_err(storage_error)?;
                Some((Handle(key.value()), value.value()))
            }
        };
        Ok(first)
    }

    /// Inserts or replaces a row of a handle table.
    pub fn put_handle_row(&self, table: HandleTable, handle: Handle, value: u32) -> WeftResult<()> {
        let mut rows = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let old = rows.insert(handle.0, value).map_err(storage_error)?.map(|v| v.value());
        self.remember(Undo::HandleRow(table, handle.0, old));
        self.record(Mutation::HandleRow { table: table.tag(), handle: handle.0, value: Some(value) });
        Ok(())
    }

    /// Deletes a row of a handle table (absent is fine).
    pub fn delete_handle_row(&self, table: HandleTable, handle: Handle) -> WeftResult<()> {
        let mut rows = self.txn.open_table(table.definition()).map_err(storage_error)?;
        let old = rows.remove(handle.0).map_err(storage_error)?.map(|v| v.value());
        self.remember(Undo::HandleRow(table, handle.0, old));
        self.record(Mutation::HandleRow { table: table.tag(), handle: handle.0, value: None });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mode: u32) -> ObjectRecord {
        ObjectRecord::new(ObjectKind::Metafile, mode, 0, 0, 1)
    }

    #[test]
    fn records_without_trailing_fields_decode_and_kind_tags_round_trip() {
        let mut device = ObjectRecord::new(ObjectKind::CharDevice, 0o600, 0, 0, 1);
        device.rdev = 0x0a_c8;
        assert_eq!(ObjectRecord::decode(&device.encode()).unwrap(), device);
        // Written before `rdev` (its one byte, 0, missing), and before `tracking` too.
        let plain = record(0o644);
        let full = plain.encode();
        assert_eq!(*full.last().unwrap(), 0);
        assert_eq!(ObjectRecord::decode(&full[..full.len() - 1]).unwrap(), plain);
        assert_eq!(ObjectRecord::decode(&full[..full.len() - 2]).unwrap(), plain);
        for kind in [
            ObjectKind::Metafile,
            ObjectKind::Datafile,
            ObjectKind::Directory,
            ObjectKind::Symlink,
            ObjectKind::Fifo,
            ObjectKind::Socket,
            ObjectKind::BlockDevice,
            ObjectKind::CharDevice,
        ] {
            assert_eq!(kind_from_tag(kind_tag(kind)).unwrap(), kind);
        }
    }

    #[test]
    fn rollback_restores_every_row_a_failed_operation_touched() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        let (a, b, d) = (Handle::new(0, 10).unwrap(), Handle::new(0, 11).unwrap(), Handle::new(0, 12).unwrap());
        let txn = store.begin_write().unwrap();
        {
            let w = Writer::new(&txn);
            // An earlier, successful operation of the batch.
            w.put_object(a, &record(0o600)).unwrap();
            w.insert_dirent(d, "kept", 1, a, ObjectKind::Metafile).unwrap();
            w.put_handle_row(HandleTable::Reserved, a, 3).unwrap();
            let mark = w.mark();
            // The failing one: overwrites, inserts, deletes, then gives up.
            w.put_object(a, &record(0o644)).unwrap();
            w.put_object(b, &record(0o600)).unwrap();
            w.insert_dirent(d, "gone", 2, b, ObjectKind::Metafile).unwrap();
            w.delete_dirent(d, "kept", 1).unwrap();
            w.put_handle_row(HandleTable::Reserved, a, 7).unwrap();
            w.delete_handle_row(HandleTable::Reserved, a).unwrap();
            w.set_counter("object_ids_reserved/0", 4096).unwrap();
            w.rollback_to(mark).unwrap();
            assert_eq!(w.object(a).unwrap().mode, 0o600);
            assert!(!w.exists(b).unwrap());
            assert_eq!(w.dirent(d, "kept").unwrap(), Some((1, a, ObjectKind::Metafile)));
            assert_eq!(w.dirent(d, "gone").unwrap(), None);
            assert_eq!(w.handle_row(HandleTable::Reserved, a).unwrap(), Some(3));
            // Id reservations only grow: the counter and its log entry stay.
            assert_eq!(w.counter("object_ids_reserved/0").unwrap(), 4096);
            let log = w.take_mutations();
            assert_eq!(log.len(), 4, "{log:?}");
            assert!(matches!(log[3], Mutation::SetCounter(..)));
        }
        txn.commit().unwrap();
        let r = store.read().unwrap();
        assert_eq!(r.dir_page(d, 0, 10).unwrap().0.len(), 1, "readdir order rows restored too");
    }

    fn set_format_row(dir: &Path, value: Option<u32>) {
        let db = Database::open(dir.join("meta.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(FORMAT).unwrap();
            match value {
                Some(value) => drop(table.insert("store", value).unwrap()),
                None => drop(table.remove("store").unwrap()),
            }
        }
        txn.commit().unwrap();
    }

    fn format_row(store: &Store) -> Option<u32> {
        let db = store.db.read().unwrap();
        let txn = db.as_ref().unwrap().begin_read().unwrap();
        let table = txn.open_table(FORMAT).unwrap();
        let value = table.get("store").unwrap().map(|v| v.value());
        value
    }

    #[test]
    fn a_store_of_another_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 0).unwrap();
        assert_eq!(format_row(&store), Some(FORMAT_VERSION), "a new store records its version");
        drop(store);
        set_format_row(dir.path(), Some(FORMAT_VERSION + 1));
        assert_eq!(Store::open(dir.path(), 0).err(), Some(ErrorCode::VersionMismatch));
        let message = check_format(Some(FORMAT_VERSION + 1)).unwrap_err();
        assert!(
            message.contains("store format version 2 is not known to this build (it reads version 1)"),
            "{message}"
        );
        // A store from before versions were recorded is version 1 and gets its row.
        set_format_row(dir.path(), None);
        let store = Store::open(dir.path(), 0).unwrap();
        assert_eq!(format_row(&store), Some(FORMAT_VERSION));
    }
}
