"""/proc/self/fd magic links: open a read-only file, then reopen it through
/proc/self/fd/N for writing (upgrading the access mode), and follow magic
links of other processes (/proc/1/fd/*, /proc/<agent>/fd/*)."""
# mode: batch
res = {}
target = CTX.get("ro_volume_file") or "/etc/passwd"    # a 0666 file on a read-only bind, else the host's
try:
    fd = os.open(target, os.O_RDONLY)
    try:
        w = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)
        os.close(w)
        res["reopen-rw"] = "opened"
    except OSError as e:
        res["reopen-rw"] = en(e.errno)
except OSError as e:
    res["open"] = en(e.errno)
agent_fds = []
for pid in sorted({1, CTX["agent_pid"]}):
    for n in range(0, 64):
        try:
            f = os.open("/proc/%d/fd/%d" % (pid, n), os.O_RDONLY)
            os.close(f)
            agent_fds.append("%d/%d" % (pid, n))
        except OSError as e:
            res.setdefault("pid%d-fd" % pid, set()).add(en(e.errno))
res = {k: (sorted(v) if isinstance(v, set) else v) for k, v in res.items()}
if res.get("reopen-rw") == "opened":
    escaped("reopened %s for writing" % target, res)
if agent_fds:
    escaped("opened another process's fds", agent_fds[:8])
blocked(res.get("reopen-rw", "?") , res)
