#!/usr/bin/env python3
"""Helpers of benches/sim.sh: rewrite a scenario's horizon, collect one run's
figures, print the result tables (Markdown, ready for docs/BENCHMARKS.md).

  simbench.py with-duration FILE SECONDS          > scenario with that duration
  simbench.py sb LABEL SCALE OUTDIR TIMEFILE       > one JSON line (a stormbreak run)
  simbench.py simpy LABEL SIMPY_JSON               > one JSON line (a SimPy run)
  simbench.py table RESULTS.jsonl [--pre A B] [--spike A B] [--storm A B]
      (windows in simulated seconds; defaults 10–60, 60–70, last 50 s)
"""

from __future__ import annotations

import csv
import json
import re
import sys


def with_duration(path: str, seconds: str) -> None:
    text = open(path, encoding="utf-8").read()
    # The first `duration = …` after the [scenario] header.
    head = text.index("[scenario]")
    m = re.compile(r'(?m)^duration\s*=\s*"[^"]*"').search(text, head)
    if not m:
        raise SystemExit(f"{path}: no duration in [scenario]")
    text = text[: m.start()] + f'duration = "{seconds}s"' + text[m.end():]
    # Keep `interval ≤ duration` for short horizons.
    iv = re.compile(r'(?m)^interval\s*=\s*"([0-9.]+)s"').search(text, head)
    if iv and float(iv.group(1)) > float(seconds):
        text = text[: iv.start()] + f'interval = "{seconds}s"' + text[iv.end():]
    sys.stdout.write(text)


def parse_time_v(path: str) -> dict:
    """Figures of GNU time -v."""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.strip()
        if line.startswith("User time (seconds):"):
            out["user_s"] = float(line.split(":")[-1])
        elif line.startswith("System time (seconds):"):
            out["sys_s"] = float(line.split(":")[-1])
        elif line.startswith("Maximum resident set size (kbytes):"):
            out["rss_kb"] = int(line.split(":")[-1])
        elif line.startswith("Elapsed (wall clock) time"):
            v = line.split("):", 1)[1].strip().split(":")
            secs = 0.0
            for part in v:
                secs = secs * 60 + float(part)
            out["wall_s"] = secs
        elif line.startswith("Exit status:"):
            out["exit"] = int(line.split(":")[-1])
    return out


