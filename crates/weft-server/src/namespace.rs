//! Namespace changes, each applied inside the committer's transaction.
//!
//! Every function checks all its preconditions first and only then writes,
//! so an error leaves the batch's transaction as it was. They are pure
//! functions of the store and their arguments (plus the clock value passed
//! in), which keeps them testable without a network.

use weft_proto::message::{
    AttrChanges, Credentials, FileLayout, NewObject, ObjectKind, Reply, ReplyResult, TimeNs, TimeSet,
};
use weft_proto::{limits, message, ErrorCode, Handle, WeftResult};

use crate::committer::IdAllocator;
use crate::perm::{self, EXEC, WRITE};
use crate::store::{ObjectRecord, Writer};

/// Loads a directory that a request names as a parent: a missing one is
/// `NoEntry` (it was removed), a non-directory `NotDir`.
pub(crate) fn load_dir(w: &Writer<'_>, handle: Handle) -> WeftResult<ObjectRecord> {
    let record = w.object(handle).map_err(|e| if e == ErrorCode::Stale { ErrorCode::NoEntry } else { e })?;
    if record.kind != ObjectKind::Directory {
        return Err(ErrorCode::NotDir);
    }
    Ok(record)
}

/// The directory `parent`, for a change of its entry `name` by `cred`:
/// the name valid, the directory there, and `cred` allowed to change it.
fn dir_to_change(w: &Writer<'_>, cred: &Credentials, parent: Handle, name: &str) -> WeftResult<ObjectRecord> {
    message::validate_name(name)?;
    let dir = load_dir(w, parent)?;
    perm::check(cred, &dir, WRITE | EXEC)?;
    Ok(dir)
}

/// Creates the root directory if this server holds target 0 and it is missing.
pub fn ensure_root(w: &Writer<'_>, now: TimeNs) -> ReplyResult {
    if !w.exists(Handle::ROOT)? {
        let mut root = ObjectRecord::new(ObjectKind::Directory, 0o755, 0, 0, now);
        root.parent = Some(Handle::ROOT);
        w.put_object(Handle::ROOT, &root)?;
    }
    Ok(Reply::Done)
}

/// Fills the kind-specific fields of a new object's record.
type FillRecord = Box<dyn FnOnce(&mut ObjectRecord)>;

/// Creates an unnamed object on `target_id`.
pub fn create_object(
    w: &Writer<'_>,
    ids: &mut IdAllocator,
    cred: &Credentials,
    target_id: u16,
    mode: u32,
    object: NewObject,
    now: TimeNs,
) -> ReplyResult {
    let (kind, fill): (ObjectKind, FillRecord) = match object {
        NewObject::Metafile => (ObjectKind::Metafile, Box::new(|_| {})),
        NewObject::Datafile => (ObjectKind::Datafile, Box::new(|_| {})),
        NewObject::Directory { default_distribution, parent } => {
            if let Some(d) = default_distribution {
                d.validate()?;
            }
            (
                ObjectKind::Directory,
                Box::new(move |r: &mut ObjectRecord| {
                    r.default_distribution = default_distribution;
                    r.parent = Some(parent);
                }),
            )
        }
        NewObject::Symlink { target } => {
            if target.is_empty() || target.len() > limits::SYMLINK_BYTES_MAX || target.contains('\0') {
                return Err(if target.len() > limits::SYMLINK_BYTES_MAX {
                    ErrorCode::NameTooLong
                } else {
                    ErrorCode::Invalid
                });
            }
            (ObjectKind::Symlink, Box::new(move |r: &mut ObjectRecord| r.symlink_target = Some(target)))
        }
        NewObject::Special { kind, rdev } => {
            if !kind.is_special() {
                return Err(ErrorCode::Invalid);
            }
            let is_device = matches!(kind, ObjectKind::BlockDevice | ObjectKind::CharDevice);
            (kind, Box::new(move |r: &mut ObjectRecord| r.rdev = if is_device { rdev } else { 0 }))
        }
    };
    let mode = if kind == ObjectKind::Symlink { 0o777 } else { mode };
    let mut record = ObjectRecord::new(kind, mode, cred.uid, cred.gid, now);
    fill(&mut record);
    let handle = ids.allocate(w, target_id)?;
    w.put_object(handle, &record)?;
    Ok(Reply::Handle(handle))
}

