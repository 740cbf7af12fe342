"""The old root after pivot_root: look for the host's root in the mount
table, try pivot_root/umount to reach it, and look for the canary through
every /proc/<pid>/root and /proc/<pid>/cwd visible."""
# mode: batch
import glob
found = []
for p in glob.glob("/proc/[0-9]*/root") + glob.glob("/proc/[0-9]*/cwd"):
    try:
        read_file(p + CTX["canary_file"])      # (stat alone is no Landlock right: the process tier shows metadata)
        found.append(p)
    except OSError:
        pass
if found:
    escaped("host canary through /proc/<pid>/root", found[:5])
mi = read_file("/proc/self/mountinfo").decode()
state = CTX["state_dir"]
# (the volumes the runner binds at /ro and /rw show their host source paths: not the old root)
hostish = [l for l in mi.splitlines() if l.split()[4] not in ("/ro", "/rw") and
           (" %s" % state in l or CTX["canary_dir"] in l or l.split()[4].startswith("/work"))]
r1 = sc(NR["pivot_root"], ".", ".")
r2 = sc(NR["umount2"], "/", 2)   # MNT_DETACH
if r1[0] == 0 or r2[0] == 0:
    escaped("pivot_root/umount worked", "pivot_root=%s umount=%s" % (en(r1[1]), en(r2[1])))
if hostish:
    escaped("host mount visible in mountinfo", hostish[:3])
blocked(label(r1[1]), "pivot_root=%s umount2=%s; %d mounts, none of the host's" % (en(r1[1]), en(r2[1]), len(mi.splitlines())))
