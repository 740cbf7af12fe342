"""Stopping `paddock serve` while the microvm base template is being built
(its first microvm create) ends the builder and everything it started
(paddock-vm-mkroot's cp, ldd, ...; mkfs.erofs): before, it kept writing
into the state dir after the server was gone."""
import json
import os
import threading
import time

from pdtest.server import Server, tmproot  # noqa: F401 (fixture)


def builders(state):
    """pids whose command line is a builder working for this state dir."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if state.encode() in cmd and (b"paddock-vm-mkroot" in cmd or b"mkfs.erofs" in cmd):
            out.append(int(p))
    return out


def test_stop_ends_the_template_builder(tmproot):
    state = os.path.join(tmproot, "builder-stop")
    srv = Server(state, "--pool", "0").start()
    answer = {}

    def create():
        try:
            answer["r"] = srv.request("POST", "/api/v1/sandboxes", {"isolation": "microvm", "memory_mb": 256},
                                      timeout=900)
        except OSError as e:
            answer["r"] = e
    t = threading.Thread(target=create, daemon=True)
    try:
        t.start()
        deadline = time.monotonic() + 600
        while not builders(srv.state):
            assert t.is_alive(), "the create ended before a builder was seen: %r %s" % (
                answer.get("r"), srv.logtext())
            assert time.monotonic() < deadline, "no builder within 600 s: " + srv.logtext()
            time.sleep(0.05)    # nothing to wait on but /proc
        srv.stop()
        t.join(60)
        # SIGKILLed before serve exited; wait for the kernel to finish them
        deadline = time.monotonic() + 30
        while builders(srv.state) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert builders(srv.state) == [], "builders outlived paddock serve: %s" % builders(srv.state)
        r = answer.get("r")
        if isinstance(r, tuple):        # answered before the server went: not a success
            assert r[0] != 201, json.loads(r[2])
    finally:
        for pid in builders(srv.state):     # the old behaviour: do not leave them running
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, 9)
                except OSError:
                    pass
        srv.finish()
