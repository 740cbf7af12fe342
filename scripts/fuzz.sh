#!/usr/bin/env bash
# Run one libFuzzer target (tests/fuzz/fuzz-TARGET.c) for SECONDS:
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer options...]
#   scripts/fuzz.sh list
#   scripts/fuzz.sh build           (every target; scripts/test.sh does this)
# Builds build-fuzz/ first if needed (clang, ASan+UBSan, -Dfuzz=true). New
# inputs go to build-fuzz/corpus/TARGET (not in git; copy the good ones into
# tests/fuzz/corpus/TARGET by hand), crashes to build-fuzz/artifacts/TARGET/.
# Reproduce a crash: build-fuzz/tests/fuzz/fuzz-TARGET FILE
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

# every target has a seed corpus dir (fuzz-http.c builds four of them)
targets() { for d in tests/fuzz/corpus/*/; do d=${d%/}; echo "${d##*/}"; done; }

# fuzz_build [TARGET...]: configure build-fuzz/ once, build the targets.
fuzz_build() {
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz --buildtype=debugoptimized -Dfuzz=true \
      -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  fi
  local t list=()
  for t in "$@"; do list+=("tests/fuzz/fuzz-$t"); done
  ninja -C build-fuzz "${list[@]}" >/dev/null
}

# The runtime settings of every fuzz run: UBSan halts (the code is built
# recoverable so that the known-bug suppressions work), known bugs that
# another branch is fixing are suppressed, and LSan runs after every input.
fuzz_env() {
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$top/tests/fuzz/ubsan.supp"
  export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1"
  export LSAN_OPTIONS="suppressions=$top/tests/fuzz/lsan.supp:print_suppressions=0"
}

# fuzz_run TARGET SECONDS [options...]: the fuzzer's exit status.
# The HTTP family (fuzz-http.c) runs the server's and the fake agent's
# threads beside the input: libFuzzer's leak check after each input races
# with them (it reported the fake agent's live buffers and OpenSSL's
# per-thread state as leaks), so it is off there by default (pass
# -detect_leaks=1 to have it); the server's leaks are LSan's at its exit in
# the sanitizer build's server suite.
fuzz_run() {
  local t=$1 secs=$2 extra=(); shift 2
  case $t in http-*|e2b-connect|multipart) extra=(-detect_leaks=0) ;; esac
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
  fuzz_env
  "build-fuzz/tests/fuzz/fuzz-$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t/" "${extra[@]}" "$@" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t"
}

[ "${BASH_SOURCE[0]}" != "$0" ] && return 0     # sourced by fuzz-ci.sh

case "${1:-}" in
  list) targets ;;
  build) mapfile -t all < <(targets); fuzz_build "${all[@]}" ;;
  ""|-h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  *)
    t=$1 secs=${2:?usage: scripts/fuzz.sh TARGET SECONDS}; shift 2
    [ -d "tests/fuzz/corpus/$t" ] || { echo "no fuzz target '$t' (scripts/fuzz.sh list)" >&2; exit 2; }
    fuzz_build "$t"
    fuzz_run "$t" "$secs" "$@"
    ;;
esac
