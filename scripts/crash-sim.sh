#!/usr/bin/env bash
# Long run of the deterministic crash simulation (weft-server/src/crashsim.rs):
#   scripts/crash-sim.sh [SEEDS] [FIRST_SEED]
# Default 1,000,000 seeds from 0 (about 5 ms each here). The test suite runs 2,000.
# A failure prints its seed; rerun it alone with `scripts/crash-sim.sh 1 SEED`.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1000000}
start=${2:-0}
WEFT_CRASH_SEEDS=$seeds WEFT_CRASH_SEED_START=$start \
  cargo test --release --locked -p weft-server --lib crashsim -- --nocapture
