//! Tree collectives: one request fans out to many servers and their
//! replies come back reduced, in ⌈log_k P⌉ forwarding steps.
//!
//! A collective names its groups (server + handles), the receiver's own
//! group first. The receiver splits the list into k contiguous chunks,
//! keeps the first (its own) and forwards each other chunk to the chunk's
//! first server; it repeats on the kept chunk until only itself is left,
//! each repetition one forwarding step later (a k-nomial tree: after d
//! steps k^d servers are reached, so P servers need ⌈log_k P⌉ steps). All
//! forwards of one server are sent at once; its own share runs meanwhile.
//!
//! Reduction is concatenation in group order: the result has one part per
//! server, so an error names the server it came from. When a forward fails
//! (down, deadline), the forwarder records the error for that server and
//! re-forwards the rest of its chunk itself, so one dead server does not
//! hide its subtree.

use std::sync::Arc;

use futures::future::{join_all, BoxFuture, FutureExt};
use weft_proto::limits::TREE_FANOUT_MAX;
use weft_proto::message::{CollectiveGroup, CollectiveOp, CollectivePart, CollectiveResult, Reply, Request};
use weft_proto::{ErrorCode, WeftResult};

use crate::cluster::Cluster;

/// Splits `groups` (own group first) into the forwards of one server:
/// `(step, chunk)` pairs, steps counted from `round`.
pub fn plan(mut groups: Vec<CollectiveGroup>, fanout: u32, round: u32) -> Vec<(u32, Vec<CollectiveGroup>)> {
    let k = fanout.clamp(2, TREE_FANOUT_MAX) as usize;
    let mut forwards = Vec::new();
    let mut step = round;
    while groups.len() > 1 {
        step += 1;
        let chunk = groups.len().div_ceil(k);
        let rest = groups.split_off(chunk);
        forwards.extend(rest.chunks(chunk).map(|c| (step, c.to_vec())));
    }
    forwards
}

/// Runs a collective that reached this server at step `round`.
pub async fn run(
    cluster: &Arc<Cluster>,
    operation: CollectiveOp,
    groups: Vec<CollectiveGroup>,
    fanout: u32,
    round: u32,
) -> WeftResult<CollectiveResult> {
    let own = groups.first().ok_or(ErrorCode::Invalid)?;
    if own.server_id != cluster.here.server_id || groups.len() > cluster.here.config.servers.len() {
        return Err(ErrorCode::Invalid);
    }
    let fanout =
        if fanout == 0 { cluster.here.config.collectives.tree_fanout } else { fanout }.clamp(2, TREE_FANOUT_MAX);
    cluster.storage.counters.reached(round);
    let own_handles = own.handles.clone();
    let order: Vec<u32> = groups.iter().map(|g| g.server_id).collect();
    let distinct: std::collections::BTreeSet<u32> = order.iter().copied().collect();
    if distinct.len() != order.len() || order.iter().any(|s| cluster.here.config.server(*s).is_none()) {
        return Err(ErrorCode::Invalid);
    }
    let forwards = plan(groups, fanout, round);
    let (own_part, children) = futures::join!(
        share(cluster, operation, own_handles),
        join_all(forwards.into_iter().map(|(step, chunk)| forward(cluster.clone(), operation, chunk, fanout, step)))
    );
    let mut result = CollectiveResult { parts: vec![(cluster.here.server_id, own_part)], depth: round };
    for child in children {
        result.depth = result.depth.max(child.depth);
        result.parts.extend(child.parts);
    }
    // Back into group order: callers zip parts with their groups.
    result.parts.sort_by_key(|(server, _)| order.iter().position(|s| s == server));
    Ok(result)
}

