//! Benchmarks (not tests): `weft bench io`, `weft bench md`,
//! `weft bench hpio` (in [`crate::hpio`]) and `weft bench rpc` (in
//! [`crate::rpc`]).
//!
//! A coordinator starts P worker processes (hidden `weft bench worker`),
//! waits until all are connected and ready, releases them together, and
//! measures from release until the last one reports. Each result is one
//! JSON object per line with `--json`. What `bench io` reads is checked
//! byte for byte against what it wrote (after the clock stops; a wrong byte
//! fails the benchmark), and a `bench md` remove phase ends when the
//! servers have reclaimed the removed files' datafiles, not when the
//! namespace entries are gone. Baselines are measured in the same
//! run: the loopback TCP ceiling (a plain socket copy between two
//! processes) and the local disk rate for the same bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use weft_client::{Client, ClientOptions, CreateOptions};
use weft_config::{Config, MetadataSync};
use weft_proto::message::{Reply, Request};
use weft_server::store::HandleTable;

use crate::cluster::load_config;

/// Benchmark commands.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Bandwidth: P processes write then read a shared file or one file each.
    Io(IoArgs),
    /// Metadata: P processes create, stat and remove files.
    Md(MdArgs),
    /// HPIO: noncontiguous sweeps (posix, list, list64, datatype).
    Hpio(crate::hpio::HpioArgs),
    /// The request path: null request and 4 KiB I/O latency, CPU per
    /// request, beside a TCP echo baseline.
    Rpc(crate::rpc::RpcArgs),
    /// Byte-range locks: Ching's microbenchmark (methods × protocols, overlap).
    Locks(crate::locks::LocksArgs),
    /// Internal: one worker process of a benchmark.
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Internal: the receiving end of the loopback TCP baseline.
    #[command(hide = true)]
    TcpSink(SinkArgs),
    /// Internal: the server of the TCP echo baseline of `bench rpc`.
    #[command(hide = true)]
    EchoServer(crate::rpc::EchoArgs),
}

/// File layouts of `bench io`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// One shared file, each process a contiguous segment.
    Shared,
    /// One file per process.
    FilePerProcess,
    /// Both, one after the other.
    Both,
}

/// Arguments of `weft bench io`.
#[derive(Args)]
pub struct IoArgs {
    /// Client processes.
    #[arg(long, short = 'p', default_value_t = 4)]
    procs: u32,
    /// Bytes per request (suffixes k, M, G = KiB, MiB, GiB).
    #[arg(long, value_parser = parse_size, default_value = "1M")]
    transfer: u64,
    /// Bytes each process moves (suffixes k, M, G).
    #[arg(long, value_parser = parse_size, default_value = "256M")]
    size_per_proc: u64,
    /// File layout.
    #[arg(long, value_enum, default_value = "both")]
    pattern: Pattern,
    /// Drop the page cache before reading (needs root); otherwise reads are warm.
    #[arg(long)]
    drop_caches: bool,
    /// Phases, in order: `write` fills the files with a pattern of their
    /// offsets, `read` reads them back and checks every byte (after the
    /// timer stops). `read` alone reads files an earlier `--keep` run wrote
    /// with the same sizes.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "write,read")]
    phases: Vec<IoPhase>,
    /// Leave the files in place (for a later `--phases read`).
    #[arg(long)]
    keep: bool,
    /// Directory for the local-disk baseline (default: server 0's storage).
    #[arg(long)]
    local_dir: Option<PathBuf>,
    /// Print one JSON object per result.
    #[arg(long)]
    json: bool,
}

/// Phases of `bench io`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoPhase {
    /// Write the pattern.
    Write,
    /// Read it back, then check it.
    Read,
}

