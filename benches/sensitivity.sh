#!/usr/bin/env bash
# The replay's sensitivity to its assumptions (docs/replay.md, "What the
# verdict rests on"): every ASSUMPTION number of the built-in scenario at
# -25%, -10%, +10% and +25%, as it happened and with --fixed, on SEEDS at
# --scale SCALE. About 80 assumptions × 4 changes × 2 runs per seed: hours
# on a loaded 2-core machine, so it runs GROUP assumptions at a time, in
# the order below (the knife edges the scenario's comments name first),
# each group to its own directory, and merges what has finished into one
# table after every group: stopping it early leaves a valid partial table.
#
#   SENS_BIN=path/to/stormbreak benches/sensitivity.sh [OUT] [SEEDS] [SCALE] [GROUP]
#   CARGO_TARGET_DIR=… benches/sensitivity.sh            # builds first
#
# OUT (default stormbreak-out/sensitivity-bench) gets part-NN/ per group
# and table.md, the merged table: assumptions that flip the verdict first.
# SEEDS is `replay --seeds`'s grammar (docs/sweep.md, "Seeds"): 1,2,3 or
# 1..=3; one seed is written with a trailing comma (20260817,), since a
# bare number is a count.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-stormbreak-out/sensitivity-bench}"
seeds="${2:-20260817,}"
scale="${3:-0.01}"
group="${4:-4}"
target="${CARGO_TARGET_DIR:-target}"
if [[ -n "${SENS_BIN:-}" ]]; then
  bin="$SENS_BIN"
else
  cargo build --release --locked -p stormbreak >/dev/null
  bin="$target/release/stormbreak"
fi
mkdir -p "$out"
uptime
first=(
  service.auth-cus.app.service_time.mean
  service.auth-cus.sidecar.limit
  lb.haproxy-cus.flows_per_node
  service.token-cus.sidecar.queue
  service.token-cus.app.service_time.mean
  client.editors-a.fanout
  gateway.gateway-cus.timeout
  gateway.gateway-cus.retry.max_attempts
  client.browsers-cus.step.0.rate
  client.api-clients-cus.step.0.rate
  client.editors-a.rate
  service.auth-cus.replicas
)
mapfile -t all < <("$bin" replay --sensitivity --list-assumptions | cut -d' ' -f1)
order=("${first[@]}")
for a in "${all[@]}"; do
  [[ " ${first[*]} " == *" $a "* ]] || order+=("$a")
done
merge() {
  python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
parts = sorted(glob.glob(os.path.join(out, "part-*", "sensitivity.json")))
blocks, head = [], None
for p in parts:
    j = json.load(open(p))
    rows = open(os.path.join(os.path.dirname(p), "sensitivity.md")).read().splitlines()
    if head is None:
        head = rows[:4]  # title, header, rule, baseline
    body = rows[4:]
    starts = [i for i, r in enumerate(body) if not r.startswith("|  |")]
    for a, (s, e) in zip(j["assumptions"], zip(starts, starts[1:] + [len(body)])):
        flips = sum(1 for v in a["variants"] if v.get("verdict", {}).get("flips"))
        bands = sum(len(v.get("verdict", {}).get("bands_left", [])) for v in a["variants"])
        blocks.append((-flips, -bands, len(blocks), body[s:e]))
if head is None:
    sys.exit(0)
done = len(blocks)
with open(os.path.join(out, "table.md"), "w") as f:
    f.write(head[0].split(";")[0] + f"; {done} assumptions done)\n\n")
    f.write("\n".join(head[1:]) + "\n")
    for b in sorted(blocks):
        f.write("\n".join(b[3]) + "\n")
PY
}
n=0
for ((i = 0; i < ${#order[@]}; i += group)); do
  n=$((n + 1))
  part="$out/part-$(printf %02d "$n")"
  if [[ -f "$part/sensitivity.json" ]]; then continue; fi  # resumable
  only=$(IFS=,; echo "${order[*]:i:group}")
  t0=$(date +%s)
  "$bin" replay --sensitivity --only "$only" --seeds "$seeds" --scale "$scale" --quiet --out "$part" >/dev/null
  echo "group $n ($only): $(( $(date +%s) - t0 )) s"
  merge
done
merge
echo "table: $out/table.md"
