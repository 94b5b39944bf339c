#!/usr/bin/env bash
# Instructions per policy decision, before and after a change: builds
# benches/icount/main.rs against the policy crate at BASE and in the work
# tree, runs each decision 1 000 000 times under callgrind and prints the
# instruction totals side by side. Deterministic: the machine's load does
# not change the counts. Never asserts anything.
#
# usage: benches/icount.sh BASE [--alias]
#   --alias: BASE predates the Nanos newtype (Nanos = u64 there).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BASE=${1:?usage: benches/icount.sh BASE [--alias]}
ALIAS=${2:-}
OUT=$(mktemp -d /tmp/stormbreak-icount.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 2; }
mkdir -p "$OUT/base"
# The whole tree: the policy crate inherits its workspace's package fields.
git -C "$REPO" archive --format=tar "$BASE" | tar -x -C "$OUT/base"
pkg() { # pkg DIR POLICY_PATH RUSTFLAGS
    mkdir -p "$1/src"
    cp "$HERE/icount/main.rs" "$1/src/main.rs"
    cat >"$1/Cargo.toml" <<TOML
[package]
name = "icount"
version = "0.0.0"
edition = "2024"
[dependencies]
policy = { package = "stormbreak-policy", path = "$2" }
rand = { version = "0.9", default-features = false }
rand_pcg = "0.9"
[profile.release]
debug = 1
codegen-units = 4
lto = "thin"
[workspace]
TOML
    (cd "$1" && RUSTFLAGS="$3" cargo build --release -q)
}
flags=""
[ "$ALIAS" = "--alias" ] && flags="--cfg nanos_alias"
pkg "$OUT/old" "$OUT/base/crates/policy" "$flags"
pkg "$OUT/new" "$REPO/crates/policy" ""
echo "| decision × 10⁶ | $BASE | work tree | new/old |"
echo "|---|---:|---:|---:|"
for w in retry backoff budget ratelimit breaker limit throttle ramp; do
    for v in old new; do
        valgrind --tool=callgrind --callgrind-out-file="$OUT/$v.cg" "$OUT/$v/target/release/icount" "$w" 2>"$OUT/$v.log"
        grep -o 'Collected : [0-9]*' "$OUT/$v.log" | awk '{print $3}' >"$OUT/$v.n"
    done
    awk -v w="$w" -v o="$(cat "$OUT/old.n")" -v n="$(cat "$OUT/new.n")" \
        'BEGIN { printf "| %s | %d | %d | %.4f |\n", w, o, n, n / o }'
done
