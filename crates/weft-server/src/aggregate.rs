//! Aggregate namespace operations: one client request each, whatever the
//! stripe width. The server holding the parent directory does the work:
//! local checks and writes in one committer transaction, and — only where
//! an object lives on another server — peer calls made with nothing held.
//!
//! - create: name check, metafile, layout and entry in one transaction;
//!   datafiles come from the precreate pools ([`crate::pools`]), or are
//!   allocated directly when this server is also a data server. A data
//!   server that is unreachable, or whose pool is empty, is skipped: the
//!   file gets fewer stripes than asked and its layout says so; only when
//!   no data server can give a datafile does create fail (`NoSpace`).
//! - stat: the metafile's attributes plus its datafiles' stats: settled
//!   ones from the record, growing ones asked by one `SettleSizes` tree
//!   collective rooted here ([`crate::growth`]; files without settled
//!   stats gather all by `DatafileSizes`); `StatEntry` does the lookup in
//!   the same request (stat by parent and name).
//! - remove: entry, metafile and reclaim rows in one transaction; the
//!   datafiles go later through the reclaim queue ([`crate::reclaim`]).
//! - mkdir: one transaction when the new directory is placed here; else a
//!   peer `CreateObject` on the chosen server, then the entry (a crash in
//!   between leaves an unnamed directory, which fsck reports).
//! - rmdir: one transaction when the directory is stored here (emptiness
//!   checked against every create in it, since those commit here too);
//!   else a peer `RemoveObject` (atomic emptiness check and removal on the
//!   directory's server, after which creates in it fail), then the entry.
//! - rename: one transaction when both parents are here; else the
//!   client-driven sequence run by the server (replace at the destination,
//!   remove at the source, move the parent pointer). A directory is never
//!   moved under itself: the destination's parent pointers are walked to
//!   the root first (across servers with peer `GetAttr`).
//! - statfs: every server's status, gathered by one tree collective.
//!
//! These are methods of [`Cluster`] (they talk to other servers); the
//! records they read and commit are [`crate::metadata::Metadata`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::Rng;
use weft_proto::message::{
    self, AttrChanges, CollectiveOp, CollectivePart, Credentials, DatafileStat, FileLayout, NewObject, ObjectKind,
    Reply, ReplyResult, Request, ServerStatus, SettleStat,
};
use weft_proto::{Distribution, ErrorCode, Handle, WeftResult};

use crate::cluster::Cluster;
use crate::committer::IdAllocator;
use crate::growth::Tracked;
use crate::metadata::now_ns;
use crate::namespace::{self, insert_entry, load_dir};
use crate::perm::{self, EXEC, WRITE};
use crate::store::{ObjectRecord, SizeTracking, Writer};

/// Arguments of an aggregate create.
pub struct CreateArgs {
    /// Caller.
    pub cred: Credentials,
    /// Directory.
    pub parent: Handle,
    /// Name.
    pub name: String,
    /// Permission bits.
    pub mode: u32,
    /// Strip size override.
    pub strip_bytes: Option<u64>,
    /// Stripe count override.
    pub stripe_count: Option<u32>,
    /// Fail if the name exists.
    pub exclusive: bool,
}

impl Cluster {
    /// Data servers in the order a new file tries them: a random start
    /// (weighted by free space when the status table knows it), then
    /// round-robin; unreachable servers dropped.
    fn stripe_candidates(&self) -> Vec<u32> {
        let servers = self.here.config.data_servers();
        if servers.is_empty() {
            return servers;
        }
        let start = self.placement_index(&servers);
        (0..servers.len()).map(|i| servers[(start + i) % servers.len()]).filter(|s| !self.is_down(*s)).collect()
    }

    /// A random index into `servers`, weighted by their free space if known.
    pub fn placement_index(&self, servers: &[u32]) -> usize {
        let weights: Vec<u64> = servers.iter().map(|s| self.free_bytes_known(*s).unwrap_or(1).max(1)).collect();
        let total: u64 = weights.iter().sum();
        let mut pick = rand::rng().random_range(0..total.max(1));
        for (index, weight) in weights.iter().enumerate() {
            if pick < *weight {
                return index;
            }
            pick -= weight;
        }
        0
    }

