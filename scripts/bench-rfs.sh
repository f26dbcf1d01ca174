#!/usr/bin/env bash
# The RFS/ABT benchmark (issue 13; Lee et al. section 5), scaled to this
# machine: the 3-D Jacobi snapshot program (bench/rfs/jacobi.c) in six
# configurations, the client job and the gateway on the two sides of a
# tbf-shaped veth link (scripts/rfs-link.sh), ranks pinned to core 0 and
# the gateway to core 1. Prints one JSON object per configuration and run,
# then the link's one-stream bandwidth measured in the same run.
#
# usage: scripts/bench-rfs.sh [RATE] [BLOCK] [RUNS]   (default 32mbit 48 3)
# Needs root, OpenMPI, a release build (cargo build --release; build-so.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rate=${1:-32mbit} block=${2:-48} runs=${3:-3}
T=${CARGO_TARGET_DIR:-$here/target}/release
lib=$T/mpiio/libweft_mpiio_openmpi.so
[ -x "$T/weft" ] && [ -f "$lib" ] || { echo "build first: cargo build --release && crates/weft-mpiio/build-so.sh" >&2; exit 1; }
work=$(mktemp -d /tmp/weft-bench-rfs.XXXXXX)
name=bench$$
cleanup() {
  [ -n "${gw_pid:-}" ] && kill "$gw_pid" 2>/dev/null || true
  [ -n "${sink_pid:-}" ] && kill "$sink_pid" 2>/dev/null || true
  "$here/scripts/rfs-link.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT
"$here/scripts/rfs-link.sh" up "$name" 77 "$rate" >/dev/null
cns=wrfs-$name-c sns=wrfs-$name-s server_ip=10.213.77.2
mkdir -p "$work/served" "$work/local" "$work/staging"
head -c 64 /dev/urandom > "$work/key" && chmod 600 "$work/key"
mpicc -O2 -o "$work/jacobi" "$here/bench/rfs/jacobi.c"

# One TCP stream's bandwidth over the link (what the link really gives).
ip netns exec "$sns" python3 -c '
import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("'$server_ip'", 7399)); s.listen(1); c, _ = s.accept()
while c.recv(1 << 20): pass' &
sink_pid=$!
sleep 0.5
link=$(ip netns exec "$cns" python3 -c '
import socket, time; s = socket.create_connection(("'$server_ip'", 7399)); buf = b"x" * (1 << 20)
t = time.time(); n = 24
for _ in range(n): s.sendall(buf)
s.shutdown(socket.SHUT_WR); s.recv(1); print("%.3f" % (n / (time.time() - t)))')
wait "$sink_pid" || true
sink_pid=

ip netns exec "$sns" taskset -c 1 "$T/weft" gateway --listen "$server_ip:7300" --dir "$work/served" \
  --key "$work/key" --uid-map 0:0:0 > "$work/gw.out" 2> "$work/gw.err" &
gw_pid=$!
for _ in $(seq 50); do grep -q listening "$work/gw.out" 2>/dev/null && break; sleep 0.1; done

per_rank=$((block * block * block * 8))
run() { # CONFIG SWEEPS TARGET [HINTS...]
  local config=$1 sweeps=$2 target=$3; shift 3
  : > "$work/hints"
  for h in "$@"; do echo "$h" >> "$work/hints"; done
  local out
  out=$(ip netns exec "$cns" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=1 taskset -c 0 mpirun --bind-to none -np 4 \
    -x LD_PRELOAD="$lib" -x WEFT_RFS_KEY_FILE="$work/key" -x ROMIO_HINTS="$work/hints" \
    "$work/jacobi" "$target" "$block" 5 "$sweeps")
  echo "{\"config\": \"$config\", \"result\": $out}"
  rm -f "$work"/served/snap* "$work"/local/snap*
}
long=${LONG_SWEEPS:-40} short=${SHORT_SWEEPS:-10}
for r in $(seq "$runs"); do
  run PEAK "$long" "discard:/snap"
  run LOCAL "$long" "$work/local/snap"
  run RFS "$long" "rfs:$server_ip:7300:/snap"
  run RFS+ABT-large-long "$long" "rfs:$server_ip:7300:/snap" "abt enable" "rfs_deferred_open true" "abt_buffer_size 1048576" \
    "abt_max_buffer_size $((per_rank * 2))" "abt_deferred_close true"
  run RFS+ABT-large-short "$short" "rfs:$server_ip:7300:/snap" "abt enable" "rfs_deferred_open true" "abt_buffer_size 1048576" \
    "abt_max_buffer_size $((per_rank * 2))" "abt_deferred_close true"
  run RFS+ABT-small-long "$long" "rfs:$server_ip:7300:/snap" "abt enable" "rfs_deferred_open true" "abt_buffer_size 1048576" \
    "abt_max_buffer_size $((per_rank / 2))" "abt_staging_dir $work/staging" "abt_staging_fsync true" \
    "abt_deferred_close true"
done
echo "{\"link_one_stream_mib_s\": $link, \"rate\": \"$rate\", \"block\": $block, \"commit\": \"$(git -C "$here" rev-parse --short HEAD)\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
