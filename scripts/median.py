#!/usr/bin/env python3
"""Groups benchmark JSON lines by their parameters and prints the median
(and the range) of every measured figure."""
import json, statistics, sys
from collections import defaultdict

MEASURES = {"mib_per_s", "ops_per_s", "seconds", "ratio_to_loopback_tcp", "ratio_to_local_disk",
            "client_cpu_us_per_op", "write_mib_per_s", "read_mib_per_s", "speedup",
            "latency_us_p50", "latency_us_p99", "load_avg_1m", "server_cpu_us_per_op",
            "ops", "requests", "ratio_to_echo_p50", "weft_servers_idle_cpu_ms_per_s"}
groups = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    record = json.loads(line)
    key = tuple(sorted((k, str(v)) for k, v in record.items() if k not in MEASURES))
    for k, v in record.items():
        if k in MEASURES and isinstance(v, (int, float)):
            groups[key][k].append(v)
for key, measures in groups.items():
    params = " ".join(f"{k}={v}" for k, v in key)
    figures = " ".join(f"{k}={statistics.median(v):g} [{min(v):g}..{max(v):g}] n={len(v)}" for k, v in sorted(measures.items()))
    print(f"{params} :: {figures}")
