#!/usr/bin/env bash
# `npm test`: build the binary, type-check, run every bun test suite (lib/ and tests/, which includes
# the compiled binary's end-to-end tests), run the runtime protocol tests again on the oldest and newest
# supported Pythons, and end with the plain line `N passed, N failed` summed over every run.
set -uo pipefail
cd "$(dirname "$0")/.."

BUN=./node_modules/.bin/bun
PYENV_ROOT=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
PY39=$PYENV_ROOT/versions/3.9.18/bin/python3
PY313=$PYENV_ROOT/versions/3.13.0/bin/python3
passed=0
failed=0
problems=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

step() { printf '\n== %s\n' "$*"; }

# Runs one `bun test` invocation, shows its output, and adds its summary to the totals.
run_bun_test() {
  local label=$1
  shift
  step "$label"
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local p f
  p=$(grep -E '^ *[0-9]+ pass$' "$log" | tail -1 | grep -oE '[0-9]+')
  f=$(grep -E '^ *[0-9]+ fail$' "$log" | tail -1 | grep -oE '[0-9]+')
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [ "$status" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
    # bun test failed without counting a failed test (a file that does not load, a crash): count it.
    failed=$((failed + 1))
    problems+=("$label: bun test exited $status")
  fi
}

step "build dist/awrepl"
if ! npm run --silent build; then
  problems+=("build failed")
  failed=$((failed + 1))
fi

step "tsc --noEmit"
if ! ./node_modules/.bin/tsc --noEmit; then
  problems+=("tsc --noEmit failed")
  failed=$((failed + 1))
fi

# One style, the formatter's (deno fmt, configured in deno.json's "fmt": the TypeScript and JavaScript
# sources); `./node_modules/.bin/deno fmt` applies it.
step "deno fmt --check"
if ! NO_COLOR=1 ./node_modules/.bin/deno fmt --check; then
  problems+=("deno fmt --check failed: run ./node_modules/.bin/deno fmt")
  failed=$((failed + 1))
fi

# Every suite, one bun test run (the e2e tests use the binary built above; scripts/bench/ holds the
# benchmarks' smoke test).
run_bun_test "bun test lib/ tests/ scripts/bench/" "$BUN" test --timeout 60000 lib/ tests/ scripts/bench/

# The runtime protocol on the oldest and the newest supported interpreter: the two runs go at once
# (each is one interpreter's processes over pipes; together they take the time of one), each into
# its own log, shown and counted one after the other.
pylogs=()
pypids=()
for py in "$PY39" "$PY313"; do
  if [ ! -d tests/runtime ]; then
    echo "skip: tests/runtime does not exist yet"
    break
  fi
  if [ -x "$py" ]; then
    pylog=$(mktemp)
    pylogs+=("$py=$pylog")
    AWREPL_TEST_PYTHON="$py" "$BUN" test --timeout 60000 tests/runtime >"$pylog" 2>&1 &
    pypids+=("$!")
  else
    step "tests/runtime with $py"
    echo "skip: $py is not installed on this machine"
  fi
done
for i in "${!pypids[@]}"; do
  wait "${pypids[$i]}"
  status=$?
  py=${pylogs[$i]%%=*}
  pylog=${pylogs[$i]#*=}
  run_bun_test "tests/runtime with $py" bash -c 'cat "$1"; exit "$2"' _ "$pylog" "$status"
  rm -f "$pylog"
done

echo
for p in "${problems[@]}"; do echo "problem: $p"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