/// Arguments of `weft bench md`.
#[derive(Args)]
pub struct MdArgs {
    /// Client processes.
    #[arg(long, short = 'p', default_value_t = 4)]
    procs: u32,
    /// Files per process.
    #[arg(long, default_value_t = 2000)]
    files: u32,
    /// Stripe count of created files (default: the configuration's).
    #[arg(long)]
    stripe_count: Option<u32>,
    /// Use the client-driven multi-step namespace operations instead of
    /// the servers' aggregate ones.
    #[arg(long)]
    client_driven: bool,
    /// Phases, in order (each works on the names the ones before made).
    #[arg(long, value_delimiter = ',', default_value = "create,stat,remove,mkdir,rmdir")]
    phases: Vec<MdPhase>,
    /// Operations each process keeps in flight (1 = one at a time).
    #[arg(long, default_value_t = 1)]
    inflight: u32,
    /// Resolve the whole path on every operation (one lookup per
    /// directory component first). Default: each process resolves its
    /// directory once and works relative to its handle (like `*at()` calls
    /// on an open directory, or PVFS's system interface).
    #[arg(long)]
    by_path: bool,
    /// Injected delay per message in the workers' transport, ms (emulates
    /// a wide-area client; the servers are not slowed). `weft --faults`
    /// reaches the workers too.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Print one JSON object per result.
    #[arg(long)]
    json: bool,
}

/// Phases of `bench md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MdPhase {
    /// Create files (exclusive).
    Create,
    /// Stat each file (`lstat`).
    Stat,
    /// Remove each file.
    Remove,
    /// Create directories.
    Mkdir,
    /// Remove the directories.
    Rmdir,
}

impl MdPhase {
    fn name(self) -> &'static str {
        match self {
            MdPhase::Create => "create",
            MdPhase::Stat => "stat",
            MdPhase::Remove => "remove",
            MdPhase::Mkdir => "mkdir",
            MdPhase::Rmdir => "rmdir",
        }
    }
}

/// Arguments of a worker process.
#[derive(Args)]
pub struct WorkerArgs {
    #[arg(long)]
    task: String,
    #[arg(long)]
    rank: u32,
    #[arg(long)]
    path: String,
    #[arg(long, default_value_t = 0)]
    offset: u64,
    #[arg(long, default_value_t = 0)]
    bytes: u64,
    #[arg(long, default_value_t = 0)]
    transfer: u64,
    #[arg(long, default_value_t = 0)]
    count: u32,
    #[arg(long)]
    stripe_count: Option<u32>,
    #[arg(long)]
    client_driven: bool,
    #[arg(long, default_value_t = 1)]
    inflight: u32,
    #[arg(long)]
    by_path: bool,
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
}

/// Arguments of the TCP sink.
#[derive(Args)]
pub struct SinkArgs {
    #[arg(long)]
    bytes: u64,
}

/// Parses a byte count with an optional binary suffix: `4k`, `1M`, `2GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(split);
    let number: u64 = digits.parse().map_err(|_| format!("`{text}` is not a size"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("`{text}`: unknown size suffix `{suffix}`")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("`{text}` is too large"))
}

pub fn run(config: Option<PathBuf>, command: BenchCommand) -> Result<(), String> {
    match command {
        BenchCommand::Io(args) => bench_io(load_config(config.clone())?, config.expect("checked"), args),
        BenchCommand::Md(args) => bench_md(load_config(config.clone())?, config.expect("checked"), args),
        BenchCommand::Worker(args) => worker(load_config(config)?, args),
        BenchCommand::TcpSink(args) => tcp_sink(args),
        BenchCommand::Hpio(args) => crate::hpio::hpio(load_config(config)?, args),
        BenchCommand::Rpc(args) => crate::rpc::bench_rpc(load_config(config.clone())?, config.expect("checked"), args),
        BenchCommand::EchoServer(args) => crate::rpc::echo_server(args),
        BenchCommand::Locks(args) => crate::locks::bench_locks(load_config(config)?, args),
    }
}

/// A rank's file path and starting offset in one access pattern.
type RankFile<'a> = Box<dyn Fn(u32) -> (String, u64) + 'a>;

pub(crate) fn emit(json_output: bool, value: serde_json::Value) {
    if json_output {
        println!("{value}");
    } else {
        let mut parts = Vec::new();
        if let Some(map) = value.as_object() {
            for (key, v) in map {
                parts.push(format!("{key}={v}"));
            }
        }
        println!("{}", parts.join(" "));
    }
}

fn mib_per_s(bytes: u64, seconds: f64) -> f64 {
    (bytes as f64 / (1 << 20) as f64 / seconds * 10.0).round() / 10.0
}

// ---------- coordinator ----------

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

