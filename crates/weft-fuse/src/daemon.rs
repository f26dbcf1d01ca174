//! Mounting and unmounting: the foreground mount, the daemon, `umount`.
//!
//! Before mounting, the daemon forks a small watchdog process that holds
//! the read end of a pipe: if the daemon dies, even by SIGKILL, the pipe
//! reaches end of file and the watchdog detaches the mount, so nobody is
//! left with "Transport endpoint is not connected". (fuser's
//! `auto_unmount` relies on a `fusermount3` helper that did not survive
//! here.) On a clean exit the daemon first tells the watchdog to leave the
//! mount point alone, so a later mount at the same place is never touched.
//! SIGTERM and SIGINT unmount cleanly; the daemon then exits when the
//! kernel ends the session (after the last open file is closed). SIGUSR1
//! writes the mount's request counters to its log ([`counters_line`]).
//!
//! `daemonize_then_mount` forks before any thread or async runtime exists
//! (a forked runtime would be unusable), and the parent returns only when
//! the child reports, through a pipe, that the mount is live or failed.

use std::io::{BufRead, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fuser::{MountOption, Session, SessionACL};
use tokio::signal::unix::{signal, SignalKind};
use weft_client::counters::Snapshot;
use weft_client::{Client, ClientOptions};
use weft_config::Config;

use crate::fs::WeftFs;
use crate::options::MountOptions;

/// Mounts in the foreground and serves until unmounted (by SIGTERM,
/// SIGINT, `umount` or `weft umount`).
pub fn run_mount(config: Config, mountpoint: PathBuf, options: MountOptions) -> Result<(), String> {
    serve(config, &mountpoint, options, |_| {})
}

/// Forks; the child mounts and serves, the parent returns `Ok` once the
/// mount is live (or the child's error). Call before any thread or runtime
/// is started. The child's standard error goes to `log_file` (appended) or
/// to /dev/null; it never returns from this function.
pub fn daemonize_then_mount(
    config: Config,
    mountpoint: PathBuf,
    options: MountOptions,
    log_file: Option<PathBuf>,
) -> Result<(), String> {
    let mountpoint = mountpoint.canonicalize().map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    let log = match &log_file {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => std::fs::OpenOptions::new().write(true).open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?,
    };
    let (reader, writer) = pipe()?;
    // SAFETY: the caller guarantees no other thread runs, so the child may
    // continue to run arbitrary code after fork.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(reader);
            detach(&log);
            let mut writer = std::fs::File::from(writer);
            let result = serve(config, &mountpoint, options, move |ready| {
                let message = match ready {
                    Ok(()) => "ok\n".to_string(),
                    Err(message) => format!("{}\n", message.replace('\n', " ")),
                };
                let _ = writer.write_all(message.as_bytes());
                drop(writer); // the parent stops waiting now
            });
            if let Err(message) = &result {
                eprintln!("weft mount: {message}");
            }
            std::process::exit(if result.is_ok() { 0 } else { 1 })
        }
        _child => {
            drop(writer);
            // One line: "ok" or the error. End of file first means the
            // child died before it could say.
            let mut answer = String::new();
            let _ = std::io::BufReader::new(std::fs::File::from(reader)).read_line(&mut answer);
            match answer.lines().next() {
                Some("ok") => Ok(()),
                Some(message) => Err(message.to_string()),
                None => Err("the mount daemon exited before mounting".to_string()),
            }
        }
    }
}

/// Unmounts `mountpoint`. With `lazy`, detaches it even while files are
/// open (`MNT_DETACH`). As non-root, falls back to `fusermount3 -u`.
pub fn umount(mountpoint: &Path, lazy: bool) -> Result<(), String> {
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| "mount point contains NUL".to_string())?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: `path` is a valid NUL-terminated string.
    if unsafe { libc::umount2(path.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EPERM) => fusermount_unmount(mountpoint, lazy),
        Some(libc::EBUSY) => Err(format!("{}: busy (files are open); retry with --lazy", mountpoint.display())),
        Some(libc::EINVAL) => Err(format!("{}: not a mount point", mountpoint.display())),
        _ => Err(format!("{}: {err}", mountpoint.display())),
    }
}

/// Whether `path` is a mount point, from `/proc/self/mountinfo` (a mount
/// whose daemon died cannot even be stat'ed: ENOTCONN).
pub fn is_mounted(path: &Path) -> bool {
    let absolute =
        if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let wanted = absolute
        .to_string_lossy()
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012");
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    table.lines().any(|line| line.split(' ').nth(4) == Some(wanted.as_str()))
}

