"""sbx.commands: start processes, stream their output, stdin, signals.

Output comes from GET .../output?format=frames&follow=1, a stream of JSON
lines ({"stream","offset","data_b64"}, {"gap"}, {"exit"}). The reader keeps
the next offset of each stream; when the connection drops it reconnects
with from_stdout/from_stderr at those offsets and drops any byte it has
already seen, so a reconnect loses nothing and repeats nothing."""
import base64
import codecs
import http.client
import json
import socket
import threading
import time

from .exceptions import (ConnectionError, NotFoundError, PaddockError, SandboxError, TimeoutError)
from .models import CommandResult, ProcessInfo

RECONNECT_TRIES = 8


class CommandExitException(SandboxError):
    """A command ended with a non-zero exit code (or a signal). Carries the
    same fields as CommandResult."""

    def __init__(self, result):
        msg = result.error or "command exited with code %d" % result.exit_code
        if result.stderr:
            msg += ": " + result.stderr.strip()[-500:]
        super().__init__(msg)
        self.result = result
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.exit_code = result.exit_code
        self.error = result.error
        self.signal = result.signal
        self.reason = result.reason


class CommandHandle:
    """A running (or finished) process. Output is collected (and handed to
    the callbacks, per stream in order) by a reader thread from the moment
    the handle exists; wait() returns its CommandResult."""

    def __init__(self, api, sandbox_id, pid, on_stdout=None, on_stderr=None, on_pty=None, start=True,
                 from_stdout=0, from_stderr=0, pty_bytes=False):
        self._api = api
        self._sid = sandbox_id
        self.pid = pid
        self._cb = {"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty or on_stdout}
        self._buf = {"stdout": bytearray(), "stderr": bytearray(), "pty": bytearray()}
        # where each stream resumes: a handle may start mid-stream (connect(pid, from_stdout=N))
        self._next = {"stdout": int(from_stdout or 0), "stderr": int(from_stderr or 0), "pty": 0}
        self._dec = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in self._buf}
        self.gaps = []
        self._pty_bytes = pty_bytes
        self._exit = None
        self._error = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._stop = False
        self._conn = None
        self._thread = None
        if start:
            self._thread = threading.Thread(target=self._pump_safe, name="paddock-output-%d" % pid, daemon=True)
            self._thread.start()

    def _path(self, suffix=""):
        return "/sandboxes/%s/processes/%d%s" % (self._sid, self.pid, suffix)

    # -- the output reader ---------------------------------------------------

    def _pump_safe(self):
        try:
            self._pump()
        except BaseException as e:  # handed to wait()
            self._error = e
        finally:
            self._done.set()

    def _pump(self):
        failures = 0
        while not self._stop and self._exit is None:
            q = [("format", "frames"), ("follow", "1"),
                 ("from_stdout", str(max(self._next["pty"], self._next["stdout"]))),
                 ("from_stderr", str(self._next["stderr"]))]
            progressed = False
            try:
                conn, resp = self._api.open("GET", self._path("/output"), query=q, timeout=None)
                self._conn = conn
                try:
                    while not self._stop:
                        line = resp.readline()
                        if not line:
                            break
                        progressed = True
                        if self._line(line):
                            return
                finally:
                    self._conn = None
                    conn.close()
            except (ConnectionError, OSError, http.client.HTTPException) as e:
                if self._stop:
                    return
                last = e
            else:
                if self._stop or self._exit is not None:
                    return
                last = ConnectionError("output stream of process %d ended before its exit" % self.pid)
            failures = 0 if progressed else failures + 1
            if failures >= RECONNECT_TRIES:
                raise last
            time.sleep(min(0.05 * (2 ** failures), 1.0))

    def _line(self, line):
        """Handle one JSON line; True once the exit record arrived."""
        try:
            j = json.loads(line)
        except ValueError:
            return False
        if "stream" in j:
            name = j["stream"]
            data = base64.b64decode(j.get("data_b64") or "")
            off = int(j.get("offset", 0))
            if name == "pty" and self._next["pty"] < self._next["stdout"]:
                self._next["pty"] = self._next["stdout"]     # from_stdout serves the pty too
            nxt = self._next.get(name, 0)
            if off + len(data) <= nxt:
                return False            # already seen (a replay after reconnect)
            if off < nxt:
                data = data[nxt - off:]
                off = nxt
            with self._lock:
                self._buf.setdefault(name, bytearray()).extend(data)
                self._next[name] = off + len(data)
            cb = self._cb.get(name)
            if cb and name == "pty" and self._pty_bytes:
                cb(data)                # a terminal's bytes, as E2B's on_data gets them
            elif cb:
                text = self._dec[name].decode(data)
                if text:
                    cb(text)
        elif "gap" in j:
            g = j["gap"]
            self.gaps.append(g)
            name = g.get("stream", "stdout")
            with self._lock:
                self._next[name] = max(self._next.get(name, 0), int(g.get("to", 0)))
        elif "exit" in j:
            self._exit = j["exit"] or {}
            for name, cb in self._cb.items():
                if cb and not (name == "pty" and self._pty_bytes):
                    tail = self._dec[name].decode(b"", final=True)
                    if tail:
                        cb(tail)
            return True
        return False

    # -- what a user calls ---------------------------------------------------

    @property
    def stdout(self):
        with self._lock:
            return bytes(self._buf["stdout"] or self._buf["pty"]).decode("utf-8", "replace")

    @property
    def stderr(self):
        with self._lock:
            return bytes(self._buf["stderr"]).decode("utf-8", "replace")

    @property
    def offsets(self):
        """{"stdout": N, "stderr": M}: the byte offset of each stream up to
        which output was received (a pty's output counts as stdout). Pass
        them to commands.connect(pid, from_stdout=, from_stderr=) to go on
        from there after disconnect(), in this process or another."""
        with self._lock:
            return {"stdout": max(self._next["stdout"], self._next["pty"]), "stderr": self._next["stderr"]}

    @property
    def exit_code(self):
        """None while the process runs."""
        return None if self._exit is None else self._result().exit_code

    def _result(self):
        e = self._exit or {}
        code, sig, reason = e.get("exit_code"), e.get("signal"), e.get("reason") or "exit"
        error = None
        if sig is not None:
            error = "killed by signal %d" % sig
            if code is None:
                code = 128 + sig
        if reason == "timeout":
            error = "command timed out" + (" (signal %d)" % sig if sig else "")
        elif reason == "oom":
            error = "out of memory: the kernel killed the command"
            if e.get("memory_limit_mb"):
                error += " (limit %d MiB)" % e["memory_limit_mb"]
        if code is None:
            code = -1
        return CommandResult(stdout=self.stdout, stderr=self.stderr, exit_code=code, error=error, signal=sig,
                             reason=reason, memory_limit_mb=e.get("memory_limit_mb"))

    def wait(self, on_stdout=None, on_stderr=None, on_pty=None, timeout=None):
        """Wait for the process to end; return its CommandResult, or raise
        CommandExitException if it exited non-zero or was killed. Callbacks
        given here get the output that arrives from now on."""
        if on_stdout:
            self._cb["stdout"] = on_stdout
        if on_stderr:
            self._cb["stderr"] = on_stderr
        if on_pty or on_stdout:
            self._cb["pty"] = on_pty or on_stdout
        if self._thread is None:
            self._pump_safe()
        elif not self._done.wait(timeout):
            raise TimeoutError("process %d still running after %ss" % (self.pid, timeout))
        if self._error is not None:
            raise self._error
        if self._exit is None:
            raise SandboxError("process %d: output stream stopped before its exit (disconnected)" % self.pid)
        r = self._result()
        if r.reason == "timeout":
            exc = TimeoutError("process %d: %s" % (self.pid, r.error))
            exc.result = r
            raise exc
        if r.exit_code != 0:
            raise CommandExitException(r)
        return r

    def kill(self, signal="SIGKILL"):
        """Send a signal (default SIGKILL). False if the process is gone."""
        try:
            self._api.request("POST", self._path("/signal"), json_body={"signal": signal})
            return True
        except NotFoundError:
            return False
        except SandboxError as e:
            if e.status == 409:
                return False
            raise

    def send_stdin(self, data):
        if isinstance(data, str):
            data = data.encode()
        self._api.request("POST", self._path("/stdin"), body=bytes(data))

    def close_stdin(self):
        self._api.request("POST", self._path("/stdin/close"))

    def resize(self, rows, cols):
        self._api.request("POST", self._path("/resize"), json_body={"rows": rows, "cols": cols})

    def disconnect(self):
        """Stop reading the output (the process keeps running)."""
        self._stop = True
        c = self._conn
        if c is not None:
            try:
                c.sock and c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Commands:
    def __init__(self, api, sandbox_id):
        self._api = api
        self._sid = sandbox_id

    def _start(self, cmd, envs, cwd, user, timeout, stdin, pty=None, tag=None):
        body = {"cmd": cmd}
        if envs:
            body["env"] = dict(envs)
        if cwd:
            body["cwd"] = cwd
        if user:
            body["user"] = user
        if timeout:
            body["timeout"] = timeout
        if stdin:
            body["stdin"] = True
        if pty:
            body["pty"] = pty
        if tag:
            body["tag"] = tag
        return self._api.request("POST", "/sandboxes/%s/processes" % self._sid, json_body=body)["pid"]

    def run(self, cmd, background=False, on_stdout=None, on_stderr=None, envs=None, cwd=None, user=None,
            timeout=None, stdin=False, tag=None):
        """Run cmd (a shell string, or an argv list) in the sandbox.
        Foreground: wait and return a CommandResult; a non-zero exit raises
        CommandExitException. background=True: return a CommandHandle.
        timeout (seconds) makes the server kill the command after that long."""
        pid = self._start(cmd, envs, cwd, user, timeout, stdin, tag=tag)
        if background:
            return CommandHandle(self._api, self._sid, pid, on_stdout, on_stderr)
        h = CommandHandle(self._api, self._sid, pid, on_stdout, on_stderr, start=False)
        return h.wait()

    def connect(self, pid, on_stdout=None, on_stderr=None, from_stdout=0, from_stderr=0):
        """A handle on a process that is already running (or has exited):
        its output from byte from_stdout / from_stderr of each stream (0,
        the default: all the ring buffer still holds). A handle's
        .offsets, saved before disconnect(), continue where it stopped."""
        _offset(from_stdout), _offset(from_stderr)
        self.get(pid)  # NotFoundError if there is none
        return CommandHandle(self._api, self._sid, pid, on_stdout, on_stderr, from_stdout=from_stdout,
                             from_stderr=from_stderr)

    def read_output(self, pid, stream=None, offset=0):
        """The output of one stream ("stdout", "stderr" or "pty"; default
        the process's own: pty if it has one, else stdout) from byte
        `offset` up to its current end, without waiting. Returns
        (bytes, next_offset, gap): next_offset is where to read on from;
        gap is (from, to) when bytes before `offset`'s data were evicted
        from the server's ring buffer, else None."""
        conn, resp = self._api.open("GET", "/sandboxes/%s/processes/%d/output" % (self._sid, int(pid)),
                                    query=[("stream", stream), ("from", str(_offset(offset)))])
        try:
            data = resp.read()
        finally:
            conn.close()
        first = int(resp.getheader("X-Paddock-Offset") or offset)
        g = resp.getheader("X-Paddock-Gap")
        gap = tuple(int(x) for x in g.split("-", 1)) if g else None
        return data, first + len(data), gap

    def get(self, pid):
        return ProcessInfo.from_json(self._api.request("GET", "/sandboxes/%s/processes/%d" % (self._sid, pid)))

    def list(self):
        """Every process started through the API (running and exited)."""
        j = self._api.request("GET", "/sandboxes/%s/processes" % self._sid)
        return [ProcessInfo.from_json(p) for p in j.get("processes", [])]

    def kill(self, pid, signal="SIGKILL"):
        """True if the signal was sent, False if there is no such process."""
        return CommandHandle(self._api, self._sid, pid, start=False).kill(signal)

    def send_stdin(self, pid, data):
        CommandHandle(self._api, self._sid, pid, start=False).send_stdin(data)

    def close_stdin(self, pid):
        CommandHandle(self._api, self._sid, pid, start=False).close_stdin()


def _offset(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        from .exceptions import InvalidArgumentError
        raise InvalidArgumentError("an output offset is an integer >= 0, not %r" % (v,))
    return v
