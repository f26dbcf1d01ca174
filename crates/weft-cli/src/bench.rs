//! Benchmarks (not tests): `weft bench io`, `weft bench md` and
//! `weft bench hpio` (in [`crate::hpio`]).
//!
//! A coordinator starts P worker processes (hidden `weft bench worker`),
//! waits until all are connected and ready, releases them together, and
//! measures from release until the last one reports. Each result is one
//! JSON object per line with `--json`. Baselines are measured in the same
//! run: the loopback TCP ceiling (a plain socket copy between two
//! processes) and the local disk rate for the same bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use weft_client::{Client, ClientOptions, CreateOptions};
use weft_config::{Config, MetadataSync};

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
    /// Internal: one worker process of a benchmark.
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Internal: the receiving end of the loopback TCP baseline.
    #[command(hide = true)]
    TcpSink(SinkArgs),
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
    /// Directory for the local-disk baseline (default: server 0's storage).
    #[arg(long)]
    local_dir: Option<PathBuf>,
    /// Print one JSON object per result.
    #[arg(long)]
    json: bool,
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
    /// Print one JSON object per result.
    #[arg(long)]
    json: bool,
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
    }
}

fn emit(json_output: bool, value: serde_json::Value) {
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
    let mut child = Command::new(exe)
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
/// (seconds from release to the last result, results).
fn run_phase(config_path: &std::path::Path, per_worker: Vec<Vec<String>>) -> Result<(f64, Vec<serde_json::Value>), String> {
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
        let mut line = String::new();
        w.stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        let value: serde_json::Value = serde_json::from_str(line.trim()).map_err(|_| format!("worker failed: {line}"))?;
        if let Some(error) = value.get("error") {
            return Err(format!("worker failed: {error}"));
        }
        results.push(value);
    }
    let seconds = start.elapsed().as_secs_f64();
    for mut w in workers {
        let _ = w.child.wait();
    }
    Ok((seconds, results))
}

fn drop_caches() -> Result<(), String> {
    // SAFETY: sync() has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| format!("dropping caches (needs root): {e}"))
}

