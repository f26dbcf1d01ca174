//! `weft fsck`: an online consistency check, read-only unless `--repair`.
//!
//! It scans every server's objects, directory entries and bookkeeping
//! tables (precreate `pool`/`pool_used`, `reserved`, the `reclaim` queue)
//! and reports:
//! - dangling entries (an entry whose object does not exist),
//! - metafiles whose datafiles are missing,
//! - orphans: datafiles no layout, pool, reservation or reclaim row
//!   accounts for, and unnamed metafiles, directories and symlinks,
//! - leaked reservations: datafiles reserved on a data server for a
//!   metadata server that has them neither in its pool nor as used.
//!
//! Pool members, reservations and queued reclaims are accounted for, so a
//! busy file system is clean. To keep in-flight operations (a refill
//! between its two commits, a client-driven create between its steps)
//! from being reported, the scan runs twice 1.5 s apart and only findings
//! present both times are reported. `--repair` removes orphans and leaked
//! reservations (through `RemoveObjects`, which also drops a reservation)
//! and dangling entries.
//!
//! Exit status, in both output modes: 0 when no problem was found, 2 when
//! problems were found (with `--repair` also when all were repaired: the
//! file system was not clean when the check began), 1 when the check
//! itself could not run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use weft_client::{Client, ClientOptions};
use weft_proto::message::{CollectiveGroup, CollectiveOp, Credentials, ObjectKind, ObjectSummary, Reply, Request};
use weft_proto::{Handle, WeftResult};

use crate::cluster::load_config;

