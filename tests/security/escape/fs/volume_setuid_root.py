"""Plant a setuid-root program on the host through a read-write volume, as
root inside: copy a binary, chown it to root, chmod 6755; and create a file
with mode 6755 directly. Inside that works (the sandbox's root owns it);
whether it is setuid-root on the host the runner decides, looking at the
volume from the host: nothing the sandbox made may be host uid or gid 0."""
# mode: batch
# host-check: volume-no-host-root:suid
import shutil
d = CTX.get("rw_volume")
if not d:
    blocked("no volumes on this tier")
base = os.path.join(d, CTX["marker"] + "-suid")
res = {}
try:
    shutil.copy("/bin/true", base + "-copy")
    os.chown(base + "-copy", 0, 0)
    os.chmod(base + "-copy", 0o6755)
    res["copy"] = "made"
except OSError as e:
    res["copy"] = en(e.errno)
try:
    os.close(os.open(base + "-creat", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o6755))
    res["creat"] = "made"
except OSError as e:
    res["creat"] = en(e.errno)
if "made" in res.values():
    blocked("made inside, owned by the sandbox's range on the host", res)
blocked("/".join(sorted(set(res.values()))), res)
