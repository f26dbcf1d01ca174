//! The one dispatcher: maps every request kind to its handler, handing
//! each handler only the parts of the server ([`Service`]) it needs.
//!
//! [`crate::connection`] decodes a request, admits it and calls
//! [`dispatch`] in the request's own task with a [`Link`] to its
//! connection; data requests use the link to stream, everything else
//! ignores it. Handlers live with the state they use: contiguous data in
//! [`crate::contiguous`], noncontiguous data in [`crate::noncontig`] (both
//! over [`crate::storage`], with [`crate::metadata`] for record checks and
//! size marks), local records in [`crate::metadata`], aggregate operations
//! and collectives in [`crate::cluster`] ([`crate::aggregate`],
//! [`crate::pools`], [`crate::tree`]), sessions in [`crate::sessions`],
//! data-server byte-range locks and fenced writes in [`crate::locks`].

use weft_proto::message::{Reply, ReplyResult, Request};
use weft_proto::{limits, ErrorCode};

use crate::link::Link;
use crate::metadata::{now_ns, Metadata};
use crate::namespace;
use crate::service::Service;

/// Serves one request (every kind but the greeting, which the connection answers).
pub async fn dispatch(service: &Service, request: Request, link: &mut Link) -> ReplyResult {
    let Service { storage, metadata, sessions, cluster, .. } = service;
    match request {
        Request::Hello { .. } | Request::PeerHello { .. } | Request::Authenticate { .. } => Err(ErrorCode::Protocol),
        Request::Read { handle, offset, length } => {
            crate::contiguous::read(storage, metadata, link, handle, offset, length).await
        }
        Request::Write { handle, offset, length } => {
            crate::contiguous::write(storage, metadata, link, handle, offset, length).await
        }
        Request::ReadList { handle, regions, total_length } => {
            crate::noncontig::read_list(storage, metadata, link, handle, regions, total_length).await
        }
        Request::WriteList { handle, regions, total_length } => {
            crate::noncontig::write_list(storage, metadata, link, handle, regions, total_length).await
        }
        Request::ReadDatatype { access } => crate::noncontig::read_datatype(storage, metadata, link, access).await,
        Request::WriteDatatype { access, packed_length } => {
            crate::noncontig::write_datatype(storage, metadata, link, access, packed_length).await
        }
        Request::Collective { operation, groups, fanout, round } => {
            Ok(Reply::Collective(crate::tree::run(cluster, operation, groups, fanout, round).await?))
        }
        Request::CreateFile { cred, parent, name, mode, strip_bytes, stripe_count, exclusive } => {
            let args = crate::aggregate::CreateArgs { cred, parent, name, mode, strip_bytes, stripe_count, exclusive };
            cluster.create_file(args).await
        }
        Request::StatFile { handle } => cluster.stat_file(handle).await,
        Request::StatEntry { cred, parent, name } => cluster.stat_entry(cred, parent, name).await,
        Request::RemoveEntry { cred, parent, name, expect_directory } => {
            cluster.remove_entry(cred, parent, name, expect_directory).await
        }
        Request::MakeDirectory { cred, parent, name, mode } => cluster.make_directory(cred, parent, name, mode).await,
        Request::RenameEntry { cred, old_parent, old_name, new_parent, new_name } => {
            cluster.rename_entry(cred, old_parent, old_name, new_parent, new_name).await
        }
        Request::StatFsAll => Ok(Reply::StatusTable(cluster.status_table().await?)),
        Request::ReserveDatafiles { metadata_server, count } => {
            let target_id = service.config.primary_target(service.server_id).ok_or(ErrorCode::Invalid)?;
            metadata.commit(move |w, ids| crate::pools::reserve(w, ids, target_id, metadata_server, count)).await
        }
        Request::ListReserved { metadata_server } => {
            metadata.read(move |_, r| crate::pools::list_reserved(r, metadata_server)).await
        }
        Request::ExchangeStatus { entries } => Ok(cluster.exchange_status(entries)),
        Request::ScanObjects { after, max } => scan_objects(metadata, after, max).await,
        Request::ScanHandleRows { table, after, max } => {
            let table = crate::store::HandleTable::from_tag(table).map_err(|_| ErrorCode::Invalid)?;
            let max = max.clamp(1, limits::BATCH_HANDLES_MAX) as usize;
            let Some(start) = after.checked_add(1) else { return Ok(Reply::HandleRows(Vec::new())) };
            metadata.read(move |_, r| Ok(Reply::HandleRows(r.handle_rows(table, start..u64::MAX, max)?))).await
        }
        Request::ClaimReserved { metadata_server, handles } => {
            metadata.commit(move |w, _| crate::pools::claim(w, metadata_server, &handles)).await
        }
        Request::SessionOpen { .. }
        | Request::SessionRenew { .. }
        | Request::SessionClose { .. }
        | Request::PointerFetchAdd { .. }
        | Request::PointerSet { .. }
        | Request::PointerGet { .. }
        | Request::LockAcquire { .. }
        | Request::LockRelease { .. } => sessions.serve(metadata, request).await,
        Request::DlmAcquire { .. }
        | Request::DlmContinue { .. }
        | Request::DlmRelease { .. }
        | Request::DlmRenew { .. } => storage.locks.serve(&storage.here, request).await,
        Request::Fenced { fence, request } => match *request {
            Request::Write { handle, offset, length } => {
                storage.locks.check_fence(&fence, handle)?;
                crate::contiguous::write(storage, metadata, link, handle, offset, length).await
            }
            Request::WriteList { handle, regions, total_length } => {
                storage.locks.check_fence(&fence, handle)?;
                crate::noncontig::write_list(storage, metadata, link, handle, regions, total_length).await
            }
            Request::WriteDatatype { access, packed_length } => {
                storage.locks.check_fence(&fence, access.handle)?;
                crate::noncontig::write_datatype(storage, metadata, link, access, packed_length).await
            }
            _ => Err(ErrorCode::Protocol),
        },
        // Admitted with its capability checked: run the request it wraps.
        Request::Capable { request, .. } => Box::pin(dispatch(service, *request, link)).await,
        Request::IssueCapability { cred, handle, rights } => {
            service.capabilities.issue(metadata, cred, handle, rights).await
        }
        Request::Ping => Ok(Reply::Done),
        Request::Lookup { cred, parent, name } => metadata.lookup(cred, parent, name).await,
        Request::GetAttr { handle } => metadata.getattr(handle).await,
        Request::GetAttrBatch { handles } => metadata.getattr_batch(handles).await,
        Request::DatafileSizes { handles } => metadata.datafile_sizes(handles).await,
        Request::CreateObject { cred, target_id, mode, object } => {
            metadata.here.local_target(target_id)?;
            let now = now_ns();
            metadata.commit(move |w, ids| namespace::create_object(w, ids, &cred, target_id, mode, object, now)).await
        }
        Request::SetLayout { handle, layout } => {
            metadata.here.local(handle)?;
            metadata.commit(move |w, _| namespace::set_layout(w, handle, layout)).await
        }
        Request::SetAttr { cred, handle, changes } => {
            metadata.here.local(handle)?;
            let now = now_ns();
            metadata.commit(move |w, _| namespace::set_attr(w, &cred, handle, changes, now)).await
        }
        Request::TruncateDatafile { handle, local_size } => metadata.truncate(handle, local_size).await,
        Request::TrimDatafile { handle, if_size, local_size } => metadata.trim(handle, if_size, local_size).await,
        Request::MarkGrowing { datafiles } => metadata.mark_growing(datafiles).await,
        Request::CreateDirent { cred, parent, name, target, kind } => {
            metadata.here.local(parent)?;
            let now = now_ns();
            metadata.commit(move |w, _| namespace::create_dirent(w, &cred, parent, &name, target, kind, now)).await
        }
        Request::RemoveDirent { cred, parent, name, expect_directory } => {
            metadata.here.local(parent)?;
            let now = now_ns();
            metadata.commit(move |w, _| namespace::remove_dirent(w, &cred, parent, &name, expect_directory, now)).await
        }
        Request::ReplaceDirent { cred, parent, name, target, kind } => {
            metadata.here.local(parent)?;
            let now = now_ns();
            metadata.commit(move |w, _| namespace::replace_dirent(w, &cred, parent, &name, target, kind, now)).await
        }
        Request::RemoveObject { handle } => metadata.remove_object(handle).await,
        Request::ReadDir { cred, dir, cookie, max_entries } => metadata.readdir(cred, dir, cookie, max_entries).await,
        Request::Rename { cred, old_parent, old_name, new_parent, new_name } => {
            metadata.here.local(old_parent)?;
            metadata.here.local(new_parent)?;
            let now = now_ns();
            metadata
                .commit(move |w, _| namespace::rename(w, &cred, old_parent, &old_name, new_parent, &new_name, now))
                .await
        }
        Request::StatFs => Ok(Reply::Status(cluster.status().await?)),
        Request::Fsync { handles } => {
            storage.fsync(handles).await?;
            // With `metadata_sync = none`, the file's metadata too (everything committed so far).
            metadata.flush_if_lazy().await
        }
        Request::Counters => Ok(Reply::Counters(storage.counters.snapshot())),
    }
}

