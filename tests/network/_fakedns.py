"""A small authoritative DNS server for the fake internet (tests only).

    python3 _fakedns.py --listen 198.51.100.1 --zone zone.json --log queries.log

Answers A, AAAA and CNAME from a JSON zone {"name": [[type, value, ttl], ...]}
(a ["DELAY", seconds, 0] record makes the UDP answer for that name late)
over UDP and TCP; NXDOMAIN for names it does not know; every question it
receives is appended to the log file ("qtype name" per line), so a test can
prove that a query never reached the upstream. DNS wire format by hand
(dnslib is not in Debian); only what the tests need.
"""
import argparse
import ipaddress
import json
import os
import socket
import struct
import threading

TYPES = {"A": 1, "CNAME": 5, "AAAA": 28}


def read_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n & 0xC0:
            raise ValueError("compressed name in a query")
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def answer(zone, msg, log):
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    name, off = read_name(msg, 12)
    qtype, qclass = struct.unpack("!HH", msg[off:off + 4])
    question = msg[12:off + 4]
    with open(log, "a") as f:
        f.write("%d %s\n" % (qtype, name))
    rrs = []
    cur = name
    known = cur in zone
    for _ in range(8):
        recs = zone.get(cur, [])
        cname = [r for r in recs if r[0] == "CNAME"]
        if cname and qtype != 5:
            rrs.append((cur, 5, cname[0][2], wire_name(cname[0][1])))
            cur = cname[0][1].rstrip(".").lower()
            continue
        for typ, val, ttl in recs:
            if TYPES.get(typ) != qtype:
                continue
            if typ == "A":
                rd = ipaddress.IPv4Address(val).packed
            elif typ == "AAAA":
                rd = ipaddress.IPv6Address(val).packed
            else:
                rd = wire_name(val)
            rrs.append((cur, TYPES[typ], ttl, rd))
        break
    rcode = 0 if known else 3
    body = b""
    for owner, typ, ttl, rd in rrs:
        body += wire_name(owner) + struct.pack("!HHIH", typ, 1, ttl, len(rd)) + rd
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(rrs), 0, 0)
    return hdr + question + body


def delay_of(zone, msg):
    try:
        name, _ = read_name(msg, 12)
    except Exception:
        return 0
    return sum(r[1] for r in zone.get(name, []) if r[0] == "DELAY")


def serve_udp(sock, zone, log):
    while True:
        msg, peer = sock.recvfrom(4096)
        try:
            out = answer(zone, msg, log)
            d = delay_of(zone, msg)
            if d:
                threading.Timer(d, sock.sendto, (out, peer)).start()
            else:
                sock.sendto(out, peer)
        except Exception:
            pass


def serve_tcp(sock, zone, log):
    while True:
        conn, _ = sock.accept()
        try:
            n = struct.unpack("!H", conn.recv(2))[0]
            msg = b""
            while len(msg) < n:
                chunk = conn.recv(n - len(msg))
                if not chunk:
                    break
                msg += chunk
            out = answer(zone, msg, log)
            conn.sendall(struct.pack("!H", len(out)) + out)
        except Exception:
            pass
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--zone", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", help="file created once listening")
    a = ap.parse_args()
    with open(a.zone) as f:
        zone = {k.rstrip(".").lower(): v for k, v in json.load(f).items()}
    fam = socket.AF_INET6 if ":" in a.listen else socket.AF_INET
    u = socket.socket(fam, socket.SOCK_DGRAM)
    u.bind((a.listen, a.port))
    t = socket.socket(fam, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((a.listen, a.port))
    t.listen(16)
    threading.Thread(target=serve_tcp, args=(t, zone, a.log), daemon=True).start()
    if a.ready:
        open(a.ready, "w").close()
    serve_udp(u, zone, a.log)


if __name__ == "__main__":
    main()
