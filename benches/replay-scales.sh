#!/usr/bin/env bash
# The replay at several `--scale`s, side by side (issue 13, item 1): the
# headline figures, each path's recovery time, wall and CPU time and peak
# RSS of each run, as one Markdown table (also OUT/scales.md), and how far
# each scale is from the largest one run (the tolerance of issue 13: 3
# points on an error rate, 10% on the token peak, 10 min on a recovery).
#
# usage: benches/replay-scales.sh [--seed N] [--out DIR] [--bin PATH] [SCALE ...]
#   SCALE ...   default: 0.01 0.1 1 (scale 1 takes tens of minutes)
#   --seed N    default: the scenario's
#   --bin PATH  a built stormbreak binary [default: cargo build --release]
#   --out DIR   [default: a new /tmp/stormbreak-scales.*]
#
# Needs: cargo, python3, GNU time at /usr/bin/time. Never asserts a timing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SEED=""
OUT=""
BIN=""
SCALES=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) SEED="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        -*) echo "replay-scales.sh: unknown flag $1" >&2; exit 2 ;;
        *) SCALES+=("$1"); shift ;;
    esac
done
[ ${#SCALES[@]} -gt 0 ] || SCALES=(0.01 0.1 1)
[ -x /usr/bin/time ] || { echo "replay-scales.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }
if [ -z "$BIN" ]; then
    (cd "$REPO" && cargo build --release --locked -q -p stormbreak)
    BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/stormbreak"
fi
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/stormbreak-scales.XXXXXX)
mkdir -p "$OUT"

for s in "${SCALES[@]}"; do
    args=(replay --quiet --scale "$s" --out "$OUT/scale-$s")
    [ -z "$SEED" ] || args+=(--seed "$SEED")
    echo "replay --scale $s ..." >&2
    /usr/bin/time -f '%e %U %S %M' -o "$OUT/time-$s.txt" "$BIN" "${args[@]}"
done

python3 - "$OUT" "${SCALES[@]}" <<'PY' | tee "$OUT/scales.md"
import json, sys
out, scales = sys.argv[1], sys.argv[2:]
def clock(s):
    if s is None:
        return None
    m = int(13 * 60 + (s / 60 + 0.5) // 1)  # to the nearest minute, as the CLI prints
    return m
def hm(m):
    return "—" if m is None else "%d:%02d" % (m // 60, m % 60)
rows = {}
for s in scales:
    d = json.load(open(f"{out}/scale-{s}/summary.json"))
    run = d["replay"]["runs"][0]
    h = run["headline"]
    wall, user, sys_, rss = open(f"{out}/time-{s}.txt").read().split()
    rows[s] = dict(
        web=100 * h["web_api_peak_error_rate"],
        arch=100 * h["archive_peak_error_rate"],
        tok=h["token_arrivals_peak_per_s"] / 1e3,
        web30=100 * h["web_api_error_rate_30m_after_trigger"],
        meta=h["metastable"],
        paths={p["path"]: clock(p.get("recovered_at_s")) for p in run["paths"]},
        wait=max(p.get("worst_job_wait_s") or 0 for p in run["paths"]) / 60,
        wall=float(wall), cpu=float(user) + float(sys_), rss=int(rss) / 1024,
    )
paths = list(rows[scales[0]]["paths"])
print("| `--scale` | web/API peak | archive peak | token peak (1 min) | web/API 30 min after | metastable | "
      + " | ".join(f"{p} back" for p in paths) + " | longest job wait | wall s | CPU s | peak RSS MiB |")
print("|---" * (9 + len(paths)) + "|")
for s in scales:
    r = rows[s]
    print(f"| {s} | {r['web']:.1f}% | {r['arch']:.1f}% | {r['tok']:.1f} k/s | {r['web30']:.1f}% | "
          + ("yes" if r["meta"] else "no") + " | "
          + " | ".join(hm(r["paths"][p]) for p in paths)
          + f" | {r['wait']:.0f} min | {r['wall']:.0f} | {r['cpu']:.0f} | {r['rss']:.0f} |")
ref = scales[-1]
print()
print(f"Against `--scale {ref}` (tolerance: 3 points, 10% on the token peak, 10 min on a recovery):")
print()
for s in scales[:-1]:
    a, b = rows[s], rows[ref]
    bad = []
    for k, name in (("web", "web/API peak"), ("arch", "archive peak"), ("web30", "web/API 30 min after")):
        if abs(a[k] - b[k]) > 3:
            bad.append(f"{name} {a[k] - b[k]:+.1f} points")
    if abs(a["tok"] / b["tok"] - 1) > 0.10:
        bad.append(f"token peak {100 * (a['tok'] / b['tok'] - 1):+.0f}%")
    for p in paths:
        x, y = a["paths"][p], b["paths"][p]
        if (x is None) != (y is None) or (x is not None and abs(x - y) > 10):
            bad.append(f"{p} {hm(x)} vs {hm(y)}")
    print(f"- `--scale {s}`: " + ("agrees" if not bad else "; ".join(bad)))
PY
echo "tables: $OUT/scales.md" >&2
