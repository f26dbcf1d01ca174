//! Compiles `examples/weft_example.c` against `include/weft.h` and the
//! built `libweft.so`, runs it against a real cluster, and checks its
//! effects with the Rust client. Also checks that the header declares
//! exactly the functions the library exports.
//!
//! `libweft.so` is looked up next to the `weft` binary the test harness
//! uses (`weft_testkit::weft_bin()`, i.e. `$WEFT_BIN` or
//! `target/<profile>/weft`): cargo puts both in the same directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use weft_testkit::{Cluster, ClusterOptions};

/// Must match `KEEP_BYTES` and `KEEP_SEED` in the example.
const KEEP_BYTES: u64 = 10_000;
const KEEP_SEED: u64 = 2;

/// How long the example may run before the test gives up on it.
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The example's `pattern_byte`.
fn pattern_byte(i: u64, seed: u64) -> u8 {
    (i.wrapping_mul(131).wrapping_add(i >> 8).wrapping_add(seed * 7) & 0xff) as u8
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf()
}

/// The directory holding `libweft.so`, or a panic saying how to build it.
fn libweft_dir() -> PathBuf {
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

fn compile_example(output: &Path) {
    let root = workspace_root();
    let library_dir = libweft_dir();
    let result = Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("examples/weft_example.c"))
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
fn run_bounded(command: &mut Command) -> Output {
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

fn assert_example_passed(output: &Output, cluster: &Cluster) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "example failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        output.status,
        cluster.logs()
    );
    assert!(!stdout.contains("FAIL"), "{stdout}");
    for line in [
        "ok: connect",
        "ok: create data.bin (strip 4096, 3 datafiles)",
        "ok: pwrite of 5 strips + 1234 bytes at offset 1000",
        "ok: read-back matches byte for byte",
        "ok: unaligned read matches byte for byte",
        "ok: stat size",
        "ok: readdir finds data.bin",
        "ok: open of a missing file gives -ENOENT",
        "ok: mkdir of an existing directory gives -EEXIST",
        "ok: rmdir of a non-empty directory gives -ENOTEMPTY",
        "ok: rename",
        "ok: size after truncate by path",
        "ok: size after ftruncate",
        "ok: rmdir work",
        "ok: disconnect",
        "all checks passed",
    ] {
        assert!(stdout.lines().any(|l| l == line), "missing line {line:?} in:\n{stdout}");
    }
    stdout
}

/// Checks with the Rust client what the example left in `base`.
fn verify_effects(cluster: &Cluster, base: &str) {
    let client = cluster.client();
    let names: Vec<String> = client.readdir(base).expect("list base").into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["keep.bin".to_string()], "only keep.bin remains in {base}");
    assert_eq!(client.stat(&format!("{base}/work")).unwrap_err(), weft_proto::ErrorCode::NoEntry);
    let keep = format!("{base}/keep.bin");
    let stat = client.stat(&keep).expect("stat keep.bin");
    assert_eq!(stat.size, KEEP_BYTES);
    let distribution = stat.layout.expect("file layout").distribution;
    assert_eq!((distribution.strip_bytes, distribution.stripe_count), (1000, 2));
    let file = client.open(&keep, weft_client::access::READ).expect("open keep.bin");
    let mut bytes = vec![0u8; KEEP_BYTES as usize + 10];
    let read = client.read_at(&file, 0, &mut bytes).expect("read keep.bin");
    assert_eq!(read as u64, KEEP_BYTES);
    let expected: Vec<u8> = (0..KEEP_BYTES).map(|i| pattern_byte(i, KEEP_SEED)).collect();
    assert!(bytes[..read] == expected[..], "keep.bin bytes differ from the example's pattern");
}

#[test]
fn c_example_runs_against_a_cluster() {
    let cluster = Cluster::start(ClusterOptions::default());
    let program = cluster.dir.path().join("weft_example");
    compile_example(&program);

    let output = run_bounded(Command::new(&program).arg(&cluster.config_path).arg("weft:/capi-example"));
    let stdout = assert_example_passed(&output, &cluster);
    println!("{stdout}");
    verify_effects(&cluster, "/capi-example");

    // No arguments: the configuration comes from $WEFT_CONFIG and the
    // example works in its default directory.
    let output = run_bounded(Command::new(&program).env("WEFT_CONFIG", &cluster.config_path));
    assert_example_passed(&output, &cluster);
    verify_effects(&cluster, "/weft-example");
}

/// Function names declared in the header (comments removed first).
fn header_functions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(workspace_root().join("include/weft.h")).expect("read weft.h");
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].split_once("*/").map_or("", |(_, after)| after);
    }
    code.push_str(rest);
    let mut names = BTreeSet::new();
    for (index, _) in code.match_indices("weft_") {
        let name: String = code[index..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if code[index + name.len()..].starts_with('(') {
            names.insert(name);
        }
    }
    names
}

/// `weft_*` functions exported by libweft.so.
fn exported_functions() -> BTreeSet<String> {
    let library = libweft_dir().join("libweft.so");
    let output = Command::new("nm").args(["-D", "--defined-only"]).arg(&library).output().expect("run nm");
    assert!(output.status.success(), "nm failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("weft_") => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let declared = header_functions();
    let exported = exported_functions();
    assert!(declared.len() >= 25, "too few declarations parsed: {declared:?}");
    assert_eq!(declared, exported, "include/weft.h and libweft.so disagree");
}