def sb_series(outdir: str) -> dict:
    """Per-interval route series from timeseries.csv (first route)."""
    series: dict[str, list[float]] = {}
    route = None
    with open(f"{outdir}/timeseries.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "route":
                continue
            route = route or row["entity"]
            if row["entity"] != route:
                continue
            if row["metric"] in ("first_attempts", "attempts", "successes"):
                series.setdefault(row["metric"], []).append(float(row["value"]))
    return series


def collect_sb(label: str, scale: str, outdir: str, timefile: str) -> None:
    s = json.load(open(f"{outdir}/summary.json", encoding="utf-8"))
    t = parse_time_v(timefile)
    rec = {
        "label": label,
        "tool": "stormbreak",
        "scenario": s.get("scenario"),
        "scale": float(scale),
        "horizon_s": s.get("duration_s"),
        "interval_s": s.get("interval_s"),
        "attempts": s["engine"]["attempts"],
        "events": s["engine"]["events"],
        **t,
        "cpu_s": t.get("user_s", 0) + t.get("sys_s", 0),
        "series": sb_series(outdir),
    }
    print(json.dumps(rec))


def collect_simpy(label: str, path: str) -> None:
    d = json.load(open(path, encoding="utf-8"))
    rec = {
        "label": label,
        "tool": f"simpy {d['simpy_version']} (CPython {d['python']})",
        "scenario": d["scenario"],
        "scale": d["scale"],
        "horizon_s": d["horizon_s"],
        "interval_s": d["interval_s"],
        "attempts": d["attempts_total"],
        "events": None,
        "wall_s": d["wall_s"],
        "cpu_s": d["cpu_s"],
        "rss_kb": None,
        "series": d["series"],
    }
    print(json.dumps(rec))


def window(rec: dict, a: float, b: float):
    """(attempts/demand, successes/demand) over intervals ending in (a, b]."""
    dt = rec["interval_s"]
    lo, hi = int(round(a / dt)), int(round(b / dt))
    s = rec["series"]
    demand = sum(s["first_attempts"][lo:hi])
    if demand == 0 or hi > len(s["first_attempts"]):
        return None, None
    return sum(s["attempts"][lo:hi]) / demand, sum(s["successes"][lo:hi]) / demand


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def table(path: str, pre=(10.0, 60.0), storm=None, spike=(60.0, 70.0)) -> None:
    recs = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    by = {}
    for r in recs:
        by.setdefault(r["label"].split(":")[0], []).append(r)

    def rate(r, what, per):
        v = r.get(what)
        d = r.get(per)
        return v / d if v is not None and d else None

    if "throughput" in by:
        print("### 1. Simulator throughput (`stormbreak simulate`, release, single thread)\n")
        print("| scenario | scale | sim. s | attempts | events | wall s | CPU s | attempts/s (wall) | events/s (wall) | attempts/s (CPU) | peak RSS MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in by["throughput"]:
            print(
                f"| {r['scenario']} | {r['scale']:g} | {r['horizon_s']:g} | {r['attempts']:,} | {r['events']:,} "
                f"| {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {fmt(rate(r, 'attempts', 'wall_s') / 1e6, '.2f')} M "
                f"| {fmt(rate(r, 'events', 'wall_s') / 1e6, '.2f')} M | {fmt(rate(r, 'attempts', 'cpu_s') / 1e6, '.2f')} M "
                f"| {r['rss_kb'] / 1024:.1f} |"
            )
        print()

    side = [r for k in ("rate", "agree") for r in by.get(k, [])]
    if side:
        print("### 2. Side by side with SimPy (same run of `benches/sim.sh`)\n")
        print("| run | tool | scale | sim. s | attempts | wall s | CPU s | attempts/s (wall) | attempts/s (CPU) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in side:
            print(
                f"| {r['label']} | {r['tool']} | {r['scale']:g} | {r['horizon_s']:g} | {r['attempts']:,} "
                f"| {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {rate(r, 'attempts', 'wall_s'):,.0f} | {rate(r, 'attempts', 'cpu_s'):,.0f} |"
            )
        print()
        for k in ("rate", "agree"):
            rs = by.get(k, [])
            sb = [r for r in rs if r["tool"] == "stormbreak"]
            py = [r for r in rs if r["tool"] != "stormbreak"]
            if sb and py:
                w = rate(sb[0], "attempts", "wall_s") / rate(py[0], "attempts", "wall_s")
                c = rate(sb[0], "attempts", "cpu_s") / rate(py[0], "attempts", "cpu_s")
                print(f"- `{k}`: Stormbreak / SimPy = **{w:.0f}×** per wall second, {c:.0f}× per CPU second")
        full = by.get("throughput", [])
        py = [r for r in by.get("rate", []) if r["tool"] != "stormbreak"]
        if full and py:
            w = rate(full[0], "attempts", "wall_s") / rate(py[0], "attempts", "wall_s")
            print(f"- full 10-min run of (a) vs SimPy's `rate` run: **{w:.0f}×** per wall second")
        print()
        agree = by.get("agree", [])
        if agree:
            horizon = min(r["horizon_s"] for r in agree)
            wins = [("before", pre), ("spike", spike), ("storm", storm or (horizon - 50.0, horizon))]
            print(f"Outcome at scale {agree[0]['scale']:g}: attempts (amplification) and successes "
                  f"(goodput) per logical request, over the intervals ending in each window:\n")
            print("| tool | " + " | ".join(f"ampl. {n} ({a:g}–{b:g} s) | goodput {n}" for n, (a, b) in wins) + " |")
            print("|---|" + "---:|---:|" * len(wins))
            for r in agree:
                cells = []
                for _, w in wins:
                    a, g = window(r, *w)
                    cells += [fmt(a, ".3f"), fmt(g, ".3f")]
                print(f"| {r['tool']} | " + " | ".join(cells) + " |")
            print()

    if "memory" in by:
        print("### 3. Peak memory against simulated duration (`/usr/bin/time -v`)\n")
        print("| scenario | sim. s | attempts | wall s | peak RSS MiB |")
        print("|---|---:|---:|---:|---:|")
        for r in by["memory"]:
            print(f"| {r['scenario']} | {r['horizon_s']:g} | {r['attempts']:,} | {r['wall_s']:.2f} | {r['rss_kb'] / 1024:.1f} |")
        print()


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "with-duration":
        with_duration(*args)
    elif cmd == "sb":
        collect_sb(*args)
    elif cmd == "simpy":
        collect_simpy(*args)
    elif cmd == "table":
        pre, storm, spike = (10.0, 60.0), None, (60.0, 70.0)
        rest = args[1:]
        while rest:
            if rest[0] == "--pre":
                pre = (float(rest[1]), float(rest[2]))
            elif rest[0] == "--storm":
                storm = (float(rest[1]), float(rest[2]))
            elif rest[0] == "--spike":
                spike = (float(rest[1]), float(rest[2]))
            else:
                raise SystemExit(f"unknown flag {rest[0]}")
            rest = rest[3:]
        table(args[0], pre, storm, spike)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
