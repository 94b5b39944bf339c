#!/usr/bin/env python3
"""Parsing and tables for benches/guard.sh (docs/BENCHMARKS.md, "The guard
beside HAProxy").

  report.py record KEY=VALUE...   one JSON line for results.jsonl; values that
                                  name raw outputs are parsed here (wrk=FILE,
                                  cpu=FILE, unloaded/over/oha=TAG for
                                  TAG.oha.json + TAG.cpu, rss=FILE)
  report.py wrk-rps FILE          Requests/sec of a wrk output
  report.py tables RESULTS META   the Markdown tables, goals marked met/not met

Numbers only; never asserts a timing.
"""
import json
import re
import statistics
import sys

UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def wrk_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * UNIT[m.group(2)]


def parse_wrk(path):
    text = open(path).read()
    out = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))}
    out["requests"] = int(re.search(r"(\d+) requests in", text).group(1))
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        out[key] = wrk_ms(re.search(rf"^\s+{pct}(?:\.000)?%\s+(\S+)", text, re.M).group(1))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    out["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    return out


def parse_h2load(path):
    text = open(path).read()
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    done, ok = int(m.group(3)), int(m.group(4))
    codes = re.search(r"status codes: (\d+) 2xx", text)
    two = int(codes.group(1)) if codes else 0
    # "time for request:  min  max  mean  sd  +/- sd"
    t = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text)
    return {"rps": float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text).group(1)),
            "requests": done, "non2xx": done - two, "socket_errors": done - ok,
            "mean_ms": wrk_ms(t.group(3)) if t else None}


def parse_cpu(path):
    return json.load(open(path))


def parse_oha(tag):
    j = json.load(open(tag + ".oha.json"))
    status = {int(k): v for k, v in j.get("statusCodeDistribution", {}).items()}
    errors = j.get("errorDistribution", {})
    ok = sum(v for k, v in status.items() if 200 <= k < 300)
    succ = j.get("latencyPercentilesSuccessful") or {}
    out = {
        "wall_s": j["summary"]["total"],
        "status": status,
        "errors": errors,
        "n_2xx": ok,
        "n_answered": sum(status.values()),
        "n_errors": sum(errors.values()),
        "p50_ms": (j["latencyPercentiles"].get("p50") or 0) * 1e3,
        "p99_ms": (j["latencyPercentiles"].get("p99") or 0) * 1e3,
        "p99_2xx_ms": (succ.get("p99") or 0) * 1e3 if ok else None,
        "p50_2xx_ms": (succ.get("p50") or 0) * 1e3 if ok else None,
    }
    try:
        out["cpu_s"] = parse_cpu(tag + ".cpu")["cpu_s"]
    except FileNotFoundError:
        out["cpu_s"] = None
    return out


