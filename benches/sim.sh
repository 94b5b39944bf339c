#!/usr/bin/env bash
# Simulator benchmarks of docs/BENCHMARKS.md, in one run:
#
#   1. throughput of `stormbreak simulate` (simulated attempts/s, events/s,
#      wall and CPU) on each scenario given (default: scenario (a),
#      benches/scenarios/metastable-100k.toml);
#   2. side by side with SimPy (benches/simpy_mm.py, the same model of (a)):
#      `rate`  — both on (a) at full scale over a short horizon;
#      `agree` — both on (a) at a scale both can run to the storm, and their
#                amplification and goodput before and after the spike;
#   3. peak RSS of (a) at its 10 simulated minutes vs a longer horizon.
#
# Prints Markdown tables (also saved as OUT/tables.md).
#
# usage: benches/sim.sh [options] [SCENARIO.toml[@SCALE] ...]
#   (step 1 runs each scenario at SCALE, default 1: `--scale` of stormbreak simulate)
#   --rev REV          build stormbreak from `git archive REV` instead of the work tree
#   --out DIR          where runs and tables go [default: a new /tmp/stormbreak-bench.*]
#   --model FILE       scenario for steps 2 and 3 [default: benches/scenarios/metastable-100k.toml]
#   --simpy-horizon S  simulated seconds of SimPy's `rate` run [default: 10]
#   --sb-horizon S     simulated seconds of Stormbreak's `rate` run [default: 60,
#                      the steady state before the spike, as SimPy's short run]
#   --agree-scale F    scale of the `agree` runs [default: 0.1]
#   --agree-horizon S  simulated seconds of the `agree` runs [default: 150]
#   --mem-long S       long horizon of step 3 [default: 3600]
#   --quick            small horizons (rate 2 s / 20 s, agree 0.05 × 120 s, memory 120 s vs 600 s)
#   --no-simpy | --no-memory   skip step 2 | step 3
#
# Needs: cargo, python3 (≥ 3.11; simpy is pip-installed if missing), GNU time
# at /usr/bin/time. Honours CARGO_TARGET_DIR. Never asserts a timing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
MODEL="$HERE/scenarios/metastable-100k.toml"
REV=""
OUT=""
SIMPY_H=10
SB_H=60
AGREE_SCALE=0.1
AGREE_H=150
MEM_SHORT=""
MEM_LONG=3600
DO_SIMPY=1
DO_MEM=1
SCENARIOS=()

while (($#)); do
    case "$1" in
        --rev) REV=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --model) MODEL=$(realpath "$2"); shift 2 ;;
        --simpy-horizon) SIMPY_H=$2; shift 2 ;;
        --sb-horizon) SB_H=$2; shift 2 ;;
        --agree-scale) AGREE_SCALE=$2; shift 2 ;;
        --agree-horizon) AGREE_H=$2; shift 2 ;;
        --mem-long) MEM_LONG=$2; shift 2 ;;
        --quick) SIMPY_H=2; SB_H=20; AGREE_SCALE=0.05; AGREE_H=120; MEM_SHORT=120; MEM_LONG=600; shift ;;
        --no-simpy) DO_SIMPY=0; shift ;;
        --no-memory) DO_MEM=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "sim.sh: unknown option $1" >&2; exit 2 ;;
        *@*) SCENARIOS+=("$(realpath "${1%@*}")@${1##*@}"); shift ;;
        *) SCENARIOS+=("$(realpath "$1")@1"); shift ;;
    esac
