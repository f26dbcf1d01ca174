#!/usr/bin/env bash
# Regenerates BENCHMARKS.md from one run at one commit: runs every phase of
# scripts/bench.sh and scripts/bench-mpi.sh (RUNS times each, default 3) and
# the full-disk reliability test, each with its raw JSON in one results
# directory, records the commit, the machine and the load before and after
# every phase, gathers everything into one file (bench/results/RUN.jsonl.gz,
# committed: every raw JSON line, tagged with its phase), and renders the page with scripts/render-benchmarks.py from
# bench/BENCHMARKS.template.md.
#
#   nohup scripts/benchmarks.sh > target/benchmarks.log 2>&1 &    # about 60 min here
#   QUICK=1 RUNS=1 scripts/benchmarks.sh                           # tiny sizes: checks the pipeline
#   ONLY="io md" scripts/benchmarks.sh                             # some phases only (page not written)
#   scripts/render-benchmarks.py bench/results/RUN.jsonl.gz > BENCHMARKS.md   # re-render
#
# Every phase runs under `timeout` (PHASE_TIMEOUT, default 1500 s): the run
# stops by itself; a phase that fails or times out is recorded as such and
# the page says so. The sizes are in SIZES below (QUICK=1: tiny ones).
set -uo pipefail
cd "$(dirname "$0")/.."
export RUNS=${RUNS:-3}
PHASE_TIMEOUT=${PHASE_TIMEOUT:-1500}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
work=${WORK:-target/benchmarks/$stamp}
mkdir -p "$work"
work=$(cd "$work" && pwd)
results=${RESULTS:-bench/results/$stamp.jsonl.gz}
meta=$work/phases.jsonl
: > "$meta"

# Sizes of the full run (chosen so that the whole page takes under 90
# minutes on the project's 2-core VM, loaded by other builds).
if [ "${QUICK:-0}" = 1 ]; then
  export IO_SIZE=16M MD_FILES=100 FIO_SIZE=16M PM_FILES=200 PM_TRANSACTIONS=400 HPIO_REGIONS=4096 HPIO_POSIX_REGIONS=256
  export RPC_COUNT=500 RPC_IO_COUNT=200 SWEEP_SERVERS="1 8" SWEEP_MODES=aggregate FILES=100
  export CONTIG_BLOCK=8M EASY_BLOCK=4M HARD_SEGMENTS=16 HPIO_COUNTS=256 HPIO_BIG=1024 MAD_NPIX=256 MAD_NBIN=2
  export TILE_FRAMES=1 BLOCK3D_SIZE=32 FLASH_BLOCKS=4 S3D_GRID=16x16x16 S3ASIM_QUERIES=1 S3ASIM_FRAGMENTS=4 S3ASIM_NP=4
  export FULL_DISK_CYCLES=${FULL_DISK_CYCLES:-2}
else
  export IO_SIZE=${IO_SIZE:-256M} MD_FILES=${MD_FILES:-1000} FIO_SIZE=${FIO_SIZE:-256M}
  export PM_FILES=${PM_FILES:-5000} PM_TRANSACTIONS=${PM_TRANSACTIONS:-10000}
  export HPIO_REGIONS=${HPIO_REGIONS:-65536} HPIO_POSIX_REGIONS=${HPIO_POSIX_REGIONS:-4096}
  export RPC_COUNT=${RPC_COUNT:-20000} RPC_IO_COUNT=${RPC_IO_COUNT:-10000}
  export SWEEP_SERVERS=${SWEEP_SERVERS:-"1 8"} SWEEP_MODES=${SWEEP_MODES:-aggregate} FILES=${FILES:-1000}
  export FULL_DISK_CYCLES=${FULL_DISK_CYCLES:-20}
fi

load() { cut -d' ' -f1 /proc/loadavg; }
json_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }

# One phase: NAME KIND COMMAND... ; its raw JSON lines end up in $work/NAME/raw.jsonl.
phase() {
  local name=$1 kind=$2
  shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  mkdir -p "$work/$name"
  local l0 t0 status
  l0=$(load)
  t0=$(date +%s.%N)
  echo "== $(date -u +%H:%M:%S) $name (load $l0)" >&2
  OUT=$work/$name timeout --kill-after=30 "$PHASE_TIMEOUT" "$@" > "$work/$name/stdout.log" 2> "$work/$name/stderr.log"
  status=$?
  local t1 l1
  t1=$(date +%s.%N)
  l1=$(load)
  echo "{\"bench\":\"_phase\",\"phase\":\"$name\",\"kind\":\"$kind\",\"status\":$status,\"timed_out\":$([ $status = 124 ] && echo true || echo false),\"seconds\":$(echo "$t1 - $t0" | bc),\"load_before\":$l0,\"load_after\":$l1,\"started\":\"$(date -u -d @${t0%.*} +%H:%M:%S)\"}" >> "$meta"
  echo "   $name: status $status, $(echo "$t1 - $t0" | bc | cut -d. -f1) s, load $l0 -> $l1" >&2
}

