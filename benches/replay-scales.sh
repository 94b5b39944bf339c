#!/usr/bin/env bash
# The replay at several `--scale`s, side by side (issue 13, item 1): the
# headline figures, when the token storm ran away, each path's recovery
# time, wall and CPU time and peak RSS of each run, as Markdown tables
# (also OUT/scales.md), and, seed by seed, how far each scale is from the
# largest one run (the tolerance of issue 13: 3 points on an error rate,
# 10% on the token peak, 10 min on a recovery).
#
# usage: benches/replay-scales.sh [--seeds LIST] [--jobs N] [--out DIR] [--bin PATH] [SCALE ...]
#   SCALE ...     default: 0.01 0.1 1 (scale 1 takes about 25 CPU minutes a seed)
#   --seeds LIST  comma-separated, e.g. 1,2,3,4,5 (the seed test's) [default: the scenario's]
#   --seed N      the same as --seeds N
#   --jobs N      runs at once, each a process of its own [default: 1]
#   --bin PATH    a built stormbreak binary [default: cargo build --release]
#   --out DIR     [default: a new /tmp/stormbreak-scales.*]; a run whose
#                 summary and time file are already in DIR is not run again,
#                 so an interrupted sweep resumes where it stopped
#
# Needs: cargo, python3, GNU time at /usr/bin/time. Never asserts a timing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SEEDS="default"
JOBS=1
OUT=""
BIN=""
SCALES=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seeds|--seed) SEEDS="$2"; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "replay-scales.sh: unknown flag $1" >&2; exit 2 ;;
        *) SCALES+=("$1"); shift ;;
    esac
done
[ ${#SCALES[@]} -gt 0 ] || SCALES=(0.01 0.1 1)
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "replay-scales.sh: --jobs takes a whole number >= 1" >&2; exit 2; }
[[ "$SEEDS" =~ ^(default|[0-9]+(,[0-9]+)*)$ ]] ||
    { echo "replay-scales.sh: --seeds takes whole numbers separated by commas" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "replay-scales.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }
if [ -z "$BIN" ]; then
    (cd "$REPO" && cargo build --release --locked -q -p stormbreak)
    BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/stormbreak"
fi
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/stormbreak-scales.XXXXXX)
mkdir -p "$OUT"
IFS=, read -r -a SEED_LIST <<< "$SEEDS"

# One run: OUT/seed-SEED/scale-S/ and its time file beside it.
one() { # one SEED SCALE
    local seed=$1 s=$2 dir="$OUT/seed-$1"
    [ -f "$dir/scale-$s/summary.json" ] && [ -s "$dir/time-$s.txt" ] && return 0
    mkdir -p "$dir"
    local args=(replay --quiet --scale "$s" --out "$dir/scale-$s")
    [ "$seed" = default ] || args+=(--seed "$seed")
    echo "replay --scale $s (seed $seed) ..." >&2
    if ! /usr/bin/time -f '%e %U %S %M' -o "$dir/time-$s.txt.part" "$BIN" "${args[@]}"; then
        rm -f "$dir/time-$s.txt.part"
        return 1
    fi
    mv "$dir/time-$s.txt.part" "$dir/time-$s.txt"
}

# Each run in a process of its own, at most JOBS at once; a failed run
# leaves a mark, so one failure fails the script after the others finish.
FAILED="$OUT/.failed"
rm -f "$FAILED"
for seed in "${SEED_LIST[@]}"; do
    for s in "${SCALES[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
        { one "$seed" "$s" || echo "seed $seed, scale $s" >> "$FAILED"; } &
    done
done
wait
if [ -f "$FAILED" ]; then
    echo "replay-scales.sh: runs failed: $(paste -sd';' "$FAILED")" >&2
    rm -f "$FAILED"
    exit 1
fi

python3 - "$OUT" "$SEEDS" "${SCALES[@]}" <<'PY' | tee "$OUT/scales.md"
import json, sys
out, seeds, scales = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
def clock(s):
    if s is None:
        return None
    m = int(13 * 60 + (s / 60 + 0.5) // 1)  # to the nearest minute, as the CLI prints
    return m
def hm(m):
    return "—" if m is None else "%d:%02d" % (m // 60, m % 60)
def load(seed, s):
    d = json.load(open(f"{out}/seed-{seed}/scale-{s}/summary.json"))
    run = d["replay"]["runs"][0]
    h = run["headline"]
    wall, user, sys_, rss = open(f"{out}/seed-{seed}/time-{s}.txt").read().split()
    return dict(
        web=100 * h["web_api_peak_error_rate"],
        arch=100 * h["archive_peak_error_rate"],
        tok=h["token_arrivals_peak_per_s"] / 1e3,
        storm=clock(h.get("token_storm_from_s")),
        web30=100 * h["web_api_error_rate_30m_after_trigger"],
        meta=h["metastable"],
        paths={p["path"]: clock(p.get("recovered_at_s")) for p in run["paths"]},
        wait=max(p.get("worst_job_wait_s") or 0 for p in run["paths"]) / 60,
        wall=float(wall), cpu=float(user) + float(sys_), rss=int(rss) / 1024,
    )
rows = {(seed, s): load(seed, s) for seed in seeds for s in scales}
paths = list(rows[(seeds[0], scales[0])]["paths"])
print("| seed | `--scale` | web/API peak | archive peak | token peak (1 min) | token storm from | web/API 30 min after | metastable | "
      + " | ".join(f"{p} back" for p in paths) + " | longest job wait | wall s | CPU s | peak RSS MiB |")
print("|---" * (12 + len(paths)) + "|")
for seed in seeds:
    for s in scales:
        r = rows[(seed, s)]
        print(f"| {seed} | {s} | {r['web']:.1f}% | {r['arch']:.1f}% | {r['tok']:.1f} k/s | {hm(r['storm'])} | {r['web30']:.1f}% | "
              + ("yes" if r["meta"] else "no") + " | "
              + " | ".join(hm(r["paths"][p]) for p in paths)
              + f" | {r['wait']:.0f} min | {r['wall']:.0f} | {r['cpu']:.0f} | {r['rss']:.0f} |")
# The largest scale is the reference, whatever order the scales came in.
ref = max(scales, key=float)
print()
print(f"Against `--scale {ref}` on the same seed (tolerance: 3 points, 10% on the token peak, 10 min on a recovery):")
print()
for s in [x for x in scales if x != ref]:
    verdicts = []
    for seed in seeds:
        a, b = rows[(seed, s)], rows[(seed, ref)]
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
        verdicts.append(f"seed {seed}: " + ("agrees" if not bad else "; ".join(bad)))
    print(f"- `--scale {s}`: " + " — ".join(verdicts))
if len(seeds) > 1:
    print()
    print("Range over the seeds:")
    print()
    print("| `--scale` | web/API peak | archive peak | token peak (1 min) | token storm from |")
    print("|---|---|---|---|---|")
    for s in scales:
        rs = [rows[(seed, s)] for seed in seeds]
        span = lambda k, f: f"{f(min(r[k] for r in rs))}–{f(max(r[k] for r in rs))}"
        storms = [r["storm"] for r in rs if r["storm"] is not None]
        storm = f"{hm(min(storms))}–{hm(max(storms))}" if storms else "—"
        print(f"| {s} | {span('web', lambda v: f'{v:.1f}%')} | {span('arch', lambda v: f'{v:.1f}%')} | "
              f"{span('tok', lambda v: f'{v:.1f} k/s')} | {storm} |")
PY
echo "tables: $OUT/scales.md" >&2
