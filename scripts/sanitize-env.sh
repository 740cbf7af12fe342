# Sourced: sanitize_env DIR exports the ASan/UBSan/LSan settings of the
# sanitizer build (build-san/, scripts/test.sh) with every report written to
# a file under DIR (asan.PID, ubsan.PID), where tests/conftest.py and
# scripts/san-junit.py find them and fail the test or the suite.
#   halt_on_error/abort_on_error: the first report stops the process loudly
#     (UBSan would otherwise carry on after printing).
#   detect_leaks: LSan at every normal exit; the server exits normally on
#     SIGTERM, which is how the tests stop it.
#   Suppressions: tests/sanitizer/*.supp, each entry with a reason.
#
# What runs sanitized, and what was found to work (issue 12): the server
# (paddock, paddock-full), paddock-netd (in the router netns), the
# supervisor, paddock-oci and the vm relay are ASan+UBSan builds. The jail's
# pre-exec children (clone into new user/mount/pid/net namespaces, pivot_root,
# seccomp installed just before execve) run instrumented code too: that works,
# since ASan's shadow is mapped before the clone, the filter comes after the
# child's last allocation, and nothing sets RLIMIT_AS. The agent, which runs
# under the sandbox's seccomp allowlist and memory limits, is not ASan (it is
# static, see src/agent/meson.build): UBSan in trap mode. A child that fails
# after pivot_root cannot reach log_path; ASan then says so on stderr and
# dies, which fails the test all the same.
sanitize_env() {
  local dir=$1 top
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  mkdir -p "$dir"
  export PADDOCK_SAN_LOG_DIR=$dir
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:log_path=$dir/asan"
  export LSAN_OPTIONS="suppressions=$top/tests/sanitizer/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$dir/ubsan:suppressions=$top/tests/sanitizer/ubsan.supp"
}
