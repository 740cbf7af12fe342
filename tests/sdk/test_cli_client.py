"""The CLI's client verbs (create ls exec logs cp kill stats audit pause
resume timeout) against a real `paddock serve`.

    /usr/bin/python3 -m pytest -q tests/sdk/test_cli_client.py

Needs root (the container tier) and a build. The verbs run through the lean
`paddock` binary, which execs paddock-full for them."""
import hashlib
import json
import os
import re
import subprocess
import time

import pytest

from pdtest import PADDOCK_BIN as PADDOCK
from pdtest.server import server_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")


server = server_fixture("--pool", "1", prefix="pd-sdk-")


def pd(server, *args, input=None, key=True, env=None, timeout=60, text=True):
    e = dict(server.env, PADDOCK_URL=server.url)
    if key:
        e["PADDOCK_API_KEY"] = server.key
    if env:
        e.update(env)
    return subprocess.run([PADDOCK] + list(args), input=input, capture_output=True, env=e, timeout=timeout,
                          text=text, stdin=None if input is not None else subprocess.DEVNULL)


@pytest.fixture(scope="module")
def sid(server):
    r = pd(server, "create", "--metadata", "suite=cli", "-e", "FOO=bar")
    assert r.returncode == 0, r.stderr
    i = r.stdout.strip()
    assert re.fullmatch(r"[a-z0-9]{20}", i)
    yield i
    pd(server, "kill", i)


def test_create_json_and_ls(server, sid):
    r = pd(server, "create", "--json", "--memory", "256M", "--cpus", "0.5", "--timeout", "2m",
           "--metadata", "who=json")
    assert r.returncode == 0, r.stderr
    o = json.loads(r.stdout)
    assert o["memory_mb"] == 256 and o["cpus"] == 0.5 and o["timeout"] == 120 and o["metadata"] == {"who": "json"}
    r = pd(server, "ls")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ID", "TEMPLATE", "STATE", "CREATED", "EXPIRES"]
    rows = {l.split()[0]: l.split() for l in lines[1:]}
    assert rows[sid][1:3] == ["base", "running"] and o["id"] in rows
    r = pd(server, "ls", "--metadata", "who=json", "--json")
    assert [s["id"] for s in json.loads(r.stdout)] == [o["id"]]
    r = pd(server, "ls", "--metadata", "who=nobody")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1
    assert pd(server, "kill", o["id"]).returncode == 0