fn start_worker(config_path: &std::path::Path, args: &[String]) -> Result<Worker, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut command = Command::new(exe);
    let faults = weft_client::process_faults();
    if faults.is_active() {
        command.arg("--faults").arg(faults.to_spec());
    }
    let mut child = command
        .arg("--config")
        .arg(config_path)
        .args(["bench", "worker"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting a worker: {e}"))?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    Ok(Worker { child, stdin, stdout })
}

/// Starts one worker per argument list, releases them together, and returns
/// (seconds from release to the last result, results). `settle` runs after
/// the last result and before the clock stops: work the phase left to the
/// servers' background tasks is part of the phase. With `checked`, each
/// worker then prints a second line, the check of what it read (outside the
/// timed region); a failed check fails the benchmark.
fn run_phase(
    config_path: &std::path::Path,
    per_worker: Vec<Vec<String>>,
    settle: &dyn Fn() -> Result<(), String>,
    checked: bool,
) -> Result<(f64, Vec<serde_json::Value>), String> {
    let mut workers = per_worker.iter().map(|args| start_worker(config_path, args)).collect::<Result<Vec<_>, _>>()?;
    for w in &mut workers {
        let mut line = String::new();
        w.stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            return Err(format!("worker failed to start: {line}"));
        }
    }
    let start = Instant::now();
    for w in &mut workers {
        w.stdin.write_all(b"go\n").map_err(|e| e.to_string())?;
        w.stdin.flush().map_err(|e| e.to_string())?;
    }
    let mut results = Vec::new();
    for w in &mut workers {
        results.push(worker_line(w)?);
    }
    settle()?;
    let seconds = start.elapsed().as_secs_f64();
    if checked {
        for w in &mut workers {
            worker_line(w)?;
        }
    }
    for mut w in workers {
        let _ = w.child.wait();
    }
    Ok((seconds, results))
}

/// The next JSON line of a worker; an `error` field is the worker's failure.
fn worker_line(w: &mut Worker) -> Result<serde_json::Value, String> {
    let mut line = String::new();
    w.stdout.read_line(&mut line).map_err(|e| e.to_string())?;
    let value: serde_json::Value = serde_json::from_str(line.trim()).map_err(|_| format!("worker failed: {line}"))?;
    if let Some(error) = value.get("error") {
        return Err(format!("worker failed: {}", error.as_str().unwrap_or(&error.to_string())));
    }
    Ok(value)
}

/// Nothing to wait for after a phase.
fn settled() -> Result<(), String> {
    Ok(())
}

