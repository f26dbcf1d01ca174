#!/usr/bin/env bash
# Runs the MPI-IO benchmarks of bench/mpi (BENCHMARKS.md, section "MPI-IO"),
# each RUNS times (default 3), with NP ranks (default 4, OpenMPI) on a fresh
# local Weft of 4 servers (libweft_mpiio preloaded, weft: paths) and on the
# local disk through ROMIO (--mca io romio321, no preload), plus the native
# client (`weft bench io`) in the same run. Prints the JSON lines
# (target/bench-mpi/raw.jsonl), the median and range of every figure
# (target/bench-mpi/medians.txt) and the ratios the issue asks about
# (target/bench-mpi/ratios.txt).
#
# Usage: scripts/bench-mpi.sh [contig] [ior] [hpio] [madbench]   (default: all)
# Environment: RUNS (3), NP (4), HPIO_HINTS (e.g. "list,posix,sieve":
# extra c-nc runs with the weft_io_method hint; default none),
# MAD_NPIX (2048), MAD_NBIN (8), CONTIG_BLOCK (256M per rank), EASY_BLOCK
# (64M per rank), HARD_SEGMENTS (256), HPIO_COUNTS (1024,4096,16384).
# Sized to finish in well under 15 minutes on the project's 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
NP=${NP:-4}
MAD_NPIX=${MAD_NPIX:-2048}
MAD_NBIN=${MAD_NBIN:-8}
CONTIG_BLOCK=${CONTIG_BLOCK:-256M}
EASY_BLOCK=${EASY_BLOCK:-64M}
HARD_SEGMENTS=${HARD_SEGMENTS:-256}
HPIO_COUNTS=${HPIO_COUNTS:-1024,4096,16384}
HPIO_HINTS=${HPIO_HINTS:-}
what=${*:-contig ior hpio madbench}
./scripts/deps.sh
cargo build --release --locked -p weft-cli -p weft-mpiio
crates/weft-mpiio/build-so.sh "$PWD/target/release" >/dev/null
weft=$PWD/target/release/weft
lib=$PWD/target/release/mpiio/libweft_mpiio_openmpi.so
out=$PWD/target/bench-mpi
bin=$out/bin
make -s -C bench/mpi OUT="$bin"
mkdir -p "$out"
raw=$out/raw.jsonl
: > "$raw"

