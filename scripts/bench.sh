#!/usr/bin/env bash
# Runs the benchmarks behind BENCHMARKS.md, each RUNS times (default 3), on
# a fresh local file system of 4 servers mounted with FUSE, and prints the
# median of every figure. Raw JSON lines go to $OUT/raw.jsonl (OUT default
# target/bench). scripts/benchmarks.sh runs this (and bench-mpi.sh) for the
# whole page; see BENCHMARKS.md.
# Usage: scripts/bench.sh [io] [md] [hpio] [rpc] [fuse] [mdtest] [postmark] [bonnie] [md-sweep] [md-delay]
#   (default: all but md-sweep and md-delay)
# Sizes (environment): IO_SIZE per process (256M), MD_FILES per process
# (1000), FIO_SIZE per job (256M), PM_FILES / PM_TRANSACTIONS (5000 /
# 10000), MDTEST_FILES per process (2000), HPIO_REGIONS (65536), HPIO_POSIX_REGIONS (4096), RPC_COUNT /
# RPC_IO_COUNT (20000 / 10000). COLD=1 (default) drops the page cache
# before every read phase (io, fio) when the kernel lets us; reads are
# marked "cold" or "warm" in the JSON.
# io: `weft bench io` (every byte read is checked, outside the timer).
# md: `weft bench md` one and INFLIGHT (8) in flight per process, files of
#   1 stripe (create, stat, remove) one in flight, plus the
#   disk's floor for one-at-a-time durable operations (scripts/fsync-floor.py:
#   4 threads each appending 300 bytes + fdatasync, on the servers' disk).
# rpc: `weft bench rpc` (null request and 4 KiB I/O latency and CPU per
#   request, beside a same-run TCP echo baseline).
# mdtest: bench/posix/mdtest.c (mdtest-like: 4 processes x MDTEST_FILES empty
#   files, each in its own directory: create, stat, remove) through the
#   mount, and on the local disk (same run).
# postmark: through the mount, and on the local disk (same run).
# md-sweep: `weft bench md` on fresh file systems of SWEEP_SERVERS (default
#   "1 2 4 8") servers; per run, each of SWEEP_MODES (default: aggregate,
#   --client-driven, --inflight INFLIGHT; "aggregate" = no flag) with
#   FILES (MD_FILES) files per process. md-delay: 4 servers, every worker
#   message delayed DELAY_MS (10) ms, per-operation latency of both paths.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
IO_SIZE=${IO_SIZE:-256M}
MD_FILES=${MD_FILES:-1000}
FIO_SIZE=${FIO_SIZE:-256M}
MDTEST_FILES=${MDTEST_FILES:-2000}
PM_FILES=${PM_FILES:-5000}
PM_TRANSACTIONS=${PM_TRANSACTIONS:-10000}
HPIO_REGIONS=${HPIO_REGIONS:-65536}
HPIO_POSIX_REGIONS=${HPIO_POSIX_REGIONS:-4096}
RPC_COUNT=${RPC_COUNT:-20000}
RPC_IO_COUNT=${RPC_IO_COUNT:-10000}
INFLIGHT=${INFLIGHT:-8}
COLD=${COLD:-1}
SWEEP_MODES=${SWEEP_MODES:-"aggregate --client-driven --inflight"}
./scripts/deps.sh
what=${*:-io md hpio rpc fuse mdtest postmark bonnie}
case " $what " in *" postmark "*|*" bonnie "*)
  for p in bonnie++ postmark; do dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bonnie++ postmark >/dev/null; break; }; done ;;
esac
cargo build --release --locked -p weft-cli
weft=$PWD/target/release/weft
out=${OUT:-target/bench}
mkdir -p $out
# Cold reads need root and a kernel that lets us drop the page cache.
cold=""
if [ "$COLD" = 1 ] && sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then cold=1; fi
drop() { [ -z "$cold" ] || { sync; echo 3 > /proc/sys/vm/drop_caches; }; }
caches=$([ -n "$cold" ] && echo cold || echo warm)
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
          for mode in $SWEEP_MODES; do
            case $mode in aggregate) flag="" ;; --inflight) flag="--inflight $INFLIGHT" ;; *) flag=$mode ;; esac
            $weft --config $sweep_dir/weft.toml bench md --procs 4 --files ${FILES:-$MD_FILES} $flag --json >> $raw
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
case " $what " in *" mdtest "*) cc -O2 -o $dir/mdtest bench/posix/mdtest.c ;; esac

