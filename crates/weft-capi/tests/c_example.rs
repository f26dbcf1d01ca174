//! Compiles `examples/weft_example.c` against `include/weft.h` and the
//! built `libweft.so`, runs it against a real cluster, and checks its
//! effects with the Rust client. Also checks that the header declares
//! exactly the functions the library exports.
//!
//! `libweft.so` is looked up next to the `weft` binary the test harness
//! uses (`weft_testkit::weft_bin()`, i.e. `$WEFT_BIN` or
//! `target/<profile>/weft`): cargo puts both in the same directory.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use common::{compile_example, libweft_dir, pattern_byte, run_bounded, workspace_root};
use weft_testkit::{Cluster, ClusterOptions};

/// Must match `KEEP_BYTES` and `KEEP_SEED` in the example.
const KEEP_BYTES: u64 = 10_000;
const KEEP_SEED: u64 = 2;

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
    compile_example("weft_example.c", &program);

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