    /// Aggregate create.
    pub async fn create_file(self: &Arc<Self>, args: CreateArgs) -> ReplyResult {
        self.here.local(args.parent)?;
        message::validate_name(&args.name)?;
        self.await_pools(&self.here.config.data_servers()).await;
        let candidates = self.stripe_candidates();
        let this = self.clone();
        let now = now_ns();
        self.metadata.commit(move |w, ids| this.create_file_txn(w, ids, &args, &candidates, now)).await
    }

    fn distribution_for(&self, dir: &ObjectRecord, args: &CreateArgs) -> WeftResult<Distribution> {
        let default = dir.default_distribution.unwrap_or(self.here.config.default_distribution());
        let data_servers = self.here.config.data_servers().len() as u32;
        let distribution = Distribution {
            strip_bytes: args.strip_bytes.unwrap_or(default.strip_bytes),
            stripe_count: args.stripe_count.unwrap_or(default.stripe_count).min(data_servers),
        };
        distribution.validate()?;
        Ok(distribution)
    }

    fn create_file_txn(
        &self,
        w: &Writer<'_>,
        ids: &mut IdAllocator,
        args: &CreateArgs,
        candidates: &[u32],
        now: i64,
    ) -> ReplyResult {
        let mut dir = load_dir(w, args.parent)?;
        // Finding an existing name needs search permission only (POSIX
        // asks for write permission on the directory only to create).
        perm::check(&args.cred, &dir, EXEC)?;
        if let Some((_, existing, kind)) = w.dirent(args.parent, &args.name)? {
            return match (args.exclusive, kind, w.object(existing)) {
                (false, ObjectKind::Metafile, Ok(record)) => Ok(Reply::Attributes(record.attributes(existing, 0))),
                _ => Err(ErrorCode::Exists),
            };
        }
        perm::check(&args.cred, &dir, WRITE | EXEC)?;
        let mut distribution = self.distribution_for(&dir, args)?;
        let own_target = self.here.config.primary_target(self.here.server_id).ok_or(ErrorCode::Invalid)?;
        let metafile = ids.allocate(w, own_target)?;
        let datafiles = self.take_datafiles(w, ids, candidates, distribution.stripe_count as usize, now)?;
        if datafiles.is_empty() {
            return Err(ErrorCode::NoSpace);
        }
        distribution.stripe_count = datafiles.len() as u32;
        let mut record = ObjectRecord::new(ObjectKind::Metafile, args.mode, args.cred.uid, args.cred.gid, now);
        record.tracking = Some(crate::growth::fresh_metafile(datafiles.len()));
        record.layout = Some(FileLayout { distribution, datafiles });
        w.put_object(metafile, &record)?;
        insert_entry(w, args.parent, &mut dir, &args.name, metafile, ObjectKind::Metafile, now)?;
        Ok(Reply::Attributes(record.attributes(metafile, 0)))
    }

    /// Up to `wanted` datafiles, one per server of `candidates` in order.
    fn take_datafiles(
        &self,
        w: &Writer<'_>,
        ids: &mut IdAllocator,
        candidates: &[u32],
        wanted: usize,
        now: i64,
    ) -> WeftResult<Vec<Handle>> {
        let mut datafiles = Vec::with_capacity(wanted);
        for server in candidates {
            if datafiles.len() == wanted {
                break;
            }
            let target = self.here.config.primary_target(*server).ok_or(ErrorCode::Invalid)?;
            if *server == self.here.server_id {
                let handle = ids.allocate(w, target)?;
                let mut record = ObjectRecord::new(ObjectKind::Datafile, 0o600, 0, 0, now);
                record.tracking = Some(SizeTracking::Datafile(self.here.server_id));
                w.put_object(handle, &record)?;
                datafiles.push(handle);
            } else if let Some(handle) = crate::pools::take(w, target, *server)? {
                datafiles.push(handle);
            }
        }
        Ok(datafiles)
    }