done
((${#SCENARIOS[@]})) || SCENARIOS=("$MODEL@1")
[[ -x /usr/bin/time ]] || { echo "sim.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

OUT=${OUT:-$(mktemp -d /tmp/stormbreak-bench.XXXXXX)}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
PY=(python3 "$HERE/simbench.py")

# ---- build ------------------------------------------------------------
SRC=$REPO
if [[ -n $REV ]]; then
    SRC="$OUT/src"
    rm -rf "$SRC" && mkdir -p "$SRC"
    git -C "$REPO" archive --format=tar "$REV" | tar -x -C "$SRC"
    DESC="$(git -C "$REPO" rev-parse --short "$REV")"
else
    DESC="$(git -C "$REPO" rev-parse --short HEAD)"
    [[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.toml Cargo.lock) ]] || DESC="$DESC+uncommitted"
fi
echo "== building stormbreak (release) from $SRC at $DESC" >&2
(cd "$SRC" && cargo build --release -p stormbreak --bin stormbreak >&2)
BUILT="${CARGO_TARGET_DIR:-$SRC/target}/release/stormbreak"
[[ $BUILT = /* ]] || BUILT="$SRC/$BUILT"
# Run (and keep, for profiling) a copy of this binary and of the sources it
# was built from: the work tree may move on while the benchmarks run.
BIN="$OUT/stormbreak"
cp "$BUILT" "$BIN"
(cd "$SRC" && tar -czf "$OUT/src.tar.gz" Cargo.toml Cargo.lock crates/*/Cargo.toml crates/*/src)

# run_sb LABEL SCALE FILE: one timed `stormbreak simulate`, appended to RESULTS.
n=0
run_sb() {
    local label=$1 scale=$2 file=$3
    n=$((n + 1))
    local dir="$OUT/run$n"
    echo "== [$label] stormbreak simulate $(basename "$file") --scale $scale" >&2
    /usr/bin/time -v -o "$dir.time" "$BIN" simulate "$file" --quiet --scale "$scale" --out "$dir" >"$dir.stdout"
    "${PY[@]}" sb "$label" "$scale" "$dir" "$dir.time" >>"$RESULTS"
}

# run_simpy LABEL SCALE HORIZON
run_simpy() {
    local label=$1 scale=$2 horizon=$3
    n=$((n + 1))
    echo "== [$label] simpy_mm.py $(basename "$MODEL") --scale $scale --horizon $horizon" >&2
    python3 "$HERE/simpy_mm.py" "$MODEL" --scale "$scale" --horizon "$horizon" >"$OUT/run$n.simpy.json"
    "${PY[@]}" simpy "$label" "$OUT/run$n.simpy.json" >>"$RESULTS"
}

# at_horizon SECONDS: a copy of MODEL whose [scenario] duration is SECONDS.
at_horizon() {
    local f="$OUT/$(basename "$MODEL" .toml)-$1s.toml"
    "${PY[@]}" with-duration "$MODEL" "$1" >"$f"
    echo "$f"
}

# ---- 1. throughput ----------------------------------------------------
for f in "${SCENARIOS[@]}"; do
    run_sb throughput "${f##*@}" "${f%@*}"
done

# ---- 2. SimPy side by side --------------------------------------------
if ((DO_SIMPY)); then
    run_sb rate 1 "$(at_horizon "$SB_H")"
    run_simpy rate 1 "$SIMPY_H"
    agree=$(at_horizon "$AGREE_H")
    run_sb agree "$AGREE_SCALE" "$agree"
    run_simpy agree "$AGREE_SCALE" "$AGREE_H"
fi

# ---- 3. memory vs simulated duration ----------------------------------
if ((DO_MEM)); then
    if [[ -n $MEM_SHORT ]]; then
        run_sb memory 1 "$(at_horizon "$MEM_SHORT")"
    elif [[ ${SCENARIOS[0]} == "$MODEL@1" ]]; then
        # The model at its own duration already ran in step 1.
        head -n 1 "$RESULTS" | sed 's/"label": "throughput"/"label": "memory"/' >>"$RESULTS"
    else
        run_sb memory 1 "$MODEL"
    fi
    run_sb memory 1 "$(at_horizon "$MEM_LONG")"
fi

# ---- tables -----------------------------------------------------------
{
    echo "<!-- benches/sim.sh $(date -u +%Y-%m-%dT%H:%MZ), stormbreak $DESC, $(nproc) cores, $(uname -m) -->"
    echo
    "${PY[@]}" table "$RESULTS"
} | tee "$OUT/tables.md"
echo "results: $OUT" >&2
