//! `weft bench locks`: Ching's lock microbenchmark (2007, §7.5.1) against
//! a running file system.
//!
//! Each of `--clients` clients (its own connections, its own lock owner,
//! all in this process) acquires, then releases, `--count` one-byte
//! exclusive locks `--spacing` bytes apart, described by each lock method
//! (POSIX, list at full length, list capped at 64 ranges per request,
//! datatype: one hvector) and taken under each protocol (two-phase,
//! one-try, alt-try). Client `c`'s pattern starts at `c · span · (1 −
//! overlap)`, so neighbouring patterns overlap by `--overlap` per cent.
//! With overlap, each client loops acquire → release `--repeat` times with
//! no barrier between (an acquire-all-then-barrier design could never
//! finish at 100%).
//!
//! Reported per combination (one JSON object per line): the aggregate
//! acquire rate (all clients' locks over the slowest client's acquire
//! time) and release rate, and the lock requests per acquire.

use std::time::Instant;

use clap::Args;
use serde_json::json;
use weft_client::noncontig::FileAccess;
use weft_client::{Client, ClientOptions, CreateOptions, LockMethod, LockProtocol, Locker};
use weft_client::{Dataloop, Region};
use weft_config::Config;

use crate::bench::emit;

/// Arguments of `weft bench locks`.
#[derive(Args)]
pub struct LocksArgs {
    /// Clients (each with its own connections and lock owner).
    #[arg(long, default_value_t = 1)]
    clients: u32,
    /// Stripe count of the benchmark file (servers holding locks).
    #[arg(long, default_value_t = 1)]
    servers: u32,
    /// Locks per client.
    #[arg(long, default_value_t = 131_072)]
    count: u64,
    /// Bytes between consecutive locks (64 or 4096 in the thesis).
    #[arg(long, default_value_t = 64)]
    spacing: u64,
    /// Overlap of neighbouring clients' patterns, per cent.
    #[arg(long, default_value_t = 0)]
    overlap: u64,
    /// Acquire → release loops per client.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Methods (posix, list, list64, datatype), comma-separated.
    #[arg(long, default_value = "posix,list,list64,datatype")]
    methods: String,
    /// Protocols (two-phase, one-try, alt-try), comma-separated.
    #[arg(long, default_value = "two-phase,one-try,alt-try")]
    protocols: String,
    /// Path of the benchmark file (created if missing).
    #[arg(long, default_value = "/weft-bench-locks")]
    path: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn method(name: &str) -> Result<LockMethod, String> {
    Ok(match name {
        "posix" => LockMethod::Posix,
        "list" => LockMethod::List { regions_per_request: weft_proto::limits::LOCK_RANGES_MAX },
        "list64" => LockMethod::List { regions_per_request: 64 },
        "datatype" => LockMethod::Datatype,
        other => return Err(format!("unknown lock method `{other}`")),
    })
}

fn protocol(name: &str) -> Result<LockProtocol, String> {
    Ok(match name {
        "two-phase" => LockProtocol::TwoPhase,
        "one-try" => LockProtocol::OneTry,
        "alt-try" => LockProtocol::AltTry,
        other => return Err(format!("unknown lock protocol `{other}`")),
    })
}

/// Runs the benchmark.
pub fn bench_locks(config: Config, args: LocksArgs) -> Result<(), String> {
    if args.count == 0 || args.spacing == 0 || args.overlap > 100 || args.clients == 0 {
        return Err("count, spacing and clients must be positive, overlap at most 100".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let opener = Client::new(config.clone(), ClientOptions::default()).map_err(|e| format!("client: {e}"))?;
        let options = CreateOptions { stripe_count: Some(args.servers), ..Default::default() };
        let file = match opener.create(&args.path, options).await {
            Ok(file) => file,
            Err(weft_proto::ErrorCode::Exists) => opener
                .open(&args.path, weft_client::access::READ | weft_client::access::WRITE)
                .await
                .map_err(|e| format!("open: {e}"))?,
            Err(e) => return Err(format!("create {}: {e}", args.path)),
        };
        let span = args.count * args.spacing;
        let shift = span * (100 - args.overlap) / 100;
        let mut clients = Vec::new();
        for _ in 0..args.clients {
            clients.push(Client::new(config.clone(), ClientOptions::default()).map_err(|e| format!("client: {e}"))?);
        }
        for m in args.methods.split(',') {
            for p in args.protocols.split(',') {
                let (lock_method, lock_protocol) = (method(m)?, protocol(p)?);
                let runs = clients.iter().enumerate().map(|(c, client)| {
                    let file = file.clone();
                    let start = c as u64 * shift;
                    let (count, spacing, repeat) = (args.count, args.spacing, args.repeat);
                    async move {
                        let locker = Locker::new(0);
                        let regions: Vec<Region> =
                            (0..count).map(|i| Region { offset: start + i * spacing, length: 1 }).collect();
                        let byte = Dataloop::bytes(1).map_err(|e| e.to_string())?;
                        let vector = Dataloop::hvector(count, 1, spacing as i64, &byte).map_err(|e| e.to_string())?;
                        let (mut acquire_s, mut release_s, mut requests, mut rounds) = (0f64, 0f64, 0usize, 0u64);
                        for _ in 0..repeat {
                            let access = match lock_method {
                                LockMethod::Datatype => FileAccess::Datatype {
                                    file_type: &vector,
                                    displacement: start as i64,
                                    view_offset: 0,
                                },
                                _ => FileAccess::List(&regions),
                            };
                            let t = Instant::now();
                            let set = client
                                .lock_access(locker, &file, access, count, true, lock_method, lock_protocol)
                                .await
                                .map_err(|e| format!("lock: {e}"))?;
                            acquire_s += t.elapsed().as_secs_f64();
                            requests = set.requests();
                            rounds += set.rounds;
                            let t = Instant::now();
                            client.unlock_access(set).await.map_err(|e| format!("unlock: {e}"))?;
                            release_s += t.elapsed().as_secs_f64();
                        }
                        Ok::<_, String>((acquire_s, release_s, requests, rounds))
                    }
                });
                let results: Vec<Result<_, String>> = futures::future::join_all(runs).await;
                let results: Vec<(f64, f64, usize, u64)> = results.into_iter().collect::<Result<_, _>>()?;
                let locks = (args.count * args.clients as u64 * args.repeat as u64) as f64;
                let acquire = results.iter().map(|r| r.0).fold(0f64, f64::max);
                let release = results.iter().map(|r| r.1).fold(0f64, f64::max);
                emit(
                    args.json,
                    json!({
                        "bench": "locks",
                        "method": m,
                        "protocol": p,
                        "clients": args.clients,
                        "servers": args.servers,
                        "count": args.count,
                        "spacing": args.spacing,
                        "overlap_pct": args.overlap,
                        "repeat": args.repeat,
                        "acquire_locks_per_s": (locks / acquire).round(),
                        "release_locks_per_s": (locks / release).round(),
                        "lock_requests_per_client": results[0].2,
                        "rounds_per_client": results[0].3,
                    }),
                );
            }
        }
        let _ = opener.unlink(&args.path).await;
        Ok(())
    })
}
