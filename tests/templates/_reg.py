"""The local registry of the templates suite: Debian's docker-registry, run
by us on a free loopback port with our own config file (never the packaged
service, which listens on :5000 with htpasswd)."""
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(url, proc, deadline_s=30):
    """Until url answers (the registry is up) or its process died."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("docker-registry exited: %s" % proc.stderr.read())
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            # connection refused: it has not bound yet; block on its
            # output briefly instead of spinning
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
    raise RuntimeError("docker-registry did not answer at %s" % url)


class Registry:
    def __init__(self, root, htpasswd=None):
        if not shutil.which("docker-registry"):
            pytest.skip("docker-registry (Debian package docker-registry) is not installed")
        self.root = root
        self.port = free_port()
        self.host = "127.0.0.1:%d" % self.port
        cfg = os.path.join(root, "config.yml")
        auth = ""
        if htpasswd:
            auth = "auth:\n  htpasswd:\n    realm: test\n    path: %s\n" % htpasswd
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\n"
                    "  delete:\n    enabled: true\nhttp:\n  addr: %s\n%s" % (root, self.host, auth))
        self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_http("http://%s/v2/" % self.host if not htpasswd else "http://%s/" % self.host, self.proc)
        except Exception:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


