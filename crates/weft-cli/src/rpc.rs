//! `weft bench rpc`: the cost of the request path itself, beside the floor
//! of this machine measured in the same run.
//!
//! Against a running file system, from this one process on a
//! current-thread runtime (a worker of `bench md` runs the same way):
//! - `ping`: a null request (`Request::Ping`), one in flight, round robin
//!   over the servers;
//! - `write_4k`, `read_4k`: 4 KiB writes, then reads of the same blocks, of
//!   one file, with 1 and with `--inflight` (32) in flight.
//!
//! Baseline (`tcp_echo`): a minimal async TCP echo server in its own
//! process (hidden `weft bench echo-server`, a multi-thread runtime with the
//! servers' network thread count, like `weft server`), and an echo client
//! on this process's runtime; messages of a Ping request frame's size, one
//! in flight. Its line also gives the Weft servers' CPU meanwhile (they
//! get no traffic from here then): their background work per second.
//!
//! Each phase runs `--count` operations or stops at `--seconds-max`,
//! whichever comes first, and reports the operations done, the requests the
//! client counted, latency p50/p99, ops/s, client CPU per operation
//! (getrusage of this process) and server CPU per operation (utime + stime
//! of the server processes from `/proc`, background work included, in
//! clock ticks of 10 ms: the default counts keep that under a few per cent;
//! absent when the servers are not local). One result line per phase (JSON
//! with `--json`).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use futures::stream::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_client::{Client, ClientOptions, CreateOptions, File};
use weft_config::Config;
use weft_proto::limits::FRAME_HEADER_BYTES;
use weft_proto::message::{self, Reply, ReplyResult, Request};

use crate::bench::{cpu_seconds, emit, load_average, server_cpu_seconds, server_pids};

/// Bytes of one read or write.
const IO_BYTES: usize = 4096;

/// Blocks of the benchmark file the writes cycle over (64 MiB).
const FILE_BLOCKS: u64 = 16384;

/// Arguments of `weft bench rpc`.
#[derive(Args)]
pub struct RpcArgs {
    /// Null requests (and echo round trips).
    #[arg(long, default_value_t = 20000)]
    count: u64,
    /// 4 KiB reads and writes per phase.
    #[arg(long, default_value_t = 10000)]
    io_count: u64,
    /// Operations in flight in the concurrent read and write phases.
    #[arg(long, default_value_t = 32)]
    inflight: u32,
    /// Time cap of each phase, seconds.
    #[arg(long, default_value_t = 20)]
    seconds_max: u64,
    /// Print one JSON object per result.
    #[arg(long)]
    json: bool,
}

/// Arguments of the echo server.
#[derive(Args)]
pub struct EchoArgs {
    /// Bytes of every message.
    #[arg(long)]
    message_bytes: usize,
    /// Runtime worker threads.
    #[arg(long)]
    threads: usize,
    /// The server exits after this many seconds whatever happens.
    #[arg(long)]
    seconds_max: u64,
}

/// What one phase measured.
struct Phase {
    latencies_us: Vec<f64>,
    seconds: f64,
    client_cpu_s: f64,
    server_cpu_s: Option<f64>,
}

impl Phase {
    fn ops(&self) -> u64 {
        self.latencies_us.len() as u64
    }

    /// The figures every phase reports (sorts the latencies).
    fn figures(&mut self) -> serde_json::Value {
        self.latencies_us.sort_by(f64::total_cmp);
        let ops = self.ops().max(1) as f64;
        let mut value = json!({
            "ops": self.ops(),
            "seconds": round(self.seconds, 1000.0),
            "ops_per_s": (self.ops() as f64 / self.seconds.max(1e-9)).round(),
            "latency_us_p50": percentile(&self.latencies_us, 0.5),
            "latency_us_p99": percentile(&self.latencies_us, 0.99),
            "client_cpu_us_per_op": round(self.client_cpu_s / ops * 1e6, 10.0),
            "load_avg_1m": load_average(),
        });
        if let Some(server) = self.server_cpu_s {
            value["server_cpu_us_per_op"] = json!(round(server / ops * 1e6, 10.0));
        }
        value
    }
}

fn round(value: f64, scale: f64) -> f64 {
    (value * scale).round() / scale
}

/// The `q` quantile of sorted values (nearest rank), to 0.1.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    round(sorted[((sorted.len() - 1) as f64 * q).round() as usize], 10.0)
}

