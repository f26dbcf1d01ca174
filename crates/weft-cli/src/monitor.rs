//! `weft stats`: every server's counters, collected by ONE tree collective
//! (`CollectiveOp::Counters`) sent to one server, which forwards it along
//! the tree and returns the reduced per-server results. Text output shows
//! per request kind the count, bytes and p50/p99 service time (upper
//! bounds of the log2 histogram buckets); `--json` prints everything,
//! histograms included.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use weft_client::{Client, ClientOptions};
use weft_proto::message::{CollectiveGroup, CollectiveOp, CollectivePart, Reply, Request};

use crate::cluster::load_config;

/// Arguments of `weft stats`.
#[derive(Args)]
pub struct StatsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Prints every server's counters.
pub fn stats(config: Option<PathBuf>, args: StatsArgs) -> Result<(), String> {
    let config = load_config(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let mut servers: Vec<u32> = config.servers.iter().map(|s| s.id).collect();
    servers.sort_unstable();
    let client =
        runtime.block_on(async { Client::new(config, ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let mut last_error = String::from("no servers");
    // Any server can be the root; try the next if one does not answer.
    for root in servers.clone() {
        let mut order = vec![root];
        order.extend(servers.iter().copied().filter(|s| *s != root));
        let groups = order.iter().map(|s| CollectiveGroup { server_id: *s, handles: vec![] }).collect();
        let request = Request::Collective { operation: CollectiveOp::Counters, groups, fanout: 0, round: 0 };
        match runtime.block_on(client.call(root, request)) {
            Ok(Reply::Collective(result)) => return print(result.parts, args.json),
            Ok(_) => return Err("unexpected reply".into()),
            Err(code) => last_error = format!("server {root}: {code}"),
        }
    }
    Err(last_error)
}

fn print(parts: Vec<(u32, weft_proto::WeftResult<CollectivePart>)>, as_json: bool) -> Result<(), String> {
    for (server, part) in parts {
        match part {
            Ok(CollectivePart::Counters(counters)) if as_json => {
                println!("{}", json!({"server": server, "counters": counters}));
            }
            Ok(CollectivePart::Counters(counters)) => {
                println!(
                    "server {server}: syscalls {} regions {} sieve_spans {} collectives_forwarded {}",
                    counters.syscalls, counters.regions_visited, counters.sieve_spans, counters.collective_forwards
                );
                for kind in counters.kinds {
                    let quantile = |q: f64| kind.latency_quantile_us(q).map_or("-".to_string(), |us| format!("<{us}"));
                    println!(
                        "  {:<20} {:>12} requests {:>16} bytes  latency µs p50 {:>8} p99 {:>8}",
                        kind.kind,
                        kind.requests,
                        kind.bytes,
                        quantile(0.5),
                        quantile(0.99)
                    );
                }
            }
            Ok(_) => println!("server {server}: unexpected part"),
            Err(code) if as_json => println!("{}", json!({"server": server, "error": code.to_string()})),
            Err(code) => println!("server {server}: error {code}"),
        }
    }
    Ok(())
}
