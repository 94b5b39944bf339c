#!/usr/bin/env python3
"""SimPy peer of the M/M/10 engine-speed comparison (docs/BENCHMARKS.md,
"M/M/10 side by side"): Poisson arrivals, `c` FIFO servers with exponential
service, no queue limit, no timeout, no retries.

Written for SimPy's speed: `--style callbacks` (the default) drives SimPy's
event loop with plain `Timeout` events and callbacks — one event per
arrival and one per service, no generator process per customer, a Python
deque as the waiting line. `--style resource` is the textbook model (one
process per customer on a `simpy.Resource` of capacity `c`), for reference.

Counts arrivals, completions and the sum of sojourn times (a completion's
time minus its arrival's). Prints one JSON document on stdout. Installs
simpy with pip if it is missing (through benches/simpy_mm.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from simpy_mm import ensure_simpy  # noqa: E402


def run_callbacks(simpy, env, rate, workers, mean_service, horizon, rng):
    expo = rng.expovariate
    mu = 1.0 / mean_service
    timeout = env.timeout
    waiting = collections.deque()
    # [arrivals, completions, busy, sojourn sum]
    st = [0, 0, 0, 0.0]

    def start(arrived):
        ev = timeout(expo(mu), arrived)
        ev.callbacks.append(depart)

    def depart(ev):
        st[1] += 1
        st[3] += env.now - ev.value
        if waiting:
            start(waiting.popleft())
        else:
            st[2] -= 1

    def arrive(ev):
        now = env.now
        st[0] += 1
        nxt = timeout(expo(rate))
        nxt.callbacks.append(arrive)
        if st[2] < workers:
            st[2] += 1
            start(now)
        else:
            waiting.append(now)

    first = timeout(expo(rate))
    first.callbacks.append(arrive)
    env.run(until=horizon)
    return st[0], st[1], st[3]


def run_resource(simpy, env, rate, workers, mean_service, horizon, rng):
    expo = rng.expovariate
    mu = 1.0 / mean_service
    server = simpy.Resource(env, capacity=workers)
    st = [0, 0, 0.0]

    def customer():
        arrived = env.now
        with server.request() as req:
            yield req
            yield env.timeout(expo(mu))
        st[1] += 1
        st[2] += env.now - arrived

    def source():
        while True:
            yield env.timeout(expo(rate))
            st[0] += 1
            env.process(customer())

    env.process(source())
    env.run(until=horizon)
    return st[0], st[1], st[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=9000.0, help="arrivals per second [9000]")
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--mean-service", type=float, default=0.001, help="seconds [0.001]")
    ap.add_argument("--horizon", type=float, default=1000.0, help="simulated seconds [1000]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--style", choices=["callbacks", "resource"], default="callbacks")
    a = ap.parse_args()
    simpy = ensure_simpy()
    env = simpy.Environment()
    rng = random.Random(a.seed)
    fn = run_callbacks if a.style == "callbacks" else run_resource
    t0, c0 = time.perf_counter(), time.process_time()
    arrivals, completions, sojourn = fn(simpy, env, a.rate, a.workers, a.mean_service, a.horizon, rng)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({
        "peer": "simpy",
        "style": a.style,
        "simpy_version": getattr(simpy, "__version__", "?"),
        "python": sys.version.split()[0],
        "horizon_s": a.horizon,
        "workers": a.workers,
        "rate": a.rate,
        "arrivals": arrivals,
        "completions": completions,
        "mean_sojourn_s": sojourn / completions if completions else None,
        "wall_s": wall,
        "cpu_s": cpu,
    }))


if __name__ == "__main__":
    main()
