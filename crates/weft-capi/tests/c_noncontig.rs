//! Compiles `examples/weft_noncontig.c` (datatype and list I/O through the
//! C API), runs it against a real cluster, and checks the file it leaves
//! behind with the Rust client, byte for byte against an image computed
//! here independently of the example.
//!
//! As for `c_example.rs`, `libweft.so` is looked up next to the `weft`
//! binary and must be newer than this crate's sources.

mod common;

use std::process::Command;

use common::{compile_example, pattern_byte, run_bounded};
use weft_testkit::{Cluster, ClusterOptions};

/// Must match the example's geometry.
const ELEMENT_BYTES: u64 = 4;
const COLS: u64 = 48;
const ROWS: u64 = 64;
const ROW0: u64 = 5;
const COL0: u64 = 7;
const SUB_ROWS: u64 = 40;
const SUB_COLS: u64 = 20;
const HALO_COLS: u64 = SUB_COLS + 2;
const DISPLACEMENT: u64 = 100;
const FILE_BYTES: u64 = DISPLACEMENT + ROWS * COLS * ELEMENT_BYTES;
const BACKGROUND_SEED: u64 = 3;
const MEMORY_SEED: u64 = 5;

/// The file image after the box of the halo buffer is written over the
/// background, computed element by element.
fn expected_image() -> Vec<u8> {
    let mut image: Vec<u8> = (0..FILE_BYTES).map(|i| pattern_byte(i, BACKGROUND_SEED)).collect();
    for row in 0..SUB_ROWS {
        for col in 0..SUB_COLS {
            for byte in 0..ELEMENT_BYTES {
                let memory = ((row + 1) * HALO_COLS + col + 1) * ELEMENT_BYTES + byte;
                let file = DISPLACEMENT + ((ROW0 + row) * COLS + COL0 + col) * ELEMENT_BYTES + byte;
                image[file as usize] = pattern_byte(memory, MEMORY_SEED);
            }
        }
    }
    image
}

#[test]
fn c_noncontig_example_runs_against_a_cluster() {
    let cluster = Cluster::start(ClusterOptions { servers: 3, ..ClusterOptions::default() });
    let program = cluster.dir.path().join("weft_noncontig");
    compile_example("weft_noncontig.c", &program);

    let output = run_bounded(Command::new(&program).arg(&cluster.config_path).arg("weft:/nc"));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success() && !stdout.contains("FAIL"),
        "example failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        cluster.logs()
    );
    println!("{stdout}");
    for line in [
        "ok: write_dtype of the box",
        "ok: datatype I/O: contiguous read-back matches byte for byte",
        "ok: read_dtype: box matches and halo is untouched",
        "ok: list I/O: contiguous read-back matches byte for byte",
        "ok: pread_list: box matches and halo is untouched",
        "ok: list I/O (3 per request): contiguous read-back matches byte for byte",
        "ok: posix I/O: contiguous read-back matches byte for byte",
        "ok: list totals that differ give -EINVAL",
        "ok: darray: four ranks rebuild the array byte for byte",
        "ok: second free gives -EBADF",
        "all checks passed",
    ] {
        assert!(stdout.lines().any(|l| l == line), "missing line {line:?} in:\n{stdout}");
    }

    let client = cluster.client();
    let expected = expected_image();
    for name in ["dtype.bin", "list.bin", "list3.bin", "posix.bin"] {
        let file = client.open(&format!("/nc/{name}"), weft_client::access::READ).expect("open");
        let mut bytes = vec![0u8; FILE_BYTES as usize + 10];
        let read = client.read_at(&file, 0, &mut bytes).expect("read");
        assert_eq!(read as u64, FILE_BYTES, "{name}");
        assert!(bytes[..read] == expected[..], "{name} differs from the expected image");
    }
}
