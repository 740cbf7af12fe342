# The in-sandbox driver: reads a JSON bundle on stdin ({"ctx": {...},
# "attacks": [{"name", "src", "timeout"}]}), runs each attack as its own
# process (python3 -c SRC CTX) one after another, and prints one JSON line per
# attack: the attack's own line plus its exit status.  An attack the kernel
# killed (SIGSYS from seccomp, SIGKILL from the OOM killer) prints nothing;
# the driver reports the signal and the runner interprets it.
# The attacks inherit the driver's inheritable descriptors (close_fds=False),
# so a descriptor leaked into the sandbox reaches them as it reached us.
import json, os, signal, subprocess, sys, time

# kill(-1, SIGTERM) from an attack must not end the driver (proc/kill_all)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
bundle = json.loads(sys.stdin.read())
ctx = bundle["ctx"]
ctx["agent_pid"] = os.getppid()
ctx["driver_pid"] = os.getpid()
print(json.dumps({"driver": "start", "uid": os.getuid(), "ppid": os.getppid()}), flush=True)
for a in bundle["attacks"]:
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-c", a["src"], json.dumps(ctx)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=False,
                         start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=a.get("timeout", 30))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
    res = None
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        try:
            res = json.loads(line)
            if isinstance(res, dict) and "outcome" in res:
                break
            res = None
        except ValueError:
            continue
    rec = {"attack": a["name"], "rc": p.returncode, "secs": round(time.time() - t0, 2),
           "timed_out": timed_out, "stderr": err.decode("utf-8", "replace")[-400:]}
    if res is None:
        rec.update(outcome="error", how="no result line", detail="")
        if p.returncode is not None and p.returncode < 0:
            rec.update(outcome="killed", how="killed by %s" % signal.Signals(-p.returncode).name)
    else:
        rec.update(res)
    print(json.dumps(rec), flush=True)
print(json.dumps({"driver": "end"}), flush=True)