    /// Aggregate stat: attributes plus datafile stats, settled ones from
    /// the record and growing ones asked along the tree ([`crate::growth`]).
    pub async fn stat_file(self: &Arc<Self>, handle: Handle) -> ReplyResult {
        self.here.local(handle)?;
        let (attributes, tracked) = self.metadata.read(move |s, r| s.tracked_attributes(r, handle)).await?;
        self.stat_reply(attributes, tracked).await
    }

    async fn stat_reply(self: &Arc<Self>, attributes: message::Attributes, tracked: Tracked) -> ReplyResult {
        let datafiles = attributes.layout.as_ref().map(|l| l.datafiles.clone()).unwrap_or_default();
        let sizes = if datafiles.is_empty() {
            Vec::new()
        } else {
            self.datafile_stats_of(attributes.handle, &datafiles, tracked).await?
        };
        Ok(Reply::Stat { attributes, sizes })
    }

    /// Lookup and aggregate stat in one request: the entry's attributes
    /// (read in the same read transaction as the entry) and its datafile
    /// sizes, when the object is stored here; else the entry, for the
    /// client to continue from (a symlink to follow, an object elsewhere).
    pub async fn stat_entry(self: &Arc<Self>, cred: Credentials, parent: Handle, name: String) -> ReplyResult {
        self.here.local(parent)?;
        message::validate_name(&name)?;
        let found = self
            .metadata
            .read(move |s, r| {
                let dir = r.object(parent).map_err(|e| if e == ErrorCode::Stale { ErrorCode::NoEntry } else { e })?;
                if dir.kind != ObjectKind::Directory {
                    return Err(ErrorCode::NotDir);
                }
                perm::check(&cred, &dir, EXEC)?;
                let (handle, kind) = r.dirent(parent, &name)?.ok_or(ErrorCode::NoEntry)?;
                let here = s.here.is_local(handle);
                if kind == ObjectKind::Symlink || !here {
                    return Ok(Err(Reply::Entry { handle, kind }));
                }
                Ok(Ok(s.tracked_attributes(r, handle)?))
            })
            .await?;
        match found {
            Ok((attributes, tracked)) => self.stat_reply(attributes, tracked).await,
            Err(entry) => Ok(entry),
        }
    }

    /// Runs `operation` over `datafiles` as one tree collective rooted
    /// here: each server's handles with its part.
    pub(crate) async fn gather(
        self: &Arc<Self>,
        operation: CollectiveOp,
        datafiles: &[Handle],
    ) -> WeftResult<Vec<(Vec<Handle>, CollectivePart)>> {
        let mut by_server: BTreeMap<u32, Vec<Handle>> = BTreeMap::new();
        for handle in datafiles {
            by_server
                .entry(self.here.config.server_of_handle(*handle).ok_or(ErrorCode::Stale)?)
                .or_default()
                .push(*handle);
        }
        let groups = crate::tree::groups_rooted_at(self.here.server_id, by_server);
        let result = crate::tree::run(self, operation, groups.clone(), 0, 0).await?;
        groups.into_iter().zip(result.parts).map(|(group, (_, part))| Ok((group.handles, part?))).collect()
    }

    /// Every datafile's stat, asked of its server (files without settled stats).
    pub(crate) async fn gather_sizes(self: &Arc<Self>, datafiles: &[Handle]) -> WeftResult<Vec<DatafileStat>> {
        self.gather_each(CollectiveOp::DatafileSizes, datafiles, |part| match part {
            CollectivePart::Sizes(stats) => Some(stats),
            _ => None,
        })
        .await
    }