/// Waits until every server's reclaim queue is empty: the datafiles of the
/// removed files are gone from disk (bounded: an error after `limit`).
fn wait_reclaimed(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    limit: std::time::Duration,
) -> Result<(), String> {
    let servers: Vec<u32> = client.config().servers.iter().map(|s| s.id).collect();
    let deadline = Instant::now() + limit;
    runtime.block_on(async {
        loop {
            let mut queued = 0;
            for server in &servers {
                let request = Request::ScanHandleRows { table: HandleTable::Reclaim.tag(), after: 0, max: 1 };
                match client.call(*server, request).await.map_err(|e| format!("server {server}: {e}"))? {
                    Reply::HandleRows(rows) => queued += rows.len(),
                    other => return Err(format!("server {server}: unexpected reply {other:?}")),
                }
            }
            if queued == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("removed files' datafiles still queued for reclaim after {limit:?}"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
}

/// The benchmark data: the byte at file offset `offset` of a file written
/// by rank seed `seed` (a multiplicative hash of its 8-byte word and the
/// seed, so misplaced, stale or zeroed bytes are all detected).
fn pattern_byte(offset: u64, seed: u64) -> u8 {
    let word = (offset / 8) ^ (seed << 48);
    (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (8 * (offset % 8))) as u8
}

/// Fills `buf` with the pattern of the bytes at `offset..`.
fn fill_pattern(buf: &mut [u8], offset: u64, seed: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(offset + i as u64, seed);
    }
}

/// The first byte of `buf` (read from file offset `offset`) that differs
/// from the pattern, as (file offset, found, expected).
fn first_mismatch(buf: &[u8], offset: u64, seed: u64) -> Option<(u64, u8, u8)> {
    buf.iter().enumerate().find_map(|(i, &b)| {
        let at = offset + i as u64;
        let expected = pattern_byte(at, seed);
        (b != expected).then_some((at, b, expected))
    })
}

fn drop_caches() -> Result<(), String> {
    // SAFETY: sync() has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| format!("dropping caches (needs root): {e}"))
}

fn bench_io(config: Config, config_path: PathBuf, args: IoArgs) -> Result<(), String> {
    let total = args.size_per_proc * args.procs as u64;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let client =
        runtime.block_on(async { Client::new(config.clone(), ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let _ = runtime.block_on(client.mkdir_all("/bench-io", 0o755));
    let caches = if args.drop_caches { "cold" } else { "warm" };
    let server_pids = server_pids(&config_path);
    let patterns: &[Pattern] = match args.pattern {
        Pattern::Both => &[Pattern::Shared, Pattern::FilePerProcess],
        p => std::slice::from_ref(match p {
            Pattern::Shared => &Pattern::Shared,
            _ => &Pattern::FilePerProcess,
        }),
    };
    let copy = memcpy_rate(total);
    emit(args.json, json!({"bench": "io", "method": "memcpy", "phase": "copy", "bytes": total, "mib_per_s": copy}));
    let tcp = loopback_ceiling(total, args.transfer)?;
    emit(
        args.json,
        json!({"bench": "io", "method": "loopback_tcp", "phase": "copy", "bytes": total, "transfer": args.transfer, "mib_per_s": tcp}),
    );
    let local_dir = args.local_dir.clone().unwrap_or_else(|| config.servers[0].storage.clone());
    let (disk_write, disk_read) = local_disk(&local_dir, total, args.transfer, args.drop_caches)?;
    emit(
        args.json,
        json!({"bench": "io", "method": "local_disk", "phase": "write", "bytes": total, "transfer": args.transfer, "mib_per_s": disk_write}),
    );
    emit(
        args.json,
        json!({"bench": "io", "method": "local_disk", "phase": "read", "caches": caches, "bytes": total, "transfer": args.transfer, "mib_per_s": disk_read}),
    );
    for pattern in patterns {
        let (name, path_of): (&str, RankFile<'_>) = match pattern {
            Pattern::Shared => {
                ("shared", Box::new(|r| ("/bench-io/shared".to_string(), r as u64 * args.size_per_proc)))
            }
            _ => ("file_per_process", Box::new(|r| (format!("/bench-io/fpp-{r}"), 0))),
        };
        for phase in args.phases.iter().map(|p| if *p == IoPhase::Write { "write" } else { "read" }) {
            if phase == "read" && args.drop_caches {
                drop_caches()?;
            }
            let per_worker = (0..args.procs)
                .map(|rank| {
                    let (path, offset) = path_of(rank);
                    vec![
                        "--task".into(),
                        format!("io-{phase}"),
                        "--rank".into(),
                        rank.to_string(),
                        "--path".into(),
                        path,
                        "--offset".into(),
                        offset.to_string(),
                        "--bytes".into(),
                        args.size_per_proc.to_string(),
                        "--transfer".into(),
                        args.transfer.to_string(),
                    ]
                })
                .collect();
            let servers_before = server_cpu_seconds(&server_pids);
            let (seconds, _) = run_phase(&config_path, per_worker, &settled, phase == "read")?;
            let server_cpu = servers_before.zip(server_cpu_seconds(&server_pids)).map(|(before, after)| after - before);
            let rate = mib_per_s(total, seconds);
            let ops = total.div_ceil(args.transfer.max(1));
            let mut result = json!({
                    "bench": "io", "method": "weft", "pattern": name, "phase": phase, "procs": args.procs,
                    "servers": config.servers.len(), "bytes": total, "transfer": args.transfer,
                    "caches": if phase == "read" { caches } else { "n/a" },
                    "mib_per_s": rate,
                    "ratio_to_loopback_tcp": (rate / tcp * 100.0).round() / 100.0,
                    "ratio_to_local_disk": (rate / if phase == "write" { disk_write } else { disk_read } * 100.0).round() / 100.0,
                    "ops_per_s": (ops as f64 / seconds).round(),
                    "verified": phase == "read",
            });
            if let Some(server_cpu) = server_cpu {
                result["server_cpu_us_per_op"] = json!((server_cpu / ops as f64 * 1e6 * 10.0).round() / 10.0);
            }
            emit(args.json, result);
        }
        if !args.keep {
            for rank in 0..args.procs {
                let (path, _) = path_of(rank);
                let _ = runtime.block_on(client.unlink(&path));
            }
        }
    }
    Ok(())
}

/// Memory copy bandwidth: `bytes` copied between two 64 MiB buffers in
/// 1 MiB pieces (the unit every data path here copies in).
fn memcpy_rate(bytes: u64) -> f64 {
    let source = vec![0x3cu8; 64 << 20];
    let mut target = vec![0u8; 64 << 20];
    let start = Instant::now();
    let mut done = 0u64;
    while done < bytes {
        let at = (done % (64 << 20)) as usize;
        let n = (1usize << 20).min((bytes - done) as usize);
        target[at..at + n].copy_from_slice(&source[at..at + n]);
        done += n as u64;
    }
    std::hint::black_box(&target);
    mib_per_s(bytes, start.elapsed().as_secs_f64())
}

/// Loopback TCP: one process sends `bytes` in `transfer`-sized writes to another.
fn loopback_ceiling(bytes: u64, transfer: u64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut sink = Command::new(exe)
        .args(["bench", "tcp-sink", "--bytes", &bytes.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut out = BufReader::new(sink.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| e.to_string())?;
    let address = line.trim().to_string();
    let mut stream = TcpStream::connect(&address).map_err(|e| format!("{address}: {e}"))?;
    let buf = vec![0x5au8; transfer.max(1) as usize];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(buf.len() as u64) as usize;
        stream.write_all(&buf[..n]).map_err(|e| e.to_string())?;
        sent += n as u64;
    }
    let mut ack = [0u8; 1];
    stream.read_exact(&mut ack).map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let _ = sink.wait();
    Ok(mib_per_s(bytes, seconds))
}

fn tcp_sink(args: SinkArgs) -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    println!("{}", listener.local_addr().map_err(|e| e.to_string())?);
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let (mut stream, _) = listener.accept().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 20];
    let mut received = 0u64;
    while received < args.bytes {
        let n = stream.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("sender closed early".into());
        }
        received += n as u64;
    }
    stream.write_all(&[1]).map_err(|e| e.to_string())
}

/// Local disk: the same bytes written then read with pwrite/pread in one process.
fn local_disk(dir: &std::path::Path, bytes: u64, transfer: u64, cold: bool) -> Result<(f64, f64), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let path = dir.join("bench-local-disk.tmp");
    let file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
    let buf = vec![0xa5u8; transfer.max(1) as usize];
    let start = Instant::now();
    let mut done = 0u64;
    while done < bytes {
        let n = (bytes - done).min(buf.len() as u64) as usize;
        file.write_all_at(&buf[..n], done).map_err(|e| e.to_string())?;
        done += n as u64;
    }
    let write = mib_per_s(bytes, start.elapsed().as_secs_f64());
    drop(file);
    if cold {
        drop_caches()?;
    }
    let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; transfer.max(1) as usize];
    let start = Instant::now();
    let mut done = 0u64;
    while done < bytes {
        let n = (bytes - done).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], done).map_err(|e| e.to_string())?;
        done += n as u64;
    }
    let read = mib_per_s(bytes, start.elapsed().as_secs_f64());
    let _ = std::fs::remove_file(&path);
    Ok((write, read))
}

