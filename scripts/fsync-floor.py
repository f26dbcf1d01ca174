#!/usr/bin/env python3
"""The disk's floor for one-at-a-time durable operations (issue 10's
baseline for `weft bench md`): THREADS threads, each appending 300 bytes to
its own preallocated file and calling fdatasync, OPS times. Prints one JSON
line: operations per second over all threads, and the fdatasync latency
percentiles. Standard library only."""
import argparse, json, os, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--dir", required=True)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--ops", type=int, default=1000, help="appends per thread")
ap.add_argument("--bytes", type=int, default=300)
a = ap.parse_args()
record = b"x" * a.bytes
latencies = [[] for _ in range(a.threads)]
paths = [os.path.join(a.dir, f"fsync-floor-{os.getpid()}-{t}") for t in range(a.threads)]
fds = []
for p in paths:
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, a.bytes * a.ops)  # preallocated, as a log is
    os.fsync(fd)
    fds.append(fd)
barrier = threading.Barrier(a.threads + 1)


def work(t):
    barrier.wait()
    fd, lat = fds[t], latencies[t]
    for i in range(a.ops):
        start = time.perf_counter()
        os.pwrite(fd, record, i * a.bytes)
        os.fdatasync(fd)
        lat.append(time.perf_counter() - start)


threads = [threading.Thread(target=work, args=(t,)) for t in range(a.threads)]
for th in threads:
    th.start()
barrier.wait()
start = time.perf_counter()
for th in threads:
    th.join()
seconds = time.perf_counter() - start
for fd, p in zip(fds, paths):
    os.close(fd)
    os.unlink(p)
all_lat = sorted(x for lat in latencies for x in lat)
pct = lambda q: round(all_lat[round((len(all_lat) - 1) * q)] * 1e6, 1)
print(json.dumps({"bench": "fsync_floor", "threads": a.threads, "ops_per_thread": a.ops, "record_bytes": a.bytes,
                  "ops_per_s": round(a.threads * a.ops / seconds), "latency_us_p50": pct(0.5),
                  "latency_us_p99": pct(0.99), "load_avg_1m": os.getloadavg()[0]}))
