"""Host-wide state: acct(NULL), swapoff of a missing file, syslog read,
sethostname (the runner checks the host's name), quotactl."""
# mode: batch
# host-check: proc-sys-unchanged
buf = ctypes.create_string_buffer(64)
try_syscalls([("acct", NR["acct"], 0),
              ("swapoff", NR["swapoff"], "/pd-no-such-swap"),
              ("syslog-read-all", NR["syslog"], 3, buf, 64),
              ("sethostname", NR["sethostname"], "pd-esc", 6),
              ("quotactl", NR["quotactl"], 0x800007, "/", 0, 0)])
