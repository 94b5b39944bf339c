#!/usr/bin/env bash
# Instructions per request through each client layer, counted by callgrind
# on the stack bench's STACK_ICOUNT mode (benches/stack.rs): deterministic
# for one binary, so the machine's load does not change the counts. Each
# configuration runs N requests on one thread; the count of a run with no
# requests (runtime and thread start-up) is subtracted. Never asserts.
#
# usage: crates/client/benches/icount.sh [BINARY]
#   BINARY: a built stack bench (default: build it with cargo bench --no-run)
#   N=20000 by default.
set -euo pipefail
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 2; }
N=${N:-20000}
B=${1:-}
if [ -z "$B" ]; then
    B=$(cargo bench -p stormbreak-client --bench stack --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
fi
count() { # count CONFIG REQUESTS
    STACK_ICOUNT=$1 STACK_ICOUNT_N=$2 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B" 2>&1 |
        grep -o 'Collected : [0-9]*' | awk '{print $3}'
}
base=$(count bare 0)
echo "| configuration | instructions per request |"
echo "|---|---:|"
for w in bare single-flight retry throttle stack stack-nothrottle tower-retry stack-fail stack-nothrottle-fail tower-retry-fail; do
    echo "| $w | $(( ($(count "$w" "$N") - base) / N )) |"
done
