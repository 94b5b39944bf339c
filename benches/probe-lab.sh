#!/usr/bin/env bash
# stormbreak probe against the lab's incident scenario (docs/probe.md,
# "Against the lab"): does a live prober see what the simulator predicts?
#
#   1. `stormbreak simulate scenarios/lab-incident.toml --recovery-window 6s`:
#      the simulator's per-route recovery table (the prediction);
#   2. `stormbreak lab scenarios/lab-incident.toml --entries F --recovery-window 6s`
#      in the background (100 s of wall time);
#   3. once F appears, `stormbreak probe` aimed at the web, git and token
#      routes' doors (their edge LBs) for 95 s, 24 probes a second in all,
#      new connection each, --expect the simulator's table, its clock
#      aligned on the lab's start.
#
# Prints the probe's table, predicted against observed recovery, and the
# lab's own recovery.json rows (the lab's clients' view); saves everything
# under OUT. Exits non-zero if the probe does not see web, git and token
# recover in that order, or if its slots per second stray more than 10 %
# from the configured rate (the probe must not add to the storm). Never
# asserts a timing otherwise.
#
# usage: benches/probe-lab.sh [--out DIR]
# Needs: cargo, python3. Builds the README's release binary (reused if built).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=""
while (($#)); do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "probe-lab.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
OUT=${OUT:-$(mktemp -d /tmp/stormbreak-probe-lab.XXXXXX)}
mkdir -p "$OUT"
RATE=24

cd "$REPO"
cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/stormbreak
SCENARIO=scenarios/lab-incident.toml

"$BIN" simulate "$SCENARIO" --quiet --recovery-window 6s --out "$OUT/sim" >/dev/null
rm -f "$OUT/entries.json"
"$BIN" lab "$SCENARIO" --entries "$OUT/entries.json" --recovery-window 6s --out "$OUT/lab" \
    >"$OUT/lab.log" 2>&1 &
LAB=$!
trap 'kill "$LAB" 2>/dev/null || true; wait "$LAB" 2>/dev/null || true' EXIT
for _ in $(seq 600); do
    [[ -s "$OUT/entries.json" ]] && break
    kill -0 "$LAB" 2>/dev/null || { cat "$OUT/lab.log" >&2; exit 1; }
    sleep 0.1
done
[[ -s "$OUT/entries.json" ]] || { echo "probe-lab.sh: the lab never wrote its entries" >&2; exit 1; }

OFFSET=$(python3 - "$OUT" "$RATE" <<'PY'
import json, sys, time
out, rate = sys.argv[1], sys.argv[2]
doc = json.load(open(f"{out}/entries.json"))
urls = {r["route"]: r["urls"][0] for r in doc["routes"]}
paths = ""
for route in ["web", "git", "token"]:
    paths += f'''
[[path]]
name = "{route}"
url = "{urls[route]}"
timeout = "2s"
'''
open(f"{out}/probe.toml", "w").write(f'''# Written by benches/probe-lab.sh for scenarios/lab-incident.toml.
[probe]
rate = "{rate}/s"
duration = "95s"
interval = "1s"
seed = 1
# The lab's LBs refuse at their flow cap with 429 and no Retry-After:
# a short pause keeps the windows judged through the storm.
overload_pause = "100ms"

[defaults]
slo = {{ error_rate = 0.05, window = "6s" }}
{paths}''')
print(f"{time.time() - doc['started_unix_ms'] / 1000:.3f}")
PY
)
set +e
"$BIN" probe "$OUT/probe.toml" --out "$OUT/probe" --jsonl "$OUT/probes.jsonl" \
    --expect "$OUT/sim/recovery.json" --expect-offset "$OFFSET" | tee "$OUT/probe.txt"
CODE=${PIPESTATUS[0]}
set -e
wait "$LAB" || true
trap - EXIT
echo "probe exit: $CODE (99: the storm breached the SLO, as it should)"
python3 - "$OUT" "$RATE" "$OFFSET" <<'PY'
import json, sys
out, rate, offset = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
probe = json.load(open(f"{out}/probe/probe.json"))
lab = {r["path"]: r for r in json.load(open(f"{out}/lab/recovery.json"))["routes"]}
sim = {r["path"]: r for r in json.load(open(f"{out}/sim/recovery.json"))["routes"]}
f = lambda v: "-" if v is None else f"{v:.0f} s"
print("\n| route | degraded: sim / lab / probe | recovered: sim / lab / probe |")
print("|---|---|---|")
rec = {}
for p in probe["run"]["paths"]:
    n = p["path"]
    od = None if p["degraded_at_s"] is None else p["degraded_at_s"] + offset
    orr = None if p["recovered_at_s"] is None else p["recovered_at_s"] + offset
    rec[n] = orr
    print(f"| {n} | {f(sim[n]['degraded_at_s'])} / {f(lab[n]['degraded_at_s'])} / {f(od)} "
          f"| {f(sim[n]['recovered_at_s'])} / {f(lab[n]['recovered_at_s'])} / {f(orr)} |")
slots = probe["run"]["slots_per_s"]
print(f"\nprobe slots per second: {slots:.2f} (configured {rate:.0f}); offset {offset:.2f} s")
ok = True
if abs(slots - rate) > 0.1 * rate:
    print("FAIL: the probe's rate was not flat"); ok = False
order = [rec.get(n) for n in ["web", "git", "token"]]
if None in order or not (order[0] < order[1] < order[2]):
    print(f"FAIL: recovery order web < git < token not seen: {order}"); ok = False
sys.exit(0 if ok else 1)
PY
echo "outputs: $OUT"
