"""Give a program in a read-write volume file capabilities as root inside:
a v2 security.capability (it names no root id: the host would honour it)
and a v3 one naming root inside. The runner reads them back from the host:
each must be v3 with a root id that is not host root's."""
# mode: batch
# host-check: volume-no-host-root:cap
import shutil
import struct
d = CTX.get("rw_volume")
if not d:
    blocked("no volumes on this tier")
CAP_SETUID = 1 << 7
blobs = {"v2": struct.pack("<5I", 0x02000000 | 1, CAP_SETUID, 0, 0, 0),
         "v3": struct.pack("<6I", 0x03000000 | 1, CAP_SETUID, 0, 0, 0, 0)}
res = {}
for name, blob in blobs.items():
    p = os.path.join(d, "%s-cap-%s" % (CTX["marker"], name))
    try:
        shutil.copy("/bin/true", p)
        os.setxattr(p, "security.capability", blob)
        res[name] = "set"
    except OSError as e:
        res[name] = en(e.errno)
if "set" in res.values():
    blocked("set inside, root id of the sandbox's range on the host", res)
blocked("/".join(sorted(set(res.values()))), res)
