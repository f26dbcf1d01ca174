#!/usr/bin/env bash
# The test command: installs dependencies, checks formatting and lints
# (the lint set is in the workspace Cargo.toml), builds everything optimized
# (tests start the real `weft` binary), runs every test, and prints one
# summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --release --locked -- -D warnings
cargo build --release --workspace --locked
# In CI both MPI flavours are installed by deps.sh: their tests must run, not skip.
if [ "${CI:-}" = "true" ]; then export WEFT_REQUIRE_MPI=1; fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --workspace --locked --lib --bins --tests -- --test-threads="${WEFT_TEST_THREADS:-4}" 2>&1 | tee "$log" || status=$?
passed=$(grep -E '^test result:' "$log" | sed -E 's/.* ([0-9]+) passed.*/\1/' | paste -sd+ - | bc)
failed=$(grep -E '^test result:' "$log" | sed -E 's/.* ([0-9]+) failed.*/\1/' | paste -sd+ - | bc)
echo "tests: ${passed:-0} passed, ${failed:-0} failed"
exit $status
