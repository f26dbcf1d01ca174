#!/usr/bin/python3
"""Turns the JSON lines of a benchmark run (bench/results/RUN.jsonl[.gz],
written by scripts/benchmarks.sh, or the raw output of scripts/bench.sh /
scripts/bench-mpi.sh) into PNG figures of its sweeps, one file each:

  md_sweep.png    metadata ops/s against the number of servers, per phase
  hpio.png        native HPIO: MiB/s against the region count, per method
                  (one panel per case and operation)
  mpi_hpio.png    HPIO through MPI-IO on Weft: the same, per method and
                  independent/collective
  app_<bench>.png application benchmarks (tile_io, block3d, flash_io,
                  s3d_io): MiB/s per method, Weft beside ROMIO on the local
                  disk, write and read
  s3asim.png      S3aSim: seconds against processes, per strategy and file
                  system

Every point is the median of the run's repetitions (as in BENCHMARKS.md).
A figure whose records are absent from the results is not written.
scripts/render-benchmarks.py links the figures beside its tables.

Needs matplotlib: Debian's python3-matplotlib (for /usr/bin/python3;
scripts/benchmarks.sh installs it), not needed by the test suite.

Usage: /usr/bin/python3 scripts/plot-benchmarks.py RESULTS.jsonl[.gz] OUTDIR
"""
import gzip
import json
import os
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

APPS = ("tile_io", "block3d", "flash_io", "s3d_io")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def medians(records, key, value):
    """{key(r): median of value(r)} over the records key() does not reject (None)."""
    groups = defaultdict(list)
    for r in records:
        k = key(r)
        if k is not None and value in r:
            groups[k].append(r[value])
    return {k: statistics.median(v) for k, v in groups.items()}


def save(fig, outdir, name, written):
    path = os.path.join(outdir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)


def md_sweep(records, outdir, written):
    recs = [r for r in records if r.get("bench") == "md" and r.get("_phase", "md-sweep") == "md-sweep"
            and r.get("layout") == "unique_dir" and r.get("method") == "aggregate" and r.get("inflight") == 1]
    med = medians(recs, lambda r: (r["phase"], r["servers"]), "ops_per_s")
    if len({s for _, s in med}) < 2:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for phase in sorted({p for p, _ in med}):
        pts = sorted((s, v) for (p, s), v in med.items() if p == phase)
        ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", label=phase)
    ax.set(xlabel="servers", ylabel="operations/s (median)", title="Metadata operations against servers")
    ax.legend(fontsize=8)
    save(fig, outdir, "md_sweep.png", written)


def region_sweep(records, outdir, written, bench, name, title, series):
    recs = [r for r in records if r.get("bench") == bench and r.get("fs", "weft") == "weft"]
    op_key = "op" if bench == "hpio" else "phase"
    med = medians(recs, lambda r: (r.get("case"), r.get(op_key), series(r), r.get("region_count")), "mib_per_s")
    cases = sorted({c for c, _, _, _ in med if c})
    ops = sorted({o for _, o, _, _ in med if o}, reverse=True)
    if not cases or not ops:
        return
    fig, axes = plt.subplots(len(ops), len(cases), figsize=(3.2 * len(cases), 2.8 * len(ops)), squeeze=False)
    for i, op in enumerate(ops):
        for j, case in enumerate(cases):
            ax = axes[i][j]
            for s in sorted({s for c, o, s, _ in med if c == case and o == op}):
                pts = sorted((n, v) for (c, o, ss, n), v in med.items() if c == case and o == op and ss == s)
                ax.plot([n for n, _ in pts], [v for _, v in pts], marker="o", label=s)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{case} {op}", fontsize=9)
            ax.set_xlabel("regions", fontsize=8)
            ax.set_ylabel("MiB/s (median)", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    save(fig, outdir, name, written)


def apps(records, outdir, written):
    for bench in APPS:
        recs = [r for r in records if r.get("bench") == bench and not r.get("atomic") and r.get("api", "mpiio") == "mpiio"]
        med = medians(recs, lambda r: (r["phase"], r["method"], r["fs"]), "mib_per_s")
        if not med:
            continue
        methods = []
        for _, m, _ in sorted(med, key=lambda k: k[1]):
            if m not in methods:
                methods.append(m)
        phases = [p for p in ("write", "read") if any(k[0] == p for k in med)]
        fig, axes = plt.subplots(1, len(phases), figsize=(5 * len(phases), 3.6), squeeze=False)
        for ax, phase in zip(axes[0], phases):
            width = 0.4
            for k, (fs, label) in enumerate((("weft", "Weft"), ("local", "ROMIO, local disk"))):
                xs = [i + (k - 0.5) * width for i in range(len(methods))]
                ys = [med.get((phase, m, fs), 0.0) for m in methods]
                ax.bar(xs, ys, width, label=label)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel("MiB/s (median)")
            ax.set_title(f"{bench} {phase}")
            ax.legend(fontsize=8)
        save(fig, outdir, f"app_{bench}.png", written)


def s3asim(records, outdir, written):
    recs = [r for r in records if r.get("bench") == "s3asim" and not r.get("query_sync")]
    med = medians(recs, lambda r: (r["fs"], r["strategy"], r["procs"]), "seconds")
    if len({p for _, _, p in med}) < 1 or not med:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for fs, style in (("weft", "-"), ("local", "--")):
        for strategy in sorted({s for f, s, _ in med if f == fs}):
            pts = sorted((p, v) for (f, s, p), v in med.items() if f == fs and s == strategy)
            ax.plot([p for p, _ in pts], [v for _, v in pts], style, marker="o", label=f"{fs} {strategy}")
    ax.set(xlabel="processes", ylabel="seconds (median, lower is better)", title="S3aSim, no query sync")
    ax.legend(fontsize=7)
    save(fig, outdir, "s3asim.png", written)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: plot-benchmarks.py RESULTS.jsonl[.gz] OUTDIR")
    records = load(sys.argv[1])
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    written = []
    md_sweep(records, outdir, written)
    region_sweep(records, outdir, written, "hpio", "hpio.png", "Native HPIO on Weft", lambda r: r.get("method"))
    region_sweep(records, outdir, written, "mpi_hpio", "mpi_hpio.png", "HPIO through MPI-IO on Weft",
                 lambda r: f"{r.get('method')} {r.get('io')}" + (f" {r['hint']}" if r.get('hint', 'none') != 'none' else ''))
    apps(records, outdir, written)
    s3asim(records, outdir, written)
    for path in written:
        print(path)
    if not written:
        raise SystemExit("no sweep found in the results: no figure written")


main()
