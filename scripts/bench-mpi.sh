#!/usr/bin/env bash
# Runs the MPI-IO benchmarks of bench/mpi (BENCHMARKS.md, section "MPI-IO"),
# each RUNS times (default 3), with NP ranks (default 4, OpenMPI) on a fresh
# local Weft of 4 servers (libweft_mpiio preloaded, weft: paths) and on the
# local disk through ROMIO (--mca io romio321, no preload), plus the native
# client (`weft bench io`) in the same run. Prints the JSON lines
# ($OUT/raw.jsonl, OUT default target/bench-mpi), the median and range of every figure
# (target/bench-mpi/medians.txt) and the ratios the issue asks about
# (target/bench-mpi/ratios.txt).
#
# Usage: scripts/bench-mpi.sh [contig] [ior] [hpio] [madbench] [tile] [block3d]
#        [flash] [s3d] [s3asim] [peak]   (default: all)
# Environment: RUNS (3), NP (4), HPIO_HINTS (e.g. "list,posix,sieve":
# extra c-nc runs with the weft_io_method hint; default none),
# HPIO_BIG (65536: c-nc independent, issue 10's case),
# MAD_NPIX (2048), MAD_NBIN (8), CONTIG_BLOCK (256M per rank), EASY_BLOCK
# (64M per rank), HARD_SEGMENTS (256), HPIO_COUNTS (1024,4096,16384).
# The application benchmarks (bench/mpi/README.md) run every method of
# bench/mpi/apps.h (APP_METHODS overrides, e.g. "list,datatype,two-phase"),
# scaled to the 2-core VM: tile reader with the thesis's wall (3x2 tiles of
# 1024x768 24-bit pixels, 270/128 overlap, 6 ranks; methods plus list-64,
# list I/O capped at 64 regions per request) but TILE_FRAMES (10)
# frames, not 100 (102 MiB read per method); 3-D block on 8 ranks with
# BLOCK3D_SIZE (256)^3 ints (64 MiB, not 600^3 = 824 MiB); FLASH-IO with
# the thesis's 80 blocks of 8^3 cells, 4 guard cells, 24 variables per
# process (FLASH_BLOCKS; 7.5 MiB per process, 30 MiB at 4 ranks; posix,
# one request per 8-byte memory piece, ~3,000 requests/s here, only with
# FLASH_POSIX_BLOCKS (1) blocks; plus the same through parallel HDF5 with
# collective transfers only: HDF5 1.10 turns an independent write of the
# interleaved memory into one MPI-IO call per 8-byte piece, as slow as
# posix); S3D-IO
# with an S3D_GRID (64x64x64) grid, 32 MiB, not about 1.19 GB, without
# and with atomic mode; S3aSim on S3ASIM_NP (4 8) processes with
# S3ASIM_QUERIES (5) queries, S3ASIM_FRAGMENTS (32) fragments and 200-400
# results per query (about 13 MB of output, not the thesis's 20 x 128 x
# 1000-2000, 208 MB), compute speed 1, all strategies with and without query sync.
# peak (issue 25): peak RSS per rank of a noncontiguous collective write and
# read (bench/mpi/mpi_peak.c: interleaved 1 MiB blocks in the file, a
# 64-byte hole after each block in memory) on PEAK_NP (1) ranks for each
# size per rank in PEAK_SIZES (256M 512M 1G), on Weft with the default
# (datatype) and the two-phase collective method, and through ROMIO on the
# local disk, in the same run; with PEAK_BASELINE_LIB (another build of
# libweft_mpiio_openmpi.so, e.g. of an older commit) the Weft runs are
# repeated through it ("fs":"weft-baseline").
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
HPIO_BIG=${HPIO_BIG:-65536}
APP_METHODS=${APP_METHODS:-posix,sieving,list,datatype,two-phase,coll-datatype}
TILE_FRAMES=${TILE_FRAMES:-10}
BLOCK3D_SIZE=${BLOCK3D_SIZE:-256}
FLASH_BLOCKS=${FLASH_BLOCKS:-80}
FLASH_POSIX_BLOCKS=${FLASH_POSIX_BLOCKS:-1}
S3D_GRID=${S3D_GRID:-64x64x64}
S3ASIM_NP=${S3ASIM_NP:-4 8}
S3ASIM_QUERIES=${S3ASIM_QUERIES:-5}
S3ASIM_FRAGMENTS=${S3ASIM_FRAGMENTS:-32}
PEAK_NP=${PEAK_NP:-1}
PEAK_SIZES=${PEAK_SIZES:-256M 512M 1G}
PEAK_BASELINE_LIB=${PEAK_BASELINE_LIB:-}
what=${*:-contig ior hpio madbench tile block3d flash s3d s3asim peak}
./scripts/deps.sh
cargo build --release --locked -p weft-cli -p weft-mpiio
crates/weft-mpiio/build-so.sh "$PWD/target/release" >/dev/null
weft=$PWD/target/release/weft
lib=$PWD/target/release/mpiio/libweft_mpiio_openmpi.so
out=${OUT:-$PWD/target/bench-mpi}
out=$(mkdir -p "$out" && cd "$out" && pwd)
bin=$PWD/target/bench-mpi/bin
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
# An application benchmark on Weft and on the local disk: apps NP PROGRAM ARGS...
apps() {
  local np=$1 prog=$2
  shift 2
  NP=$np on_weft "$bin/$prog" --path "weft:/$prog" "$@" >> "$raw"
  NP=$np on_local "$bin/$prog" --path "$localdir/$prog" "$@" >> "$raw"
}
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
          # issue 10's case: c-nc, HPIO_BIG (65536) 8-byte regions per rank, independent
          $runner "$bin/mpi_hpio" --path "$path" --region-count "$HPIO_BIG" --cases c-nc --io independent --min-seconds 0.1 >> "$raw"
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
      # The tile reader adds list I/O capped at 64 regions per request (the thesis's list).
      tile) apps 6 tile_io --methods "$APP_METHODS,list-64" --frames "$TILE_FRAMES" ;;
      block3d) apps 8 block3d --methods "$APP_METHODS" --size "$BLOCK3D_SIZE" ;;
      flash)
        flash_methods=$(echo ",$APP_METHODS," | sed 's/,posix,/,/; s/^,//; s/,$//')
        apps "$NP" flash_io --methods "$flash_methods" --blocks "$FLASH_BLOCKS"
        if [[ ",$APP_METHODS," == *,posix,* ]]; then
          apps "$NP" flash_io --methods posix --blocks "$FLASH_POSIX_BLOCKS"
        fi
        if [ -x "$bin/flash_io_hdf5" ]; then
          apps "$NP" flash_io_hdf5 --api hdf5 --methods two-phase,coll-datatype --blocks "$FLASH_BLOCKS"
        fi ;;
      s3d) apps "$NP" s3d_io --methods "$APP_METHODS" --grid "$S3D_GRID" ;;
      peak)
        for size in $PEAK_SIZES; do
          for method in datatype two_phase; do
            NP=$PEAK_NP on_weft "$bin/mpi_peak" --path weft:/peak --size "$size" --method "$method" >> "$raw"
            if [ -n "$PEAK_BASELINE_LIB" ]; then
              timeout 300 mpirun -np "$PEAK_NP" --mca io romio321 -x LD_PRELOAD="$PEAK_BASELINE_LIB" -x WEFT_CONFIG \
                "$bin/mpi_peak" --path weft:/peak --size "$size" --method "$method" \
                | sed 's/"fs":"weft"/"fs":"weft-baseline"/' >> "$raw"
            fi
          done
          NP=$PEAK_NP on_local "$bin/mpi_peak" --path "$localdir/peak" --size "$size" >> "$raw"
        done ;;
      s3asim)
        for np in $S3ASIM_NP; do
          apps "$np" s3asim --queries "$S3ASIM_QUERIES" --fragments "$S3ASIM_FRAGMENTS" --results-min 200 --results-max 400
        done ;;
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
# The application benchmarks: each method against datatype I/O, and Weft
# against ROMIO on the local disk, per phase.
apps, s3a = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        if r["bench"] in ("tile_io", "block3d", "flash_io", "s3d_io"):
            bench = r["bench"] + ("-hdf5" if r.get("api") == "hdf5" else "")
            bench += f" {r['blocks_per_proc']} blocks" if "blocks_per_proc" in r else ""
            apps[(bench, r["fs"], r["method"], r.get("atomic", 0), r["phase"])].append(r["mib_per_s"])
        elif r["bench"] == "s3asim":
            s3a[(r["procs"], r["query_sync"], r["fs"], r["strategy"])].append(r["seconds"])
