#!/usr/bin/env bash
# The demo command: builds Weft, brings up a local file system of four
# servers on 127.0.0.1 under ./.weft, and shows it working: copy a file in,
# list, show its layout, read it back, verify the checksum.
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
eval "$($weft up --dir .weft --servers 4)"
echo "== file system up: WEFT_CONFIG=$WEFT_CONFIG"
$weft ping
head -c 64M /dev/urandom > .weft/sample.bin
echo "== copy a 64 MiB file in"
$weft mkdir -p weft:/demo
$weft cp .weft/sample.bin weft:/demo/sample.bin
echo "== list"
$weft ls -l weft:/demo
echo "== layout"
$weft layout weft:/demo/sample.bin
echo "== read back and verify"
$weft cp weft:/demo/sample.bin .weft/sample.back
a=$(sha256sum < .weft/sample.bin | cut -d' ' -f1)
b=$(sha256sum < .weft/sample.back | cut -d' ' -f1)
echo "in:  $a"
echo "out: $b"
[ "$a" = "$b" ] && echo "checksums match" || { echo "CHECKSUM MISMATCH"; exit 1; }
$weft statfs
echo
echo "The file system is still up. Use it with:"
echo "  export WEFT_CONFIG=$WEFT_CONFIG"
echo "  $weft ls -l weft:/"
echo "Stop it with: $weft down"
