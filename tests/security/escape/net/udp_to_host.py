"""Send a UDP datagram to a socket the test bound on the host's 127.0.0.1;
the runner checks nothing arrived."""
# mode: batch
# host-check: udp-untouched
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"pd-esc", ("127.0.0.1", CTX["udp_port"]))
    blocked("sent into its own netns", "sendto ok; the runner checks the host side")
except OSError as e:
    blocked("EPERM (paddock seccomp)" if e.errno == errno.EPERM else en(e.errno), "")