/// `ScanObjects`: a page of object summaries (fsck).
async fn scan_objects(metadata: &Metadata, after: u64, max: u32) -> ReplyResult {
    let max = max.clamp(1, limits::BATCH_HANDLES_MAX) as usize;
    metadata
        .read(move |_, r| {
            let page = r.objects_after(after, max)?;
            let summaries = page
                .into_iter()
                .map(|(handle, record)| weft_proto::message::ObjectSummary {
                    handle,
                    kind: record.kind,
                    datafiles: record.layout.map(|l| l.datafiles).unwrap_or_default(),
                    parent: record.parent,
                })
                .collect();
            Ok(Reply::Objects(summaries))
        })
        .await
}

#[cfg(test)]
mod tests {
    //! The dispatcher over a datafile store that fails on demand: a failed
    //! write surfaces as its error code, leaves no scheduler entry or range
    //! held, and the datafile keeps serving reads and writes afterwards.

    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Arc;

    use tokio::sync::mpsc;
    use weft_proto::frame::FrameKind;
    use weft_proto::message::{Credentials, NewObject, Reply, ReplyResult, Request};
    use weft_proto::{ErrorCode, Handle, WeftResult};

    use super::dispatch;
    use crate::datafiles::DatafileStore;
    use crate::link::Link;
    use crate::service::Service;