dir=$(mktemp -d /tmp/weft-bench-mpi-XXXX)
cleanup() {
  $weft down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
host=127.0.0.$(( (RANDOM % 200) + 20 ))
eval "$($weft up --dir "$dir" --servers 4 --host "$host" --base-port 7950 | grep '^export ')"
export WEFT_CONFIG
mnt=$dir/mnt              # the same file system through FUSE (MADbench2 POSIX)
localdir=$dir/local       # ROMIO baseline: the local disk (ext4, same disk as the servers' storage)
mkdir -p "$localdir"
strip=$(sed -n 's/^strip_bytes *= *\([0-9]*\).*/\1/p' "$WEFT_CONFIG" | head -1)
strip=${strip:-65536}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Every job is bounded; mpirun takes its ranks down when timeout stops it.
on_weft() { timeout 300 mpirun -np "$NP" --mca io romio321 -x LD_PRELOAD="$lib" -x WEFT_CONFIG "$@"; }
on_local() { timeout 300 mpirun -np "$NP" --mca io romio321 "$@"; }
mad_env=(-x IOMETHOD -x IOMODE -x FILETYPE -x BWEXP)

{
  echo "machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r)"
  echo "local disk: $(df -hT "$localdir" | awk 'NR==2{print $1, $2, $3}')"
  echo "weft: 4 servers on $host, strip_bytes $strip (config default), stripe over all servers; $NP ranks OpenMPI $(mpirun --version | head -1 | awk '{print $NF}')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); runs $RUNS; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

for run in $(seq 1 "$RUNS"); do
  echo "== run $run of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for w in $what; do
    case $w in
      contig)
        # Native client baseline (also prints loopback TCP and local disk).
        $weft bench io --procs "$NP" --size-per-proc "$CONTIG_BLOCK" --transfer 1M --json >> "$raw"
        on_weft "$bin/mpi_ior" --mode contig --path weft:/contig --block "$CONTIG_BLOCK" --transfer 1M >> "$raw"
        on_local "$bin/mpi_ior" --mode contig --path "$localdir/contig" --block "$CONTIG_BLOCK" --transfer 1M >> "$raw" ;;
      ior)
        on_weft "$bin/mpi_ior" --mode easy --path weft:/easy --block "$EASY_BLOCK" --transfer 2M >> "$raw"
        on_weft "$bin/mpi_ior" --mode hard --path weft:/hard --segments "$HARD_SEGMENTS" >> "$raw"
        on_local "$bin/mpi_ior" --mode easy --path "$localdir/easy" --block "$EASY_BLOCK" --transfer 2M >> "$raw"
        on_local "$bin/mpi_ior" --mode hard --path "$localdir/hard" --segments "$HARD_SEGMENTS" >> "$raw" ;;
      hpio)
        for fs in weft local; do
          if [ $fs = weft ]; then runner=on_weft; path=weft:/hpio; else runner=on_local; path=$localdir/hpio; fi
          # region count sweep (8-byte regions, 128 apart), all four cases, independent and collective
          $runner "$bin/mpi_hpio" --path "$path" --region-count "$HPIO_COUNTS" --min-seconds 0.1 >> "$raw"
          # region size sweep (4096 regions), independent
          $runner "$bin/mpi_hpio" --path "$path" --region-count 4096 --region-bytes 64,512,4096 --io independent --min-seconds 0.1 >> "$raw"
          # region spacing sweep (4096 regions of 8 bytes), c-nc, independent
          $runner "$bin/mpi_hpio" --path "$path" --region-count 4096 --spacing 8,1024,8192 --cases c-nc --io independent --min-seconds 0.1 >> "$raw"
          # datatype against one call per region (8-byte regions)
          $runner "$bin/mpi_hpio" --path "$path" --region-count 4096 --cases c-nc --methods posix --io independent --min-seconds 0 >> "$raw"
          for h in ${HPIO_HINTS//,/ }; do
            $runner "$bin/mpi_hpio" --path "$path" --region-count 4096 --cases c-nc --io independent --hint "$h" --min-seconds 0.1 >> "$raw"
          done
        done ;;
      madbench)
        # I/O mode, BWEXP 0.01 (essentially pure I/O, the paper's Figure 3);
        # NPIX 2048 = 8 MiB per process per call, NBIN 8 (a 256 MiB file;
        # MAD_NPIX=4096 gives the digest's 32 MiB per call and 1 GiB file).
        args=("$MAD_NPIX" "$MAD_NBIN" 1 64 1048576 1 1)
        export BWEXP=0.01
        for ft in UNIQUE SHARED; do
          export FILETYPE=$ft
          export IOMETHOD=MPI IOMODE=SYNC
          on_weft "${mad_env[@]}" "$bin/madbench2" "${args[@]}" weft:/mad. >> "$raw" 2>> "$out/madbench.err"
          on_local "${mad_env[@]}" "$bin/madbench2" "${args[@]}" "$localdir/mad." >> "$raw" 2>> "$out/madbench.err"
          export IOMETHOD=POSIX
          # POSIX on Weft = through the FUSE mount (the program sees a plain path)
          on_local "${mad_env[@]}" "$bin/madbench2" "${args[@]}" "$mnt/mad." 2>> "$out/madbench.err" \
            | sed 's/"fs":"local"/"fs":"weft-fuse"/' >> "$raw"
          on_local "${mad_env[@]}" "$bin/madbench2" "${args[@]}" "$localdir/mad." >> "$raw" 2>> "$out/madbench.err"
          export IOMETHOD=MPI IOMODE=ASYNC
          on_weft "${mad_env[@]}" "$bin/madbench2" "${args[@]}" weft:/mad. >> "$raw" 2>> "$out/madbench.err"
          on_local "${mad_env[@]}" "$bin/madbench2" "${args[@]}" "$localdir/mad." >> "$raw" 2>> "$out/madbench.err"
        done
        unset BWEXP FILETYPE IOMETHOD IOMODE ;;
    esac
  done
done
python3 scripts/median.py "$raw" | sort | tee "$out/medians.txt"
python3 - "$raw" <<'PY' | tee "$out/ratios.txt"
import json, statistics, sys
from collections import defaultdict
m = defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "mib_per_s" not in r:
        continue
    b = r["bench"]
    if b == "io" and r.get("method") == "weft":
        key = ("native", r["pattern"], r["phase"])
    elif b == "mpi_ior":
        key = ("ior", r["fs"], r["pattern"], r["io"], r["phase"])
    elif b == "mpi_hpio" and r["region_bytes"] == 8 and r["region_count"] == 4096 and r["spacing_bytes"] == 128 and r["case"] == "c-nc" and r["io"] == "independent" and r["hint"] == "none":
        key = ("hpio", r["fs"], r["method"], r["phase"])
    else:
        continue
    m[key].append(r["mib_per_s"])
med = {k: statistics.median(v) for k, v in m.items()}
def ratio(label, a, b):
    if a in med and b in med and med[b] > 0:
        print(f"{label}: {med[a]:.4g} / {med[b]:.4g} MiB/s = {med[a] / med[b]:.3g}")
for ph in ("write", "read"):
    ratio(f"MPI-IO contig independent vs native shared, {ph}", ("ior", "weft", "contig", "independent", ph), ("native", "shared", ph))
    ratio(f"MPI-IO contig collective vs native shared, {ph}", ("ior", "weft", "contig", "collective", ph), ("native", "shared", ph))
    ratio(f"MPI-IO contig weft vs ROMIO local, {ph}", ("ior", "weft", "contig", "independent", ph), ("ior", "local", "contig", "independent", ph))
    for fs in ("weft", "local"):
        ratio(f"{fs} ior-hard independent vs ior-easy, {ph}", ("ior", fs, "hard", "independent", ph), ("ior", fs, "easy", "independent", ph))
        ratio(f"{fs} ior-hard collective vs ior-easy, {ph}", ("ior", fs, "hard", "collective", ph), ("ior", fs, "easy", "independent", ph))
        ratio(f"{fs} HPIO c-nc 4096x8 B datatype vs one call per region, {ph}", ("hpio", fs, "datatype", ph), ("hpio", fs, "posix", ph))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
