#!/usr/bin/env bash
# `stormbreak audit` speed (docs/BENCHMARKS.md, "8. Audit"): generates N
# objects of a realistic mix (benches/audit_gen.py), builds the release
# binary, and times RUNS audits of the directory (wall seconds and peak RSS,
# GNU time). Never asserts a timing.
#
# usage: benches/audit.sh [N_OBJECTS] [RUNS]   (defaults 10000, 5)
# Needs: cargo, python3, GNU time at /usr/bin/time. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
runs=${2:-5}
dir=$(mktemp -d /tmp/stormbreak-audit-bench.XXXXXX)
python3 benches/audit_gen.py "$dir/in" "$n"
cargo build --release --locked -q -p stormbreak
bin=${CARGO_TARGET_DIR:-target}/release/stormbreak
"$bin" audit "$dir/in" | tail -1
echo "| run | wall (s) | peak RSS (KB) |"
echo "|---|---|---|"
for i in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$dir/time" "$bin" audit "$dir/in" --format json > /dev/null || true
  read -r wall rss < "$dir/time"
  echo "| $i | $wall | $rss |"
done
rm -rf "$dir"
