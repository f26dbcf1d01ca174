#!/usr/bin/env bash
# Kill rounds (issue 16 item 4): under mixed load (creates, writes with sync,
# removes, renames) a random server of three is SIGKILLed at a random instant
# and restarted; after each round every acknowledged change and synced byte
# is checked and `weft fsck` must be clean.
#   scripts/kill-rounds.sh [ROUNDS] [SEED]
# Default 100 rounds, seed from the clock (printed). The test suite runs 2.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
seed=${2:-$(date +%s)}
echo "kill rounds: $rounds, seed $seed"
cargo build --release --locked -p weft-cli
WEFT_KILL_ROUNDS=$rounds WEFT_KILL_SEED=$seed \
  cargo test --release --locked -p weft-testkit --test kill_rounds -- --nocapture