def test_exec_status_streams_stdin(server, sid):
    r = pd(server, "exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n")
    r = pd(server, "exec", sid, "--", "cat", input="from stdin\n")
    assert (r.returncode, r.stdout) == (0, "from stdin\n")
    r = pd(server, "exec", sid, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15
    r = pd(server, "exec", "-e", "A=1", "-w", "/tmp", "-u", "root", sid, "--", "sh", "-c", 'echo $A $FOO $(pwd) $(id -u)')
    assert (r.returncode, r.stdout) == (0, "1 bar /tmp 0\n")
    r = pd(server, "exec", sid, "--", "no-such-command-xyz")
    assert r.returncode == 1 and r.stderr.startswith("paddock: ") and "not found" in r.stderr
    r = pd(server, "exec", "--timeout", "1", sid, "--", "sleep", "30")
    assert r.returncode == 124


def test_exec_big_output(server, sid):
    r = pd(server, "exec", sid, "--", "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x", text=False)
    assert r.returncode == 0 and r.stdout == b"x" * 3000000


def test_cp_both_ways(server, sid, tmp_path):
    data = os.urandom(3 << 20)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    r = pd(server, "cp", str(src), "%s:/tmp/in.bin" % sid)
    assert r.returncode == 0, r.stderr
    r = pd(server, "exec", sid, "--", "sha256sum", "/tmp/in.bin")
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    out = tmp_path / "out.bin"
    r = pd(server, "cp", "%s:/tmp/in.bin" % sid, str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == data
    # into directories, and through stdin/stdout
    r = pd(server, "cp", str(src), "%s:/tmp/" % sid)
    assert r.returncode == 0, r.stderr
    r = pd(server, "cp", "%s:/tmp/in.bin" % sid, str(tmp_path))
    assert r.returncode == 0 and (tmp_path / "in.bin").read_bytes() == data
    r = pd(server, "cp", "-", "%s:notes.txt" % sid, input="typed\n")
    assert r.returncode == 0, r.stderr
    r = pd(server, "cp", "%s:/home/user/notes.txt" % sid, "-")
    assert (r.returncode, r.stdout) == (0, "typed\n")
    # a missing source: exit 1, the server's message, DST untouched
    out.write_bytes(b"keep")
    r = pd(server, "cp", "%s:/tmp/missing" % sid, str(out))
    assert r.returncode == 1 and r.stderr.startswith("paddock: ") and "No such file" in r.stderr
    assert out.read_bytes() == b"keep"
    assert [p.name for p in tmp_path.iterdir() if "paddock-" in p.name] == []
    r = pd(server, "cp", str(src), str(out))
    assert r.returncode == 2


def test_logs(server, sid):
    r = pd(server, "exec", "--detach", sid, "--", "sh", "-c", "echo one; echo two >&2; sleep 1; echo three")
    assert r.returncode == 0, r.stderr
    pid = r.stdout.strip()
    r = pd(server, "logs", "-f", sid, pid)
    assert (r.returncode, r.stdout, r.stderr) == (0, "one\nthree\n", "two\n")
    r = pd(server, "logs", "--from", "4", sid, pid)
    assert r.stdout == "three\n"
    r = pd(server, "logs", "--stream", "stderr", sid, pid)
    assert r.stdout == "two\n"
    r = pd(server, "logs", sid, "999999")
    assert r.returncode == 1 and "no process" in r.stderr


def test_stats_audit(server, sid):
    r = pd(server, "stats", sid)
    assert r.returncode == 0 and re.search(r"^memory .* / 512\.0 MiB", r.stdout, re.M), r.stdout
    r = pd(server, "stats", "--json", sid)
    m = json.loads(r.stdout)
    assert m["pids_limit"] == 512 and m["memory_limit_bytes"] == 512 << 20
    pd(server, "exec", sid, "--", "true")
    r = pd(server, "audit", sid)
    assert r.returncode == 0
    events = [json.loads(l) for l in r.stdout.splitlines()]
    assert events[0]["event"] == "sandbox.create"
    assert any(e["event"] == "process.start" and e["argv"] == ["true"] for e in events)


def test_audit_follow_ends_with_sandbox(server):
    i = pd(server, "create").stdout.strip()
    p = subprocess.Popen([PADDOCK, "audit", "-f", i], env=dict(server.env, PADDOCK_URL=server.url,
                         PADDOCK_API_KEY=server.key), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert pd(server, "kill", i).returncode == 0
    try:
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert "sandbox.create" in out and "sandbox.delete" in out


def test_pause_resume_timeout(server, sid):
    r = pd(server, "pause", sid)
    assert (r.returncode, r.stdout) == (0, "%s paused\n" % sid)
    assert sid in pd(server, "ls", "-q", "--state", "paused").stdout
    r = pd(server, "exec", sid, "--", "true")
    assert r.returncode == 1 and "paused" in r.stderr
    r = pd(server, "resume", sid)
    assert (r.returncode, r.stdout) == (0, "%s running\n" % sid)
    r = pd(server, "timeout", sid, "10m")
    assert r.returncode == 0 and "expires" in r.stdout
    exp = json.loads(pd(server, "ls", "--json", "--metadata", "suite=cli").stdout)[0]["expires_at"]
    assert exp > time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 500))


def test_kill(server):
    i = pd(server, "create").stdout.strip()
    r = pd(server, "kill", i)
    assert (r.returncode, r.stdout) == (0, i + "\n")
    r = pd(server, "kill", i)
    assert r.returncode == 1 and r.stderr == "paddock: no sandbox '%s'\n" % i


def test_errors_and_exit_codes(server, sid):
    r = pd(server, "ls", "--key", "pdk_wrong")
    assert r.returncode == 1 and r.stderr.startswith("paddock: ") and "API key" in r.stderr
    r = pd(server, "ls", key=False, env={"PADDOCK_STATE_DIR": "/nonexistent"})
    assert r.returncode == 1 and "API key" in r.stderr
    r = pd(server, "ls", "--url", "http://127.0.0.1:1")
    assert r.returncode == 3 and r.stderr.startswith("paddock: cannot reach")
    r = pd(server, "exec", "--url", "http://127.0.0.1:1", sid, "--", "true")
    assert r.returncode == 3
    r = pd(server, "stats", "a" * 20)
    assert r.returncode == 1 and "no sandbox" in r.stderr
    r = pd(server, "create", "--template", "no-such")
    assert r.returncode == 1 and "unknown template" in r.stderr
    for args in (["stats"], ["exec", sid], ["kill", "not-an-id"], ["create", "--bogus"], ["timeout", sid, "xx"]):
        r = pd(server, *args)
        assert r.returncode == 2 and r.stderr.startswith("paddock: "), (args, r.stderr)
    r = pd(server, "exec", "--help")
    assert r.returncode == 0 and "usage: paddock exec" in r.stdout


def test_key_from_state_dir(server):
    # no --key and no PADDOCK_API_KEY: the state dir's api-key file, said on stderr
    r = pd(server, "ls", key=False, env={"PADDOCK_STATE_DIR": server.state})
    assert r.returncode == 0 and "using the key in" in r.stderr
