#!/usr/bin/env python3
"""SimPy peer of Stormbreak's metastability benchmark (scenario (a)).

A hand-written SimPy model of the same mechanisms the Stormbreak engine
plays for `benches/scenarios/metastable-100k.toml`, read from that file so
the two cannot drift apart:

* open-loop Poisson arrivals with a piecewise-constant rate (memoryless
  restart at each rate step, as the engine does);
* one service: `workers` servers, FIFO, a bounded waiting queue; an arrival
  that finds every worker busy and the queue full is refused at once (503);
* each attempt has a per-try client timeout; on timeout the client abandons
  the attempt but the server keeps it (it still waits and is still served:
  wasted work);
* naive retries: up to `max_attempts` attempts per request, the next one sent
  immediately after a timeout or a refusal (backoff 0).

Counting follows the engine's recording: `first_attempts` and `attempts` in
the interval they were sent, `successes` (answers that beat the timeout) in
the interval they arrived.

`--scale F` simulates the fraction F of the traffic with capacities scaled
alike (workers and queue rounded, at least 1), like `stormbreak simulate
--scale`. Prints one JSON document on stdout.

Installs simpy with pip if it is missing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import re
import subprocess
import sys
import time

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def ensure_simpy():
    try:
        return importlib.import_module("simpy")
    except ImportError:
        print("simpy_mm.py: installing simpy with pip", file=sys.stderr)
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--quiet", "simpy"],
            stdout=sys.stderr,
        )
        importlib.invalidate_caches()
        return importlib.import_module("simpy")


_DUR = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def dur(s) -> float:
    """'200ms' -> 0.2 (seconds); a bare 0 is 0."""
    if isinstance(s, (int, float)):
        return float(s)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zµ]*)\s*", s)
    if not m:
        raise ValueError(f"duration {s!r}")
    v, unit = float(m.group(1)), m.group(2) or "s"
    return v * _DUR[unit]


def rate(s) -> float:
    """'90k/s' -> 90000.0 (per second)."""
    if isinstance(s, (int, float)):
        return float(s)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kM]?)\s*/\s*(s|min|m|h)\s*", s)
    if not m:
        raise ValueError(f"rate {s!r}")
    v = float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]
    return v / _DUR[m.group(3)]


def load_model(path: str) -> dict:
    """The single-service, single-client scenario shape of (a)."""
    if tomllib is None:
        raise SystemExit("simpy_mm.py needs Python ≥ 3.11 (tomllib)")
    with open(path, "rb") as f:
        sc = tomllib.load(f)
    (svc,) = sc["service"]
    (cl,) = sc["client"]
    app = svc["app"]
    st = app["service_time"]
    if st.get("dist") != "exponential":
        raise SystemExit(f"{path}: only exponential service times are modelled")
    if svc.get("sidecar") or sc.get("lb") or sc.get("gateway") or svc.get("replicas", 1) != 1:
        raise SystemExit(f"{path}: only one pod without sidecar/LB/gateway is modelled")
    retry = cl.get("retry") or {}
    backoff = retry.get("backoff", {})
    if retry and (backoff.get("kind") != "constant" or dur(backoff.get("base", 0)) != 0):
        raise SystemExit(f"{path}: only immediate retries are modelled")
    if cl.get("budget"):
        raise SystemExit(f"{path}: retry budgets are not modelled")
    steps = [(dur(s["at"]), rate(s["rate"])) for s in cl.get("step", [])]
    if any(s.get("ramp") for s in cl.get("step", [])):
        raise SystemExit(f"{path}: ramps are not modelled")
    return {
        "name": sc["scenario"]["name"],
        "duration": dur(sc["scenario"]["duration"]),
        "interval": dur(sc["scenario"].get("interval", "10s")),
        "workers": int(app["workers"]),
        "queue": int(app["queue"]),
        "mean_service": dur(st["mean"]),
        "rate": rate(cl["rate"]),
        "steps": steps,
        "timeout": dur(cl["timeout"]),
        "max_attempts": int(retry.get("max_attempts", 1)),
    }


def run(m: dict, scale: float, horizon: float, seed: int) -> dict:
    simpy = ensure_simpy()
    env = simpy.Environment()
    rng = random.Random(seed)
    expo = rng.expovariate

    workers = max(1, round(m["workers"] * scale))
    qcap = max(1, round(m["queue"] * scale))
    mu = 1.0 / m["mean_service"]
    timeout = m["timeout"]
    max_attempts = m["max_attempts"]
    interval = m["interval"]
    n_int = int(math.ceil(horizon / interval))
    first = [0] * n_int
    attempts = [0] * n_int
    successes = [0] * n_int
    refused = [0] * n_int
    timed_out = [0] * n_int

    # The app: a FIFO of waiting attempts (each is the event its client
    # waits on) served by `workers` processes. Items are only ever removed by
    # a worker, so an abandoned attempt still waits and is still served.
    waiting = simpy.Store(env)
    busy = [0]

    def worker():
        while True:
            done = yield waiting.get()
            busy[0] += 1
            yield env.timeout(expo(mu))
            busy[0] -= 1
            done.succeed()

    for _ in range(workers):
        env.process(worker())

    def bin_of(t):
        i = int(t / interval)
        return i if i < n_int else n_int - 1

    def request():
        first[bin_of(env.now)] += 1
        for _ in range(max_attempts):
            i = bin_of(env.now)
            attempts[i] += 1
            # Refused at once when every worker is busy and the queue is full.
            if busy[0] >= workers and len(waiting.items) >= qcap:
                refused[i] += 1
                continue
            done = env.event()
            waiting.put(done)
            expire = env.timeout(timeout)
            yield done | expire
            if done.triggered:
                successes[bin_of(env.now)] += 1
                return
            timed_out[bin_of(env.now)] += 1

    # Piecewise-constant rate: (start, rate) pieces, memoryless restart at
    # each boundary.
    pieces = [(0.0, m["rate"] * scale)] + [(t, r * scale) for t, r in m["steps"]]

    def arrivals():
        for k, (start, r) in enumerate(pieces):
            end = pieces[k + 1][0] if k + 1 < len(pieces) else math.inf
            if env.now < start:
                yield env.timeout(start - env.now)
            while r > 0:
                gap = expo(r)
                if env.now + gap >= end:
                    break
                yield env.timeout(gap)
                env.process(request())
            if end == math.inf:
                return
            if env.now < end:
                yield env.timeout(end - env.now)

    env.process(arrivals())
    t0, c0 = time.perf_counter(), time.process_time()
    env.run(until=horizon)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "peer": "simpy",
        "simpy_version": getattr(simpy, "__version__", "?"),
        "python": sys.version.split()[0],
        "scenario": m["name"],
        "scale": scale,
        "horizon_s": horizon,
        "interval_s": interval,
        "workers": workers,
        "queue": qcap,
        "wall_s": wall,
        "cpu_s": cpu,
        "attempts_total": sum(attempts),
        "attempts_per_wall_s": sum(attempts) / wall if wall > 0 else None,
        "series": {
            "first_attempts": first,
            "attempts": attempts,
            "successes": successes,
            "refused": refused,
            "timed_out": timed_out,
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", help="scenario TOML (the shape of benches/scenarios/metastable-100k.toml)")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--horizon", type=float, default=None, help="simulated seconds [default: the scenario's duration]")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    m = load_model(a.scenario)
    horizon = a.horizon if a.horizon is not None else m["duration"]
    print(json.dumps(run(m, a.scale, horizon, a.seed)))


if __name__ == "__main__":
    main()