amed = {k: statistics.median(v) for k, v in apps.items()}
for (bench, fs, method, atomic, phase), v in sorted(amed.items()):
    label = f"{bench}{' atomic' if atomic else ''} {phase}"
    base = amed.get((bench, fs, "datatype", atomic, phase))
    if fs == "weft" and method != "datatype" and base:
        print(f"{label}: weft datatype / {method} = {base:.4g} / {v:.4g} MiB/s = {base / v:.3g}")
    local = amed.get((bench, "local", method, atomic, phase))
    if fs == "weft" and local:
        print(f"{label} {method}: weft / ROMIO local = {v:.4g} / {local:.4g} MiB/s = {v / local:.3g}")
# Peak RSS (issue 25): per size, method and phase, the median over runs of
# the largest rank's peak, against the user data and ROMIO on the local disk.
peak, peak_bw = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        if r["bench"] == "mpi_peak":
            key = (r["size_mib"], r["fs"], r["method"], r["phase"])
            peak[key].append((r["peak_rss_mib"], r["user_mib"]))
            peak_bw[key].append(r["mib_per_s"])
pmed = {k: (statistics.median(p for p, _ in v), v[0][1]) for k, v in peak.items()}
for (size, fs, method, phase), (p, user) in sorted(pmed.items()):
    if fs == "local":
        continue
    local = pmed.get((size, "local", "romio", phase))
    vs = f", ROMIO local {local[0]:.0f} MiB, ratio {p / local[0]:.3f}" if local else ""
    bw = statistics.median(peak_bw[(size, fs, method, phase)])
    lbw = statistics.median(peak_bw[(size, "local", "romio", phase)]) if local else float("nan")
    print(f"peak {size} MiB/rank {method} {phase}: {fs} {p:.0f} MiB = user {user:.0f} + {p - user:.0f} MiB{vs}; "
          f"{bw:.0f} MiB/s (ROMIO local {lbw:.0f})")
smed = {k: statistics.median(v) for k, v in s3a.items()}
for (procs, sync, fs, strategy), v in sorted(smed.items()):
    others = {k[3]: w for k, w in smed.items() if k[:3] == (procs, sync, fs)}
    print(f"s3asim {procs} procs, query sync {sync}, {fs}: {strategy} {v:.3g} s (fastest: {min(others, key=others.get)})")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
