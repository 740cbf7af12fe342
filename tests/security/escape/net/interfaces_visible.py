"""The host's network interfaces and routes (/proc/net/dev, /proc/net/route,
netlink RTM_GETLINK through getifaddrs)."""
# mode: batch
import socket
nifs = interfaces()
try:
    names = sorted(l.split(":")[0].strip() for l in read_file("/proc/net/dev").decode().splitlines()[2:])
except OSError as e:
    names = [en(e.errno)]
if set(nifs) - {"lo"}:
    escaped("host interfaces visible", "%s" % nifs)
blocked("not visible (own netns: lo only)", "interfaces (netlink) %s, /proc/net/dev %s" % (nifs, names))
