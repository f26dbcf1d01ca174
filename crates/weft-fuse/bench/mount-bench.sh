#!/bin/bash
# Indicative figures for the mount: attribute TTL and the write-back cache.
# Usage: crates/weft-fuse/bench/mount-bench.sh [WEFT_BIN]; 4 servers on 127.0.0.1:7701..,
# torn down at the end. Figures in README ("Mounting (FUSE)").
set -u
W=${1:-target/release/weft}
D=/tmp/mount-bench/fs
M=/tmp/mount-bench/mnt
rm -rf $D; mkdir -p $M
$W up --dir $D --servers 4 --base-port 7701 >/dev/null || exit 1
trap '$W umount --lazy $M 2>/dev/null; $W down --dir $D >/dev/null 2>&1' EXIT
CONF=$(ls $D/*.toml | head -1)
counters() { # total requests of the mount daemon via SIGUSR1
  local n=$1; kill -USR1 $(pgrep -f "weft mount $M" | head -1); sleep 0.5
  grep "counters #$n:" $D/mount.log | sed 's/.*requests=\([0-9]*\).*/\1/'
}
mountit() { $W mount $M --config $CONF --daemon --log $D/mount.log "$@"; }
tar -C "$(dirname "$0")/../../.." --exclude=target -cf /tmp/mount-bench/tree.tar crates
for ttl in 0 1000; do
  : > $D/mount.log; mountit --attr-ttl-ms $ttl
  mkdir $M/t$ttl; tar -C $M/t$ttl -xf /tmp/mount-bench/tree.tar
  c0=$(counters 1); s=$(date +%s.%N)
  for i in 1 2 3; do ls -lR $M/t$ttl >/dev/null; find $M/t$ttl -type f -exec cat {} + >/dev/null; done
  e=$(date +%s.%N); c1=$(counters 2)
  echo "attr-ttl-ms $ttl: 3x (ls -lR + cat every file) of $(find $M/t$ttl -type f | wc -l) files: $(echo "$e - $s" | bc) s, $((c1 - c0)) requests"
  $W umount $M; sleep 1
done
for wb in "" "--writeback-cache"; do
  mountit $wb
  for run in 1 2 3; do
    r=$(fio --name=r --filename=$M/fio4k$run --rw=randwrite --bs=4k --size=32M --ioengine=psync --end_fsync=1 --fallocate=none --output-format=json | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['write']; print(round(j['iops']))")
    s=$(fio --name=s --filename=$M/fio8k$run --rw=write --bs=8k --size=128M --ioengine=psync --end_fsync=1 --fallocate=none --output-format=json | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['write']; print(round(j['bw_bytes']/1048576,1))")
    echo "mount ${wb:-(no write-back)} run $run: 4k randwrite $r IOPS; 8k seq write $s MiB/s"
    rm -f $M/fio4k$run $M/fio8k$run
  done
  $W umount $M; sleep 1
done
