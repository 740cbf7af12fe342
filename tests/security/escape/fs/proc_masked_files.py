"""Kernel memory and secrets under /proc: /proc/kcore, kallsyms addresses,
/proc/keys, timer_list, sched_debug, /proc/<host pid>/environ."""
# mode: batch
res = {}
leaks = []
for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms"):
    try:
        data = read_file(p, 65536)
        res[p] = "%d bytes" % len(data)
        if p == "/proc/kallsyms" and any(l.split()[:1] and int(l.split()[0], 16) for l in data.decode().splitlines()[:50]):
            leaks.append("kallsyms addresses")
        elif p == "/proc/kcore" and data:
            leaks.append("kcore")
        elif p == "/proc/keys" and data.strip():
            leaks.append("keys")
    except OSError as e:
        res[p] = en(e.errno)
for pid in CTX["host_pids"].values():
    try:
        read_file("/proc/%d/environ" % pid, 100)
        leaks.append("environ of host pid %d" % pid)
    except OSError as e:
        res["environ"] = en(e.errno)
if leaks:
    escaped(", ".join(leaks), res)
blocked("masked or unreadable", res)
