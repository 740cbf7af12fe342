"""Writes under /proc/sys that would change the host: kernel.core_pattern
(a pipe to a program runs as host root), kernel.hostname, vm.drop_caches,
kernel.modprobe. The runner checks the host's values afterwards."""
# mode: batch
# host-check: proc-sys-unchanged
res = {}
for p, v in (("/proc/sys/kernel/core_pattern", "|/bin/true pd-esc"), ("/proc/sys/kernel/hostname", "pd-esc"),
             ("/proc/sys/vm/drop_caches", "1"), ("/proc/sys/kernel/modprobe", "/bin/true")):
    try:
        with open(p, "w") as f:
            f.write(v)
        res[p] = "written"
    except OSError as e:
        res[p] = en(e.errno)
written = [p for p, v in res.items() if v == "written"]
if written == ["/proc/sys/kernel/hostname"]:
    blocked("contained", res)        # its own uts namespace; the runner checks the host's
if written:
    escaped("wrote /proc/sys", res)
v = sorted(set(res.values()))
blocked("/".join(v), res)