/// Sends `chunk` to its first server; on failure names that server and
/// forwards the rest of the chunk from here.
fn forward(
    cluster: Arc<Cluster>,
    operation: CollectiveOp,
    chunk: Vec<CollectiveGroup>,
    fanout: u32,
    step: u32,
) -> BoxFuture<'static, CollectiveResult> {
    async move {
        let head = chunk[0].server_id;
        cluster.storage.counters.forward(step);
        let request = Request::Collective { operation, groups: chunk.clone(), fanout, round: step };
        let failure = match cluster.peers.call(head, request).await {
            Ok(Reply::Collective(result)) if result.parts.len() == chunk.len() => return result,
            Ok(_) => ErrorCode::Protocol,
            Err(code) => code,
        };
        tracing::warn!("collective: server {head} failed: {failure:?}");
        let mut result = CollectiveResult { parts: vec![(head, Err(failure))], depth: step };
        if chunk.len() > 1 {
            let rest = forward(cluster.clone(), operation, chunk[1..].to_vec(), fanout, step).await;
            result.depth = result.depth.max(rest.depth);
            result.parts.extend(rest.parts);
        }
        result
    }
    .boxed()
}

/// This server's own share of a collective.
async fn share(
    cluster: &Arc<Cluster>,
    operation: CollectiveOp,
    handles: Vec<weft_proto::Handle>,
) -> WeftResult<CollectivePart> {
    match operation {
        CollectiveOp::Ping => Ok(CollectivePart::Done),
        CollectiveOp::DatafileSizes => Ok(CollectivePart::Sizes(cluster.metadata.local_datafile_stats(&handles)?)),
        CollectiveOp::RemoveObjects => Ok(CollectivePart::Removed(cluster.remove_local_objects(handles).await?)),
        CollectiveOp::Status => Ok(CollectivePart::Status(cluster.status().await?)),
        CollectiveOp::Counters => Ok(CollectivePart::Counters(cluster.storage.counters.snapshot())),
        CollectiveOp::SettleSizes => Ok(CollectivePart::Settle(cluster.metadata.local_settle_stats(&handles)?)),
    }
}

/// Groups rooted at `root`: the root's group first (empty if it has no
/// handles), then the others in server order.
pub fn groups_rooted_at(
    root: u32,
    mut by_server: std::collections::BTreeMap<u32, Vec<weft_proto::Handle>>,
) -> Vec<CollectiveGroup> {
    let own = by_server.remove(&root).unwrap_or_default();
    let mut groups = vec![CollectiveGroup { server_id: root, handles: own }];
    groups.extend(by_server.into_iter().map(|(server_id, handles)| CollectiveGroup { server_id, handles }));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(servers: u32, fanout: u32) -> u32 {
        fn walk(groups: Vec<CollectiveGroup>, fanout: u32, round: u32) -> u32 {
            plan(groups, fanout, round)
                .into_iter()
                .map(|(step, chunk)| walk(chunk, fanout, step))
                .max()
                .unwrap_or(round)
        }
        let groups = (0..servers).map(|server_id| CollectiveGroup { server_id, handles: vec![] }).collect();
        walk(groups, fanout, 0)
    }

    #[test]
    fn depth_is_ceil_log_k_of_servers() {
        for fanout in 2..=5u32 {
            for servers in 1..=70u32 {
                let mut expected = 0;
                while fanout.pow(expected) < servers {
                    expected += 1;
                }
                assert_eq!(depth(servers, fanout), expected, "P={servers} k={fanout}");
            }
        }
    }

    #[test]
    fn every_server_reached_once() {
        fn walk(groups: Vec<CollectiveGroup>, fanout: u32, seen: &mut Vec<u32>) {
            seen.push(groups[0].server_id);
            for (_, chunk) in plan(groups, fanout, 0) {
                walk(chunk, fanout, seen);
            }
        }
        let mut seen = Vec::new();
        walk((0..37).map(|server_id| CollectiveGroup { server_id, handles: vec![] }).collect(), 3, &mut seen);
        seen.sort_unstable();
        assert_eq!(seen, (0..37).collect::<Vec<_>>());
    }
}
