"""mknod a block device for the host's disk (its major:minor is passed in)
and /dev/mem (1:1), then open and read them."""
# mode: batch
import stat, tempfile
d = tempfile.mkdtemp(prefix="pd-mknod-", dir=os.environ.get("HOME", "/tmp"))
res = {}
for name, mode, dev in (("disk", stat.S_IFBLK, os.makedev(*CTX["host_disk_dev"])), ("mem", stat.S_IFCHR, os.makedev(1, 1)),
                        ("kmsg", stat.S_IFCHR, os.makedev(1, 11))):
    p = os.path.join(d, name)
    try:
        os.mknod(p, mode | 0o600, dev)
    except OSError as e:
        res[name] = "mknod " + en(e.errno)
        continue
    try:
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 512)
        os.close(fd)
        res[name] = "read"
    except OSError as e:
        res[name] = "made, open/read " + en(e.errno)
if "read" in res.values():
    escaped("read a device through mknod", res)
v = sorted(set(res.values()))
blocked(v[0] if len(v) == 1 else "/".join(v), res)