fn fusermount_unmount(mountpoint: &Path, lazy: bool) -> Result<(), String> {
    let mut command = std::process::Command::new("fusermount3");
    command.arg("-u");
    if lazy {
        command.arg("-z");
    }
    let output = command.arg("--").arg(mountpoint).output().map_err(|e| format!("fusermount3: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors. O_CLOEXEC keeps the write
    // end out of fusermount3, so the parent sees end of file if we die.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Raises the kernel's readahead for this mount (its backing device info,
/// default 128 KiB) to `READAHEAD_BYTES_MAX`, so sequential reads reach the
/// daemon as 1 MiB requests. Finds the mount's device number in
/// `/proc/self/mountinfo` (a `stat` of the mount point would wait for this
/// very daemon). Root only; without it reads still work, in smaller pieces.
fn raise_readahead(mountpoint: &Path) {
    let Ok(target) = mountpoint.canonicalize() else { return };
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else { return };
    let wanted = target.to_string_lossy().replace(' ', "\\040");
    let device = table.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(4) == Some(&wanted.as_str())).then(|| fields.get(2).map(|d| d.to_string())).flatten()
    });
    if let Some(device) = device {
        let knob = format!("/sys/class/bdi/{device}/read_ahead_kb");
        if let Err(err) = std::fs::write(&knob, format!("{}\n", crate::fs::READAHEAD_BYTES_MAX / 1024)) {
            tracing::info!("readahead stays at the kernel default ({knob}: {err})");
        }
    }
}

/// A forked process that detaches the mount if the daemon dies.
struct Watchdog {
    pipe: OwnedFd,
}

impl Watchdog {
    /// Forks the watchdog. Must run before any other thread exists: the
    /// child only makes async-signal-safe calls, but the parent's memory
    /// state must be consistent for `CString` built before the fork.
    fn spawn(mountpoint: &Path) -> Result<Watchdog, String> {
        use std::os::fd::AsRawFd;
        let target = mountpoint.canonicalize().map_err(|e| format!("{}: {e}", mountpoint.display()))?;
        let path = std::ffi::CString::new(target.as_os_str().as_bytes())
            .map_err(|_| "mount point contains NUL".to_string())?;
        let (reader, writer) = pipe()?;
        let keep = reader.as_raw_fd();
        // SAFETY: fork; the child below only calls async-signal-safe functions
        // (setsid, signal, close, read, umount2, _exit) on data prepared before.
        match unsafe { libc::fork() } {
            -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
            // SAFETY: the child, as said above: async-signal-safe calls only.
            0 => unsafe {
                libc::setsid();
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                // Hold no other descriptor: not the daemon's pipes, not the log.
                for fd in 0..4096 {
                    if fd != keep {
                        libc::close(fd);
                    }
                }
                let mut byte = 0u8;
                let outcome = loop {
                    let n = libc::read(keep, (&mut byte as *mut u8).cast(), 1);
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                // End of file without a word: the daemon died; detach its mount.
                if outcome == 0 {
                    libc::umount2(path.as_ptr(), libc::MNT_DETACH);
                }
                libc::_exit(0)
            },
            _child => {
                drop(reader);
                Ok(Watchdog { pipe: writer })
            }
        }
    }

    /// Tells the watchdog to exit without unmounting (clean shutdown).
    fn dismiss(self) {
        let mut file = std::fs::File::from(self.pipe);
        let _ = file.write_all(b"q");
    }
}

/// Leaves the caller's session and terminal: new session, stdin and stdout
/// on /dev/null, stderr on `log`, working directory `/`.
fn detach(log: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscalls on descriptors we own.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
        libc::dup2(log.as_raw_fd(), 2);
        libc::chdir(c"/".as_ptr());
    }
}

/// The mount's source: `weft:NAME`, and `@PATH` of the configuration when
/// known (absolute; `libweft_mpiio` reads it, see `MountOptions::config_path`).
fn mount_source(options: &MountOptions, config: &Config) -> String {
    let name = &config.filesystem.name;
    let path = options.config_path.as_ref().and_then(|p| std::path::absolute(p).ok());
    match path.as_ref().and_then(|p| p.to_str()) {
        // A comma would split the option string fusermount3 builds.
        Some(path) if !path.contains(',') => format!("weft:{name}@{path}"),
        _ => format!("weft:{name}"),
    }
}