    /// Fails every write with the armed code (0 = none).
    struct FailingWrites {
        inner: Arc<dyn DatafileStore>,
        armed: Arc<AtomicU8>,
    }

    const ARMED_NONE: u8 = 0;
    const ARMED_NO_SPACE: u8 = 1;
    const ARMED_IO: u8 = 2;

    impl DatafileStore for FailingWrites {
        fn read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<usize> {
            self.inner.read_at(handle, offset, buf)
        }
        fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> WeftResult<()> {
            match self.armed.load(Ordering::SeqCst) {
                ARMED_NO_SPACE => Err(ErrorCode::NoSpace),
                ARMED_IO => Err(ErrorCode::Io),
                _ => self.inner.write_at(handle, offset, data),
            }
        }
        fn try_write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> Option<WeftResult<()>> {
            match self.armed.load(Ordering::SeqCst) {
                ARMED_NONE => self.inner.try_write_at(handle, offset, data),
                _ => Some(self.write_at(handle, offset, data)),
            }
        }
        fn stat(&self, handle: Handle) -> WeftResult<(u64, i64)> {
            self.inner.stat(handle)
        }
        fn try_stat(&self, handle: Handle) -> Option<WeftResult<(u64, i64)>> {
            self.inner.try_stat(handle)
        }
        fn try_read_at(&self, handle: Handle, offset: u64, buf: &mut [u8]) -> WeftResult<Option<usize>> {
            self.inner.try_read_at(handle, offset, buf)
        }
        fn set_len(&self, handle: Handle, size: u64) -> WeftResult<()> {
            self.inner.set_len(handle, size)
        }
        fn sync(&self, handle: Handle) -> WeftResult<()> {
            self.inner.sync(handle)
        }
        fn remove(&self, handle: Handle) -> WeftResult<()> {
            self.inner.remove(handle)
        }
        fn used_bytes(&self) -> WeftResult<u64> {
            self.inner.used_bytes()
        }
    }

    struct Harness {
        service: Arc<Service>,
        armed: Arc<AtomicU8>,
        _dir: tempfile::TempDir,
    }

