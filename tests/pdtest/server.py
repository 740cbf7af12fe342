"""One `paddock serve` for a test: a free 127.0.0.1 port, its own state
dir, a runtime dir private to this test process, the API key it writes,
HTTP helpers, and a finish that leaves nothing behind.

    srv = Server(None, "--pool", "0").start()      # a state dir of its own
    sid = srv.create({"memory_mb": 256})["id"]
    out = srv.exec(sid, "echo hi")["stdout"]
    srv.delete(sid)
    srv.finish()            # SIGTERM, paddock gc, nothing left (asserted)

or, for a module:

    srv = server_fixture("--pool", "0")             # a pytest fixture

Standard library only. Every server listens on 127.0.0.1 only.
"""
import atexit
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from .env import (DEFAULT_TIMEOUT, PADDOCK_AGENT, PADDOCK_BIN, child_env, free_port, instance_of, keep,
                  kill_by_cmdline, leftovers, remove_cgroup_parents, runtime_dir, wait_until)

START_TIMEOUT = 30      # seconds for /api/v1/health to answer after the exec
STOP_TIMEOUT = 30       # seconds for the server to exit after SIGTERM

_runtime_root = []


def runtime_root():
    """The PADDOCK_RUNTIME_DIR of every server this test process starts
    (each instance gets its own subdirectory in it): never the host's
    /run/paddock, so a test's live sandboxes are its own to look at."""
    if not _runtime_root or not os.path.isdir(_runtime_root[0]):
        if not _runtime_root:
            _runtime_root.append(tempfile.mkdtemp(prefix="pd-srv-run-", dir="/tmp"))
            atexit.register(_drop_runtime_root)
        else:
            os.makedirs(_runtime_root[0], exist_ok=True)
    return _runtime_root[0]


def _drop_runtime_root():
    if _runtime_root and not keep():
        shutil.rmtree(_runtime_root[0], ignore_errors=True)


def server_env(extra=None):
    """The environment a server (and the CLI on its state dir) runs with."""
    e = child_env({"PADDOCK_RUNTIME_DIR": runtime_root()})
    for k in ("PADDOCK_URL", "PADDOCK_API_KEY"):
        e.pop(k, None)
    if extra:
        e.update(extra)
    return e


def run_paddock(*args, timeout=DEFAULT_TIMEOUT, env=None, **kw):
    """`paddock ARGS` with server_env() (plus env); a CompletedProcess with
    text output. A hang becomes a test failure (TimeoutExpired)."""
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("text", True)
    return subprocess.run([PADDOCK_BIN] + list(args), capture_output=True, timeout=timeout,
                          env=server_env(env), **kw)


class Headers(dict):
    """Response headers, looked up whatever their case."""

    def __init__(self, pairs):
        super().__init__((k.lower(), v) for k, v in pairs)

    def __getitem__(self, k):
        return super().__getitem__(k.lower())

    def __contains__(self, k):
        return super().__contains__(k.lower())

    def get(self, k, default=None):
        return super().get(k.lower(), default)


def _encode(body, headers):
    """dict/list: JSON (with its Content-Type unless one is given); str:
    UTF-8; bytes and file-like objects go as they are."""
    if isinstance(body, (dict, list)):
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        return json.dumps(body).encode()
    if isinstance(body, str):
        return body.encode()
    return body


