//! `weft fsck --json` run against a test cluster, its exit status checked
//! against its own summary (0 when clean, 2 when it found problems).

use std::process::Command;

use crate::{weft_bin, Cluster};

/// What one `weft fsck --json` run reported.
pub struct FsckReport {
    /// Problems found (the summary line's `problems`).
    pub problems: u64,
    /// The whole standard output, for assertion messages.
    pub stdout: String,
}

/// Runs `weft fsck --json` (with `--repair` if asked) on `cluster`. Panics
/// when fsck could not check, or when its exit status disagrees with the
/// number of problems it reports.
pub fn fsck(cluster: &Cluster, repair: bool) -> FsckReport {
    let mut command = Command::new(weft_bin());
    command.args(["fsck", "--json", "--config"]).arg(&cluster.config_path);
    if repair {
        command.arg("--repair");
    }
    let output = command.output().expect("run weft fsck");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: serde_json::Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("fsck printed no summary: {stdout} {stderr}"));
    let problems = summary["problems"].as_u64().expect("problems");
    let expected = if problems == 0 { 0 } else { 2 };
    assert_eq!(output.status.code(), Some(expected), "fsck exit status for {problems} problems: {stdout} {stderr}");
    FsckReport { problems, stdout }
}