/// Stores a metafile's layout (once).
pub fn set_layout(w: &Writer<'_>, handle: Handle, layout: FileLayout) -> ReplyResult {
    let mut record = w.object(handle)?;
    if record.kind != ObjectKind::Metafile {
        return Err(ErrorCode::Invalid);
    }
    layout.distribution.validate()?;
    if layout.datafiles.len() != layout.distribution.stripe_count as usize || layout.datafiles.contains(&Handle::NULL) {
        return Err(ErrorCode::Invalid);
    }
    record.layout = Some(layout);
    // Settled stats belong to the old layout; the new one's are gathered.
    record.tracking = None;
    w.put_object(handle, &record)?;
    Ok(Reply::Done)
}

fn resolve_time(time: TimeSet, now: TimeNs) -> TimeNs {
    match time {
        TimeSet::Now => now,
        TimeSet::At(t) => t,
    }
}

/// The setuid and setgid bits.
const SUID_SGID: u32 = 0o6000;

/// Checks who may apply `changes` to `record`.
fn check_setattr(cred: &Credentials, record: &ObjectRecord, changes: &AttrChanges) -> WeftResult<()> {
    // `parent` is bookkeeping for rename's loop check, set by whoever may rename.
    // A mode change that only clears setuid/setgid is the kernel's kill-priv
    // on a write or truncate: anyone who may write the file may ask for it.
    let kills_privileges_only = changes.mode.is_some_and(|m| {
        let m = m & 0o7777;
        m != record.mode && m & !record.mode == 0 && m | SUID_SGID == record.mode | SUID_SGID
    });
    if kills_privileges_only && perm::check_owner(cred, record).is_err() {
        perm::check(cred, record, WRITE)?;
    } else if changes.mode.is_some() || changes.default_distribution.is_some() {
        perm::check_owner(cred, record)?;
    }
    if let Some(uid) = changes.uid {
        if cred.uid != 0 && uid != record.uid {
            return Err(ErrorCode::Perm);
        }
    }
    if let Some(gid) = changes.gid {
        if cred.uid != 0 && (cred.uid != record.uid || !cred.in_group(gid)) {
            return Err(ErrorCode::Perm);
        }
    }
    let explicit_time = matches!(changes.atime, Some(TimeSet::At(_))) || matches!(changes.mtime, Some(TimeSet::At(_)));
    let any_time = changes.atime.is_some() || changes.mtime.is_some();
    if explicit_time {
        perm::check_owner(cred, record)?;
    } else if any_time && perm::check_owner(cred, record).is_err() {
        perm::check(cred, record, WRITE)?;
    }
    Ok(())
}

/// Changes attributes; returns the new attributes.
pub fn set_attr(w: &Writer<'_>, cred: &Credentials, handle: Handle, changes: AttrChanges, now: TimeNs) -> ReplyResult {
    let mut record = w.object(handle)?;
    check_setattr(cred, &record, &changes)?;
    if let Some(d) = changes.default_distribution {
        if record.kind != ObjectKind::Directory {
            return Err(ErrorCode::NotDir);
        }
        d.validate()?;
        record.default_distribution = Some(d);
    }
    if let Some(mode) = changes.mode {
        record.mode = mode & 0o7777;
    }
    if let Some(uid) = changes.uid {
        record.uid = uid;
    }
    if let Some(gid) = changes.gid {
        record.gid = gid;
    }
    // chown clears setuid on files, and setgid where it means "run as the
    // group" (group-execute set), as Linux does; directories keep both.
    if (changes.uid.is_some() || changes.gid.is_some()) && record.kind != ObjectKind::Directory {
        record.mode &= !0o4000;
        if record.mode & 0o010 != 0 {
            record.mode &= !0o2000;
        }
    }
    if let Some(t) = changes.atime {
        record.atime_ns = resolve_time(t, now);
    }
    if let Some(t) = changes.mtime {
        record.mtime_ns = resolve_time(t, now);
    }
    if let Some(parent) = changes.parent {
        record.parent = Some(parent);
    }
    record.ctime_ns = now;
    w.put_object(handle, &record)?;
    Ok(Reply::Attributes(record.attributes(handle, 0)))
}