    /// One answer per datafile of a collective whose parts carry one result
    /// per handle (`answers` picks them out of a part), in `datafiles` order.
    async fn gather_each<T: Copy>(
        self: &Arc<Self>,
        operation: CollectiveOp,
        datafiles: &[Handle],
        answers: impl Fn(CollectivePart) -> Option<Vec<WeftResult<T>>>,
    ) -> WeftResult<Vec<T>> {
        let mut by_handle = BTreeMap::new();
        for (handles, part) in self.gather(operation, datafiles).await? {
            match answers(part) {
                Some(results) if results.len() == handles.len() => {
                    for (handle, result) in handles.into_iter().zip(results) {
                        by_handle.insert(handle, result?);
                    }
                }
                _ => return Err(ErrorCode::Protocol),
            }
        }
        datafiles.iter().map(|h| by_handle.get(h).copied().ok_or(ErrorCode::Protocol)).collect()
    }

    /// Aggregate unlink (`expect_directory` not `Some(true)`) or rmdir.
    pub async fn remove_entry(
        self: &Arc<Self>,
        cred: Credentials,
        parent: Handle,
        name: String,
        expect_directory: Option<bool>,
    ) -> ReplyResult {
        self.here.local(parent)?;
        message::validate_name(&name)?;
        let lookup_name = name.clone();
        let (target, kind) =
            self.metadata.read(move |_, r| r.dirent(parent, &lookup_name)?.ok_or(ErrorCode::NoEntry)).await?;
        if kind == ObjectKind::Directory && expect_directory != Some(false) {
            return self.remove_directory(cred, parent, name, target).await;
        }
        let this = self.clone();
        let now = now_ns();
        self.metadata
            .commit(move |w, _| {
                let removed = namespace::remove_dirent(w, &cred, parent, &name, expect_directory, now)?;
                if let Reply::Removed { handle, .. } = removed {
                    this.destroy_or_queue(w, handle)?;
                }
                Ok(Reply::Done)
            })
            .await?;
        self.reclaim_wake.notify_one();
        Ok(Reply::Done)
    }

    async fn remove_directory(
        self: &Arc<Self>,
        cred: Credentials,
        parent: Handle,
        name: String,
        dir: Handle,
    ) -> ReplyResult {
        let now = now_ns();
        let local = self.here.config.server_of_handle(dir) == Some(self.here.server_id);
        if !local {
            // Permission first, so a refused rmdir removes nothing.
            let check_cred = cred.clone();
            self.metadata
                .read(move |_, r| {
                    let record = r.object(parent)?;
                    perm::check(&check_cred, &record, WRITE | EXEC)
                })
                .await?;
            let server = self.here.config.server_of_handle(dir).ok_or(ErrorCode::Stale)?;
            match self.peers.call(server, Request::RemoveObject { handle: dir }).await {
                Ok(_) | Err(ErrorCode::Stale) => {}
                Err(code) => return Err(code),
            }
        }
        let this = self.clone();
        self.metadata
            .commit(move |w, _| {
                match w.dirent(parent, &name)? {
                    Some((_, handle, ObjectKind::Directory)) if handle == dir => {}
                    Some(_) | None => return Err(ErrorCode::NoEntry),
                }
                if local {
                    let record = w.object(dir)?;
                    if record.entry_count > 0 {
                        return Err(ErrorCode::NotEmpty);
                    }
                    perm::check(&cred, &load_dir(w, parent)?, WRITE | EXEC)?;
                    this.destroy_local(w, dir)?;
                }
                namespace::remove_dirent(w, &cred, parent, &name, Some(true), now)?;
                Ok(Reply::Done)
            })
            .await
    }

