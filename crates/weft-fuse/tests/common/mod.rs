//! Helpers shared by the mount tests: one-at-a-time tests, the [`Mount`]
//! guard (a `weft-fuse-mount` child process, unmounted and killed on drop)
//! and shell helpers with a hang guard.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_testkit::{command_dying_with_parent, Cluster};

static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn mount_bin() -> PathBuf {
    match std::env::var_os("WEFT_FUSE_BIN") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_BIN_EXE_weft-fuse-mount")),
    }
}

pub fn is_mounted(path: &Path) -> bool {
    weft_fuse::is_mounted(path)
}

pub fn detach(path: &Path) {
    let _ = weft_fuse::umount(path, true);
}

/// A mount served by a child process; unmounted and killed on drop.
pub struct Mount {
    pub child: Option<Child>,
    pub path: PathBuf,
    log: PathBuf,
    reports: u64,
    _dir: tempfile::TempDir,
}

impl Mount {
    pub fn start(cluster: &Cluster, extra: &[&str]) -> Mount {
        let dir = tempfile::Builder::new().prefix("weft-mnt-").tempdir().expect("temp dir");
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).expect("mount point");
        let log = dir.path().join("mount.log");
        let log_file = std::fs::File::create(&log).expect("log");
        let child = command_dying_with_parent(&mount_bin())
            .arg("--config")
            .arg(&cluster.config_path)
            .args(extra)
            .arg(&path)
            .env("WEFT_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("spawn weft-fuse-mount");
        let mut mount = Mount { child: Some(child), path, log, reports: 0, _dir: dir };
        mount.wait_mounted();
        mount
    }

    pub fn wait_mounted(&mut self) {
        let start = Instant::now();
        while !is_mounted(&self.path) {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("mount process exited with {status}: {}", self.log_text());
                }
            }
            assert!(start.elapsed() < Duration::from_secs(60), "not mounted after 60 s: {}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn at(&self, relative: &str) -> PathBuf {
        self.path.join(relative)
    }

    /// Requests the mount has sent, by kind (and `requests`, the total):
    /// SIGUSR1 makes it write a numbered counters line to its log.
    pub fn counters(&mut self) -> BTreeMap<String, u64> {
        self.reports += 1;
        let marker = format!("weft-fuse counters #{}:", self.reports);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGUSR1) };
        let start = Instant::now();
        loop {
            let text = self.log_text();
            if let Some(line) = text.lines().find(|l| l.starts_with(&marker)) {
                return line[marker.len()..]
                    .split_whitespace()
                    .map(|pair| {
                        let (kind, count) = pair.split_once('=').expect("kind=count");
                        (kind.to_string(), count.parse().expect("a count"))
                    })
                    .collect();
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no counters report: {text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Kills the mount process with SIGKILL (auto-unmount test).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if is_mounted(&self.path) {
                detach(&self.path);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if is_mounted(&self.path) {
            detach(&self.path);
        }
    }
}

/// Runs a bash command (with a hang guard); returns its output.
pub fn bash(script: &str) -> Output {
    Command::new("timeout").args(["120", "bash", "-euo", "pipefail", "-c", script]).output().expect("run bash")
}

/// Runs a bash command that must succeed; returns its stdout.
pub fn ok(script: &str) -> String {
    let out = bash(script);
    assert!(
        out.status.success(),
        "command failed ({}): {script}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn q(path: &Path) -> String {
    format!("'{}'", path.display())
}
