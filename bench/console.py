"""The web console's figures (issue 18): keystroke-to-echo latency through
the terminal WebSocket against a local pty, the time from sign-in to the
list of N sandboxes with their metrics (what the list page fetches), and the
bytes of JS/CSS/HTML the console ships.

    sudo /usr/bin/python3 bench/console.py [--keys 200] [--sandboxes 100]

Uses tests/pdtest (a paddock serve of its own, cleaned up at the end) and
the WebSocket client of tests/console/test_console_http.py. Standard
library only. The listed sandboxes are container sandboxes of 64 MB.
"""
import argparse
import gzip
import os
import pty
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "console"))

from pdtest.server import Server  # noqa: E402
from test_console_http import WS, console_headers, sign_in, ws_headers  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def ws_echo(srv, keys):
    sid = srv.create()["id"]
    try:
        _, p = srv.json("POST", "/api/v1/sandboxes/%s/processes" % sid,
                        {"cmd": ["/bin/bash", "--norc", "-i"], "pty": True, "stdin": True}, expect=201)
        ws = WS(srv, "/api/v1/sandboxes/%s/processes/%d/pty" % (sid, p["pid"]),
                dict(ws_headers(), Authorization="Bearer " + srv.key))
        assert ws.status == 101
        ws.send(b"echo ready\n")
        ws.read_until(b"ready\r\n")
        out = []
        for i in range(keys):
            ch = b"abcdefghij"[i % 10:i % 10 + 1]
            t0 = time.perf_counter()
            ws.send(ch)
            ws.read_until(ch)
            out.append((time.perf_counter() - t0) * 1000)
        ws.send(b"\x15exit\n")
        ws.close()
        return out
    finally:
        srv.delete(sid)


def local_echo(keys, argv):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    try:
        os.write(fd, b"echo ready\n")
        buf = b""
        while b"ready\r\n" not in buf:
            buf += os.read(fd, 4096)
        out = []
        for i in range(keys):
            ch = b"abcdefghij"[i % 10:i % 10 + 1]
            t0 = time.perf_counter()
            os.write(fd, ch)
            got = b""
            while ch not in got:
                got += os.read(fd, 4096)
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def list_time(srv, n):
    ids = []
    with ThreadPoolExecutor(4) as ex:
        ids = list(ex.map(lambda _: srv.create({"timeout": 900, "memory_mb": 64})["id"], range(n)))
    try:
        tok = sign_in(srv)
        h = console_headers(srv, tok)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            st, _, data = srv.request("POST", "/api/v1/console/session", {"key": srv.key}, key=None,
                                      headers=console_headers(srv))
            assert st == 200
            st, _, data = srv.request("GET", "/api/v1/sandboxes?limit=1000", key=None, headers=h)
            assert st == 200
            # the page fetches every sandbox's metrics at once (browsers: 6
            # connections per host)
            with ThreadPoolExecutor(6) as ex:
                sts = list(ex.map(lambda i: srv.request("GET", "/api/v1/sandboxes/%s/metrics" % i, key=None,
                                                        headers=h)[0], ids))
            assert all(s == 200 for s in sts), sts
            times.append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(srv.delete, ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--sandboxes", type=int, default=100)
    a = ap.parse_args()
    d = os.path.join(REPO, "src", "console")
    print("bytes shipped (raw / gzip -9):")
    for f in ("index.html", "app.js", "app.css", "node_modules/@xterm/xterm/lib/xterm.js",
              "node_modules/@xterm/xterm/css/xterm.css"):
        b = open(os.path.join(d, f), "rb").read()
        print("  %-42s %7d / %6d" % (f, len(b), len(gzip.compress(b, 9))))
    srv = Server(None, "--pool", "0", "--max-per-key", str(max(100, a.sandboxes + 10)),
                 "--max-sandboxes", str(max(1000, a.sandboxes + 10))).start()
    try:
        w = ws_echo(srv, a.keys)
        loc = local_echo(a.keys, ["/bin/bash", "--norc", "-i"])
        scr = local_echo(a.keys, ["script", "-qfc", "/bin/bash --norc -i", "/dev/null"])
        print("keystroke to echo, ms (n=%d): median p90 p99" % a.keys)
        print("  websocket     %.3f %.3f %.3f" % (statistics.median(w), pct(w, .9), pct(w, .99)))
        print("  local script  %.3f %.3f %.3f" % (statistics.median(scr), pct(scr, .9), pct(scr, .99)))
        print("  local pty     %.3f %.3f %.3f" % (statistics.median(loc), pct(loc, .9), pct(loc, .99)))
        print("  websocket / script (medians): %.1f" % (statistics.median(w) / statistics.median(scr)))
        if a.sandboxes:
            t = list_time(srv, a.sandboxes)
            print("sign-in + list + metrics of %d sandboxes, ms (5 rounds): median %.0f, max %.0f" % (
                a.sandboxes, statistics.median(t), max(t)))
    finally:
        srv.finish()


if __name__ == "__main__":
    main()
