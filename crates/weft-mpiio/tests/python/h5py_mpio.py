"""Parallel HDF5 through h5py (issue 24): Debian's python3-h5py-mpi and
python3-mpi4py, run with /usr/bin/python3 under mpirun (OpenMPI), on a
`weft:` name or any path, libweft_mpiio preloaded.

    h5py_mpio.py PATH [write|read|both]      (default both)

write: every rank writes its block of rows of /x (float64, ROWS*P x COLS)
collectively and its slice of /ints (int32, 1000*P) independently; rank 0
sets the attribute "ranks" = P. read: every rank reads the whole file back
and checks every value. Prints "h5py_mpio OK requests=N" on rank 0, N
being the Weft data requests its process sent (weft_mpiio_data_requests,
found in the process with ctypes; 0 without libweft_mpiio)."""
import ctypes
import sys

import numpy as np
from mpi4py import MPI

import h5py

ROWS, COLS, INTS = 64, 100, 1000


def rows(size):
    return np.arange(ROWS * size * COLS, dtype="<f8").reshape(ROWS * size, COLS) * 0.5 + 1.0


def ints(size):
    return (np.arange(INTS * size, dtype="<i8") * 7 - 3).astype("<i4")


def weft_requests():
    try:
        counter = ctypes.CDLL(None).weft_mpiio_data_requests
    except AttributeError:
        return 0
    requests, moved = ctypes.c_int64(0), ctypes.c_int64(0)
    counter(ctypes.byref(requests), ctypes.byref(moved))
    return requests.value


def main():
    path = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "both"
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    assert h5py.get_config().mpi, "h5py is not the MPI build (python3-h5py-mpi)"
    bad = 0
    if mode in ("write", "both"):
        with h5py.File(path, "w", driver="mpio", comm=comm) as f:
            x = f.create_dataset("x", (ROWS * size, COLS), dtype="<f8")
            n = f.create_dataset("ints", (INTS * size,), dtype="<i4")
            with x.collective:
                x[rank * ROWS:(rank + 1) * ROWS] = rows(size)[rank * ROWS:(rank + 1) * ROWS]
            n[rank * INTS:(rank + 1) * INTS] = ints(size)[rank * INTS:(rank + 1) * INTS]
            f.attrs["ranks"] = size
    if mode in ("read", "both"):
        with h5py.File(path, "r", driver="mpio", comm=comm) as f:
            if f.attrs["ranks"] != size:
                bad += 1
                print(f"rank {rank}: attribute ranks = {f.attrs['ranks']}", file=sys.stderr)
            x = f["x"]
            with x.collective:
                got = x[...]
            if not np.array_equal(got, rows(size)):
                bad += 1
                print(f"rank {rank}: /x differs", file=sys.stderr)
            if not np.array_equal(f["ints"][...], ints(size)):
                bad += 1
                print(f"rank {rank}: /ints differs", file=sys.stderr)
    total = comm.allreduce(bad)
    requests = weft_requests()
    if rank == 0 and total == 0:
        print(f"h5py_mpio OK requests={requests}", flush=True)
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
