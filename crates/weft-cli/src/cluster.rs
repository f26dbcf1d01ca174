//! Commands that create and run file systems: genconfig, mkfs, server, up,
//! down, mount, umount.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use weft_config::{Config, GenOptions, MetadataSync};

/// Arguments of `weft genconfig`.
#[derive(Args)]
pub struct GenconfigArgs {
    /// Number of servers.
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Host address the servers listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port of server 0; server i uses base-port + i.
    #[arg(long, default_value_t = 7101)]
    base_port: u16,
    /// Directory under which each server stores its data.
    #[arg(long)]
    root: PathBuf,
    /// Metadata durability: commit (default) or none (scratch file systems).
    #[arg(long, value_parser = parse_sync, default_value = "commit")]
    metadata_sync: MetadataSync,
    /// Where to write the file (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

fn parse_sync(text: &str) -> Result<MetadataSync, String> {
    match text {
        "commit" => Ok(MetadataSync::Commit),
        "none" => Ok(MetadataSync::None),
        _ => Err(format!("`{text}`: expected commit or none")),
    }
}

/// Arguments of `weft mkfs`.
#[derive(Args)]
pub struct MkfsArgs {
    /// Only this server (default: every server in the configuration).
    #[arg(long)]
    id: Option<u32>,
}

/// Arguments of `weft server`.
#[derive(Args)]
pub struct ServerArgs {
    /// Server id from the configuration.
    #[arg(long, conflicts_with = "id_from_env")]
    id: Option<u32>,
    /// Take the id from the MPI launcher's rank variable
    /// (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID).
    #[arg(long)]
    id_from_env: bool,
}

/// Arguments of `weft up`.
#[derive(Args)]
pub struct UpArgs {
    /// Directory holding the configuration, server storage and logs.
    #[arg(long, default_value = ".weft")]
    dir: PathBuf,
    /// Number of servers.
    #[arg(long, default_value_t = 4)]
    servers: u32,
    /// Port of server 0.
    #[arg(long, default_value_t = 7101)]
    base_port: u16,
    /// Host address (a 127.0.0.0/8 address).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Metadata durability: commit (default) or none.
    #[arg(long, value_parser = parse_sync, default_value = "commit")]
    metadata_sync: MetadataSync,
}

/// Arguments of `weft down`.
#[derive(Args)]
pub struct DownArgs {
    /// Directory given to `weft up`.
    #[arg(long, default_value = ".weft")]
    dir: PathBuf,
}

/// Arguments of `weft mount`.
#[derive(Args)]
pub struct MountArgs {
    /// Directory to mount on.
    mountpoint: PathBuf,
    /// Return once the mount is live and serve from a background process.
    #[arg(long)]
    daemon: bool,
    /// Where the daemon writes its log (default: discarded).
    #[arg(long)]
    log: Option<PathBuf>,
    /// How long the kernel caches attributes of regular files (an open always sees the current size).
    #[arg(long, default_value_t = 1000)]
    attr_ttl_ms: u64,
    /// How long the kernel caches names and directory attributes.
    #[arg(long, default_value_t = 1000)]
    entry_ttl_ms: u64,
    /// A server that does not answer within this makes the call fail with EIO.
    #[arg(long, default_value_t = 5000)]
    request_timeout_ms: u64,
    /// Bypass the page cache (breaks shared mmap and executing from the mount).
    #[arg(long)]
    direct_io: bool,
    /// Buffer writes in the kernel's page cache (write errors then surface at fsync/close; see README).
    #[arg(long)]
    writeback_cache: bool,
}

/// Arguments of `weft umount`.
#[derive(Args)]
pub struct UmountArgs {
    /// The mount point.
    mountpoint: PathBuf,
    /// Detach even while files are open.
    #[arg(long)]
    lazy: bool,
}

pub fn mount(config_path: Option<PathBuf>, args: MountArgs) -> Result<(), String> {
    let config = load_config(config_path.clone())?;
    let options = weft_fuse::MountOptions {
        // Absolute before a daemon changes directory (recorded in the mount's source).
        config_path: config_path.as_deref().and_then(|p| std::path::absolute(p).ok()),
        attr_ttl: Duration::from_millis(args.attr_ttl_ms),
        entry_ttl: Duration::from_millis(args.entry_ttl_ms),
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        direct_io: args.direct_io,
        writeback_cache: args.writeback_cache,
        ..weft_fuse::MountOptions::default()
    };
    if args.daemon {
        weft_fuse::daemonize_then_mount(config, args.mountpoint, options, args.log)
    } else {
        weft_fuse::run_mount(config, args.mountpoint, options)
    }
}

pub fn umount(args: UmountArgs) -> Result<(), String> {
    weft_fuse::umount(&args.mountpoint, args.lazy)
}

/// Loads the configuration named by `--config` / `WEFT_CONFIG`.
pub fn load_config(path: Option<PathBuf>) -> Result<Config, String> {
    let path = path.ok_or("no configuration: pass --config F or set WEFT_CONFIG")?;
    Config::load(&path).map_err(|e| e.to_string())
}

pub fn genconfig(args: GenconfigArgs) -> Result<(), String> {
    let options = GenOptions {
        servers: args.servers,
        host: args.host,
        base_port: args.base_port,
        root: absolute(&args.root)?,
        metadata_sync: args.metadata_sync,
    };
    let config = weft_config::generate(&options);
    let text = config.to_toml();
    Config::parse(&text, "generated").map_err(|e| e.to_string())?;
    make_key(&config)?;
    match args.output {
        Some(path) => std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// Creates the key file the configuration names, unless it exists.
fn make_key(config: &Config) -> Result<(), String> {
    if let Some(path) = &config.auth.key_file {
        if weft_config::create_key(path)? {
            eprintln!("created key file {} (0600; servers and key clients need it)", path.display());
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> Result<PathBuf, String> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir().map_err(|e| e.to_string())?.join(path))
}

pub fn mkfs(config: Option<PathBuf>, args: MkfsArgs) -> Result<(), String> {
    let config = load_config(config)?;
    let ids: Vec<u32> = match args.id {
        Some(id) => vec![id],
        None => config.servers.iter().map(|s| s.id).collect(),
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    for id in ids {
        let service = runtime
            .block_on(weft_server::Service::open(config.clone(), id))
            .map_err(|e| format!("server {id}: {e}"))?;
        runtime.block_on(service.metadata.committer.flush()).map_err(|e| format!("server {id}: {e}"))?;
        println!(
            "server {id}: storage ready at {}",
            config.server(id).map(|s| s.storage.display().to_string()).unwrap_or_default()
        );
    }
    Ok(())
}

/// The rank a launcher gives this process.
fn rank_from_env() -> Result<u32, String> {
    for name in ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"] {
        if let Ok(value) = std::env::var(name) {
            return value.parse().map_err(|_| format!("{name}=`{value}` is not a number"));
        }
    }
    Err("--id-from-env: none of OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID is set".into())
}

pub fn server(config: Option<PathBuf>, args: ServerArgs) -> Result<(), String> {
    let config = load_config(config)?;
    let id = match (args.id, args.id_from_env) {
        (Some(id), _) => id,
        (None, true) => rank_from_env()?,
        (None, false) => return Err("pass --id N or --id-from-env".into()),
    };
    weft_server::run_blocking(config, id).map_err(|e| e.to_string())
}

fn pid_file(dir: &Path) -> PathBuf {
    dir.join("pids")
}

pub fn up(args: UpArgs) -> Result<(), String> {
    let dir = absolute(&args.dir)?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if pid_file(&dir).exists() {
        return Err(format!(
            "{} already has a running file system (run `weft down --dir {}` first)",
            dir.display(),
            args.dir.display()
        ));
    }
    let config_path = dir.join("weft.toml");
    let options = GenOptions {
        servers: args.servers,
        host: args.host,
        base_port: args.base_port,
        root: dir.clone(),
        metadata_sync: args.metadata_sync,
    };
    let config = weft_config::generate(&options);
    make_key(&config)?;
    std::fs::write(&config_path, config.to_toml()).map_err(|e| format!("{}: {e}", config_path.display()))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut pids = Vec::new();
    for server in &config.servers {
        let log = std::fs::File::create(dir.join(format!("server-{}.log", server.id))).map_err(|e| e.to_string())?;
        let child = spawn_detached(&exe, &config_path, server.id, log)?;
        pids.push(child);
    }
    let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
    std::fs::write(pid_file(&dir), text).map_err(|e| e.to_string())?;
    if let Err(message) = wait_until_ready(&config, Duration::from_secs(30)) {
        let _ = stop_pids(&pids);
        let _ = std::fs::remove_file(pid_file(&dir));
        return Err(format!("{message} (logs in {})", dir.display()));
    }
    let mountpoint = dir.join("mnt");
    if let Err(message) = mount_in_background(&exe, &config_path, &mountpoint, &dir) {
        let _ = stop_pids(&pids);
        let _ = std::fs::remove_file(pid_file(&dir));
        return Err(message);
    }
    println!("export WEFT_CONFIG={}", config_path.display());
    println!("mounted at {}", mountpoint.display());
    Ok(())
}

/// Runs `weft mount --daemon` in a fresh process (no threads of ours are
/// forked) and waits until the mount is live.
fn mount_in_background(exe: &Path, config: &Path, mountpoint: &Path, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    let output = std::process::Command::new(exe)
        .arg("--config")
        .arg(config)
        .arg("mount")
        .arg(mountpoint)
        .arg("--daemon")
        .arg("--log")
        .arg(dir.join("mount.log"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("starting the mount: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("mounting {}: {}", mountpoint.display(), String::from_utf8_lossy(&output.stderr).trim()))
    }
}

fn spawn_detached(exe: &Path, config: &Path, id: u32, log: std::fs::File) -> Result<u32, String> {
    use std::os::unix::process::CommandExt;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("server")
        .arg("--config")
        .arg(config)
        .arg("--id")
        .arg(id.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err);
    // SAFETY: setsid is async-signal-safe; it detaches the server from our terminal and session.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| format!("starting server {id}: {e}"))?;
    Ok(child.id())
}

/// Pings every server until all answer or the deadline passes.
pub fn wait_until_ready(config: &Config, limit: Duration) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let client =
        weft_client::Client::new(config.clone(), weft_client::ClientOptions::default()).map_err(|e| e.to_string())?;
    let start = Instant::now();
    loop {
        let results = runtime.block_on(client.ping_all());
        let down: Vec<u32> = results.iter().filter(|(_, r)| r.is_err()).map(|(id, _)| *id).collect();
        if down.is_empty() {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(format!("servers {down:?} did not answer within {}s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

fn stop_pids(pids: &[u32]) -> Result<(), String> {
    for pid in pids {
        // SAFETY: sending SIGTERM to a process we started.
        unsafe { libc::kill(*pid as i32, libc::SIGTERM) };
    }
    let start = Instant::now();
    while pids.iter().any(|p| alive(*p)) && start.elapsed() < Duration::from_secs(10) {
        reap();
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids.iter().filter(|p| alive(**p)) {
        // SAFETY: as above; the server ignored SIGTERM for 10 s.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    Ok(())
}

/// Reaps exited children (when `up` and `down` run in one process, e.g. tests).
fn reap() {
    // SAFETY: non-blocking waitpid on any child.
    unsafe { while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {} }
}

pub fn down(args: DownArgs) -> Result<(), String> {
    let dir = absolute(&args.dir)?;
    let text = std::fs::read_to_string(pid_file(&dir))
        .map_err(|_| format!("no file system running under {}", dir.display()))?;
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let mountpoint = dir.join("mnt");
    if weft_fuse::is_mounted(&mountpoint) {
        // Detach first so the mount daemon ends before its servers do.
        if let Err(message) = weft_fuse::umount(&mountpoint, true) {
            eprintln!("weft: unmounting {}: {message}", mountpoint.display());
        }
    }
    stop_pids(&pids)?;
    std::fs::remove_file(pid_file(&dir)).map_err(|e| e.to_string())?;
    println!("stopped {} servers", pids.len());
    Ok(())
}
