#!/usr/bin/env bash
# Runs the benchmarks behind BENCHMARKS.md, each RUNS times (default 3), on
# a fresh local file system of 4 servers mounted with FUSE, and prints the
# median of every figure. Raw JSON lines go to target/bench/raw.jsonl.
# Usage: scripts/bench.sh [io] [md] [hpio] [rpc] [fuse] [postmark] [bonnie] [md-sweep] [md-delay]
#   (default: all but md-sweep and md-delay)
# rpc: `weft bench rpc` (null request and 4 KiB I/O latency and CPU per
#   request, beside a same-run TCP echo baseline).
# md-sweep: `weft bench md` on fresh file systems of SWEEP_SERVERS (default
#   "1 2 4 8") servers; per run, aggregate and --client-driven one operation
#   at a time per process, and aggregate with INFLIGHT (8) operations in
#   flight per process. md-delay: 4 servers, every worker message delayed
#   DELAY_MS (10) ms, per-operation latency of both paths.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
./scripts/deps.sh
what=${*:-io md hpio rpc fuse postmark bonnie}
case " $what " in *" postmark "*|*" bonnie "*)
  for p in bonnie++ postmark; do dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bonnie++ postmark >/dev/null; break; }; done ;;
esac
cargo build --release --locked -p weft-cli
weft=$PWD/target/release/weft
out=target/bench
mkdir -p $out
raw=$out/raw.jsonl
: > $raw
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r); load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee $out/machine.txt

# A fresh file system of $1 servers in $2 (its own address and ports).
fresh_fs() {
  $weft up --dir $2 --servers $1 --host 127.0.0.$(( (RANDOM % 200) + 20 )) --base-port 8100 >/dev/null
}
sweep_dir=""
trap '[ -n "$sweep_dir" ] && { $weft down --dir $sweep_dir >/dev/null 2>&1 || true; rm -rf $sweep_dir; }' EXIT
for w in $what; do
  case $w in
    md-sweep)
      for n in ${SWEEP_SERVERS:-1 2 4 8}; do
        sweep_dir=$(mktemp -d /tmp/weft-sweep-XXXX)
        fresh_fs $n $sweep_dir
        for run in $(seq 1 $RUNS); do
          echo "md-sweep servers=$n run=$run load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $out/machine.txt
          for mode in "" "--client-driven" "--inflight ${INFLIGHT:-8}"; do
            $weft --config $sweep_dir/weft.toml bench md --procs 4 --files ${FILES:-1000} $mode --json >> $raw
          done
        done
        $weft down --dir $sweep_dir >/dev/null; rm -rf $sweep_dir; sweep_dir=""
      done ;;
    md-delay)
      sweep_dir=$(mktemp -d /tmp/weft-sweep-XXXX)
      fresh_fs 4 $sweep_dir
      for run in $(seq 1 $RUNS); do
        echo "md-delay run=$run load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $out/machine.txt
        for mode in "" "--client-driven"; do
          $weft --config $sweep_dir/weft.toml bench md --procs 4 --files ${DELAY_FILES:-100} --delay-ms ${DELAY_MS:-10} $mode --json >> $raw
        done
      done
      $weft down --dir $sweep_dir >/dev/null; rm -rf $sweep_dir; sweep_dir="" ;;
  esac
done
what=$(echo " $what " | sed 's/ md-sweep / /; s/ md-delay / /' | xargs)
if [ -z "$what" ]; then
  python3 scripts/median.py $raw | tee $out/medians.txt
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $out/machine.txt
  exit 0
fi

dir=$(mktemp -d /tmp/weft-bench-XXXX)
trap '$weft down --dir $dir >/dev/null 2>&1 || true; rm -rf $dir' EXIT
host=127.0.0.$(( (RANDOM % 200) + 20 ))
eval "$($weft up --dir $dir --servers 4 --host $host --base-port 7900 | grep '^export ')"
mnt=$dir/mnt

for run in $(seq 1 $RUNS); do
  for w in $what; do
    case $w in
      io) $weft bench io --procs 4 --size-per-proc 256M --json >> $raw ;;
      md) $weft bench md --procs 4 --files 1000 --json >> $raw ;;
      rpc) $weft bench rpc --json >> $raw ;;
      hpio)
        $weft bench hpio --region-count 65536 --methods list,list64,datatype --json >> $raw
        $weft bench hpio --region-count 4096 --methods posix,datatype --cases c-nc --json >> $raw
        $weft bench hpio --region-count 1024 --region-bytes 4096 --spacing-bytes 4096 --methods datatype --cases c-c,c-nc --json >> $raw ;;
      fuse)
        for rw in write read; do
          r=$(cd $mnt && fio --name=seq$rw --directory=$mnt --rw=$rw --bs=1M --size=256M --numjobs=4 --ioengine=psync \
                --fallocate=none --group_reporting --output-format=json 2>/dev/null \
              | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['$rw']['bw_bytes']/1048576)")
          echo "{\"bench\":\"fuse_fio\",\"method\":\"fuse\",\"phase\":\"$rw\",\"procs\":4,\"transfer\":1048576,\"bytes\":1073741824,\"mib_per_s\":$r}" >> $raw
        done
        rm -f $mnt/seq* ;;
      postmark)
        mkdir -p $mnt/pm
        s=$( { /usr/bin/time -f %e postmark <<PM >/dev/null; } 2>&1
set location $mnt/pm
set number 5000
set transactions 10000
run
quit
PM
)
        echo "{\"bench\":\"postmark\",\"method\":\"fuse\",\"files\":5000,\"transactions\":10000,\"seconds\":$s}" >> $raw ;;
      bonnie)
        mkdir -p $mnt/bonnie
        bonnie++ -d $mnt/bonnie -u root -s 2048 -r 1024 -n 4 -q 2>/dev/null | tail -1 > $out/bonnie-$run.csv || true ;;
    esac
  done
done
python3 scripts/median.py $raw | tee $out/medians.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $out/machine.txt
