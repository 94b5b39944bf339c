#!/usr/bin/env bash
# `stormbreak audit` on one namespace of many Deployment + Service pairs in
# one file (docs/BENCHMARKS.md, "8. Audit", "One big namespace"): the shape
# that was quadratic before issue 40. For each N, generates N pairs, then
# times one audit (wall, user seconds and peak RSS, GNU time). Never
# asserts a timing; the test `work_grows_linearly_...` checks the growth
# by counted work instead.
#
# usage: benches/audit_pairs.sh [N ...]   (default 13500 27000)
# Needs: cargo, python3, GNU time at /usr/bin/time. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- 13500 27000
dir=$(mktemp -d /tmp/stormbreak-audit-pairs.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cargo build --release --locked -q -p stormbreak
bin=${CARGO_TARGET_DIR:-target}/release/stormbreak
echo "| pairs | file (MB) | wall (s) | user (s) | peak RSS (MB) | routes |"
echo "|---|---|---|---|---|---|"
for n in "$@"; do
  python3 - "$n" "$dir/in.yaml" <<'PY'
import sys
n, out = int(sys.argv[1]), open(sys.argv[2], "w")
for i in range(n):
    out.write(f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc{i}
  namespace: big
spec:
  replicas: 2
  selector:
    matchLabels: {{app: svc{i}}}
  template:
    metadata:
      labels: {{app: svc{i}, sidecar.istio.io/inject: "true"}}
    spec:
      containers:
      - name: app
        image: registry.example.com/big/svc:1
        resources: {{requests: {{cpu: 100m}}}}
---
apiVersion: v1
kind: Service
metadata:
  name: svc{i}
  namespace: big
spec:
  selector: {{app: svc{i}}}
  ports: [{{port: 80}}]
---
""")
PY
  mb=$(awk -v b="$(stat -c %s "$dir/in.yaml")" 'BEGIN{printf "%.1f", b/1e6}')
  /usr/bin/time -f "%e %U %M" -o "$dir/time" "$bin" audit --max-file-size 67108864 "$dir/in.yaml" > "$dir/out" || true
  read -r wall user rss < "$dir/time"
  routes=$(tail -1 "$dir/out" | grep -o '[0-9]* routes' || echo "?")
  echo "| $n | $mb | $wall | $user | $((rss / 1024)) | ${routes% routes} |"
done
