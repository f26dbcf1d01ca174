//! MPI-IO in bounded memory (issue 25): a write or read of N bytes per rank
//! costs at most N + a fixed bound of resident memory, whatever N is.
//! `tests/c/peak_rss.c` runs each phase (collective write and read through
//! an interleaved view with the default method and with two-phase, an
//! independent contiguous write, an independent read into a noncontiguous
//! memory type crossing end of file) after resetting its peak RSS, and
//! prints how far VmHWM rose above the RSS before the call (which already
//! holds the user's buffer). A control phase that copies half the buffer
//! shows the measurement sees such a copy. The list I/O method and atomic
//! mode with list locks run over a view of 8-byte blocks (2 million
//! regions per rank at an eighth of the data): region lists built whole
//! would cost twice the bound.

mod common;

use common::*;
use weft_testkit::{Cluster, ClusterOptions};

/// MiB of user data per rank: large enough that one copy of it (what the
/// library made before issue 25) is far above [`BOUND_MIB`].
const DATA_MIB: u64 = 128;
/// What a call may add to the peak beyond the user's data: the issue's
/// goal (windows of `cb_buffer_size`, 16 MiB by default, plus the
/// transport's chunks in flight and the MPI library's own buffers).
const BOUND_MIB: u64 = 64;
const PHASES: [&str; 10] = [
    "write_all",
    "read_all",
    "write_all_2ph",
    "read_all_2ph",
    "write_at",
    "read_eof",
    "write_list",
    "read_list",
    "write_atomic",
    "read_atomic",
];

fn peak_memory_is_bounded(flavour: Flavour) {
    require(flavour);
    let _one_at_a_time = exclusive();
    let cluster = Cluster::start(ClusterOptions::default());
    let peak_rss = program(flavour, "peak_rss");
    let run =
        run_job(flavour, &peak_rss, &["weft:/peak_rss", &DATA_MIB.to_string()], Some(&cluster.config_path), false);
    assert!(run.stdout.contains("peak_rss OK"), "{}{}", run.stdout, run.stderr);
    let mut seen = Vec::new();
    for line in run.stdout.lines().filter(|l| l.starts_with("PEAK ")) {
        eprintln!("{} {line}", flavour.name());
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("{key} missing in {line}"))
                .to_string()
        };
        let phase = field("phase");
        let grew_mib = field("grew_kib").parse::<i64>().expect("number") as f64 / 1024.0;
        if phase == "control" {
            assert!(grew_mib >= (DATA_MIB / 2) as f64 * 0.9, "the measurement misses a copy: {line}");
        } else {
            assert!(
                grew_mib <= BOUND_MIB as f64,
                "{phase} used {grew_mib:.1} MiB beyond {DATA_MIB} MiB of data: {line}"
            );
        }
        seen.push(phase);
    }
    for phase in PHASES.iter().chain(["control"].iter()) {
        let ranks = seen.iter().filter(|p| p == phase).count();
        assert_eq!(ranks, flavour.ranks() as usize, "{phase}: one PEAK line per rank\n{}", run.stdout);
    }
}

#[test]
fn openmpi_peak_memory_is_bounded() {
    peak_memory_is_bounded(Flavour::OpenMpi);
}

#[test]
fn mpich_peak_memory_is_bounded() {
    peak_memory_is_bounded(Flavour::Mpich);
}