for run in $(seq 1 $RUNS); do
  for w in $what; do
    case $w in
      io) $weft bench io --procs 4 --size-per-proc $IO_SIZE --json ${cold:+--drop-caches} >> $raw ;;
      md)
        $weft bench md --procs 4 --files $MD_FILES --json >> $raw
        $weft bench md --procs 4 --files $MD_FILES --inflight $INFLIGHT --json >> $raw
        $weft bench md --procs 4 --files $MD_FILES --stripe-count 1 --phases create,stat,remove --json >> $raw
        python3 scripts/fsync-floor.py --dir $dir/server-0 --threads 4 --ops $MD_FILES >> $raw ;;
      rpc) $weft bench rpc --count $RPC_COUNT --io-count $RPC_IO_COUNT --json >> $raw ;;
      hpio)
        $weft bench hpio --region-count $HPIO_REGIONS --methods list,list64,datatype --json >> $raw
        $weft bench hpio --region-count $HPIO_POSIX_REGIONS --methods posix,datatype --cases c-nc --json >> $raw
        $weft bench hpio --region-count 1024 --region-bytes 4096 --spacing-bytes 4096 --methods datatype --cases c-c,c-nc --json >> $raw ;;
      fuse)
        for rw in write read; do
          [ $rw = write ] || drop
          r=$(cd $mnt && fio --name=seq --directory=$mnt --rw=$rw --bs=1M --size=$FIO_SIZE --numjobs=4 --ioengine=psync \
                --fallocate=none --group_reporting --output-format=json 2>/dev/null \
              | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['$rw']['bw_bytes']/1048576, j['$rw']['io_bytes'])")
          c=$([ $rw = read ] && echo $caches || echo n/a)
          echo "{\"bench\":\"fuse_fio\",\"method\":\"fuse\",\"phase\":\"$rw\",\"procs\":4,\"transfer\":1048576,\"size_per_job\":\"$FIO_SIZE\",\"caches\":\"$c\",\"bytes\":${r#* },\"mib_per_s\":${r% *},\"load_avg_1m\":$(cut -d' ' -f1 /proc/loadavg)}" >> $raw
        done
        rm -f $mnt/seq* ;;
      mdtest)
        for where in fuse local; do
          md=$([ $where = fuse ] && echo $mnt/mdtest || echo $dir/local-mdtest)
          rm -rf $md && mkdir $md
          $dir/mdtest -n $MDTEST_FILES -p 4 -d $md \
            | sed "s/}\$/,\"method\":\"$where\",\"load_avg_1m\":$(cut -d' ' -f1 /proc/loadavg)}/" >> $raw
          rmdir $md
        done ;;
      postmark)
        for where in fuse local; do
          pm=$([ $where = fuse ] && echo $mnt/pm || echo $dir/local-pm)
          rm -rf $pm; mkdir -p $pm
          s=$( { /usr/bin/time -f %e postmark <<PM >/dev/null; } 2>&1
set location $pm
set number $PM_FILES
set transactions $PM_TRANSACTIONS
run
quit
PM
)
          echo "{\"bench\":\"postmark\",\"method\":\"$where\",\"files\":$PM_FILES,\"transactions\":$PM_TRANSACTIONS,\"seconds\":$s,\"load_avg_1m\":$(cut -d' ' -f1 /proc/loadavg)}" >> $raw
          rm -rf $pm
        done ;;
      bonnie)
        mkdir -p $mnt/bonnie
        bonnie++ -d $mnt/bonnie -u root -s 2048 -r 1024 -n 4 -q 2>/dev/null | tail -1 > $out/bonnie-$run.csv || true ;;
    esac
  done
done
python3 scripts/median.py $raw | tee $out/medians.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $out/machine.txt
