#!/usr/bin/env bash
# The test command: installs dependencies, builds everything optimized
# (tests start the real `weft` binary), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cargo build --release --workspace --locked
cargo test --release --workspace --locked -- --test-threads="${WEFT_TEST_THREADS:-4}"