class Server:
    """`paddock serve --listen 127.0.0.1:PORT --state-dir STATE EXTRA...`.

    state: a state dir to use (its parent must exist; the log goes next to
    it as STATE.log), or None for a new one under /tmp that finish()
    removes. The port is chosen once, so a restart (stop, start) listens
    where the clients already point."""

    def __init__(self, state=None, *extra, prefix="pd-srv-"):
        self.tmp = None
        if state is None:
            self.tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
            state = os.path.join(self.tmp, "state")
        self.state = state
        self.extra = list(extra)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.runtime = runtime_root()
        self.log_path = os.path.join(os.path.dirname(self.state), os.path.basename(self.state) + ".log")
        self.proc = None
        self.key = None
        self.env = None
        self.popen_kw = {}      # more subprocess.Popen arguments for start (pass_fds, preexec_fn)
        self.v1 = Api(self)

    # ---- the process ----

    def start(self):
        """Start the server and wait until /api/v1/health answers 200; its
        API key is then in self.key. A server that exits or does not answer
        fails the test, its log quoted, and is not left running."""
        # the environment is taken now: a test may set a variable for one start
        self.env = server_env()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([PADDOCK_BIN, "serve", "--listen", "127.0.0.1:%d" % self.port,
                                          "--state-dir", self.state] + self.extra, env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, **self.popen_kw)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                assert self.proc.poll() is None, "paddock serve exited with %s: %s" % (self.proc.returncode,
                                                                                       self.logtext())
                try:
                    if self.request("GET", "/api/v1/health", key=None, timeout=5)[0] == 200:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, \
                    "paddock serve did not answer /api/v1/health within %d s: %s" % (START_TIMEOUT, self.logtext())
                time.sleep(0.05)      # nothing to wait on but the socket answering
            with open(os.path.join(self.state, "api-key")) as f:
                self.key = f.read().strip()
            assert self.key, "empty api-key"
        except BaseException:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            raise
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        """Send sig and wait for the exit; returns the exit status (None if
        it was not started). A server still running STOP_TIMEOUT seconds
        after SIGTERM is killed and fails the test."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("paddock serve did not exit within %d s of signal %d: %s"
                                     % (STOP_TIMEOUT, sig, self.logtext()))
        return self.proc.returncode

    def logtext(self, tail=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-tail:].decode("utf-8", "replace")
        except OSError:
            return ""

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    # ---- the state dir and what it holds ----

    @property
    def instance(self):
        return instance_of(self.state)

    @property
    def rundir(self):
        """The instance's runtime dir (live sandboxes: agent socket, record)."""
        return runtime_dir(self.state, self.runtime)

    def agent_pid(self, sid):
        """The agent_pid of a live sandbox's record (QEMU's pid in microvm)."""
        with open(os.path.join(self.rundir, "sandboxes", sid, "record")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k == "agent_pid":
                    return int(v)
        raise AssertionError("no agent_pid in the record of %s" % sid)

    def leftovers(self):
        return leftovers(self.state, self.runtime)

    def cli(self, *args, remote=False, env=None, **kw):
        """`paddock ARGS` (run_paddock); remote=True points the client verbs
        at this server (PADDOCK_URL, PADDOCK_API_KEY)."""
        e = dict(env or {})
        if remote:
            e = dict(PADDOCK_URL=self.url, PADDOCK_API_KEY=self.key, **e)
        return run_paddock(*args, env=e, **kw)

    def gc(self, timeout=120):
        return self.cli("gc", "--state-dir", self.state, timeout=timeout)

    def finish(self, check=True):
        """End of the server's life, also when the test failed: SIGTERM it,
        end children stuck between clone and exec (they show the server's
        command line and may hold host-wide locks), `paddock gc` the state
        dir, remove the instance's cgroup parents and (for a state dir of
        its own) the state. The instance's runtime dir stays until the test
        process exits, for tests that look at what gc left in it. With
        check, gc must succeed and nothing of the instance may remain;
        returns gc's result."""
        try:
            self.stop()
        finally:
            kill_by_cmdline(("--state-dir\0%s\0" % self.state).encode())
            gc = self.gc()
            left = self.leftovers()
            remove_cgroup_parents(self.state)
            if self.tmp and not keep():
                shutil.rmtree(self.tmp, ignore_errors=True)
        if check:
            assert gc.returncode == 0, "paddock gc: %s %s" % (gc.stdout, gc.stderr)
            assert left == {}, left
        return gc

    # ---- HTTP ----

    def request(self, method, path, body=None, key="default", headers=None, query=None, timeout=DEFAULT_TIMEOUT):
        """(status, headers, body bytes). key: "default" = the server's key,
        None = no Authorization header, else that key as a bearer token."""
        h = dict(headers or {})
        if key == "default":
            key = self.key
        if key:
            h["Authorization"] = "Bearer " + key
        body = _encode(body, h)
        if query:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(query)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return r.status, Headers(r.getheaders()), data
        finally:
            conn.close()

    def raw(self, method, path, body=None, headers=None, timeout=DEFAULT_TIMEOUT):
        """request() with exactly the headers given (no key added)."""
        return self.request(method, path, body, key=None, headers=headers, timeout=timeout)

    def json(self, method, path, body=None, key="default", expect=None, **kw):
        """(status, decoded JSON body or None); expect: the status required."""
        st, _h, data = self.request(method, path, body, key, **kw)
        if expect is not None:
            assert st == expect, "%s %s: %d %s" % (method, path, st, data[:2000])
        return st, (json.loads(data) if data.strip() else None)

    def api(self, method, path, body=None, key="default", expect=None, **kw):
        """json() on a path under /api/v1."""
        return self.json(method, "/api/v1" + path, body, key, expect, **kw)

    def create(self, body=None, key="default", timeout=DEFAULT_TIMEOUT):
        """POST /api/v1/sandboxes (201 required); the sandbox object."""
        return self.json("POST", "/api/v1/sandboxes", body if body is not None else {}, key, expect=201,
                         timeout=timeout)[1]

    def exec(self, sid, cmd, expect=200, **body):
        """POST /api/v1/sandboxes/SID/exec {cmd, ...body}; the answer (status
        expect required): exit_code, stdout, stderr."""
        st, j = self.json("POST", "/api/v1/sandboxes/%s/exec" % sid, dict(body, cmd=cmd))
        assert st == expect, (st, j)
        return j

    def delete(self, sid, key="default", wait=True):
        """DELETE /api/v1/sandboxes/SID; the status. The answer comes once
        the sandbox's processes are dead; with wait, also wait for the rest
        of its teardown (wait_teardowns), so a test may look for leftovers."""
        st = self.request("DELETE", "/api/v1/sandboxes/" + sid, key=key)[0]
        if wait:
            self.wait_teardowns()
        return st

    def teardowns_pending(self):
        st, j = self.json("GET", "/api/v1/health", key=None, expect=200)
        return j["teardowns_pending"]

    def wait_teardowns(self, limit=60):
        """Wait for the server's completion state of deleted sandboxes'
        teardowns (GET /api/v1/health "teardowns_pending" == 0): after it,
        nothing of a sandbox deleted before the call is left on the host."""
        assert wait_until(lambda: self.teardowns_pending() == 0, limit=limit, step=0.02), \
            "teardowns still pending after %d s: %s" % (limit, self.logtext())

    def audit_events(self, sid, key="default"):
        """A sandbox's audit log (GET .../audit, 200 required), decoded."""
        st, _h, data = self.request("GET", "/api/v1/sandboxes/%s/audit" % sid, key=key)
        assert st == 200, data
        return [json.loads(l) for l in data.decode().splitlines() if l.strip()]


class Api:
    """A server's native API with paths relative to /api/v1 and the
    server's key, plus the process helpers of docs/api.md "Processes"."""

    def __init__(self, srv, prefix="/api/v1"):
        self.srv = srv
        self.prefix = prefix

    @property
    def port(self):
        return self.srv.port

    @property
    def key(self):
        return self.srv.key

    def request(self, method, path, body=None, query=None, headers=None, timeout=DEFAULT_TIMEOUT, key="default"):
        return self.srv.request(method, self.prefix + path, body, key=key, headers=headers, query=query,
                                timeout=timeout)

    def json(self, method, path, body=None, query=None, expect=None, **kw):
        st, _h, data = self.request(method, path, body, query, **kw)
        if expect is not None:
            assert st == expect, (st, data[:2000])
        return st, (json.loads(data) if data.strip() else None)

    def open_stream(self, path, query=None, timeout=DEFAULT_TIMEOUT):
        """A streaming GET: (connection, response); read with response.read."""
        url = self.prefix + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=timeout)
        c.request("GET", url, headers={"Authorization": "Bearer " + self.srv.key})
        return c, c.getresponse()

    def start(self, sid, body, expect=201):
        """Start a process; the process object."""
        st, j = self.json("POST", "/sandboxes/%s/processes" % sid, body)
        assert st == expect, (st, j)
        return j

    def exec(self, sid, body, expect=200, **kw):
        st, j = self.json("POST", "/sandboxes/%s/exec" % sid, body, **kw)
        assert st == expect, (st, j)
        return j

    def output(self, sid, pid, **query):
        st, h, data = self.request("GET", "/sandboxes/%s/processes/%d/output" % (sid, pid), query=query)
        assert st == 200, (st, data[:500])
        return h, data

    def wait(self, sid, pid):
        """Follow stdout to the end; the process object after its exit."""
        self.output(sid, pid, follow=1)
        _st, j = self.json("GET", "/sandboxes/%s/processes/%d" % (sid, pid), expect=200)
        assert j["state"] == "exited", j
        return j


def need_build():
    assert os.access(PADDOCK_BIN, os.X_OK), "build first: %s is not executable" % PADDOCK_BIN
    assert os.access(PADDOCK_AGENT, os.X_OK), "build first: %s is not executable" % PADDOCK_AGENT


def server_fixture(*extra, prefix="pd-srv-"):
    """A module-scoped pytest fixture: one started server with a state dir
    of its own, finished (and checked clean) after the module's last test."""
    @pytest.fixture(scope="module")
    def fixture():
        need_build()
        s = Server(None, *extra, prefix=prefix)
        try:
            s.start()
        except BaseException:
            s.finish(check=False)
            raise
        try:
            yield s
        finally:
            s.finish()
    return fixture


@pytest.fixture(scope="module")
def tmproot():
    """A directory for a module's state dirs (servers started on
    os.path.join(tmproot, name)); removed at the module's end."""
    need_build()
    d = tempfile.mkdtemp(prefix="pd-srv-", dir="/tmp")
    yield d
    if not keep():   # else keep the servers' logs for a post-mortem
        shutil.rmtree(d, ignore_errors=True)
