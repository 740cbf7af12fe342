"""ptrace the agent: PTRACE_ATTACH and PTRACE_SEIZE on PID 1 and on the
agent's pid (the driver's parent; PID 1 in a pid namespace)."""
# mode: batch
res = {}
for pid in sorted({1, CTX["agent_pid"]}):
    for name, req in (("attach", 16), ("seize", 0x4206)):
        r, e = sc(NR["ptrace"], req, pid, 0, 0)
        res["%s %d" % (name, pid)] = "ok" if r == 0 else en(e)
        if r == 0:
            sc(NR["ptrace"], 17, pid, 0, 0)   # PTRACE_DETACH
if "ok" in res.values():
    escaped("traced the agent", res)
v = sorted(set(res.values()))
blocked("/".join(v), res)