    /// Aggregate mkdir.
    pub async fn make_directory(
        self: &Arc<Self>,
        cred: Credentials,
        parent: Handle,
        name: String,
        mode: u32,
    ) -> ReplyResult {
        self.here.local(parent)?;
        message::validate_name(&name)?;
        let servers = self.here.config.metadata_servers();
        let reachable: Vec<u32> = servers.iter().copied().filter(|s| !self.is_down(*s)).collect();
        let chosen = reachable.get(self.placement_index(&reachable)).copied().unwrap_or(self.here.server_id);
        let now = now_ns();
        if chosen == self.here.server_id {
            return self.metadata.commit(move |w, ids| mkdir_txn(w, ids, &cred, parent, &name, mode, now)).await;
        }
        let check = (cred.clone(), name.clone());
        let default_distribution = self
            .metadata
            .read(move |_, r| {
                let record = r.object(parent).map_err(|_| ErrorCode::NoEntry)?;
                perm::check(&check.0, &record, WRITE | EXEC)?;
                match r.dirent(parent, &check.1)? {
                    Some(_) => Err(ErrorCode::Exists),
                    None => Ok(record.default_distribution),
                }
            })
            .await?;
        let target_id = self.here.config.primary_target(chosen).ok_or(ErrorCode::Invalid)?;
        let object = NewObject::Directory { default_distribution, parent };
        let request = Request::CreateObject { cred: cred.clone(), target_id, mode, object };
        let Reply::Handle(dir) = self.peers.call(chosen, request).await? else {
            return Err(ErrorCode::Protocol);
        };
        let entered = self
            .metadata
            .commit(move |w, _| namespace::create_dirent(w, &cred, parent, &name, dir, ObjectKind::Directory, now))
            .await;
        if let Err(code) = entered {
            // Lost a race for the name: the unnamed directory goes through the queue.
            let this = self.clone();
            let _ = self.metadata.commit(move |w, _| this.destroy_or_queue(w, dir).map(|_| Reply::Done)).await;
            self.reclaim_wake.notify_one();
            return Err(code);
        }
        Ok(Reply::Handle(dir))
    }

