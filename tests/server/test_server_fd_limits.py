"""A server holding many fds still answers new clients (density runs saw
GET /api/v1/health closed unanswered after 300-1000 creates while
keep-alive connections opened earlier kept working).

~8 fds per sandbox put every new connection's fd past FD_SETSIZE (1024):
libmicrohttpd's per-connection select() closes such a connection at once
(now poll(), 575df2c), and under systemd's soft RLIMIT_NOFILE of 1024 the
accept itself fails (serve now raises its soft limit to the hard one).
Proven here at small N: the server starts with fds 100..1100 already
taken and a soft limit of 1024, then idle keep-alive clients fill the
low fds, so the next connection gets an fd above 1100."""
import http.client
import json
import os
import resource

import pytest

from pdtest.server import Server, need_build

HELD_FROM, HELD_TO = 100, 1100


def lowest_free_fd(pid):
    used = {int(x) for x in os.listdir("/proc/%d/fd" % pid)}
    n = 0
    while n in used:
        n += 1
    return n


def soft_nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


@pytest.fixture
def crowded():
    """A server started with fds HELD_FROM..HELD_TO open and a soft
    RLIMIT_NOFILE of 1024 (as systemd starts services)."""
    need_build()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < HELD_TO + 200:
        pytest.skip("hard RLIMIT_NOFILE %d: too low to hold fds past %d" % (hard, HELD_TO))
    if soft < HELD_TO + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (HELD_TO + 200, hard))
    held = []
    s = Server(None, "--pool", "0", "--net-uplink", "none", prefix="pd-fds-")
    try:
        null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        held.append(null)
        for fd in range(HELD_FROM, HELD_TO + 1):
            held.append(os.dup2(null, fd, inheritable=False))
        s.popen_kw = {"pass_fds": held[1:],
                      "preexec_fn": lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))}
        s.start()
        yield s
    finally:
        for fd in held:
            os.close(fd)
        s.finish()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def get(conn, path, key=None):
    conn.request("GET", path, headers={"Authorization": "Bearer " + key} if key else {})
    r = conn.getresponse()
    return r.status, r.read()


def test_new_clients_answered_past_fd_setsize(crowded):
    pid = crowded.proc.pid
    # the server raised its own soft limit (sandboxes get 1024 back: below)
    assert soft_nofile(pid) > HELD_TO, open("/proc/%d/limits" % pid).read()
    idle = []
    try:
        # keep-alive clients, each answered once, fill every fd below HELD_FROM
        while lowest_free_fd(pid) < HELD_TO:
            assert len(idle) < HELD_FROM, "the server's low fds did not fill: %s" % sorted(
                int(x) for x in os.listdir("/proc/%d/fd" % pid))[:HELD_FROM]
            c = http.client.HTTPConnection("127.0.0.1", crowded.port, timeout=60)
            assert get(c, "/api/v1/health")[0] == 200
            idle.append(c)
        # the next connection's fd is past HELD_TO (> FD_SETSIZE)
        c = http.client.HTTPConnection("127.0.0.1", crowded.port, timeout=60)
        try:
            st, body = get(c, "/api/v1/health")
        except (http.client.HTTPException, OSError) as e:
            raise AssertionError("/api/v1/health with fds past %d taken: %s: %s\n%s"
                                 % (HELD_TO, type(e).__name__, e, crowded.logtext())) from e
        assert st == 200, body
        # and a sandbox made now works, with the limit the server was given
        st, body = get(c, "/api/v1/health")
        assert st == 200
        c.request("POST", "/api/v1/sandboxes", body=b"{}", headers={
            "Authorization": "Bearer " + crowded.key, "Content-Type": "application/json"})
        r = c.getresponse()
        created = r.read()
        assert r.status == 201, created
        sid = json.loads(created)["id"]
        try:
            j = crowded.exec(sid, ["sh", "-c", "ulimit -n"])
            assert j["stdout"].strip() == "1024", j
        finally:
            crowded.delete(sid)
        c.close()
    finally:
        for c in idle:
            c.close()
