#!/usr/bin/env bash
# scripts/san-run.sh NAME COMMAND...: run COMMAND (a test suite) against the
# sanitizer build, build-san/ (ASan+UBSan; scripts/test.sh builds it), with
# every sanitizer report written under $PADDOCK_SAN_DIR/NAME (default
# /tmp/paddock-san/NAME), where tests/conftest.py and scripts/san-junit.py
# turn them into failed tests.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
name=$1; shift
# shellcheck source=sanitize-env.sh
source "$top/scripts/sanitize-env.sh"
sanitize_env "${PADDOCK_SAN_DIR:-/tmp/paddock-san}/$name"
export PADDOCK_BIN="$top/build-san/src/paddock"
export PADDOCK_AGENT="$top/build-san/src/agent/paddock-agent"
exec "$@"
