#!/usr/bin/env bash
# The demo command: builds Weft, brings up a local file system of four
# servers on 127.0.0.1 under ./.weft, mounted at ./.weft/mnt, and shows it
# working: copy a file in, list, show its layout, read it back natively and
# through the mount, verify the checksums.
# Stop it afterwards with: target/release/weft down
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cargo build --release --locked -p weft-cli
weft=target/release/weft
if [ -f .weft/pids ]; then
  echo "a previous demo file system is still up; stopping it"
  $weft down --dir .weft || true
fi
up=$($weft up --dir .weft --servers 4)
echo "$up"
eval "$(echo "$up" | grep '^export ')"
mnt=.weft/mnt
echo "== file system up: WEFT_CONFIG=$WEFT_CONFIG, mounted at $mnt"
$weft ping
head -c 64M /dev/urandom > .weft/sample.bin
echo "== copy a 64 MiB file in"
$weft mkdir -p weft:/demo
$weft cp .weft/sample.bin weft:/demo/sample.bin
echo "== list"
$weft ls -l weft:/demo
echo "== layout"
$weft layout weft:/demo/sample.bin
echo "== the same file through the FUSE mount"
ls -l $mnt/demo
echo "== read back (native client and mount) and verify"
$weft cp weft:/demo/sample.bin .weft/sample.back
a=$(sha256sum < .weft/sample.bin | cut -d' ' -f1)
b=$(sha256sum < .weft/sample.back | cut -d' ' -f1)
c=$(sha256sum < $mnt/demo/sample.bin | cut -d' ' -f1)
echo "in:         $a"
echo "out:        $b"
echo "via mount:  $c"
[ "$a" = "$b" ] && [ "$a" = "$c" ] && echo "checksums match" || { echo "CHECKSUM MISMATCH"; exit 1; }
$weft statfs
echo
echo "The file system is still up. Use it with:"
echo "  export WEFT_CONFIG=$WEFT_CONFIG"
echo "  $weft ls -l weft:/        # or any tool on $mnt"
echo "Stop it with: $weft down"