fn bench_md(config: Config, config_path: PathBuf, args: MdArgs) -> Result<(), String> {
    let durable = match config.durability.metadata_sync {
        MetadataSync::Commit => "commit",
        MetadataSync::None => "none",
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let client =
        runtime.block_on(async { Client::new(config.clone(), ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let run_id = std::process::id();
    // A file system started by `weft up` on this machine lists its server
    // processes next to its configuration: their CPU time is measured too.
    let server_pids = server_pids(&config_path);
    for layout in ["unique_dir", "shared_dir"] {
        let base = format!("/bench-md-{run_id}-{layout}");
        runtime.block_on(client.mkdir_all(&base, 0o755)).map_err(|e| e.to_string())?;
        for rank in 0..args.procs {
            if layout == "unique_dir" {
                runtime.block_on(client.mkdir(&format!("{base}/p{rank}"), 0o755)).map_err(|e| e.to_string())?;
            }
        }
        for phase in args.phases.iter().map(|p| p.name()) {
            let per_worker = (0..args.procs)
                .map(|rank| {
                    let dir = if layout == "unique_dir" { format!("{base}/p{rank}") } else { base.clone() };
                    let mut v = vec![
                        "--task".into(),
                        format!("md-{phase}"),
                        "--rank".into(),
                        rank.to_string(),
                        "--path".into(),
                        dir,
                        "--count".into(),
                        args.files.to_string(),
                    ];
                    if let Some(n) = args.stripe_count {
                        v.push("--stripe-count".into());
                        v.push(n.to_string());
                    }
                    if args.client_driven {
                        v.push("--client-driven".into());
                    }
                    if args.by_path {
                        v.push("--by-path".into());
                    }
                    v.extend(["--inflight".into(), args.inflight.max(1).to_string()]);
                    v.extend(["--delay-ms".into(), args.delay_ms.to_string()]);
                    v
                })
                .collect();
            let servers_before = server_cpu_seconds(&server_pids);
            // A remove is done when its datafiles are gone: the servers
            // reclaim them in the background, so the phase waits for that.
            let reclaimed = || wait_reclaimed(&runtime, &client, std::time::Duration::from_secs(120));
            let settle: &dyn Fn() -> Result<(), String> = if phase == "remove" { &reclaimed } else { &settled };
            let (seconds, results) = run_phase(&config_path, per_worker, settle, false)?;
            let server_cpu = servers_before.zip(server_cpu_seconds(&server_pids)).map(|(before, after)| after - before);
            let ops = args.procs as u64 * args.files as u64;
            let cpu: f64 = results.iter().filter_map(|r| r.get("cpu_s").and_then(|v| v.as_f64())).sum();
            let mut latencies: Vec<f64> = results
                .iter()
                .filter_map(|r| r.get("latency_us").and_then(|v| v.as_array()))
                .flatten()
                .filter_map(|v| v.as_f64())
                .collect();
            latencies.sort_by(f64::total_cmp);
            let percentile = |q: f64| {
                if latencies.is_empty() {
                    return 0.0;
                }
                let at = ((latencies.len() - 1) as f64 * q).round() as usize;
                (latencies[at] * 10.0).round() / 10.0
            };
            let mut result = json!({
                "bench": "md", "layout": layout, "phase": phase, "procs": args.procs, "files_per_proc": args.files,
                "servers": config.servers.len(), "metadata_sync": durable,
                "method": if args.client_driven { "client_driven" } else { "aggregate" },
                "inflight": args.inflight.max(1), "paths": if args.by_path { "full" } else { "dir_handle" },
                "delay_ms": args.delay_ms,
                "stripe_count": args.stripe_count.map_or(json!("config"), |n| json!(n)),
                "ops_per_s": (ops as f64 / seconds).round(),
                "client_cpu_us_per_op": (cpu / ops as f64 * 1e6 * 10.0).round() / 10.0,
                "latency_us_p50": percentile(0.5),
                "latency_us_p99": percentile(0.99),
                "load_avg_1m": load_average(),
            });
            if let Some(server_cpu) = server_cpu {
                result["server_cpu_us_per_op"] = json!((server_cpu / ops as f64 * 1e6 * 10.0).round() / 10.0);
            }
            emit(args.json, result);
        }
        let _ = runtime.block_on(async {
            for rank in 0..args.procs {
                let _ = client.rmdir(&format!("{base}/p{rank}")).await;
            }
            client.rmdir(&base).await
        });
    }
    Ok(())
}

/// The servers' process ids: from the `pids` file `weft up` writes beside
/// the configuration, else the local processes running `server --config`
/// with this configuration (empty when there are none: servers elsewhere).
pub(crate) fn server_pids(config_path: &std::path::Path) -> Vec<u32> {
    if let Some(dir) = config_path.parent() {
        if let Ok(text) = std::fs::read_to_string(dir.join("pids")) {
            return text.lines().filter_map(|line| line.trim().parse().ok()).collect();
        }
    }
    let Ok(config) = std::fs::canonicalize(config_path) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| runs_server_of(*pid, &config))
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether process `pid`'s command line is `… server --config <config> …`.
fn runs_server_of(pid: u32, config: &std::path::Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let names_config = args.windows(2).any(|pair| {
        pair[0] == b"--config"
            && std::fs::canonicalize(std::ffi::OsStr::from_bytes(pair[1])).is_ok_and(|path| path == config)
    });
    names_config && args.contains(&&b"server"[..])
}

/// User + system CPU seconds of these processes (all threads), from
/// `/proc`; `None` when there are none or one has gone.
pub(crate) fn server_cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut total = 0.0;
    for pid in pids {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name: state is the first, utime the 12th, stime the 13th.
        let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        total += (utime + stime) / ticks;
    }
    Some(total)
}

/// The 1-minute load average (the machine is shared: every figure says how busy it was).
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

// ---------- worker ----------

/// User + system CPU seconds of this process (all threads).
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn worker(config: Config, args: WorkerArgs) -> Result<(), String> {
    // One thread: no cross-thread wakeups per request.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let mut defaults = ClientOptions::default();
    if args.delay_ms > 0 {
        defaults.faults.delay = std::time::Duration::from_millis(args.delay_ms);
    }
    let options = ClientOptions { client_driven: args.client_driven || defaults.client_driven, ..defaults };
    let client = runtime.block_on(async { Client::new(config, options) }).map_err(|e| e.to_string())?;
    let result = runtime.block_on(async {
        let _ = client.ping_all().await;
        let mut prepared = prepare(&client, &args).await?;
        println!("ready");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
        let cpu_before = cpu_seconds();
        let start = Instant::now();
        let latencies = if args.task.starts_with("md-") {
            execute_md(&client, &args).await?
        } else {
            execute(&client, &args, &mut prepared).await?;
            Vec::new()
        };
        let cpu_s = cpu_seconds() - cpu_before;
        let value = json!({"rank": args.rank, "seconds": start.elapsed().as_secs_f64(), "cpu_s": cpu_s, "latency_us": latencies});
        Ok::<_, String>((value, prepared))
    });
    match result {
        Ok((value, prepared)) => {
            println!("{value}");
            if args.task == "io-read" {
                // The coordinator has stopped its clock when it reads this line.
                std::io::stdout().flush().map_err(|e| e.to_string())?;
                let buf = prepared.as_ref().map_or(&[][..], |p| p.buf.as_slice());
                println!("{}", check_read(&args, buf));
            }
        }
        Err(error) => println!("{}", json!({"rank": args.rank, "error": error})),
    }
    Ok(())
}

/// What a worker prepared before `go`: the open file and, for I/O, its
/// whole buffer (filled with the pattern for writes), so the timed loop
/// only moves bytes.
struct Prepared {
    file: weft_client::File,
    buf: Vec<u8>,
}

async fn prepare(client: &Client, args: &WorkerArgs) -> Result<Option<Prepared>, String> {
    let file = match args.task.as_str() {
        "io-write" => client.create(&args.path, CreateOptions::default()).await,
        "io-read" => client.open(&args.path, 4).await,
        _ => return Ok(None),
    }
    .map_err(|e| format!("{}: {e}", args.path))?;
    let mut buf = vec![0u8; args.bytes as usize];
    if args.task == "io-write" {
        fill_pattern(&mut buf, args.offset, seed_of(args.rank));
    } else {
        // Pre-faulted, and not the pattern: a read that moves nothing fails the check.
        buf.iter_mut().for_each(|b| *b = 0xff);
    }
    Ok(Some(Prepared { file, buf }))
}

/// The pattern seed of rank `rank`'s bytes.
fn seed_of(rank: u32) -> u64 {
    rank as u64 + 1
}

async fn execute(client: &Client, args: &WorkerArgs, prepared: &mut Option<Prepared>) -> Result<(), String> {
    match args.task.as_str() {
        "io-write" | "io-read" => {
            let Prepared { file, buf } = prepared.as_mut().expect("prepared");
            let mut done = 0u64;
            while done < args.bytes {
                let n = (args.bytes - done).min(args.transfer) as usize;
                let at = args.offset + done;
                let piece = &mut buf[done as usize..done as usize + n];
                if args.task == "io-write" {
                    client.write_at(file, at, piece).await.map_err(|e| e.to_string())?;
                } else {
                    let got = client.read_at(file, at, piece).await.map_err(|e| e.to_string())?;
                    if got != n {
                        return Err(format!("short read at {at}: {got} of {n}"));
                    }
                }
                done += n as u64;
            }
            Ok(())
        }
        other => Err(format!("unknown worker task {other}")),
    }
}

/// The check of an `io-read` worker's bytes, after the timed phase.
fn check_read(args: &WorkerArgs, buf: &[u8]) -> serde_json::Value {
    match first_mismatch(buf, args.offset, seed_of(args.rank)) {
        None => json!({"rank": args.rank, "checked": buf.len()}),
        Some((at, found, expected)) => json!({"rank": args.rank, "error": format!(
            "{}: byte at offset {at} is {found:#04x}, the benchmark wrote {expected:#04x}", args.path
        )}),
    }
}

/// One metadata phase: `count` operations, `inflight` at a time; returns
/// each operation's latency in µs (in completion order).
async fn execute_md(client: &Client, args: &WorkerArgs) -> Result<Vec<f64>, String> {
    use futures::stream::StreamExt;
    // The directory is resolved once, inside the timed phase (one lookup
    // per component, not per operation).
    let dir = if args.by_path {
        None
    } else {
        Some(client.resolve(&args.path, true).await.map_err(|e| format!("{}: {e}", args.path))?.0)
    };
    let prefix = match args.task.as_str() {
        "md-create" | "md-stat" | "md-remove" => "f",
        "md-mkdir" | "md-rmdir" => "d",
        other => return Err(format!("unknown worker task {other}")),
    };
    let options = CreateOptions { exclusive: true, stripe_count: args.stripe_count, ..Default::default() };
    let one = |i: u32| async move {
        let name = format!("r{}-{prefix}{i}", args.rank);
        let start = Instant::now();
        let result = match (args.task.as_str(), dir) {
            ("md-create", Some(d)) => client.create_in(d, &name, options).await.map(drop),
            ("md-stat", Some(d)) => client.lstat_in(d, &name).await.map(drop),
            ("md-remove", Some(d)) => client.unlink_in(d, &name).await,
            ("md-mkdir", Some(d)) => client.mkdir_in(d, &name, 0o755).await.map(drop),
            ("md-rmdir", Some(d)) => client.rmdir_in(d, &name).await,
            (task, None) => {
                let path = format!("{}/{name}", args.path);
                match task {
                    "md-create" => client.create(&path, options).await.map(drop),
                    "md-stat" => client.lstat(&path).await.map(drop),
                    "md-remove" => client.unlink(&path).await,
                    "md-mkdir" => client.mkdir(&path, 0o755).await.map(drop),
                    _ => client.rmdir(&path).await,
                }
            }
            _ => unreachable!("task checked above"),
        };
        result.map(|_| start.elapsed().as_secs_f64() * 1e6).map_err(|e| format!("{}/{name}: {e}", args.path))
    };
    let results: Vec<Result<f64, String>> =
        futures::stream::iter(0..args.count).map(one).buffer_unordered(args.inflight.max(1) as usize).collect().await;
    results.into_iter().map(|r| r.map(|us| (us * 10.0).round() / 10.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check finds a corrupted byte, a byte from another rank's data, a
    /// misplaced piece and an untouched (never read) buffer.
    #[test]
    fn a_corrupted_read_is_reported() {
        let mut buf = vec![0u8; 4096];
        fill_pattern(&mut buf, 1 << 20, seed_of(2));
        assert_eq!(first_mismatch(&buf, 1 << 20, seed_of(2)), None);
        let mut corrupted = buf.clone();
        corrupted[1234] ^= 0x10;
        assert_eq!(
            first_mismatch(&corrupted, 1 << 20, seed_of(2)),
            Some(((1 << 20) + 1234, buf[1234] ^ 0x10, buf[1234]))
        );
        assert!(first_mismatch(&buf, 1 << 20, seed_of(3)).is_some(), "another rank's bytes");
        assert!(first_mismatch(&buf, (1 << 20) + 8, seed_of(2)).is_some(), "bytes from another offset");
        assert!(first_mismatch(&[0xff; 64], 0, seed_of(1)).is_some(), "a buffer the read never filled");
        let args = WorkerArgs {
            task: "io-read".into(),
            rank: 0,
            path: "/f".into(),
            offset: 0,
            bytes: 64,
            transfer: 64,
            count: 0,
            stripe_count: None,
            client_driven: false,
            inflight: 1,
            by_path: false,
            delay_ms: 0,
        };
        let mut data = vec![0u8; 64];
        fill_pattern(&mut data, 0, seed_of(0));
        data[63] = !data[63];
        let check = check_read(&args, &data);
        assert!(check["error"].as_str().is_some_and(|e| e.contains("offset 63")), "{check}");
    }
}