def slope(points):
    """Least-squares slope of (x, y)."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def parse_rss(path, minutes):
    pts = [tuple(map(float, line.split())) for line in open(path) if len(line.split()) == 2]
    # Warm-up: the first minute of a soak of 5 minutes or more, else the first 20 s.
    warm = 60.0 if minutes >= 5 else 20.0
    after = [(t, kb) for t, kb in pts if t >= warm]
    s = slope(after)
    return {
        "samples": len(pts),
        "warmup_s": warm,
        "rss_first_kb": pts[0][1] if pts else None,
        "rss_after_warmup_kb": after[0][1] if after else None,
        "rss_last_kb": pts[-1][1] if pts else None,
        "rss_max_kb": max(kb for _, kb in pts) if pts else None,
        "slope_mib_per_min": s * 60 / 1024 if s is not None else None,
    }


def record(args):
    row = {}
    for a in args:
        k, _, v = a.partition("=")
        row[k] = v
    for k in list(row):
        v = row[k]
        if k == "wrk":
            row.update(parse_wrk(v))
            del row[k]
        elif k == "h2load":
            row.update(parse_h2load(v))
            del row[k]
        elif k == "cpu":
            row.update(parse_cpu(v))
            del row[k]
        elif k in ("unloaded", "over", "oha"):
            row[k] = parse_oha(v)
        elif k == "rss":
            row[k] = parse_rss(v, float(row.get("minutes", 10)))
        else:
            try:
                row[k] = int(v)
            except ValueError:
                try:
                    row[k] = float(v)
                except ValueError:
                    pass
    print(json.dumps(row))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    m = statistics.median(xs)
    if len(xs) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def by_proxy(rows, figure):
    out = {}
    for r in rows:
        if r.get("figure") == figure:
            out.setdefault(r["proxy"], []).append(r)
    return out


def met(ok):
    return "**met**" if ok else "**not met**"


NAMES = {"direct": "backend alone (no proxy)", "forward": "bare hyper forwarder",
         "guard-minimal": "guard, no policy", "guard": "guard, every policy (not binding)",
         "guard-arena1": "guard, every policy (not binding), MALLOC_ARENA_MAX=1",
         "guard-before": "guard, every policy (not binding), the --guard-before build",
         "guard-h1": "guard, every policy (not binding), HTTP/1.1-only listener",
         "guard-t1": "guard, every policy, 1 worker thread (both cores shared)",
         "guard-t2": "guard, every policy, 2 worker threads (both cores shared)",
         "haproxy": "HAProxy 2.6"}


def beside_haproxy(pr, title, label, proxies, p99):
    """One part's table, each proxy's efficiency, and the guard's ratio to HAProxy."""
    if not pr:
        return
    print(f"### {title}\n")
    print("| proxy | rps | proxy CPU-s per 1 000 req | rps per proxy CPU-second |"
          + (" p99 ms |" if p99 else "") + " non-2xx + errors |")
    print("|---|---|---|---|" + ("---|" if p99 else "") + "---|")
    eff = {}
    for p in proxies:
        rs = pr.get(p, [])
        if not rs:
            continue
        c1k = [r["cpu_s"] / r["requests"] * 1000 if r.get("cpu_s") else None for r in rs]
        per_cpu = [r["requests"] / r["cpu_s"] if r.get("cpu_s") else None for r in rs]
        eff[p] = med(per_cpu)
        print(f"| {NAMES[p]} | {spread([r['rps'] for r in rs], '{:.0f}')} | {spread(c1k, '{:.4f}')} | "
              f"{spread(per_cpu, '{:.0f}')} |"
              + (f" {spread([r['p99_ms'] for r in rs], '{:.2f}')} |" if p99 else "")
              + f" {sum(r['non2xx'] + r['socket_errors'] for r in rs)} |")
    print()
    if eff.get("guard") and eff.get("haproxy"):
        print(f"Guard / HAProxy, {label}: rps per proxy CPU-second {eff['guard'] / eff['haproxy']:.2f}×.\n")