# The full-disk reliability test (issue 21), as a phase: its stderr is the record.
full_disk() {
  local t0 status
  t0=$(date +%s.%N)
  WEFT_FULL_DISK_CYCLES=$FULL_DISK_CYCLES cargo test --release --locked -p weft-testkit --test full_disk -- --nocapture \
    > "$OUT/test.log" 2>&1
  status=$?
  python3 - "$OUT/test.log" "$status" "$FULL_DISK_CYCLES" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$OUT/raw.jsonl" <<'PY'
import json, re, sys
log, status, cycles, seconds = open(sys.argv[1], errors="replace").read(), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
done = re.findall(r"^cycle (\d+): (\d+) files", log, re.M)
summary = re.search(r"^(\d+) fill/free cycles, (\d+) of them with kill -9", log, re.M)
meta = re.search(r"^metadata fill: .*? then (\d+) empty files", log, re.M)
panic = re.search(r"panicked at [^\n]*\n([^\n]*)", log)
print(json.dumps({"bench": "full_disk", "cycles_requested": cycles, "cycles_completed": len(done),
    "files_per_fill": [int(n) for _, n in done], "passed": status == 0,
    "kill9_cycles": int(summary.group(2)) if summary else None,
    "metadata_fill_creates": int(meta.group(1)) if meta else None,
    "failure": panic.group(1).strip()[:300] if panic and status else None, "seconds": round(seconds, 1)}))
PY
  return $status
}

commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | grep -v '^?? ' | wc -l)
{
  echo "{\"bench\":\"_run\",\"commit\":\"$commit\",\"commit_short\":\"$(git rev-parse --short HEAD)\",\"dirty_files\":$dirty,\"runs\":$RUNS,\"quick\":${QUICK:-0},\"started\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"host\":$(json_str "$(hostname)")}"
  echo "{\"bench\":\"_machine\",\"cores\":$(nproc),\"cpu\":$(json_str "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"),\"ram_gib\":$(free -g | awk '/Mem:/{print $2}'),\"kernel\":\"$(uname -r)\",\"disk\":$(json_str "$(df -T /tmp | awk 'NR==2{print $1" "$2}')"),\"openmpi\":\"$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')\",\"drop_caches\":$(sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo true || echo false),\"load_before\":$(load)}"
  echo "{\"bench\":\"_sizes\",$(for v in IO_SIZE MD_FILES FIO_SIZE PM_FILES PM_TRANSACTIONS HPIO_REGIONS HPIO_POSIX_REGIONS RPC_COUNT RPC_IO_COUNT SWEEP_SERVERS FILES FULL_DISK_CYCLES CONTIG_BLOCK EASY_BLOCK HARD_SEGMENTS HPIO_COUNTS HPIO_BIG MAD_NPIX MAD_NBIN TILE_FRAMES BLOCK3D_SIZE FLASH_BLOCKS S3D_GRID S3ASIM_NP S3ASIM_QUERIES S3ASIM_FRAGMENTS; do printf '"%s":"%s",' $v "${!v:-default}"; done)\"_\":0}"
} > "$work/run.jsonl"
[ "$dirty" = 0 ] || echo "warning: $dirty uncommitted changes to tracked files: the page will say so" >&2

# Build once, first (not a benchmark phase; its time counts in the total).
phase build build bash -c 'cargo build --release --locked -p weft-cli -p weft-mpiio && cargo test --release --locked -p weft-testkit --test full_disk --no-run'

for p in io md rpc hpio fuse mdtest postmark md-sweep; do
  phase "$p" bench scripts/bench.sh "$p"
done
for p in contig ior hpio madbench tile block3d flash s3d s3asim; do
  phase "mpi-$p" bench-mpi scripts/bench-mpi.sh "$p"
done
export -f full_disk
phase full-disk reliability bash -c full_disk

# Gather: every line tagged with its phase, in one file.
{
  cat "$work/run.jsonl"
  for d in "$work"/*/; do
    name=$(basename "$d")
    [ -f "$d/raw.jsonl" ] || continue
    grep '^{' "$d/raw.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    r["_phase"] = sys.argv[1]
    print(json.dumps(r, separators=(",", ":")))' "$name"
  done
  cat "$meta"
  echo "{\"bench\":\"_end\",\"finished\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"load_after\":$(load)}"
} > "$work/all.jsonl"
if [ -n "${ONLY:-}" ]; then
  echo "results: $work/all.jsonl (ONLY set: page not written)" >&2
  exit 0
fi
mkdir -p "$(dirname "$results")"
case $results in *.gz) gzip -9 -n -c "$work/all.jsonl" > "$results" ;; *) cp "$work/all.jsonl" "$results" ;; esac
# Figures of the sweeps (matplotlib from Debian, for /usr/bin/python3;
# installed here, not by scripts/deps.sh: the tests do not need it).
figures=bench/figures/$(basename "$results" .gz)
figures=${figures%.jsonl}
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-matplotlib >/dev/null ||
    echo "python3-matplotlib not installed: BENCHMARKS.md without figures" >&2
fi
/usr/bin/python3 scripts/plot-benchmarks.py "$results" "$figures" >&2 || echo "no figures drawn" >&2
python3 scripts/render-benchmarks.py "$results" > BENCHMARKS.md
echo "results: $results ($(wc -c < "$results") bytes); BENCHMARKS.md written" >&2