/// Arguments of `weft fsck`.
#[derive(Args)]
pub struct FsckArgs {
    /// Remove orphans, leaked reservations and dangling entries.
    #[arg(long)]
    repair: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One problem.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Finding {
    Dangling { dir: Handle, name: String, target: Handle },
    MissingDatafile { metafile: Handle, datafile: Handle },
    Orphan { handle: Handle, kind: String },
    LeakedReservation { handle: Handle, data_server: u32, metadata_server: u32 },
}

#[derive(Default)]
struct Scan {
    objects: BTreeMap<Handle, ObjectSummary>,
    entries: Vec<(Handle, String, Handle)>,
    /// Table tag → (handle → (scanned server, row value)).
    tables: BTreeMap<u8, BTreeMap<Handle, (u32, u32)>>,
}

const PAGE: u32 = 4096;

async fn scan(client: &Client) -> WeftResult<Scan> {
    let mut result = Scan::default();
    let servers: Vec<u32> = client.config().servers.iter().map(|s| s.id).collect();
    for server in &servers {
        let mut after = 0u64;
        loop {
            let Reply::Objects(page) = client.call(*server, Request::ScanObjects { after, max: PAGE }).await? else {
                return Err(weft_proto::ErrorCode::Protocol);
            };
            let Some(last) = page.last() else { break };
            after = last.handle.0;
            result.objects.extend(page.into_iter().map(|o| (o.handle, o)));
        }
        for table in 1..=4u8 {
            let mut after = 0u64;
            loop {
                let request = Request::ScanHandleRows { table, after, max: PAGE };
                let Reply::HandleRows(rows) = client.call(*server, request).await? else {
                    return Err(weft_proto::ErrorCode::Protocol);
                };
                let Some(last) = rows.last() else { break };
                after = last.0 .0;
                let map = result.tables.entry(table).or_default();
                map.extend(rows.into_iter().map(|(h, value)| (h, (*server, value))));
            }
        }
    }
    let dirs: Vec<Handle> =
        result.objects.values().filter(|o| o.kind == ObjectKind::Directory).map(|o| o.handle).collect();
    for dir in dirs {
        let mut cookie = 0;
        loop {
            let request = Request::ReadDir { cred: Credentials::root(), dir, cookie, max_entries: PAGE };
            let Reply::DirPage { entries, end } = client.call(client.server_of(dir)?, request).await? else {
                return Err(weft_proto::ErrorCode::Protocol);
            };
            cookie = entries.last().map_or(cookie, |e| e.sequence);
            result.entries.extend(entries.into_iter().map(|e| (dir, e.name, e.handle)));
            if end {
                break;
            }
        }
    }
    Ok(result)
}

fn findings(scan: &Scan) -> BTreeSet<Finding> {
    let empty = BTreeMap::new();
    let table = |tag: u8| scan.tables.get(&tag).unwrap_or(&empty);
    let (pool, used, reserved, reclaim) = (table(1), table(2), table(3), table(4));
    let mut out = BTreeSet::new();
    let named: BTreeSet<Handle> = scan.entries.iter().map(|(_, _, h)| *h).collect();
    let mut in_layouts = BTreeSet::new();
    for (dir, name, target) in &scan.entries {
        if !scan.objects.contains_key(target) {
            out.insert(Finding::Dangling { dir: *dir, name: name.clone(), target: *target });
        }
    }
    for object in scan.objects.values() {
        for datafile in &object.datafiles {
            in_layouts.insert(*datafile);
            if !scan.objects.contains_key(datafile) {
                out.insert(Finding::MissingDatafile { metafile: object.handle, datafile: *datafile });
            }
        }
    }
    for object in scan.objects.values() {
        let accounted = match object.kind {
            ObjectKind::Datafile => {
                in_layouts.contains(&object.handle)
                    || pool.contains_key(&object.handle)
                    || reserved.contains_key(&object.handle)
                    || reclaim.contains_key(&object.handle)
            }
            _ => {
                object.handle == Handle::ROOT || named.contains(&object.handle) || reclaim.contains_key(&object.handle)
            }
        };
        if !accounted {
            out.insert(Finding::Orphan { handle: object.handle, kind: format!("{:?}", object.kind) });
        }
    }
    for (handle, (data_server, metadata_server)) in reserved {
        let known = pool.get(handle).is_some_and(|(m, _)| m == metadata_server)
            || used.get(handle).is_some_and(|(m, _)| m == metadata_server)
            || in_layouts.contains(handle);
        if !known {
            out.insert(Finding::LeakedReservation {
                handle: *handle,
                data_server: *data_server,
                metadata_server: *metadata_server,
            });
        }
    }
    out
}

async fn repair(client: &Client, finding: &Finding) -> WeftResult<()> {
    match finding {
        Finding::Orphan { handle, .. } | Finding::LeakedReservation { handle, .. } => {
            let server = client.server_of(*handle)?;
            let groups = vec![CollectiveGroup { server_id: server, handles: vec![*handle] }];
            client
                .call(
                    server,
                    Request::Collective { operation: CollectiveOp::RemoveObjects, groups, fanout: 0, round: 0 },
                )
                .await?;
        }
        Finding::Dangling { dir, name, .. } => {
            let request = Request::RemoveDirent {
                cred: Credentials::root(),
                parent: *dir,
                name: name.clone(),
                expect_directory: None,
            };
            client.call(client.server_of(*dir)?, request).await?;
        }
        Finding::MissingDatafile { .. } => {}
    }
    Ok(())
}

/// What the check concluded; `main` turns it into the exit status.
pub enum Verdict {
    /// No problem found.
    Clean,
    /// Problems found: how many, and how many `--repair` fixed.
    Problems { found: usize, repaired: usize },
}

impl Verdict {
    /// Exit status for a finished check (documented in the module doc).
    pub const PROBLEMS_EXIT: u8 = 2;
}

/// Runs the check.
pub fn fsck(config: Option<PathBuf>, args: FsckArgs) -> Result<Verdict, String> {
    let config = load_config(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let client =
        runtime.block_on(async { Client::new(config, ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let first = runtime.block_on(scan(&client)).map_err(|e| format!("scan: {e}"))?;
    std::thread::sleep(Duration::from_millis(1500));
    let second = runtime.block_on(scan(&client)).map_err(|e| format!("scan: {e}"))?;
    let problems: Vec<Finding> = findings(&first).intersection(&findings(&second)).cloned().collect();
    let mut fixed = 0;
    for finding in &problems {
        let repaired = if args.repair { Some(runtime.block_on(repair(&client, finding)).is_ok()) } else { None };
        fixed += usize::from(repaired == Some(true));
        if args.json {
            println!("{}", json!({"finding": format!("{finding:?}"), "repaired": repaired}));
        } else {
            println!("{finding:?}{}", repaired.map_or(String::new(), |ok| format!(" repaired={ok}")));
        }
    }
    let pooled = second.tables.get(&1).map_or(0, |t| t.len());
    let queued = second.tables.get(&4).map_or(0, |t| t.len());
    if args.json {
        println!(
            "{}",
            json!({"problems": problems.len(), "objects": second.objects.len(), "pooled": pooled, "reclaim_queued": queued})
        );
    } else {
        println!(
            "problems: {} (objects {}, pooled {}, reclaim queued {})",
            problems.len(),
            second.objects.len(),
            pooled,
            queued
        );
    }
    Ok(if problems.is_empty() { Verdict::Clean } else { Verdict::Problems { found: problems.len(), repaired: fixed } })
}
