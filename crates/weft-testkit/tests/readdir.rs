//! Readdir paging under churn: with 100,000 entries, a listing that runs
//! while another client unlinks and creates sees every surviving entry
//! exactly once and never an entry twice.

use std::collections::{HashMap, HashSet};

use futures::stream::{self, StreamExt};
use weft_config::MetadataSync;
use weft_proto::message::ObjectKind;
use weft_testkit::{Cluster, ClusterOptions};

const ENTRIES: usize = 100_000;

#[test]
fn listing_100k_entries_while_others_unlink_and_create() {
    let cluster =
        Cluster::start(ClusterOptions { servers: 2, metadata_sync: MetadataSync::Commit, ..Default::default() });
    let setup = cluster.client();
    let dir = setup.mkdir("/big", 0o755).unwrap();
    let client = setup.client().clone();
    // Symlinks are the cheapest entries (2 requests each); 64 in flight.
    setup.block_on(async {
        stream::iter(0..ENTRIES)
            .map(|i| {
                let client = client.clone();
                async move { client.symlink_in(dir, &format!("e{i:06}"), "t").await.unwrap() }
            })
            .buffer_unordered(64)
            .count()
            .await
    });
    let churn = cluster.client();
    let lister = cluster.client();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (seen, removed) = std::thread::scope(|scope| {
        let churner = scope.spawn(|| {
            // Remove every 7th original entry and add new ones, bounded in count.
            let mut removed = HashSet::new();
            for (k, i) in (0..ENTRIES).step_by(7).enumerate() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) && k > 100 {
                    break;
                }
                let name = format!("e{i:06}");
                churn.block_on(churn.client().unlink_in(dir, &name)).unwrap();
                removed.insert(name);
                churn.block_on(churn.client().symlink_in(dir, &format!("new{k:06}"), "t")).unwrap();
            }
            removed
        });
        let mut seen: HashMap<String, u32> = HashMap::new();
        let mut cookie = 0;
        loop {
            let (page, end) = lister.block_on(lister.client().readdir_page(dir, cookie, 500)).unwrap();
            for entry in &page {
                assert_eq!(entry.kind, ObjectKind::Symlink);
                assert!(entry.sequence > cookie, "cookies increase");
                cookie = entry.sequence;
                *seen.entry(entry.name.clone()).or_default() += 1;
            }
            if end {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (seen, churner.join().unwrap())
    });
    let repeated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "entries listed twice: {repeated:?}");
    let missing: Vec<String> = (0..ENTRIES)
        .map(|i| format!("e{i:06}"))
        .filter(|name| !removed.contains(name) && !seen.contains_key(name))
        .collect();
    assert!(
        missing.is_empty(),
        "{} surviving entries not listed, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(!removed.is_empty());
    // A final listing matches the survivors exactly.
    let final_names: HashSet<String> = setup.readdir("/big").unwrap().into_iter().map(|e| e.name).collect();
    let originals_left = final_names.iter().filter(|n| n.starts_with('e')).count();
    assert_eq!(originals_left, ENTRIES - removed.len());
}