/// The kernel-side mount options.
fn fuse_config(options: &MountOptions, config: &Config) -> fuser::Config {
    let mut fuse = fuser::Config::default();
    fuse.mount_options = vec![
        MountOption::FSName(mount_source(options, config)),
        MountOption::Subtype("weft".to_string()),
        MountOption::RW,
        MountOption::Exec,
        MountOption::NoAtime,
        // A file system any client can write must not grant privileges:
        // set-uid bits have no effect, and device nodes can be created and
        // listed, never opened as devices.
        MountOption::NoSuid,
        MountOption::NoDev,
    ];
    if options.default_permissions {
        fuse.mount_options.push(MountOption::DefaultPermissions);
    }
    if options.allow_other {
        fuse.acl = SessionACL::All; // fuser adds allow_other for this
    }
    fuse.n_threads = Some(1);
    fuse
}

/// Mounts, calls `ready` with the outcome, and serves until unmounted.
fn serve(
    config: Config,
    mountpoint: &Path,
    options: MountOptions,
    ready: impl FnOnce(Result<(), String>),
) -> Result<(), String> {
    let watchdog = Watchdog::spawn(mountpoint)?;
    let result = mount(config, mountpoint, options);
    match result {
        Ok((session, runtime)) => {
            raise_readahead(mountpoint);
            ready(Ok(()));
            let served = session.run().map_err(|e| format!("fuse session: {e}"));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            watchdog.dismiss();
            served
        }
        Err(message) => {
            ready(Err(message.clone()));
            Err(message)
        }
    }
}

/// Builds the runtime and client, mounts, and arms the signal handlers.
fn mount(
    config: Config,
    mountpoint: &Path,
    options: MountOptions,
) -> Result<(Session<WeftFs>, tokio::runtime::Runtime), String> {
    if !mountpoint.is_dir() {
        return Err(format!("{}: not a directory", mountpoint.display()));
    }
    if options.writeback_cache && !options.default_permissions {
        return Err("the write-back cache needs default_permissions (the kernel checks opens)".to_string());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.worker_threads.max(1))
        .thread_name("weft-fuse")
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let mut client_options = ClientOptions::default();
    client_options.timeouts.request = options.request_timeout;
    client_options.timeouts.connect = client_options.timeouts.connect.min(options.request_timeout);
    let fuse = fuse_config(&options, &config);
    let client = Client::new(config, client_options).map_err(|e| format!("client: {e}"))?;
    let (mut terminate, mut interrupt, mut report) = {
        let _entered = runtime.enter();
        let terminate = signal(SignalKind::terminate()).map_err(|e| format!("signal: {e}"))?;
        let interrupt = signal(SignalKind::interrupt()).map_err(|e| format!("signal: {e}"))?;
        let report = signal(SignalKind::user_defined1()).map_err(|e| format!("signal: {e}"))?;
        (terminate, interrupt, report)
    };
    let counted = client.clone();
    runtime.spawn(async move {
        let mut sequence = 0u64;
        while report.recv().await.is_some() {
            sequence += 1;
            eprintln!("{}", counters_line(sequence, &counted.counters()));
        }
    });
    let filesystem = WeftFs::new(client, options, runtime.handle().clone());
    let notifier_slot = filesystem.notifier_slot();
    let mut session =
        Session::new(filesystem, mountpoint, &fuse).map_err(|e| format!("mount {}: {e}", mountpoint.display()))?;
    // Before `run`: no request is served yet.
    let _ = notifier_slot.set(session.notifier());
    let mut unmounter = session.unmount_callable();
    let target = mountpoint.canonicalize().map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    runtime.spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("signal received: unmounting");
        // Unmount explicitly (detaching, so open files do not keep the
        // daemon alive): fusermount3's auto-unmount helper may be gone
        // already, and fuser then does nothing. The session ends when the
        // kernel drops the connection.
        if let Err(err) = umount(&target, true) {
            tracing::warn!("unmount: {err}");
        }
        if let Err(err) = unmounter.unmount() {
            tracing::warn!("unmount: {err}");
        }
    });
    Ok((session, runtime))
}

/// The line SIGUSR1 writes to the mount's standard error (its log): every
/// request this mount has sent since it started, in total and by kind,
/// e.g. `weft-fuse counters #2: requests=5 create_file=1 stat_entry=4`.
/// The number tells one report from the next.
pub fn counters_line(sequence: u64, counters: &Snapshot) -> String {
    let mut by_kind: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for ((_, kind), tally) in &counters.tallies {
        *by_kind.entry(kind).or_default() += tally.requests;
    }
    let mut line = format!("weft-fuse counters #{sequence}: requests={}", counters.total_requests());
    for (kind, requests) in by_kind {
        line.push_str(&format!(" {kind}={requests}"));
    }
    line
}
