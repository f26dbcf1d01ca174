#!/usr/bin/env bash
# Builds libweft_mpiio_openmpi.so and libweft_mpiio_mpich.so.
#
# `cargo build --release -p weft-mpiio` builds the Rust core as a static
# library (libweft_mpiio.a; no MPI needed). This script then, per MPI
# flavour, generates the MPI_File_* wrappers from that flavour's exported
# symbols and mpi.h (tools/gen_wrappers.py, output kept apart in
# mpiio/gen/<flavour>/), compiles the C layer with the flavour's own mpicc
# and links it with the core into mpiio/libweft_mpiio_<flavour>.so. The
# integration tests (tests/mpi.rs) run it; CI gets the MPI packages from
# scripts/deps.sh.
#
# usage: build-so.sh [PROFILE_DIR]   (default: ${CARGO_TARGET_DIR:-target}/release)
# WEFT_MPIIO_CORE=path/to/libweft_mpiio*.a overrides the core library (the
# tests pass the one `cargo test` just built under deps/).
# A flavour whose mpicc is missing is skipped with a message.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
profile_dir=${1:-${CARGO_TARGET_DIR:-$here/../../target}/release}
core=${WEFT_MPIIO_CORE:-$profile_dir/libweft_mpiio.a}
[ -f "$core" ] || { echo "missing $core: run cargo build --release -p weft-mpiio" >&2; exit 1; }
out=$profile_dir/mpiio
mkdir -p "$out"

for flavour in openmpi mpich; do
  case $flavour in
    openmpi) mpicc=mpicc; libdir_of() { mpicc --showme:libdirs | awk '{print $1}'; }; libname=libmpi.so ;;
    mpich) mpicc=mpicc.mpich; libdir_of() { mpicc.mpich -show | tr ' ' '\n' | sed -n 's/^-L//p' | head -1; }; libname=libmpich.so ;;
  esac
  if ! command -v "$mpicc" >/dev/null; then
    echo "build-so.sh: $mpicc not found, skipping $flavour" >&2
    continue
  fi
  libmpi=$(libdir_of)/$libname
  gen=$out/gen/$flavour
  python3 "$here/tools/gen_wrappers.py" "$mpicc" "$libmpi" "$gen" "$here/c"
  "$mpicc" -shared -fPIC -O2 -g -Wall -Wswitch-enum -Werror -Wno-unused-function \
    -I"$here/c" -I"$gen" \
    "$here"/c/*.c "$gen/wrappers.c" "$core" \
    -Wl,--version-script="$gen/exports.map" -Wl,--no-undefined \
    -lpthread -ldl -lm -lrt -lutil -lgcc_s \
    -o "$out/libweft_mpiio_$flavour.so.tmp"
  mv "$out/libweft_mpiio_$flavour.so.tmp" "$out/libweft_mpiio_$flavour.so"
  echo "built $out/libweft_mpiio_$flavour.so ($(grep -c implemented "$gen/functions.txt") implemented, $(grep -c unsupported "$gen/functions.txt") unsupported, $(grep -c handwritten "$gen/functions.txt") handwritten)"
done
