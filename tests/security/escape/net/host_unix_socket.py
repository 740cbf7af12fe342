"""Connect to a pathname unix socket the test listens on in a host temp dir
(mode 0777 socket, 0755 dir) and to the host's usual daemon sockets
(/run/docker.sock, /run/dbus/system_bus_socket, /var/run/...)."""
# mode: batch
# host-check: unix-untouched
import socket
res = {}
for p in [CTX["unix_socket"], "/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
          "/run/dbus/system_bus_socket", "/run/systemd/private"]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(p)
        res[p] = "connected"
        s.close()
    except OSError as e:
        res[p] = en(e.errno)
hit = [p for p, v in res.items() if v == "connected"]
if hit:
    escaped("connected to a host unix socket", hit)
v = sorted(set(res.values()))
blocked("not visible (ENOENT)" if v == ["ENOENT"] else "/".join(v), res)
