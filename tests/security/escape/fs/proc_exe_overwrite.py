"""CVE-2019-5736 style: open /proc/1/exe and /proc/<agent>/exe (the agent,
a host binary) and /proc/self/exe for writing, to overwrite a host binary."""
# mode: batch
res = {}
for p in sorted({"/proc/1/exe", "/proc/%d/exe" % CTX["agent_pid"], "/proc/self/exe"}):
    try:
        fd = os.open(p, os.O_WRONLY)
        os.close(fd)
        res[p] = "opened"
    except OSError as e:
        res[p] = en(e.errno)
if "opened" in res.values():
    escaped("opened a running binary for writing", res)
blocked("/".join(sorted(set(res.values()))), res)