/// Adds `name → target` to directory `parent`.
pub fn create_dirent(
    w: &Writer<'_>,
    cred: &Credentials,
    parent: Handle,
    name: &str,
    target: Handle,
    kind: ObjectKind,
    now: TimeNs,
) -> ReplyResult {
    let mut dir = dir_to_change(w, cred, parent, name)?;
    if w.dirent(parent, name)?.is_some() {
        return Err(ErrorCode::Exists);
    }
    insert_entry(w, parent, &mut dir, name, target, kind, now)?;
    Ok(Reply::Done)
}

pub(crate) fn insert_entry(
    w: &Writer<'_>,
    parent: Handle,
    dir: &mut ObjectRecord,
    name: &str,
    target: Handle,
    kind: ObjectKind,
    now: TimeNs,
) -> WeftResult<()> {
    let sequence = dir.next_sequence;
    dir.next_sequence += 1;
    dir.entry_count += 1;
    dir.mtime_ns = now;
    dir.ctime_ns = now;
    w.insert_dirent(parent, name, sequence, target, kind)?;
    w.put_object(parent, dir)
}

fn check_expected_kind(kind: ObjectKind, expect_directory: Option<bool>) -> WeftResult<()> {
    match (expect_directory, kind == ObjectKind::Directory) {
        (Some(true), false) => Err(ErrorCode::NotDir),
        (Some(false), true) => Err(ErrorCode::IsDir),
        _ => Ok(()),
    }
}

/// Removes entry `name` from `parent`; returns what it named.
pub fn remove_dirent(
    w: &Writer<'_>,
    cred: &Credentials,
    parent: Handle,
    name: &str,
    expect_directory: Option<bool>,
    now: TimeNs,
) -> ReplyResult {
    let mut dir = dir_to_change(w, cred, parent, name)?;
    let (sequence, handle, kind) = w.dirent(parent, name)?.ok_or(ErrorCode::NoEntry)?;
    check_expected_kind(kind, expect_directory)?;
    w.delete_dirent(parent, name, sequence)?;
    dir.entry_count = dir.entry_count.saturating_sub(1);
    dir.mtime_ns = now;
    dir.ctime_ns = now;
    w.put_object(parent, &dir)?;
    Ok(Reply::Removed { handle, kind })
}

/// Points `name` in `parent` at `target`, adding or replacing; returns the replaced target.
pub fn replace_dirent(
    w: &Writer<'_>,
    cred: &Credentials,
    parent: Handle,
    name: &str,
    target: Handle,
    kind: ObjectKind,
    now: TimeNs,
) -> ReplyResult {
    let mut dir = dir_to_change(w, cred, parent, name)?;
    let existing = w.dirent(parent, name)?;
    if let Some((_, old, old_kind)) = existing {
        check_replace(kind, old_kind)?;
        if old == target {
            return Ok(Reply::Replaced(None));
        }
        if old_kind == ObjectKind::Directory && !directory_is_empty(w, old)? {
            return Err(ErrorCode::NotEmpty);
        }
    }
    if let Some((sequence, _, _)) = existing {
        w.delete_dirent(parent, name, sequence)?;
        dir.entry_count -= 1;
    }
    insert_entry(w, parent, &mut dir, name, target, kind, now)?;
    Ok(Reply::Replaced(existing.map(|(_, h, k)| (h, k))))
}

/// POSIX rename rules for replacing an entry of kind `old` with one of kind `new`.
fn check_replace(new: ObjectKind, old: ObjectKind) -> WeftResult<()> {
    match (new == ObjectKind::Directory, old == ObjectKind::Directory) {
        (true, false) => Err(ErrorCode::NotDir),
        (false, true) => Err(ErrorCode::IsDir),
        _ => Ok(()),
    }
}