    /// Aggregate rename, at the source parent's server.
    pub async fn rename_entry(
        self: &Arc<Self>,
        cred: Credentials,
        old_parent: Handle,
        old_name: String,
        new_parent: Handle,
        new_name: String,
    ) -> ReplyResult {
        self.here.local(old_parent)?;
        message::validate_name(&old_name)?;
        message::validate_name(&new_name)?;
        let lookup_name = old_name.clone();
        let (source, kind) =
            self.metadata.read(move |_, r| r.dirent(old_parent, &lookup_name)?.ok_or(ErrorCode::NoEntry)).await?;
        if kind == ObjectKind::Directory && old_parent != new_parent && self.is_within(new_parent, source).await? {
            return Err(ErrorCode::Invalid);
        }
        if kind == ObjectKind::Directory {
            self.check_destination_empty(&cred, new_parent, &new_name, source).await?;
        }
        let now = now_ns();
        if self.here.config.server_of_handle(new_parent) == Some(self.here.server_id) {
            let this = self.clone();
            let rename_cred = cred.clone();
            self.metadata
                .commit(move |w, _| {
                    let replaced =
                        namespace::rename(w, &rename_cred, old_parent, &old_name, new_parent, &new_name, now)?;
                    if let Reply::Replaced(Some((old, _))) = replaced {
                        this.destroy_or_queue(w, old)?;
                    }
                    Ok(Reply::Done)
                })
                .await?;
            self.reclaim_wake.notify_one();
            // namespace::rename moved the parent pointer of a directory stored here.
            let elsewhere = self.here.config.server_of_handle(source) != Some(self.here.server_id);
            if kind == ObjectKind::Directory && old_parent != new_parent && elsewhere {
                self.set_remote_parent(cred, source, new_parent).await?;
            }
            return Ok(Reply::Done);
        }
        self.rename_across(cred, old_parent, old_name, new_parent, new_name, source, kind).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn rename_across(
        self: &Arc<Self>,
        cred: Credentials,
        old_parent: Handle,
        old_name: String,
        new_parent: Handle,
        new_name: String,
        source: Handle,
        kind: ObjectKind,
    ) -> ReplyResult {
        let check_cred = cred.clone();
        self.metadata.read(move |_, r| perm::check(&check_cred, &r.object(old_parent)?, WRITE | EXEC)).await?;
        let destination = self.here.config.server_of_handle(new_parent).ok_or(ErrorCode::Stale)?;
        let replace =
            Request::ReplaceDirent { cred: cred.clone(), parent: new_parent, name: new_name, target: source, kind };
        let Reply::Replaced(replaced) = self.peers.call(destination, replace).await? else {
            return Err(ErrorCode::Protocol);
        };
        let now = now_ns();
        let this = self.clone();
        let remove_cred = cred.clone();
        self.metadata
            .commit(move |w, _| {
                // Check before writing: a failing operation must leave the
                // batch's shared transaction untouched.
                if let Some((old, ObjectKind::Directory)) = replaced {
                    if w.object(old).is_ok_and(|dir| dir.entry_count > 0) {
                        return Err(ErrorCode::NotEmpty);
                    }
                }
                namespace::remove_dirent(w, &remove_cred, old_parent, &old_name, None, now)?;
                if let Some((old, _)) = replaced {
                    this.destroy_or_queue(w, old)?;
                }
                Ok(Reply::Done)
            })
            .await?;
        self.reclaim_wake.notify_one();
        if kind == ObjectKind::Directory {
            self.set_remote_parent(cred, source, new_parent).await?;
        }
        Ok(Reply::Done)
    }

    /// Points a moved directory's parent pointer at `new_parent`.
    async fn set_remote_parent(self: &Arc<Self>, cred: Credentials, dir: Handle, new_parent: Handle) -> WeftResult<()> {
        let changes = AttrChanges { parent: Some(new_parent), ..AttrChanges::default() };
        let server = self.here.config.server_of_handle(dir).ok_or(ErrorCode::Stale)?;
        if server == self.here.server_id {
            let now = now_ns();
            self.metadata.commit(move |w, _| namespace::set_attr(w, &cred, dir, changes, now)).await?;
        } else {
            self.peers.call(server, Request::SetAttr { cred, handle: dir, changes }).await?;
        }
        Ok(())
    }

    /// A directory replaced by a rename must be empty. One stored here is
    /// checked again inside the transaction; one stored elsewhere only here
    /// (as the client-driven path does: a create racing the rename can slip in).
    async fn check_destination_empty(
        self: &Arc<Self>,
        cred: &Credentials,
        parent: Handle,
        name: &str,
        source: Handle,
    ) -> WeftResult<()> {
        let server = self.here.config.server_of_handle(parent).ok_or(ErrorCode::Stale)?;
        let existing = if server == self.here.server_id {
            let name = name.to_string();
            self.metadata.read(move |_, r| r.dirent(parent, &name)).await?
        } else {
            let lookup = Request::Lookup { cred: cred.clone(), parent, name: name.to_string() };
            match self.peers.call(server, lookup).await {
                Ok(Reply::Entry { handle, kind }) => Some((handle, kind)),
                _ => None,
            }
        };
        // Checked here wherever the directory is stored: when the rename goes
        // to another server, no transaction on that server can check a
        // directory stored here (a replaced non-empty directory was once
        // taken for empty that way and the source entry lost).
        if let Some((existing, ObjectKind::Directory)) = existing {
            if existing != source && self.remote_attributes(existing).await?.entry_count > 0 {
                return Err(ErrorCode::NotEmpty);
            }
        }
        Ok(())
    }

    async fn remote_attributes(self: &Arc<Self>, handle: Handle) -> WeftResult<message::Attributes> {
        let server = self.here.config.server_of_handle(handle).ok_or(ErrorCode::Stale)?;
        if server == self.here.server_id {
            return self.metadata.read(move |s, r| s.attributes(r, handle)).await;
        }
        match self.peers.call(server, Request::GetAttr { handle }).await? {
            Reply::Attributes(attributes) => Ok(attributes),
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// Is `candidate` the directory `dir` or below it? Walks parent pointers
    /// to the root, across servers.
    async fn is_within(self: &Arc<Self>, candidate: Handle, dir: Handle) -> WeftResult<bool> {
        let parent_of =
            |handle| async move { self.remote_attributes(handle).await?.parent.ok_or(ErrorCode::Io).map(Some) };
        weft_proto::ancestry::is_within(candidate, dir, parent_of).await
    }

    /// Metadata server: the stats of `metafile`'s datafiles (layout order),
    /// from its record where settled, asking only the growing ones;
    /// settles those found idle.
    pub async fn datafile_stats_of(
        self: &Arc<Self>,
        metafile: Handle,
        datafiles: &[Handle],
        tracked: Tracked,
    ) -> WeftResult<Vec<DatafileStat>> {
        let Some(mut stats) = tracked.settled else {
            return self.gather_sizes(datafiles).await;
        };
        let growing: Vec<usize> = (0..datafiles.len()).filter(|i| tracked.marks[*i].is_some()).collect();
        if growing.is_empty() {
            return Ok(stats);
        }
        let asked: Vec<Handle> = growing.iter().map(|i| datafiles[*i]).collect();
        let answers = self.gather_settle(&asked).await?;
        let mut settled = Vec::new();
        for (index, answer) in growing.into_iter().zip(answers) {
            stats[index] = answer.stat;
            if answer.idle {
                settled.push((index, datafiles[index], tracked.marks[index].unwrap_or(0), answer.stat));
            }
        }
        if !settled.is_empty() {
            // Best effort: the answer stands; an unsettled datafile stays growing.
            if let Err(code) = self.metadata.commit(move |w, _| crate::growth::settle_txn(w, metafile, &settled)).await
            {
                tracing::warn!("settling the sizes of {metafile:?} failed: {code:?}");
            }
        }
        Ok(stats)
    }

    async fn gather_settle(self: &Arc<Self>, datafiles: &[Handle]) -> WeftResult<Vec<SettleStat>> {
        self.gather_each(CollectiveOp::SettleSizes, datafiles, |part| match part {
            CollectivePart::Settle(stats) => Some(stats),
            _ => None,
        })
        .await
    }

    /// Every server's status, gathered along the tree (one part per server;
    /// a server that does not answer is left out).
    pub async fn status_table(self: &Arc<Self>) -> WeftResult<Vec<ServerStatus>> {
        if let Some(table) = self.composed_status_now() {
            return Ok(table);
        }
        let by_server: BTreeMap<u32, Vec<Handle>> =
            self.here.config.servers.iter().map(|s| (s.id, Vec::new())).collect();
        let groups = crate::tree::groups_rooted_at(self.here.server_id, by_server);
        let result = crate::tree::run(self, CollectiveOp::Status, groups, 0, 0).await?;
        let mut table: Vec<ServerStatus> = result
            .parts
            .into_iter()
            .filter_map(|(_, part)| match part {
                Ok(CollectivePart::Status(status)) => Some(status),
                _ => None,
            })
            .collect();
        table.sort_by_key(|s| s.server_id);
        Ok(table)
    }
}

/// mkdir when the new directory is placed on the parent's server.
fn mkdir_txn(
    w: &Writer<'_>,
    ids: &mut IdAllocator,
    cred: &Credentials,
    parent: Handle,
    name: &str,
    mode: u32,
    now: i64,
) -> ReplyResult {
    let mut dir = load_dir(w, parent)?;
    perm::check(cred, &dir, WRITE | EXEC)?;
    if w.dirent(parent, name)?.is_some() {
        return Err(ErrorCode::Exists);
    }
    let target_id = ids_target(w, parent)?;
    let mut record = ObjectRecord::new(ObjectKind::Directory, mode, cred.uid, cred.gid, now);
    record.default_distribution = dir.default_distribution;
    record.parent = Some(parent);
    let handle = ids.allocate(w, target_id)?;
    w.put_object(handle, &record)?;
    insert_entry(w, parent, &mut dir, name, handle, ObjectKind::Directory, now)?;
    Ok(Reply::Handle(handle))
}

/// The target of the parent: new local directories go on the same target.
fn ids_target(_w: &Writer<'_>, parent: Handle) -> WeftResult<u16> {
    Ok(parent.target_id())
}
