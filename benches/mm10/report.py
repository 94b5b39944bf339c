#!/usr/bin/env python3
"""Helper of benches/mm10.sh: one result row per run, then the tables.

  report.py row TOOL PREFIX   reads PREFIX.time (GNU time, JSON format of
                              mm10.sh), PREFIX.out (the tool's stdout) and,
                              for stormbreak, PREFIX.d/{summary,recording}.json;
                              prints one JSON line
  report.py table RESULTS     medians per tool, ratios, agreement, Erlang C
"""

from __future__ import annotations

import json
import math
import statistics
import sys

TOOLS = ("stormbreak", "minimal", "simpy")


def row(tool: str, prefix: str) -> dict:
    with open(prefix + ".time") as f:
        # GNU time may prepend "Command exited with non-zero status" lines.
        t = json.loads(f.read().strip().splitlines()[-1])
    r = {"tool": tool, "wall_s": t["wall_s"], "cpu_s": t["user_s"] + t["sys_s"], "max_rss_kb": t["max_rss_kb"]}
    if tool == "stormbreak":
        with open(prefix + ".d/summary.json") as f:
            s = json.load(f)
        with open(prefix + ".d/recording.json") as f:
            rec = json.load(f)
        (route,) = s["routes"]
        (comp,) = [c for c in rec["components"] if c["kind"] == "service"]
        r.update(
            arrivals=route["first_attempts"],
            completions=route["successes"],
            failed=route["failed"],
            events=s["engine"]["events"],
            mean_sojourn_s=comp["little"]["mean_sojourn_s"],
            version="stormbreak",
        )
    else:
        with open(prefix + ".out") as f:
            o = json.loads(f.read())
        r.update(arrivals=o["arrivals"], completions=o["completions"], mean_sojourn_s=o["mean_sojourn_s"],
                 events=o.get("events"), horizon_s=o["horizon_s"], rate=o["rate"], workers=o["workers"])
        r["version"] = (f"simpy {o['simpy_version']} (CPython {o['python']}, {o['style']})"
                        if tool == "simpy" else "minimal binary-heap Rust")
    return r


def erlang_c(c: int, a: float) -> float:
    """Probability of waiting in M/M/c with offered load a = λ/μ < c."""
    term, s = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        s += term
    last = term * a / c * c / (c - a)  # a^c / c! · c / (c − a)
    return last / (s + last)


def ratio(x: float) -> str:
    """Two decimals below 10 (so 0.32× does not print as 0.3×), one above."""
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def rate_m(n: float, secs: float) -> str:
    """Millions per second, or a dash where /usr/bin/time's 10 ms resolution
    read a run as taking no time (a short --horizon)."""
    return f"{n / secs / 1e6:.2f} M" if secs > 0 else "—"


def table(path: str):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = {t: [r for r in rows if r["tool"] == t] for t in TOOLS}
    med = {}
    print("| tool | runs | completions | wall s (median) | CPU s (median) | requests/s (wall) | requests/s (CPU) | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in TOOLS:
        rs = by[t]
        if not rs:
            continue
        w = statistics.median(r["wall_s"] for r in rs)
        c = statistics.median(r["cpu_s"] for r in rs)
        n = statistics.median(r["completions"] for r in rs)
        rss = max(r["max_rss_kb"] for r in rs) / 1024
        med[t] = (w, c, n)
        print(f"| {rs[0]['version']} | {len(rs)} | {int(n):,} | {w:.2f} | {c:.2f} | "
              f"{rate_m(n, w)} | {rate_m(n, c)} | {rss:.1f} |")
    print()
    for a, b in (("stormbreak", "simpy"), ("stormbreak", "minimal"), ("minimal", "simpy")):
        if a in med and b in med and all(x > 0 for x in (*med[a][:2], *med[b][:2])):
            (wa, ca, na), (wb, cb, nb) = med[a], med[b]
            cpu, wall = (na / ca) / (nb / cb), (na / wa) / (nb / wb)
            print(f"- {a} / {b}: **{ratio(cpu)}×** per CPU second ({ratio(wall)}× per wall second)")
    print()
    print("All runs (wall s / CPU s):")
    for t in TOOLS:
        if by[t]:
            print(f"- {t}: " + ", ".join(f"{r['wall_s']:.2f}/{r['cpu_s']:.2f}" for r in by[t]))
    print()
    # Agreement and Erlang C, from the first run of each tool (same seed each rep).
    rate = by["minimal"][0]["rate"] if by["minimal"] else 9000.0
    c = by["minimal"][0]["workers"] if by["minimal"] else 10
    mu = 1000.0
    C = erlang_c(c, rate / mu)
    W = 1 / mu + C / (c * mu - rate)
    print(f"Erlang C: C({c}, {rate / mu:g}) = {C:.4f}; W = 1/μ + C/(cμ − λ) = {W * 1e3:.4f} ms")
    print()
    print("| tool | arrivals | completions | mean sojourn ms | vs Erlang C |")
    print("|---|---:|---:|---:|---:|")
    comps = []
    for t in TOOLS:
        if by[t]:
            r = by[t][0]
            comps.append(r["completions"])
            print(f"| {t} | {r['arrivals']:,} | {r['completions']:,} | {r['mean_sojourn_s'] * 1e3:.4f} | "
                  f"{(r['mean_sojourn_s'] / W - 1) * 100:+.2f} % |")
    spread = (max(comps) - min(comps)) / max(comps)
    print()
    print(f"completions spread across tools: {spread * 100:.3f} % (limit 1 %)")
    if spread > 0.01:
        sys.exit("report.py: the tools disagree on completions by more than 1 %")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "row":
        print(json.dumps(row(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