def passthrough_table(pt, goals):
    """(a) and the overhead line; returns the medians by proxy."""
    print("### Passthrough (closed loop, wrk, saturated)\n")
    print("| proxy | rps | proxy core busy | proxy CPU-s per 1 000 req | rps per proxy CPU-second | p50 ms | p99 ms | non-2xx + socket errors |")
    print("|---|---|---|---|---|---|---|---|")
    derived = {}
    for p in ("direct", "forward", "guard-minimal", "guard-before", "guard", "guard-h1", "haproxy"):
        rs = pt.get(p, [])
        if not rs:
            continue
        c1k = [r["cpu_s"] / r["requests"] * 1000 if r.get("cpu_s") else None for r in rs]
        per_cpu = [r["requests"] / r["cpu_s"] if r.get("cpu_s") else None for r in rs]
        derived[p] = {"rps": med([r["rps"] for r in rs]), "c1k": med(c1k), "per_cpu": med(per_cpu)}
        busy = [r["cpu_s"] / r["wall_s"] * 100 if r.get("cpu_s") else None for r in rs]
        print(f"| {NAMES[p]} | {spread([r['rps'] for r in rs], '{:.0f}')} | {spread(busy, '{:.0f} %')} | {spread(c1k, '{:.4f}')} | "
              f"{spread(per_cpu, '{:.0f}')} | {spread([r['p50_ms'] for r in rs], '{:.2f}')} | "
              f"{spread([r['p99_ms'] for r in rs], '{:.2f}')} | "
              f"{sum(r['non2xx'] + r['socket_errors'] for r in rs)} |")
    print()
    if "guard" in derived and "haproxy" in derived:
        g, h = derived["guard"], derived["haproxy"]
        r_rps = g["rps"] / h["rps"]
        r_cpu = g["per_cpu"] / h["per_cpu"] if g["per_cpu"] and h["per_cpu"] else None
        print(f"Guard / HAProxy: rps {r_rps:.2f}×, rps per proxy CPU-second {r_cpu:.2f}×.")
        goals.append(("passthrough rps per proxy core ≥ 0.8× HAProxy's",
                      f"{r_cpu:.2f}× per CPU-second ({r_rps:.2f}× in rps)", r_cpu is not None and r_cpu >= 0.8))
        if r_cpu is not None:
            goals.append(("passthrough rps per proxy CPU-second ≥ 0.9× HAProxy's, default listener (issue 43)",
                          f"{r_cpu:.2f}×", r_cpu >= 0.9))
    if "guard" in derived and "forward" in derived and derived["guard"]["c1k"] and derived["forward"]["c1k"]:
        own = (derived["guard"]["c1k"] - derived["forward"]["c1k"]) * 1e3
        goals.append(("the guard's own path ≤ 3 µs per request over the bare hyper forwarder (issue 43)",
                      f"{own:.1f} µs", own <= 3.0))
    if "guard" in derived and "guard-h1" in derived and derived["guard-h1"]["c1k"] and derived["guard"]["c1k"]:
        d, h = derived["guard"], derived["guard-h1"]
        print(f"Default listener (HTTP/1.1 or h2c by preface) / HTTP/1.1-only: proxy CPU per request "
              f"{d['c1k'] * 1e3:.1f} µs / {h['c1k'] * 1e3:.1f} µs ({(d['c1k'] / h['c1k'] - 1) * 100:+.1f} % for the detection).")
        hp = derived.get("haproxy", {}).get("per_cpu")
        if hp and h["per_cpu"]:
            goals.append(("passthrough rps per proxy CPU-second ≥ 0.9× HAProxy's, HTTP/1.1-only listener",
                          f"{h['per_cpu'] / hp:.2f}×", h["per_cpu"] / hp >= 0.9))
    if "guard" in derived and "guard-before" in derived and derived["guard-before"]["c1k"]:
        b, a = derived["guard-before"], derived["guard"]
        print(f"Before / after (every policy): proxy CPU per request {b['c1k'] * 1e3:.1f} µs → {a['c1k'] * 1e3:.1f} µs "
              f"({(a['c1k'] / b['c1k'] - 1) * 100:+.1f} %), rps per proxy CPU-second {b['per_cpu']:.0f} → {a['per_cpu']:.0f}.")
    if "guard" in derived and "forward" in derived and derived["forward"]["c1k"]:
        f = derived["forward"]["c1k"]
        print(f"Per request, proxy CPU: bare forwarder {f * 1e3:.1f} µs, guard with no policy "
              f"{derived.get('guard-minimal', {}).get('c1k', 0) * 1e3:.1f} µs, guard with every policy "
              f"{derived['guard']['c1k'] * 1e3:.1f} µs, HAProxy {derived.get('haproxy', {}).get('c1k', 0) * 1e3:.1f} µs: "
              f"the policy path adds {(derived['guard']['c1k'] - f) * 1e3:.1f} µs over bare hyper forwarding "
              f"({(derived['guard']['c1k'] - derived.get('guard-minimal', {}).get('c1k', f)) * 1e3:.1f} µs of it the policies, "
              f"the rest the guard's own request path).")
    print()

    return derived


