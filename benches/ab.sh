#!/usr/bin/env bash
# Engine speed, before and after a change, side by side in one run:
# builds `stormbreak` at BASE (git archive) and from the work tree, then
# runs each workload N times, alternating the two binaries so drift in the
# machine's load touches both alike, and prints the median wall and CPU
# (user + sys) seconds per workload and binary, with the ratio new/old.
#
# Workloads: scenario (a) of docs/BENCHMARKS.md
# (benches/scenarios/metastable-100k.toml, `simulate`, full horizon) and the
# default `replay`.
#
# usage: benches/ab.sh BASE [N]        (N default 5)
# Needs GNU time at /usr/bin/time. Never asserts a timing.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BASE=${1:?usage: benches/ab.sh BASE [N]}
N=${2:-5}
OUT=$(mktemp -d /tmp/stormbreak-ab.XXXXXX)
trap 'rm -rf "$OUT/src" "$OUT"/run-*' EXIT

mkdir -p "$OUT/src"
git -C "$REPO" archive --format=tar "$BASE" | tar -x -C "$OUT/src"
echo "building $BASE and the work tree" >&2
(cd "$OUT/src" && CARGO_TARGET_DIR="$OUT/target-old" cargo build --release --locked -q -p stormbreak)
(cd "$REPO" && cargo build --release --locked -q -p stormbreak)
OLD="$OUT/target-old/release/stormbreak"
NEW="${CARGO_TARGET_DIR:-$REPO/target}/release/stormbreak"

# one LABEL BIN WORKLOAD: appends "label workload wall cpu" to results
one() {
    local dir="$OUT/run-$1-$3"
    rm -rf "$dir"
    case $3 in
        a) /usr/bin/time -f '%e %U %S' -o "$OUT/t" "$2" simulate "$REPO/benches/scenarios/metastable-100k.toml" --quiet --out "$dir" >/dev/null ;;
        replay) /usr/bin/time -f '%e %U %S' -o "$OUT/t" "$2" replay --quiet --out "$dir" >/dev/null ;;
    esac
    read -r wall user sys <"$OUT/t"
    echo "$1 $3 $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" >>"$OUT/results"
    rm -rf "$dir"
}

: >"$OUT/results"
for i in $(seq "$N"); do
    for w in a replay; do
        one old "$OLD" "$w"
        one new "$NEW" "$w"
    done
    echo "round $i/$N done" >&2
done

python3 - "$OUT/results" "$BASE" "$N" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda lab, w, col: statistics.median(float(r[col]) for r in rows if r[0] == lab and r[1] == w)
print(f"| workload | {sys.argv[2]} wall (s) | new wall (s) | {sys.argv[2]} CPU (s) | new CPU (s) | new/old CPU |")
print("|---|---:|---:|---:|---:|---:|")
for w, name in [("a", "(a) metastable-100k"), ("replay", "replay (default)")]:
    ow, nw, oc, nc = med("old", w, 2), med("new", w, 2), med("old", w, 3), med("new", w, 3)
    print(f"| {name} | {ow:.2f} | {nw:.2f} | {oc:.2f} | {nc:.2f} | {nc / oc:.3f} |")
print(f"\nmedians of {sys.argv[3]} alternating runs each")
PY
