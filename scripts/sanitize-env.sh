# Sourced: sanitize_env DIR exports the ASan/UBSan/LSan settings of the
# sanitizer build (build-san/, scripts/test.sh) with every report written to
# a file under DIR (asan.PID, ubsan.PID), where tests/conftest.py and
# scripts/san-junit.py find them and fail the test or the suite.
#   halt_on_error/abort_on_error: the first report stops the process loudly
#     (UBSan would otherwise carry on after printing).
#   detect_leaks: LSan at every normal exit; the server exits normally on
#     SIGTERM, which is how the tests stop it.
#   Suppressions: tests/sanitizer/*.supp, each entry with a reason.
sanitize_env() {
  local dir=$1 top
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  mkdir -p "$dir"
  export PADDOCK_SAN_LOG_DIR=$dir
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:log_path=$dir/asan"
  export LSAN_OPTIONS="suppressions=$top/tests/sanitizer/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$dir/ubsan:suppressions=$top/tests/sanitizer/ubsan.supp"
}
