//! Helper processes for tests that need a second client which can be
//! killed: the test binary runs itself again for one `#[ignore]`d test
//! (the helper), passing it a value through one environment variable. The
//! helper prints a marker line once it holds what the test needs (a lock,
//! say); [`HelperProcess::start`] waits for that line. The helper dies with
//! the test process and is killed and reaped when dropped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Stdio};

use crate::command_dying_with_parent;

/// How many output lines a helper may print before its ready marker.
const MAX_LINES_BEFORE_READY: usize = 50;

/// A running helper process, killed and reaped when dropped.
pub struct HelperProcess {
    child: Child,
    /// Kept open, so that a helper printing after its marker does not die
    /// of a closed pipe.
    output: std::io::Lines<BufReader<ChildStdout>>,
}

impl HelperProcess {
    /// Runs this test binary's ignored test `test` with `env` set, and waits
    /// until it prints a line containing `ready`. Panics (after killing it)
    /// when the helper ends or prints too much without becoming ready.
    pub fn start(test: &str, env: (&str, &OsStr), ready: &str) -> HelperProcess {
        let mut child = command_dying_with_parent(&std::env::current_exe().expect("test binary"))
            .args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"])
            .env(env.0, env.1)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn helper");
        let stdout = child.stdout.take().expect("helper stdout");
        // Killed also when the assertion below fails.
        let mut helper = HelperProcess { child, output: BufReader::new(stdout).lines() };
        let is_ready = helper
            .output
            .by_ref()
            .take(MAX_LINES_BEFORE_READY)
            .any(|line| line.map(|l| l.contains(ready)).unwrap_or(false));
        assert!(is_ready, "helper {test} did not print {ready:?}");
        helper
    }

    /// Kills the helper and reaps it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HelperProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
