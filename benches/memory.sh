#!/usr/bin/env bash
# Peak memory against simulated time (docs/BENCHMARKS.md, "Memory against
# live state"): the same scenario run to several horizons with
# `stormbreak simulate --until`, each under GNU time, one after another.
#
#   steady — benches/mm10/mm10.toml (M/M/10 at ρ = 0.9, live state flat):
#            --until 100s and 1000s;
#   storm  — scenarios/github-2026-08-17.toml at --scale S: --until 10m, 60m
#            and 120m (calm, in the storm, later in the storm).
#
# Prints a Markdown table (peak RSS, user CPU s, events, peak attempts in
# flight, peak job backlog from recording.json) and keeps it as OUT/tables.md.
# Never asserts a figure.
#
# usage: benches/memory.sh [--scale S] [--until LIST] [--out DIR] [--cpu N]
#   --scale S     scale of the incident runs [default: 1]
#   --until LIST  horizons of the incident runs, comma-separated [default: 10m,60m,120m]
#   --out DIR     where runs and the table go [default: a new /tmp/stormbreak-memory.*]
#   --cpu N       pin every run to CPU N (taskset) [default: unpinned]
#
# Needs: cargo, python3, GNU time at /usr/bin/time; taskset for --cpu.
# Honours CARGO_TARGET_DIR. At --scale 1 the incident runs take about 7 s,
# 70 s and 150 s of CPU on the 2-core machine of docs/BENCHMARKS.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SCALE=1
UNTIL=10m,60m,120m
OUT=""
CPU=""
while (($#)); do
    case "$1" in
        --scale) SCALE=${2:?memory.sh: --scale needs a value}; shift 2 ;;
        --until) UNTIL=${2:?memory.sh: --until needs a value}; shift 2 ;;
        --out) OUT=${2:?memory.sh: --out needs a value}; shift 2 ;;
        --cpu) CPU=${2:?memory.sh: --cpu needs a value}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "memory.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x /usr/bin/time ]] || { echo "memory.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }
PIN=()
if [[ -n $CPU ]]; then
    command -v taskset >/dev/null || { echo "memory.sh: --cpu needs taskset (util-linux)" >&2; exit 1; }
    PIN=(taskset -c "$CPU")
fi

OUT=${OUT:-$(mktemp -d /tmp/stormbreak-memory.XXXXXX)}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

DESC="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)")"
[[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null) ]] || DESC="$DESC+uncommitted"
echo "== building stormbreak (release) at $DESC" >&2
(cd "$REPO" && cargo build --release -p stormbreak --bin stormbreak >&2)
TD=${CARGO_TARGET_DIR:-$REPO/target}
[[ $TD = /* ]] || TD="$REPO/$TD"
cp "$TD/release/stormbreak" "$OUT/stormbreak"

# run LABEL FILE SCALE UNTIL: one run under /usr/bin/time, a JSON line out.
run() {
    local label=$1 file=$2 scale=$3 until=$4 dir="$OUT/$1-$4"
    echo "== $label --scale $scale --until $until" >&2
    /usr/bin/time -f '%M %U' -o "$dir.time" "${PIN[@]}" "$OUT/stormbreak" simulate "$file" \
        --scale "$scale" --until "$until" --quiet --out "$dir" >/dev/null
    python3 - "$label" "$scale" "$until" "$dir" <<'PY' >>"$RESULTS"
import json, sys
label, scale, until, d = sys.argv[1:]
rss_kb, user_s = open(d + ".time").read().split()[-2:]
rec = json.load(open(d + "/recording.json"))
print(json.dumps({
    "model": label, "scale": float(scale), "until": until,
    "peak_rss_mib": int(rss_kb) / 1024, "user_s": float(user_s),
    "events": rec["events"], "peak_in_flight": rec["peak_in_flight"],
    "peak_job_backlog": rec["peak_job_backlog"],
}))
PY
    rm -rf "$dir"
}

run steady "$HERE/mm10/mm10.toml" 1 100s
run steady "$HERE/mm10/mm10.toml" 1 1000s
IFS=, read -ra HORIZONS <<<"$UNTIL"
for u in "${HORIZONS[@]}"; do
    run incident "$REPO/scenarios/github-2026-08-17.toml" "$SCALE" "$u"
done

{
    echo "<!-- benches/memory.sh $(date -u +%Y-%m-%dT%H:%MZ), stormbreak $DESC, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg) -->"
    echo
    echo "| model | --scale | --until | peak RSS MiB | user s | events | peak_in_flight | peak_job_backlog |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    python3 - "$RESULTS" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("| {model} | {scale:g} | {until} | {peak_rss_mib:.1f} | {user_s:.2f} | {events:,} "
          "| {peak_in_flight:,} | {peak_job_backlog:,} |".format(**r))
PY
} | tee "$OUT/tables.md"
echo "results: $OUT" >&2
