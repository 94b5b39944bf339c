#!/usr/bin/env python3
"""Tabulates criterion results as Markdown: family, bench name, median.

usage: criterion_table.py [CRITERION_DIR] [--prefix P ...] [--since EPOCH_S] [--per N]

CRITERION_DIR defaults to $CARGO_TARGET_DIR/criterion (or target/criterion).
Reads each bench's `new/benchmark.json` and `new/estimates.json`; the family
is the first `/`-separated part of the bench id. `--prefix` keeps ids that
start with one of the prefixes; `--since` keeps benches measured after that
time (file mtime), so one `cargo bench` run can be tabulated alone.
`--per N` divides by a per-iteration element count found in the bench's
throughput (per element, for batch benches).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def fmt_ns(ns: float) -> str:
    if ns < 1_000:
        return f"{ns:.1f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns / 1e6:.2f} ms"


def main(argv):
    args = argv[1:]
    root = None
    prefixes: list[str] = []
    since = 0.0
    while args:
        a = args.pop(0)
        if a == "--prefix":
            prefixes.append(args.pop(0))
        elif a == "--since":
            since = float(args.pop(0))
        else:
            root = Path(a)
    if root is None:
        root = Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "criterion"
    rows = []
    for bj in sorted(root.glob("**/new/benchmark.json")):
        est = bj.with_name("estimates.json")
        if not est.exists() or est.stat().st_mtime < since:
            continue
        b = json.loads(bj.read_text())
        e = json.loads(est.read_text())
        fid = b["full_id"]
        if prefixes and not any(fid.startswith(p) for p in prefixes):
            continue
        median = e["median"]["point_estimate"]
        mad = e["median_abs_dev"]["point_estimate"]
        thr = b.get("throughput") or {}
        n = thr.get("Elements") or thr.get("Bytes") or 1
        rows.append((fid.split("/")[0], fid, median, mad, n))
    print("| family | bench | median | ± MAD | per element |")
    print("|---|---|---:|---:|---:|")
    for fam, fid, med, mad, n in rows:
        per = fmt_ns(med / n) if n > 1 else ""
        print(f"| {fam} | `{fid}` | {fmt_ns(med)} | {fmt_ns(mad)} | {per} |")


if __name__ == "__main__":
    main(sys.argv)
