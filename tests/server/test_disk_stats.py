"""Disk figures that agree: the writable layer's real use in the native
metrics, `paddock stats` and the E2B metrics; one effective limit in the
create answer, the metrics and the E2B info; a note (API) and a `note:`
line (CLI) when the requested disk_mb was lowered.

    /usr/bin/python3 -m pytest -q tests/server/test_disk_stats.py

Needs root (the container tier) and a build."""
import os

import pytest

from pdtest.server import server_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="paddock serve's container tier needs root")

srv = server_fixture("--pool", "0", prefix="pd-diskstats-")
MiB = 1 << 20


def _metrics(srv, sid):
    return srv.api("GET", "/sandboxes/%s/metrics" % sid, expect=200)[1]


def test_disk_used_is_measured_and_limit_is_the_effective_one(srv):
    sb = srv.create({"memory_mb": 512, "disk_mb": 1024})
    sid = sb["id"]
    try:
        # 512 MiB of memory: the tmpfs layer is capped at 512 - 64
        assert sb["disk_mb"] == 448, sb
        assert any("disk_mb 1024 lowered to 448" in n and "memory_mb 512" in n for n in sb["notes"]), sb
        assert srv.api("GET", "/sandboxes/" + sid, expect=200)[1]["disk_mb"] == 448
        before = _metrics(srv, sid)
        assert before["disk_limit_bytes"] == 448 * MiB, before
        r = srv.exec(sid, ["sh", "-c", "head -c 20971520 /dev/zero > /home/user/f && sync"])
        assert r["exit_code"] == 0, r
        after = _metrics(srv, sid)
        assert after["disk_used_bytes"] >= before["disk_used_bytes"] + 20 * MiB, (before, after)
        assert after["disk_used_bytes"] < after["disk_limit_bytes"], after

        out = srv.cli("stats", sid, remote=True)
        text = out.stdout.decode() if isinstance(out.stdout, bytes) else out.stdout
        assert out.returncode == 0, out
        disk = [l for l in text.splitlines() if l.startswith("disk")]
        assert disk and "448" in disk[0] and not disk[0].split()[1].startswith("0"), text

        st, e2b = srv.json("GET", "/sandboxes/%s/metrics" % sid, expect=200)
        assert e2b and e2b[-1]["diskUsed"] >= 20 * MiB and e2b[-1]["diskTotal"] == 448 * MiB, e2b
        st, info = srv.json("GET", "/sandboxes/%s" % sid, expect=200)
        assert info["diskSizeMB"] == 448, info

        r = srv.exec(sid, ["rm", "/home/user/f"])
        assert _metrics(srv, sid)["disk_used_bytes"] < after["disk_used_bytes"] - 10 * MiB
    finally:
        srv.delete(sid)


def test_no_note_when_the_limit_is_granted(srv):
    sb = srv.create({"memory_mb": 512, "disk_mb": 100})
    try:
        assert sb["disk_mb"] == 100 and sb["notes"] == [], sb
        assert _metrics(srv, sb["id"])["disk_limit_bytes"] == 100 * MiB
    finally:
        srv.delete(sb["id"])


def test_cli_create_says_the_limit_was_lowered(srv):
    r = srv.cli("create", "--memory", "256M", "--disk", "1G", remote=True)
    out = r.stdout.decode() if isinstance(r.stdout, bytes) else r.stdout
    err = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
    assert r.returncode == 0, err
    sid = out.strip()
    try:
        assert len(out.splitlines()) == 1, out          # stdout: the id alone
        assert "note: disk_mb 1024 lowered to 192:" in err, err
    finally:
        srv.delete(sid)


def test_disk_used_measured_after_adoption(srv):
    sid = srv.create({"disk_mb": 64})["id"]
    try:
        assert srv.exec(sid, ["sh", "-c", "head -c 8388608 /dev/zero > /home/user/f"])["exit_code"] == 0
        srv.stop()
        srv.start()        # the new server adopts it
        m = _metrics(srv, sid)
        assert m["disk_used_bytes"] >= 8 * MiB and m["disk_limit_bytes"] == 64 * MiB, m
    finally:
        srv.delete(sid)


def test_disk_used_on_the_supervised_tier(srv):
    sid = srv.create({"isolation": "supervised", "disk_mb": 64})["id"]
    try:
        assert srv.exec(sid, ["sh", "-c", "head -c 4194304 /dev/zero > /home/user/f"])["exit_code"] == 0
        m = _metrics(srv, sid)
        assert m["disk_used_bytes"] >= 4 * 1048576 and m["disk_limit_bytes"] == 64 * MiB, m
    finally:
        srv.delete(sid)
