//! The one dispatcher: maps every request kind to its handler.
//!
//! [`crate::connection`] decodes a request, admits it and calls
//! [`dispatch`] in the request's own task with a [`Link`] to its
//! connection; data requests use the link to stream, everything else
//! ignores it. Handlers live with the state they use: contiguous data in
//! [`crate::contiguous`], noncontiguous data in [`crate::noncontig`],
//! namespace and metadata in [`crate::service`] and [`crate::aggregate`],
//! sessions in [`crate::sessions`], collectives in [`crate::tree`].

use std::sync::Arc;

use weft_proto::message::{Reply, ReplyResult, Request};
use weft_proto::{limits, ErrorCode};

use crate::link::Link;
use crate::namespace;
use crate::service::{now_ns, Service};

/// Serves one request (every kind but the greeting, which the connection answers).
pub async fn dispatch(service: &Arc<Service>, request: Request, link: &mut Link) -> ReplyResult {
    match request {
        Request::Hello { .. } | Request::PeerHello { .. } => Err(ErrorCode::Protocol),
        Request::Read { handle, offset, length } => {
            crate::contiguous::read(service, link, handle, offset, length).await
        }
        Request::Write { handle, offset, length } => {
            crate::contiguous::write(service, link, handle, offset, length).await
        }
        Request::ReadList { handle, regions, total_length } => {
            crate::noncontig::read_list(service, link, handle, regions, total_length).await
        }
        Request::WriteList { handle, regions, total_length } => {
            crate::noncontig::write_list(service, link, handle, regions, total_length).await
        }
        Request::ReadDatatype { access } => crate::noncontig::read_datatype(service, link, access).await,
        Request::WriteDatatype { access, packed_length } => {
            crate::noncontig::write_datatype(service, link, access, packed_length).await
        }
        Request::Collective { operation, groups, fanout, round } => {
            Ok(Reply::Collective(crate::tree::run(service, operation, groups, fanout, round).await?))
        }
        Request::CreateFile { cred, parent, name, mode, strip_bytes, stripe_count, exclusive } => {
            let args = crate::aggregate::CreateArgs { cred, parent, name, mode, strip_bytes, stripe_count, exclusive };
            service.create_file(args).await
        }
        Request::StatFile { handle } => service.stat_file(handle).await,
        Request::StatEntry { cred, parent, name } => service.stat_entry(cred, parent, name).await,
        Request::RemoveEntry { cred, parent, name, expect_directory } => {
            service.remove_entry(cred, parent, name, expect_directory).await
        }
        Request::MakeDirectory { cred, parent, name, mode } => service.make_directory(cred, parent, name, mode).await,
        Request::RenameEntry { cred, old_parent, old_name, new_parent, new_name } => {
            service.rename_entry(cred, old_parent, old_name, new_parent, new_name).await
        }
        Request::StatFsAll => Ok(Reply::StatusTable(service.status_table().await?)),
        Request::ReserveDatafiles { metadata_server, count } => {
            let target_id = service.config.primary_target(service.server_id).ok_or(ErrorCode::Invalid)?;
            service.commit(move |w, ids| crate::pools::reserve(w, ids, target_id, metadata_server, count)).await
        }
        Request::ListReserved { metadata_server } => {
            service.read(move |_, r| crate::pools::list_reserved(r, metadata_server)).await
        }
        Request::ExchangeStatus { entries } => Ok(service.exchange_status(entries)),
        Request::ScanObjects { after, max } => {
            let max = max.clamp(1, limits::BATCH_HANDLES_MAX) as usize;
            service
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
        Request::ScanHandleRows { table, after, max } => {
            let table = crate::store::HandleTable::from_tag(table).map_err(|_| ErrorCode::Invalid)?;
            let max = max.clamp(1, limits::BATCH_HANDLES_MAX) as usize;
            let Some(start) = after.checked_add(1) else { return Ok(Reply::HandleRows(Vec::new())) };
            service.read(move |_, r| Ok(Reply::HandleRows(r.handle_rows(table, start..u64::MAX, max)?))).await
        }
        Request::ClaimReserved { metadata_server, handles } => {
            service.commit(move |w, _| crate::pools::claim(w, metadata_server, &handles)).await
        }
        Request::SessionOpen { .. }
        | Request::SessionRenew { .. }
        | Request::SessionClose { .. }
        | Request::PointerFetchAdd { .. }
        | Request::PointerSet { .. }
        | Request::PointerGet { .. }
        | Request::LockAcquire { .. }
        | Request::LockRelease { .. } => service.session_request(request).await,
        Request::Ping => Ok(Reply::Done),
        Request::Lookup { cred, parent, name } => service.lookup(cred, parent, name).await,
        Request::GetAttr { handle } => {
            service.local(handle)?;
            let attrs = service.read(move |s, r| s.attributes(r, handle)).await?;
            Ok(Reply::Attributes(attrs))
        }
        Request::GetAttrBatch { handles } => service.getattr_batch(handles).await,
        Request::DatafileSizes { handles } => service.datafile_sizes(handles).await,
        Request::CreateObject { cred, target_id, mode, object } => {
            service.local_target(target_id)?;
            let now = now_ns();
            service.commit(move |w, ids| namespace::create_object(w, ids, &cred, target_id, mode, object, now)).await
        }
        Request::SetLayout { handle, layout } => {
            service.local(handle)?;
            service.commit(move |w, _| namespace::set_layout(w, handle, layout)).await
        }
        Request::SetAttr { cred, handle, changes } => {
            service.local(handle)?;
            let now = now_ns();
            service.commit(move |w, _| namespace::set_attr(w, &cred, handle, changes, now)).await
        }
        Request::TruncateDatafile { handle, local_size } => service.truncate(handle, local_size).await,
        Request::CreateDirent { cred, parent, name, target, kind } => {
            service.local(parent)?;
            let now = now_ns();
            service.commit(move |w, _| namespace::create_dirent(w, &cred, parent, &name, target, kind, now)).await
        }
        Request::RemoveDirent { cred, parent, name, expect_directory } => {
            service.local(parent)?;
            let now = now_ns();
            service.commit(move |w, _| namespace::remove_dirent(w, &cred, parent, &name, expect_directory, now)).await
        }
        Request::ReplaceDirent { cred, parent, name, target, kind } => {
            service.local(parent)?;
            let now = now_ns();
            service.commit(move |w, _| namespace::replace_dirent(w, &cred, parent, &name, target, kind, now)).await
        }
        Request::RemoveObject { handle } => service.remove_object(handle).await,
        Request::ReadDir { cred, dir, cookie, max_entries } => service.readdir(cred, dir, cookie, max_entries).await,
        Request::Rename { cred, old_parent, old_name, new_parent, new_name } => {
            service.local(old_parent)?;
            service.local(new_parent)?;
            let now = now_ns();
            service
                .commit(move |w, _| namespace::rename(w, &cred, old_parent, &old_name, new_parent, &new_name, now))
                .await
        }
        Request::StatFs => Ok(Reply::Status(service.status().await?)),
        Request::Fsync { handles } => service.fsync(handles).await,
        Request::Counters => Ok(Reply::Counters(service.counters.snapshot())),
    }
}
