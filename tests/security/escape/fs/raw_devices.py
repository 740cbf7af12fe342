"""Open raw devices by their usual paths: the host's disk, /dev/mem,
/dev/kmem, /dev/port, /dev/kmsg, /dev/kvm, /dev/fuse, /dev/net/tun."""
# mode: batch
res = {}
for p in sorted({"/dev/" + CTX["host_disk_name"], "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmem", "/dev/port",
                 "/dev/kmsg", "/dev/kvm", "/dev/fuse", "/dev/net/tun"}):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.read(fd, 64)
            res[p] = "read"
        except OSError as e:
            res[p] = "opened, read " + en(e.errno)
        os.close(fd)
    except OSError as e:
        res[p] = en(e.errno)
opened = {p: v for p, v in res.items() if v == "read" or v.startswith("opened")}
# /dev/kmsg of the host: readable kernel log; /dev/fuse and tun opened are not escapes by themselves
bad = {p: v for p, v in opened.items() if p not in ("/dev/fuse",)}
if bad:
    escaped("opened a raw device", bad)
v = sorted(set(res.values()))
blocked("not visible (ENOENT)" if v == ["ENOENT"] else "/".join(v), res)
