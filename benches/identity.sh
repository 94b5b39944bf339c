#!/usr/bin/env bash
# Byte identity of two builds' outputs (issue 47, item 6: house work
# changes no output). Runs both binaries on the same inputs and `cmp`s
# every file they write:
#   - the default replay (`replay`) and `replay --compare`;
#   - `simulate` of every scenario in scenarios/ and benches/scenarios/
#     (`--scale 0.05` for the incident and the 100 k/s bench scenario, to
#     keep them short);
#   - `audit` of every fixture directory of the audit's tests, in text,
#     json and sarif, and its exported scenario (`--export-scenario`);
#   - a 3 × 3 sweep of scenarios/capacity-drop.toml, two seeds.
# Exit codes and stdout are compared too (progress bars are off). Prints
# one line per case and exits 1 on the first set of differences found.
#
#   benches/identity.sh BEFORE_BIN AFTER_BIN
#
# Build the two binaries first, e.g. a worktree of the older commit:
#   git worktree add ../before COMMIT
#   (cd ../before && CARGO_TARGET_DIR=../tgt-before cargo build --release -p stormbreak)
#   cargo build --release -p stormbreak
#   benches/identity.sh ../tgt-before/release/stormbreak target/release/stormbreak
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ne 2 ]]; then
  echo "usage: benches/identity.sh BEFORE_BIN AFTER_BIN" >&2
  exit 2
fi
for b in "$1" "$2"; do
  [[ -x "$b" ]] || { echo "identity.sh: $b is not an executable" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/stormbreak-identity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Both copies are named `stormbreak`: usage text prints the name it was
# run by.
mkdir -p "$tmp/bin-before" "$tmp/bin-after"
cp "$1" "$tmp/bin-before/stormbreak"
cp "$2" "$tmp/bin-after/stormbreak"
before="$tmp/bin-before/stormbreak"
after="$tmp/bin-after/stormbreak"
failed=0

# case NAME -- ARGS...: runs both binaries with ARGS, `{out}` replaced by
# each side's own output directory, and compares stdout, exit code and
# every file written.
case_() {
  local name=$1
  shift 2 # the name and `--`
  local side dir rc
  for side in before after; do
    dir="$tmp/$side/$name"
    mkdir -p "$dir"
    local bin=$before
    [[ $side == after ]] && bin=$after
    local args=()
    for a in "$@"; do args+=("${a//\{out\}/$dir/out}"); done
    set +e
    "$bin" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr"
    rc=$?
    set -e
    echo "$rc" >"$dir/rc"
    # Paths printed on stdout name each side's own directory.
    sed -i "s#$dir#OUT#g" "$dir/stdout" "$dir/stderr"
  done
  if diff -r "$tmp/before/$name" "$tmp/after/$name" >"$tmp/$name.diff" 2>&1; then
    echo "same       $name (exit $(cat "$tmp/after/$name/rc"), $(find "$tmp/after/$name" -type f | wc -l) files)"
  else
    echo "DIFFERENT  $name"
    head -20 "$tmp/$name.diff" | sed 's/^/    /'
    failed=1
  fi
}

case_ replay -- replay --quiet --out '{out}'
case_ replay-compare -- replay --compare --quiet --out '{out}'
for f in scenarios/*.toml; do
  n=$(basename "$f" .toml)
  # The incident at full scale takes minutes; the replay above runs it
  # at its default scale, and this at the same.
  scale=1
  [[ $n == github-* ]] && scale=0.05
  case_ "simulate-$n" -- simulate "$f" --scale "$scale" --quiet --out '{out}'
done
case_ simulate-metastable-100k -- simulate benches/scenarios/metastable-100k.toml --scale 0.05 --quiet --out '{out}'
for d in crates/audit/tests/fixtures/*/; do
  n=$(basename "$d")
  for fmt in text json sarif; do
    case_ "audit-$n-$fmt" -- audit "$d" --format "$fmt" --chains --fail-on info
  done
  case_ "audit-$n-export" -- audit "$d" --export-scenario '{out}.toml' --fail-on info
done
case_ sweep -- sweep scenarios/capacity-drop.toml --axis 'action.cut.factor=2..6:3' \
  --axis 'action.cut.for=4s..16s:3' --seeds 2 --jobs 2 --quiet --out '{out}'

if [[ $failed -ne 0 ]]; then
  echo "identity.sh: outputs differ" >&2
  exit 1
fi
echo "identity.sh: every output byte-identical"