/// One JSON object with the fields of all `parts` (later ones win).
fn merge<const N: usize>(parts: [serde_json::Value; N]) -> serde_json::Value {
    let mut all = serde_json::Map::new();
    for part in parts {
        if let serde_json::Value::Object(fields) = part {
            all.extend(fields);
        }
    }
    serde_json::Value::Object(all)
}

/// Frame bytes of a Ping request and of its reply.
fn ping_frame_bytes() -> (usize, usize) {
    let reply: ReplyResult = Ok(Reply::Done);
    (FRAME_HEADER_BYTES + message::encode(&Request::Ping).len(), FRAME_HEADER_BYTES + message::encode(&reply).len())
}

/// Runs every phase against the file system of `config` and prints one
/// result per phase.
pub fn bench_rpc(config: Config, config_path: PathBuf, args: RpcArgs) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let client =
        runtime.block_on(async { Client::new(config.clone(), ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let pids = server_pids(&config_path);
    let cap = Duration::from_secs(args.seconds_max);
    let servers = config.servers.len() as u32;
    let common = json!({"bench": "rpc", "servers": servers, "client_runtime": "current_thread"});
    let with = |extra: serde_json::Value, figures: serde_json::Value| merge([common.clone(), extra, figures]);

    // The floor first, before this process sends Weft any traffic.
    let (request_bytes, reply_bytes) = ping_frame_bytes();
    let threads = config.threads.network.max(1) as usize;
    // Weft's servers get no traffic from here meanwhile: their CPU is
    // their background work (status exchange, pools, reclaim).
    let idle_before = server_cpu_seconds(&pids);
    let mut echo = runtime.block_on(echo_baseline(request_bytes, threads, args.count, cap))?;
    let idle = idle_before.zip(server_cpu_seconds(&pids)).map(|(before, after)| after - before);
    let mut figures = echo.figures();
    if let Some(idle) = idle {
        figures["weft_servers_idle_cpu_ms_per_s"] = json!(round(idle / echo.seconds.max(1e-9) * 1e3, 10.0));
    }
    let echo_p50 = percentile(&echo.latencies_us, 0.5);
    emit(
        args.json,
        with(
            json!({"method": "tcp_echo", "phase": "echo", "inflight": 1, "message_bytes": request_bytes, "server_threads": threads}),
            figures,
        ),
    );

    runtime.block_on(async {
        for (server, result) in client.ping_all().await {
            result.map_err(|e| format!("server {server}: {e}"))?;
        }
        Ok::<_, String>(())
    })?;

    // Null requests.
    let before = client.counters();
    let mut ping = runtime.block_on(measure(&pids, args.count, 1, cap, |i| {
        let client = &client;
        async move { client.call((i % servers as u64) as u32, Request::Ping).await.map(drop) }
    }))?;
    let requests = client.counters().since(&before).total_requests();
    let mut figures = ping.figures();
    let ping_p50 = percentile(&ping.latencies_us, 0.5);
    figures["requests"] = json!(requests);
    figures["ratio_to_echo_p50"] = json!(round(ping_p50 / echo_p50.max(0.1), 100.0));
    emit(
        args.json,
        with(
            json!({"method": "weft", "phase": "ping", "inflight": 1, "request_bytes": request_bytes, "reply_bytes": reply_bytes}),
            figures,
        ),
    );

    // 4 KiB writes, then reads of the blocks written.
    let path = format!("/bench-rpc-{}", std::process::id());
    let file = runtime.block_on(client.create(&path, CreateOptions::default())).map_err(|e| format!("{path}: {e}"))?;
    let result =
        io_phases(&runtime, &client, &file, &pids, &args, cap, &|extra, figures| emit(args.json, with(extra, figures)));
    let _ = runtime.block_on(client.unlink(&path));
    result
}

/// The four read/write phases on `file`.
fn io_phases(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    file: &File,
    pids: &[u32],
    args: &RpcArgs,
    cap: Duration,
    report: &dyn Fn(serde_json::Value, serde_json::Value),
) -> Result<(), String> {
    let mut written_blocks = 0u64;
    for phase in ["write_4k", "read_4k"] {
        for inflight in [1, args.inflight.max(1)] {
            let before = client.counters();
            let blocks = if phase == "write_4k" { FILE_BLOCKS } else { written_blocks.max(1) };
            let mut measured = runtime.block_on(measure(pids, args.io_count, inflight, cap, |i| async move {
                let offset = (i % blocks) * IO_BYTES as u64;
                if phase == "write_4k" {
                    let data = [(i as u8) | 1; IO_BYTES];
                    client.write_at(file, offset, &data).await
                } else {
                    let mut buf = [0u8; IO_BYTES];
                    match client.read_at(file, offset, &mut buf).await? {
                        IO_BYTES => Ok(()),
                        _ => Err(weft_proto::ErrorCode::Io),
                    }
                }
            }))?;
            if phase == "write_4k" {
                written_blocks = written_blocks.max(measured.ops().min(FILE_BLOCKS));
            }
            let mut figures = measured.figures();
            figures["requests"] = json!(client.counters().since(&before).total_requests());
            report(json!({"method": "weft", "phase": phase, "inflight": inflight, "io_bytes": IO_BYTES}), figures);
        }
    }
    Ok(())
}

/// Runs `op(0..count)` with `inflight` at a time until `count` are done or
/// `cap` has passed; times each one, and the CPU of this process and of
/// the servers `pids` over the whole phase.
async fn measure<F, Fut>(pids: &[u32], count: u64, inflight: u32, cap: Duration, op: F) -> Result<Phase, String>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = weft_proto::WeftResult<()>>,
{
    let servers_before = server_cpu_seconds(pids);
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let deadline = start + cap;
    let timed = |i: u64| {
        let started = Instant::now();
        let fut = op(i);
        async move { fut.await.map(|()| started.elapsed().as_secs_f64() * 1e6).map_err(|e| format!("operation {i}: {e}")) }
    };
    let results: Vec<Result<f64, String>> = futures::stream::iter(0..count)
        .take_while(|_| std::future::ready(Instant::now() < deadline))
        .map(timed)
        .buffer_unordered(inflight.max(1) as usize)
        .collect()
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let client_cpu_s = cpu_seconds() - cpu_before;
    let server_cpu_s = servers_before.zip(server_cpu_seconds(pids)).map(|(before, after)| after - before);
    let latencies_us = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(Phase { latencies_us, seconds, client_cpu_s, server_cpu_s })
}

/// The echo baseline: starts the echo server process, runs `count` round
/// trips of `message_bytes` one at a time, and measures both sides' CPU.
async fn echo_baseline(message_bytes: usize, threads: usize, count: u64, cap: Duration) -> Result<Phase, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut server = Command::new(exe)
        .args(["bench", "echo-server", "--message-bytes", &message_bytes.to_string()])
        .args(["--threads", &threads.to_string(), "--seconds-max", &(cap.as_secs() + 10).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the echo server: {e}"))?;
    let stdout = server.stdout.take().expect("piped");
    let result = async {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map_err(|e| format!("the echo server's address: {e}"))?;
        let address = line.trim();
        let stream =
            tokio::net::TcpStream::connect(address).await.map_err(|e| format!("echo server {address}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let pids = [server.id()];
        // One round trip at a time: the lock is never contended.
        let state = tokio::sync::Mutex::new((stream, vec![0x5au8; message_bytes]));
        let state = &state;
        measure(&pids, count, 1, cap, move |_| async move {
            let mut guard = state.lock().await;
            let (stream, message) = &mut *guard;
            stream.write_all(message).await.map_err(|_| weft_proto::ErrorCode::Io)?;
            stream.read_exact(message).await.map_err(|_| weft_proto::ErrorCode::Io)?;
            Ok(())
        })
        .await
    }
    .await;
    // The server exits when the connection closes (or at its own cap).
    if result.is_err() {
        let _ = server.kill();
    }
    let _ = server.wait();
    result
}

/// The echo server: one connection, each message sent back as it came.
pub fn echo_server(args: EchoArgs) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        println!("{}", listener.local_addr().map_err(|e| e.to_string())?);
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let serve = async {
            let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            let mut message = vec![0u8; args.message_bytes.max(1)];
            // A connection closed between messages ends the loop.
            while stream.read_exact(&mut message).await.is_ok() {
                stream.write_all(&message).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(())
        };
        tokio::time::timeout(Duration::from_secs(args.seconds_max), serve).await.unwrap_or(Ok(()))
    })
}
