"""Connect to an abstract unix socket the test listens on (abstract sockets
belong to the network namespace; on the host's, Landlock scoping applies)."""
# mode: batch
# host-check: abstract-untouched
import socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect("\0" + CTX["abstract_name"])
    escaped("connected to the host's abstract socket", CTX["abstract_name"])
except OSError as e:
    if e.errno == errno.ECONNREFUSED:
        blocked("not visible (ECONNREFUSED: own netns)", "")
    blocked(en(e.errno), "")
