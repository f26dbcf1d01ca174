//! Benchmarks (not tests): `weft bench io` and `weft bench md`. Each prints
//! one JSON object per result line with `--json`.

use std::path::PathBuf;

use clap::Subcommand;

/// Benchmark commands.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Placeholder until the benchmarks land.
    Io,
}

pub fn run(_config: Option<PathBuf>, _command: BenchCommand) -> Result<(), String> {
    Err("benchmarks are not built yet".into())
}
