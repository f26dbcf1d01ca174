//! File commands: ping, ls, cp, mkdir, rm, stat, statfs, layout, cat.

use std::io::{IsTerminal, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Args;
use futures::stream::{self, StreamExt, TryStreamExt};
use weft_client::{Client, ClientOptions, CreateOptions, File, Stat};
use weft_proto::message::ObjectKind;

use crate::cluster::load_config;

/// Bytes per request when copying.
const COPY_BLOCK_BYTES: usize = 4 << 20;
/// Blocks in flight when copying.
const COPY_BLOCKS_INFLIGHT: usize = 4;

/// A path argument.
#[derive(Args)]
pub struct PathArgs {
    /// A weft: path.
    path: String,
}

/// Arguments of `weft ls`.
#[derive(Args)]
pub struct LsArgs {
    /// Long listing (mode, owner, size, name).
    #[arg(short = 'l')]
    long: bool,
    /// A weft: path (default weft:/).
    #[arg(default_value = "weft:/")]
    path: String,
}

/// Arguments of `weft cp`.
#[derive(Args)]
pub struct CpArgs {
    /// Source: a local path or weft:/path.
    source: String,
    /// Destination: a local path or weft:/path.
    target: String,
    /// Strip size of a new weft file.
    #[arg(long)]
    strip_size: Option<u64>,
    /// Stripe count of a new weft file.
    #[arg(long)]
    stripe_count: Option<u32>,
}

/// Arguments of `weft mkdir`.
#[derive(Args)]
pub struct MkdirArgs {
    /// Create parents as needed; existing directories are fine.
    #[arg(short = 'p')]
    parents: bool,
    /// weft: paths.
    #[arg(required = true)]
    paths: Vec<String>,
}

/// Arguments of `weft rm`.
#[derive(Args)]
pub struct RmArgs {
    /// Remove directories and their contents.
    #[arg(short = 'r')]
    recursive: bool,
    /// weft: paths.
    #[arg(required = true)]
    paths: Vec<String>,
}

struct Session {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

fn session(config: Option<PathBuf>) -> Result<Session, String> {
    let config = load_config(config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client =
        runtime.block_on(async { Client::new(config, ClientOptions::default()) }).map_err(|e| e.to_string())?;
    Ok(Session { runtime, client })
}

fn weft_path(path: &str) -> Result<&str, String> {
    path.strip_prefix("weft:").ok_or_else(|| format!("`{path}` is not a weft: path"))
}

fn failed(path: &str, code: weft_proto::ErrorCode) -> String {
    format!("{path}: {code}")
}

pub fn ping(config: Option<PathBuf>) -> Result<(), String> {
    let s = session(config)?;
    let results = s.runtime.block_on(s.client.ping_all());
    let mut down = 0;
    for (id, result) in results {
        let address = s.client.config().server(id).map(|x| x.address.clone()).unwrap_or_default();
        match result {
            Ok(latency) => println!("server {id} {address} ok {:.3} ms", latency.as_secs_f64() * 1e3),
            Err(code) => {
                down += 1;
                println!("server {id} {address} DOWN ({code})")
            }
        }
    }
    if down > 0 {
        return Err(format!("{down} server(s) did not answer"));
    }
    Ok(())
}

fn kind_char(kind: ObjectKind) -> char {
    match kind {
        ObjectKind::Directory => 'd',
        ObjectKind::Symlink => 'l',
        ObjectKind::Fifo => 'p',
        ObjectKind::Socket => 's',
        ObjectKind::BlockDevice => 'b',
        ObjectKind::CharDevice => 'c',
        _ => '-',
    }
}

fn mode_string(kind: ObjectKind, mode: u32) -> String {
    let mut out = String::new();
    out.push(kind_char(kind));
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    out
}

pub fn ls(config: Option<PathBuf>, args: LsArgs) -> Result<(), String> {
    let s = session(config)?;
    let path = weft_path(&args.path)?;
    let client = &s.client;
    s.runtime.block_on(async {
        let (dir, kind) = client.resolve(path, true).await.map_err(|c| failed(&args.path, c))?;
        if kind != ObjectKind::Directory {
            let stat = client.stat_handle(dir).await.map_err(|c| failed(&args.path, c))?;
            println!("{}", if args.long { long_line(&stat, path) } else { path.to_string() });
            return Ok(());
        }
        let mut cookie = 0;
        loop {
            let (page, end) = client.readdir_plus_page(dir, cookie, 1024).await.map_err(|c| failed(&args.path, c))?;
            for entry in &page {
                cookie = entry.entry.sequence;
                match (&entry.stat, args.long) {
                    (Ok(stat), true) => println!("{}", long_line(stat, &entry.entry.name)),
                    (Err(code), true) => println!("?????????? {} ({code})", entry.entry.name),
                    (_, false) => println!("{}", entry.entry.name),
                }
            }
            if end || page.is_empty() {
                return Ok(());
            }
        }
    })
}

fn long_line(stat: &Stat, name: &str) -> String {
    let link = stat.symlink_target.as_ref().map(|t| format!(" -> {t}")).unwrap_or_default();
    format!("{} {:>5} {:>5} {:>12} {name}{link}", mode_string(stat.kind, stat.mode), stat.uid, stat.gid, stat.size)
}

pub fn mkdir(config: Option<PathBuf>, args: MkdirArgs) -> Result<(), String> {
    let s = session(config)?;
    for path in &args.paths {
        let inner = weft_path(path)?;
        let result = if args.parents {
            s.runtime.block_on(s.client.mkdir_all(inner, 0o755))
        } else {
            s.runtime.block_on(s.client.mkdir(inner, 0o755))
        };
        result.map_err(|c| failed(path, c))?;
    }
    Ok(())
}

async fn remove_tree(client: &Client, path: &str) -> Result<(), weft_proto::ErrorCode> {
    let (handle, kind) = client.resolve(path, false).await?;
    if kind != ObjectKind::Directory {
        return client.unlink(path).await;
    }
    loop {
        let (entries, _) = client.readdir_page(handle, 0, 1024).await?;
        if entries.is_empty() {
            break;
        }
        for entry in entries {
            let child = format!("{}/{}", path.trim_end_matches('/'), entry.name);
            Box::pin(remove_tree(client, &child)).await?;
        }
    }
    client.rmdir(path).await
}

pub fn rm(config: Option<PathBuf>, args: RmArgs) -> Result<(), String> {
    let s = session(config)?;
    for path in &args.paths {
        let inner = weft_path(path)?;
        let result = if args.recursive {
            s.runtime.block_on(remove_tree(&s.client, inner))
        } else {
            s.runtime.block_on(s.client.unlink(inner))
        };
        result.map_err(|c| failed(path, c))?;
    }
    Ok(())
}

pub fn stat(config: Option<PathBuf>, args: PathArgs) -> Result<(), String> {
    let s = session(config)?;
    let stat = s.runtime.block_on(s.client.lstat(weft_path(&args.path)?)).map_err(|c| failed(&args.path, c))?;
    println!("  path: {}", args.path);
    println!("handle: {}", stat.handle);
    println!("  kind: {:?}", stat.kind);
    println!("  mode: {:o} ({})", stat.mode, mode_string(stat.kind, stat.mode));
    println!("   uid: {}  gid: {}", stat.uid, stat.gid);
    println!("  size: {}", stat.size);
    println!(" mtime: {} ns", stat.mtime_ns);
    if let Some(target) = &stat.symlink_target {
        println!("target: {target}");
    }
    Ok(())
}

pub fn statfs(config: Option<PathBuf>) -> Result<(), String> {
    let s = session(config)?;
    let status = s.runtime.block_on(s.client.statfs()).map_err(|c| c.to_string())?;
    // Servers with the same device share one file system; the total counts it once.
    println!("{:>6} {:>16} {:>16} {:>10} {:>8}", "server", "bytes_total", "bytes_free", "objects", "device");
    for server in &status.servers {
        let device = server.storage_device >> 32;
        let (total, free, objects) = (server.bytes_total, server.bytes_free, server.objects);
        println!("{:>6} {total:>16} {free:>16} {objects:>10} {device:>8x}", server.server_id);
    }
    println!("{:>6} {:>16} {:>16} {:>10}", "total", status.bytes_total, status.bytes_free, status.objects);
    Ok(())
}

pub fn layout(config: Option<PathBuf>, args: PathArgs) -> Result<(), String> {
    let s = session(config)?;
    let stat = s.runtime.block_on(s.client.stat(weft_path(&args.path)?)).map_err(|c| failed(&args.path, c))?;
    let layout = stat.layout.ok_or_else(|| format!("{}: not a regular file", args.path))?;
    println!("file: {}", args.path);
    println!("size: {}", stat.size);
    println!("strip_size: {}", layout.distribution.strip_bytes);
    println!("stripe_count: {}", layout.distribution.stripe_count);
    for (index, handle) in layout.datafiles.iter().enumerate() {
        let server = s.client.server_of(*handle).map_err(|c| c.to_string())?;
        let address = s.client.config().server(server).map(|x| x.address.clone()).unwrap_or_default();
        println!("stripe {index}: server {server} ({address}) datafile {handle}");
    }
    Ok(())
}

pub fn cat(config: Option<PathBuf>, args: PathArgs) -> Result<(), String> {
    let s = session(config)?;
    let client = &s.client;
    let file = s.runtime.block_on(client.open(weft_path(&args.path)?, 4)).map_err(|c| failed(&args.path, c))?;
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    let mut buf = vec![0u8; COPY_BLOCK_BYTES];
    loop {
        let n = s.runtime.block_on(client.read_at(&file, offset, &mut buf)).map_err(|c| failed(&args.path, c))?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n]).map_err(|e| e.to_string())?;
        offset += n as u64;
    }
}

/// Shows progress on a terminal.
struct Progress {
    total: u64,
    done: AtomicU64,
    visible: bool,
}

impl Progress {
    fn new(total: u64) -> Arc<Progress> {
        Arc::new(Progress { total, done: AtomicU64::new(0), visible: std::io::stderr().is_terminal() })
    }

    fn add(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.visible && self.total > 0 {
            eprint!("\r{:>3}% {} / {} bytes", done * 100 / self.total, done, self.total);
        }
    }

    fn finish(&self) {
        if self.visible {
            eprintln!();
        }
    }
}

enum Endpoint {
    Local(PathBuf),
    Weft(String),
}

fn endpoint(text: &str) -> Endpoint {
    match text.strip_prefix("weft:") {
        Some(path) => Endpoint::Weft(path.to_string()),
        None => Endpoint::Local(PathBuf::from(text)),
    }
}

/// Opens or creates the weft destination, emptied.
async fn weft_destination(client: &Client, path: &str, args: &CpArgs) -> Result<File, String> {
    let options = CreateOptions { strip_bytes: args.strip_size, stripe_count: args.stripe_count, ..Default::default() };
    let file = client.create(path, options).await.map_err(|c| failed(path, c))?;
    client.truncate_file(&file, 0).await.map_err(|c| failed(path, c))?;
    Ok(file)
}

pub fn cp(config: Option<PathBuf>, args: CpArgs) -> Result<(), String> {
    let s = session(config)?;
    let client = &s.client;
    let args = &args;
    s.runtime.block_on(async {
        match (endpoint(&args.source), endpoint(&args.target)) {
            (Endpoint::Local(from), Endpoint::Weft(to)) => {
                let source = std::fs::File::open(&from).map_err(|e| format!("{}: {e}", from.display()))?;
                let size = source.metadata().map_err(|e| e.to_string())?.len();
                let file = weft_destination(client, &to, args).await?;
                let progress = Progress::new(size);
                let source = Arc::new(source);
                copy_blocks(size, |offset, len| {
                    let source = source.clone();
                    let (file, progress) = (&file, progress.clone());
                    async move {
                        let mut buf = vec![0u8; len];
                        source.read_exact_at(&mut buf, offset).map_err(|e| e.to_string())?;
                        client.write_at(file, offset, &buf).await.map_err(|c| failed(&args.target, c))?;
                        progress.add(len as u64);
                        Ok(())
                    }
                })
                .await?;
                progress.finish();
                Ok(())
            }
            (Endpoint::Weft(from), Endpoint::Local(to)) => {
                let file = client.open(&from, 4).await.map_err(|c| failed(&args.source, c))?;
                let size = client.file_size(&file).await.map_err(|c| failed(&args.source, c))?;
                let target = std::fs::File::create(&to).map_err(|e| format!("{}: {e}", to.display()))?;
                let progress = Progress::new(size);
                let target = Arc::new(target);
                copy_blocks(size, |offset, len| {
                    let target = target.clone();
                    let (file, progress) = (&file, progress.clone());
                    async move {
                        let mut buf = vec![0u8; len];
                        let n = client.read_at(file, offset, &mut buf).await.map_err(|c| failed(&args.source, c))?;
                        target.write_all_at(&buf[..n], offset).map_err(|e| e.to_string())?;
                        progress.add(n as u64);
                        Ok(())
                    }
                })
                .await?;
                progress.finish();
                target.sync_all().map_err(|e| e.to_string())
            }
            (Endpoint::Weft(from), Endpoint::Weft(to)) => {
                let source = client.open(&from, 4).await.map_err(|c| failed(&args.source, c))?;
                let size = client.file_size(&source).await.map_err(|c| failed(&args.source, c))?;
                let file = weft_destination(client, &to, args).await?;
                let progress = Progress::new(size);
                copy_blocks(size, |offset, len| {
                    let (source, file, progress) = (&source, &file, progress.clone());
                    async move {
                        let mut buf = vec![0u8; len];
                        let n = client.read_at(source, offset, &mut buf).await.map_err(|c| failed(&args.source, c))?;
                        client.write_at(file, offset, &buf[..n]).await.map_err(|c| failed(&args.target, c))?;
                        progress.add(n as u64);
                        Ok(())
                    }
                })
                .await?;
                progress.finish();
                Ok(())
            }
            (Endpoint::Local(_), Endpoint::Local(_)) => Err("one side of cp must be a weft: path".into()),
        }
    })
}

/// Runs `copy(offset, len)` over `[0, size)` in blocks, several at once.
async fn copy_blocks<F, Fut>(size: u64, copy: F) -> Result<(), String>
where
    F: Fn(u64, usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let blocks = size.div_ceil(COPY_BLOCK_BYTES as u64);
    stream::iter(0..blocks)
        .map(|block| {
            let offset = block * COPY_BLOCK_BYTES as u64;
            let len = (size - offset).min(COPY_BLOCK_BYTES as u64) as usize;
            copy(offset, len)
        })
        .buffer_unordered(COPY_BLOCKS_INFLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}
