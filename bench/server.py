#!/usr/bin/python3
"""Server benchmark: paddock's HTTP API on loopback.

  a. create -> first output: POST /sandboxes, then POST /sandboxes/{id}/exec
     {"cmd": "echo hi"} until the answer holding "hi" arrives (DELETE timed
     apart), on a server with a warm pool (--pool 4, refilled between
     iterations) and on one without (--pool 0), beside `paddock run -- echo hi`,
     bwrap and a plain exec of `echo hi`, round-robin.
  b. exec round trip in a running sandbox (POST /exec {"cmd": ["/bin/true"]})
     against subprocess.run(["/bin/true"]) from the same Python process.
  c. throughput: a process's output stream (GET .../output?follow=1 of
     `head -c 1G /dev/zero`), file upload (PUT .../files) and download (GET),
     beside reading the same bytes on the host (a pipe, a tmpfs file).

Prints tables and writes the Markdown report bench/reports/server.md.

    sudo /usr/bin/python3 bench/server.py [--rounds N] [--exec-rounds N] ...

Standard library only (http.client with keep-alive). Exit status is non-zero
only if paddock fails. Everything is cleaned up on exit, also on failure:
the servers get SIGTERM, `paddock gc --state-dir` runs on every state
directory, and the temp directories are removed.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)
DEFAULT_REPORT = os.path.join(ROOT, "bench", "reports", "server.md")
MB = 1e6
MiB = 1 << 20


# --------------------------------------------------------------------------
# Host facts (the same as bench/start-time.py reports).

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "%s (%d online CPUs)" % (line.split(":", 1)[1].strip(), os.cpu_count())
    except OSError:
        pass
    return "%s (%d online CPUs)" % (platform.processor() or "unknown", os.cpu_count())


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def version_of(argv):
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "not available (%s)" % e
    text = r.stdout.decode(errors="replace").strip()
    first = text.splitlines()[0] if text else ""
    return first if r.returncode == 0 else "exit %d: %s" % (r.returncode, first)


def paddock_instance(state):
    """The instance name paddock derives from a state directory
    (src/lib/state.c: FNV-1a 64 of its realpath, folded to 32 bits)."""
    h = 0xcbf29ce484222325
    for b in os.path.realpath(state).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%08x" % ((h ^ (h >> 32)) & 0xFFFFFFFF)


def paddock_cgroup_dirs(instance):
    """paddock-<instance> cgroup directories of one instance (ours only)."""
    found = set()
    base = "/sys/fs/cgroup"
    try:
        subs = [os.path.join(base, d) for d in os.listdir(base)]
    except OSError:
        return found
    for d in [base] + subs:
        try:
            for name in os.listdir(d):
                if name == "paddock-" + instance:
                    found.add(os.path.join(d, name))
        except OSError:
            pass
    return found


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def machine_ctx(cmdline):
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "kernel": os.uname().release, "cpu": cpu_model(), "load_before": loadavg(),
            "cmdline": cmdline, "notes": []}


# --------------------------------------------------------------------------
# Statistics.

def pct(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    v = sorted(values)
    k = max(1, math.ceil(q / 100.0 * len(v)))
    return v[min(k, len(v)) - 1]


def ms(ns):
    return ns / 1e6


def fmt_ms(x):
    return "%.2f" % x if x >= 0.995 else "%.3f" % x


# --------------------------------------------------------------------------
# A paddock server of our own, and a keep-alive client.

class Client:
    """One keep-alive HTTP/1.1 connection (http.client; Python >= 3.11 sets
    TCP_NODELAY and sends small bodies with the headers in one write)."""

    def __init__(self, port, key, timeout=120):
        self.port = port
        self.key = key
        self.timeout = timeout
        self.c = None

    def _conn(self):
        if self.c is None:
            self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout,
                                                blocksize=MiB)
        return self.c

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None

    def headers(self, extra=None):
        h = {"Authorization": "Bearer " + self.key}
        if extra:
            h.update(extra)
        return h

    def start(self, method, path, body=None, headers=None):
        """Send a request and return the HTTPResponse (headers read, body not)."""
        for attempt in (0, 1):
            c = self._conn()
            try:
                c.request(method, path, body=body, headers=self.headers(headers))
                return c.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady):
                # the server closed an idle keep-alive connection: reconnect once
                self.close()
                if attempt or (body is not None and hasattr(body, "read")):
                    raise

    def call(self, method, path, obj=None, raw=None, headers=None):
        """-> (status, parsed JSON or bytes)."""
        body = raw
        h = dict(headers or {})
        if obj is not None:
            body = json.dumps(obj).encode()
            h["Content-Type"] = "application/json"
        r = self.start(method, path, body=body, headers=h)
        data = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.close()
        ctype = r.getheader("Content-Type", "")
        if data and "json" in ctype:
            try:
                return r.status, json.loads(data)
            except ValueError:
                pass
        return r.status, data


def http_error(status, body):
    if isinstance(body, dict) and "error" in body:
        return "HTTP %d %s" % (status, body["error"].get("message", body["error"]))
    if isinstance(body, bytes):
        body = body[:200].decode(errors="replace")
    return "HTTP %d %s" % (status, str(body)[:200])


class Server:
    """`paddock serve` on 127.0.0.1:<free port> with its own state dir."""

    def __init__(self, paddock, agent, work, name, args):
        self.paddock = paddock
        self.agent = agent
        self.name = name
        self.state = os.path.join(work, name + "-state")
        self.log = os.path.join(work, name + "-serve.log")
        self.args = list(args)
        self.port = None
        self.key = None
        self.p = None
        self.argv = None

    def display(self):
        return "PADDOCK_AGENT=%s %s" % (shlex.quote(os.path.relpath(self.agent, ROOT)),
                                        shlex.join([os.path.relpath(self.paddock, ROOT)] + self.argv[1:])
                                        .replace(self.state, "<state dir>").replace(str(self.port), "<port>"))

    def start(self, timeout=60):
        os.mkdir(self.state, 0o700)
        self.port = free_port()
        self.argv = [self.paddock, "serve", "--listen", "127.0.0.1:%d" % self.port,
                     "--state-dir", self.state] + self.args
        env = dict(os.environ, PADDOCK_AGENT=self.agent)
        env.pop("PADDOCK_TRACE", None)
        with open(self.log, "wb") as logf:
            self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                      env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise RuntimeError("paddock serve (%s) exited %d: %s" % (self.name, self.p.returncode,
                                                                       self.tail()))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/api/v1/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200 and os.path.exists(os.path.join(self.state, "api-key")):
                    with open(os.path.join(self.state, "api-key")) as f:
                        self.key = f.read().strip()
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("paddock serve (%s) did not come up in %d s: %s" % (self.name, timeout, self.tail()))

    def tail(self, n=15):
        try:
            with open(self.log, errors="replace") as f:
                return " | ".join(f.read().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def client(self):
        return Client(self.port, self.key)

    def pool_ready(self, c):
        st, body = c.call("GET", "/metrics")
        if st != 200:
            return -1
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        n = 0
        for line in text.splitlines():
            if line.startswith("paddock_pool_ready"):
                n += int(float(line.split()[-1]))
        return n

    def wait_pool(self, c, want, timeout=15.0, step=0.005):
        """Poll /metrics until the pool holds `want` sandboxes. -> seconds waited, or None."""
        t0 = time.monotonic()
        while True:
            if self.pool_ready(c) >= want:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                return None
            time.sleep(step)

    def stop(self):
        """SIGTERM, wait, `paddock gc`, check our cgroups. -> list of problems."""
        problems = []
        if self.p is not None and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                problems.append("%s: paddock serve ignored SIGTERM for 20 s; killed" % self.name)
                self.p.kill()
                self.p.wait()
        if os.path.isdir(self.state):
            gc = subprocess.run([self.paddock, "gc", "--state-dir", self.state], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
            self.gc_output = gc.stdout.strip()
            if gc.returncode != 0:
                problems.append("%s: `paddock gc` exit %d: %s" % (self.name, gc.returncode, gc.stdout.strip()))
            stray = sorted(paddock_cgroup_dirs(paddock_instance(self.state)))
            if stray:
                problems.append("%s: cgroup directories left after `paddock gc`: %s" % (self.name, ", ".join(stray)))
        return problems


# --------------------------------------------------------------------------
# a. create -> first output

class Peer:
    def __init__(self, name, label, command):
        self.name = name
        self.label = label
        self.command = command
        self.walls = []          # total (timed) ms per run
        self.parts = {}          # extra columns: name -> [ms]
        self.failures = []
        self.error = None
        self.extra = {}

    def add_part(self, k, v):
        self.parts.setdefault(k, []).append(v)


MAX_STREAK = 3


def spawn_echo(argv, env=None):
    """Time spawn .. exit of argv, stdout to a pipe. -> (ms, ok, err)."""
    t0 = time.perf_counter_ns()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env)
    except OSError as e:
        return 0, False, str(e)
    t1 = time.perf_counter_ns()
    ok = r.returncode == 0 and r.stdout == b"hi\n"
    return ms(t1 - t0), ok, "exit %d, stdout %r, stderr %s" % (r.returncode, r.stdout[:80],
                                                                r.stderr.decode(errors="replace").strip()[:300])


def http_echo(srv, c, peer, cmd="echo hi", between=None):
    """POST /sandboxes, POST /exec echo hi (timed together), DELETE (apart).
    between(): untimed, after the create (the pool-refill diagnostic)."""
    t0 = time.perf_counter_ns()
    st, sb = c.call("POST", "/api/v1/sandboxes", obj={})
    t1 = time.perf_counter_ns()
    if st != 201:
        return False, "create: " + http_error(st, sb)
    sid = sb["id"]
    try:
        if between:
            between()
        tb = time.perf_counter_ns()
        st, ex = c.call("POST", "/api/v1/sandboxes/%s/exec" % sid, obj={"cmd": cmd})
        t2 = time.perf_counter_ns()
        if st != 200 or not isinstance(ex, dict) or ex.get("stdout") != "hi\n":
            return False, "exec: " + http_error(st, ex)
        if peer.name == "warm_refill":  # diagnostic: a second exec in the same sandbox
            t5 = time.perf_counter_ns()
            st2, _ = c.call("POST", "/api/v1/sandboxes/%s/exec" % sid, obj={"cmd": cmd})
            if st2 == 200:
                peer.add_part("exec2", ms(time.perf_counter_ns() - t5))
    finally:
        t3 = time.perf_counter_ns()
        dst, db = c.call("DELETE", "/api/v1/sandboxes/%s" % sid)
        t4 = time.perf_counter_ns()
    if dst != 204:
        return False, "delete: " + http_error(dst, db)
    peer.walls.append(ms(t1 - t0) + ms(t2 - tb))
    peer.add_part("create", ms(t1 - t0))
    peer.add_part("exec", ms(t2 - tb))
    peer.add_part("delete", ms(t4 - t3))
    return True, None


def bench_create(args, warm, cold, paddock, agent, work, ctx):
    run_state = os.path.join(work, "run-state")
    os.mkdir(run_state, 0o700)
    run_env = dict(os.environ, PADDOCK_AGENT=agent)
    run_env.pop("PADDOCK_TRACE", None)
    wc, cc = warm.client(), cold.client()
    mc = warm.client()   # for /metrics polls
    pool = args.pool

    pw = Peer("warm", "HTTP, warm pool (--pool %d)" % pool,
              "POST /api/v1/sandboxes {} ; POST /api/v1/sandboxes/{id}/exec {\"cmd\":\"echo hi\"} "
              "(server: %s)" % warm.display())
    pc = Peer("cold", "HTTP, no pool (--pool 0)",
              "the same requests (server: %s)" % cold.display())
    prun = Peer("run", "paddock run",
                "PADDOCK_AGENT=%s %s" % (os.path.relpath(agent, ROOT),
                                         shlex.join([os.path.relpath(paddock, ROOT), "run", "--state-dir",
                                                     "<dir>", "--", "echo", "hi"])))
    bw_argv = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "echo", "hi"]
    pbw = Peer("bwrap", "bwrap", shlex.join(bw_argv))
    plain_argv = [shutil.which("echo") or "/bin/echo", "hi"]
    ppl = Peer("plain", "plain exec", shlex.join(plain_argv))
    bash_argv = ["/bin/bash", "-c", "echo hi"]
    pbash = Peer("bash", "plain exec, bash -c", "`%s`" % shlex.join(bash_argv) +
                 " (the server runs a string `cmd` as `/bin/bash -l -c`; a login shell on this "
                 "host reads root's profile, which is not what the sandbox's user reads, so the "
                 "host figure is the non-login shell)")
    pargv = Peer("warm_argv", "diag: warm pool, argv form",
                 "as the warm peer but with `{\"cmd\":[\"echo\",\"hi\"]}` (no login shell)")
    prefill = Peer("warm_refill", "diag: warm pool, exec after refill",
                   "as the warm peer, but the pool refill is awaited (untimed) between the create "
                   "and the exec; total = create + exec; then, outside the total, a second "
                   "identical exec in the same sandbox")
    peers = [pw, pc, prun, pbw, ppl, pbash, pargv, prefill]
    if args.no_diag:
        peers = peers[:5]
    pw.extra["pool_waits"] = []
    pw.extra["pool_timeouts"] = 0
    pw.extra["pool_before"] = []

    def run_warm(i, peer=pw, cmd="echo hi", between=None):
        if peer is pw:
            pw.extra["pool_before"].append(warm.pool_ready(mc))
        ok, err = http_echo(warm, wc, peer, cmd, between)
        if peer is not pw:
            warm.wait_pool(mc, pool, timeout=args.pool_wait)
            return ok, err
        # untimed: let the pool refill before anything else runs, so that the
        # refill neither overlaps another peer nor makes the next create cold
        waited = warm.wait_pool(mc, pool, timeout=args.pool_wait)
        if waited is None:
            pw.extra["pool_timeouts"] += 1
        else:
            pw.extra["pool_waits"].append(waited * 1e3)
        return ok, err

    def run_cold(i):
        return http_echo(cold, cc, pc)

    def run_cli(peer, argv, env=None):
        t, ok, err = spawn_echo(argv, env)
        if ok:
            peer.walls.append(t)
            return True, None
        return False, err

    fns = {
        "warm": run_warm,
        "cold": run_cold,
        "run": lambda i: run_cli(prun, [paddock, "run", "--state-dir", run_state, "--", "echo", "hi"], run_env),
        "bwrap": lambda i: run_cli(pbw, bw_argv),
        "plain": lambda i: run_cli(ppl, plain_argv),
        "bash": lambda i: run_cli(pbash, bash_argv),
        "warm_argv": lambda i: run_warm(i, pargv, ["echo", "hi"]),
        "warm_refill": lambda i: run_warm(i, prefill, "echo hi",
                                          lambda: warm.wait_pool(mc, pool, timeout=args.pool_wait)),
    }
    if not shutil.which("bwrap"):
        pbw.error = "bwrap is not installed"

    # warm-up: untimed
    waited = warm.wait_pool(mc, pool, timeout=120)
    if waited is None:
        ctx["notes"].append("The warm server's pool did not reach %d within 120 s of start." % pool)
    print("a. warm-up ...", file=sys.stderr)
    for p in peers:
        if p.error:
            continue
        for i in range(args.warmup):
            saved = (list(p.walls), {k: list(v) for k, v in p.parts.items()})
            ok, err = fns[p.name](-1)
            p.walls, p.parts = saved
            if p.name == "warm":
                pw.extra["pool_before"].pop()
                if pw.extra["pool_waits"]:
                    pw.extra["pool_waits"].pop()
            if not ok and i == args.warmup - 1:
                p.error = "warm-up: " + err
    pw.extra["pool_timeouts"] = 0

    n = len(peers)
    streak = {p.name: 0 for p in peers}
    for rnd in range(args.rounds):
        order = peers[rnd % n:] + peers[:rnd % n]
        for p in order:
            if p.error:
                continue
            try:
                ok, err = fns[p.name](rnd)
            except (OSError, http.client.HTTPException) as e:
                ok, err = False, "%s: %s" % (type(e).__name__, e)
            if ok:
                streak[p.name] = 0
                continue
            p.failures.append("round %d: %s" % (rnd, err))
            print("%s failed: %s" % (p.label, err), file=sys.stderr)
            streak[p.name] += 1
            if streak[p.name] >= MAX_STREAK:
                p.error = err
        if (rnd + 1) % 50 == 0 or rnd + 1 == args.rounds:
            print("a. round %d/%d" % (rnd + 1, args.rounds), file=sys.stderr)
    for c in (wc, cc, mc):
        c.close()
    gc = subprocess.run([paddock, "gc", "--state-dir", run_state], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True)
    if gc.returncode != 0:
        ctx["notes"].append("`paddock gc` of the `paddock run` state dir: exit %d: %s" % (gc.returncode, gc.stdout.strip()))
    return peers


def create_rows(peers):
    ref = peers[0]
    ref_p50 = statistics.median(ref.walls) if ref.walls else None
    rows = []
    for p in peers:
        if not p.walls:
            rows.append([p.label, "0", "-", "-", "-", "-", "-", "-", "-", "not measured: " + (p.error or "no runs")])
            continue
        p50 = statistics.median(p.walls)
        parts = ""
        if p.parts:
            parts = "create %s + exec %s; delete %s (not in total)" % (
                fmt_ms(statistics.median(p.parts["create"])), fmt_ms(statistics.median(p.parts["exec"])),
                fmt_ms(statistics.median(p.parts["delete"])))
            if p.parts.get("exec2"):
                parts += "; a 2nd exec in the same sandbox %s" % fmt_ms(statistics.median(p.parts["exec2"]))
        note = []
        if p.error:
            note.append("dropped: " + p.error)
        elif p.failures:
            note.append("%d failed run(s) not counted" % len(p.failures))
        rows.append([p.label, str(len(p.walls)), fmt_ms(min(p.walls)), fmt_ms(p50), fmt_ms(pct(p.walls, 99)),
                     fmt_ms(max(p.walls)), "%.2f×" % (p50 / ref_p50) if ref_p50 else "-",
                     "%.2f×" % (pct(p.walls, 99) / pct(ref.walls, 99)) if ref_p50 else "-",
                     parts, "; ".join(note)])
    return rows


CREATE_HEAD = ["peer", "runs", "min ms", "p50 ms", "p99 ms", "max ms", "p50 / warm's", "p99 / warm's",
               "p50 of the parts", "note"]


# --------------------------------------------------------------------------
# b. exec round trip

def bench_exec(args, warm, ctx):
    c = warm.client()
    st, sb = c.call("POST", "/api/v1/sandboxes", obj={})
    if st != 201:
        raise RuntimeError("exec benchmark: create: " + http_error(st, sb))
    sid = sb["id"]
    path = "/api/v1/sandboxes/%s/exec" % sid
    body = {"cmd": ["/bin/true"]}
    http_ms, sub_ms, fails = [], [], []

    def one_http():
        t0 = time.perf_counter_ns()
        st, r = c.call("POST", path, obj=body)
        t1 = time.perf_counter_ns()
        if st != 200 or not isinstance(r, dict) or r.get("exit_code") != 0:
            fails.append(http_error(st, r))
            return
        http_ms.append(ms(t1 - t0))

    def one_sub():
        t0 = time.perf_counter_ns()
        r = subprocess.run(["/bin/true"])
        t1 = time.perf_counter_ns()
        if r.returncode == 0:
            sub_ms.append(ms(t1 - t0))

    for _ in range(args.warmup * 3):
        one_http()
        one_sub()
    http_ms.clear()
    sub_ms.clear()
    fails.clear()
    print("b. exec round trips ...", file=sys.stderr)
    for i in range(args.exec_rounds):
        if i % 2:
            one_http()
            one_sub()
        else:
            one_sub()
            one_http()
        if len(fails) >= MAX_STREAK and not http_ms:
            break
    return c, sid, http_ms, sub_ms, fails


# --------------------------------------------------------------------------
# c. throughput

def read_all(resp, buf):
    """Read a response body into buf repeatedly. -> bytes read."""
    mv = memoryview(buf)
    total = 0
    while True:
        n = resp.readinto(mv)
        if not n:
            return total
        total += n


def bench_stream(c, warm, sid, nbytes, buf):
    """Start `sh -c 'read x; exec head -c N /dev/zero'` with a stdin pipe,
    attach GET .../output?follow=1 on a second connection, then release it
    with one line on stdin: timed from that write to the end of the body."""
    st, pr = c.call("POST", "/api/v1/sandboxes/%s/processes" % sid,
                    obj={"cmd": ["sh", "-c", "read x; exec head -c %d /dev/zero" % nbytes], "stdin": True})
    if st != 201:
        raise RuntimeError("stream: start: " + http_error(st, pr))
    pid = pr["pid"]
    fc = warm.client()
    try:
        resp = fc.start("GET", "/api/v1/sandboxes/%s/processes/%d/output?follow=1" % (sid, pid))
        if resp.status != 200:
            raise RuntimeError("stream: output: " + http_error(resp.status, resp.read()))
        gap = resp.getheader("X-Paddock-Gap")
        t0 = time.perf_counter_ns()
        st, b = c.call("POST", "/api/v1/sandboxes/%s/processes/%d/stdin" % (sid, pid), raw=b"go\n",
                       headers={"Content-Type": "application/octet-stream"})
        if st != 204:
            raise RuntimeError("stream: stdin: " + http_error(st, b))
        got = read_all(resp, buf)
        t1 = time.perf_counter_ns()
    finally:
        fc.close()
    return {"bytes": got, "secs": (t1 - t0) / 1e9, "gap": gap, "ok": got == nbytes and not gap,
            "chunked": resp.chunked}


def bench_upload(c, sid, path, size):
    # untimed: remove the previous copy first. Overwriting needs room for both
    # copies at once, and the writable layer is smaller than disk_mb says
    # (see the notes).
    c.call("DELETE", "/api/v1/sandboxes/%s/files?path=/tmp/bench-file" % sid)
    with open(path, "rb") as f:
        t0 = time.perf_counter_ns()
        st, b = c.call("PUT", "/api/v1/sandboxes/%s/files?path=/tmp/bench-file" % sid, raw=f,
                       headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
        t1 = time.perf_counter_ns()
    ok = st == 200 and isinstance(b, dict) and b.get("size") == size
    return {"bytes": size if ok else 0, "secs": (t1 - t0) / 1e9, "ok": ok,
            "err": None if ok else http_error(st, b)}


def bench_download(c, sid, size, buf):
    t0 = time.perf_counter_ns()
    resp = c.start("GET", "/api/v1/sandboxes/%s/files?path=/tmp/bench-file" % sid)
    if resp.status != 200:
        data = resp.read()
        return {"bytes": 0, "secs": 1, "ok": False, "err": http_error(resp.status, data)}
    got = read_all(resp, buf)
    t1 = time.perf_counter_ns()
    return {"bytes": got, "secs": (t1 - t0) / 1e9, "ok": got == size, "err": None}


def bench_host_file(path, size, buf):
    mv = memoryview(buf)
    t0 = time.perf_counter_ns()
    got = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(mv)
            if not n:
                break
            got += n
    t1 = time.perf_counter_ns()
    return {"bytes": got, "secs": (t1 - t0) / 1e9, "ok": got == size}


def bench_host_pipe(nbytes, buf):
    mv = memoryview(buf)
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(["head", "-c", str(nbytes), "/dev/zero"], stdout=subprocess.PIPE, bufsize=0)
    got = 0
    while True:
        n = p.stdout.readinto(mv)
        if not n:
            break
        got += n
    p.wait()
    t1 = time.perf_counter_ns()
    return {"bytes": got, "secs": (t1 - t0) / 1e9, "ok": got == nbytes}


def bench_throughput(args, warm, c, sid, work, ctx):
    buf = bytearray(MiB)
    shm = tempfile.mkdtemp(prefix="paddock-bench-server-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    fpath = os.path.join(shm, "file")
    size = args.file_mib * MiB
    h = hashlib.sha256()
    with open(fpath, "wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 4 * MiB))
            h.update(chunk)
            f.write(chunk)
            left -= len(chunk)
    digest = h.hexdigest()
    stream_bytes = args.stream_mib * MiB
    res = {"stream": [], "upload": [], "download": [], "host_pipe": [], "host_file": []}
    errs = []
    try:
        # probe: if a 1 GiB stream would take longer than ~30 s, drop to 256 MiB
        if not args.no_shrink and stream_bytes > 256 * MiB:
            r = bench_stream(c, warm, sid, 64 * MiB, buf)
            if r["ok"] and r["secs"] * (stream_bytes / (64 * MiB)) > 30:
                ctx["notes"].append("A %d MiB stream would take about %.0f s here (64 MiB probe: %.2f s), "
                                    "so the stream was 256 MiB instead." %
                                    (args.stream_mib, r["secs"] * stream_bytes / (64 * MiB), r["secs"]))
                stream_bytes = 256 * MiB
        res["stream_bytes"] = stream_bytes
        print("c. throughput (%d reps) ..." % args.reps, file=sys.stderr)
        fns = {"stream": lambda: bench_stream(c, warm, sid, stream_bytes, buf),
               "upload": lambda: bench_upload(c, sid, fpath, size),
               "download": lambda: bench_download(c, sid, size, buf),
               "host_pipe": lambda: bench_host_pipe(stream_bytes, buf),
               "host_file": lambda: bench_host_file(fpath, size, buf)}
        groups = [["stream"], ["upload", "download"], ["host_pipe"], ["host_file"]]  # upload before download
        for rep in range(args.reps):
            order = groups[rep % len(groups):] + groups[:rep % len(groups)]
            for name in [n for g in order for n in g]:
                r = fns[name]()
                if r.get("ok"):
                    res[name].append(r)
                else:
                    errs.append("%s rep %d: %s" % (name, rep, r.get("err") or r))
                    print("c. %s failed: %s" % (name, r.get("err") or r), file=sys.stderr)
        # untimed: is the sandbox's copy the same bytes?
        st, ex = c.call("POST", "/api/v1/sandboxes/%s/exec" % sid, obj={"cmd": ["sha256sum", "/tmp/bench-file"]})
        inside = ex.get("stdout", "").split()[0] if st == 200 and isinstance(ex, dict) and ex.get("stdout") else "?"
        res["sha_ok"] = inside == digest
        if not res["sha_ok"]:
            errs.append("sha256 of the uploaded file inside the sandbox %s != host %s" % (inside, digest))
        dh = hashlib.sha256()
        resp = c.start("GET", "/api/v1/sandboxes/%s/files?path=/tmp/bench-file" % sid)
        while True:
            chunk = resp.read(MiB)
            if not chunk:
                break
            dh.update(chunk)
        res["dl_sha_ok"] = dh.hexdigest() == digest
        if not res["dl_sha_ok"]:
            errs.append("sha256 of the downloaded file differs from the uploaded one")
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    res["errors"] = errs
    res["file_bytes"] = size
    return res


def tput_rows(res):
    def mbs(r):
        return r["bytes"] / r["secs"] / MB
    rows = []
    ref = {"stream": "host_pipe", "upload": "host_file", "download": "host_file"}
    labels = {"stream": "output stream (GET .../output?follow=1)",
              "upload": "file upload (PUT .../files?path=)",
              "download": "file download (GET .../files?path=)",
              "host_pipe": "host pipe: `head -c N /dev/zero` read by Python",
              "host_file": "host tmpfs file read by Python"}
    med = {}
    for k in ("stream", "upload", "download", "host_pipe", "host_file"):
        v = [mbs(r) for r in res[k]]
        if v:
            med[k] = statistics.median(v)
    for k in ("stream", "upload", "download", "host_pipe", "host_file"):
        v = [mbs(r) for r in res[k]]
        size = res["stream_bytes"] if k in ("stream", "host_pipe") else res["file_bytes"]
        if not v:
            rows.append([labels[k], "%d MiB" % (size // MiB), "0", "-", "-", "-", "-", "-"])
            continue
        base = ref.get(k)
        ratio = "%.2f" % (med[k] / med[base]) if base in med else "-"
        secs = statistics.median(r["secs"] for r in res[k])
        rows.append([labels[k], "%d MiB" % (size // MiB), str(len(v)), "%.0f" % min(v), "%.0f" % med[k],
                     "%.0f" % max(v), "%.2f s" % secs, ratio + (" of %s" % base.replace("_", " ") if base in med else "")])
    return rows


TPUT_HEAD = ["what", "bytes", "reps", "min MB/s", "median MB/s", "max MB/s", "median time", "median / host baseline"]


# --------------------------------------------------------------------------
# Output.

def text_table(head, rows):
    w = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    out = ["  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(head)).rstrip()]
    for r in rows:
        out.append("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(out)


def md_table(head, rows, left=(0,)):
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i in left else "---:" for i in range(len(head))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


def machine_lines(ctx):
    return ["## Machine", "",
            "- Date: %s" % ctx["date"],
            "- Kernel: %s" % ctx["kernel"],
            "- CPU: %s" % ctx["cpu"],
            "- Load average (1/5/15 min) before: %s; after: %s" % (ctx["load_before"], ctx["load_after"]),
            "- Command line: `%s`" % ctx["cmdline"], "",
            "## Versions", ""] + ["- %s: `%s`" % kv for kv in ctx["versions"]] + [""]


def write_md(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=200, help="a: timed rounds (default 200)")
    ap.add_argument("--pool", type=int, default=4, help="a: the warm server's --pool (default 4)")
    ap.add_argument("--pool-wait", type=float, default=15.0,
                    help="a: at most this many seconds waiting for the pool to refill (default 15)")
    ap.add_argument("--no-diag", action="store_true",
                    help="a: leave out the diagnostic peers (login shell, argv form, exec after refill)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs of each peer first (default 3)")
    ap.add_argument("--exec-rounds", type=int, default=500, help="b: exec round trips (default 500)")
    ap.add_argument("--stream-mib", type=int, default=1024, help="c: output stream size in MiB (default 1024)")
    ap.add_argument("--no-shrink", action="store_true",
                    help="c: keep --stream-mib even if it would take more than ~30 s")
    ap.add_argument("--file-mib", type=int, default=256, help="c: file size in MiB (default 256)")
    ap.add_argument("--reps", type=int, default=3, help="c: repetitions of each transfer (default 3)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: a,b,c")
    ap.add_argument("--report", default=DEFAULT_REPORT, help="Markdown report path")
    args = ap.parse_args()
    skip = set(s.strip() for s in args.skip.split(",") if s.strip())

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    if os.geteuid() != 0:
        print("warning: not root; paddock serve needs root", file=sys.stderr)

    paddock = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(ROOT, "build", "src", "paddock"))
    agent = os.path.abspath(os.environ.get("PADDOCK_AGENT") or
                            os.path.join(ROOT, "build", "src", "agent", "paddock-agent"))
    ctx = machine_ctx(shlex.join(["/usr/bin/python3", os.path.relpath(SCRIPT, ROOT)] + sys.argv[1:]))
    ctx["versions"] = [("paddock", version_of([paddock, "version"])),
                       ("bwrap", version_of(["bwrap", "--version"])),
                       ("python", sys.version.split()[0])]
    work = tempfile.mkdtemp(prefix="paddock-bench-server-")
    warm = Server(paddock, agent, work, "warm", ["--pool", str(args.pool)])
    cold = Server(paddock, agent, work, "cold", ["--pool", "0"])
    peers, exec_res, tput = None, None, None
    problems = []
    failed = None
    try:
        print("starting servers ...", file=sys.stderr)
        warm.start()
        if "a" not in skip:
            cold.start()
            peers = bench_create(args, warm, cold, paddock, agent, work, ctx)
        if "b" not in skip or "c" not in skip:
            c, sid, http_ms, sub_ms, fails = bench_exec(args, warm, ctx) if "b" not in skip else \
                (None, None, [], [], [])
            if c is None:
                c = warm.client()
                st, sb = c.call("POST", "/api/v1/sandboxes", obj={})
                if st != 201:
                    raise RuntimeError("create: " + http_error(st, sb))
                sid = sb["id"]
            if "b" not in skip:
                exec_res = (http_ms, sub_ms, fails)
            if "c" not in skip:
                tput = bench_throughput(args, warm, c, sid, work, ctx)
            c.call("DELETE", "/api/v1/sandboxes/%s" % sid)
            c.close()
    except Exception as e:  # noqa: BLE001 - reported, then cleaned up
        failed = "%s: %s" % (type(e).__name__, e)
        print("error: " + failed, file=sys.stderr)
    finally:
        for s in (warm, cold):
            problems += s.stop()
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(work):
            problems.append("could not remove %s" % work)
        for m in problems:
            print("cleanup: " + m, file=sys.stderr)
    ctx["load_after"] = loadavg()

    # ---- output
    L = ["# paddock server benchmark", "",
         "Generated by `bench/server.py` (see `bench/README.md`). Do not edit by hand.", ""]
    L += machine_lines(ctx)
    L += ["## Servers", "",
          "Two servers of this run, each on its own state directory and a free loopback port:", "",
          "```", "# warm: " + (warm.display() if warm.argv else "not started"),
          "# cold: " + (cold.display() if cold.argv else "not started"), "```", "",
          "Every request is made with `http.client` over one keep-alive connection per server "
          "(a second one for `/metrics` polls and for the output stream), "
          "`Authorization: Bearer <key>`, TCP_NODELAY.", ""]
    exit_code = 0
    if peers:
        rows = create_rows(peers)
        print()
        print("a. create -> first output of `echo hi` (ms; ratios to the warm-pool HTTP peer)")
        print(text_table(CREATE_HEAD[:-1], [r[:-1] for r in rows]))
        pw = peers[0]
        target = ""
        if pw.walls:
            p50 = statistics.median(pw.walls)
            target = "**HTTP create + exec p50 with the warm pool: %s ms** (target ≤ 2 ms: %s)." % (
                fmt_ms(p50), "met" if p50 <= 2 else "NOT met")
            print(target.replace("**", ""))
        L += ["## a. Create → first output", "",
              "Per round, in an order that rotates from round to round:", ""]
        for p in peers:
            L.append("- **%s**: %s" % (p.label, p.command if "`" in p.command else "`%s`" % p.command))
        L += ["",
              "HTTP peers: the time from sending `POST /api/v1/sandboxes` to the arrival of the "
              "`POST .../exec` answer whose `stdout` is `\"hi\\n\"` (the exec answers once the "
              "command exited, with its output). The `DELETE` that follows is timed apart and "
              "not in the total. After every warm-pool round the benchmark waits (untimed) "
              "until `/metrics` shows the pool full again (`paddock_pool_ready`), so every "
              "warm create finds a full pool, and the refill never overlaps another peer's "
              "run. CLI peers: `subprocess.run` from spawn to exit, stdout to a pipe, checked "
              "to be `hi\\n`.", "",
              md_table(CREATE_HEAD, rows, left=(0, 8, 9)), "", target, ""]
        if pw.extra.get("pool_before"):
            pb = pw.extra["pool_before"]
            waits = pw.extra["pool_waits"]
            L.append("- Pool size seen just before each timed warm create: min %d, max %d (of %d)."
                     % (min(pb), max(pb), args.pool))
            if waits:
                L.append("- Extra wait, after the DELETE, until the pool was full again (untimed, polled every "
                         "5 ms): median %.0f ms, p99 %.0f ms, max %.0f ms. A client creating sandboxes "
                         "faster than this drains the pool and then sees the cold figure."
                         % (statistics.median(waits), pct(waits, 99), max(waits)))
            if pw.extra["pool_timeouts"]:
                L.append("- The pool did not refill within %.0f s after %d round(s)."
                         % (args.pool_wait, pw.extra["pool_timeouts"]))
        for p in peers:
            if p.failures:
                L.append("- %s: %d failed run(s): %s" % (p.label, len(p.failures), "; ".join(p.failures[:5])))
        L.append("")
        if not pw.walls or not peers[1].walls:
            exit_code = 1
    if exec_res:
        http_ms, sub_ms, fails = exec_res
        L += ["## b. Exec round trip in a running sandbox", ""]
        if http_ms and sub_ms:
            h50, s50 = statistics.median(http_ms), statistics.median(sub_ms)
            h99, s99 = pct(http_ms, 99), pct(sub_ms, 99)
            rows = [["HTTP POST .../exec {\"cmd\":[\"/bin/true\"]}", str(len(http_ms)), fmt_ms(min(http_ms)),
                     fmt_ms(h50), fmt_ms(h99), fmt_ms(max(http_ms)), "%.2f×" % (h50 / s50), "%.2f×" % (h99 / s99)],
                    ["host subprocess.run([\"/bin/true\"])", str(len(sub_ms)), fmt_ms(min(sub_ms)), fmt_ms(s50),
                     fmt_ms(s99), fmt_ms(max(sub_ms)), "1.00×", "1.00×"]]
            head = ["what", "runs", "min ms", "p50 ms", "p99 ms", "max ms", "p50 / host's", "p99 / host's"]
            print()
            print("b. exec round trip in a running sandbox (ms)")
            print(text_table(head, rows))
            goal = "**exec p50 / host fork+exec p50 = %.2f×** (target ≤ 3×: %s)." % (
                h50 / s50, "met" if h50 / s50 <= 3 else "NOT met")
            print(goal.replace("**", ""))
            L += ["One sandbox created on the warm server; then, alternating, `POST "
                  "/api/v1/sandboxes/{id}/exec` with `{\"cmd\": [\"/bin/true\"]}` (timed from sending "
                  "to the parsed answer with `exit_code` 0) and `subprocess.run([\"/bin/true\"])` "
                  "in the benchmark's own Python process.", "",
                  md_table(head, rows), "", goal, ""]
        else:
            L += ["Not measured: %s" % ("; ".join(fails[:3]) or "no runs"), ""]
            exit_code = 1
        if fails:
            L += ["- %d failed exec(s): %s" % (len(fails), "; ".join(fails[:3])), ""]
    if tput:
        rows = tput_rows(tput)
        print()
        print("c. throughput (MB/s = 10^6 bytes/s)")
        print(text_table(TPUT_HEAD, rows))
        sv = [r["bytes"] / r["secs"] / MB for r in tput["stream"]]
        goal = ""
        if sv:
            m = statistics.median(sv)
            goal = "**output stream median: %.0f MB/s** (target ≥ 500 MB/s: %s)." % (m, "met" if m >= 500 else "NOT met")
            print(goal.replace("**", ""))
        L += ["## c. Throughput", "",
              "In one sandbox on the warm server; MB/s is 10^6 bytes per second; each transfer "
              "ran %d times, rotated with the host baselines." % args.reps, "",
              "- **output stream**: `POST .../processes` with `{\"cmd\": [\"sh\", \"-c\", \"read x; "
              "exec head -c %d /dev/zero\"], \"stdin\": true}`; then `GET .../processes/{pid}/output"
              "?follow=1` on a second connection (its headers arrive once the server attached to "
              "the process); then, timed from here, `POST .../stdin` `go\\n` and the whole chunked "
              "body read with `readinto` into a 1 MiB buffer. Counted only if all bytes came "
              "and no `X-Paddock-Gap` (the agent holds the process back while the reader lags, "
              "so nothing is lost)." % tput["stream_bytes"],
              "- **file upload**: `PUT .../files?path=/tmp/bench-file` of a %d MiB random file from "
              "host tmpfs (`Content-Length`, sent in 1 MiB blocks), timed to the `200` answer." % (tput["file_bytes"] // MiB),
              "- **file download**: `GET .../files?path=/tmp/bench-file`, timed from the request "
              "to the last byte, read with `readinto` into a 1 MiB buffer.",
              "- **host baselines**, for scale: the same Python loop reading `head -c N /dev/zero` "
              "from a pipe, and reading the %d MiB file from /dev/shm (tmpfs)." % (tput["file_bytes"] // MiB),
              "", md_table(TPUT_HEAD, rows), "", goal, "",
              "- sha256 of the file inside the sandbox (`sha256sum` via /exec) equals the host's: %s; "
              "of a download: %s." % ("yes" if tput.get("sha_ok") else "NO", "yes" if tput.get("dl_sha_ok") else "NO")]
        for e in tput["errors"]:
            L.append("- Failure: %s" % e)
        L.append("")
    L += ["## Notes", ""]
    L += ["- The machine has 2 shared cores and other work on it; the client, the server, the "
          "agent and the command all share them. Peers alternate and the order rotates, so "
          "noise falls on all of them alike; max is mostly noise."]
    L += ["- " + n for n in ctx["notes"]]
    if failed:
        L.append("- **The run failed**: %s" % failed)
        exit_code = 1
    for m in problems:
        L.append("- Cleanup: %s" % m)
    if not problems:
        L.append("- Cleanup: both servers stopped with SIGTERM, `paddock gc --state-dir` run on "
                 "each state directory (and on the `paddock run` one), no cgroup directory of "
                 "these instances left, temp directories removed.")
    write_md(args.report, L)
    print("report: %s" % os.path.relpath(args.report, os.getcwd()))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
