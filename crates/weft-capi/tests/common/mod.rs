//! Helpers shared by the tests that compile and run the C examples.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long an example may run before the test gives up on it.
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The examples' `pattern_byte`.
pub fn pattern_byte(i: u64, seed: u64) -> u8 {
    (i.wrapping_mul(131).wrapping_add(i >> 8).wrapping_add(seed * 7) & 0xff) as u8
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf()
}

/// The directory holding `libweft.so`, or a panic saying how to build it.
pub fn libweft_dir() -> PathBuf {
    let weft = weft_testkit::weft_bin();
    let dir = weft.parent().expect("weft binary has a directory").to_path_buf();
    let library = dir.join("libweft.so");
    assert!(
        library.exists(),
        "libweft.so not found at {} (looked next to the weft binary {}). Build it with \
         `cargo build --release -p weft-capi -p weft-cli` using the same CARGO_TARGET_DIR, \
         or point WEFT_BIN at a weft binary that has libweft.so beside it.",
        library.display(),
        weft.display()
    );
    assert_fresh(&library);
    dir
}

/// Fails if a source of this crate changed after `library` was built:
/// `cargo test` builds the crate as an rlib for the tests but does not
/// relink the cdylib, so a stale libweft.so would test old code.
fn assert_fresh(library: &Path) {
    let built = std::fs::metadata(library).and_then(|m| m.modified()).expect("libweft.so mtime");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![crate_dir.join("Cargo.toml")];
    for entry in std::fs::read_dir(crate_dir.join("src")).expect("list src") {
        sources.push(entry.expect("src entry").path());
    }
    for source in sources {
        let changed = std::fs::metadata(&source).and_then(|m| m.modified()).expect("source mtime");
        assert!(
            changed <= built,
            "{} is newer than {}: rebuild with `cargo build --release -p weft-capi` (same CARGO_TARGET_DIR) \
             before running this test",
            source.display(),
            library.display()
        );
    }
}

/// Compiles `examples/<source>` with `gcc -Wall -Werror` into `output`.
pub fn compile_example(source: &str, output: &Path) {
    let root = workspace_root();
    let library_dir = libweft_dir();
    let result = Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples").join(source))
        .arg("-L")
        .arg(&library_dir)
        .arg("-lweft")
        .arg(format!("-Wl,-rpath,{}", library_dir.display()))
        .arg("-o")
        .arg(output)
        .output()
        .expect("run gcc (is it installed?)");
    assert!(result.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&result.stderr));
}

/// Runs `command` to completion, killing it after [`EXAMPLE_TIMEOUT`].
pub fn run_bounded(command: &mut Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn example");
    let start = Instant::now();
    while child.try_wait().expect("wait for example").is_none() {
        if start.elapsed() > EXAMPLE_TIMEOUT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect example output")
}