def tables(results, meta):
    rows = [json.loads(line) for line in open(results) if line.strip()]
    # JSON object keys are strings: status codes back to ints.
    for r in rows:
        for k in ("unloaded", "over", "oha"):
            if isinstance(r.get(k), dict):
                r[k]["status"] = {int(c): n for c, n in r[k]["status"].items()}
    print("```")
    print(open(meta).read().rstrip())
    print("```\n")
    cap = next(r for r in rows if r["figure"] == "capacity")
    capacity = cap["rps"]
    print(f"Backend capacity (workers × 1/service time): nominal {cap['nominal']} requests/s, "
          f"measured {capacity:.0f} requests/s (wrk straight at it).\n")
    goals = []

    # (a) passthrough
    pt = by_proxy(rows, "passthrough")
    derived = {}
    if pt:
        derived = passthrough_table(pt, goals)

    # (a1) POST 4 KiB; (a2) h2c and TLS: each proxy beside HAProxy
    for figure, title, label, proxies, p99 in (
            ("post", "POST with a 4 KiB body (closed loop, wrk -s post.lua, saturated)", "POST 4 KiB",
             ("forward", "guard", "haproxy"), True),
            ("h2c", "Passthrough over HTTP/2 without TLS (h2load, 10 connections × 5 streams, closed loop)", "h2c",
             ("guard", "haproxy"), False),
            ("tls", "Passthrough over TLS 1.3 (wrk over https, 50 kept connections)", "tls",
             ("guard", "haproxy"), False)):
        beside_haproxy(by_proxy(rows, figure), title, label, proxies, p99)

    # (a3) worker threads
    th = by_proxy(rows, "threads")
    if th.get("guard-t1") and th.get("guard-t2"):
        print("### Worker threads (every policy; proxy, backend and wrk sharing both cores)\n")
        print("| guard | rps | proxy CPU-s per 1 000 req | rps per proxy CPU-second |")
        print("|---|---|---|---|")
        eff = {}
        for p in ("guard-t1", "guard-t2"):
            rs = th[p]
            c1k = [r["cpu_s"] / r["requests"] * 1000 if r.get("cpu_s") else None for r in rs]
            per_cpu = [r["requests"] / r["cpu_s"] if r.get("cpu_s") else None for r in rs]
            eff[p] = med(per_cpu)
            print(f"| {NAMES[p]} | {spread([r['rps'] for r in rs], '{:.0f}')} | {spread(c1k, '{:.4f}')} | {spread(per_cpu, '{:.0f}')} |")
        print()
        if eff["guard-t1"] and eff["guard-t2"]:
            ratio = eff["guard-t2"] / eff["guard-t1"]
            print(f"2 threads / 1 thread, requests per proxy CPU-second: {ratio:.2f}×.\n")
            goals.append(("2 worker threads no less efficient per CPU-second than 1 (within 5 %)",
                          f"{ratio:.2f}×", ratio >= 0.95))

    # (d) idle connections
    idle = by_proxy(rows, "idle")
    if idle:
        print("### Memory per idle keep-alive connection\n")
        print("| proxy | connections (2xx) | RSS before MiB | RSS with them open MiB | KiB per connection |")
        print("|---|---|---|---|---|")
        for p in ("forward", "guard-before", "guard", "haproxy"):
            rs = idle.get(p, [])
            if not rs:
                continue
            per = [(r["rss1_kb"] - r["rss0_kb"]) / r["conns"] for r in rs]
            print(f"| {NAMES[p]} | {min(r['ok'] for r in rs)} of {rs[0]['conns']} | "
                  f"{spread([r['rss0_kb'] / 1024 for r in rs], '{:.1f}')} | "
                  f"{spread([r['rss1_kb'] / 1024 for r in rs], '{:.1f}')} | {spread(per, '{:.1f}')} |")
            if p == "guard":
                kib = med(per)
                goals.append(("an idle keep-alive connection ≤ 8 KiB (issue 43)", f"{kib:.1f} KiB", kib <= 8.0))
        print()

    # (d') bursts of connections
    burst = by_proxy(rows, "burst")
    if burst:
        rounds = max(r["round"] for rs in burst.values() for r in rs)
        conns = next(iter(burst.values()))[0]["conns"]
        print(f"### Memory after bursts of connections ({rounds} × {conns} keep-alive connections, one request each, then closed)\n")
        print("RSS in MiB: before the first burst (after one request), then 1 s after each burst closed.\n")
        print("| proxy | connections (2xx) | RSS before | " + " | ".join(f"after {k}" for k in range(1, rounds + 1))
              + " | last / first burst |")
        print("|---|---|---|" + "---|" * rounds + "---|")
        for p in ("forward", "guard-before", "guard", "guard-arena1", "haproxy"):
            rs = burst.get(p, [])
            if not rs:
                continue
            reps = sorted({r["rep"] for r in rs})
            at = {(r["rep"], r["round"]): r for r in rs}
            cells = [spread([at[(rep, k)]["rss_kb"] / 1024 for rep in reps if (rep, k) in at], "{:.1f}")
                     for k in range(1, rounds + 1)]
            ratio = [at[(rep, rounds)]["rss_kb"] / at[(rep, 1)]["rss_kb"]
                     for rep in reps if (rep, rounds) in at and (rep, 1) in at]
            print(f"| {NAMES[p]} | {min(r['ok'] for r in rs)} of {conns} (worst burst) | "
                  f"{spread([at[(rep, 1)]['rss0_kb'] / 1024 for rep in reps if (rep, 1) in at], '{:.1f}')} | "
                  + " | ".join(cells) + f" | {spread(ratio, '{:.2f}×')} |")
            if p == "guard" and ratio:
                worst = max(ratio)
                goals.append((f"RSS after {rounds} bursts within 20 % of the first burst's (issue 43)",
                              f"{worst:.2f}× (worst rep)", worst <= 1.2))
        print()

    # (b) overload
    ol = by_proxy(rows, "overload")
    if ol:
        rate = next(iter(ol.values()))[0]["rate"]
        print(f"### Overload: open loop at {rate} requests/s = 3× capacity (oha, latency-corrected)\n")
        print(f"Capacity: {capacity:.0f}/s measured (nominal {cap['nominal']}/s); the no-limit run keeps every worker busy, so its goodput is what the backend can do behind a proxy.\n")
        print("| proxy | goodput (2xx/s) | share of measured capacity | share of nominal | unloaded p99 (2xx) ms | admitted p99 (2xx) ms | admitted / unloaded p99 | 503 share | timeouts + errors | proxy CPU-s per 1 000 req |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        onames = {"guard": "guard, fixed limit + queue", "guard-adaptive": "guard, Gradient2 limit + queue (adaptive)",
                  "haproxy": "HAProxy, maxconn + maxqueue", "haproxy-nolimit": "HAProxy, no limit"}
        for p in ("guard", "guard-adaptive", "haproxy", "haproxy-nolimit"):
            rs = ol.get(p, [])
            if not rs:
                continue
            good = [r["over"]["n_2xx"] / r["over"]["wall_s"] for r in rs]
            share = [g / capacity for g in good]
            up99 = [r["unloaded"]["p99_2xx_ms"] for r in rs]
            ap99 = [r["over"]["p99_2xx_ms"] for r in rs]
            ratio = [a / u if a is not None and u else None for a, u in zip(ap99, up99)]
            s503 = [r["over"]["status"].get(503, 0) / max(1, r["over"]["n_answered"] + r["over"]["n_errors"]) for r in rs]
            errs = [r["over"]["n_errors"] for r in rs]
            c1k = [r["over"]["cpu_s"] / max(1, r["over"]["n_answered"]) * 1000 if r["over"].get("cpu_s") is not None else None for r in rs]
            print(f"| {onames[p]} | {spread(good, '{:.0f}')} | {spread([s * 100 for s in share], '{:.1f} %')} | "
                  f"{spread([g / cap['nominal'] * 100 for g in good], '{:.1f} %')} | "
                  f"{spread(up99, '{:.1f}')} | {spread(ap99, '{:.1f}')} | {spread(ratio, '{:.2f}×')} | "
                  f"{spread([s * 100 for s in s503], '{:.1f} %')} | {spread(errs, '{:.0f}')} | {spread(c1k, '{:.4f}')} |")
            if p == "guard":
                goals.append(("overload goodput ≥ 90 % of capacity",
                              f"{med(share) * 100:.1f} % of the measured capacity "
                              f"({med(good) / cap['nominal'] * 100:.1f} % of the nominal)", med(share) >= 0.9))
                mr = med(ratio)
                goals.append(("overload admitted p99 ≤ 3× unloaded p99",
                              f"{mr:.2f}× ({med(ap99):.1f} ms against {med(up99):.1f} ms)" if mr else "–",
                              mr is not None and mr <= 3))
        print()

    # (c) storm
    st = by_proxy(rows, "storm")
    if st:
        print("### Failing backend (every answer 503): attempts reaching the backend\n")
        print("| proxy | requests | attempts at the backend | attempts per request | what the client got |")
        print("|---|---|---|---|---|")
        snames = {"guard": "guard, 4 attempts under a 20 % + 10/s ratio budget",
                  "guard-breaker": "guard, the same + the breaker (50 % of 100 calls, open 1 s)",
                  "haproxy": "HAProxy, retries 3 + retry-on all-retryable-errors"}
        for p in ("guard", "guard-breaker", "haproxy"):
            rs = st.get(p, [])
            if not rs:
                continue
            apr = [r["attempts"] / r["requests"] for r in rs]
            got = {}
            for r in rs:
                for k, v in r["oha"]["status"].items():
                    got[str(k)] = got.get(str(k), 0) + v
                for k, v in r["oha"]["errors"].items():
                    got[k] = got.get(k, 0) + v
            print(f"| {snames[p]} | {rs[0]['requests']} × {len(rs)} | {spread([r['attempts'] for r in rs], '{:.0f}')} | "
                  f"{spread(apr, '{:.3f}')} | {', '.join(f'{k}: {v}' for k, v in sorted(got.items()))} |")
            if p in ("guard", "guard-breaker"):
                goals.append((f"failing backend: ≤ 1.2 attempts per request through the guard ({snames[p][7:]})",
                              f"{med(apr):.3f}", med(apr) <= 1.2))
        print()

    # (e) soak
    for r in rows:
        if r.get("figure") != "soak":
            continue
        o, rss = r["oha"], r["rss"]
        answered = o["n_answered"]
        print(f"### Soak: the guard at {r['rate']} requests/s (10× capacity) for {r['minutes']} min\n")
        print("| requests | answered | 2xx (goodput/s) | 503 | other statuses | timeouts + errors | RSS after warm-up → end MiB | RSS slope after warm-up |")
        print("|---|---|---|---|---|---|---|---|")
        other = answered - o["n_2xx"] - o["status"].get(503, 0)
        sl = rss["slope_mib_per_min"]
        print(f"| {r['requests']} | {answered} | {o['n_2xx']} ({o['n_2xx'] / o['wall_s']:.0f}/s = "
              f"{o['n_2xx'] / o['wall_s'] / capacity * 100:.1f} % of capacity) | {o['status'].get(503, 0)} | {other} | "
              f"{o['n_errors']} {json.dumps(o['errors']) if o['errors'] else ''} | "
              f"{(rss['rss_after_warmup_kb'] or 0) / 1024:.1f} → {(rss['rss_last_kb'] or 0) / 1024:.1f} (max {(rss['rss_max_kb'] or 0) / 1024:.1f}) | "
              f"{sl:.3f} MiB/min over {rss['samples']} samples, first {rss['warmup_s']:.0f} s dropped |"
              if sl is not None else "| – |")
        print()
        goals.append((f"soak: RSS slope after warm-up < 1 MiB/min ({r['minutes']} min)",
                      f"{sl:.3f} MiB/min" if sl is not None else "–", sl is not None and sl < 1))
        goals.append(("soak: every request answered (served, shed or limited)",
                      f"{answered} of {r['requests']} answered, {o['n_errors']} timeouts/errors",
                      answered == r["requests"] and o["n_errors"] == 0))

    print("### Goals\n")
    print("| goal | reached | |")
    print("|---|---|---|")
    for g, fig, ok in goals:
        print(f"| {g} | {fig} | {met(ok)} |")


def main():
    cmd = sys.argv[1]
    if cmd == "record":
        record(sys.argv[2:])
    elif cmd == "wrk-rps":
        print(parse_wrk(sys.argv[2])["rps"])
    elif cmd == "tables":
        tables(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"report.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
