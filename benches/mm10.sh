#!/usr/bin/env bash
# Engine speed side by side (docs/BENCHMARKS.md, "M/M/10 side by side"):
# a plain M/M/10 at ρ = 0.9 (Poisson 9 000/s, exponential 1 ms service,
# no retries, 1 000 simulated seconds, ~9 M requests) run by
#
#   stormbreak — `stormbreak simulate benches/mm10/mm10.toml --quiet --out DIR`;
#   minimal    — benches/mm10 (std BinaryHeap of (time, seq, event), xoshiro,
#                counts only), built in release;
#   simpy      — benches/mm10/simpy_mm10.py (callbacks on SimPy's event loop,
#                written for SimPy's speed; simpy pip-installed if missing),
#
# alternating, N repetitions each, every run under /usr/bin/time. Prints a
# Markdown table of medians (wall, CPU = user + sys, requests per wall and per
# CPU second, peak RSS), the ratios, the completions of each tool and the mean
# sojourn against Erlang C. Also saved as OUT/tables.md.
#
# usage: benches/mm10.sh [--reps N] [--out DIR] [--horizon S]
#   --reps N     repetitions of each tool [default: 3]
#   --out DIR    where runs and tables go [default: a new /tmp/stormbreak-mm10.*]
#   --horizon S  simulated seconds for all three [default: 1000]
#
# Needs: cargo, python3 (≥ 3.11), GNU time at /usr/bin/time. Honours
# CARGO_TARGET_DIR (the minimal simulator builds in "$CARGO_TARGET_DIR-mm10",
# or in benches/mm10/target when it is unset,
# so the two builds never share a lock). Never asserts a timing; exits non-zero
# if the tools disagree on completions by more than 1 %.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
REPS=3
OUT=""
HORIZON=1000
while (($#)); do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --horizon) HORIZON=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "mm10.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -x /usr/bin/time ]] || { echo "mm10.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

OUT=${OUT:-$(mktemp -d /tmp/stormbreak-mm10.XXXXXX)}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

# ---- build ------------------------------------------------------------
DESC="$(git -C "$REPO" rev-parse --short HEAD)"
[[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.toml Cargo.lock) ]] || DESC="$DESC+uncommitted"
echo "== building stormbreak (release) at $DESC" >&2
(cd "$REPO" && cargo build --release -p stormbreak --bin stormbreak >&2)
TD=${CARGO_TARGET_DIR:-$REPO/target}
[[ $TD = /* ]] || TD="$REPO/$TD"
cp "$TD/release/stormbreak" "$OUT/stormbreak"
echo "== building benches/mm10 (release)" >&2
# Beside a CARGO_TARGET_DIR of the caller's, else in benches/mm10/target
# (ignored by git), never in a new folder of the repository.
MTD=$([[ -n ${CARGO_TARGET_DIR:-} ]] && echo "$TD-mm10" || echo "$HERE/mm10/target")
CARGO_TARGET_DIR="$MTD" cargo build --release --offline --manifest-path "$HERE/mm10/Cargo.toml" >&2
cp "$MTD/release/mm10-minimal" "$OUT/mm10-minimal"
python3 -c 'import simpy' 2>/dev/null || python3 "$HERE/mm10/simpy_mm10.py" --horizon 0.001 >/dev/null

MODEL="$OUT/mm10.toml"
sed "s/^duration = .*/duration = \"${HORIZON}s\"/" "$HERE/mm10/mm10.toml" >"$MODEL"

# timed TOOL REP CMD...: run CMD under /usr/bin/time, stdout to OUT/TOOL-REP.out
timed() {
    local tool=$1 rep=$2
    shift 2
    echo "== [$rep/$REPS] $tool" >&2
    /usr/bin/time -f '{"wall_s": %e, "user_s": %U, "sys_s": %S, "max_rss_kb": %M}' \
        -o "$OUT/$tool-$rep.time" "$@" >"$OUT/$tool-$rep.out"
    python3 "$HERE/mm10/report.py" row "$tool" "$OUT/$tool-$rep" >>"$RESULTS"
}

for rep in $(seq 1 "$REPS"); do
    timed stormbreak "$rep" "$OUT/stormbreak" simulate "$MODEL" --quiet --out "$OUT/stormbreak-$rep.d"
    timed minimal "$rep" "$OUT/mm10-minimal" --horizon "$HORIZON"
    timed simpy "$rep" python3 "$HERE/mm10/simpy_mm10.py" --horizon "$HORIZON"
    rm -rf "$OUT/stormbreak-$rep.d/timeseries.csv"
done

{
    echo "<!-- benches/mm10.sh $(date -u +%Y-%m-%dT%H:%MZ), stormbreak $DESC, $(nproc) cores, $(uname -m), load: $(cut -d' ' -f1-3 /proc/loadavg) -->"
    echo
    python3 "$HERE/mm10/report.py" table "$RESULTS"
} | tee "$OUT/tables.md"
echo "results: $OUT" >&2
