#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test suite, printing each suite's
# duration and, last, "N passed, N failed, N skipped". Suites start what
# they need and clean up after themselves, even when they fail; a final
# `paddock gc` on the test state dirs makes sure nothing is left behind.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD

./scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

export PADDOCK_BIN="$top/build/src/paddock"
export PADDOCK_AGENT="$top/build/src/agent/paddock-agent"
export PADDOCK_TEST_STATE="${PADDOCK_TEST_STATE:-/tmp/paddock-test-state}"
results=$(mktemp -d /tmp/paddock-results.XXXXXX)
cleanup() {
  "$PADDOCK_BIN" gc --state-dir "$PADDOCK_TEST_STATE" >/dev/null 2>&1 || true
  rm -rf "$results"
}
trap cleanup EXIT

# suite NAME BUDGET_SECONDS COMMAND...: run with a time budget; the command
# writes a JUnit XML file to $results/NAME.xml (pytest) or TAP via meson.
suite() {
  local name=$1 budget=$2; shift 2
  local t0=$SECONDS
  echo "=== suite $name (budget ${budget}s)"
  timeout --kill-after=10 "$budget" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "suite $name: over its ${budget}s budget, stopped"
  echo "=== suite $name: $((SECONDS - t0))s (exit $rc)"
  echo "$rc" >"$results/$name.rc"
}

# The sanitizer build (ASan+UBSan+LSan; the static agent UBSan only, see
# src/agent/meson.build): the unit, server and network suites run on it
# instead of on build/. Reports fail the test that caused them
# (tests/conftest.py), or the suite (scripts/san-junit.py).
t0=$SECONDS
[ -f build-san/build.ninja ] || meson setup build-san --buildtype=debugoptimized \
  -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C build-san >/dev/null || echo "build-san: build failed"
echo "=== build-san (sanitizers) built in $((SECONDS - t0))s"
t0=$SECONDS
scripts/fuzz.sh build || echo "build-fuzz: build failed"
echo "=== build-fuzz (clang, libFuzzer targets) built in $((SECONDS - t0))s"
export PADDOCK_SAN_DIR="$results/san"
sanitized=" unit server network "

py=/usr/bin/python3
suite unit 300 scripts/san-run.sh unit meson test -C build-san --suite unit --print-errorlogs \
  --logbase unit --num-processes 2
cp build-san/meson-logs/unit.junit.xml "$results/unit.xml" 2>/dev/null || true
"$py" scripts/san-junit.py "$results/unit.xml" "$results/san/unit"
for s in arch integration security server sdk network oci microvm; do
  [ -d "tests/$s" ] || continue
  san=()
  [[ $sanitized == *" $s "* ]] && san=(scripts/san-run.sh "$s")
  budget=600
  # network: test_uplink runs once per user-mode uplink (pasta, slirp4netns,
  # relay), the egress suites on the netns uplink and the default (relay),
  # 100 sandboxes at once (slirp4netns and relay) included, under the
  # sanitizers: ~10-13 min here
  [ "$s" = network ] && budget=1100
  suite "$s" "$budget" "${san[@]}" "$py" -m pytest -q -rs -p no:cacheprovider "tests/$s" \
    --junitxml="$results/$s.xml"
  [ ${#san[@]} -gt 0 ] && "$py" scripts/san-junit.py "$results/$s.xml" "$results/san/$s"
done
# The gvisor tier (runsc sandboxes, checkpoints and the escape attacks in one:
# ~3.5 min on a quiet 2-core host, ~10 min on a loaded one; skipped only when
# runsc cannot run a sandbox on the host).
suite gvisor 720 "$py" -m pytest -q -rs -p no:cacheprovider tests/gvisor --junitxml="$results/gvisor.xml"
suite scripts 60 "$py" -m pytest -q -rs -p no:cacheprovider tests/scripts --junitxml="$results/scripts.xml"
# The web console (tests/console): its HTTP rules, then one headless
# chromium through the pages (sign-in, list, create, run, terminal, kill).
suite console 300 "$py" -m pytest -q -rs -p no:cacheprovider tests/console --junitxml="$results/console.xml"
# architecture rules (tests/arch: the include graph), seconds
suite arch 60 "$py" -m pytest -q -rs -p no:cacheprovider tests/arch --junitxml="$results/arch.xml"

# libFuzzer targets (tests/fuzz/, built above): 120 s of fuzzing in all.
suite fuzz 240 scripts/fuzz-ci.sh "$results/fuzz.xml" 120

# Node 20 and the official E2B SDKs (from the npm registry): the templates
# suite drives the SDK's Template.build, the e2b suite the rest of the SDKs.
node_ok=0
./scripts/setup-node.sh && node_ok=1

# Templates from images and recipes: a local registry, crafted images,
# builds and every tier (a few minutes; the slow cases are in bench/).
suite templates 420 "$py" -m pytest -q -rs -p no:cacheprovider tests/templates \
  --junitxml="$results/templates.xml"

# The official E2B SDKs against paddock serve.
if [ $node_ok = 1 ]; then
  PADDOCK_JUNIT="$results/e2b.xml" suite e2b 600 tests/compat/e2b/run.sh
else
  echo "setup-node failed: the E2B suite cannot run"
  echo 1 >"$results/e2b.rc"
fi

"$py" scripts/summarize-junit.py "$results"
