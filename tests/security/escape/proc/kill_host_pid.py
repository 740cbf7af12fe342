"""Signal processes outside the sandbox by host pid: a victim the test runs
under the sandbox's own host uid (so only the sandbox boundary, not the uid,
can stop it), the test itself (signal 0) and paddock run. The runner checks
the victim is alive afterwards."""
# mode: batch
# host-check: victim-alive
res = {}
for name, pid in sorted(CTX["host_pids"].items()):
    if pid in (os.getpid(), CTX["driver_pid"], CTX["agent_pid"]):
        continue
    sig = signal.SIGKILL if name == "victim" else 0
    try:
        os.kill(pid, sig)
        res[name] = "delivered"
    except OSError as e:
        res[name] = en(e.errno)
if res.get("victim") == "delivered":
    escaped("killed a host process", res)
if "delivered" in res.values():
    escaped("signalled a host process", res)
v = sorted(set(res.values()))
blocked("not visible (ESRCH)" if v == ["ESRCH"] else "/".join(v), res)
