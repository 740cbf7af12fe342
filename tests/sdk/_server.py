"""One `paddock serve` for a test module: a free 127.0.0.1 port, its own
state dir and runtime dir, --pool 1. Standard library only."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PADDOCK = os.path.abspath(os.environ.get("PADDOCK_BIN") or os.path.join(REPO, "build/src/paddock"))
AGENT = os.path.abspath(os.environ.get("PADDOCK_AGENT") or os.path.join(REPO, "build/src/agent/paddock-agent"))
SDK = os.path.join(REPO, "sdk", "python")
if SDK not in sys.path:
    sys.path.insert(0, SDK)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="pd-sdk-", dir="/tmp")
        self.state = os.path.join(self.tmp, "state")
        self.runtime = os.path.join(self.tmp, "run")
        os.makedirs(self.state)
        os.makedirs(self.runtime)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.env = dict(os.environ, PADDOCK_AGENT=AGENT, PADDOCK_RUNTIME_DIR=self.runtime)
        self.env.pop("PADDOCK_STATE_DIR", None)
        self.env.pop("PADDOCK_URL", None)
        self.env.pop("PADDOCK_API_KEY", None)
        self.log = open(os.path.join(self.tmp, "serve.log"), "wb")
        self.proc = subprocess.Popen([PADDOCK, "serve", "--listen", "127.0.0.1:%d" % self.port, "--state-dir",
                                      self.state, "--pool", "1"], env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, "paddock serve exited: %s" % self.logtext()
            try:
                with urllib.request.urlopen(self.url + "/api/v1/health", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read())["status"] == "ok":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "paddock serve did not answer /health: %s" % self.logtext()
            time.sleep(0.05)
        with open(os.path.join(self.state, "api-key")) as f:
            self.key = f.read().strip()
        assert self.key

    def logtext(self):
        self.log.flush()
        with open(os.path.join(self.tmp, "serve.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        gc = subprocess.run([PADDOCK, "gc", "--state-dir", self.state], env=self.env, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return gc