/// Emptiness of a directory stored here; one stored elsewhere counts as
/// empty here (the client checked it, see ARCHITECTURE.md on rename).
fn directory_is_empty(w: &Writer<'_>, dir: Handle) -> WeftResult<bool> {
    match w.object(dir) {
        Ok(record) => Ok(record.entry_count == 0),
        Err(ErrorCode::Stale) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Removes an object. A directory must be empty. The caller deletes a
/// datafile's bytestream after the commit.
pub fn remove_object(w: &Writer<'_>, handle: Handle) -> ReplyResult {
    let record = w.object(handle)?;
    if record.kind == ObjectKind::Directory {
        if handle == Handle::ROOT {
            return Err(ErrorCode::Busy);
        }
        if record.entry_count > 0 {
            return Err(ErrorCode::NotEmpty);
        }
    }
    w.delete_object(handle)?;
    Ok(Reply::Done)
}

/// Is `candidate` equal to `dir` or below it, as far as this server's
/// parent pointers tell? (Pointers that leave this server stop the walk.)
fn is_within(w: &Writer<'_>, candidate: Handle, dir: Handle) -> WeftResult<bool> {
    let parent_of = |handle| {
        std::future::ready(match w.object(handle) {
            Ok(ObjectRecord { parent, .. }) => Ok(parent),
            Err(ErrorCode::Stale) => Ok(None),
            Err(e) => Err(e),
        })
    };
    // Every parent is answered at once (a ready future), so this never waits.
    futures::executor::block_on(weft_proto::ancestry::is_within(candidate, dir, parent_of))
}

/// Renames when both parents live on this server.
#[allow(clippy::too_many_arguments)]
pub fn rename(
    w: &Writer<'_>,
    cred: &Credentials,
    old_parent: Handle,
    old_name: &str,
    new_parent: Handle,
    new_name: &str,
    now: TimeNs,
) -> ReplyResult {
    message::validate_name(old_name)?;
    message::validate_name(new_name)?;
    let mut source_dir = load_dir(w, old_parent)?;
    perm::check(cred, &source_dir, WRITE | EXEC)?;
    let target_dir = load_dir(w, new_parent)?;
    perm::check(cred, &target_dir, WRITE | EXEC)?;
    let (source_sequence, handle, kind) = w.dirent(old_parent, old_name)?.ok_or(ErrorCode::NoEntry)?;
    if old_parent == new_parent && old_name == new_name {
        return Ok(Reply::Replaced(None));
    }
    if kind == ObjectKind::Directory && is_within(w, new_parent, handle)? {
        return Err(ErrorCode::Invalid);
    }
    let existing = w.dirent(new_parent, new_name)?;
    if let Some((_, old, old_kind)) = existing {
        check_replace(kind, old_kind)?;
        if old == handle {
            return Ok(Reply::Replaced(None));
        }
        if old_kind == ObjectKind::Directory && !directory_is_empty(w, old)? {
            return Err(ErrorCode::NotEmpty);
        }
    }
    // All checks passed: apply.
    w.delete_dirent(old_parent, old_name, source_sequence)?;
    source_dir.entry_count -= 1;
    source_dir.mtime_ns = now;
    source_dir.ctime_ns = now;
    w.put_object(old_parent, &source_dir)?;
    let mut target_dir = load_dir(w, new_parent)?;
    if let Some((sequence, _, _)) = existing {
        w.delete_dirent(new_parent, new_name, sequence)?;
        target_dir.entry_count -= 1;
    }
    insert_entry(w, new_parent, &mut target_dir, new_name, handle, kind, now)?;
    if kind == ObjectKind::Directory && old_parent != new_parent {
        if let Ok(mut moved) = w.object(handle) {
            moved.parent = Some(new_parent);
            moved.ctime_ns = now;
            w.put_object(handle, &moved)?;
        }
    }
    Ok(Reply::Replaced(existing.map(|(_, h, k)| (h, k))))
}