fn bench_io(config: Config, config_path: PathBuf, args: IoArgs) -> Result<(), String> {
    let total = args.size_per_proc * args.procs as u64;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let client = runtime.block_on(async { Client::new(config.clone(), ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let _ = runtime.block_on(client.mkdir_all("/bench-io", 0o755));
    let caches = if args.drop_caches { "cold" } else { "warm" };
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
    emit(args.json, json!({"bench": "io", "method": "loopback_tcp", "phase": "copy", "bytes": total, "transfer": args.transfer, "mib_per_s": tcp}));
    let local_dir = args.local_dir.clone().unwrap_or_else(|| config.servers[0].storage.clone());
    let (disk_write, disk_read) = local_disk(&local_dir, total, args.transfer, args.drop_caches)?;
    emit(args.json, json!({"bench": "io", "method": "local_disk", "phase": "write", "bytes": total, "transfer": args.transfer, "mib_per_s": disk_write}));
    emit(args.json, json!({"bench": "io", "method": "local_disk", "phase": "read", "caches": caches, "bytes": total, "transfer": args.transfer, "mib_per_s": disk_read}));
    for pattern in patterns {
        let (name, path_of): (&str, Box<dyn Fn(u32) -> (String, u64)>) = match pattern {
            Pattern::Shared => ("shared", Box::new(|r| ("/bench-io/shared".to_string(), r as u64 * args.size_per_proc))),
            _ => ("file_per_process", Box::new(|r| (format!("/bench-io/fpp-{r}"), 0))),
        };
        for phase in ["write", "read"] {
            if phase == "read" && args.drop_caches {
                drop_caches()?;
            }
            let per_worker = (0..args.procs)
                .map(|rank| {
                    let (path, offset) = path_of(rank);
                    vec![
                        "--task".into(), format!("io-{phase}"),
                        "--rank".into(), rank.to_string(),
                        "--path".into(), path,
                        "--offset".into(), offset.to_string(),
                        "--bytes".into(), args.size_per_proc.to_string(),
                        "--transfer".into(), args.transfer.to_string(),
                    ]
                })
                .collect();
            let (seconds, _) = run_phase(&config_path, per_worker)?;
            let rate = mib_per_s(total, seconds);
            emit(args.json, json!({
                "bench": "io", "method": "weft", "pattern": name, "phase": phase, "procs": args.procs,
                "servers": config.servers.len(), "bytes": total, "transfer": args.transfer,
                "caches": if phase == "read" { caches } else { "n/a" },
                "mib_per_s": rate,
                "ratio_to_loopback_tcp": (rate / tcp * 100.0).round() / 100.0,
                "ratio_to_local_disk": (rate / if phase == "write" { disk_write } else { disk_read } * 100.0).round() / 100.0,
            }));
        }
        for rank in 0..args.procs {
            let (path, _) = path_of(rank);
            let _ = runtime.block_on(client.unlink(&path));
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
    let client = runtime.block_on(async { Client::new(config.clone(), ClientOptions::default()) }).map_err(|e| e.to_string())?;
    let run_id = std::process::id();
    for layout in ["unique_dir", "shared_dir"] {
        let base = format!("/bench-md-{run_id}-{layout}");
        runtime.block_on(client.mkdir_all(&base, 0o755)).map_err(|e| e.to_string())?;
        for rank in 0..args.procs {
            if layout == "unique_dir" {
                runtime.block_on(client.mkdir(&format!("{base}/p{rank}"), 0o755)).map_err(|e| e.to_string())?;
            }
        }
        for phase in ["create", "stat", "remove"] {
            let per_worker = (0..args.procs)
                .map(|rank| {
                    let dir = if layout == "unique_dir" { format!("{base}/p{rank}") } else { base.clone() };
                    let mut v = vec![
                        "--task".into(), format!("md-{phase}"),
                        "--rank".into(), rank.to_string(),
                        "--path".into(), dir,
                        "--count".into(), args.files.to_string(),
                    ];
                    if let Some(n) = args.stripe_count {
                        v.push("--stripe-count".into());
                        v.push(n.to_string());
                    }
                    if args.client_driven {
                        v.push("--client-driven".into());
                    }
                    v
                })
                .collect();
            let (seconds, results) = run_phase(&config_path, per_worker)?;
            let ops = args.procs as u64 * args.files as u64;
            let cpu: f64 = results.iter().filter_map(|r| r.get("cpu_s").and_then(|v| v.as_f64())).sum();
            emit(args.json, json!({
                "bench": "md", "layout": layout, "phase": phase, "procs": args.procs, "files_per_proc": args.files,
                "servers": config.servers.len(), "metadata_sync": durable,
                "method": if args.client_driven { "client_driven" } else { "aggregate" },
                "ops_per_s": (ops as f64 / seconds).round(),
                "client_cpu_us_per_op": (cpu / ops as f64 * 1e6 * 10.0).round() / 10.0,
            }));
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

// ---------- worker ----------

fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn worker(config: Config, args: WorkerArgs) -> Result<(), String> {
    // One thread: no cross-thread wakeups per request.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let defaults = ClientOptions::default();
    let options = ClientOptions { client_driven: args.client_driven || defaults.client_driven, ..defaults };
    let client = runtime.block_on(async { Client::new(config, options) }).map_err(|e| e.to_string())?;
    let result = runtime.block_on(async {
        let _ = client.ping_all().await;
        let prepared = prepare(&client, &args).await?;
        println!("ready");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
        let cpu_before = cpu_seconds();
        let start = Instant::now();
        execute(&client, &args, prepared).await?;
        Ok::<_, String>(json!({"rank": args.rank, "seconds": start.elapsed().as_secs_f64(), "cpu_s": cpu_seconds() - cpu_before}))
    });
    match result {
        Ok(value) => println!("{value}"),
        Err(error) => println!("{}", json!({"rank": args.rank, "error": error})),
    }
    Ok(())
}

async fn prepare(client: &Client, args: &WorkerArgs) -> Result<Option<weft_client::File>, String> {
    match args.task.as_str() {
        "io-write" => {
            let file = client.create(&args.path, CreateOptions::default()).await.map_err(|e| format!("{}: {e}", args.path))?;
            Ok(Some(file))
        }
        "io-read" => Ok(Some(client.open(&args.path, 4).await.map_err(|e| format!("{}: {e}", args.path))?)),
        _ => Ok(None),
    }
}

async fn execute(client: &Client, args: &WorkerArgs, file: Option<weft_client::File>) -> Result<(), String> {
    let name = |i: u32| format!("{}/r{}-f{i}", args.path, args.rank);
    match args.task.as_str() {
        "io-write" | "io-read" => {
            let file = file.expect("prepared");
            let mut buf = vec![(args.rank as u8).wrapping_add(1); args.transfer as usize];
            let mut done = 0u64;
            while done < args.bytes {
                let n = (args.bytes - done).min(args.transfer) as usize;
                let at = args.offset + done;
                if args.task == "io-write" {
                    client.write_at(&file, at, &buf[..n]).await.map_err(|e| e.to_string())?;
                } else {
                    let got = client.read_at(&file, at, &mut buf[..n]).await.map_err(|e| e.to_string())?;
                    if got != n {
                        return Err(format!("short read at {at}: {got} of {n}"));
                    }
                }
                done += n as u64;
            }
            Ok(())
        }
        "md-create" => {
            let options = CreateOptions { exclusive: true, stripe_count: args.stripe_count, ..Default::default() };
            for i in 0..args.count {
                client.create(&name(i), options).await.map_err(|e| format!("{}: {e}", name(i)))?;
            }
            Ok(())
        }
        "md-stat" => {
            for i in 0..args.count {
                client.stat(&name(i)).await.map_err(|e| format!("{}: {e}", name(i)))?;
            }
            Ok(())
        }
        "md-remove" => {
            for i in 0..args.count {
                client.unlink(&name(i)).await.map_err(|e| format!("{}: {e}", name(i)))?;
            }
            Ok(())
        }
        other => Err(format!("unknown worker task {other}")),
    }
}
