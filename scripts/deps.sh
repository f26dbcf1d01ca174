#!/usr/bin/env bash
# Installs what building and testing Weft needs on a fresh Debian machine
# (root, Rust already present). Safe to run repeatedly: it installs only
# packages that are missing.
set -euo pipefail

packages=(gcc make pkg-config bc fuse3 libfuse3-dev fio openmpi-bin libopenmpi-dev mpich libmpich-dev python3 binutils
  # MPI-IO libraries for tests/mpi_libs.rs (Debian builds both against OpenMPI)
  libhdf5-openmpi-dev hdf5-tools libpnetcdf-dev
  # h5py's MPI build for /usr/bin/python3 (tests/mpi_libs.rs openmpi_h5py_mpio)
  python3-h5py-mpi python3-mpi4py
  # MUNGE authentication (tests start their own munged)
  munge
  # Fortran MPI programs (tests/mpi_pmpi.rs; mpifort, mpifort.mpich)
  gfortran)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
# The test command checks formatting and lints.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null || { echo "cargo fmt and cargo clippy are needed (rustfmt, clippy)" >&2; exit 1; }
  rustup component add rustfmt clippy
fi