    async fn harness() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let config = weft_config::generate(&weft_config::GenOptions {
            servers: 1,
            host: "127.0.0.1".into(),
            base_port: 1, // never listened on: the test calls the dispatcher directly
            root: dir.path().to_path_buf(),
            metadata_sync: weft_config::MetadataSync::None,
        });
        weft_config::create_key(config.auth.key_file.as_deref().unwrap()).unwrap();
        let armed = Arc::new(AtomicU8::new(ARMED_NONE));
        let flag = armed.clone();
        let service =
            Service::open_with(config, 0, move |inner| Arc::new(FailingWrites { inner, armed: flag })).await.unwrap();
        Harness { service, armed, _dir: dir }
    }

    /// Runs one request as a connection would; returns the reply and the
    /// data frames the handler sent.
    async fn run(service: &Arc<Service>, request: Request, upload: Option<Vec<u8>>) -> (ReplyResult, Vec<u8>) {
        let (outgoing, mut frames) = mpsc::channel(1024);
        let (_chunk_sender, chunks) = mpsc::channel(4);
        let uploads = upload.is_some();
        let mut link = Link::new(1, outgoing, upload.unwrap_or_default(), uploads.then_some(chunks));
        let reply = dispatch(service, request, &mut link).await;
        drop(link);
        let mut data = Vec::new();
        while let Some(frame) = frames.recv().await {
            if frame.header.kind == FrameKind::Data {
                data.extend_from_slice(&frame.payload);
            }
        }
        (reply, data)
    }

    async fn create_datafile(service: &Arc<Service>) -> Handle {
        let cred = Credentials { uid: 0, gid: 0, groups: Vec::new() };
        let create = Request::CreateObject { cred, target_id: 0, mode: 0o644, object: NewObject::Datafile };
        let Ok(Reply::Handle(datafile)) = run(service, create, None).await.0 else { panic!("create") };
        datafile
    }

    fn write(handle: Handle, offset: u64, length: u64) -> Request {
        Request::Write { handle, offset, length }
    }

    #[tokio::test]
    async fn failed_writes_surface_their_code_and_break_nothing() {
        let h = harness().await;
        let datafile = create_datafile(&h.service).await;
        let first = vec![7u8; 4096];
        let (reply, _) = run(&h.service, write(datafile, 0, 4096), Some(first.clone())).await;
        // A write's reply gives the local size before it.
        assert_eq!(reply, Ok(Reply::Io { bytes: 4096, local_size: 0 }));

        for (armed, code) in [(ARMED_NO_SPACE, ErrorCode::NoSpace), (ARMED_IO, ErrorCode::Io)] {
            h.armed.store(armed, Ordering::SeqCst);
            let (reply, _) = run(&h.service, write(datafile, 4096, 4096), Some(vec![9u8; 4096])).await;
            assert_eq!(reply, Err(code), "contiguous write");
            let list = Request::WriteList { handle: datafile, regions: vec![(0, 8), (64, 8)], total_length: 16 };
            let (reply, _) = run(&h.service, list, Some(vec![9u8; 16])).await;
            assert_eq!(reply, Err(code), "list write (sieved)");
        }
        h.armed.store(ARMED_NONE, Ordering::SeqCst);
        assert_eq!(h.service.storage.scheduler.active_count(), 0);
        assert_eq!(h.service.storage.ranges.active_count(), 0);

        // The bytes written before the faults are intact and the size unchanged.
        let (reply, data) = run(&h.service, Request::Read { handle: datafile, offset: 0, length: 8192 }, None).await;
        assert_eq!(reply, Ok(Reply::Io { bytes: 4096, local_size: 4096 }));
        assert_eq!(data, first);
        // And the datafile takes writes again.
        let (reply, _) = run(&h.service, write(datafile, 4096, 4096), Some(vec![9u8; 4096])).await;
        assert_eq!(reply, Ok(Reply::Io { bytes: 4096, local_size: 4096 }));
        // A trim takes effect only at the size it expects.
        let trim = |if_size, local_size| Request::TrimDatafile { handle: datafile, if_size, local_size };
        assert_eq!(run(&h.service, trim(9000, 4096), None).await.0, Ok(Reply::Io { bytes: 0, local_size: 8192 }));
        assert_eq!(run(&h.service, trim(8192, 4096), None).await.0, Ok(Reply::Io { bytes: 0, local_size: 4096 }));
    }

    #[tokio::test]
    async fn removed_datafile_is_forgotten() {
        let h = harness().await;
        let datafile = create_datafile(&h.service).await;
        let (reply, _) = run(&h.service, write(datafile, 0, 4), Some(vec![1u8; 4])).await;
        assert!(reply.is_ok());
        assert!(h.service.storage.datafiles.is_known(datafile));
        assert_eq!(run(&h.service, Request::RemoveObject { handle: datafile }, None).await.0, Ok(Reply::Done));
        assert!(!h.service.storage.datafiles.is_known(datafile));
        // The cached record and descriptor are gone with it.
        let (reply, _) = run(&h.service, write(datafile, 0, 4), Some(vec![1u8; 4])).await;
        assert_eq!(reply, Err(ErrorCode::Stale));
        let (reply, _) = run(&h.service, Request::Read { handle: datafile, offset: 0, length: 4 }, None).await;
        assert_eq!(reply, Err(ErrorCode::Stale));
    }
}
