"""/proc/1/root: PID 1's root directory (the agent's in a pid namespace, the
host's init otherwise): list it, read /etc/shadow through it, find the host
canary through it."""
# mode: batch
res = {}
try:
    names = os.listdir("/proc/1/root")
    res["list"] = "%d entries" % len(names)
except OSError as e:
    res["list"] = en(e.errno)
try:
    read_file("/proc/1/root" + CTX["canary_file"])
    escaped("host canary through /proc/1/root", CTX["canary_file"])
except OSError as e:
    res["canary"] = en(e.errno)
import hashlib
try:
    lines = read_file("/proc/1/root/etc/shadow").decode("utf-8", "replace").splitlines()
    if any(hashlib.sha256(l.encode()).hexdigest() in CTX["host_shadow_lines"] for l in lines):
        escaped("host /etc/shadow through /proc/1/root", "")
    res["shadow"] = "sandbox's own"
except OSError as e:
    res["shadow"] = en(e.errno)
if res["list"].endswith("entries"):
    blocked("contained", res)
blocked(res["list"], res)
