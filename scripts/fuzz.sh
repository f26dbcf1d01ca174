#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder and parser that takes outside
# bytes (cargo-fuzz + libFuzzer, with AddressSanitizer and overflow checks).
# Not part of scripts/test.sh or CI: it needs a nightly toolchain
# (`rustup toolchain install nightly --profile minimal`) and cargo-fuzz
# (`cargo install cargo-fuzz --locked`); the targets live in fuzz/, a
# workspace of its own.
#
#   scripts/fuzz.sh [TARGET|all] [BUDGET]
#
# TARGET: frame, message, dataloop, config, wal, capi_types, or all (default).
# BUDGET per target: N or Ns = seconds (default 60), Nr = N executions.
# Corpora grow in fuzz/corpus/TARGET (not committed) from the committed
# seeds in fuzz/seeds/TARGET; a crash leaves its input in
# fuzz/artifacts/TARGET/ (turn it into a unit test in the crate it hit).
# Prints one line per target: executions, seconds, corpus size, result.
set -uo pipefail
cd "$(dirname "$0")/.."
all=(frame message dataloop config wal capi_types)
which=${1:-all}
budget=${2:-60}
case $which in
  all) targets=("${all[@]}") ;;
  *) targets=("$which") ;;
esac
case $budget in
  *r) limit=(-runs="${budget%r}") ;;
  *s) limit=(-max_total_time="${budget%s}") ;;
  *) limit=(-max_total_time="$budget") ;;
esac
cargo +nightly --version >/dev/null 2>&1 || { echo "fuzz.sh: needs a nightly toolchain" >&2; exit 2; }
cargo fuzz --version >/dev/null 2>&1 || { echo "fuzz.sh: needs cargo-fuzz (cargo install cargo-fuzz --locked)" >&2; exit 2; }
# -O: optimized; -a: debug assertions, so integer overflow panics.
cargo +nightly fuzz build -O -a || exit 2
status=0
summary=()
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target"
  log=$(mktemp)
  start=$(date +%s)
  # -rss_limit_mb: memory stays bounded; -timeout: no input runs over 10 s.
  cargo +nightly fuzz run -O -a "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    "${limit[@]}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  corpus=$(find "fuzz/corpus/$target" -type f | wc -l)
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (rc $rc; see fuzz/artifacts/$target and $log)"; status=1; fi
  summary+=("$(printf '%-11s %12s execs %6s s  corpus %5s  %s' "$target" "${runs:-?}" "$seconds" "$corpus" "$result")")
  tail -n 30 "$log" | grep -E 'ERROR|panicked|SUMMARY|stat::' || true
  [ $rc -eq 0 ] && rm -f "$log"
done
printf '%s\n' "${summary[@]}"
exit $status
