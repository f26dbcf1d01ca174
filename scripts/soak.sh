#!/usr/bin/env bash
# Soak (issue 16 item 5): mixed load on a local file system of 4 servers
# (`weft bench md`, `weft bench io`, copies and removals through the mount)
# for DURATION seconds (default 1800), sampling each server's RSS, open fds
# and threads every INTERVAL (10) s into OUT (target/soak.csv). At the end
# it prints, per server, the change from the first sample after warm-up
# (the first sixth of the run) to the last: the issue asks for RSS growth
# under 10% and no fd or thread growth.
#   scripts/soak.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-1800}
interval=${INTERVAL:-10}
dir=${SOAK_DIR:-/tmp/weft-soak}
out=${OUT:-target/soak.csv}
weft=$PWD/target/release/weft
cargo build --release --locked -p weft-cli
mkdir -p "$(dirname "$out")"
"$weft" down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
"$weft" up --dir "$dir" --servers 4 --host 127.0.8.1 --base-port 7201 >/dev/null
export WEFT_CONFIG=$dir/weft.toml
load_pid=
cleanup() {
  if [ -n "$load_pid" ]; then kill -- -"$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; fi
  "$weft" down --dir "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
mapfile -t pids <"$dir/pids"
# The load, in its own process group (stopped by its id at the end).
setsid bash -c '
  i=0
  while true; do
    i=$((i + 1))
    "$0" bench md -p 4 --files 500 >/dev/null
    "$0" bench io -p 4 --size-per-proc 64MiB --pattern both >/dev/null
    head -c 16M /dev/urandom >"$1/mnt/soak-$i"
    cp "$1/mnt/soak-$i" "$1/mnt/soak-$i.copy"
    cmp "$1/mnt/soak-$i" "$1/mnt/soak-$i.copy"
    rm -f "$1/mnt/soak-$i" "$1/mnt/soak-$i.copy"
  done' "$weft" "$dir" &
load_pid=$!
echo "seconds,pid,rss_kib,fds,threads" >"$out"
start=$SECONDS
while ((SECONDS - start < duration)); do
  for pid in "${pids[@]}"; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    threads=$(awk '/^Threads/ {print $2}' "/proc/$pid/status")
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
    echo "$((SECONDS - start)),$pid,$rss,$fds,$threads" >>"$out"
  done
  sleep "$interval"
done
python3 - "$out" "$duration" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
warm = int(sys.argv[2]) // 6
for pid in sorted({r["pid"] for r in rows}):
    mine = [r for r in rows if r["pid"] == pid and int(r["seconds"]) >= warm]
    a, b = mine[0], mine[-1]
    growth = 100.0 * (int(b["rss_kib"]) - int(a["rss_kib"])) / max(1, int(a["rss_kib"]))
    print(f"server pid {pid}: RSS {a['rss_kib']} -> {b['rss_kib']} KiB ({growth:+.1f}%), "
          f"fds {a['fds']} -> {b['fds']}, threads {a['threads']} -> {b['threads']} "
          f"(from {a['seconds']} s to {b['seconds']} s)")
PY
