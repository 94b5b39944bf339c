#!/usr/bin/env bash
# Sweep speed-up: the same 16-cell sweep (4 × 4 cells of the capacity
# drop, three seeds each: 48 runs) at --jobs 1 and --jobs 2, REPS times alternating,
# median wall time of each and their ratio; and the example's 10 × 10 × 3
# map (docs/sweep.md) once at --jobs 2. Outputs are checked identical
# across thread counts on every repetition.
#
#   CARGO_TARGET_DIR=/work/target-sweep benches/sweep.sh [REPS]
#   SWEEP_BIN=path/to/stormbreak benches/sweep.sh [REPS]   # skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-5}"
target="${CARGO_TARGET_DIR:-target}"
if [[ -n "${SWEEP_BIN:-}" ]]; then
  bin="$SWEEP_BIN"
else
  cargo build --release --locked -p stormbreak >/dev/null
  bin="$target/release/stormbreak"
fi
uptime
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
axes=(--axis 'action.cut.factor=2..6:4' --axis 'action.cut.for=4s..16s:4' --seeds 3)
run() { # jobs out -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" sweep scenarios/capacity-drop.toml "${axes[@]}" --quiet --jobs "$1" --out "$2" >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
one=(); two=()
for ((r = 0; r < reps; r++)); do
  one+=("$(run 1 "$tmp/one")")
  two+=("$(run 2 "$tmp/two")")
  cmp -s "$tmp/one/sweep.csv" "$tmp/two/sweep.csv"
  cmp -s "$tmp/one/summary.json" "$tmp/two/summary.json"
  cmp -s "$tmp/one/report.html" "$tmp/two/report.html"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
m1=$(median "${one[@]}"); m2=$(median "${two[@]}")
printf '16 cells, %d reps: --jobs 1 median %.2f s, --jobs 2 median %.2f s, speed-up %.2fx\n' \
  "$reps" "$m1" "$m2" "$(echo "$m1 / $m2" | bc -l)"
printf 'jobs1: %s\njobs2: %s\n' "${one[*]}" "${two[*]}"
t0=$(date +%s.%N)
"$bin" sweep scenarios/capacity-drop.toml --axis 'action.cut.factor=1.5..6:10' \
  --axis 'action.cut.for=1s..30s:log:10' --seeds 3 --quiet --jobs 2 --out "$tmp/map"
t1=$(date +%s.%N)
printf 'example map (10 x 10 cells x 3 seeds) at --jobs 2: %.1f s\n' "$(echo "$t1 - $t0" | bc -l)"
